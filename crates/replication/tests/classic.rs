//! RocketMQ's classic framing over loopback: an empty slave gets the log
//! from the start of the master's newest file, a slave with a log continues
//! from its end, the master counts a caught-up classic slave in sync, and
//! what a classic slave received is what its consumers see.
#![allow(clippy::unwrap_used)]

use std::{
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use message_model::record::MessageToStore;
use replication::{master::Master, slave::Slave, sync_set::SyncSet, HaSettings};
use store::{EpochHistory, MessageStore, StoreConfig};
use tokio::{net::TcpListener, sync::watch};

const TOPIC: &str = "Classic";

fn config(dir: &Path, replicated: bool) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 128 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_message_size: 16 * 1024,
        replicated,
        disk_max_used_space_ratio: 95,
        clean_file_forcibly_enable: false,
        ..StoreConfig::with_root(dir)
    }
}

fn message(i: u64) -> MessageToStore {
    let mut body = i.to_be_bytes().to_vec();
    body.resize(1000, (i % 251) as u8);
    MessageToStore {
        topic: TOPIC.into(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse().unwrap(),
        store_host: "127.0.0.1:10911".parse().unwrap(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: Bytes::from(body),
        properties: String::new(),
    }
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn settings(broker_id: i64) -> HaSettings {
    HaSettings {
        broker_id,
        classic: true,
        manage_in_sync_set: true,
        heartbeat_interval: Duration::from_millis(200),
        ..HaSettings::default()
    }
}

fn epochs(dir: &Path) -> Arc<Mutex<EpochHistory>> {
    Arc::new(Mutex::new(
        EpochHistory::open(&dir.join("epochFileCheckpoint")).unwrap(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_classic_slave_copies_from_the_newest_file_and_joins_the_in_sync_set() {
    let mdir = tempfile::tempdir().unwrap();
    let master_store = Arc::new(MessageStore::open(config(mdir.path(), true)).unwrap());
    // 300 messages of about 1.1 KiB: two 128 KiB files and part of a third.
    for i in 0..300 {
        master_store.put_message(&message(i)).unwrap();
    }
    let end = master_store.max_physical_offset();
    let newest_file = end - end % (128 * 1024);
    assert!(newest_file > 0);
    let sync = Arc::new(SyncSet::new(0, end));
    let master = Master::new(
        Arc::clone(&master_store),
        epochs(mdir.path()),
        Arc::clone(&sync),
        settings(0),
    );
    master.attach();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let serving = tokio::spawn(Arc::clone(&master).serve(listener));

    // An empty slave: from the start of the master's newest file.
    let sdir = tempfile::tempdir().unwrap();
    let slave_store = Arc::new(MessageStore::open(config(sdir.path(), true)).unwrap());
    slave_store.refuse_local_appends(Some("a slave".into()));
    let slave = Slave::new(Arc::clone(&slave_store), epochs(sdir.path()), settings(1));
    let (_tx, rx) = watch::channel(Some(addr.clone()));
    let following = tokio::spawn(Arc::clone(&slave).run(rx));
    wait_until("the slave holds the master's end", || {
        slave_store.max_physical_offset() == end
    })
    .await;
    assert_eq!(slave_store.min_physical_offset(), newest_file);
    // Caught up: in the in-sync set, and what it received is confirmed to
    // its consumers.
    wait_until("the classic slave joins the in-sync set", || {
        sync.members().len() == 2
    })
    .await;
    assert_eq!(slave_store.confirm_offset(), Some(end));

    // New messages stream; a send waits for the slave like any member.
    for i in 300..310 {
        master_store.put_message(&message(i)).unwrap();
    }
    let end = master_store.max_physical_offset();
    assert!(sync.wait_confirmed(end, Duration::from_secs(20)).await);
    assert_eq!(slave_store.max_physical_offset(), end);

    // The slave restarts with its log: it continues from its end.
    following.abort();
    let _ = following.await;
    wait_until("the master sees the slave leave", || {
        master.replicas().is_empty()
    })
    .await;
    for i in 310..320 {
        master_store.put_message(&message(i)).unwrap();
    }
    let end = master_store.max_physical_offset();
    let (_tx, rx) = watch::channel(Some(addr));
    let following = tokio::spawn(Arc::clone(&slave).run(rx));
    wait_until("the slave catches up again", || {
        slave_store.max_physical_offset() == end
    })
    .await;
    assert_eq!(slave_store.min_physical_offset(), newest_file);
    following.abort();
    serving.abort();
}
