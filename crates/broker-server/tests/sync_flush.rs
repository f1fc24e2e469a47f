//! SYNC_FLUSH sends against an in-process broker: a send worker hands the
//! answer to the store's group commit and takes the next request, so one
//! worker keeps many sends in one flush; every answer comes after the flush
//! that covers its message, or as `FLUSH_DISK_TIMEOUT`, over remoting and
//! gRPC alike.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use broker_server::request::Family;
use common::{grpc_message, send_request, TestBroker};
use grpc_protocol::{
    v2::{Code, SendMessageRequest},
    MessagingServiceClient,
};
use message_model::MessageId;
use remoting_protocol::{header::SendMessageResponseHeader, ResponseCode};

/// One send worker, SYNC_FLUSH, and every flush slowed down a little, so
/// that a worker that waited for its flush could never batch two sends.
/// Flow control is off: these tests are about the group commit, and a
/// loaded machine must not turn a burst into busy answers.
const ONE_WORKER_SYNC: [(&str, &str); 6] = [
    ("sendMessageThreadPoolNums", "1"),
    ("flushDiskType", "SYNC_FLUSH"),
    ("faultFlushDelayMills", "20"),
    ("earlyAdmissionEnable", "false"),
    ("adaptiveAdmissionEnable", "false"),
    ("brokerFastFailureEnable", "false"),
];

/// The physical offset in a send answer's message id.
fn physical_offset(response: &remoting_protocol::RemotingCommand) -> u64 {
    let header: SendMessageResponseHeader = response.decode_header().unwrap();
    MessageId::decode(&header.msg_id).unwrap().commit_log_offset as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_send_worker_flushes_many_concurrent_sends_together() {
    let b = Arc::new(TestBroker::start(&ONE_WORKER_SYNC).await);
    // Create the topic first so that the burst only appends.
    let first = b.invoke(send_request("SyncBatch", 0, b"first", "")).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{first:?}");
    let sends: Vec<_> = (0..64)
        .map(|i| {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                let r = b
                    .invoke(send_request("SyncBatch", 0, format!("m{i}").as_bytes(), ""))
                    .await;
                // Read right after the answer: the flush must already cover it.
                let flushed = b.broker.state().store.flushed_physical_offset();
                (r, flushed)
            })
        })
        .collect();
    let mut offsets = Vec::new();
    for s in sends {
        let (r, flushed) = s.await.unwrap();
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
        let offset = physical_offset(&r);
        assert!(
            offset < flushed,
            "answered before the flush: message at {offset}, flushed to {flushed}"
        );
        offsets.push(offset);
    }
    offsets.sort_unstable();
    offsets.dedup();
    assert_eq!(offsets.len(), 64, "64 distinct messages");
    let store = &b.broker.state().store;
    assert_eq!(store.max_offset_in_queue("SyncBatch", 0), 65);
    let stats = store.group_commit_stats();
    assert!(
        stats.largest_batch > 1,
        "one flush acknowledged several sends of one worker: {stats:?}"
    );
    assert!(stats.flushes < stats.acknowledged, "{stats:?}");
    assert_eq!(stats.pending, 0);
    Arc::into_inner(b).unwrap().broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_send_service_time_that_early_admission_uses_leaves_the_flush_out() {
    // Every flush sleeps half a second first. A worker that waited for its
    // flush would spend about that long on each send of a burst; one that
    // hands the answer over spends only the append.
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("flushDiskType", "SYNC_FLUSH"),
            ("faultFlushDelayMills", "500"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
            ("brokerFastFailureEnable", "false"),
        ])
        .await,
    );
    let first = b.invoke(send_request("SyncService", 0, b"first", "")).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{first:?}");
    let sends: Vec<_> = (0..8)
        .map(|i| {
            let b = Arc::clone(&b);
            tokio::spawn(async move {
                b.invoke(send_request(
                    "SyncService",
                    0,
                    format!("s{i}").as_bytes(),
                    "",
                ))
                .await
                .response_code()
            })
        })
        .collect();
    for s in sends {
        assert_eq!(s.await.unwrap(), ResponseCode::SUCCESS);
    }
    let queue = b.broker.state().queue(Family::Send);
    let service = queue.avg_service_time().unwrap();
    assert!(
        service < Duration::from_millis(250),
        "the send workers' service time includes the flush wait: {service:?}"
    );
    Arc::into_inner(b).unwrap().broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flush_slower_than_sync_flush_timeout_answers_flush_disk_timeout() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("flushDiskType", "SYNC_FLUSH"),
        ("syncFlushTimeout", "30"),
        ("faultFlushDelayMills", "1000"),
    ])
    .await;
    let r = b.invoke(send_request("SyncSlow", 0, b"late", "")).await;
    assert_eq!(r.response_code(), ResponseCode::FLUSH_DISK_TIMEOUT, "{r:?}");
    // Stored all the same: the answer still says where.
    let header: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(header.queue_offset, 0);
    assert!(MessageId::decode(&header.msg_id).is_ok());
    assert!(b.broker.state().store.group_commit_stats().not_flushed >= 1);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_oneway_sync_flush_send_is_stored_without_an_answer() {
    let b = TestBroker::start(&ONE_WORKER_SYNC).await;
    let mut oneway = send_request("SyncOneway", 0, b"quiet", "");
    oneway.mark_oneway();
    b.client.invoke_oneway(&b.addr, oneway).await.unwrap();
    let r = b.invoke(send_request("SyncOneway", 0, b"loud", "")).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
    let header: SendMessageResponseHeader = r.decode_header().unwrap();
    assert_eq!(header.queue_offset, 1, "the oneway send was stored first");
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_sends_are_answered_after_their_flush() {
    let b = TestBroker::start(&ONE_WORKER_SYNC).await;
    // The topic exists first, so that the gRPC sends name their queue.
    let first = b.invoke(send_request("SyncGrpc", 0, b"first", "")).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{first:?}");
    let port = b.broker.grpc_addr().expect("gRPC endpoint runs").port();
    let mut client = MessagingServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(SendMessageRequest {
        messages: vec![
            grpc_message("SyncGrpc", "0102SYNC-ONE"),
            grpc_message("SyncGrpc", "0102SYNC-TWO"),
        ],
    });
    request
        .metadata_mut()
        .insert("x-mq-client-id", "sync-host@1#1".parse().unwrap());
    let sent = tokio::time::timeout(Duration::from_secs(10), client.send_message(request))
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    let flushed = b.broker.state().store.flushed_physical_offset();
    assert_eq!(
        sent.status.as_ref().map(|s| s.code),
        Some(Code::Ok as i32),
        "{sent:?}"
    );
    let offsets: Vec<i64> = sent.entries.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [1, 2]);
    assert!(flushed >= b.broker.state().store.max_physical_offset());
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_waiting_for_its_flush_at_shutdown_is_still_answered() {
    let b = TestBroker::start(&[
        ("flushDiskType", "SYNC_FLUSH"),
        ("faultFlushDelayMills", "300"),
    ])
    .await;
    let first = b.invoke(send_request("SyncStop", 0, b"first", "")).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{first:?}");
    let (broker, client, addr, _dir) = b.into_parts();
    let client = Arc::new(client);
    let pending = {
        let (client, addr) = (Arc::clone(&client), addr.clone());
        tokio::spawn(async move {
            client
                .invoke(
                    &addr,
                    send_request("SyncStop", 0, b"last", ""),
                    Duration::from_secs(10),
                )
                .await
        })
    };
    // Shut down while the send waits for its (slow) flush.
    let store_has_it = || broker.state().store.max_offset_in_queue("SyncStop", 0) == 2;
    let deadline = Instant::now() + Duration::from_secs(10);
    while !store_has_it() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(store_has_it(), "the second send was appended");
    broker.shutdown().await;
    let answer = pending
        .await
        .unwrap()
        .expect("an answer, not a closed connection");
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS, "{answer:?}");
}
