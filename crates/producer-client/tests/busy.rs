//! `SYSTEM_BUSY` under each busy policy, with a fake broker that always
//! answers busy registered next to (or instead of) a real one: surfaced at
//! once under `Never`, moved to the other broker under `RetryWithBackoff`,
//! and capped by the retry budget when busy answers never stop.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{bounded, config, Behaviour, FakeBroker, TestBroker};
use producer_client::{
    BusyPolicy, Message, Producer, ProducerConfig, ProducerError, RETRY_BUDGET_CAP_TOKENS,
};
use remoting_protocol::ResponseCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_policy_never_a_busy_answer_surfaces_at_once() {
    bounded(30, async {
        let ns = TestBroker::start(&[]).await;
        let busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: Some(50),
            },
            ns.namesrv(),
            "broker-busy",
            &["Busy"],
        )
        .await;
        let producer = Producer::start(ProducerConfig {
            busy_policy: BusyPolicy::Never,
            ..config(ns.namesrv())
        })
        .await
        .unwrap();
        match producer.send(Message::new("Busy", "x")).await {
            Err(ProducerError::Broker {
                addr,
                code,
                remark,
                retry_after_ms,
            }) => {
                assert_eq!(code, ResponseCode::SYSTEM_BUSY);
                assert!(remark.starts_with("[TIMEOUT_CLEAN_QUEUE]"), "{remark}");
                assert_eq!(addr, busy.addr);
                assert_eq!(retry_after_ms, Some(50));
            }
            other => panic!("expected a busy answer, got {other:?}"),
        }
        assert_eq!(busy.requests(), 1, "no retry");
        let stats = producer.stats();
        assert_eq!((stats.failed_busy, stats.retries), (1, 0));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_retry_and_backoff_every_send_lands_on_the_broker_that_is_not_busy() {
    bounded(30, async {
        let healthy = TestBroker::start(&[("brokerName", "broker-b")]).await;
        let busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: Some(2),
            },
            healthy.namesrv(),
            "broker-a",
            &["Spread"],
        )
        .await;
        healthy.create_topic("Spread").await;
        common::wait_for_route(healthy.namesrv(), "Spread", 2).await;

        let producer = Producer::start(config(healthy.namesrv())).await.unwrap();
        let queues = producer.publish_queues("Spread").await.unwrap();
        assert_eq!(queues.len(), 8, "{queues:?}");
        for i in 0..10 {
            let sent = producer
                .send(Message::new("Spread", format!("m{i}")))
                .await
                .unwrap();
            assert_eq!(sent.message_queue.broker_name, "broker-b");
            assert_eq!(sent.broker_addr, healthy.addr);
        }
        let stats = producer.stats();
        assert!(busy.requests() >= 1, "round robin reached the busy broker");
        assert_eq!(stats.busy_retries, busy.requests() as u64);
        assert_eq!((stats.succeeded, stats.failed_busy), (10, 0));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_broker_takes_over_from_one_that_is_really_busy() {
    bounded(30, async {
        // broker-a holds its put lock 300 ms per message and queues one
        // request at most, so a burst is answered busy ([OVERLOAD]).
        let a = TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("sendThreadPoolQueueCapacity", "1"),
            ("faultPutLockDelayMills", "300"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
            ("waitTimeMillsInSendQueue", "60000"),
        ])
        .await;
        let b = TestBroker::start(&[
            ("embeddedNamesrv", "false"),
            ("namesrvAddr", a.namesrv()),
            ("brokerName", "broker-b"),
        ])
        .await;
        a.create_topic("Hot").await;
        b.create_topic("Hot").await;
        common::wait_for_route(a.namesrv(), "Hot", 2).await;
        let producer = Producer::start(ProducerConfig {
            send_msg_timeout: Duration::from_secs(10),
            ..config(a.namesrv())
        })
        .await
        .unwrap();
        let sends = (0..12).map(|i| producer.send(Message::new("Hot", format!("h{i}"))));
        let results = futures_join_all(sends).await;
        for r in &results {
            assert!(r.is_ok(), "{r:?}");
        }
        let on_b = results
            .iter()
            .filter(|r| {
                r.as_ref()
                    .is_ok_and(|s| s.message_queue.broker_name == "broker-b")
            })
            .count();
        assert!(on_b >= 6, "only {on_b} of 12 went to broker-b");
        assert!(producer.stats().busy_retries >= 1);
        producer.shutdown().await;
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_sustained_busy_the_retry_budget_runs_out_and_busy_surfaces() {
    bounded(30, async {
        let ns = TestBroker::start(&[]).await;
        let busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: None,
            },
            ns.namesrv(),
            "broker-busy",
            &["Storm"],
        )
        .await;
        let producer = Producer::start(config(ns.namesrv())).await.unwrap();
        let sends = 30_u64;
        for i in 0..sends {
            let r = producer.send(Message::new("Storm", format!("s{i}"))).await;
            assert!(matches!(r, Err(ref e) if e.is_busy()), "{r:?}");
        }
        let stats = producer.stats();
        assert!(stats.budget_exhausted >= 1, "{stats:?}");
        // Without a budget 30 sends would make 90 requests; the budget
        // allows the burst plus 10 % of the sends.
        let allowed_retries = RETRY_BUDGET_CAP_TOKENS + sends / 10;
        assert!(stats.busy_retries <= allowed_retries, "{stats:?}");
        assert_eq!(busy.requests() as u64, sends + stats.busy_retries);
        assert_eq!(stats.failed_busy, sends);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_hint_longer_than_the_remaining_budget_is_not_waited_out() {
    bounded(30, async {
        let ns = TestBroker::start(&[]).await;
        let busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: Some(60_000),
            },
            ns.namesrv(),
            "broker-busy",
            &["Later"],
        )
        .await;
        let producer = Producer::start(ProducerConfig {
            send_msg_timeout: Duration::from_secs(10),
            ..config(ns.namesrv())
        })
        .await
        .unwrap();
        let began = Instant::now();
        let r = producer.send(Message::new("Later", "x")).await;
        assert!(matches!(r, Err(ref e) if e.is_busy()), "{r:?}");
        // Neither the hint nor the rest of the budget was waited out.
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        assert_eq!(busy.requests(), 1);
        producer.shutdown().await;
    })
    .await;
}

/// Runs futures concurrently and collects their outputs in order.
async fn futures_join_all<F: std::future::Future>(futs: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pinned: Vec<_> = futs.map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, slot) in pinned.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => *slot = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_over_its_topic_quota_waits_as_told_and_every_send_lands() {
    bounded(60, async {
        let b = TestBroker::start(&[("topicQuotas", "Quoted=20/s")]).await;
        b.create_topic("Quoted").await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let started = Instant::now();
        for i in 0..60 {
            producer
                .send(Message::new("Quoted", format!("q{i}")))
                .await
                .unwrap_or_else(|e| panic!("send {i} reached the application as {e}"));
        }
        let took = started.elapsed();
        // The burst is 20; the other 40 need 2 s of refill at 20/s.
        assert!(
            took >= Duration::from_millis(1950),
            "{took:?}: faster than the quota"
        );
        let stats = producer.stats();
        assert!(stats.quota_waits > 0, "{stats:?}");
        assert_eq!(
            (stats.busy_retries, stats.budget_exhausted),
            (0, 0),
            "{stats:?}"
        );
        assert_eq!((stats.succeeded, stats.failed_busy), (60, 0));
        eprintln!(
            "60 sends at a quota of 20/s took {took:?} ({:.1}/s after the burst), {} quota waits",
            40.0 / (took.as_secs_f64()).max(0.001),
            stats.quota_waits
        );
        producer.shutdown().await;
    })
    .await;
}
