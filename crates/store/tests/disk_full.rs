//! A full disk: appends get a "disk full" error instead of a crash, the store
//! refuses writes while reads go on, and appends resume once space returns.
//!
//! The disk is a small tmpfs mounted for the test, which needs root (CI runs
//! as root); elsewhere the test says so and does nothing.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    thread,
    time::{Duration, Instant},
};

use store::{GetStatus, MessageStore, PutError, StoreConfig};

#[test]
fn full_disk_refuses_appends_serves_reads_and_recovers() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("full_disk test needs root to mount a tmpfs; not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let disk = common::Tmpfs::mount(dir.path(), "5m");
    // The store needs a little over 2 MiB for two CommitLog files, the
    // queues, the index and the checkpoint: with 2 MiB of filler the third
    // CommitLog file does not fit while the disk is still under the
    // cleaner's ratios (85 %, 90 %), so the refusal is the failed file
    // creation's and nothing is deleted to make room.
    let filler = disk.0.join("filler");
    std::fs::write(&filler, vec![1u8; 2048 * 1024]).unwrap();
    let config = StoreConfig {
        mapped_file_size_commit_log: 1024 * 1024,
        // One ConsumeQueue file holds every message of the test, made at
        // the first one: a queue file that cannot be made while the disk
        // is full would leave the last messages unindexed until space
        // returns, and this test reads them while it is full.
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        flush_interval_consume_queue: 20,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        // This test is about a failed file creation alone; the cleaner's
        // disk ratios are tested in retention.rs.
        clean_resource_interval: 3_600_000,
        clean_file_forcibly_enable: false,
        ..StoreConfig::with_root(disk.0.join("store"))
    };
    let store = MessageStore::open(config).unwrap();
    let mut stored = 0u64;
    let refusal = loop {
        match store.put_message(&common::message("Full", 0, stored, 4000)) {
            Ok(_) => stored += 1,
            Err(e) => break e,
        }
        assert!(stored < 10_000, "the disk never filled");
    };
    assert!(
        matches!(&refusal, PutError::ServiceNotAvailable { reason } if reason.contains("disk full")),
        "{refusal:?}"
    );
    assert!(stored > 300, "two files' worth was stored first ({stored})");
    assert!(!store.is_writable());
    let again = store.put_message(&common::message("Full", 0, stored, 10));
    assert!(
        matches!(again, Err(PutError::ServiceNotAvailable { .. })),
        "{again:?}"
    );

    let deadline = Instant::now() + Duration::from_secs(30);
    while store.max_offset_in_queue("Full", 0) < stored as i64 && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    let read = store.get_messages("Full", 0, stored as i64 - 1, 1, 1 << 20, None);
    assert_eq!(
        read.status,
        GetStatus::Found,
        "reads go on while the disk is full"
    );

    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !store.is_writable() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    let free = rustix::fs::statvfs(disk.0.as_path())
        .map(|st| st.f_bavail * st.f_frsize)
        .unwrap_or(0);
    assert!(
        store.is_writable(),
        "appends resume once space is back ({free} bytes free)"
    );
    let resumed = store
        .put_message(&common::message("Full", 0, stored, 4000))
        .unwrap();
    assert_eq!(resumed.append.queue_offset, stored as i64);
    store.shutdown();
}
