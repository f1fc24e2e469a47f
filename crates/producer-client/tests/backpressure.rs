//! `send_async` when every in-flight permit is taken: by default it gives up
//! with `TooManyRequests` after `sendMsgTimeout`; in back-pressure mode
//! (`enableBackpressureForAsyncMode`) it waits as long as it takes and the
//! send then succeeds. One permit and a broker that holds its put lock
//! 1 s per message make the wait behind three sends (at least 3 s) longer
//! than the 2 s send timeout, which is itself twice what one send needs.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{bounded, config, TestBroker};
use producer_client::{
    Message, Producer, ProducerConfig, ProducerError, ProducerStats, SendResult,
};

/// How long the broker holds its put lock per message.
const PUT_DELAY: Duration = Duration::from_millis(1000);
const SEND_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long after the sync sends the async send starts.
const HEAD_START: Duration = Duration::from_millis(50);

/// What happened to an async send that started behind three sync sends
/// queued for the single permit (at least 3 s of broker time in all).
struct Outcome {
    /// `send_async`'s own result, and the handle's result if it gave one.
    started: Result<Result<SendResult, ProducerError>, ProducerError>,
    /// How long `send_async` took to return.
    waited: Duration,
    stats: ProducerStats,
}

async fn async_send_behind_three_slow_sends(backpressure: bool) -> Outcome {
    let delay = PUT_DELAY.as_millis().to_string();
    let b = TestBroker::start(&[("faultPutLockDelayMills", &delay)]).await;
    b.create_topic("Slow").await;
    common::wait_for_route(b.namesrv(), "Slow", 1).await;
    let producer = Producer::start(ProducerConfig {
        client_async_semaphore_value: 1,
        send_msg_timeout: SEND_TIMEOUT,
        enable_backpressure_for_async_mode: backpressure,
        ..config(b.namesrv())
    })
    .await
    .unwrap();
    producer.publish_queues("Slow").await.unwrap();
    let long = Duration::from_secs(10);
    let holders = async {
        let (h1, h2, h3) = tokio::join!(
            producer.send_with_timeout(Message::new("Slow", "h1"), long),
            producer.send_with_timeout(Message::new("Slow", "h2"), long),
            producer.send_with_timeout(Message::new("Slow", "h3"), long),
        );
        assert!(
            h1.is_ok() && h2.is_ok() && h3.is_ok(),
            "{h1:?} {h2:?} {h3:?}"
        );
    };
    let waiter = async {
        tokio::time::sleep(HEAD_START).await;
        let began = Instant::now();
        let started = producer.send_async(Message::new("Slow", "waiter")).await;
        let waited = began.elapsed();
        let started = match started {
            Ok(handle) => Ok(handle.await),
            Err(e) => Err(e),
        };
        (started, waited)
    };
    let ((), (started, waited)) = tokio::join!(holders, waiter);
    let stats = producer.stats();
    producer.shutdown().await;
    Outcome {
        started,
        waited,
        stats,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_backpressure_mode_send_async_fails_with_too_many_requests_after_the_timeout() {
    bounded(30, async {
        let out = async_send_behind_three_slow_sends(false).await;
        match out.started {
            Err(ProducerError::TooManyRequests {
                in_flight, limit, ..
            }) => assert_eq!((in_flight, limit), (1, 1), "the one permit, held"),
            other => panic!("expected TooManyRequests, got {other:?}"),
        }
        // Gave up at the send timeout, well before the permit could come
        // back (the three sends ahead hold it at least 3 x PUT_DELAY).
        assert!(
            out.waited >= SEND_TIMEOUT && out.waited < 3 * PUT_DELAY - HEAD_START,
            "{:?}",
            out.waited
        );
        assert_eq!(out.stats.failed_too_many_requests, 1);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_backpressure_mode_send_async_waits_past_the_timeout_and_then_succeeds() {
    bounded(30, async {
        let out = async_send_behind_three_slow_sends(true).await;
        match out.started {
            Ok(Ok(sent)) => assert_eq!(sent.message_queue.topic, "Slow"),
            other => panic!("expected a sent message, got {other:?}"),
        }
        assert!(
            out.waited > SEND_TIMEOUT,
            "waited {:?}, no longer than the send timeout",
            out.waited
        );
        assert_eq!(out.stats.failed_too_many_requests, 0);
        assert_eq!(out.stats.succeeded, 4);
    })
    .await;
}
