//! A replica's CommitLog: a master's bytes appended verbatim, in pieces
//! that cut records, and consumers held at the confirm offset.
#![allow(clippy::unwrap_used)]

mod common;

use store::{GetStatus, MessageStore, ReplicaAppendError, StoreConfig};

const TOPIC: &str = "Replicated";

fn replica_config(dir: &std::path::Path) -> StoreConfig {
    StoreConfig {
        replicated: true,
        ..common::config(dir)
    }
}

/// Copies the master's log to the replica in pieces of `chunk` bytes that
/// never cross a file's end.
fn copy_log(master: &MessageStore, replica: &MessageStore, chunk: usize) {
    let end = master.max_physical_offset();
    let mut at = replica.max_physical_offset();
    while at < end {
        let bytes = master.commit_log_bytes(at, chunk).unwrap();
        at = replica.append_replicated(at, &bytes).unwrap();
    }
    assert_eq!(replica.max_physical_offset(), end);
}

/// A master store with `n` messages of `len` bytes in queue 0 of
/// [`TOPIC`], and where each message ends.
fn master(dir: &tempfile::TempDir, n: u64, len: usize) -> (MessageStore, Vec<u64>) {
    let store = MessageStore::open(common::config(dir.path())).unwrap();
    let ends = (0..n)
        .map(|i| {
            store
                .put_message(&common::message(TOPIC, 0, i, len))
                .unwrap()
                .append
                .end_offset()
        })
        .collect();
    (store, ends)
}

fn bodies(store: &MessageStore) -> Vec<Vec<u8>> {
    let got = store.get_messages(TOPIC, 0, 0, 10_000, usize::MAX, None);
    if got.status != GetStatus::Found {
        return Vec::new();
    }
    got.messages
        .iter()
        .map(|r| common::record_body(r))
        .collect()
}

#[test]
fn a_replica_holds_the_masters_bytes_and_shows_only_what_is_confirmed() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // About three 256 KiB files, so the copy crosses file ends and fillers.
    let (master, ends) = master(&mdir, 700, 1000);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    assert_eq!(replica.confirm_offset(), Some(0));
    // 777 bytes at a time: most pieces end inside a record.
    copy_log(&master, &replica, 777);
    // Nothing confirmed: consumers see nothing, though every byte is there.
    assert!(bodies(&replica).is_empty());
    assert_eq!(
        replica.lookup_message(ends[9]),
        master.lookup_message(ends[9])
    );

    // Confirmed up to the middle of message 300: messages 0..300 show.
    replica.set_confirm_offset(ends[299] + 10);
    let seen = bodies(&replica);
    assert_eq!(seen.len(), 300);
    assert_eq!(seen[299], common::body(299, 1000).to_vec());

    // Everything confirmed: the replica's queue equals the master's.
    replica.set_confirm_offset(u64::MAX);
    assert_eq!(replica.confirm_offset(), Some(master.max_physical_offset()));
    assert_eq!(bodies(&replica), bodies(&master));
    assert_eq!(bodies(&replica).len(), 700);
}

#[test]
fn bytes_that_do_not_follow_on_are_refused_and_change_nothing() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, _) = master(&mdir, 300, 1000);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    let first = master.commit_log_bytes(0, 5000).unwrap();
    replica.append_replicated(0, &first).unwrap();
    // A gap.
    let later = master.commit_log_bytes(6000, 100).unwrap();
    assert_eq!(
        replica.append_replicated(6000, &later),
        Err(ReplicaAppendError::NotContiguous {
            expected: 5000,
            got: 6000
        })
    );
    // Past the end of the first file.
    let too_long = vec![0u8; 256 * 1024];
    assert!(matches!(
        replica.append_replicated(5000, &too_long),
        Err(ReplicaAppendError::CrossesFile {
            offset: 5000,
            file_start: 0,
            ..
        })
    ));
    assert_eq!(replica.max_physical_offset(), 5000);
    // A store that is not replicated takes no replicated bytes.
    let plain = tempfile::tempdir().unwrap();
    let plain = MessageStore::open(common::config(plain.path())).unwrap();
    assert!(matches!(
        plain.append_replicated(0, &first),
        Err(ReplicaAppendError::Refused(_))
    ));
    assert_eq!(plain.confirm_offset(), None);
}

#[test]
fn the_confirm_offset_survives_a_restart_and_still_holds_consumers_back() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ends) = master(&mdir, 100, 500);
    {
        let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
        copy_log(&master, &replica, 4096);
        replica.set_confirm_offset(ends[39]);
        assert_eq!(bodies(&replica).len(), 40);
        replica.shutdown();
    }
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    assert_eq!(replica.confirm_offset(), Some(ends[39]));
    assert_eq!(replica.max_physical_offset(), master.max_physical_offset());
    assert_eq!(bodies(&replica).len(), 40);
    replica.set_confirm_offset(ends[99]);
    assert_eq!(bodies(&replica).len(), 100);
}

#[test]
fn a_divergent_tail_is_cut_and_readers_keep_what_they_hold() {
    let (mdir, rdir, odir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (master, ends) = master(&mdir, 700, 1000);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    copy_log(&master, &replica, 10_000);
    replica.set_confirm_offset(ends[299]);
    assert_eq!(bodies(&replica).len(), 300);
    let held = replica.lookup_message(ends[600]).unwrap();
    let before = held.to_vec();

    // Cut after message 500 (inside the second file).
    assert_eq!(replica.truncate_replicated(ends[499]).unwrap(), ends[499]);
    assert_eq!(replica.max_physical_offset(), ends[499]);
    assert_eq!(held.to_vec(), before);
    assert!(replica.lookup_message(ends[600]).is_none());

    // Another master's history from there: messages 500.. with other
    // bodies (longer, so that every offset differs).
    let other = MessageStore::open(replica_config(odir.path())).unwrap();
    copy_log(&master, &other, 10_000);
    other.truncate_replicated(ends[499]).unwrap();
    other.resume_appends().unwrap();
    for i in 500..600 {
        other
            .put_message(&common::message(TOPIC, 0, i + 10_000, 1500))
            .unwrap();
    }
    copy_log(&other, &replica, 10_000);
    replica.set_confirm_offset(u64::MAX);
    let seen = bodies(&replica);
    assert_eq!(seen.len(), 600);
    assert_eq!(seen[499], common::body(499, 1000).to_vec());
    assert_eq!(seen[500], common::body(10_500, 1500).to_vec());
    replica.shutdown();
    drop(replica);
    // The cut holds across a restart.
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    assert_eq!(replica.max_physical_offset(), other.max_physical_offset());
    assert_eq!(bodies(&replica).len(), 600);
}

#[test]
fn a_replica_that_takes_over_cuts_a_partial_record_and_continues_each_queue() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, ends) = master(&mdir, 100, 800);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    // All but the last 50 bytes of message 99.
    let cut = ends[99] - 50;
    let mut at = 0;
    while at < cut {
        let bytes = master
            .commit_log_bytes(at, (cut - at).min(3000) as usize)
            .unwrap();
        at = replica.append_replicated(at, &bytes).unwrap();
    }
    replica.set_confirm_offset(ends[49]);
    assert_eq!(bodies(&replica).len(), 50);
    assert_eq!(replica.resume_appends().unwrap(), ends[98]);
    assert_eq!(replica.max_physical_offset(), ends[98]);
    let put = replica
        .put_message(&common::message(TOPIC, 0, 1000, 800))
        .unwrap();
    assert_eq!(put.append.queue_offset, 99);
    assert_eq!(put.append.physical_offset, ends[98]);
    replica.set_confirm_offset(u64::MAX);
    let seen = bodies(&replica);
    assert_eq!(seen.len(), 100);
    assert_eq!(seen[99], common::body(1000, 800).to_vec());
}

#[test]
fn a_replica_whose_messages_were_all_dispatched_continues_each_queue() {
    let (mdir, rdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (master, _) = master(&mdir, 30, 300);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    copy_log(&master, &replica, 4096);
    replica.set_confirm_offset(u64::MAX);
    assert_eq!(bodies(&replica).len(), 30);
    assert_eq!(replica.dispatch_behind_bytes(), 0);
    replica.resume_appends().unwrap();
    let put = replica
        .put_message(&common::message(TOPIC, 0, 30, 300))
        .unwrap();
    assert_eq!(put.append.queue_offset, 30);
}

#[test]
fn taking_over_leaves_a_deleted_topics_former_records_out_of_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(replica_config(dir.path())).unwrap();
    // Stored but never confirmed, so in no ConsumeQueue.
    for i in 0..5 {
        store
            .put_message(&common::message("Gone", 0, i, 100))
            .unwrap();
    }
    store.delete_topic("Gone").unwrap();
    store.resume_appends().unwrap();
    let put = store
        .put_message(&common::message("Gone", 0, 5, 100))
        .unwrap();
    assert_eq!(put.append.queue_offset, 0);
}

#[test]
fn a_cut_below_what_consumers_saw_takes_it_out_of_the_queues_and_indexes() {
    let (mdir, rdir, odir) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (master, ends) = master(&mdir, 300, 500);
    let replica = MessageStore::open(replica_config(rdir.path())).unwrap();
    copy_log(&master, &replica, 10_000);
    replica.set_confirm_offset(u64::MAX);
    // Consumers saw all 300; each is found by its unique key.
    assert_eq!(bodies(&replica).len(), 300);
    let found = |store: &MessageStore, key: u64| {
        store
            .query_message(TOPIC, &key.to_string(), 32, 0, i64::MAX)
            .messages
            .iter()
            .map(|r| common::record_body(r))
            .collect::<Vec<_>>()
    };
    assert_eq!(found(&replica, 250), [common::body(250, 500).to_vec()]);

    // Cut after message 199: the queue ends there, the index forgets the
    // rest, and what it held below the cut is indexed again.
    assert_eq!(replica.truncate_replicated(ends[199]).unwrap(), ends[199]);
    assert_eq!(replica.max_offset_in_queue(TOPIC, 0), 200);
    assert_eq!(bodies(&replica).len(), 200);
    assert!(found(&replica, 250).is_empty());
    assert_eq!(found(&replica, 100), [common::body(100, 500).to_vec()]);

    // Another master's history from there, with other keys and bodies:
    // queue offsets 200.. again, and indexed.
    let other = MessageStore::open(replica_config(odir.path())).unwrap();
    copy_log(&master, &other, 10_000);
    other.truncate_replicated(ends[199]).unwrap();
    other.resume_appends().unwrap();
    for i in 200..300 {
        let at = other
            .put_message(&common::message(TOPIC, 0, i + 10_000, 700))
            .unwrap();
        assert_eq!(at.append.queue_offset, i as i64);
    }
    copy_log(&other, &replica, 10_000);
    replica.set_confirm_offset(u64::MAX);
    let seen = bodies(&replica);
    assert_eq!(seen.len(), 300);
    assert_eq!(seen[250], common::body(10_250, 700).to_vec());
    assert_eq!(
        found(&replica, 10_250),
        [common::body(10_250, 700).to_vec()]
    );
    assert_eq!(found(&replica, 150), [common::body(150, 500).to_vec()]);
    // Taking over, the replica continues the queue after the new history.
    let end = replica.resume_appends().unwrap();
    assert_eq!(end, other.max_physical_offset());
    let next = replica
        .put_message(&common::message(TOPIC, 0, 99_999, 100))
        .unwrap();
    assert_eq!(next.append.queue_offset, 300);
}
