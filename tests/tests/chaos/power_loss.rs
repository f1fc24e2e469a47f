//! Power loss through the broker: the broker's store records what each sync
//! made durable (`STORE_SYNC_LOG`), producers send while the broker is
//! killed with SIGKILL, everything no sync covered is dropped from its
//! files (`store::cut_power`, every other cycle keeping a random half of the
//! unsynced pages as a kernel's writeback might), and the broker starts
//! again on what is left.

use super::{
    senders::{holds, read_queues, Ack, Senders},
    *,
};

/// Sends from 8 tasks for `run_for`, then kills the broker; the acks, the
/// instant of the kill and the next unused index.
async fn send_then_kill(
    broker: &mut OwnBroker,
    topic: &str,
    first_index: u64,
    run_for: Duration,
) -> (Vec<Ack>, Instant, u64) {
    let senders = Senders::start(&broker.namesrv, topic, first_index, 8).await;
    tokio::time::sleep(run_for).await;
    broker.kill().unwrap();
    let killed = Instant::now();
    let sent = senders.stop().await;
    (sent.acks, killed, sent.next_index)
}

/// Power cuts under `flush`; returns the case's figure and whether it passed.
async fn power_cut_cycles(
    env: &E2eEnv,
    flush: &str,
    cycles: usize,
    run_for: Duration,
) -> (String, bool) {
    let dir = env
        .dir
        .clone()
        .unwrap()
        .join(unique(&format!("power-{flush}-")));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("sync.log");
    let log_text = log.to_str().unwrap().to_owned();
    let queues = 4;
    let mut broker = OwnBroker::start_with_env(
        env,
        dir.clone(),
        &[
            &format!("flushDiskType={flush}"),
            "mappedFileSizeCommitLog=16777216",
        ],
        &[(store::SYNC_LOG_ENV, &log_text)],
    )
    .unwrap();
    let topic = unique("Power");
    let client = RemotingClient::new(ClientOptions::default());
    create_topic(&client, &broker.addr, &topic, queues as i32).await;
    client.close_all().await;
    let (mut acked, mut lost, mut bad_tail, mut worst_window) = (0, 0, 0, Duration::ZERO);
    let mut survivors: Vec<Ack> = Vec::new();
    let mut next_index = 0;
    for cycle in 0..cycles {
        let (acks, killed, next) = send_then_kill(&mut broker, &topic, next_index, run_for).await;
        next_index = next;
        let torn = cycle % 2 == 1;
        store::cut_power(&log, &mut || torn && fastrand::bool()).unwrap();
        std::fs::remove_file(&log).unwrap();
        broker.restart().unwrap();
        let held = read_queues(&broker.namesrv, &topic, queues).await;
        let present = |a: &Ack| holds(&held, a);
        // Earlier cycles' survivors must still be there.
        let gone_since = survivors.iter().filter(|a| !present(a)).count();
        assert_eq!(
            gone_since, 0,
            "messages that survived an earlier power cut are gone"
        );
        for a in &acks {
            if present(a) {
                survivors.push(a.clone());
                continue;
            }
            lost += 1;
            worst_window = worst_window.max(killed.duration_since(a.at));
            // A lost message's queue keeps none of the acknowledged
            // messages after it: only a tail of each queue goes.
            bad_tail += acks
                .iter()
                .filter(|b| {
                    b.queue_id == a.queue_id && b.queue_offset > a.queue_offset && present(b)
                })
                .count();
        }
        acked += acks.len();
        println!(
            "{flush} cycle {cycle} (torn {torn}): {} acknowledged, {lost} lost so far",
            acks.len()
        );
    }
    let bound = Duration::from_millis(10_000 + 500);
    let window = if lost == 0 {
        String::new()
    } else {
        format!(
            " (acknowledged at most {:.0} ms before the cut)",
            worst_window.as_secs_f64() * 1000.0
        )
    };
    let figure = format!(
        "{flush}: {cycles} power cuts, {acked} acknowledged, {lost} lost{window}, \
         {bad_tail} kept after a lost one"
    );
    let pass = bad_tail == 0
        && if flush == "SYNC_FLUSH" {
            lost == 0
        } else {
            worst_window <= bound
        };
    (figure, pass)
}

/// SYNC_FLUSH loses nothing it acknowledged; ASYNC_FLUSH loses only what
/// was acknowledged within `flushCommitLogThoroughInterval` (10 s) plus
/// `flushIntervalCommitLog` (0.5 s) of the cut, only as the tail of each
/// queue; after every cut each queue reads back whole, with no gap and no
/// foreign message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_loss_keeps_what_sync_flush_acknowledged() {
    let Some(env) = chaos_env("power loss") else {
        return;
    };
    let (cycles, run_for) = if env.quick {
        (2, Duration::from_secs(3))
    } else {
        (6, Duration::from_secs(20))
    };
    for flush in ["SYNC_FLUSH", "ASYNC_FLUSH"] {
        let (figure, pass) = power_cut_cycles(&env, flush, cycles, run_for).await;
        println!(
            "chaos: power loss {flush} | {figure} | {}",
            if pass { "PASS" } else { "FAIL" }
        );
        assert!(pass, "{figure}");
    }
}
