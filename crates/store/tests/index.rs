//! Query by key: messages are found by each of their `KEYS` and by their
//! `UNIQ_KEY`, within a time range and a count; IndexFiles roll when full
//! and the full one reaches the checkpoint; retention deletes files whose
//! messages are gone; after a crash the index is complete again, every
//! message found once.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    path::{Path, PathBuf},
    thread,
    time::{Duration, Instant},
};

use chrono::Timelike;
use message_model::record::{self, Record};
use store::{MessageStore, MessageToStore, StoreConfig};

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

/// Message `i` of `topic`: `UNIQ_KEY` `u<i>`, `KEYS` `k<i> g<i % 10>`
/// (with a doubled separator, whose empty token is no key).
fn keyed(topic: &str, i: u64, len: usize) -> MessageToStore {
    MessageToStore {
        properties: format!("KEYS\u{1}k{i}  g{}\u{2}UNIQ_KEY\u{1}u{i}\u{2}", i % 10),
        ..common::message(topic, (i % 2) as i32, i, len)
    }
}

/// The index `i` of each record (its body's first 8 bytes), in order.
fn indexes(records: &[bytes::Bytes]) -> Vec<u64> {
    records
        .iter()
        .map(|r| u64::from_be_bytes(common::record_body(r)[..8].try_into().unwrap()))
        .collect()
}

fn find(store: &MessageStore, topic: &str, key: &str) -> Vec<u64> {
    indexes(&store.query_message(topic, key, 64, 0, i64::MAX).messages)
}

fn index_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("index"))
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    files.sort();
    files
}

/// The end CommitLog offset in an IndexFile's header; `None` when the file
/// is gone or too short (it may be deleted while being read).
fn end_phy_offset(file: &Path) -> Option<u64> {
    let raw = std::fs::read(file).ok()?;
    let end = i64::from_be_bytes(raw.get(24..32)?.try_into().ok()?);
    u64::try_from(end).ok()
}

fn dispatched(store: &MessageStore) -> bool {
    store.dispatch_behind_bytes() == 0
}

#[test]
fn messages_are_found_by_each_key_and_by_unique_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(common::config(dir.path())).unwrap();
    let before = common::message("Orders", 0, 0, 10).born_timestamp;
    let mut puts = Vec::new();
    for i in 0..40 {
        puts.push(store.put_message(&keyed("Orders", i, 100)).unwrap());
    }
    assert!(wait_for(Duration::from_secs(10), || dispatched(&store)));
    assert_eq!(find(&store, "Orders", "k7"), [7]);
    assert_eq!(find(&store, "Orders", "u13"), [13]);
    assert_eq!(
        find(&store, "Orders", "g3"),
        [3, 13, 23, 33],
        "oldest first"
    );
    // The key belongs to its topic, and an unknown key finds nothing.
    assert!(find(&store, "Other", "k7").is_empty());
    assert!(find(&store, "Orders", "k99").is_empty());
    assert!(find(&store, "Orders", "").is_empty());
    // Records come back whole.
    let got = store.query_message("Orders", "k7", 64, 0, i64::MAX);
    match record::check(&got.messages[0], true) {
        Record::Message(m) => {
            assert_eq!(m.physical_offset, puts[7].append.physical_offset as i64);
            assert_eq!(m.topic, "Orders");
        }
        other => panic!("{other:?}"),
    }
    // The newest indexed message.
    let last = puts.last().unwrap();
    assert_eq!(
        got.index_last_update_phyoffset,
        last.append.physical_offset as i64
    );
    assert_eq!(got.index_last_update_timestamp, last.append.store_timestamp);
    // The count asked for, and maxMsgsNumBatch above it.
    assert_eq!(
        store
            .query_message("Orders", "g3", 2, 0, i64::MAX)
            .messages
            .len(),
        2
    );
    drop(store);
    let store = MessageStore::open(StoreConfig {
        max_msgs_num_batch: 3,
        ..common::config(dir.path())
    })
    .unwrap();
    let capped = store.query_message("Orders", "g3", 64, 0, i64::MAX);
    assert_eq!(capped.messages.len(), 3);
    // A time range before every message finds nothing, but still tells
    // how far the index goes.
    let early = store.query_message("Orders", "k7", 64, 0, before - 1_000_000_000);
    assert!(early.messages.is_empty());
    assert_eq!(
        early.index_last_update_phyoffset,
        last.append.physical_offset as i64
    );
    // Rolled-back transaction records are not indexed; prepared ones are.
    let prepared = MessageToStore {
        sys_flag: 0x4,
        properties: "KEYS\u{1}half\u{2}".into(),
        ..common::message("Orders", 0, 100, 10)
    };
    let rollback = MessageToStore {
        sys_flag: 0xC,
        properties: "KEYS\u{1}gone\u{2}".into(),
        ..common::message("Orders", 0, 101, 10)
    };
    store.put_message(&prepared).unwrap();
    store.put_message(&rollback).unwrap();
    assert!(wait_for(Duration::from_secs(10), || dispatched(&store)));
    assert_eq!(find(&store, "Orders", "half"), [100]);
    assert!(find(&store, "Orders", "gone").is_empty());
}

#[test]
fn a_store_without_message_index_keeps_no_index_files() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(StoreConfig {
        message_index_enable: false,
        ..common::config(dir.path())
    })
    .unwrap();
    store.put_message(&keyed("T", 1, 10)).unwrap();
    assert!(wait_for(Duration::from_secs(10), || dispatched(&store)));
    assert!(find(&store, "T", "k1").is_empty());
    assert!(index_files(dir.path()).is_empty());
}

#[test]
fn a_full_file_rolls_over_and_reaches_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(common::config(dir.path())).unwrap();
    // Three keys a message, 3999 entries a file: about four files.
    let n = 5000u64;
    for i in 0..n {
        store.put_message(&keyed("Roll", i, 20)).unwrap();
    }
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)));
    let files = index_files(dir.path());
    assert_eq!(files.len(), 4, "{files:?}");
    for f in &files {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert_eq!(name.len(), 17, "yyyyMMddHHmmssSSS: {name}");
        assert!(name.bytes().all(|b| b.is_ascii_digit()), "{name}");
    }
    // Each file holds whole messages (1333 of them, 3999 entries), and
    // starts where the one before ends.
    let header = |f: &Path| {
        let raw = std::fs::read(f).unwrap();
        let i64_at = |at: usize| i64::from_be_bytes(raw[at..at + 8].try_into().unwrap());
        let count = i32::from_be_bytes(raw[36..40].try_into().unwrap());
        (i64_at(0), i64_at(8), i64_at(16), i64_at(24), count)
    };
    for pair in files.windows(2) {
        let (_, end_ts, _, end_phy, count) = header(&pair[0]);
        assert_eq!(count, 4000, "{}", pair[0].display());
        let (begin_ts, _, begin_phy, _, _) = header(&pair[1]);
        assert!(begin_phy > end_phy && begin_ts >= end_ts);
    }
    // Every message is found once, in whichever file it is.
    for i in (0..n).step_by(97).chain([n - 1]) {
        assert_eq!(find(&store, "Roll", &format!("k{i}")), [i]);
        assert_eq!(find(&store, "Roll", &format!("u{i}")), [i]);
    }
    let tenth = find(&store, "Roll", "g4");
    assert_eq!(tenth.len(), 64, "maxMsgsNumBatch caps the answer");
    assert!(tenth.windows(2).all(|w| w[0] < w[1]));
    // The housekeeping thread flushes the full files and records the end
    // time of the last one in the checkpoint (offset 16).
    let (_, third_end, _, _, _) = header(&files[2]);
    let checkpoint = dir.path().join("checkpoint");
    let index_ts = || {
        let raw = std::fs::read(&checkpoint).unwrap();
        i64::from_be_bytes(raw[16..24].try_into().unwrap())
    };
    assert!(
        wait_for(Duration::from_secs(10), || index_ts() == third_end),
        "checkpoint index time {} != {third_end}",
        index_ts()
    );
}

/// An hour of the day far from now, so that the `deleteWhen` hour never
/// starts a pass during a test.
fn not_now() -> String {
    ((chrono::Local::now().hour() + 12) % 24).to_string()
}

#[test]
fn retention_deletes_index_files_whose_messages_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        file_reserved_time: 0,
        delete_when: not_now(),
        clean_resource_interval: 20,
        delete_commit_log_files_interval: 0,
        delete_consume_queue_files_interval: 0,
        ..common::config(dir.path())
    };
    let store = MessageStore::open(config).unwrap();
    // About eight CommitLog files of 256 KiB and three IndexFiles.
    let n = 1000u64;
    for i in 0..n {
        store.put_message(&keyed("Old", i, 2000)).unwrap();
        // Keys enough to fill a file every ~330 messages.
        let extra = MessageToStore {
            properties: format!(
                "KEYS\u{1}{}\u{2}",
                (0..8).map(|j| format!("x{i}_{j} ")).collect::<String>()
            ),
            ..common::message("Pad", 0, i, 10)
        };
        store.put_message(&extra).unwrap();
    }
    let last_file_start = store.max_physical_offset() / (256 * 1024) * (256 * 1024);
    assert!(wait_for(Duration::from_secs(10), || dispatched(&store)
        && store.flushed_physical_offset() >= last_file_start));
    let before = index_files(dir.path());
    assert!(before.len() >= 3, "{before:?}");
    store.trigger_delete_files();
    // The CommitLog's minimum moves file by file and the IndexFiles follow
    // each move, so the state is settled only once the minimum reached the
    // newest CommitLog file (which stays) and no remaining IndexFile but the
    // newest ends below it.
    let settled = || {
        let min = store.min_physical_offset();
        let files = index_files(dir.path());
        min == last_file_start
            && files.len() < before.len()
            && files[..files.len().saturating_sub(1)]
                .iter()
                .all(|f| end_phy_offset(f).is_some_and(|end| end >= min))
    };
    assert!(
        wait_for(Duration::from_secs(20), settled),
        "min {} of {last_file_start}; index files {:?}",
        store.min_physical_offset(),
        index_files(dir.path())
    );
    let after = index_files(dir.path());
    // Oldest first, never the newest.
    assert_eq!(after.last(), before.last());
    assert_eq!(after[..], before[before.len() - after.len()..]);
    // Messages whose records are gone are not returned; the newest are.
    assert!(find(&store, "Old", "k0").is_empty());
    assert_eq!(find(&store, "Old", &format!("k{}", n - 1)), [n - 1]);
}

/// Sends `n` keyed messages from `from`, then stops the store as if the
/// process died.
fn write_and_abandon(dir: &Path, config: &StoreConfig, from: u64, n: u64, wait_checkpoint: bool) {
    let store = MessageStore::open(config.clone()).unwrap();
    for i in from..from + n {
        store.put_message(&keyed("Crash", i, 50)).unwrap();
    }
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)));
    if wait_checkpoint {
        // Full files flushed and in the checkpoint: those are kept.
        let checkpoint = dir.join("checkpoint");
        assert!(wait_for(Duration::from_secs(10), || {
            let raw = std::fs::read(&checkpoint).unwrap();
            i64::from_be_bytes(raw[16..24].try_into().unwrap()) > 0
        }));
    }
    store.abandon();
    assert!(dir.join("abort").exists());
}

/// Every message `0..n` is found by its keys, and the files hold exactly
/// one entry per key (a message indexed twice would not show in a query,
/// which names each record once).
fn assert_each_found_once(store: &MessageStore, root: &Path, n: u64) {
    for i in 0..n {
        assert_eq!(find(store, "Crash", &format!("u{i}")), [i], "u{i}");
        assert_eq!(find(store, "Crash", &format!("k{i}")), [i], "k{i}");
    }
    store.shutdown();
    let entries: u64 = index_files(root)
        .iter()
        .map(|f| {
            let raw = std::fs::read(f).unwrap();
            u64::try_from(i32::from_be_bytes(raw[36..40].try_into().unwrap()) - 1).unwrap()
        })
        .sum();
    assert_eq!(entries, 3 * n, "UNIQ_KEY and two keys a message, once each");
}

#[test]
fn after_a_crash_the_index_is_rebuilt_and_finds_each_message_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(dir.path());
    // Within the first file, nothing flushed: the file is rebuilt whole.
    write_and_abandon(dir.path(), &config, 0, 300, false);
    let store = MessageStore::open(config.clone()).unwrap();
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)));
    assert_each_found_once(&store, dir.path(), 300);
    drop(store);
    // Past several rolls, the full files in the checkpoint: those stay,
    // the rest is rebuilt from where they end.
    write_and_abandon(dir.path(), &config, 300, 3000, true);
    let kept: Vec<PathBuf> = index_files(dir.path());
    let store = MessageStore::open(config.clone()).unwrap();
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)));
    let files = index_files(dir.path());
    assert!(files.len() >= 3, "{files:?}");
    assert_eq!(files[0], kept[0], "a file in the checkpoint is kept");
    assert_each_found_once(&store, dir.path(), 3300);
    drop(store);
    // A clean stop keeps everything as it is.
    let store = MessageStore::open(config).unwrap();
    assert_eq!(index_files(dir.path()), files);
    assert_each_found_once(&store, dir.path(), 3300);
}

#[test]
fn a_crash_rebuilds_the_index_from_before_where_recovery_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        flush_commit_log_least_pages: 0,
        flush_consume_queue_thorough_interval: 20,
        ..common::config(dir.path())
    };
    let store = MessageStore::open(config.clone()).unwrap();
    // Two CommitLog files of old messages.
    let mut last_ts = 0;
    for i in 0..300 {
        last_ts = store
            .put_message(&keyed("Crash", i, 1500))
            .unwrap()
            .append
            .store_timestamp;
    }
    // Recovery after a crash starts at the newest CommitLog file whose first
    // message is 3 s older than what the checkpoint says is durable: let
    // that much time pass, then write and flush newer messages.
    let now_ms = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    };
    assert!(wait_for(Duration::from_secs(10), || now_ms() > last_ts + 3_500));
    for i in 300..600 {
        last_ts = store
            .put_message(&keyed("Crash", i, 1500))
            .unwrap()
            .append
            .store_timestamp;
    }
    let checkpoint = dir.path().join("checkpoint");
    let durable = || {
        let raw = std::fs::read(&checkpoint).unwrap();
        let at = |i: usize| i64::from_be_bytes(raw[i..i + 8].try_into().unwrap());
        at(0).min(at(8))
    };
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)
        && durable() >= last_ts));
    assert_eq!(
        std::fs::read(&checkpoint).unwrap()[16..24],
        [0; 8],
        "no IndexFile is full: the one there is rebuilt"
    );
    store.abandon();
    let store = MessageStore::open(config).unwrap();
    assert!(wait_for(Duration::from_secs(20), || dispatched(&store)));
    assert_each_found_once(&store, dir.path(), 600);
}
