//! Push consumers against an in-process broker: queue sharing within a
//! group, rebalancing on join and leave, flow control and long polling.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use common::{wait_for, Recorder};
use consumer_client::{ConsumeStatus, ConsumerConfig, PushConsumer};
use producer_client::Message;
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};

async fn send_all(p: &producer_client::Producer, tag: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..200 {
        let msg = Message::new("SplitT", format!("{tag}-{i}"));
        ids.push(p.send(msg).await.unwrap().msg_id);
    }
    ids
}

/// Queues owned of the test topics (the group's retry topic aside).
fn owned(c: &PushConsumer) -> usize {
    c.owned_queues()
        .iter()
        .filter(|q| !q.topic.starts_with("%RETRY%"))
        .count()
}

async fn start(config: ConsumerConfig, topic: &str, handler: Recorder) -> PushConsumer {
    PushConsumer::start(config.subscribe(topic, "*"), handler)
        .await
        .unwrap()
}

/// Sends one message straight to a queue (the producer picks queues itself).
async fn send_to_queue(addr: &str, topic: &str, queue_id: i32, body: &str) {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        properties: Some(format!("UNIQ_KEY\u{1}{body}\u{2}")),
        ..SendMessageRequestHeader::default()
    });
    let req = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(body.as_bytes().to_vec());
    let client = RemotingClient::new(ClientOptions::default());
    let resp = client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_consumers_in_a_group_split_the_queues_and_receive_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("SplitT", 8).await;
    let (ra, rb) = (Recorder::default(), Recorder::default());
    let a = start(b.consumer_config("SplitG"), "SplitT", ra.clone()).await;
    let c = start(b.consumer_config("SplitG"), "SplitT", rb.clone()).await;
    wait_for(Duration::from_secs(10), || async {
        owned(&a) == 4 && owned(&c) == 4
    })
    .await;

    let (p1, p2) = (b.producer().await, b.producer().await);
    let (s1, s2) = tokio::join!(send_all(&p1, "p1"), send_all(&p2, "p2"));
    let sent: BTreeSet<String> = s1.into_iter().chain(s2).collect();
    assert_eq!(sent.len(), 400);

    wait_for(Duration::from_secs(15), || async {
        let got: BTreeSet<String> = ra.ids().into_iter().chain(rb.ids()).collect();
        sent.is_subset(&got)
    })
    .await;
    let all: Vec<String> = ra.ids().into_iter().chain(rb.ids()).collect();
    let unique: BTreeSet<&String> = all.iter().collect();
    eprintln!(
        "consumer a: {} messages, consumer b: {} messages, duplicates: {}",
        ra.count(),
        rb.count(),
        all.len() - unique.len()
    );
    assert!(ra.count() > 0 && rb.count() > 0);
    let qa: BTreeSet<_> = a.owned_queues().into_iter().collect();
    let qb: BTreeSet<_> = c.owned_queues().into_iter().collect();
    assert!(qa.is_disjoint(&qb));

    a.shutdown().await;
    c.shutdown().await;
    p1.shutdown().await;
    p2.shutdown().await;
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_consumer_joining_then_leaving_rebalances_and_leaves_no_queue_unread() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("JoinT", 8).await;
    let ra = Recorder::default();
    let a = start(b.consumer_config("JoinG"), "JoinT", ra.clone()).await;
    wait_for(Duration::from_secs(10), || async { owned(&a) == 8 }).await;

    let joiner = start(b.consumer_config("JoinG"), "JoinT", Recorder::default()).await;
    wait_for(Duration::from_secs(10), || async {
        owned(&a) == 4 && owned(&joiner) == 4
    })
    .await;
    joiner.shutdown().await;
    wait_for(Duration::from_secs(10), || async { owned(&a) == 8 }).await;

    for q in 0..8 {
        send_to_queue(&b.addr, "JoinT", q, &format!("after-leave-{q}")).await;
    }
    wait_for(Duration::from_secs(10), || async {
        let ids: BTreeSet<String> = ra.ids().into_iter().collect();
        (0..8).all(|q| ids.contains(&format!("after-leave-{q}")))
    })
    .await;
    // Counted just after the queues change hands, on the rebalancing task.
    wait_for(Duration::from_secs(10), || async {
        a.stats().rebalances >= 3
    })
    .await;

    a.shutdown().await;
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn flow_control_pauses_a_queue_behind_a_slow_handler_and_then_releases_it() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("SlowT", 1).await;
    for i in 0..100 {
        send_to_queue(&b.addr, "SlowT", 0, &format!("slow-{i}")).await;
    }
    let recorder = Recorder::slow(Duration::from_millis(10));
    let config = ConsumerConfig {
        pull_threshold_for_queue: 10,
        consume_thread_max: 2,
        ..b.consumer_config("SlowG")
    };
    let c = start(config, "SlowT", recorder.clone()).await;
    // The handler records a batch before it returns; the consumer counts
    // the batch as consumed after: wait for both.
    wait_for(Duration::from_secs(20), || async {
        recorder.count() >= 100 && c.stats().consumed >= 100
    })
    .await;
    let stats = c.stats();
    eprintln!("flow control: {stats:?}");
    assert!(stats.flow_control_pauses > 0, "{stats:?}");
    assert_eq!(stats.consumed, 100);
    let ids: BTreeSet<String> = recorder.ids().into_iter().collect();
    assert_eq!(ids.len(), 100);

    c.shutdown().await;
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_sent_while_the_pull_is_parked_is_handled_promptly() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("PollT", 1).await;
    let recorder = Recorder::default();
    let c = start(b.consumer_config("PollG"), "PollT", recorder.clone()).await;
    wait_for(Duration::from_secs(10), || async { owned(&c) == 1 }).await;
    // Let the first pull reach the broker and park there.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut delays = HashMap::new();
    for i in 0..3 {
        let body = format!("poll-{i}");
        let sent_at = Instant::now();
        send_to_queue(&b.addr, "PollT", 0, &body).await;
        wait_for(Duration::from_secs(5), || async {
            recorder.ids().contains(&body)
        })
        .await;
        let handled_at = recorder
            .seen
            .lock()
            .unwrap()
            .iter()
            .find(|(m, _)| m.msg_id == body)
            .map(|(_, t)| *t)
            .unwrap();
        delays.insert(body, handled_at - sent_at);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    eprintln!("long polling: send-to-handler delays {delays:?}");
    assert!(delays.values().all(|d| *d < Duration::from_secs(5)));

    c.shutdown().await;
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_member_joining_is_announced_by_the_broker_and_the_group_rebalances_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("NoticeT", 8).await;
    // No periodic check within the test: only the broker's notice can make
    // the first member give queues up.
    let slow = |group: &str| ConsumerConfig {
        membership_check_interval: Duration::from_secs(600),
        rebalance_interval: Duration::from_secs(600),
        ..b.consumer_config(group)
    };
    let a = start(slow("NoticeG"), "NoticeT", Recorder::default()).await;
    wait_for(Duration::from_secs(10), || async { owned(&a) == 8 }).await;
    let joiner = start(slow("NoticeG"), "NoticeT", Recorder::default()).await;
    wait_for(Duration::from_secs(10), || async {
        owned(&a) == 4 && owned(&joiner) == 4
    })
    .await;
    assert!(a.stats().membership_notices >= 1, "{:?}", a.stats());
    joiner.shutdown().await;
    // The leaver's unregistration is announced too.
    wait_for(Duration::from_secs(10), || async { owned(&a) == 8 }).await;
    a.shutdown().await;
    b.broker.shutdown().await;
}

/// A handler that records how many of its calls run at once and how big
/// each batch is; its first `gate` calls wait until that many run together.
#[derive(Clone)]
struct Gauge {
    running: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    calls: Arc<AtomicUsize>,
    largest_batch: Arc<AtomicUsize>,
    handled: Arc<AtomicUsize>,
    gate: usize,
    together: Arc<tokio::sync::Barrier>,
}

impl consumer_client::MessageHandler for Gauge {
    async fn consume(&self, messages: &[consumer_client::MessageExt]) -> ConsumeStatus {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        self.largest_batch
            .fetch_max(messages.len(), Ordering::SeqCst);
        if self.calls.fetch_add(1, Ordering::SeqCst) < self.gate {
            self.together.wait().await;
        }
        self.running.fetch_sub(1, Ordering::SeqCst);
        self.handled.fetch_add(messages.len(), Ordering::SeqCst);
        ConsumeStatus::Success
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handler_calls_run_up_to_consume_thread_max_at_once_with_batches_of_at_most_the_batch_size()
{
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("PoolT", 1).await;
    for i in 0..40 {
        send_to_queue(&b.addr, "PoolT", 0, &format!("pool-{i}")).await;
    }
    let threads = 3;
    let gauge = Gauge {
        running: Arc::default(),
        most: Arc::default(),
        calls: Arc::default(),
        largest_batch: Arc::default(),
        handled: Arc::default(),
        // The first three calls pass only together: the test hangs (and
        // fails at its limit) unless three run at once.
        gate: threads,
        together: Arc::new(tokio::sync::Barrier::new(threads)),
    };
    let config = ConsumerConfig {
        consume_thread_max: threads,
        consume_message_batch_max_size: 4,
        ..b.consumer_config("PoolG")
    };
    let c = PushConsumer::start(config.subscribe("PoolT", "*"), gauge.clone())
        .await
        .unwrap();
    wait_for(Duration::from_secs(20), || async {
        gauge.handled.load(Ordering::SeqCst) >= 40 && c.stats().consumed >= 40
    })
    .await;
    assert_eq!(gauge.most.load(Ordering::SeqCst), threads);
    assert_eq!(gauge.largest_batch.load(Ordering::SeqCst), 4);
    assert_eq!(c.stats().consumed, 40);
    c.shutdown().await;
    b.broker.shutdown().await;
}
