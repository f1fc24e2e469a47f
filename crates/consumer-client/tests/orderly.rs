//! Orderly push consumers: a queue is handled by one consumer at a time, one
//! batch at a time, in order, across a rebalance; a failed message is
//! retried on the spot and nothing after it is handled first.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicI32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use common::wait_for;
use consumer_client::{ConsumeStatus, ConsumerConfig, MessageExt, MessageHandler, PushConsumer};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};

const QUEUES: u32 = 4;
const KEYS: u32 = 8;

/// Records what each queue's handler calls saw, and whether two calls of a
/// queue ever overlapped (across every consumer sharing it).
#[derive(Clone, Default)]
struct Checker {
    in_flight: Arc<[AtomicI32; QUEUES as usize]>,
    overlapped: Arc<AtomicBool>,
    /// Key → sequence numbers in handling order.
    seen: Arc<Mutex<BTreeMap<u32, Vec<u32>>>>,
    /// Body that fails until it was delivered this many times.
    fail_first: Option<(String, i32)>,
}

impl MessageHandler for Checker {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let this = self.clone();
        let batch = messages.to_vec();
        async move {
            let q = batch[0].queue_id as usize;
            if this.in_flight[q].fetch_add(1, Ordering::SeqCst) != 0 {
                this.overlapped.store(true, Ordering::SeqCst);
            }
            // Long enough for an overlapping call to show.
            tokio::time::sleep(Duration::from_millis(2)).await;
            let mut status = ConsumeStatus::Success;
            for m in &batch {
                let body = String::from_utf8_lossy(&m.body).into_owned();
                if let Some((poison, times)) = &this.fail_first {
                    if *poison == body && m.reconsume_times < *times {
                        status = ConsumeStatus::RetryLater;
                        continue;
                    }
                }
                let (key, seq) = body.split_once(':').unwrap();
                this.seen
                    .lock()
                    .unwrap()
                    .entry(key.parse().unwrap())
                    .or_default()
                    .push(seq.parse().unwrap());
            }
            this.in_flight[q].fetch_sub(1, Ordering::SeqCst);
            status
        }
    }
}

impl Checker {
    fn total(&self) -> usize {
        self.seen.lock().unwrap().values().map(Vec::len).sum()
    }
}

async fn send(client: &RemotingClient, addr: &str, topic: &str, key: u32, seq: u32) {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: (key % QUEUES) as i32,
        properties: Some(format!("KEYS\u{1}k{key}\u{2}")),
        ..SendMessageRequestHeader::default()
    });
    let req = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(format!("{key}:{seq}").into_bytes());
    let resp = client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
}

fn orderly(b: &common::TestBroker, group: &str, topic: &str) -> ConsumerConfig {
    ConsumerConfig {
        consume_orderly: true,
        suspend_current_queue_time: Duration::from_millis(100),
        consume_message_batch_max_size: 2,
        ..b.consumer_config(group)
    }
    .subscribe(topic, "*")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_orderly_consumers_never_share_a_queue_and_keep_each_keys_order() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("OrdT", QUEUES as i32).await;
    let client = RemotingClient::new(ClientOptions::default());
    let checker = Checker::default();
    let a = PushConsumer::start(orderly(&b, "OrdG", "OrdT"), checker.clone())
        .await
        .unwrap();
    let per_key = 30;
    for seq in 0..per_key / 2 {
        for key in 0..KEYS {
            send(&client, &b.addr, "OrdT", key, seq).await;
        }
    }
    wait_for(Duration::from_secs(20), || async {
        checker.total() >= (KEYS * per_key / 4) as usize
    })
    .await;
    // A second member takes half of the queues while messages flow.
    let joiner = PushConsumer::start(orderly(&b, "OrdG", "OrdT"), checker.clone())
        .await
        .unwrap();
    for seq in per_key / 2..per_key {
        for key in 0..KEYS {
            send(&client, &b.addr, "OrdT", key, seq).await;
        }
    }
    wait_for(Duration::from_secs(30), || async {
        checker.total() >= (KEYS * per_key) as usize
    })
    .await;
    wait_for(Duration::from_secs(10), || async {
        let owned = |c: &PushConsumer| {
            c.owned_queues()
                .iter()
                .filter(|q| q.topic == "OrdT")
                .count()
        };
        owned(&a) == 2 && owned(&joiner) == 2
    })
    .await;
    assert!(
        !checker.overlapped.load(Ordering::SeqCst),
        "two handler calls of one queue overlapped"
    );
    let seen = checker.seen.lock().unwrap().clone();
    for (key, seqs) in &seen {
        let expected: Vec<u32> = (0..per_key).collect();
        assert_eq!(seqs, &expected, "key {key} out of order or repeated");
    }
    joiner.shutdown().await;
    a.shutdown().await;
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_message_holds_its_queue_until_it_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("OrdF", 1).await;
    let client = RemotingClient::new(ClientOptions::default());
    let checker = Checker {
        fail_first: Some(("0:3".to_owned(), 2)),
        ..Checker::default()
    };
    let config = ConsumerConfig {
        consume_message_batch_max_size: 1,
        ..orderly(&b, "OrdFG", "OrdF")
    };
    let c = PushConsumer::start(config, checker.clone()).await.unwrap();
    for seq in 0..8 {
        send(&client, &b.addr, "OrdF", 0, seq).await;
    }
    wait_for(Duration::from_secs(20), || async { checker.total() >= 8 }).await;
    assert_eq!(
        checker.seen.lock().unwrap()[&0],
        (0..8).collect::<Vec<u32>>(),
        "seq 3 failed twice, then the rest followed in order"
    );
    let stats = c.stats();
    assert_eq!(stats.retried, 2, "{stats:?}");
    assert_eq!(stats.sent_back, 0, "retried in place, not sent back");
    c.shutdown().await;
    b.broker.shutdown().await;
}
