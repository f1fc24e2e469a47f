//! Round trip through real processes: messages sent by a producer to a topic
//! spread over both brokers all come back, to a push consumer and to a pull
//! consumer that reads every queue from its start.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, FnHandler, MessageExt, PullConsumer,
    PullStatus, PushConsumer,
};
use e2e_tests::{unique, E2eEnv};
use producer_client::{Message, Producer, ProducerConfig};

/// Concurrent sending tasks.
const SENDERS: usize = 32;
/// Queues per broker.
const QUEUES: i32 = 4;

/// Body size of message `i`: mostly small, some over the 4 KiB compression
/// threshold, a few of 64 KiB.
fn body_size(i: usize) -> usize {
    match i % 100 {
        0 => 64 * 1024,
        n if n % 10 == 1 => 5000,
        n if n % 2 == 0 => 16,
        _ => 700,
    }
}

/// The body of message `i`: its index repeated, `body_size(i)` bytes.
fn body(i: usize) -> Vec<u8> {
    format!("{i:010};")
        .into_bytes()
        .into_iter()
        .cycle()
        .take(body_size(i))
        .collect()
}

/// Mechanism: route lookup through the standalone name server, round-robin
/// queue selection over both brokers' queues, `SEND_MESSAGE_V2` (with body
/// compression above 4 KiB), CommitLog append and consume-queue dispatch;
/// then a push consumer (rebalance, long-polling `PULL_MESSAGE`,
/// decompression, offset commits) and a plain pull of every queue. Every
/// acknowledged `UNIQ_KEY` must come back with its exact body; duplicates
/// are counted and printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_sent_message_is_pulled_back_from_both_brokers() {
    let Some(env) = E2eEnv::from_env("round trip") else {
        return;
    };
    let n: usize = if env.quick { 2000 } else { 100_000 };
    let topic = unique("E2eRoundTrip");
    env.create_topic(&topic, QUEUES).await.unwrap();

    // Send.
    let started = Instant::now();
    let producer = Arc::new(
        Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
            .await
            .unwrap(),
    );
    let tasks: Vec<_> = (0..SENDERS)
        .map(|w| {
            let producer = Arc::clone(&producer);
            let topic = topic.clone();
            tokio::spawn(async move {
                let mut sent = Vec::new();
                for i in (w..n).step_by(SENDERS) {
                    let msg = Message::new(topic.as_str(), body(i)).with_key(format!("k{i}"));
                    let r = producer
                        .send(msg)
                        .await
                        .unwrap_or_else(|e| panic!("send of message {i} failed: {e}"));
                    sent.push((r.msg_id, i, r.message_queue.broker_name));
                }
                sent
            })
        })
        .collect();
    let mut sent: HashMap<String, usize> = HashMap::with_capacity(n);
    let mut per_broker: HashMap<String, usize> = HashMap::new();
    for t in tasks {
        for (id, i, broker) in tokio::time::timeout(Duration::from_secs(600), t)
            .await
            .expect("sending took over 600 s")
            .unwrap()
        {
            assert!(sent.insert(id.clone(), i).is_none(), "UNIQ_KEY {id} reused");
            *per_broker.entry(broker).or_default() += 1;
        }
    }
    producer.shutdown().await;
    println!(
        "sent {n} messages in {:.1} s, per broker {per_broker:?}",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(per_broker.len(), 2, "messages did not reach both brokers");

    let sent = Arc::new(sent);
    push_back_everything(&env, &topic, &sent).await;

    // Pull every queue from its start until its end.
    let started = Instant::now();
    let consumer = PullConsumer::start(ConsumerConfig::new(&env.namesrv, unique("e2e-rt-")))
        .await
        .unwrap();
    let queues = consumer.fetch_queues(&topic).await.unwrap();
    assert_eq!(queues.len(), 2 * usize::try_from(QUEUES).unwrap());
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(n);
    let mut unknown = Vec::new();
    for q in &queues {
        let mut offset = 0;
        loop {
            assert!(Instant::now() < deadline, "pulling took over 300 s");
            let r = consumer.pull(q, offset, 32).await.unwrap();
            for m in &r.messages {
                *seen.entry(m.msg_id.clone()).or_default() += 1;
                match sent.get(&m.msg_id) {
                    Some(&i) => {
                        assert_eq!(m.keys, vec![format!("k{i}")], "keys of {}", m.msg_id);
                        assert!(m.body == body(i), "body of message {i} differs");
                    }
                    None => unknown.push(m.msg_id.clone()),
                }
            }
            offset = r.next_begin_offset;
            if r.status == PullStatus::NoNewMsg || offset >= r.max_offset {
                break;
            }
        }
    }
    println!(
        "pulled {} distinct messages from {} queues in {:.1} s",
        seen.len(),
        queues.len(),
        started.elapsed().as_secs_f64()
    );
    let dups: Vec<_> = seen.iter().filter(|(_, &c)| c > 1).collect();
    println!("duplicates: {}", dups.len());
    for (id, c) in dups.iter().take(20) {
        println!("  duplicate {id} x{c}");
    }
    assert!(unknown.is_empty(), "pulled unknown messages: {unknown:?}");
    let missing: Vec<_> = sent.keys().filter(|id| !seen.contains_key(*id)).collect();
    assert!(
        missing.is_empty(),
        "{} of {n} sent messages not pulled, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}

/// What the push consumer saw: deliveries per `UNIQ_KEY`, and problems.
#[derive(Debug, Default)]
struct Seen {
    deliveries: HashMap<String, usize>,
    redelivered: usize,
    wrong: Vec<String>,
}

/// Consumes the topic with a push consumer of a new group from the first
/// offset until every sent message has been handed over (at most 300 s).
async fn push_back_everything(env: &E2eEnv, topic: &str, sent: &Arc<HashMap<String, usize>>) {
    let started = Instant::now();
    let config = ConsumerConfig {
        consume_from_where: ConsumeFromWhere::FirstOffset,
        consume_message_batch_max_size: 16,
        ..ConsumerConfig::new(&env.namesrv, unique("e2e-rt-push-"))
    }
    .subscribe(topic, "*");
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let handler = {
        let (seen, sent) = (Arc::clone(&seen), Arc::clone(sent));
        FnHandler(move |batch: Vec<MessageExt>| {
            let (seen, sent) = (Arc::clone(&seen), Arc::clone(&sent));
            async move {
                let mut seen = seen.lock().unwrap();
                for m in &batch {
                    match sent.get(&m.msg_id) {
                        Some(&i) if m.body == body(i) => {}
                        Some(&i) => seen.wrong.push(format!("body of message {i} differs")),
                        None => seen.wrong.push(format!("unknown message {}", m.msg_id)),
                    }
                    if m.reconsume_times > 0 {
                        seen.redelivered += 1;
                    }
                    *seen.deliveries.entry(m.msg_id.clone()).or_default() += 1;
                }
                ConsumeStatus::Success
            }
        })
    };
    let consumer = PushConsumer::start(config, handler).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while seen.lock().unwrap().deliveries.len() < sent.len() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let stats = consumer.stats();
    consumer.shutdown().await;
    let seen = seen.lock().unwrap();
    let dups = seen.deliveries.values().filter(|&&c| c > 1).count();
    println!(
        "push consumer: {} distinct of {} in {:.1} s; {dups} delivered more than once \
         ({} marked as redeliveries); {stats:?}",
        seen.deliveries.len(),
        sent.len(),
        started.elapsed().as_secs_f64(),
        seen.redelivered,
    );
    assert!(
        seen.wrong.is_empty(),
        "{:?}",
        &seen.wrong[..seen.wrong.len().min(10)]
    );
    let missing: Vec<_> = sent
        .keys()
        .filter(|id| !seen.deliveries.contains_key(*id))
        .take(10)
        .collect();
    assert!(
        missing.is_empty(),
        "push consumer missed messages within 300 s, e.g. {missing:?}"
    );
    // One consumer, no rebalance to another member and a handler that never
    // asks for a retry: nothing should come twice.
    assert_eq!(dups, 0, "duplicates without a cause");
}
