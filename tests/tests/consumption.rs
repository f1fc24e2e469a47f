//! Sluice's own clients against real broker processes: a poison message
//! ends in the dead-letter topic while its queue moves on; delayed and
//! timer messages survive a kill -9 of the broker and arrive once due; two
//! orderly consumers never handle one queue at the same time and keep each
//! key's order across a rebalance.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::{BTreeMap, HashMap},
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicI32, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, MessageExt, MessageHandler, MessageQueue,
    PullConsumer, PullStatus, PushConsumer,
};
use e2e_tests::{unique, wait_for, E2eEnv, OwnBroker};
use producer_client::{select_by_key, Message, Producer, ProducerConfig};

/// Every delay level one second, so retries come back quickly.
const FAST_LEVELS: &str = "messageDelayLevel=1s 1s 1s 1s 1s";

fn consumer_config(namesrv: &str, group: &str) -> ConsumerConfig {
    ConsumerConfig {
        consume_from_where: ConsumeFromWhere::FirstOffset,
        membership_check_interval: Duration::from_millis(200),
        persist_consumer_offset_interval: Duration::from_millis(500),
        pull_time_delay_when_exception: Duration::from_millis(200),
        ..ConsumerConfig::new(namesrv, group)
    }
}

async fn producer(namesrv: &str) -> Producer {
    Producer::start(ProducerConfig::with_namesrv(namesrv))
        .await
        .unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Fails every delivery of the body `poison`; records every delivery.
#[derive(Clone, Default)]
struct Poisoned {
    deliveries: Arc<Mutex<Vec<(String, i32)>>>,
}

impl MessageHandler for Poisoned {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let mut failed = false;
        for m in messages {
            let body = String::from_utf8_lossy(&m.body).into_owned();
            failed |= body == "poison";
            self.deliveries
                .lock()
                .unwrap()
                .push((body, m.reconsume_times));
        }
        async move {
            if failed {
                ConsumeStatus::RetryLater
            } else {
                ConsumeStatus::Success
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_message_reaches_the_dead_letter_topic_while_its_queue_moves_on() {
    let Some(env) = E2eEnv::from_env("poison message to the dead-letter topic") else {
        return;
    };
    let broker = OwnBroker::start(&env, "poison", &[FAST_LEVELS]).unwrap();
    let topic = unique("Poison");
    let group = unique("poison-");
    let p = producer(&broker.namesrv).await;
    for i in 0..20 {
        let body = if i == 7 {
            "poison".to_owned()
        } else {
            format!("ok-{i}")
        };
        p.send(Message::new(topic.as_str(), body)).await.unwrap();
    }
    let handler = Poisoned::default();
    let config = ConsumerConfig {
        max_reconsume_times: 2,
        ..consumer_config(&broker.namesrv, &group)
    }
    .subscribe(&topic, "*");
    let consumer = PushConsumer::start(config, handler.clone()).await.unwrap();
    let deliveries = |body: &str| -> Vec<i32> {
        handler
            .deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _)| b == body)
            .map(|(_, n)| *n)
            .collect()
    };
    let ok_count = || {
        handler
            .deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _)| b != "poison")
            .count()
    };
    wait_for(Duration::from_secs(30), || async { ok_count() >= 19 })
        .await
        .unwrap();
    wait_for(Duration::from_secs(60), || async {
        consumer.stats().sent_back >= 3
    })
    .await
    .unwrap();
    assert_eq!(deliveries("poison"), [0, 1, 2]);

    let probe = PullConsumer::start(ConsumerConfig::new(&broker.namesrv, &group))
        .await
        .unwrap();
    let dlq = format!("%DLQ%{group}");
    wait_for(Duration::from_secs(15), || async {
        !probe
            .fetch_queues(&dlq)
            .await
            .unwrap_or_default()
            .is_empty()
    })
    .await
    .unwrap();
    let queue = probe.fetch_queues(&dlq).await.unwrap().remove(0);
    // The route appears when the dead-letter topic is made, which can be
    // before its message is indexed: wait until a pull finds something.
    wait_for(Duration::from_secs(15), || async {
        probe
            .pull(&queue, 0, 32)
            .await
            .is_ok_and(|p| p.status != PullStatus::NoNewMsg)
    })
    .await
    .unwrap();
    let pulled = probe.pull(&queue, 0, 32).await.unwrap();
    assert_eq!(pulled.status, PullStatus::Found);
    assert_eq!(pulled.messages.len(), 1);
    assert_eq!(&pulled.messages[0].body[..], b"poison");
    assert_eq!(pulled.messages[0].reconsume_times, 3);
    println!(
        "poison: 19 others consumed, poison delivered {:?} times then in {dlq}",
        deliveries("poison")
    );
    consumer.shutdown().await;
    probe.shutdown().await;
    p.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_and_timer_messages_survive_a_kill_9_and_arrive_once_due() {
    let Some(env) = E2eEnv::from_env("delayed and timer messages across kill -9") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "timers", &["messageDelayLevel=3s 3s 3s"]).unwrap();
    let topic = unique("Timed");
    let p = producer(&broker.namesrv).await;
    let n = 20;
    let mut due: HashMap<String, i64> = HashMap::new();
    for i in 0..n {
        let sent_at = now_ms();
        let delayed = Message::new(topic.as_str(), format!("level-{i}")).with_delay_level(2);
        p.send(delayed).await.unwrap();
        due.insert(format!("level-{i}"), sent_at + 3_000);
        let at = now_ms() + 4_000;
        let timer = Message::new(topic.as_str(), format!("timer-{i}"))
            .with_property("TIMER_DELIVER_MS", at.to_string());
        p.send(timer).await.unwrap();
        due.insert(format!("timer-{i}"), at);
    }
    p.shutdown().await;
    let killed_at = now_ms();
    broker.kill_and_restart().unwrap();

    let probe = PullConsumer::start(ConsumerConfig::new(&broker.namesrv, unique("probe-")))
        .await
        .unwrap();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut next: HashMap<MessageQueue, u64> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < due.len() {
        assert!(
            Instant::now() < deadline,
            "{} of {} delayed and timer messages arrived after the restart",
            seen.len(),
            due.len()
        );
        let queues = probe.fetch_queues(&topic).await.unwrap_or_default();
        for q in queues {
            let from = next.get(&q).copied().unwrap_or(0);
            let r = probe.pull(&q, from, 32).await.unwrap();
            next.insert(q, r.next_begin_offset);
            for m in r.messages {
                let body = String::from_utf8_lossy(&m.body).into_owned();
                let due_at = due[&body];
                assert!(
                    m.store_timestamp_ms >= due_at,
                    "{body} delivered {} ms before it was due",
                    due_at - m.store_timestamp_ms
                );
                *seen.entry(body).or_default() += 1;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let twice = seen.values().filter(|&&c| c > 1).count();
    println!(
        "kill -9 {} ms after the sends: all {} delayed and timer messages arrived once due; \
         {twice} twice",
        now_ms() - killed_at,
        seen.len()
    );
    probe.shutdown().await;
}

const QUEUES: u32 = 4;

/// A queue: its broker (the messages' store host) and its id.
type QueueKey = (std::net::SocketAddr, u32);

/// Records each key's sequence numbers in handling order, and whether two
/// handler calls of one queue ever overlapped.
#[derive(Clone, Default)]
struct OrderChecker {
    in_flight: Arc<Mutex<HashMap<QueueKey, Arc<AtomicI32>>>>,
    overlapped: Arc<AtomicBool>,
    seen: Arc<Mutex<BTreeMap<String, Vec<u32>>>>,
}

impl MessageHandler for OrderChecker {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let this = self.clone();
        let batch = messages.to_vec();
        async move {
            // One queue: its broker (the store host) and its id.
            let key = (batch[0].store_host, batch[0].queue_id);
            let counter = Arc::clone(this.in_flight.lock().unwrap().entry(key).or_default());
            if counter.fetch_add(1, Ordering::SeqCst) != 0 {
                this.overlapped.store(true, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
            for m in &batch {
                let body = String::from_utf8_lossy(&m.body).into_owned();
                let (k, seq) = body.split_once(':').unwrap();
                this.seen
                    .lock()
                    .unwrap()
                    .entry(k.to_owned())
                    .or_default()
                    .push(seq.parse().unwrap());
            }
            counter.fetch_sub(1, Ordering::SeqCst);
            ConsumeStatus::Success
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_orderly_consumers_never_share_a_queue_and_keep_each_keys_order() {
    let Some(env) = E2eEnv::from_env("orderly consumers across a rebalance") else {
        return;
    };
    let topic = unique("Orderly");
    env.create_topic(&topic, QUEUES as i32).await.unwrap();
    let group = unique("orderly-");
    let orderly = || {
        ConsumerConfig {
            consume_orderly: true,
            suspend_current_queue_time: Duration::from_millis(100),
            consume_message_batch_max_size: 2,
            ..consumer_config(&env.namesrv, &group)
        }
        .subscribe(&topic, "*")
    };
    let checker = OrderChecker::default();
    let a = PushConsumer::start(orderly(), checker.clone())
        .await
        .unwrap();
    let p = producer(&env.namesrv).await;
    let (keys, per_key) = (8u32, if env.quick { 30 } else { 200 });
    let send_range = |from: u32, to: u32| {
        let p = &p;
        let topic = topic.clone();
        async move {
            for seq in from..to {
                for k in 0..keys {
                    let m = Message::new(topic.as_str(), format!("k{k}:{seq}"));
                    p.send_with_selector(m, select_by_key, format!("k{k}").as_str())
                        .await
                        .unwrap();
                }
            }
        }
    };
    send_range(0, per_key / 2).await;
    let half = (keys * per_key / 4) as usize;
    let total = || {
        checker
            .seen
            .lock()
            .unwrap()
            .values()
            .map(Vec::len)
            .sum::<usize>()
    };
    wait_for(Duration::from_secs(30), || async { total() >= half })
        .await
        .unwrap();
    let joiner = PushConsumer::start(orderly(), checker.clone())
        .await
        .unwrap();
    send_range(per_key / 2, per_key).await;
    wait_for(Duration::from_secs(60), || async {
        total() >= (keys * per_key) as usize
    })
    .await
    .unwrap();
    let owned = |c: &PushConsumer| c.owned_queues().iter().filter(|q| q.topic == topic).count();
    wait_for(Duration::from_secs(15), || async {
        owned(&a) > 0 && owned(&joiner) > 0
    })
    .await
    .unwrap();
    assert!(
        !checker.overlapped.load(Ordering::SeqCst),
        "two handler calls of one queue overlapped"
    );
    let seen = checker.seen.lock().unwrap().clone();
    for (k, seqs) in &seen {
        // Nothing is handled before everything before it of its key; a
        // redelivery (at least once) may repeat a tail, never skip ahead.
        let mut max_so_far: Option<u32> = None;
        for &s in seqs {
            assert!(
                max_so_far.map_or(s == 0, |m| s <= m + 1),
                "key {k} skipped ahead: {seqs:?}"
            );
            max_so_far = Some(max_so_far.map_or(s, |m| m.max(s)));
        }
        assert_eq!(max_so_far, Some(per_key - 1), "key {k} incomplete");
    }
    let repeated: usize = seen.values().map(|v| v.len()).sum::<usize>() - (keys * per_key) as usize;
    println!(
        "orderly: {} messages of {keys} keys in order across a rebalance ({} and {} queues), \
         {repeated} handled again",
        keys * per_key,
        owned(&a),
        owned(&joiner)
    );
    joiner.shutdown().await;
    a.shutdown().await;
    p.shutdown().await;
}
