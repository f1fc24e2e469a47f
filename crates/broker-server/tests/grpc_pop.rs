//! POP consumption through the gRPC endpoint: receive, ack, redelivery with
//! a new handle, invisible-time changes, stale handles, long polling that
//! returns when a message arrives, `MESSAGE_NOT_FOUND` inside the call's
//! deadline, and the pull queue's fair shares and refusals for receives.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use broker_server::{
    executor,
    request::{Family, Reply, Work},
    BrokerState,
};
use common::TestBroker;
use grpc_protocol::{
    v2::{
        receive_message_response::Content, AckMessageEntry, AckMessageRequest,
        ChangeInvisibleDurationRequest, Code, Encoding, FilterExpression, FilterType, Message,
        MessageQueue, QueryRouteRequest, ReceiveMessageRequest, Resource, SendMessageRequest,
        SystemProperties,
    },
    MessagingServiceClient,
};
use md5::{Digest, Md5};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use tonic::{transport::Channel, Request};

async fn client(b: &TestBroker) -> MessagingServiceClient<Channel> {
    let port = b.broker.grpc_addr().unwrap().port();
    MessagingServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap()
}

fn with_id<T>(message: T) -> Request<T> {
    let mut r = Request::new(message);
    r.metadata_mut()
        .insert("x-mq-client-id", "pop-test@1#1".parse().unwrap());
    r
}

fn resource(name: &str) -> Resource {
    Resource {
        resource_namespace: String::new(),
        name: name.into(),
    }
}

fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: d.as_secs() as i64,
        nanos: d.subsec_nanos() as i32,
    }
}

async fn create_topic(c: &mut MessagingServiceClient<Channel>, topic: &str) {
    let r = c
        .query_route(with_id(QueryRouteRequest {
            topic: Some(resource(topic)),
            endpoints: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status.unwrap().code, Code::Ok as i32);
}

async fn send(c: &mut MessagingServiceClient<Channel>, topic: &str, id: &str, body: &[u8]) {
    let r = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![Message {
                topic: Some(resource(topic)),
                user_properties: [("shade".to_owned(), "dark".to_owned())].into(),
                system_properties: Some(SystemProperties {
                    message_id: id.into(),
                    tag: Some("TagA".into()),
                    keys: vec!["key-1".into(), "key-2".into()],
                    born_host: "born-here".into(),
                    born_timestamp: Some(prost_types::Timestamp {
                        seconds: 1_700_000_001,
                        nanos: 0,
                    }),
                    message_type: 1,
                    body_encoding: 1,
                    ..SystemProperties::default()
                }),
                body: body.to_vec(),
            }],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.status.unwrap().code, Code::Ok as i32);
}

/// One receive: the first item's status code and the messages.
async fn receive(
    c: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
    invisible: Duration,
    call_timeout: Duration,
) -> (i32, Vec<Message>) {
    let mut req = with_id(ReceiveMessageRequest {
        group: Some(resource(group)),
        message_queue: Some(MessageQueue {
            topic: Some(resource(topic)),
            id: 0,
            ..MessageQueue::default()
        }),
        filter_expression: Some(FilterExpression {
            r#type: FilterType::Tag as i32,
            expression: "*".into(),
        }),
        batch_size: 16,
        invisible_duration: Some(duration(invisible)),
        auto_renew: false,
        long_polling_timeout: Some(duration(Duration::from_secs(20))),
        attempt_id: None,
    });
    req.set_timeout(call_timeout);
    let mut stream = c.receive_message(req).await.unwrap().into_inner();
    let mut code = -1;
    let mut messages = Vec::new();
    let deadline = Instant::now() + call_timeout + Duration::from_secs(5);
    while let Some(item) = tokio::time::timeout_at(deadline.into(), stream.message())
        .await
        .expect("stream ends")
        .expect("no gRPC error: answered before the deadline")
    {
        match item.content {
            Some(Content::Status(s)) => code = s.code,
            Some(Content::Message(m)) => messages.push(m),
            other => panic!("unexpected item {other:?}"),
        }
    }
    (code, messages)
}

async fn ack(
    c: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
    handle: &str,
) -> i32 {
    let r = c
        .ack_message(with_id(AckMessageRequest {
            group: Some(resource(group)),
            topic: Some(resource(topic)),
            entries: vec![AckMessageEntry {
                message_id: "id".into(),
                receipt_handle: handle.into(),
                lite_topic: None,
            }],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(r.entries.len(), 1);
    assert_eq!(
        r.entries[0].status.as_ref().unwrap().code,
        r.status.unwrap().code
    );
    r.entries[0].status.as_ref().unwrap().code
}

async fn change(
    c: &mut MessagingServiceClient<Channel>,
    group: &str,
    topic: &str,
    handle: &str,
    invisible: Duration,
) -> (i32, String) {
    let r = c
        .change_invisible_duration(with_id(ChangeInvisibleDurationRequest {
            group: Some(resource(group)),
            topic: Some(resource(topic)),
            receipt_handle: handle.into(),
            invisible_duration: Some(duration(invisible)),
            message_id: "id".into(),
        }))
        .await
        .unwrap()
        .into_inner();
    (r.status.unwrap().code, r.receipt_handle)
}

fn handle(m: &Message) -> String {
    m.system_properties
        .as_ref()
        .unwrap()
        .receipt_handle
        .clone()
        .unwrap()
}

fn attempt(m: &Message) -> i32 {
    m.system_properties
        .as_ref()
        .unwrap()
        .delivery_attempt
        .unwrap()
}

const SHORT_CALL: Duration = Duration::from_millis(800);
const INVISIBLE: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receive_fills_every_field_and_ack_removes_the_message() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    create_topic(&mut c, "PopT").await;
    // A new group starts at the end: nothing yet, answered before the deadline.
    let (code, got) = receive(&mut c, "G1", "PopT", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::MessageNotFound as i32);
    assert!(got.is_empty());

    send(&mut c, "PopT", "0102POP-1", b"pop me").await;
    let (code, got) = receive(&mut c, "G1", "PopT", INVISIBLE, Duration::from_secs(5)).await;
    assert_eq!(code, Code::Ok as i32);
    assert_eq!(got.len(), 1);
    let m = &got[0];
    assert_eq!(m.topic.as_ref().unwrap().name, "PopT");
    assert_eq!(m.body, b"pop me");
    assert_eq!(m.user_properties.len(), 1, "{:?}", m.user_properties);
    assert_eq!(
        m.user_properties.get("shade").map(String::as_str),
        Some("dark")
    );
    let sys = m.system_properties.as_ref().unwrap();
    assert_eq!(sys.message_id, "0102POP-1");
    assert_eq!(sys.tag.as_deref(), Some("TagA"));
    assert_eq!(sys.keys, ["key-1", "key-2"]);
    let expected: String = Md5::digest(b"pop me")
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    assert_eq!(sys.body_digest.as_ref().unwrap().checksum, expected);
    assert_eq!(sys.body_encoding, Encoding::Identity as i32);
    assert_eq!(sys.message_type, 1);
    assert_eq!(sys.born_timestamp.as_ref().unwrap().seconds, 1_700_000_001);
    assert_eq!(sys.born_host, "born-here");
    assert!(sys.store_timestamp.as_ref().unwrap().seconds > 1_700_000_001);
    assert!(!sys.store_host.is_empty());
    assert_eq!(sys.delivery_attempt, Some(1));
    let topic = b.broker.state().topics.get("PopT").unwrap();
    assert!((0..topic.read_queue_nums).contains(&sys.queue_id));
    assert_eq!(sys.queue_offset, Some(0));
    assert!(!handle(m).is_empty());

    assert_eq!(ack(&mut c, "G1", "PopT", &handle(m)).await, Code::Ok as i32);
    assert_eq!(
        ack(&mut c, "G1", "PopT", &handle(m)).await,
        Code::InvalidReceiptHandle as i32,
        "an acknowledged delivery's handle is stale"
    );
    assert_eq!(
        ack(&mut c, "G1", "PopT", "not-a-handle").await,
        Code::InvalidReceiptHandle as i32
    );
    let (code, _) = receive(&mut c, "G1", "PopT", INVISIBLE, SHORT_CALL).await;
    assert_eq!(
        code,
        Code::MessageNotFound as i32,
        "acknowledged: not delivered again"
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_messages_come_back_with_a_new_handle() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    create_topic(&mut c, "PopR").await;
    let (code, _) = receive(&mut c, "G2", "PopR", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::MessageNotFound as i32);
    send(&mut c, "PopR", "0102POP-R", b"again").await;
    let (_, got) = receive(&mut c, "G2", "PopR", INVISIBLE, Duration::from_secs(5)).await;
    let first = handle(&got[0]);
    assert_eq!(attempt(&got[0]), 1);

    // Invisible: another receive of the group does not see it.
    let (code, _) = receive(&mut c, "G2", "PopR", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::MessageNotFound as i32);

    // A new invisible time of 1 s: a new handle, the old one is stale.
    let (code, changed) = change(&mut c, "G2", "PopR", &first, Duration::from_secs(1)).await;
    assert_eq!(code, Code::Ok as i32);
    assert_ne!(changed, first);
    assert_eq!(
        ack(&mut c, "G2", "PopR", &first).await,
        Code::InvalidReceiptHandle as i32
    );

    // Once that time ends, a long-polling receive gets it again.
    let (code, again) = receive(&mut c, "G2", "PopR", INVISIBLE, Duration::from_secs(10)).await;
    assert_eq!(code, Code::Ok as i32);
    assert_eq!(again.len(), 1);
    assert_eq!(
        again[0].system_properties.as_ref().unwrap().message_id,
        "0102POP-R"
    );
    assert_eq!(attempt(&again[0]), 2);
    let latest = handle(&again[0]);
    assert_ne!(latest, changed);
    assert_ne!(latest, first);
    assert_eq!(
        ack(&mut c, "G2", "PopR", &changed).await,
        Code::InvalidReceiptHandle as i32,
        "a redelivery replaces the handle"
    );
    assert_eq!(ack(&mut c, "G2", "PopR", &latest).await, Code::Ok as i32);

    // Out-of-range invisible times are refused.
    let (code, _) = receive(&mut c, "G2", "PopR", Duration::from_secs(1), SHORT_CALL).await;
    assert_eq!(code, Code::IllegalInvisibleTime as i32);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_poll_returns_when_a_message_arrives() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    create_topic(&mut c, "PopL").await;
    let (code, _) = receive(&mut c, "G3", "PopL", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::MessageNotFound as i32);
    let call = Duration::from_secs(15);
    let waiting = {
        let mut c = c.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let got = receive(&mut c, "G3", "PopL", INVISIBLE, call).await;
            (got, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    send(&mut c, "PopL", "0102POP-L", b"wake up").await;
    let ((code, got), waited) = waiting.await.unwrap();
    assert_eq!(code, Code::Ok as i32);
    assert_eq!(got[0].body, b"wake up");
    assert!(
        waited < call - Duration::from_secs(1),
        "answered on arrival, not at the end of the poll ({waited:?})"
    );
    b.broker.shutdown().await;
}

/// Holds the broker's only pull worker until the returned sender is
/// dropped: work queued behind it waits in the pull queue's shares.
fn hold_the_pull_worker(state: &BrokerState) -> std::sync::mpsc::Sender<()> {
    let (release, released) = std::sync::mpsc::channel::<()>();
    let (running, started) = std::sync::mpsc::channel::<()>();
    let work = Work::new(move || {
        running.send(()).unwrap();
        // Returns when the sender is dropped as well.
        let _ = released.recv();
    });
    executor::submit(
        state,
        Family::Pull,
        channel_reply(),
        stand_in("Holder"),
        work,
    );
    started
        .recv_timeout(Duration::from_secs(10))
        .expect("the pull worker took the holding work");
    release
}

fn channel_reply() -> Reply {
    Reply::channel("127.0.0.1:1".parse().unwrap()).0
}

/// The command a queued piece of work stands for: the group's share.
fn stand_in(group: &str) -> RemotingCommand {
    let mut r = RemotingCommand::request(RequestCode::POP_MESSAGE);
    r.set_ext("consumerGroup", group);
    r
}

const BACKLOG: usize = 30;

/// Queues `BACKLOG` pieces of work in group `Busy`'s share behind the held
/// pull worker, then a gRPC receive of group `Quiet`; returns how many of
/// `Busy`'s ran before the receive's pop.
async fn busy_served_before_a_quiet_receive(pull_share_key: &str) -> usize {
    let b = TestBroker::start(&[
        ("pullMessageThreadPoolNums", "1"),
        ("pullShareKey", pull_share_key),
    ])
    .await;
    let mut c = client(&b).await;
    create_topic(&mut c, "PopQ").await;
    let (code, _) = receive(&mut c, "Quiet", "PopQ", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::MessageNotFound as i32);
    send(&mut c, "PopQ", "0102POP-Q", b"quiet").await;

    let state = Arc::clone(b.broker.state());
    let held = hold_the_pull_worker(&state);
    let before_quiet = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    for _ in 0..BACKLOG {
        let (before_quiet, done) = (Arc::clone(&before_quiet), Arc::clone(&done));
        let shared = Arc::clone(&state);
        let work = Work::new(move || {
            // One worker: the quiet receive's pop has run exactly when its
            // message is in flight.
            if shared.pop.next_visible_ms("Quiet", "PopQ").is_none() {
                before_quiet.fetch_add(1, Ordering::SeqCst);
            }
            done.fetch_add(1, Ordering::SeqCst);
        });
        executor::submit(
            &state,
            Family::Pull,
            channel_reply(),
            stand_in("Busy"),
            work,
        );
    }
    let quiet = {
        let mut c = c.clone();
        tokio::spawn(async move { receive(&mut c, "Quiet", "PopQ", INVISIBLE, CALL).await })
    };
    let queue = Arc::clone(state.queue(Family::Pull));
    let deadline = Instant::now() + Duration::from_secs(10);
    while queue.len() < BACKLOG + 1 {
        assert!(Instant::now() < deadline, "the receive never queued");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    drop(held);
    let (code, got) = quiet.await.unwrap();
    assert_eq!(code, Code::Ok as i32);
    assert_eq!(got[0].body, b"quiet");
    while done.load(Ordering::SeqCst) < BACKLOG {
        assert!(
            Instant::now() < deadline + CALL,
            "the backlog was not served"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    b.broker.shutdown().await;
    before_quiet.load(Ordering::SeqCst)
}

const CALL: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_waits_in_its_groups_share_of_the_pull_queue() {
    let shares = busy_served_before_a_quiet_receive("consumerGroup").await;
    assert!(
        shares <= 2,
        "with shares per group the receive waited for {shares} of another group's requests"
    );
    let fifo = busy_served_before_a_quiet_receive("none").await;
    assert_eq!(
        fifo, BACKLOG,
        "in one FIFO the receive waits for the whole backlog"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receive_refused_by_the_pull_queue_is_too_many_requests_with_the_reason() {
    let b = TestBroker::start(&[
        ("pullMessageThreadPoolNums", "1"),
        ("pullThreadPoolQueueCapacity", "4"),
    ])
    .await;
    let mut c = client(&b).await;
    create_topic(&mut c, "PopF").await;
    let state = Arc::clone(b.broker.state());
    let held = hold_the_pull_worker(&state);
    // Fill the group's share until the queue refuses one.
    let mut refused = None;
    for _ in 0..64 {
        let (reply, mut answer) = Reply::channel("127.0.0.1:1".parse().unwrap());
        executor::submit(
            &state,
            Family::Pull,
            reply,
            stand_in("Full"),
            Work::new(|| {}),
        );
        if let Ok(busy) = answer.try_recv() {
            refused = Some(busy);
            break;
        }
    }
    let refused = refused.expect("the pull queue refused work at some point");
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_BUSY);
    let (code, _) = receive(&mut c, "Full", "PopF", INVISIBLE, SHORT_CALL).await;
    assert_eq!(code, Code::TooManyRequests as i32);
    drop(held);
    b.broker.shutdown().await;
}
