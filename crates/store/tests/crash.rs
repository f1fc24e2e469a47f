//! Crash safety: a writer process is killed with SIGKILL at a random moment,
//! the store is recovered, and every append the writer saw acknowledged must
//! be there, intact, at the offsets it was given, and found once by its
//! unique key. Several cycles per flush
//! mode, each cycle appending to a fresh topic of the same store.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{write_and_kill, writer_body, WriterAck};
use store::{GetStatus, MessageStore, StoreConfig};

fn verify(store: &MessageStore, topic: &str, acks: &[WriterAck]) {
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
            writer_body(ack.index),
            "message {}",
            ack.index
        );
        common::assert_found_by_unique_key(store, topic, ack);
    }
}

fn crash_cycles(flush: &str, cycles: usize) {
    let dir = tempfile::tempdir().unwrap();
    let config = || StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        max_hash_slot_num: 10_000,
        max_index_num: 40_000,
        ..StoreConfig::with_root(dir.path())
    };
    let mut history: Vec<(String, Vec<WriterAck>)> = Vec::new();
    for cycle in 0..cycles {
        let topic = format!("K{cycle}");
        let kill_after = Duration::from_millis(fastrand::u64(20..400));
        let (acks, _) = write_and_kill(dir.path(), &topic, flush, kill_after, &[]);
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
