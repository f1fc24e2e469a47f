//! The POP engine against a real message store: where a new group starts,
//! pops across queues, invisibility and redelivery, acks, changed invisible
//! durations, receipt handles, tag filters, the in-flight limit, saving and
//! loading (clean restart and a crash with an older snapshot), committed
//! offsets, and a property test against a simple model.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    thread,
    time::{Duration, Instant},
};

use broker_server::pop::{PopError, PopLimits, PopRequest, PopService, PoppedMessage, TagFilter};
use bytes::Bytes;
use message_model::record::{self, Record};
use store::{MessageStore, MessageToStore, StoreConfig};

const T0: i64 = 1_800_000_000_000;

fn open_store(dir: &Path) -> MessageStore {
    MessageStore::open(StoreConfig {
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 1000 * 20,
        max_message_size: 64 * 1024,
        ..StoreConfig::with_root(dir)
    })
    .unwrap()
}

/// Stores a message and waits until its queue lists it; returns its offset.
fn send(store: &MessageStore, topic: &str, queue_id: i32, tag: Option<&str>, body: &str) -> i64 {
    let mut properties = format!("UNIQ_KEY\u{1}{body}\u{2}");
    if let Some(tag) = tag {
        properties = format!("TAGS\u{1}{tag}\u{2}{properties}");
    }
    let out = store
        .put_message(&MessageToStore {
            topic: topic.into(),
            queue_id,
            flag: 0,
            sys_flag: 0,
            born_timestamp: T0,
            born_host: "127.0.0.1:40000".parse().unwrap(),
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from(body.to_owned()),
            properties,
        })
        .unwrap();
    let offset = out.append.queue_offset;
    let deadline = Instant::now() + Duration::from_secs(10);
    while store.max_offset_in_queue(topic, queue_id) <= offset {
        assert!(Instant::now() < deadline, "message not dispatched in 10 s");
        thread::sleep(Duration::from_millis(1));
    }
    offset
}

fn body(m: &PoppedMessage) -> String {
    match record::check(&m.record, true) {
        Record::Message(s) => {
            assert_eq!(s.queue_id, m.queue_id);
            assert_eq!(s.queue_offset, m.queue_offset);
            String::from_utf8(s.body.to_vec()).unwrap()
        }
        other => panic!("not a message: {other:?}"),
    }
}

fn bodies(ms: &[PoppedMessage]) -> BTreeSet<String> {
    ms.iter().map(body).collect()
}

struct Fixture {
    dir: tempfile::TempDir,
    store: MessageStore,
    pop: PopService,
    all: TagFilter,
}

impl Fixture {
    fn new(limits: PopLimits) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = open_store(&dir.path().join("store"));
        let pop = PopService::load(&dir.path().join("config"), limits).unwrap();
        Self {
            dir,
            store,
            pop,
            all: TagFilter::all(),
        }
    }

    fn config_dir(&self) -> std::path::PathBuf {
        self.dir.path().join("config")
    }

    fn pop_with(
        &self,
        pop: &PopService,
        queues: &[i32],
        filter: &TagFilter,
        max: usize,
        invisible_ms: u64,
        now: i64,
    ) -> Result<Vec<PoppedMessage>, PopError> {
        self.pop_request(pop, queues, filter, max, invisible_ms, now, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn pop_request(
        &self,
        pop: &PopService,
        queues: &[i32],
        filter: &TagFilter,
        max: usize,
        invisible_ms: u64,
        now: i64,
        fifo: bool,
    ) -> Result<Vec<PoppedMessage>, PopError> {
        pop.pop(
            &self.store,
            &PopRequest {
                group: "G",
                topic: "T",
                queue_ids: queues,
                filter,
                max_messages: max,
                invisible: Duration::from_millis(invisible_ms),
                fifo,
            },
            now,
        )
    }

    fn pop_fifo(
        &self,
        queues: &[i32],
        max: usize,
        invisible_ms: u64,
        now: i64,
    ) -> Vec<PoppedMessage> {
        self.pop_request(&self.pop, queues, &self.all, max, invisible_ms, now, true)
            .unwrap()
    }

    fn pop(&self, queues: &[i32], max: usize, invisible_ms: u64, now: i64) -> Vec<PoppedMessage> {
        self.pop_with(&self.pop, queues, &self.all, max, invisible_ms, now)
            .unwrap()
    }
}

fn invalid(result: Result<impl std::fmt::Debug, PopError>) -> String {
    match result {
        Err(PopError::InvalidReceiptHandle(why)) => why,
        other => panic!("expected an invalid receipt handle, got {other:?}"),
    }
}

#[test]
fn a_new_group_starts_at_the_end_of_each_queue() {
    let f = Fixture::new(PopLimits::default());
    for i in 0..3 {
        send(&f.store, "T", 0, None, &format!("old{i}"));
        send(&f.store, "T", 1, None, &format!("old1-{i}"));
    }
    assert!(f.pop(&[0, 1], 32, 1000, T0).is_empty());
    send(&f.store, "T", 0, None, "new0");
    send(&f.store, "T", 1, None, "new1");
    let got = f.pop(&[0, 1], 32, 1000, T0);
    assert_eq!(bodies(&got), BTreeSet::from(["new0".into(), "new1".into()]));
    assert!(got.iter().all(|m| m.delivery_attempt == 1));
    assert!(got.iter().all(|m| m.invisible_until_ms == T0 + 1000));
    assert!(f.pop(&[0, 1], 32, 1000, T0).is_empty());
}

#[test]
fn pops_spread_over_all_queues_and_respect_the_batch_limits() {
    let f = Fixture::new(PopLimits {
        max_inflight_per_group_topic: 1000,
        max_batch: 10,
    });
    let queues = [0, 1, 2, 3];
    assert!(f.pop(&queues, 32, 1000, T0).is_empty());
    for q in queues {
        for i in 0..5 {
            send(&f.store, "T", q, None, &format!("q{q}-{i}"));
        }
    }
    let first = f.pop(&queues, 8, 1000, T0);
    assert_eq!(first.len(), 8);
    let per_queue: BTreeSet<i32> = first.iter().map(|m| m.queue_id).collect();
    assert_eq!(per_queue.len(), 4, "a fair share of every queue: {first:?}");
    let second = f.pop(&queues, 100, 1000, T0);
    assert_eq!(second.len(), 10, "cut to max_batch");
    let third = f.pop(&queues, 100, 1000, T0);
    assert_eq!(third.len(), 2);
    let mut all = bodies(&first);
    all.extend(bodies(&second));
    all.extend(bodies(&third));
    assert_eq!(all.len(), 20, "each message exactly once");
    assert!(f.pop(&queues, 100, 1000, T0).is_empty());
    let handles: BTreeSet<&str> = first
        .iter()
        .chain(&second)
        .chain(&third)
        .map(|m| m.receipt_handle.as_str())
        .collect();
    assert_eq!(handles.len(), 20, "handles are unique");
}

#[test]
fn a_fifo_group_gets_nothing_new_from_a_queue_until_its_messages_are_acknowledged() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop_fifo(&[0, 1], 32, 1000, T0).is_empty());
    for i in 0..3 {
        send(&f.store, "T", 0, None, &format!("q0-{i}"));
    }
    send(&f.store, "T", 1, None, "q1-0");
    let first = f.pop_fifo(&[0], 1, 1000, T0);
    assert_eq!(bodies(&first), BTreeSet::from(["q0-0".to_owned()]));
    // Queue 0 is blocked while q0-0 is in flight; queue 1 is not.
    let second = f.pop_fifo(&[0, 1], 32, 1000, T0);
    assert_eq!(bodies(&second), BTreeSet::from(["q1-0".to_owned()]));
    assert!(f.pop_fifo(&[0, 1], 32, 1000, T0).is_empty());
    // Not acknowledged in time: the same message again, never the next one.
    let again = f.pop_fifo(&[0, 1], 32, 1000, T0 + 1000);
    let again_q0: Vec<String> = again.iter().filter(|m| m.queue_id == 0).map(body).collect();
    assert_eq!(again_q0, ["q0-0"]);
    let handle = again.iter().find(|m| m.queue_id == 0).unwrap();
    f.pop
        .ack("G", "T", &handle.receipt_handle, T0 + 1001)
        .unwrap();
    let next = f.pop_fifo(&[0], 32, 1000, T0 + 1001);
    assert_eq!(
        next.iter().map(body).collect::<Vec<_>>(),
        ["q0-1", "q0-2"],
        "in order, once the queue is free"
    );
}

#[test]
fn unacknowledged_messages_come_back_with_a_new_handle_and_the_next_attempt() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 100, T0).is_empty());
    send(&f.store, "T", 0, None, "m");
    let first = f.pop(&[0], 32, 100, T0);
    assert_eq!(first.len(), 1);
    assert_eq!(f.pop.next_visible_ms("G", "T"), Some(T0 + 100));
    assert!(f.pop(&[0], 32, 100, T0 + 99).is_empty(), "still invisible");
    let again = f.pop(&[0], 32, 200, T0 + 100);
    assert_eq!(again.len(), 1);
    assert_eq!(body(&again[0]), "m");
    assert_eq!(again[0].delivery_attempt, 2);
    assert_eq!(again[0].invisible_until_ms, T0 + 300);
    assert_ne!(again[0].receipt_handle, first[0].receipt_handle);
    let why = invalid(f.pop.ack("G", "T", &first[0].receipt_handle, T0 + 101));
    assert!(why.contains("stale"), "{why}");
    f.pop
        .ack("G", "T", &again[0].receipt_handle, T0 + 101)
        .unwrap();
    let why = invalid(f.pop.ack("G", "T", &again[0].receipt_handle, T0 + 102));
    assert!(why.contains("not in flight"), "{why}");
    assert_eq!(f.pop.next_visible_ms("G", "T"), None);
    assert!(
        f.pop(&[0], 32, 100, T0 + 10_000).is_empty(),
        "acked for good"
    );
}

#[test]
fn a_late_ack_is_accepted_until_the_message_is_delivered_again() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 100, T0).is_empty());
    send(&f.store, "T", 0, None, "m");
    let first = f.pop(&[0], 32, 100, T0);
    f.pop
        .ack("G", "T", &first[0].receipt_handle, T0 + 500)
        .unwrap();
    assert!(f.pop(&[0], 32, 100, T0 + 600).is_empty());
}

#[test]
fn changing_the_invisible_duration_postpones_and_replaces_the_handle() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 100, T0).is_empty());
    send(&f.store, "T", 0, None, "m");
    let first = f.pop(&[0], 32, 100, T0);
    let changed = f
        .pop
        .change_invisible(
            "G",
            "T",
            &first[0].receipt_handle,
            Duration::from_millis(300),
            T0 + 50,
        )
        .unwrap();
    assert_ne!(changed, first[0].receipt_handle);
    assert_eq!(f.pop.next_visible_ms("G", "T"), Some(T0 + 350));
    assert!(f.pop(&[0], 32, 100, T0 + 100).is_empty(), "postponed");
    let why = invalid(f.pop.ack("G", "T", &first[0].receipt_handle, T0 + 120));
    assert!(why.contains("stale"), "{why}");
    let why = invalid(f.pop.change_invisible(
        "G",
        "T",
        &first[0].receipt_handle,
        Duration::from_millis(300),
        T0 + 120,
    ));
    assert!(why.contains("stale"), "{why}");
    let again = f.pop(&[0], 32, 100, T0 + 350);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].delivery_attempt, 2, "a change is not a delivery");
    invalid(f.pop.ack("G", "T", &changed, T0 + 360));
    f.pop
        .ack("G", "T", &again[0].receipt_handle, T0 + 360)
        .unwrap();
}

#[test]
fn malformed_foreign_and_unknown_handles_are_refused() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 100, T0).is_empty());
    send(&f.store, "T", 0, None, "m");
    let got = f.pop(&[0], 32, 100, T0);
    let good = &got[0].receipt_handle;
    let mut damaged = good.clone();
    damaged.push('x');
    let truncated = &good[..good.len() - 1];
    for bad in [
        "",
        "x",
        "not a handle at all",
        &damaged,
        truncated,
        "\u{0}\u{1}é",
    ] {
        invalid(f.pop.ack("G", "T", bad, T0));
        invalid(
            f.pop
                .change_invisible("G", "T", bad, Duration::from_secs(1), T0),
        );
    }
    let why = invalid(f.pop.ack("G", "Other", good, T0));
    assert!(why.contains("topic"), "{why}");
    let why = invalid(f.pop.ack("G2", "T", good, T0));
    assert!(why.contains("G2"), "{why}");
    f.pop.ack("G", "T", good, T0).unwrap();
}

#[test]
fn tag_filters_deliver_only_matching_messages_and_skip_the_rest() {
    let f = Fixture::new(PopLimits::default());
    let ab = TagFilter::parse("a||b").unwrap();
    assert!(f
        .pop_with(&f.pop, &[0], &ab, 32, 100, T0)
        .unwrap()
        .is_empty());
    send(&f.store, "T", 0, Some("a"), "ma");
    send(&f.store, "T", 0, Some("c"), "mc");
    send(&f.store, "T", 0, None, "mnone");
    send(&f.store, "T", 0, Some("b"), "mb");
    // "Aa" and "BB" share Java's String hash; only the real tag decides.
    send(&f.store, "T", 0, Some("BB"), "mBB");
    let got = f.pop_with(&f.pop, &[0], &ab, 32, 100, T0).unwrap();
    assert_eq!(bodies(&got), BTreeSet::from(["ma".into(), "mb".into()]));
    let aa = TagFilter::parse("Aa").unwrap();
    send(&f.store, "T", 0, Some("Aa"), "mAa");
    send(&f.store, "T", 0, Some("BB"), "mBB2");
    let got = f.pop_with(&f.pop, &[0], &aa, 32, 100, T0).unwrap();
    assert_eq!(bodies(&got), BTreeSet::from(["mAa".into()]));
    assert!(
        f.pop(&[0], 32, 100, T0).is_empty(),
        "skipped messages are consumed for the group"
    );
    assert!(matches!(
        TagFilter::parse("||"),
        Err(PopError::IllegalFilter(_))
    ));
}

#[test]
fn the_inflight_limit_holds_back_new_messages_but_not_redeliveries() {
    let f = Fixture::new(PopLimits {
        max_inflight_per_group_topic: 3,
        max_batch: 32,
    });
    assert!(f.pop(&[0], 32, 100, T0).is_empty());
    for i in 0..5 {
        send(&f.store, "T", 0, None, &format!("m{i}"));
    }
    let first = f.pop(&[0], 32, 100, T0);
    assert_eq!(first.len(), 3);
    assert_eq!(f.pop.inflight("G", "T"), 3);
    match f.pop_with(&f.pop, &[0], &f.all, 32, 100, T0 + 10) {
        Err(e @ PopError::TooManyInflight { limit: 3, .. }) => {
            assert!(e.to_string().contains("limit"), "{e}");
        }
        other => panic!("expected TooManyInflight, got {other:?}"),
    }
    f.pop
        .ack("G", "T", &first[0].receipt_handle, T0 + 10)
        .unwrap();
    let one = f.pop(&[0], 32, 100, T0 + 20);
    assert_eq!(bodies(&one), BTreeSet::from(["m3".into()]));
    let redelivered = f.pop(&[0], 32, 100, T0 + 100);
    assert_eq!(
        bodies(&redelivered),
        BTreeSet::from(["m1".into(), "m2".into()])
    );
    assert!(redelivered.iter().all(|m| m.delivery_attempt == 2));
}

#[test]
fn the_state_of_a_group_not_used_for_the_ttl_is_forgotten() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 1000, T0).is_empty());
    send(&f.store, "T", 0, None, "m0");
    let got = f.pop(&[0], 32, 1000, T0 + 10);
    assert_eq!(got.len(), 1);
    // Within the ttl of its last use, or while the group is online, it stays.
    assert!(f.pop.expire(T0 + 10 + 999, 1000, |_| false).is_empty());
    assert!(f.pop.expire(T0 + 10 + 5000, 1000, |g| g == "G").is_empty());
    assert_eq!(f.pop.inflight("G", "T"), 1);
    assert_eq!(
        f.pop.expire(T0 + 10 + 1000, 1000, |_| false),
        [("G".to_owned(), "T".to_owned())]
    );
    assert_eq!(f.pop.inflight("G", "T"), 0);
    assert!(f
        .pop
        .ack("G", "T", &got[0].receipt_handle, T0 + 2000)
        .is_err());
    f.pop.persist().unwrap();
    let reloaded = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    assert_eq!(reloaded.inflight("G", "T"), 0);
}

#[test]
fn a_clean_restart_keeps_acks_and_invisible_messages() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0, 1], 32, 1000, T0).is_empty());
    for i in 0..3 {
        send(&f.store, "T", i % 2, None, &format!("m{i}"));
    }
    let got = f.pop(&[0, 1], 32, 1000, T0);
    assert_eq!(got.len(), 3);
    f.pop.ack("G", "T", &got[0].receipt_handle, T0).unwrap();
    f.pop.persist().unwrap();
    let reloaded = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    assert_eq!(reloaded.inflight("G", "T"), 2);
    assert_eq!(reloaded.next_visible_ms("G", "T"), Some(T0 + 1000));
    assert!(f
        .pop_with(&reloaded, &[0, 1], &f.all, 32, 1000, T0 + 999)
        .unwrap()
        .is_empty());
    // A handle issued before the restart still acknowledges.
    reloaded
        .ack("G", "T", &got[1].receipt_handle, T0 + 999)
        .unwrap();
    let back = f
        .pop_with(&reloaded, &[0, 1], &f.all, 32, 1000, T0 + 1000)
        .unwrap();
    assert_eq!(bodies(&back), bodies(&got[2..]));
    assert_eq!(back[0].delivery_attempt, 2);
    let before: BTreeSet<&str> = got.iter().map(|m| m.receipt_handle.as_str()).collect();
    assert!(!before.contains(back[0].receipt_handle.as_str()));
    send(&f.store, "T", 1, None, "after");
    let new = f
        .pop_with(&reloaded, &[0, 1], &f.all, 32, 1000, T0 + 1000)
        .unwrap();
    assert_eq!(bodies(&new), BTreeSet::from(["after".into()]));
}

#[test]
fn a_crash_with_an_older_snapshot_delivers_again_and_loses_nothing() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 1000, T0).is_empty());
    for i in 0..4 {
        send(&f.store, "T", 0, None, &format!("m{i}"));
    }
    let early = f.pop(&[0], 2, 1000, T0);
    f.pop.ack("G", "T", &early[0].receipt_handle, T0).unwrap();
    f.pop.persist().unwrap();
    let snapshot = f.dir.path().join("snapshot");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::copy(
        f.config_dir().join("popState.json"),
        snapshot.join("popState.json"),
    )
    .unwrap();
    // After the snapshot: everything delivered and acknowledged.
    let late = f.pop(&[0], 32, 1000, T0 + 1);
    assert_eq!(late.len(), 2);
    f.pop
        .ack("G", "T", &early[1].receipt_handle, T0 + 1)
        .unwrap();
    for m in &late {
        f.pop.ack("G", "T", &m.receipt_handle, T0 + 1).unwrap();
    }
    f.pop.persist().unwrap();
    let crashed = PopService::load(&snapshot, PopLimits::default()).unwrap();
    let now = T0 + 2;
    let new_again = f.pop_with(&crashed, &[0], &f.all, 32, 1000, now).unwrap();
    assert_eq!(
        bodies(&new_again),
        BTreeSet::from(["m2".into(), "m3".into()])
    );
    let redelivered = f
        .pop_with(&crashed, &[0], &f.all, 32, 1000, T0 + 1000)
        .unwrap();
    assert_eq!(bodies(&redelivered), BTreeSet::from(["m1".into()]));
    assert_eq!(redelivered[0].delivery_attempt, 2);
    // The handle issued before the crash for m1 is not the newest any more.
    invalid(crashed.ack("G", "T", &early[1].receipt_handle, T0 + 1000));
}

#[test]
fn a_new_group_start_survives_a_crash_before_any_periodic_write() {
    let f = Fixture::new(PopLimits::default());
    send(&f.store, "T", 0, None, "before");
    // The first receive fixes the start; no periodic write follows.
    assert!(f.pop(&[0], 32, 1000, T0).is_empty());
    send(&f.store, "T", 0, None, "after");
    // A crash now: the next process loads what is on disk.
    let crashed = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    let got = f
        .pop_with(&crashed, &[0], &f.all, 32, 1000, T0 + 1)
        .unwrap();
    assert_eq!(bodies(&got), BTreeSet::from(["after".into()]));
}

#[test]
fn committed_offsets_are_the_lowest_unacknowledged() {
    let f = Fixture::new(PopLimits::default());
    send(&f.store, "T", 1, None, "before");
    assert!(f.pop(&[0, 1], 32, 1000, T0).is_empty());
    assert_eq!(
        f.pop.committed_offsets(),
        vec![
            ("G".into(), "T".into(), 0, 0),
            ("G".into(), "T".into(), 1, 1)
        ]
    );
    for i in 0..3 {
        send(&f.store, "T", 0, None, &format!("m{i}"));
    }
    let got = f.pop(&[0, 1], 32, 1000, T0);
    let by_offset: BTreeMap<i64, &PoppedMessage> =
        got.iter().map(|m| (m.queue_offset, m)).collect();
    assert_eq!(f.pop.committed_offsets()[0].3, 0);
    f.pop
        .ack("G", "T", &by_offset[&1].receipt_handle, T0)
        .unwrap();
    assert_eq!(
        f.pop.committed_offsets()[0].3,
        0,
        "offset 0 still in flight"
    );
    f.pop
        .ack("G", "T", &by_offset[&0].receipt_handle, T0)
        .unwrap();
    assert_eq!(f.pop.committed_offsets()[0].3, 2);
    f.pop
        .ack("G", "T", &by_offset[&2].receipt_handle, T0)
        .unwrap();
    assert_eq!(f.pop.committed_offsets()[0].3, 3);
}

#[test]
fn a_missing_file_is_empty_and_a_corrupt_one_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let empty = PopService::load(dir.path(), PopLimits::default()).unwrap();
    assert!(empty.committed_offsets().is_empty());
    empty.persist().unwrap();
    assert!(
        !dir.path().join("popState.json").exists(),
        "nothing changed, nothing written"
    );
    std::fs::write(dir.path().join("popState.json"), b"{\"version\":1,").unwrap();
    let err = PopService::load(dir.path(), PopLimits::default()).unwrap_err();
    assert!(err.to_string().contains("popState.json"), "{err}");
    std::fs::write(
        dir.path().join("popState.json"),
        br#"{"version":9,"nextSeq":1,"groups":[]}"#,
    )
    .unwrap();
    let err = PopService::load(dir.path(), PopLimits::default()).unwrap_err();
    assert!(err.to_string().contains("version 9"), "{err}");
    let err = PopService::load(
        dir.path(),
        PopLimits {
            max_inflight_per_group_topic: 1,
            max_batch: 0,
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("max_batch"), "{err}");
}

#[test]
fn handles_differ_across_restarts() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 10, T0).is_empty());
    send(&f.store, "T", 0, None, "m");
    let first = f.pop(&[0], 32, 10, T0);
    f.pop.persist().unwrap();
    // An instance that saw the same snapshot twice (a crash after the pop
    // below) must not hand out the handle the first one did.
    let a = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    let from_a = f.pop_with(&a, &[0], &f.all, 32, 10, T0 + 10).unwrap();
    let b = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    let from_b = f.pop_with(&b, &[0], &f.all, 32, 10, T0 + 10).unwrap();
    let handles = BTreeSet::from([
        first[0].receipt_handle.clone(),
        from_a[0].receipt_handle.clone(),
        from_b[0].receipt_handle.clone(),
    ]);
    assert_eq!(handles.len(), 3);
    invalid(b.ack("G", "T", &from_a[0].receipt_handle, T0 + 11));
}

#[test]
fn a_queue_added_to_a_known_group_is_read_from_its_beginning() {
    let f = Fixture::new(PopLimits::default());
    assert!(f.pop(&[0], 32, 1000, T0).is_empty());
    send(&f.store, "T", 1, None, "q1-a");
    send(&f.store, "T", 1, None, "q1-b");
    let got = f.pop(&[0, 1], 32, 1000, T0);
    assert_eq!(bodies(&got), BTreeSet::from(["q1-a".into(), "q1-b".into()]));
}

#[test]
fn a_state_ahead_of_the_store_goes_on_from_the_queue_end() {
    let f = Fixture::new(PopLimits::default());
    for i in 0..3 {
        send(&f.store, "T", 0, None, &format!("m{i}"));
    }
    // Saved before a crash that cost the store its last messages: the
    // group had read to offset 10 and offset 7 was in flight.
    std::fs::create_dir_all(f.config_dir()).unwrap();
    std::fs::write(
        f.config_dir().join("popState.json"),
        r#"{"version":1,"nextSeq":5,"groups":[{"group":"G","topic":"T","queues":[
            {"queueId":0,"next":10,"inflight":[{"offset":7,"seq":4,"attempt":1,"visibleAt":0}]}]}]}"#,
    )
    .unwrap();
    let pop = PopService::load(&f.config_dir(), PopLimits::default()).unwrap();
    assert_eq!(pop.inflight("G", "T"), 1);
    let got = f.pop_with(&pop, &[0], &f.all, 32, 1000, T0).unwrap();
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(pop.inflight("G", "T"), 0, "the lost message is dropped");
    assert_eq!(
        pop.committed_offsets(),
        vec![("G".into(), "T".into(), 0, 3)]
    );
    send(&f.store, "T", 0, None, "after");
    let got = f.pop_with(&pop, &[0], &f.all, 32, 1000, T0).unwrap();
    assert_eq!(bodies(&got), BTreeSet::from(["after".into()]));
    assert_eq!(got[0].queue_offset, 3);
}

#[test]
fn concurrent_pops_hand_each_message_out_once() {
    let f = Fixture::new(PopLimits::default());
    let queues = [0, 1, 2, 3];
    assert!(f.pop(&queues, 32, 1000, T0).is_empty());
    for i in 0..200 {
        send(&f.store, "T", i % 4, None, &format!("m{i}"));
    }
    let seen = std::sync::Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..1000 {
                    let got = f.pop(&queues, 7, 3_600_000, T0);
                    if got.is_empty() {
                        break;
                    }
                    for m in &got {
                        f.pop.ack("G", "T", &m.receipt_handle, T0).unwrap();
                    }
                    seen.lock().unwrap().extend(got.iter().map(body));
                }
            });
        }
    });
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 200, "delivered once each");
    assert_eq!(seen.iter().collect::<BTreeSet<_>>().len(), 200);
    assert_eq!(f.pop.inflight("G", "T"), 0);
    for (_, _, queue, committed) in f.pop.committed_offsets() {
        assert_eq!(committed, f.store.max_offset_in_queue("T", queue));
    }
}

#[tokio::test]
async fn arrivals_wake_a_waiter_registered_before_the_pop() {
    let f = Fixture::new(PopLimits::default());
    let arrival = f.pop.arrival("T");
    let notified = arrival.notified();
    assert!(f.pop(&[0], 32, 10, T0).is_empty());
    // A message arrives between the empty pop and the wait.
    f.pop.arrived("T");
    tokio::time::timeout(Duration::from_secs(5), notified)
        .await
        .expect("the arrival wakes the waiter");
    let other_arrival = f.pop.arrival("Other");
    let other = other_arrival.notified();
    f.pop.arrived("T");
    assert!(
        tokio::time::timeout(Duration::from_millis(50), other)
            .await
            .is_err(),
        "another topic's arrival wakes nobody here"
    );
}

mod model {
    //! Random sequences of sends, pops, acks, stale acks, changed invisible
    //! durations, time steps, clean restarts and crashes against a model:
    //! nothing acknowledged is delivered again (except after a crash, for
    //! acks newer than the snapshot), nothing invisible is delivered twice,
    //! and in the end every message is delivered and acknowledged.

    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Send { queue: i32, count: usize },
        Pop { max: usize, invisible_ms: u64 },
        Ack { pick: usize },
        StaleAck { pick: usize },
        Change { pick: usize, invisible_ms: u64 },
        Advance { ms: i64 },
        Snapshot,
        Restart,
        Crash,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..3i32, 1..4usize).prop_map(|(queue, count)| Op::Send { queue, count }),
            4 => (1..6usize, 1..300u64).prop_map(|(max, invisible_ms)| Op::Pop { max, invisible_ms }),
            3 => any::<usize>().prop_map(|pick| Op::Ack { pick }),
            1 => any::<usize>().prop_map(|pick| Op::StaleAck { pick }),
            1 => (any::<usize>(), 1..300u64)
                .prop_map(|(pick, invisible_ms)| Op::Change { pick, invisible_ms }),
            2 => (0..400i64).prop_map(|ms| Op::Advance { ms }),
            1 => Just(Op::Snapshot),
            1 => Just(Op::Restart),
            1 => Just(Op::Crash),
        ]
    }

    /// What the model knows of a message handed out.
    #[derive(Debug, Clone)]
    struct Held {
        handle: String,
        visible_at: i64,
        attempt: u32,
    }

    type Id = (i32, i64);

    /// Checks a pop's messages against the model and records them.
    fn take(
        got: Vec<PoppedMessage>,
        now: i64,
        held: &mut BTreeMap<Id, Held>,
        acked: &BTreeSet<Id>,
        stale: &mut Vec<String>,
    ) -> Result<(), TestCaseError> {
        for m in got {
            let id = (m.queue_id, m.queue_offset);
            prop_assert!(
                !acked.contains(&id),
                "acknowledged {:?} delivered again",
                id
            );
            prop_assert!(m.delivery_attempt >= 1);
            if let Some(h) = held.get(&id) {
                prop_assert!(h.visible_at <= now, "{:?} delivered while invisible", id);
                prop_assert_eq!(m.delivery_attempt, h.attempt + 1);
                stale.push(h.handle.clone());
            }
            held.insert(
                id,
                Held {
                    handle: m.receipt_handle,
                    visible_at: m.invisible_until_ms,
                    attempt: m.delivery_attempt,
                },
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
        #[test]
        fn every_message_is_acknowledged_in_the_end_and_never_lost(
            ops in proptest::collection::vec(op(), 1..40)
        ) {
            let f = Fixture::new(PopLimits { max_inflight_per_group_topic: 8, max_batch: 32 });
            let snapshot_dir = f.dir.path().join("snapshot");
            std::fs::create_dir_all(&snapshot_dir).unwrap();
            let queues = [0, 1, 2];
            let mut now = T0;
            let mut pop = PopService::load(&f.config_dir(), f.pop.limits()).unwrap();
            prop_assert!(f.pop_with(&pop, &queues, &f.all, 1, 10, now).unwrap().is_empty());
            pop.persist().unwrap();
            let snapshot_file = snapshot_dir.join("popState.json");
            std::fs::copy(f.config_dir().join("popState.json"), &snapshot_file).unwrap();

            let mut sent: BTreeSet<Id> = BTreeSet::new();
            let mut acked: BTreeSet<Id> = BTreeSet::new();
            let mut acked_at_snapshot: BTreeSet<Id> = BTreeSet::new();
            let mut held: BTreeMap<Id, Held> = BTreeMap::new();
            let mut stale: Vec<String> = Vec::new();
            let mut n = 0;

            for op in ops {
                match op {
                    Op::Send { queue, count } => {
                        for _ in 0..count {
                            let offset = send(&f.store, "T", queue, None, &format!("m{n}"));
                            n += 1;
                            sent.insert((queue, offset));
                        }
                    }
                    Op::Pop { max, invisible_ms } => {
                        match f.pop_with(&pop, &queues, &f.all, max, invisible_ms, now) {
                            Ok(got) => {
                                prop_assert!(got.len() <= max);
                                take(got, now, &mut held, &acked, &mut stale)?;
                            }
                            Err(PopError::TooManyInflight { .. }) => {
                                prop_assert!(pop.inflight("G", "T") >= 8);
                            }
                            Err(e) => prop_assert!(false, "pop failed: {e}"),
                        }
                    }
                    Op::Ack { pick } => {
                        if held.is_empty() { continue; }
                        let id = *held.keys().nth(pick % held.len()).unwrap();
                        let h = held.remove(&id).unwrap();
                        pop.ack("G", "T", &h.handle, now).unwrap();
                        acked.insert(id);
                        stale.push(h.handle);
                    }
                    Op::StaleAck { pick } => {
                        if stale.is_empty() { continue; }
                        let handle = &stale[pick % stale.len()];
                        prop_assert!(pop.ack("G", "T", handle, now).is_err());
                    }
                    Op::Change { pick, invisible_ms } => {
                        if held.is_empty() { continue; }
                        let id = *held.keys().nth(pick % held.len()).unwrap();
                        let h = held.get_mut(&id).unwrap();
                        let new = pop
                            .change_invisible("G", "T", &h.handle, Duration::from_millis(invisible_ms), now)
                            .unwrap();
                        stale.push(std::mem::replace(&mut h.handle, new));
                        h.visible_at = now + invisible_ms as i64;
                    }
                    Op::Advance { ms } => now += ms,
                    Op::Snapshot => {
                        pop.persist().unwrap();
                        if f.config_dir().join("popState.json").exists() {
                            std::fs::copy(f.config_dir().join("popState.json"), &snapshot_file).unwrap();
                        }
                        acked_at_snapshot = acked.clone();
                    }
                    Op::Restart => {
                        pop.persist().unwrap();
                        pop = PopService::load(&f.config_dir(), f.pop.limits()).unwrap();
                    }
                    Op::Crash => {
                        // The file on disk is the last snapshot: later
                        // changes were never written.
                        std::fs::copy(&snapshot_file, f.config_dir().join("popState.json")).unwrap();
                        pop = PopService::load(&f.config_dir(), f.pop.limits()).unwrap();
                        acked = acked_at_snapshot.clone();
                        held.clear();
                        stale.clear();
                    }
                }
            }

            // Drain: let everything become visible, take and acknowledge it.
            for _ in 0..200 {
                now += 1000;
                let got = f.pop_with(&pop, &queues, &f.all, 32, 100, now).unwrap();
                if got.is_empty() && pop.inflight("G", "T") == 0 {
                    break;
                }
                take(got, now, &mut held, &acked, &mut stale)?;
                for (id, h) in std::mem::take(&mut held) {
                    pop.ack("G", "T", &h.handle, now).unwrap();
                    acked.insert(id);
                }
            }
            prop_assert_eq!(pop.inflight("G", "T"), 0);
            let missing: Vec<&Id> = sent.difference(&acked).collect();
            prop_assert!(missing.is_empty(), "never delivered and acknowledged: {missing:?}");
            for (_, _, queue, committed) in pop.committed_offsets() {
                prop_assert_eq!(committed, f.store.max_offset_in_queue("T", queue));
            }
        }
    }
}
