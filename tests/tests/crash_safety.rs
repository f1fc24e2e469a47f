//! Crash safety on real processes: a broker is killed with SIGKILL while a
//! producer sends to it, restarted on the same store, and every send it had
//! acknowledged is read back intact at the queue offset it was given.
//! Several cycles each under ASYNC_FLUSH and SYNC_FLUSH (the page cache
//! outlives the process, and SYNC_FLUSH also waits for the disk).
//!
//! A consumer group commits offsets all along; after each restart its
//! offsets are intact: at least what was committed before the last offset
//! flush (`flushConsumerOffsetInterval`), at most the last commit, and
//! always a value that was committed (commits after the last flush may be
//! lost, which redelivers, never skips).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::HashMap,
    path::Path,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use consumer_client::{ConsumerConfig, MessageQueue, PullConsumer, PullStatus};
use e2e_tests::{free_port, spawn_broker, unique, E2eEnv, Proc};
use producer_client::{Message, Producer, ProducerConfig};

/// One acknowledged send.
#[derive(Debug, Clone)]
struct Ack {
    index: u64,
    broker_name: String,
    queue_id: u32,
    queue_offset: u64,
    msg_id: String,
}

fn body(i: u64) -> Vec<u8> {
    format!("crash-{i:012}-").repeat(20).into_bytes()
}

/// How often the broker writes consumer offsets to disk in these runs (ms).
const OFFSET_FLUSH_MS: u64 = 200;
/// The consumer group whose offsets must survive.
const GROUP: &str = "crash-offsets";

/// Starts the broker on `dir`; the process is killed when dropped (also when
/// a check fails).
fn start_broker(bin: &Path, dir: &Path, port: u16, ns_port: u16, flush: &str) -> Proc {
    spawn_broker(
        bin,
        dir,
        port,
        ns_port,
        &[
            format!("flushDiskType={flush}"),
            format!("flushConsumerOffsetInterval={OFFSET_FLUSH_MS}"),
        ],
        &[],
    )
    .unwrap()
}

/// Every offset committed per queue id, in commit order.
type Commits = HashMap<u32, Vec<u64>>;

/// The next offset to commit per queue: one past its highest acknowledged
/// message.
fn frontier(acks: &[Ack]) -> HashMap<u32, (String, u64)> {
    let mut out: HashMap<u32, (String, u64)> = HashMap::new();
    for a in acks {
        let e = out
            .entry(a.queue_id)
            .or_insert_with(|| (a.broker_name.clone(), 0));
        e.1 = e.1.max(a.queue_offset + 1);
    }
    out
}

/// Commits the group's offset of every queue that moved on, recording it;
/// returns what it committed.
async fn commit_frontier(
    consumer: &PullConsumer,
    topic: &str,
    acks: &Mutex<Vec<Ack>>,
    commits: &Mutex<Commits>,
) -> Result<HashMap<u32, u64>, consumer_client::ConsumerError> {
    let todo = frontier(&acks.lock().unwrap());
    let mut committed = HashMap::new();
    for (queue_id, (broker_name, offset)) in todo {
        let last = commits
            .lock()
            .unwrap()
            .get(&queue_id)
            .and_then(|c| c.last().copied());
        if last.is_some_and(|l| l >= offset) {
            continue;
        }
        let queue = MessageQueue {
            topic: topic.to_owned(),
            broker_name,
            queue_id,
        };
        // Record before the commit: a commit cut short by the kill may still
        // have reached the broker.
        commits
            .lock()
            .unwrap()
            .entry(queue_id)
            .or_default()
            .push(offset);
        consumer.commit_offset(&queue, offset).await?;
        committed.insert(queue_id, offset);
    }
    Ok(committed)
}

/// The group's offsets of `topic` in the broker's offset file under `store`
/// (`config/consumerOffset.json`, `{"offsetTable":{"T@G":{0:12,1:40}}}`,
/// replaced atomically), or none before it has written any.
fn offsets_on_disk(store: &Path, topic: &str) -> HashMap<u32, u64> {
    let text = std::fs::read_to_string(store.join("config").join("consumerOffset.json"))
        .unwrap_or_default();
    let key = format!("\"{topic}@{GROUP}\":{{");
    let Some(at) = text.find(&key) else {
        return HashMap::new();
    };
    let rest = &text[at + key.len()..];
    let table = &rest[..rest.find('}').unwrap_or(0)];
    table
        .split(',')
        .filter_map(|pair| {
            let (queue, offset) = pair.split_once(':')?;
            Some((queue.trim().parse().ok()?, offset.trim().parse().ok()?))
        })
        .collect()
}

/// Waits (up to 20 s) until the broker's offset file holds at least
/// `committed` for each of those queues, and returns what the file holds
/// then: offsets that must survive a kill.
async fn flushed_offsets(
    store: &Path,
    topic: &str,
    committed: &HashMap<u32, u64>,
) -> HashMap<u32, u64> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let on_disk = offsets_on_disk(store, topic);
        if committed
            .iter()
            .all(|(q, o)| on_disk.get(q).is_some_and(|d| d >= o))
        {
            return on_disk;
        }
        assert!(
            Instant::now() < deadline,
            "committed offsets {committed:?} not in the offset file within 20 s: {on_disk:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn crash_cycles(env: &E2eEnv, flush: &str, cycles: usize) {
    let bin = env.broker_bin.clone().expect("SLUICE_E2E_BROKER_A_BIN");
    let dir = env
        .dir
        .clone()
        .expect("SLUICE_E2E_DIR")
        .join(unique(&format!("crash-{flush}-")));
    std::fs::create_dir_all(&dir).unwrap();
    let (port, ns_port) = (free_port().unwrap(), free_port().unwrap());
    let topic = unique("Crash");
    let acks: Arc<Mutex<Vec<Ack>>> = Arc::default();
    let mut next_index = 0u64;
    let mut child = start_broker(&bin, &dir, port, ns_port, flush);
    let offsets_consumer = Arc::new(
        PullConsumer::start(ConsumerConfig::new(&format!("127.0.0.1:{ns_port}"), GROUP))
            .await
            .unwrap(),
    );
    let commits: Arc<Mutex<Commits>> = Arc::default();
    let mut acked_before = 0;
    for cycle in 0..cycles {
        let producer = Arc::new(
            Producer::start(ProducerConfig::with_namesrv(&format!(
                "127.0.0.1:{ns_port}"
            )))
            .await
            .unwrap(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let sender = {
            let (producer, stop, acks, topic) = (
                Arc::clone(&producer),
                Arc::clone(&stop),
                Arc::clone(&acks),
                topic.clone(),
            );
            let start = next_index;
            tokio::spawn(async move {
                let mut i = start;
                while !stop.load(Ordering::Relaxed) {
                    match producer.send(Message::new(&topic, body(i))).await {
                        Ok(r) => acks.lock().unwrap().push(Ack {
                            index: i,
                            broker_name: r.message_queue.broker_name.clone(),
                            queue_id: r.message_queue.queue_id,
                            queue_offset: r.queue_offset,
                            msg_id: r.msg_id,
                        }),
                        Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
                    }
                    i += 1;
                }
                i
            })
        };
        // After the first acknowledgement, commit offsets and wait until the
        // broker has written them to its offset file; what the file holds
        // then must survive. (A queue without a new acknowledgement keeps
        // what the restarted broker loaded, which may be older than its last
        // commit: that one may have been lost with the previous kill.)
        let deadline = Instant::now() + Duration::from_secs(20);
        while acks.lock().unwrap().len() <= acked_before && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The topic was made by the first send; the broker tells the name
        // server of it right after, not before the acknowledgement.
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Err(e) = offsets_consumer.fetch_queues(&topic).await {
            assert!(Instant::now() < deadline, "no route for {topic}: {e}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let committed = commit_frontier(&offsets_consumer, &topic, &acks, &commits)
            .await
            .unwrap();
        let flushed = flushed_offsets(&dir.join("store"), &topic, &committed).await;
        // Keep committing while sending for a random while, then kill -9.
        let committer = {
            let (consumer, stop, acks, commits, topic) = (
                Arc::clone(&offsets_consumer),
                Arc::clone(&stop),
                Arc::clone(&acks),
                Arc::clone(&commits),
                topic.clone(),
            );
            tokio::spawn(async move {
                for _ in 0..10_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    // Commits fail once the broker is killed; that is the point.
                    let _ = commit_frontier(&consumer, &topic, &acks, &commits).await;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            })
        };
        tokio::time::sleep(Duration::from_millis(fastrand_ms(cycle))).await;
        // SIGKILL, and wait for the process to be gone.
        child.kill().unwrap();
        stop.store(true, Ordering::Relaxed);
        tokio::time::timeout(Duration::from_secs(30), committer)
            .await
            .unwrap()
            .unwrap();
        next_index = tokio::time::timeout(Duration::from_secs(30), sender)
            .await
            .unwrap()
            .unwrap();
        producer.shutdown().await;
        let acked = acks.lock().unwrap().len();
        child = start_broker(&bin, &dir, port, ns_port, flush);
        let snapshot = acks.lock().unwrap().clone();
        verify(ns_port, &topic, &snapshot).await;
        let commits_now = commits.lock().unwrap().clone();
        let kept =
            verify_offsets(&offsets_consumer, &topic, &snapshot, &flushed, &commits_now).await;
        acked_before = acked;
        println!(
            "{flush} cycle {cycle}: {acked} acknowledged so far, all found after kill -9 and \
             restart; offsets of {} queues intact ({kept} at their last commit)",
            flushed.len()
        );
    }
    offsets_consumer.shutdown().await;
    child.kill().unwrap();
}

/// Checks the group's offsets after a restart: each at least what was
/// flushed before the kill, and one of the values committed. Returns how
/// many are at their last commit.
async fn verify_offsets(
    consumer: &PullConsumer,
    topic: &str,
    acks: &[Ack],
    flushed: &HashMap<u32, u64>,
    commits: &Commits,
) -> usize {
    let mut at_last = 0;
    consumer.fetch_queues(topic).await.unwrap();
    for (queue_id, (broker_name, _)) in frontier(acks) {
        let queue = MessageQueue {
            topic: topic.to_owned(),
            broker_name,
            queue_id,
        };
        let got = consumer.fetch_consume_offset(&queue).await.unwrap();
        let Some(&must) = flushed.get(&queue_id) else {
            continue;
        };
        let got = got.unwrap_or_else(|| panic!("queue {queue_id}: offset lost (flushed {must})"));
        let history = &commits[&queue_id];
        assert!(
            got >= must,
            "queue {queue_id}: offset {got} went back before the flushed {must}"
        );
        assert!(
            history.contains(&got),
            "queue {queue_id}: offset {got} was never committed ({history:?})"
        );
        if history.last() == Some(&got) {
            at_last += 1;
        }
    }
    at_last
}

/// A kill moment between 100 and 700 ms, varied per cycle and run.
fn fastrand_ms(cycle: usize) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    100 + (u64::from(nanos) / 1000 + cycle as u64 * 137) % 600
}

async fn verify(ns_port: u16, topic: &str, acks: &[Ack]) {
    let consumer = PullConsumer::start(ConsumerConfig::new(
        &format!("127.0.0.1:{ns_port}"),
        unique("crash-check-"),
    ))
    .await
    .unwrap();
    // The restarted broker registers its routes at start; wait for them.
    let deadline = Instant::now() + Duration::from_secs(20);
    while consumer
        .fetch_queues(topic)
        .await
        .map_or(true, |q| q.is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "no route for {topic} after restart"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for ack in acks {
        let queue = MessageQueue {
            topic: topic.to_owned(),
            broker_name: ack.broker_name.clone(),
            queue_id: ack.queue_id,
        };
        let got = consumer.pull(&queue, ack.queue_offset, 1).await.unwrap();
        assert!(
            matches!(got.status, PullStatus::Found),
            "message {} lost: {:?}",
            ack.index,
            got.status
        );
        let m = &got.messages[0];
        assert_eq!(m.queue_offset, ack.queue_offset);
        assert_eq!(m.msg_id, ack.msg_id, "message {} at its offset", ack.index);
        assert_eq!(m.body, body(ack.index), "body of message {}", ack.index);
    }
    consumer.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_sends_survive_kill_9_under_async_flush() {
    let Some(env) = E2eEnv::from_env("crash safety (ASYNC_FLUSH)") else {
        return;
    };
    crash_cycles(&env, "ASYNC_FLUSH", if env.quick { 2 } else { 5 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_sends_survive_kill_9_under_sync_flush() {
    let Some(env) = E2eEnv::from_env("crash safety (SYNC_FLUSH)") else {
        return;
    };
    crash_cycles(&env, "SYNC_FLUSH", if env.quick { 2 } else { 5 }).await;
}
