//! Long polling: a pull that finds nothing waits for messages or its suspend
//! time, then is answered; a message arriving meanwhile wakes it at once.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use common::{send_request, TestBroker};
use message_model::flags::PULL_SUSPEND;
use remoting_protocol::{
    header::{PullMessageRequestHeader, PullMessageResponseHeader},
    RemotingCommand, RequestCode, ResponseCode,
};

fn suspended_pull(topic: &str, offset: i64, suspend_ms: i64) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: "CG".into(),
            topic: topic.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: PULL_SUSPEND,
            commit_offset: 0,
            suspend_timeout_millis: suspend_ms,
            sub_version: 0,
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    )
}

async fn create_topic(b: &TestBroker, topic: &str) {
    let first = b.invoke(send_request(topic, 0, b"first", "")).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS);
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.broker.state().store.max_offset_in_queue(topic, 0) < 1 {
        assert!(
            Instant::now() < deadline,
            "the first message of {topic} was not dispatched"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_a_pull_waits_is_delivered_at_once() {
    let b = Arc::new(TestBroker::start(&[]).await);
    create_topic(&b, "LP").await;
    let started = Instant::now();
    let pull = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.invoke(suspended_pull("LP", 1, 10_000)).await })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while b.broker.state().pull_hold.len() != 1 {
        assert!(
            Instant::now() < deadline,
            "the pull was not parked within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let sent_at = Instant::now();
    assert_eq!(
        b.invoke(send_request("LP", 0, b"wake up", ""))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let response = pull.await.unwrap();
    let delivered = sent_at.elapsed();
    eprintln!(
        "long polling: delivered {delivered:?} after the send (pull waited {:?})",
        started.elapsed()
    );
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "woken by the arrival, not by the 10 s timeout"
    );
    let header: PullMessageResponseHeader = response.decode_header().unwrap();
    assert_eq!(header.next_begin_offset, 2);
    assert!(b.broker.state().pull_hold.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_that_finds_nothing_is_answered_after_its_suspend_time() {
    let b = TestBroker::start(&[]).await;
    create_topic(&b, "Quiet").await;
    let started = Instant::now();
    let response = b.invoke(suspended_pull("Quiet", 1, 300)).await;
    assert_eq!(response.response_code(), ResponseCode::PULL_NOT_FOUND);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "{:?}",
        started.elapsed()
    );
    // Without the suspend flag the answer comes at once.
    let mut plain = suspended_pull("Quiet", 1, 300);
    plain.ext_fields.insert("sysFlag".into(), "0".into());
    assert_eq!(
        b.invoke(plain).await.response_code(),
        ResponseCode::PULL_NOT_FOUND
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_polling_holds_for_short_polling_time_mills() {
    let b = TestBroker::start(&[
        ("longPollingEnable", "false"),
        ("shortPollingTimeMills", "150"),
    ])
    .await;
    create_topic(&b, "Short").await;
    let started = Instant::now();
    let response = b.invoke(suspended_pull("Short", 1, 20_000)).await;
    assert_eq!(response.response_code(), ResponseCode::PULL_NOT_FOUND);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(150) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_connection_parks_only_its_share_and_its_pulls_go_when_it_closes() {
    let b = Arc::new(TestBroker::start(&[("pullHoldMaxRequestsPerConnection", "2")]).await);
    create_topic(&b, "Share").await;
    let mut pulls: Vec<_> = (0..3)
        .map(|_| {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                b.client
                    .invoke(
                        &b.addr,
                        suspended_pull("Share", 1, 60_000),
                        Duration::from_secs(90),
                    )
                    .await
            })
        })
        .collect();
    // The one over the connection's share is answered at once.
    let first = first_finished(&mut pulls).await;
    assert_eq!(
        first.unwrap().unwrap().response_code(),
        ResponseCode::PULL_NOT_FOUND
    );
    let state = b.broker.state();
    let deadline = Instant::now() + Duration::from_secs(10);
    while state.pull_hold.len() < 2 {
        assert!(Instant::now() < deadline, "two pulls were not parked");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // The connection goes: so do its parked pulls.
    b.client.close_all().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !state.pull_hold.is_empty() {
        assert!(
            Instant::now() < deadline,
            "parked pulls outlived their connection"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for p in pulls {
        assert!(p.await.unwrap().is_err(), "answered on a closed connection");
    }
}

/// Waits for the first of the tasks to finish and takes it out of `tasks`.
async fn first_finished<T>(
    tasks: &mut Vec<tokio::task::JoinHandle<T>>,
) -> Result<T, tokio::task::JoinError> {
    loop {
        if let Some(i) = tasks.iter().position(tokio::task::JoinHandle::is_finished) {
            return tasks.remove(i).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
