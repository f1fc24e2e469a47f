//! The message store end to end within one process: appends, reads,
//! file roll-over, concurrency, the transient store pool, page-cache busy
//! detection and recovery after a crash.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{Arc, Barrier},
    thread,
    time::{Duration, Instant},
};

use common::{config, message, record_body};
use message_model::record::{self, Record};
use store::{FlushDiskType, GetStatus, MessageStore, PutError, PutStatus, ReadCaps, StoreConfig};

fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn appended_messages_read_back_in_queue_order_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    let mut last_end = 0;
    for i in 0..600u64 {
        let out = store.put_message(&message("T", 1, i, 1000)).unwrap();
        assert_eq!(out.status, PutStatus::Ok);
        assert_eq!(out.append.queue_offset, i as i64);
        assert!(out.append.physical_offset >= last_end, "offsets only grow");
        last_end = out.append.end_offset();
    }
    assert!(
        store.max_physical_offset() > 2 * 256 * 1024,
        "rolled over several files"
    );
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("T", 1) == 600
    });
    let mut offset = 0;
    let mut seen = 0u64;
    while offset < 600 {
        let got = store.get_messages("T", 1, offset, 32, 1 << 20, None);
        assert_eq!(got.status, GetStatus::Found);
        for rec in &got.messages {
            assert_eq!(record_body(rec), common::body(seen, 1000).to_vec());
            seen += 1;
        }
        offset = got.next_begin_offset;
    }
    assert_eq!(seen, 600);
    let end = store.get_messages("T", 1, 600, 32, 1 << 20, None);
    assert_eq!(end.status, GetStatus::OffsetOverflowOne);
    assert_eq!(
        store.get_messages("T", 9, 0, 1, 1, None).status,
        GetStatus::NoMatchedLogicQueue
    );
    assert_eq!(
        store.get_messages("T", 1, 700, 1, 1, None).status,
        GetStatus::OffsetOverflowBadly
    );
}

/// Whatever thread appends, and whatever dispatch pass runs meanwhile (the
/// dispatch thread's, or another reader's), an acknowledged message is
/// readable at the very next read: reads index what is pending first,
/// waiting for a pass that is under way.
#[test]
fn every_acknowledged_message_is_readable_at_the_next_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    std::thread::scope(|s| {
        for q in 0..4 {
            let store = &store;
            s.spawn(move || {
                for i in 0..500u64 {
                    let out = store.put_message(&message("RAW", q, i, 100)).unwrap();
                    assert_eq!(out.append.queue_offset, i as i64);
                    assert_eq!(
                        store.max_offset_in_queue("RAW", q),
                        i as i64 + 1,
                        "queue {q}"
                    );
                    let got = store.get_messages("RAW", q, i as i64, 1, 1 << 20, None);
                    assert_eq!(got.status, GetStatus::Found, "queue {q} offset {i}");
                    assert_eq!(record_body(&got.messages[0]), common::body(i, 100).to_vec());
                }
            });
        }
    });
}

#[test]
fn tag_filter_and_byte_limit_apply() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    for i in 0..30 {
        store.put_message(&message("F", 0, i, 100)).unwrap();
    }
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("F", 0) == 30
    });
    let tag0 = message_model::tag_hash("tag0");
    let only_tag0 = |code: i64| code == tag0;
    let got = store.get_messages("F", 0, 0, 100, 1 << 20, Some(&only_tag0));
    assert_eq!(got.messages.len(), 10);
    for rec in &got.messages {
        let i = u64::from_be_bytes(record_body(rec)[..8].try_into().unwrap());
        assert_eq!(i % 3, 0);
    }
    let one_kib = store.get_messages("F", 0, 0, 100, 500, None);
    assert!(one_kib.messages.len() < 5, "byte limit stops the read");
}

#[test]
fn a_filter_that_matches_nothing_scans_a_bounded_stretch_per_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    let total = 2000;
    for i in 0..total {
        store.put_message(&message("N", 0, i, 10)).unwrap();
    }
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("N", 0) == total as i64
    });
    let nothing = |_: i64| false;
    let per_read = (store::MAX_FILTER_SCAN_BYTES / 20) as i64;
    let got = store.get_messages("N", 0, 0, 32, 1 << 20, Some(&nothing));
    assert_eq!(got.status, GetStatus::NoMatchedMessage);
    assert_eq!(got.next_begin_offset, per_read);
    // A read that resumes there moves on by the same stretch, to the end.
    let next = store.get_messages("N", 0, per_read, 32, 1 << 20, Some(&nothing));
    assert_eq!(next.next_begin_offset, 2 * per_read);
    let last = store.get_messages("N", 0, 2 * per_read, 32, 1 << 20, Some(&nothing));
    assert_eq!(last.next_begin_offset, total as i64);
    // A message that matches beyond the first stretch is found by resuming.
    let tag1 = message_model::tag_hash("tag1");
    let late = |code: i64| code == tag1;
    let from = per_read + 1;
    let found = store.get_messages("N", 0, from, 1, 1 << 20, Some(&late));
    assert_eq!(found.status, GetStatus::Found);
}

#[test]
fn reads_reaching_messages_no_longer_in_memory_use_the_on_disk_caps() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    for i in 0..20 {
        store.put_message(&message("D", 0, i, 1000)).unwrap();
    }
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("D", 0) == 20
    });
    let size = store.get_messages("D", 0, 0, 1, 1 << 20, None).messages[0].len();
    // The newest four messages count as in memory, the rest as on disk
    // (sizes differ by a byte or two with the index in the properties).
    let caps = ReadCaps {
        count_in_memory: 32,
        bytes_in_memory: 1 << 20,
        count_on_disk: 4,
        bytes_on_disk: size * 2 + size / 2,
        memory_bytes: (size * 4 + 100) as u64,
    };
    let old = store.get_messages_capped("D", 0, 0, &caps, None);
    assert_eq!(old.messages.len(), 2, "two fit in the on-disk bytes");
    assert_eq!(old.next_begin_offset, 2);
    let recent = store.get_messages_capped("D", 0, 16, &caps, None);
    assert_eq!(recent.messages.len(), 4, "in memory: the larger caps");
    let count_capped = ReadCaps {
        bytes_on_disk: 1 << 20,
        ..caps
    };
    assert_eq!(
        store
            .get_messages_capped("D", 0, 0, &count_capped, None)
            .messages
            .len(),
        4
    );
    let all_in_memory = ReadCaps {
        memory_bytes: u64::MAX,
        ..caps
    };
    assert_eq!(
        store
            .get_messages_capped("D", 0, 0, &all_in_memory, None)
            .messages
            .len(),
        20
    );
}

#[test]
fn concurrent_writers_get_contiguous_offsets_and_a_consistent_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(config(dir.path())).unwrap());
    let writers = 8;
    let per_writer = 300;
    let barrier = Arc::new(Barrier::new(writers));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let store = Arc::clone(&store);
            let barrier = Arc::clone(&barrier);
            thread::spawn(move || {
                barrier.wait();
                (0..per_writer)
                    .map(|i| {
                        let n = (w * per_writer + i) as u64;
                        let out = store
                            .put_message(&message("C", 0, n, 200 + (n % 7) as usize * 50))
                            .unwrap();
                        (
                            out.append.physical_offset,
                            out.append.wrote_bytes,
                            out.append.queue_offset,
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all: Vec<(u64, usize, i64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    all.sort();
    let total = writers * per_writer;
    let mut queue_offsets: Vec<i64> = all.iter().map(|a| a.2).collect();
    queue_offsets.sort_unstable();
    assert_eq!(queue_offsets, (0..total as i64).collect::<Vec<_>>());
    for pair in all.windows(2) {
        let (a_off, a_len, _) = pair[0];
        let (b_off, _, _) = pair[1];
        let file = 256 * 1024;
        let same_file = a_off / file == b_off / file;
        if same_file {
            assert_eq!(a_off + a_len as u64, b_off, "contiguous within a file");
        } else {
            assert!(a_off + a_len as u64 <= b_off, "no overlap across files");
        }
    }
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("C", 0) == total as i64
    });
    for (phys, len, qo) in &all {
        let e = store.queue_entry("C", 0, *qo).unwrap();
        assert_eq!((e.commit_log_offset as u64, e.size as usize), (*phys, *len));
    }
}

#[test]
fn pooled_writes_become_readable_after_commit() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        transient_store_pool_enable: true,
        transient_store_pool_size: 3,
        commit_interval_commit_log: 20,
        commit_commit_log_thorough_interval: 20,
        ..config(dir.path())
    };
    let store = MessageStore::open(cfg).unwrap();
    for i in 0..400 {
        store.put_message(&message("P", 0, i, 1000)).unwrap();
    }
    wait_until("commit and dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("P", 0) == 400
    });
    let got = store.get_messages("P", 0, 399, 1, 1 << 20, None);
    assert_eq!(
        record_body(&got.messages[0]),
        common::body(399, 1000).to_vec()
    );
    assert!(!store.is_transient_store_pool_deficient());
}

#[test]
fn fast_fail_without_pool_buffer_refuses_the_append() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        transient_store_pool_enable: true,
        transient_store_pool_size: 1,
        fast_fail_if_no_buffer_in_store_pool: true,
        // Commit so rarely that the first file keeps its buffer.
        commit_interval_commit_log: 60_000,
        commit_commit_log_thorough_interval: 60_000,
        commit_commit_log_least_pages: 1_000_000,
        ..config(dir.path())
    };
    let store = MessageStore::open(cfg).unwrap();
    store.put_message(&message("P", 0, 0, 1000)).unwrap();
    assert!(
        store.is_transient_store_pool_deficient(),
        "the only buffer is on loan"
    );
    let mut refused = None;
    for i in 1..1000 {
        if let Err(e) = store.put_message(&message("P", 0, i, 1000)) {
            refused = Some(e);
            break;
        }
    }
    assert!(
        matches!(refused, Some(PutError::CreateMappedFileFailed { .. })),
        "second file needs a buffer: {refused:?}"
    );
}

#[test]
fn holding_the_put_lock_past_the_threshold_is_page_cache_busy() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        os_page_cache_busy_time_out_mills: 100,
        ..config(dir.path())
    };
    let store = Arc::new(MessageStore::open(cfg).unwrap());
    store.put_message(&message("B", 0, 0, 10)).unwrap();
    assert!(!store.is_os_page_cache_busy());
    store.set_fault_put_lock_delay_ms(400);
    let writer = {
        let store = Arc::clone(&store);
        thread::spawn(move || store.put_message(&message("B", 0, 1, 10)))
    };
    wait_until("page cache busy", Duration::from_secs(5), || {
        store.is_os_page_cache_busy()
    });
    assert!(store.lock_time_mills() > 100);
    let refused = store.put_message(&message("B", 0, 2, 10));
    assert!(
        matches!(refused, Err(PutError::OsPageCacheBusy { held_ms }) if held_ms > 100),
        "{refused:?}"
    );
    writer.join().unwrap().unwrap();
    assert!(!store.is_os_page_cache_busy(), "released lock is not busy");
    assert_eq!(store.lock_time_mills(), 0);
}

#[test]
fn spin_lock_mode_appends_too() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        use_reentrant_lock_when_put_message: false,
        ..config(dir.path())
    };
    let store = MessageStore::open(cfg).unwrap();
    for i in 0..50 {
        assert_eq!(
            store
                .put_message(&message("S", 0, i, 100))
                .unwrap()
                .append
                .queue_offset,
            i as i64
        );
    }
}

#[test]
fn sync_flush_acknowledges_after_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        flush_disk_type: FlushDiskType::SyncFlush,
        ..config(dir.path())
    };
    let store = MessageStore::open(cfg).unwrap();
    for i in 0..20 {
        let out = store.put_message(&message("Y", 0, i, 500)).unwrap();
        assert_eq!(out.status, PutStatus::Ok);
        assert!(store.flushed_physical_offset() >= out.append.end_offset());
    }
}

#[test]
fn sync_flush_reports_flush_disk_timeout_when_flushing_is_slow() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = StoreConfig {
        flush_disk_type: FlushDiskType::SyncFlush,
        sync_flush_timeout: 50,
        fault_flush_delay_mills: 300,
        ..config(dir.path())
    };
    let store = MessageStore::open(cfg).unwrap();
    let out = store.put_message(&message("Y", 0, 0, 500)).unwrap();
    assert_eq!(out.status, PutStatus::FlushDiskTimeout);
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("Y", 0) == 1
    });
}

#[test]
fn batches_get_consecutive_queue_offsets_in_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    store.put_message(&message("Q", 2, 0, 10)).unwrap();
    let batch: Vec<_> = (1..=5).map(|i| message("Q", 2, i, 100)).collect();
    let out = store.put_messages(&batch).unwrap();
    assert_eq!(out.append.queue_offset, 1);
    assert_eq!(out.append.msg_count, 5);
    assert_eq!(out.append.physical_offsets.len(), 5);
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("Q", 2) == 6
    });
    for (i, phys) in out.append.physical_offsets.iter().enumerate() {
        let rec = store.lookup_message(*phys).unwrap();
        assert_eq!(record_body(&rec), common::body(i as u64 + 1, 100).to_vec());
    }
    let mixed = vec![message("Q", 2, 9, 10), message("Q", 3, 9, 10)];
    assert!(matches!(
        store.put_messages(&mixed),
        Err(PutError::MessageIllegal { .. })
    ));
}

#[test]
fn clean_shutdown_reopens_with_everything_and_continues_offsets() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(config(dir.path())).unwrap();
        for i in 0..300 {
            store.put_message(&message("R", 0, i, 1000)).unwrap();
        }
        store.shutdown();
        assert!(!dir.path().join("abort").exists());
    }
    let store = MessageStore::open(config(dir.path())).unwrap();
    assert_eq!(store.max_offset_in_queue("R", 0), 300);
    let next = store.put_message(&message("R", 0, 300, 1000)).unwrap();
    assert_eq!(next.append.queue_offset, 300);
    assert!(
        MessageStore::open(config(dir.path())).is_err(),
        "a second open is refused by the lock"
    );
}

#[test]
fn offset_by_time_finds_the_first_message_stored_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    let mut stamps = Vec::new();
    for i in 0..20 {
        stamps.push(
            store
                .put_message(&message("W", 0, i, 10))
                .unwrap()
                .append
                .store_timestamp,
        );
        if i == 9 {
            thread::sleep(Duration::from_millis(20));
        }
    }
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("W", 0) == 20
    });
    assert_eq!(
        store.offset_by_time("W", 0, stamps[10]),
        stamps.iter().position(|&t| t >= stamps[10]).unwrap() as i64
    );
    assert_eq!(store.offset_by_time("W", 0, 0), 0);
    assert_eq!(store.offset_by_time("W", 0, i64::MAX), 20);
}

/// Writes `count` messages, abandons the store (as a crash would), applies
/// `damage` to the CommitLog bytes of record `k` (none when `k == count`) and
/// garbage to every record after it, reopens, and checks that exactly
/// records `0..k` survive and appends continue after them.
fn recover_after_damage(count: u64, k: u64, damage: impl Fn(&mut Vec<u8>, usize, usize)) {
    let dir = tempfile::tempdir().unwrap();
    let mut spans = Vec::new();
    {
        let store = MessageStore::open(config(dir.path())).unwrap();
        for i in 0..count {
            let out = store
                .put_message(&message("D", 0, i, 300 + (i as usize * 37) % 500))
                .unwrap();
            spans.push((out.append.physical_offset as usize, out.append.wrote_bytes));
        }
        wait_until("dispatch", Duration::from_secs(5), || {
            store.max_offset_in_queue("D", 0) == count as i64
        });
        store.abandon();
    }
    let file_size = 256 * 1024;
    if let Some(&(start, len)) = spans.get(k as usize) {
        let path = dir
            .path()
            .join("commitlog")
            .join(format!("{:020}", start / file_size * file_size));
        let mut bytes = std::fs::read(&path).unwrap();
        damage(&mut bytes, start % file_size, len);
        std::fs::write(&path, &bytes).unwrap();
    }
    // Everything after the damaged record (also in later files) is garbage.
    for (s, l) in spans.iter().skip(k as usize + 1) {
        let p = dir
            .path()
            .join("commitlog")
            .join(format!("{:020}", s / file_size * file_size));
        let mut b = std::fs::read(&p).unwrap();
        b[s % file_size..s % file_size + l].fill(0xEE);
        std::fs::write(&p, &b).unwrap();
    }

    let store = MessageStore::open(config(dir.path())).unwrap();
    assert_eq!(
        store.max_offset_in_queue("D", 0),
        k as i64,
        "exactly the valid prefix"
    );
    for i in 0..k {
        let got = store.get_messages("D", 0, i as i64, 1, 1 << 20, None);
        assert_eq!(
            record_body(&got.messages[0]),
            common::body(i, 300 + (i as usize * 37) % 500).to_vec()
        );
    }
    let next = store.put_message(&message("D", 0, 999, 10)).unwrap();
    assert_eq!(next.append.queue_offset, k as i64);
    let rec = store.lookup_message(next.append.physical_offset).unwrap();
    assert!(matches!(record::check(&rec, true), Record::Message(_)));
}

#[test]
fn crash_recovery_truncates_a_torn_tail() {
    recover_after_damage(200, 120, |b, start, len| b[start + len / 2..].fill(0));
}

#[test]
fn crash_recovery_truncates_at_a_corrupt_body() {
    // The body starts 88 bytes into a record with IPv4 hosts.
    recover_after_damage(200, 77, |b, start, _| b[start + 88 + 10] ^= 0x5A);
}

#[test]
fn crash_recovery_truncates_at_a_corrupt_size() {
    recover_after_damage(200, 150, |b, start, _| b[start + 1] ^= 0x40);
}

#[test]
fn crash_recovery_keeps_everything_when_nothing_is_damaged() {
    recover_after_damage(200, 200, |_, _, _| {});
}

mod damage {
    use super::recover_after_damage;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Any detectable damage to any record (torn write at any byte, a
        /// flipped body byte, a bad size or magic) recovers to exactly the
        /// records before it.
        #[test]
        fn any_tail_damage_recovers_to_the_valid_prefix(
            count in 10u64..120,
            k_frac in 0.0f64..=1.0,
            kind in 0u8..4,
            at_frac in 0.0f64..1.0,
            bits in 1u8..=255,
        ) {
            let k = ((count as f64) * k_frac) as u64;
            recover_after_damage(count, k, move |b, start, len| match kind {
                0 => b[start + ((len as f64) * at_frac) as usize..].fill(0),
                1 => {
                    // Bodies are at least 300 bytes; the last 30 bytes of a
                    // record are topic and properties, which no CRC covers.
                    let body_part = len - 88 - 30;
                    b[start + 88 + ((body_part as f64) * at_frac) as usize] ^= bits;
                }
                2 => b[start + 1] ^= bits,
                _ => b[start + 4 + (bits as usize % 4)] ^= bits,
            });
        }
    }
}

#[test]
fn queue_offsets_continue_after_messages_indexed_again_at_recovery() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(config(dir.path())).unwrap();
        for i in 0..20 {
            store.put_message(&message("Again", 0, i, 100)).unwrap();
        }
        wait_until("dispatch", Duration::from_secs(5), || {
            store.max_offset_in_queue("Again", 0) == 20
        });
        store.abandon();
    }
    // As if the last entries never reached the queue before the crash.
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    assert_eq!(
        store.max_offset_in_queue("Again", 0),
        20,
        "re-indexed from the log"
    );
    let next = store.put_message(&message("Again", 0, 20, 100)).unwrap();
    assert_eq!(
        next.append.queue_offset, 20,
        "a queue offset is never handed out twice"
    );
    wait_until("dispatch", Duration::from_secs(5), || {
        store.max_offset_in_queue("Again", 0) == 21
    });
    let got = store.get_messages("Again", 0, 20, 1, 1 << 20, None);
    assert_eq!(
        record_body(&got.messages[0]),
        common::body(20, 100).to_vec()
    );
}
