//! Every broker-side busy path of RocketMQ's flow control, reproduced on
//! purpose with the store's put-lock delay fault and small limits: the codes,
//! the remark texts, the retry hint, oneway silence and run-time tuning.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::BytesMut;
use common::{send_request, TestBroker};
use remoting_protocol::{
    decode_frame, encode_frame, RemotingCommand, RequestCode, ResponseCode, DEFAULT_MAX_FRAME_LEN,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Sends `n` messages at once and returns each outcome's code and remark.
async fn burst(
    b: &Arc<TestBroker>,
    topic: &str,
    n: usize,
) -> Vec<(ResponseCode, String, Option<String>)> {
    burst_of(b, topic, n, 0).await
}

/// `n` concurrent sends, each with a body of `size` bytes (a short text
/// when 0).
async fn burst_of(
    b: &Arc<TestBroker>,
    topic: &str,
    n: usize,
    size: usize,
) -> Vec<(ResponseCode, String, Option<String>)> {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let b = Arc::clone(b);
            let topic = topic.to_owned();
            tokio::spawn(async move {
                let body = if size == 0 {
                    format!("m{i}").into_bytes()
                } else {
                    vec![b'b'; size]
                };
                let r = b.invoke(send_request(&topic, 0, &body, "")).await;
                (
                    r.response_code(),
                    r.remark.clone().unwrap_or_default(),
                    r.ext("retryAfterMs").map(str::to_owned),
                )
            })
        })
        .collect();
    let mut out = Vec::new();
    for c in calls {
        out.push(c.await.unwrap());
    }
    out
}

fn with_prefix<'a>(
    outcomes: &'a [(ResponseCode, String, Option<String>)],
    prefix: &str,
) -> Vec<&'a (ResponseCode, String, Option<String>)> {
    outcomes
        .iter()
        .filter(|o| o.1.starts_with(prefix))
        .collect()
}

/// The number after `label` in a remark (`period in queue: 205ms` -> 205).
fn figure(remark: &str, label: &str) -> u64 {
    let rest = &remark[remark.find(label).unwrap() + label.len()..];
    rest.chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_send_queue_answers_overload_with_a_retry_hint() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("sendThreadPoolQueueCapacity", "2"),
            ("faultPutLockDelayMills", "100"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    let outcomes = burst(&b, "Overload", 12).await;
    let overload = with_prefix(
        &outcomes,
        "[OVERLOAD]system busy, start flow control for a while",
    );
    assert!(!overload.is_empty(), "{outcomes:?}");
    for (code, remark, hint) in &overload {
        assert_eq!(*code, ResponseCode::SYSTEM_BUSY);
        assert_eq!(
            remark,
            "[OVERLOAD]system busy, start flow control for a while"
        );
        assert!(
            hint.as_deref()
                .is_some_and(|h| h.parse::<u64>().unwrap() > 0),
            "retry hint present"
        );
    }
    assert!(
        outcomes.iter().any(|o| o.0 == ResponseCode::SUCCESS),
        "{outcomes:?}"
    );
    assert!(b.broker.state().counters.rejected("overload") >= overload.len() as u64);
}

/// Mechanism: each queue counts the bytes of the requests waiting in it;
/// one that would take the queue past `requestQueueCapacityBytes` is
/// refused `[OVERLOAD]` with the figures, although the queue is far from
/// full in count. With one worker held 2 s per message, at most one 600 KiB
/// send is served and one waits (1 MiB holds one); the rest are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_full_in_bytes_answers_overload_with_the_figures() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("requestQueueCapacityBytes", "1048576"),
            ("faultPutLockDelayMills", "2000"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    let outcomes = burst_of(&b, "Heavy", 4, 600 * 1024).await;
    let refused = with_prefix(
        &outcomes,
        "[OVERLOAD]system busy, start flow control for a while, queued bytes: ",
    );
    assert!(refused.len() >= 2, "{outcomes:?}");
    for (code, remark, _) in &refused {
        assert_eq!(*code, ResponseCode::SYSTEM_BUSY);
        assert!(figure(remark, "queued bytes: ") >= 600 * 1024, "{remark}");
        assert_eq!(figure(remark, "limit: "), 1_048_576, "{remark}");
    }
    assert!(
        outcomes.iter().any(|o| o.0 == ResponseCode::SUCCESS),
        "{outcomes:?}"
    );
    assert!(b.broker.state().counters.rejected("overload_bytes") >= refused.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_waiting_past_the_limit_are_answered_timeout_clean_queue() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "80"),
            ("waitTimeMillsInSendQueue", "50"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    let outcomes = burst(&b, "Slow", 10).await;
    let expired = with_prefix(
        &outcomes,
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ",
    );
    assert!(!expired.is_empty(), "{outcomes:?}");
    for (code, remark, _) in &expired {
        assert_eq!(*code, ResponseCode::SYSTEM_BUSY);
        assert!(figure(remark, "period in queue: ") >= 50, "{remark}");
        assert!(remark.contains("ms, size of queue: "), "{remark}");
    }

    // Raising the limit on the running broker ends the rejections.
    let update = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"waitTimeMillsInSendQueue=60000".to_vec());
    assert_eq!(
        b.invoke(update).await.response_code(),
        ResponseCode::SUCCESS
    );
    let outcomes = burst(&b, "Slow", 6).await;
    assert!(
        outcomes.iter().all(|o| o.0 == ResponseCode::SUCCESS),
        "{outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_cache_busy_rejects_new_sends_and_drains_queued_ones() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "600"),
            ("osPageCacheBusyTimeOutMills", "100"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    // One send holds the put lock for 600 ms; three more wait in the queue.
    let queued = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { burst(&b, "Busy", 4).await })
    };
    // Wait until the lock has been held past the busy limit (within the
    // 600 ms it is held).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !b.broker.state().store.is_os_page_cache_busy() {
        assert!(
            Instant::now() < deadline,
            "the put lock never counted as busy"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let late = b.invoke(send_request("Busy", 0, b"late", "")).await;
    assert_eq!(late.response_code(), ResponseCode::SYSTEM_BUSY);
    assert_eq!(
        late.remark.as_deref(),
        Some("[REJECTREQUEST]system busy, start flow control for a while")
    );
    let outcomes = queued.await.unwrap();
    let drained = with_prefix(
        &outcomes,
        "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ",
    );
    assert!(!drained.is_empty(), "{outcomes:?}");
    assert!(drained.iter().all(|o| o.0 == ResponseCode::SYSTEM_BUSY));
    assert!(
        outcomes.iter().any(|o| o.0 == ResponseCode::SUCCESS),
        "the lock holder finishes"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_admission_refuses_what_could_not_finish_in_time() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "40"),
            ("waitTimeMillsInSendQueue", "100"),
            ("earlyAdmissionEnable", "true"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    // Teach the estimator the service time.
    for i in 0..3 {
        let r = b
            .invoke(send_request("Early", 0, format!("warm{i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    }
    let outcomes = burst(&b, "Early", 12).await;
    let early = with_prefix(
        &outcomes,
        "[EARLY_REJECT]broker busy, start flow control for a while, predicted wait: ",
    );
    assert!(!early.is_empty(), "{outcomes:?}");
    for (_, remark, hint) in &early {
        assert!(figure(remark, "predicted wait: ") > 100, "{remark}");
        assert!(remark.contains("limit: 100ms"), "{remark}");
        assert!(hint.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oneway_requests_get_no_busy_answer() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("sendThreadPoolQueueCapacity", "1"),
        ("faultPutLockDelayMills", "200"),
        ("earlyAdmissionEnable", "false"),
        ("adaptiveAdmissionEnable", "false"),
        ("waitTimeMillsInSendQueue", "60000"),
    ])
    .await;
    let mut socket = tokio::net::TcpStream::connect(&b.addr).await.unwrap();
    let mut wire = BytesMut::new();
    for i in 0..5 {
        let mut oneway = send_request("Oneway", 0, format!("o{i}").as_bytes(), "");
        oneway.mark_oneway();
        encode_frame(&oneway, &mut wire, DEFAULT_MAX_FRAME_LEN).unwrap();
    }
    let probe = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
    encode_frame(&probe, &mut wire, DEFAULT_MAX_FRAME_LEN).unwrap();
    socket.write_all(&wire).await.unwrap();
    let mut buf = BytesMut::new();
    let first = loop {
        if let Some(cmd) = decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN).unwrap() {
            break cmd;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read_buf(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "connection closed");
    };
    assert_eq!(
        first.opaque, probe.opaque,
        "the only answer is to the normal request"
    );
    assert!(
        b.broker.state().counters.rejected("overload") >= 1,
        "some oneway sends were refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhausted_transient_store_pool_rejects_sends_at_admission() {
    let b = TestBroker::start(&[
        ("transientStorePoolEnable", "true"),
        ("transientStorePoolSize", "1"),
    ])
    .await;
    // The first send makes the first file, which takes the only buffer.
    let first = b.invoke(send_request("Pool", 0, b"first", "")).await;
    assert_eq!(
        first.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        first.remark
    );
    assert!(b.broker.state().store.is_transient_store_pool_deficient());
    let refused = b.invoke(send_request("Pool", 0, b"second", "")).await;
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_BUSY);
    assert_eq!(
        refused.remark.as_deref(),
        Some("[REJECTREQUEST]system busy, start flow control for a while")
    );
}
