//! Fair shares on a real broker process: one topic floods the broker far
//! beyond its capacity while another sends at a tenth of it. The quiet
//! topic loses nothing and its p99 stays within twice its p99 without the
//! flood, measured in the same run; the flood still gets the capacity.
//!
//! The broker's capacity is bounded by a put-lock delay
//! (`faultPutLockDelayMills`) with one send worker, so the store's time,
//! not this machine's speed, sets the figures the assertions compare.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use e2e_tests::{send_request, unique, E2eEnv, OwnBroker};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::ResponseCode;

/// The put-lock delay: the broker's capacity is about 1000 / DELAY_MS sends
/// a second.
const DELAY_MS: u64 = 5;
/// The quiet topic's rate: a tenth of capacity.
const QUIET_PER_SEC: u64 = 1000 / DELAY_MS / 10;
/// Concurrent flooding senders, each sending again as soon as answered.
const FLOODERS: usize = 32;

/// Sends `n` quiet messages at `QUIET_PER_SEC`; returns their latencies
/// (sorted) and the answers that were not `SUCCESS`.
async fn quiet_sends(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    n: usize,
) -> (Vec<Duration>, Vec<String>) {
    let mut tick = tokio::time::interval(Duration::from_millis(1000 / QUIET_PER_SEC));
    let (mut latencies, mut failures) = (Vec::with_capacity(n), Vec::new());
    for i in 0..n {
        tick.tick().await;
        let started = Instant::now();
        let r = client
            .invoke(addr, send_request(topic, i), Duration::from_secs(10))
            .await
            .expect("a quiet send got no answer");
        latencies.push(started.elapsed());
        if r.response_code() != ResponseCode::SUCCESS {
            failures.push(format!(
                "{:?} {}",
                r.response_code(),
                r.remark.unwrap_or_default()
            ));
        }
    }
    latencies.sort();
    (latencies, failures)
}

fn p99(sorted: &[Duration]) -> Duration {
    sorted[(sorted.len() * 99 / 100).min(sorted.len() - 1)]
}

/// Target: the quiet topic's p99 within 2x of its unloaded p99, nothing
/// lost; the flooding topic gets the rest of the capacity.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_topic_does_not_slow_a_quiet_one() {
    let Some(env) = E2eEnv::from_env("fair shares") else {
        return;
    };
    let delay = format!("faultPutLockDelayMills={DELAY_MS}");
    let broker = OwnBroker::start(
        &env,
        "shares",
        &[delay.as_str(), "sendMessageThreadPoolNums=1"],
    )
    .unwrap();
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let (quiet, flood) = (unique("Quiet"), unique("Flood"));
    let n = if env.quick { 60 } else { 200 };
    // Warm up: both topics exist and the connection is open.
    quiet_sends(&client, &broker.addr, &quiet, 5).await;
    quiet_sends(&client, &broker.addr, &flood, 5).await;
    let (alone, failed) = quiet_sends(&client, &broker.addr, &quiet, n).await;
    assert!(failed.is_empty(), "{failed:?}");

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, busy) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let flooders: Vec<_> = (0..FLOODERS)
        .map(|_| {
            let (client, addr, topic) = (Arc::clone(&client), broker.addr.clone(), flood.clone());
            let (stop, ok, busy) = (Arc::clone(&stop), Arc::clone(&ok), Arc::clone(&busy));
            tokio::spawn(async move {
                // Bounded: at most this many sends, far more than the run needs.
                for i in 0..1_000_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = client
                        .invoke(&addr, send_request(&topic, i), Duration::from_secs(10))
                        .await
                        .expect("a flood send got no answer");
                    let counter = if r.response_code() == ResponseCode::SUCCESS {
                        &ok
                    } else {
                        &busy
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // Let the flood reach its steady state (shedding) before measuring.
    let started = Instant::now();
    while busy.load(Ordering::Relaxed) < 1000 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the flood was never refused"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let ok_before = ok.load(Ordering::Relaxed);
    let measured = Instant::now();
    let (loaded, failed) = quiet_sends(&client, &broker.addr, &quiet, n).await;
    let flood_rate =
        (ok.load(Ordering::Relaxed) - ok_before) as f64 / measured.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for f in flooders {
        f.await.unwrap();
    }
    let ratio = p99(&loaded).as_secs_f64() / p99(&alone).as_secs_f64();
    println!(
        "fair shares: quiet p99 alone {:?}, with the flood {:?} ({ratio:.2}x); flood {flood_rate:.0}/s \
         accepted ({:.2} of the {} /s capacity), {} refused",
        p99(&alone),
        p99(&loaded),
        flood_rate * DELAY_MS as f64 / 1000.0,
        1000 / DELAY_MS,
        busy.load(Ordering::Relaxed)
    );
    assert!(
        failed.is_empty(),
        "quiet sends lost to the flood: {failed:?}"
    );
    assert!(ratio <= 2.0, "quiet p99 {ratio:.2}x its unloaded p99");
    // The flood gets the rest: more than half the capacity (the quiet
    // topic's tenth and the machine's noise take the remainder).
    assert!(
        flood_rate * DELAY_MS as f64 / 1000.0 > 0.5,
        "{flood_rate}/s"
    );
    client.close_all().await;
}
