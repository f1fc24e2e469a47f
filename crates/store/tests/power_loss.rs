//! Power loss: a writer process records every sync the store makes (the
//! sync log), is killed with SIGKILL at a random moment, and then every
//! byte no sync covered is dropped from its files ([`store::cut_power`]),
//! as a power cut would. The store is recovered and checked:
//! - SYNC_FLUSH: every acknowledged append is there, intact.
//! - ASYNC_FLUSH: what is lost is a tail of the acknowledged appends,
//!   acknowledged within the flush interval's reach of the cut.
//! - Always: each queue holds exactly its messages, in order, with no gap
//!   and nothing foreign, and appends after recovery continue both.
//!
//! Half of the cycles keep a random half of the unsynced pages, as a kernel
//! that wrote some dirty pages back before the cut would leave them.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    path::Path,
    thread,
    time::{Duration, Instant},
};

use common::{write_and_kill, writer_body as body, WriterAck as Ack};
use store::{cut_power, GetStatus, MessageStore, StoreConfig, SYNC_LOG_ENV};

fn config(dir: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        max_hash_slot_num: 10_000,
        max_index_num: 40_000,
        ..StoreConfig::with_root(dir)
    }
}

/// Checks that queue `q` of `topic` holds messages `q, q + 4, q + 8, ...`
/// from offset 0 on, each intact, and nothing else; returns its length.
fn check_queue(store: &MessageStore, topic: &str, q: i32) -> i64 {
    let max = store.max_offset_in_queue(topic, q);
    let mut offset = 0;
    while offset < max {
        let got = store.get_messages(topic, q, offset, 32, 1 << 20, None);
        assert_eq!(
            got.status,
            GetStatus::Found,
            "{topic} queue {q} offset {offset}"
        );
        for record in &got.messages {
            let index = offset as u64 * 4 + q as u64;
            let stored = match message_model::record::check(record, true) {
                message_model::record::Record::Message(m) => m.body.to_vec(),
                other => panic!(
                    "{topic} queue {q} offset {offset}: not a valid record ({other:?}), {} bytes starting {:02x?}",
                    record.len(),
                    &record[..record.len().min(32)]
                ),
            };
            assert_eq!(
                stored,
                body(index),
                "{topic} queue {q} offset {offset} should hold message {index}"
            );
            offset += 1;
        }
    }
    max
}

/// Runs `cycles` power cuts under `flush`; every other one keeps a random
/// half of the unsynced pages.
fn power_cut_cycles(flush: &str, cycles: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut topics = Vec::new();
    for cycle in 0..cycles {
        let topic = format!("P{cycle}");
        let log = dir.path().join(format!("sync-{cycle}.log"));
        let torn = cycle % 2 == 1;
        let run_for = Duration::from_millis(fastrand::u64(100..1500));
        let (acks, killed) =
            write_and_kill(dir.path(), &topic, flush, run_for, &[(SYNC_LOG_ENV, &log)]);
        let cut = cut_power(&log, &mut || torn && fastrand::bool()).unwrap();
        let store = MessageStore::open(config(dir.path())).unwrap();
        // Every queue of every topic so far is whole and in order.
        topics.push(topic.clone());
        for t in &topics {
            for q in 0..4 {
                check_queue(&store, t, q);
            }
        }
        let present = |a: &Ack| a.queue_offset < store.max_offset_in_queue(&topic, a.queue_id);
        let lost: Vec<&Ack> = acks.iter().filter(|a| !present(a)).collect();
        // The index is whole again: every message kept is found once.
        for ack in acks.iter().filter(|a| present(a)) {
            common::assert_found_by_unique_key(&store, &topic, ack);
        }
        let window = lost.first().map(|a| killed.duration_since(a.at));
        eprintln!(
            "{flush} cycle {cycle} (torn {torn}): {} acknowledged, {} lost (window {window:?}); {cut:?}",
            acks.len(),
            lost.len(),
        );
        if flush == "SYNC_FLUSH" {
            assert!(
                lost.is_empty(),
                "acknowledged under SYNC_FLUSH and lost: {lost:?}"
            );
        } else if let Some(first) = lost.first() {
            // Only a tail goes: nothing acknowledged after a lost message
            // survives, and nothing before it is lost.
            assert!(
                acks.iter().all(|a| present(a) == (a.index < first.index)),
                "the lost messages are not a tail of the acknowledged ones"
            );
            let config = config(dir.path());
            let bound = Duration::from_millis(
                config.flush_commit_log_thorough_interval + config.flush_interval_commit_log,
            );
            assert!(
                window.is_some_and(|w| w <= bound),
                "lost messages acknowledged {window:?} before the cut, beyond the flush bound {bound:?}"
            );
        }
        // The store takes appends again where the recovered queues end.
        let before = store.max_offset_in_queue(&topic, 0);
        let index = before as u64 * 4;
        let msg = store::MessageToStore {
            body: body(index).into(),
            ..common::message(&topic, 0, index, 0)
        };
        let put = store.put_message(&msg).unwrap();
        assert_eq!(put.append.queue_offset, before, "the next queue offset");
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.max_offset_in_queue(&topic, 0) == before {
            assert!(Instant::now() < deadline, "the new message was not indexed");
            thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(check_queue(&store, &topic, 0), before + 1);
        store.shutdown();
    }
}

#[test]
fn power_loss_keeps_everything_acknowledged_under_sync_flush() {
    power_cut_cycles("SYNC_FLUSH", 4);
}

#[test]
fn power_loss_under_async_flush_loses_only_a_recent_tail() {
    power_cut_cycles("ASYNC_FLUSH", 4);
}
