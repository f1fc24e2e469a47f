//! Unit tests of the store: when a send waits for its flush, what moves the
//! checkpoint, and topic deletion.

use super::*;

#[test]
fn only_wait_false_skips_the_flush_and_the_last_wait_counts() {
    assert!(wait_store_ok(""));
    assert!(wait_store_ok("TAGS\u{1}A\u{2}"));
    assert!(wait_store_ok("WAIT\u{1}true\u{2}"));
    assert!(!wait_store_ok("TAGS\u{1}A\u{2}WAIT\u{1}false\u{2}"));
    assert!(!wait_store_ok("WAIT\u{1}true\u{2}WAIT\u{1}false\u{2}"));
    assert!(wait_store_ok("WAIT\u{1}false\u{2}WAIT\u{1}true\u{2}"));
}

#[test]
fn only_a_thorough_queue_flush_moves_the_checkpoint() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = MessageStore::open(StoreConfig {
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_message_size: 64 * 1024,
        // The housekeeping thread stays asleep during the test.
        flush_interval_consume_queue: 60_000,
        ..StoreConfig::with_root(dir.path())
    })
    .expect("open store");
    let host = "127.0.0.1:1".parse().expect("address");
    for i in 0..3 {
        store
            .put_message(&MessageToStore {
                topic: "T".into(),
                queue_id: 0,
                flag: 0,
                sys_flag: 0,
                born_timestamp: 1,
                born_host: host,
                store_host: host,
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: Bytes::from(vec![i; 10]),
                properties: String::new(),
            })
            .expect("put");
    }
    let inner = &store.inner;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.max_offset_in_queue("T", 0) < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let dispatched = inner.dispatched_ts.load(Ordering::Acquire);
    assert!(dispatched > 0);
    let before = inner.checkpoint.logics_msg_timestamp();
    inner.flush_queues_and_checkpoint(2);
    assert_eq!(inner.checkpoint.logics_msg_timestamp(), before);
    inner.flush_queues_and_checkpoint(0);
    assert_eq!(inner.checkpoint.logics_msg_timestamp(), dispatched);
}

fn small_store(dir: &Path) -> MessageStore {
    MessageStore::open(StoreConfig {
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_message_size: 64 * 1024,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        ..StoreConfig::with_root(dir)
    })
    .expect("open store")
}

fn put(store: &MessageStore, topic: &str, byte: u8) -> AppendResult {
    let host = "127.0.0.1:1".parse().expect("address");
    store
        .put_message(&MessageToStore {
            topic: topic.into(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(vec![byte; 10]),
            properties: String::new(),
        })
        .expect("put")
        .append
}

fn wait_indexed(store: &MessageStore, topic: &str, n: i64) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.max_offset_in_queue(topic, 0) < n {
        assert!(std::time::Instant::now() < deadline, "{topic} not indexed");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

#[test]
fn a_deleted_topic_stays_deleted_when_its_records_are_indexed_again() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = small_store(dir.path());
    for i in 0..3 {
        put(&store, "T", i);
    }
    put(&store, "U", 9);
    wait_indexed(&store, "T", 3);
    wait_indexed(&store, "U", 1);
    let queue_dir = store.config().consume_queue_dir().join("T");
    assert!(queue_dir.exists());

    assert_eq!(store.delete_topic("T").expect("delete"), 1);
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
    assert!(store.queue_entry("T", 0, 0).is_none());
    assert!(!queue_dir.exists(), "the queue files are deleted");
    assert_eq!(store.max_offset_in_queue("U", 0), 1, "other topics stay");

    // Index the whole log again, as a restart after a crash would: the
    // former topic's records stay unindexed.
    store.inner.reput_from.store(0, Ordering::Release);
    store.inner.dispatch_available();
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
    assert_eq!(store.max_offset_in_queue("U", 0), 1);

    // The topic sent to again starts at queue offset 0.
    let again = put(&store, "T", 7);
    assert_eq!(again.queue_offset, 0);
    wait_indexed(&store, "T", 1);
    let entry = store.queue_entry("T", 0, 0).expect("new entry");
    assert_eq!(entry.commit_log_offset as u64, again.physical_offset);
    store.shutdown();
    drop(store);

    // A restart indexes from the last queue end or earlier; the fence
    // was kept on disk.
    let store = small_store(dir.path());
    assert_eq!(store.max_offset_in_queue("T", 0), 1);
    assert_eq!(
        store
            .queue_entry("T", 0, 0)
            .map(|e| e.commit_log_offset as u64),
        Some(again.physical_offset)
    );
    assert_eq!(put(&store, "T", 8).queue_offset, 1);
}

#[test]
fn a_deleted_topic_whose_records_end_the_log_stays_deleted_after_a_restart() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let store = small_store(dir.path());
    for i in 0..3 {
        put(&store, "T", i);
    }
    wait_indexed(&store, "T", 3);
    store.delete_topic("T").expect("delete");
    store.shutdown();
    drop(store);
    // No queue is left: the restart indexes the whole log again.
    let store = small_store(dir.path());
    assert_eq!(store.max_offset_in_queue("T", 0), 0);
    assert_eq!(put(&store, "T", 5).queue_offset, 0);
}
