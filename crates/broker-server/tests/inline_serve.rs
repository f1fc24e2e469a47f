//! Sends served on the connection's own task: only when the send queue is
//! empty, a send worker idle, the put lock free and the average send fast;
//! counted as accepted and completed with no queue wait; off with
//! `inlineServeEnable=false`; and never while a worker's turn is short.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use broker_server::request::Family;
use common::{send_request, TestBroker};
use remoting_protocol::ResponseCode;

/// Waits (bounded) until the one send worker waits idle for work.
async fn until_worker_idle(b: &TestBroker) {
    let queue = b.broker.state().queue(Family::Send);
    let deadline = Instant::now() + Duration::from_secs(10);
    while queue.idle_workers() < 1 {
        assert!(Instant::now() < deadline, "the send worker never went idle");
        tokio::task::yield_now().await;
    }
}

/// Sends `n` messages one after another, each once the worker is idle;
/// returns how many were served inline.
async fn sequential_sends(b: &TestBroker, n: usize) -> u64 {
    for i in 0..n {
        until_worker_idle(b).await;
        let answer = b
            .invoke(send_request("Inline", 0, format!("m{i}").as_bytes(), ""))
            .await;
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    }
    b.broker.state().counters.snapshot().served_inline
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_to_an_idle_queue_are_served_inline_once_a_worker_served_one() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        // Debug builds on a busy machine: any average counts as fast.
        ("inlineServeMaxMicros", "1000000"),
    ])
    .await;
    // The first send has no average service time yet: a worker serves it.
    // Every later one finds the queue empty and the worker idle.
    assert_eq!(sequential_sends(&b, 10).await, 9);
    let snapshot = b.broker.state().counters.snapshot();
    assert!(snapshot.accepted >= 10 && snapshot.completed >= 10);
    // All ten are stored.
    b.until_dispatched("Inline", 0, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_inline_serving_off_every_send_goes_through_the_queue() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("inlineServeMaxMicros", "1000000"),
        ("inlineServeEnable", "false"),
    ])
    .await;
    assert_eq!(sequential_sends(&b, 10).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_average_keeps_sends_off_the_reading_thread() {
    // Every append holds the put lock 5 ms: far above a 1 µs limit.
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("inlineServeMaxMicros", "1"),
        ("faultPutLockDelayMills", "5"),
    ])
    .await;
    assert_eq!(sequential_sends(&b, 5).await, 0);
}
