//! Crash safety on real processes: a broker is killed with SIGKILL while a
//! producer sends to it, restarted on the same store, and every send it had
//! acknowledged is read back intact at the queue offset it was given.
//! Several cycles each under ASYNC_FLUSH and SYNC_FLUSH (the page cache
//! outlives the process, and SYNC_FLUSH also waits for the disk).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::Path,
    process::Child,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use consumer_client::{ConsumerConfig, MessageQueue, PullConsumer, PullStatus};
use e2e_tests::{free_port, spawn_broker, unique, E2eEnv};
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

fn start_broker(bin: &Path, dir: &Path, port: u16, ns_port: u16, flush: &str) -> Child {
    spawn_broker(bin, dir, port, ns_port, &[format!("flushDiskType={flush}")]).unwrap()
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
        // Let it run a random while (after the first acknowledgement), then kill -9.
        let deadline = Instant::now() + Duration::from_secs(20);
        while acks.lock().unwrap().len() <= next_index as usize && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tokio::time::sleep(Duration::from_millis(fastrand_ms(cycle))).await;
        child.kill().unwrap();
        child.wait().unwrap();
        stop.store(true, Ordering::Relaxed);
        next_index = tokio::time::timeout(Duration::from_secs(30), sender)
            .await
            .unwrap()
            .unwrap();
        producer.shutdown().await;
        let acked = acks.lock().unwrap().len();
        child = start_broker(&bin, &dir, port, ns_port, flush);
        let snapshot = acks.lock().unwrap().clone();
        verify(ns_port, &topic, &snapshot).await;
        println!("{flush} cycle {cycle}: {acked} acknowledged so far, all found after kill -9 and restart");
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A kill moment between 100 and 700 ms, varied per cycle and run.
fn fastrand_ms(cycle: usize) -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    100 + (u64::from(nanos) / 1000 + cycle as u64 * 137) % 600
}

async fn verify(ns_port: u16, topic: &str, acks: &[Ack]) {
    let consumer = PullConsumer::new(ConsumerConfig::new(
        &format!("127.0.0.1:{ns_port}"),
        unique("crash-check-"),
    ))
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
