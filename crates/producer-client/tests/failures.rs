//! Transport failures: a broker that never answers costs exactly the send
//! timeout, one that hangs up fails the send promptly, an unreachable name
//! server fails it promptly, with latency fault tolerance a failing broker
//! is avoided afterwards, and a group that lost its master is sent to again
//! soon after a new master registers.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{bounded, config, Behaviour, FakeBroker, TestBroker};
use producer_client::{Message, Producer, ProducerConfig, ProducerError};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_never_answers_times_out_at_the_send_timeout() {
    bounded(30, async {
        let ns = TestBroker::start(&[]).await;
        let silent =
            FakeBroker::start(Behaviour::Silent, ns.namesrv(), "broker-silent", &["Quiet"]).await;
        let producer = Producer::start(ProducerConfig {
            send_msg_timeout: Duration::from_millis(1000),
            ..config(ns.namesrv())
        })
        .await
        .unwrap();
        producer.publish_queues("Quiet").await.unwrap();
        let began = Instant::now();
        let r = producer.send(Message::new("Quiet", "x")).await;
        let elapsed = began.elapsed();
        match r {
            Err(ProducerError::Timeout { timeout_ms, addr }) => {
                assert_eq!(timeout_ms, 1000);
                assert_eq!(addr.as_deref(), Some(silent.addr.as_str()));
            }
            other => panic!("expected a timeout, got {other:?}"),
        }
        // The budget and not much more: less than two budgets.
        assert!(
            elapsed >= Duration::from_millis(1000) && elapsed < Duration::from_millis(2000),
            "{elapsed:?}"
        );
        assert_eq!(
            silent.requests(),
            1,
            "the one attempt used the whole budget"
        );

        let handle = producer
            .send_async(Message::new("Quiet", "y"))
            .await
            .unwrap();
        assert!(matches!(
            handle.await,
            Err(ProducerError::Timeout {
                timeout_ms: 1000,
                ..
            })
        ));
        assert_eq!(producer.stats().failed_timeout, 2);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_hangs_up_mid_request_fails_the_send_promptly() {
    bounded(30, async {
        let ns = TestBroker::start(&[]).await;
        let rude =
            FakeBroker::start(Behaviour::HangUp, ns.namesrv(), "broker-rude", &["Rude"]).await;
        let producer = Producer::start(ProducerConfig {
            send_msg_timeout: Duration::from_secs(10),
            ..config(ns.namesrv())
        })
        .await
        .unwrap();
        let began = Instant::now();
        let r = producer.send(Message::new("Rude", "x")).await;
        assert!(
            matches!(r, Err(ProducerError::Connection { ref addr, .. }) if *addr == rude.addr),
            "{r:?}"
        );
        // Well within the 10 s budget: nothing waited for a timeout.
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        assert_eq!(rude.requests(), 3, "one attempt and two retries");
        let stats = producer.stats();
        assert_eq!((stats.retries, stats.failed_connection), (2, 1));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_name_server_fails_the_send_promptly() {
    bounded(30, async {
        // Bind then drop a listener to find a port nothing listens on.
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let producer = Producer::start(ProducerConfig {
            send_msg_timeout: Duration::from_secs(10),
            ..config(&format!("127.0.0.1:{port}"))
        })
        .await
        .unwrap();
        let began = Instant::now();
        let r = producer.send(Message::new("Nowhere", "x")).await;
        assert!(matches!(r, Err(ProducerError::Connection { .. })), "{r:?}");
        // Well within the 10 s budget: the refusal ended the send.
        assert!(
            began.elapsed() < Duration::from_secs(5),
            "{:?}",
            began.elapsed()
        );
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_latency_fault_tolerance_a_failed_broker_is_avoided_afterwards() {
    bounded(30, async {
        let healthy = TestBroker::start(&[("brokerName", "broker-b")]).await;
        let rude =
            FakeBroker::start(Behaviour::HangUp, healthy.namesrv(), "broker-a", &["Avoid"]).await;
        healthy.create_topic("Avoid").await;
        common::wait_for_route(healthy.namesrv(), "Avoid", 2).await;
        let producer = Producer::start(ProducerConfig {
            send_latency_fault_enable: true,
            ..config(healthy.namesrv())
        })
        .await
        .unwrap();
        for i in 0..12 {
            let sent = producer
                .send(Message::new("Avoid", format!("a{i}")))
                .await
                .unwrap();
            assert_eq!(sent.message_queue.broker_name, "broker-b");
        }
        assert!(
            rude.requests() <= 1,
            "after its first failure broker-a is isolated for 10 s, got {} requests",
            rude.requests()
        );
        producer.shutdown().await;
    })
    .await;
}

/// A route in which a group has queues but no master (its master died and
/// another is being elected) is read again within a second or so: sends
/// that keep succeeding on the other group give the producer no failure
/// to re-read it on, and the periodic refresh (here a minute) is too late.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_between_masters_is_sent_to_soon_after_its_new_master_registers() {
    bounded(30, async {
        let healthy = TestBroker::start(&[("brokerName", "broker-b")]).await;
        let namesrv = healthy.namesrv().to_owned();
        healthy.create_topic("Failover").await;
        let slave =
            FakeBroker::start_as(Behaviour::Silent, &namesrv, "broker-a", &["Failover"], 1).await;
        let old = FakeBroker::start(Behaviour::Silent, &namesrv, "broker-a", &["Failover"]).await;
        common::wait_for_master(&namesrv, "Failover", "broker-a", true).await;
        drop(old);
        common::wait_for_master(&namesrv, "Failover", "broker-a", false).await;
        let producer = Producer::start(ProducerConfig {
            poll_name_server_interval: Duration::from_secs(60),
            ..config(&namesrv)
        })
        .await
        .unwrap();
        for i in 0..4 {
            let sent = producer
                .send(Message::new("Failover", format!("before {i}")))
                .await
                .unwrap();
            assert_eq!(sent.message_queue.broker_name, "broker-b");
        }
        let new = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: None,
            },
            &namesrv,
            "broker-a",
            &["Failover"],
        )
        .await;
        let registered = Instant::now();
        let mut i = 0;
        while new.requests() == 0 {
            // Busy answers from the new master are retried on broker-b.
            let _ = producer
                .send(Message::new("Failover", format!("after {i}")))
                .await;
            i += 1;
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!(
            "the new master had a send {} ms after it registered",
            registered.elapsed().as_millis()
        );
        producer.shutdown().await;
        drop(slave);
    })
    .await;
}
