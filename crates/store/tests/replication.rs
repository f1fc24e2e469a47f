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
    let master = MessageStore::open(common::config(mdir.path())).unwrap();
    // About three 256 KiB files, so the copy crosses file ends and fillers.
    let mut ends = Vec::new();
    for i in 0..700 {
        let put = master
            .put_message(&common::message(TOPIC, 0, i, 1000))
            .unwrap();
        ends.push(put.append.end_offset());
    }
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
    let master = MessageStore::open(common::config(mdir.path())).unwrap();
    for i in 0..300 {
        master
            .put_message(&common::message(TOPIC, 0, i, 1000))
            .unwrap();
    }
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
    let master = MessageStore::open(common::config(mdir.path())).unwrap();
    let mut ends = Vec::new();
    for i in 0..100 {
        let put = master
            .put_message(&common::message(TOPIC, 0, i, 500))
            .unwrap();
        ends.push(put.append.end_offset());
    }
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
