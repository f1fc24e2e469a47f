//! Crash safety: a writer process is killed with SIGKILL at a random moment,
//! the store is recovered, and every append the writer saw acknowledged must
//! be there, intact, at the offsets it was given. Several cycles per flush
//! mode, each cycle appending to a fresh topic of the same store.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    sync::mpsc,
    thread,
    time::{Duration, Instant},
};

use store::{GetStatus, MessageStore, StoreConfig};

/// One acknowledged append as the writer printed it.
#[derive(Debug, Clone, Copy)]
struct Ack {
    index: u64,
    queue_id: i32,
    queue_offset: i64,
    physical_offset: u64,
}

fn body(i: u64) -> Vec<u8> {
    let len = 200 + (i % 13) as usize * 61;
    let mut b = i.to_be_bytes().to_vec();
    b.extend((0..len).map(|j| (i as usize * 7 + j) as u8));
    b
}

/// Runs the writer until it is killed after `kill_after`; returns its acks.
fn write_and_kill(
    dir: &std::path::Path,
    topic: &str,
    flush: &str,
    kill_after: Duration,
) -> Vec<Ack> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash_writer"))
        .args([dir.to_str().unwrap(), topic, flush, "2000000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() == 4 {
                let _ = tx.send(Ack {
                    index: f[0].parse().unwrap(),
                    queue_id: f[1].parse().unwrap(),
                    queue_offset: f[2].parse().unwrap(),
                    physical_offset: f[3].parse().unwrap(),
                });
            }
        }
    });
    // Wait for the first acknowledgement, then let it run a random while.
    let first = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("writer acknowledged nothing");
    thread::sleep(kill_after);
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "writer was killed, not finished");
    reader.join().unwrap();
    let mut acks = vec![first];
    acks.extend(rx.try_iter());
    acks
}

fn verify(store: &MessageStore, topic: &str, acks: &[Ack]) {
    for ack in acks {
        let entry = store
            .queue_entry(topic, ack.queue_id, ack.queue_offset)
            .unwrap_or_else(|| {
                panic!(
                    "acknowledged message {} lost from the consume queue",
                    ack.index
                )
            });
        assert_eq!(
            entry.commit_log_offset as u64, ack.physical_offset,
            "message {}",
            ack.index
        );
        let got = store.get_messages(topic, ack.queue_id, ack.queue_offset, 1, 1 << 20, None);
        assert_eq!(got.status, GetStatus::Found);
        assert_eq!(
            common::record_body(&got.messages[0]),
            body(ack.index),
            "message {}",
            ack.index
        );
    }
}

fn crash_cycles(flush: &str, cycles: usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = || StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        ..StoreConfig::with_root(dir.path())
    };
    let mut history: Vec<(String, Vec<Ack>)> = Vec::new();
    for cycle in 0..cycles {
        let topic = format!("K{cycle}");
        let kill_after = Duration::from_millis(fastrand::u64(20..400));
        let acks = write_and_kill(dir.path(), &topic, flush, kill_after);
        assert!(
            dir.path().join("abort").exists(),
            "a killed writer leaves the abort file"
        );
        let started = Instant::now();
        let store = MessageStore::open(config()).unwrap();
        eprintln!(
            "{flush} cycle {cycle}: killed after {kill_after:?} with {} acknowledged; recovered in {:?}",
            acks.len(),
            started.elapsed()
        );
        history.push((topic, acks));
        for (topic, acks) in &history {
            verify(&store, topic, acks);
        }
        store.shutdown();
    }
}

#[test]
fn acknowledged_messages_survive_sigkill_under_async_flush() {
    crash_cycles("ASYNC_FLUSH", 3);
}

#[test]
fn acknowledged_messages_survive_sigkill_under_sync_flush() {
    crash_cycles("SYNC_FLUSH", 3);
}
