//! Fair shares of the send queue through a real broker: a topic with a
//! backlog does not hold up another topic's send, which is served within
//! one round; with `sendShareKey=none` (RocketMQ's one FIFO) it waits for
//! the whole backlog. Weights and keys change at run time. (The shares'
//! figures in `/metrics` are checked in `metrics.rs`.)
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use broker_server::request::Family;
use common::{send_request, TestBroker};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};

const BACKLOG: usize = 30;

/// Queues `BACKLOG` sends to `Busy` behind a slow store, then one send to
/// `Quiet`; returns how many `Busy` sends were answered before it.
async fn busy_answered_before_quiet(share_key: &str) -> usize {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "20"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
            ("sendShareKey", share_key),
        ])
        .await,
    );
    let answered = Arc::new(AtomicUsize::new(0));
    let busy: Vec<_> = (0..BACKLOG)
        .map(|i| {
            let (b, answered) = (Arc::clone(&b), Arc::clone(&answered));
            tokio::spawn(async move {
                let r = b
                    .invoke(send_request("Busy", 0, format!("b{i}").as_bytes(), ""))
                    .await;
                assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
                answered.fetch_add(1, Ordering::SeqCst);
            })
        })
        .collect();
    let queue = Arc::clone(b.broker.state().queue(Family::Send));
    let deadline = Instant::now() + Duration::from_secs(20);
    while queue.len() < BACKLOG - 2 {
        assert!(Instant::now() < deadline, "the backlog never queued up");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if share_key == "topic" {
        let info = runtime_info(&b).await;
        assert!(info.contains("\"sendQueueShares\":\"Busy:"), "{info}");
    }
    let r = b.invoke(send_request("Quiet", 0, b"q", "")).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let before = answered.load(Ordering::SeqCst);
    for call in busy {
        call.await.unwrap();
    }
    before
}

async fn runtime_info(b: &TestBroker) -> String {
    let r = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_BROKER_RUNTIME_INFO,
        ))
        .await;
    String::from_utf8(r.body.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_with_a_backlog_does_not_hold_up_another_topic() {
    let shares = busy_answered_before_quiet("topic").await;
    assert!(
        shares <= 3,
        "with shares per topic the quiet send waited for {shares} busy sends"
    );
    let fifo = busy_answered_before_quiet("none").await;
    assert!(
        fifo >= BACKLOG - 3,
        "in one FIFO the quiet send waited for only {fifo} busy sends"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn share_weights_apply_and_can_change_at_run_time() {
    let b = TestBroker::start(&[("shareWeights", "Weighted=3")]).await;
    let r = b.invoke(send_request("Weighted", 0, b"w", "")).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let state = b.broker.state();
    let weighted = |state: &broker_server::BrokerState| {
        let shares = state.queue(Family::Send).shares(Instant::now());
        let w = shares.iter().find(|s| &*s.key == "Weighted").unwrap();
        (w.weight, w.served)
    };
    assert_eq!(weighted(state), (3, 1));
    let update = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"shareWeights=Weighted=5\nsendShareKey=producerGroup\n".to_vec());
    assert_eq!(
        b.invoke(update).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(weighted(state), (5, 1));
    let bad = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"sendShareKey=consumerGroup\n".to_vec());
    let bad = b.invoke(bad).await;
    assert_eq!(bad.response_code(), ResponseCode::INVALID_PARAMETER);
    assert!(bad.remark.unwrap().contains("sendShareKey"));
}
