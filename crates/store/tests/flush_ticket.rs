//! Appends that do not wait for the flush: the ticket's completion runs on
//! the calling thread under ASYNC_FLUSH and once a group commit covered the
//! append under SYNC_FLUSH, in offset order, with FLUSH_DISK_TIMEOUT from the
//! timer thread, and exactly once even when the store shuts down first.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{mpsc, Arc, Mutex},
    time::Duration,
};

use common::{config, message};
use store::{FlushDiskType, MessageStore, PutOutcome, PutStatus, StoreConfig};

fn sync_config(dir: &std::path::Path, timeout_ms: u64, flush_delay_ms: u64) -> StoreConfig {
    StoreConfig {
        flush_disk_type: FlushDiskType::SyncFlush,
        sync_flush_timeout: timeout_ms,
        fault_flush_delay_mills: flush_delay_ms,
        ..config(dir)
    }
}

#[test]
fn async_flush_completes_on_the_calling_thread() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(config(dir.path())).unwrap();
    let ticket = store.append_message(&message("A", 0, 0, 100)).unwrap();
    assert!(!ticket.must_wait());
    let got: Arc<Mutex<Option<PutOutcome>>> = Arc::default();
    let slot = Arc::clone(&got);
    ticket.on_durable(move |o| *slot.lock().unwrap() = Some(o));
    let outcome = got
        .lock()
        .unwrap()
        .take()
        .expect("ran before on_durable returned");
    assert_eq!(outcome.status, PutStatus::Ok);
    assert_eq!(outcome.append.queue_offset, 0);
    let next = store.append_message(&message("A", 0, 1, 100)).unwrap();
    let outcome = next.try_complete().expect("nothing to wait for");
    assert_eq!(outcome.append.queue_offset, 1);
    assert_eq!(store.group_commit_stats().acknowledged, 0);
}

#[test]
fn sync_flush_without_wait_property_completes_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(sync_config(dir.path(), 5000, 300)).unwrap();
    let mut msg = message("W", 0, 0, 100);
    msg.properties.push_str("WAIT\u{1}false\u{2}");
    let ticket = store.append_message(&msg).unwrap();
    assert!(!ticket.must_wait());
    assert_eq!(ticket.try_complete().unwrap().status, PutStatus::Ok);
}

#[test]
fn sync_flush_completes_after_the_flush_in_offset_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(MessageStore::open(sync_config(dir.path(), 10_000, 20)).unwrap());
    let (tx, rx) = mpsc::channel();
    let mut ends = Vec::new();
    for i in 0..50u64 {
        let ticket = store.append_message(&message("S", 0, i, 200)).unwrap();
        ends.push(ticket.append().end_offset());
        let (tx, observer) = (tx.clone(), Arc::clone(&store));
        ticket.on_durable(move |o| {
            let flushed = observer.flushed_physical_offset();
            let by_flusher = std::thread::current().name() == Some("store-flush");
            tx.send((o.status, o.append.end_offset(), flushed, by_flusher))
                .unwrap();
        });
    }
    let mut seen = Vec::new();
    let mut by_flusher = Vec::new();
    for _ in 0..50 {
        let (status, end, flushed, flusher) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(status, PutStatus::Ok);
        assert!(
            flushed >= end,
            "completed at {flushed} before the flush reached {end}"
        );
        seen.push(end);
        if flusher {
            by_flusher.push(end);
        }
    }
    assert!(rx.try_recv().is_err(), "no completion twice");
    seen.sort_unstable();
    assert_eq!(seen, ends, "every append completed once");
    // An append found already flushed completes on the appending thread;
    // the flush thread completes the others lowest offset first.
    assert!(!by_flusher.is_empty(), "the flush thread completed appends");
    assert!(by_flusher.windows(2).all(|w| w[0] < w[1]), "{by_flusher:?}");
    let stats = store.group_commit_stats();
    assert_eq!(stats.acknowledged, by_flusher.len() as u64);
    assert_eq!(stats.pending, 0);
}

#[test]
fn the_timeout_fires_without_any_further_append_while_the_flush_hangs() {
    let dir = tempfile::tempdir().unwrap();
    // Every flush sleeps a second first: only the timer can answer in time.
    let store = MessageStore::open(sync_config(dir.path(), 20, 1000)).unwrap();
    let (tx, rx) = mpsc::channel();
    let ticket = store.append_message(&message("T", 0, 0, 100)).unwrap();
    let end = ticket.append().end_offset();
    ticket.on_durable(move |o| tx.send((o.status, o.append.end_offset())).unwrap());
    let (status, got_end) = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(status, PutStatus::FlushDiskTimeout);
    assert_eq!(got_end, end);
    assert!(
        rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "the flush that follows does not complete it again"
    );
    assert_eq!(store.group_commit_stats().not_flushed, 1);
}

#[test]
fn shutdown_completes_every_waiting_append_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(sync_config(dir.path(), 60_000, 500)).unwrap();
    let (tx, rx) = mpsc::channel();
    for i in 0..10u64 {
        let ticket = store.append_message(&message("D", 0, i, 100)).unwrap();
        let tx = tx.clone();
        ticket.on_durable(move |o| tx.send(o.status).unwrap());
    }
    drop(tx);
    store.shutdown();
    // The last flush at shutdown covers them all.
    let statuses: Vec<PutStatus> = (0..10)
        .map(|_| rx.recv_timeout(Duration::from_secs(1)).unwrap())
        .collect();
    assert_eq!(statuses, vec![PutStatus::Ok; 10]);
    assert!(
        matches!(rx.try_recv(), Err(mpsc::TryRecvError::Disconnected)),
        "no completion twice, none left behind"
    );
    assert_eq!(store.group_commit_stats().pending, 0);
    assert!(store.append_message(&message("D", 0, 10, 100)).is_err());
}

#[test]
fn the_blocking_put_waits_for_the_flush_on_top_of_the_ticket() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(sync_config(dir.path(), 10_000, 5)).unwrap();
    let out = store.put_message(&message("B", 0, 0, 100)).unwrap();
    assert_eq!(out.status, PutStatus::Ok);
    assert!(store.flushed_physical_offset() >= out.append.end_offset());
}
