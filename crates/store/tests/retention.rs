//! Retention: expired CommitLog files are deleted oldest first (never the
//! active one), the ConsumeQueues follow with their files and minimum
//! offsets, readers below the minimum are told so, the listener hears of
//! each file first, and on a small disk writes are refused past the warning
//! ratio and resume by themselves once cleaning frees space.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{Arc, Mutex},
    thread,
    time::{Duration, Instant},
};

use chrono::Timelike;
use store::{Expiring, GetStatus, MessageStore, PutError, StoreConfig};

/// An hour of the day far from now, so that the `deleteWhen` hour never
/// starts a pass during a test.
fn not_now() -> String {
    ((chrono::Local::now().hour() + 12) % 24).to_string()
}

/// Polls `done` every few ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn a_manual_pass_deletes_expired_files_and_queues_follow() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(StoreConfig {
        file_reserved_time: 0,
        delete_when: not_now(),
        clean_resource_interval: 20,
        delete_commit_log_files_interval: 0,
        delete_consume_queue_files_interval: 0,
        ..common::config(dir.path())
    })
    .unwrap();
    let heard: Arc<Mutex<Vec<Expiring>>> = Arc::default();
    let sink = Arc::clone(&heard);
    store.set_retention_listener(Arc::new(move |e: &Expiring| {
        sink.lock().unwrap().push(e.clone())
    }));
    // About 8 files of 256 KiB over two queues.
    let n = 1000u64;
    for i in 0..n {
        store
            .put_message(&common::message("Old", (i % 2) as i32, i, 2000))
            .unwrap();
    }
    let last_file_start = store.max_physical_offset() / (256 * 1024) * (256 * 1024);
    assert!(last_file_start >= 6 * 256 * 1024, "{last_file_start}");
    // Only files wholly flushed and indexed may go.
    assert!(wait_for(Duration::from_secs(10), || store
        .flushed_physical_offset()
        >= last_file_start
        && store.max_offset_in_queue("Old", 1) == n as i64 / 2));
    store.trigger_delete_files();
    // Done when the CommitLog keeps only the active file and each queue's
    // minimum has moved to its first entry still in it (a pass updates the
    // queues one after the other, after the CommitLog).
    let queues_caught_up = || {
        (0..2).all(|q| {
            let min = store.min_offset_in_queue("Old", q);
            min > 0 && Some(min) == store.queue_offset_at_or_after("Old", q, 0, last_file_start)
        })
    };
    assert!(
        wait_for(Duration::from_secs(20), || store.min_physical_offset()
            == last_file_start
            && queues_caught_up()),
        "every file but the active one deleted: min {} of {last_file_start}, stats {:?}",
        store.min_physical_offset(),
        store.retention_stats()
    );
    let stats = store.retention_stats();
    assert_eq!(
        stats.commit_log_files_deleted,
        last_file_start / (256 * 1024)
    );
    assert!(stats.consume_queue_files_deleted > 0, "{stats:?}");
    // The listener heard of each file, in order, before it went.
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len() as u64, stats.commit_log_files_deleted);
    for (i, e) in heard.iter().enumerate() {
        assert_eq!(e.from, i as u64 * 256 * 1024);
        assert_eq!(e.to, e.from + 256 * 1024);
        assert!(!e.file.exists(), "{} is gone", e.file.display());
    }
    for queue in 0..2 {
        let min = store.min_offset_in_queue("Old", queue);
        let max = store.max_offset_in_queue("Old", queue);
        assert!(min > 0 && min < max, "queue {queue}: {min}..{max}");
        let below = store.get_messages("Old", queue, min - 1, 8, 1 << 20, None);
        assert_eq!(below.status, GetStatus::OffsetTooSmall);
        assert_eq!(below.next_begin_offset, min);
        let first = store.get_messages("Old", queue, min, 1, 1 << 20, None);
        assert_eq!(first.status, GetStatus::Found);
        // The first kept message is the one whose index matches its offset.
        let i = u64::from_be_bytes(
            common::record_body(&first.messages[0])[..8]
                .try_into()
                .unwrap(),
        );
        assert_eq!(i, min as u64 * 2 + queue as u64);
        assert_eq!(
            store.queue_offset_at_or_after("Old", queue, 0, last_file_start),
            Some(min)
        );
    }
    // The store reopens on what is left, with the same minimums.
    let mins: Vec<i64> = (0..2)
        .map(|q| store.min_offset_in_queue("Old", q))
        .collect();
    drop(store);
    let store = MessageStore::open(StoreConfig {
        delete_when: not_now(),
        ..common::config(dir.path())
    })
    .unwrap();
    assert_eq!(store.min_physical_offset(), last_file_start);
    for q in 0..2 {
        assert_eq!(store.min_offset_in_queue("Old", q), mins[q as usize]);
    }
    let again = store
        .put_message(&common::message("Old", 0, n, 2000))
        .unwrap();
    assert_eq!(again.append.queue_offset, n as i64 / 2);
}

#[test]
fn files_within_their_reserved_time_stay_while_the_disk_has_room() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("retention test needs root to mount a tmpfs; not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let _disk = common::Tmpfs::mount(dir.path(), "64m");
    let store = MessageStore::open(StoreConfig {
        delete_when: not_now(),
        clean_resource_interval: 10,
        ..common::config(&dir.path().join("store"))
    })
    .unwrap();
    for i in 0..600 {
        store
            .put_message(&common::message("Young", 0, i, 2000))
            .unwrap();
    }
    store.trigger_delete_files();
    let passes = store.retention_stats().passes;
    assert!(wait_for(Duration::from_secs(10), || store
        .retention_stats()
        .passes
        >= passes + 3));
    let stats = store.retention_stats();
    assert_eq!(stats.commit_log_files_deleted, 0, "{stats:?}");
    assert!(stats.commit_log_disk_ratio > 0.0 && stats.commit_log_disk_ratio < 0.5);
    assert_eq!(store.min_physical_offset(), 0);
}

#[test]
fn a_small_disk_never_fills_and_writes_resume_by_themselves() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("retention test needs root to mount a tmpfs; not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let disk = common::Tmpfs::mount(dir.path(), "8m");
    let store = MessageStore::open(StoreConfig {
        delete_when: not_now(),
        clean_resource_interval: 10,
        delete_commit_log_files_interval: 0,
        delete_consume_queue_files_interval: 0,
        // Its own small disk: unexpired files must go when it fills.
        clean_file_forcibly_enable: true,
        ..common::config(&disk.0.join("store"))
    })
    .unwrap();
    // Three times the disk, each message retried until it is stored.
    let n = 3 * 8 * 1024 * 1024 / 2200;
    let mut refused = 0u64;
    let mut remark = String::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    for i in 0..n {
        loop {
            match store.put_message(&common::message("Busy", 0, i, 2000)) {
                Ok(_) => break,
                Err(PutError::ServiceNotAvailable { reason }) => {
                    refused += 1;
                    remark = reason;
                    assert!(Instant::now() < deadline, "writes never resumed: {remark}");
                    thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("message {i}: {e}"),
            }
        }
    }
    let stats = store.retention_stats();
    assert!(stats.commit_log_files_deleted >= 50, "{stats:?}");
    assert!(
        refused == 0 || remark.contains("disk is full") || remark.contains("disk full"),
        "{remark}"
    );
    // The newest message is there by its queue offset.
    assert!(wait_for(Duration::from_secs(10), || store
        .max_offset_in_queue("Busy", 0)
        == n as i64));
    let last = store.get_messages("Busy", 0, n as i64 - 1, 1, 1 << 20, None);
    assert_eq!(last.status, GetStatus::Found);
    // A pass after the last write leaves the disk under the warning ratio.
    let passes = stats.passes;
    assert!(wait_for(Duration::from_secs(10), || store
        .retention_stats()
        .passes
        >= passes + 2));
    let st = rustix::fs::statvfs(&disk.0).unwrap();
    let used = (st.f_blocks - st.f_bfree) as f64 / st.f_blocks as f64;
    assert!(used <= 0.90, "disk use {used:.2} after writing 3x the disk");
    assert!(store.is_writable());
    println!("8 MiB disk, 3x written: {stats:?}, {refused} refusals");
}
