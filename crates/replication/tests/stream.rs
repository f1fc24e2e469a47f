//! A master and its slaves over loopback: the stream, the confirm offset,
//! the cut of a divergent slave, and who may acknowledge.
#![allow(clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use bytes::Bytes;
use message_model::record::{self, MessageToStore, Record};
use replication::{master::Master, slave::Slave, sync_set::SyncSet, HaSettings};
use store::{Epoch, EpochHistory, GetStatus, MessageStore, StoreConfig};
use tokio::{io::AsyncReadExt, io::AsyncWriteExt, net::TcpListener};

const TOPIC: &str = "Replicated";

fn config(dir: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_message_size: 64 * 1024,
        replicated: true,
        disk_max_used_space_ratio: 95,
        clean_file_forcibly_enable: false,
        ..StoreConfig::with_root(dir)
    }
}

fn message(i: u64, len: usize) -> MessageToStore {
    let mut body = i.to_be_bytes().to_vec();
    body.resize(len, (i % 251) as u8);
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

fn bodies(store: &MessageStore) -> Vec<Vec<u8>> {
    let got = store.get_messages(TOPIC, 0, 0, 100_000, usize::MAX, None);
    if got.status != GetStatus::Found {
        return Vec::new();
    }
    got.messages
        .iter()
        .map(|r| match record::check(r, true) {
            Record::Message(m) => m.body.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

struct Node {
    store: Arc<MessageStore>,
    epochs: Arc<Mutex<EpochHistory>>,
    _dir: tempfile::TempDir,
}

fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(config(dir.path())).unwrap());
    let epochs = EpochHistory::open(&dir.path().join("epochFileCheckpoint")).unwrap();
    Node {
        store,
        epochs: Arc::new(Mutex::new(epochs)),
        _dir: dir,
    }
}

fn put(node: &Node, from: u64, n: u64, len: usize) {
    for i in from..from + n {
        node.store.put_message(&message(i, len)).unwrap();
    }
}

/// Starts `node` as master in `epoch` with the given in-sync members.
async fn start_master(
    node: &Node,
    epoch: i32,
    members: &[i64],
) -> (Arc<Master>, SocketAddr, tokio::task::JoinHandle<()>) {
    node.store.resume_appends().unwrap();
    let end = node.store.max_physical_offset();
    node.epochs
        .lock()
        .unwrap()
        .append(Epoch {
            epoch,
            start_offset: end,
        })
        .unwrap();
    let sync = Arc::new(SyncSet::new(0, end));
    sync.set_members(members.iter().copied());
    let master = Master::new(
        Arc::clone(&node.store),
        Arc::clone(&node.epochs),
        sync,
        HaSettings::default(),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let task = tokio::spawn(Arc::clone(&master).serve(listener));
    (master, addr, task)
}

/// Waits until the master's in-sync replicas all hold `end`.
async fn confirmed(master: &Master, end: u64) {
    assert!(
        master
            .sync_set()
            .wait_confirmed(end, Duration::from_secs(20))
            .await,
        "the in-sync replicas did not confirm {end} within 20 s"
    );
}

fn start_slave(
    node: &Node,
    broker_id: i64,
    learner: bool,
    master: SocketAddr,
) -> (Arc<Slave>, tokio::task::JoinHandle<()>) {
    let slave = Slave::new(
        Arc::clone(&node.store),
        Arc::clone(&node.epochs),
        HaSettings {
            broker_id,
            async_learner: learner,
            ..HaSettings::default()
        },
    );
    // The sender goes with the channel: the address never changes.
    let (_, address) = tokio::sync::watch::channel(Some(master.to_string()));
    let task = tokio::spawn(Arc::clone(&slave).run(address));
    (slave, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_follows_and_consumers_see_only_what_both_hold() {
    let (m, s) = (node(), node());
    let (master, addr, _serving) = start_master(&m, 1, &[0, 1]).await;
    // Nothing is confirmed before the slave acknowledges: the master's own
    // consumers see nothing yet.
    put(&m, 0, 400, 1000);
    master.appended();
    assert!(bodies(&m.store).is_empty());
    let (slave, _following) = start_slave(&s, 1, false, addr);
    let end = m.store.max_physical_offset();
    confirmed(&master, end).await;
    wait_until("the master's consumers see the confirmed messages", || {
        bodies(&m.store).len() == 400
    })
    .await;
    wait_until("the slave learns the confirm offset", || {
        s.store.confirm_offset() == Some(end)
    })
    .await;
    assert_eq!(bodies(&s.store), bodies(&m.store));
    assert_eq!(slave.status().master, Some(addr.to_string()));
    assert_eq!(
        s.epochs.lock().unwrap().entries(),
        m.epochs.lock().unwrap().entries()
    );
    // More while connected.
    put(&m, 400, 100, 3000);
    master.appended();
    let end = m.store.max_physical_offset();
    confirmed(&master, end).await;
    wait_until("the slave shows the new messages", || {
        bodies(&s.store).len() == 500
    })
    .await;
    assert_eq!(bodies(&s.store), bodies(&m.store));
    assert_eq!(master.replicas()[0].broker_id, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slave_with_a_divergent_tail_is_cut_where_the_epochs_agree() {
    // A is master in epoch 1; B follows it.
    let (a, b) = (node(), node());
    let (master_a, addr_a, serving_a) = start_master(&a, 1, &[0, 1]).await;
    put(&a, 0, 100, 1000);
    master_a.appended();
    let common = a.store.max_physical_offset();
    let (_, following_a) = start_slave(&b, 1, false, addr_a);
    confirmed(&master_a, common).await;
    wait_until("B holds the common prefix", || {
        b.store.max_physical_offset() == common
    })
    .await;
    following_a.abort();
    serving_a.abort();
    let _ = following_a.await;
    let _ = serving_a.await;
    // A, cut off from B, takes epoch 2 and writes what B never gets.
    a.epochs
        .lock()
        .unwrap()
        .append(Epoch {
            epoch: 2,
            start_offset: common,
        })
        .unwrap();
    put(&a, 100, 50, 700);
    // B becomes master in epoch 3 and writes other messages.
    let (master_b, addr_b, _serving_b) = start_master(&b, 3, &[0, 1]).await;
    put(&b, 1000, 70, 1500);
    master_b.appended();
    // A follows B: its epoch-2 tail goes.
    let (slave_a, _following_b) = start_slave(&a, 1, false, addr_b);
    let end = b.store.max_physical_offset();
    confirmed(&master_b, end).await;
    let shown = || bodies(&a.store).len() == 170;
    let deadline = Instant::now() + Duration::from_secs(20);
    while !shown() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(
        shown(),
        "A shows {} of B's 170 messages (queue max {}, behind {}); A ends at {} (B at {end}), confirm {:?}, status {:?}",
        bodies(&a.store).len(),
        a.store.max_offset_in_queue(TOPIC, 0),
        a.store.dispatch_behind_bytes(),
        a.store.max_physical_offset(),
        a.store.confirm_offset(),
        slave_a.status()
    );
    assert_eq!(bodies(&a.store), bodies(&b.store));
    assert_eq!(slave_a.status().truncated_to, Some(common));
    assert_eq!(
        a.epochs.lock().unwrap().entries(),
        [
            Epoch {
                epoch: 1,
                start_offset: 0
            },
            Epoch {
                epoch: 3,
                start_offset: common
            }
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_identified_in_sync_replicas_acknowledge() {
    let (m, learner) = (node(), node());
    let (master, addr, _serving) = start_master(&m, 1, &[0, 1]).await;
    put(&m, 0, 50, 500);
    master.appended();
    let end = m.store.max_physical_offset();
    // An offset report without a handshake: the connection is closed and
    // counts for nothing.
    let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut report = vec![0, 0, 0, 2];
    report.extend_from_slice(&i64::try_from(end).unwrap().to_be_bytes());
    raw.write_all(&report).await.unwrap();
    let mut buf = [0u8; 64];
    assert_eq!(raw.read(&mut buf).await.unwrap(), 0, "connection closed");
    // A learner with broker id 1 gets everything, but its acknowledgement
    // does not confirm anything.
    let _learner = start_slave(&learner, 1, true, addr);
    wait_until("the master saw the learner's acknowledgement", || {
        master.replicas().first().is_some_and(|r| r.acked == end)
    })
    .await;
    assert!(master.replicas()[0].async_learner);
    assert_eq!(master.sync_set().confirm_offset(), 0);
    assert_eq!(master.sync_set().ack_of(1), None);
    assert!(bodies(&m.store).is_empty());
}
