//! Timer messages (RocketMQ 5's `TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`,
//! `TIMER_DELAY_MS`, and gRPC's `delivery_timestamp`): delivered at a given
//! instant rather than after a delay level.
//!
//! A send with one of those properties and a due time in the future is
//! stored in the system topic `rmq_sys_wheel_timer` (queue 0) with its due
//! time in `TIMER_OUT_MS` and its real topic and queue in
//! `REAL_TOPIC`/`REAL_QID`; the store indexes it with the due time as the
//! consume queue's tags code. The `timer-wheel` thread reads that queue into
//! an in-memory wheel ordered by due time and, at each due instant, stores
//! the message again in its real topic.
//!
//! The timer queue itself is the durable part: the thread's progress is
//! written to `<storePathRootDir>/config/timerProgress.json` — how far the
//! queue was read, how far in time messages were delivered, and the oldest
//! queue offset still pending. After a restart the wheel is rebuilt from
//! that offset: an entry due after the delivered time is pending, one due
//! before it was delivered; entries never read are read as new ones, so
//! messages that fell due while the broker was down go out at once. A crash
//! delivers again what was delivered after the last progress write (at
//! least once).
//!
//! Only a master delivers. A slave copies its master's progress
//! (`GET_TIMER_CHECK_POINT`, see [`TimerWheel::adopt`]) and, elected master,
//! rebuilds its wheel from it ([`TimerWheel::recover`]): it delivers what
//! its master had not, not the whole timer queue again. A master demoted to
//! slave stops delivering ([`TimerWheel::pause`]).
//!
//! # Invariants
//! - Every entry of the timer queue below `enqueue_offset` whose due time is
//!   at or before `delivered_until` has been delivered; every other entry
//!   below it is in the wheel.
//! - The wheel holds at most `timerMaxPending` entries (beyond that, sends
//!   of timer messages are refused).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
    time::Duration,
};

use message_model::{
    flags::TIMER_TOPIC,
    properties::{keys, Properties},
    MessageToStore,
};
use remoting_protocol::body::{DataVersion, TimerCheckpoint};
use serde::{Deserialize, Serialize};
use store::MessageStore;

use crate::{persist, schedule::to_real_topic, service_loop::ServiceLoop};

/// What a send's timer properties ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimerRequest {
    /// Not a timer message, or due already: store it as it is.
    None,
    /// Deliver at this instant (ms since the epoch).
    At(i64),
    /// The properties are not valid: the answer's remark.
    Illegal(String),
}

/// Reads a message's timer properties as RocketMQ does: `TIMER_DELAY_SEC`,
/// else `TIMER_DELAY_MS`, else `TIMER_DELIVER_MS`; a message already on the
/// timer topic or already carrying `TIMER_OUT_MS` is not a new timer.
pub fn timer_request(
    topic: &str,
    properties: &str,
    now_ms: i64,
    max_delay_ms: i64,
) -> TimerRequest {
    use message_model::properties::find;
    if topic == TIMER_TOPIC || find(properties, keys::TIMER_OUT_MS).is_some() {
        return TimerRequest::None;
    }
    let parse = |key: &'static str| find(properties, key).map(|v| (key, v.trim().parse::<i64>()));
    let due = match parse(keys::TIMER_DELAY_SEC)
        .or_else(|| parse(keys::TIMER_DELAY_MS))
        .or_else(|| parse(keys::TIMER_DELIVER_MS))
    {
        None => return TimerRequest::None,
        Some((key, Err(_))) => {
            return TimerRequest::Illegal(format!("timer message illegal: {key} is not a number"))
        }
        Some((key, Ok(v))) if key == keys::TIMER_DELAY_SEC => {
            now_ms.saturating_add(v.saturating_mul(1000))
        }
        Some((key, Ok(v))) if key == keys::TIMER_DELAY_MS => now_ms.saturating_add(v),
        Some((_, Ok(v))) => v,
    };
    if due <= now_ms {
        return TimerRequest::None;
    }
    if due - now_ms > max_delay_ms {
        return TimerRequest::Illegal(format!(
            "timer message illegal, the delay time should not be bigger than the max delay {max_delay_ms}ms; \
             or if set del msg, the delay time should be bigger than the current time"
        ));
    }
    TimerRequest::At(due)
}

/// Moves a message into the timer topic, due at `due_ms`.
pub fn to_timer(msg: &mut MessageToStore, due_ms: i64) {
    let mut props = Properties::decode(&msg.properties);
    // Numbers and topic names hold no separator, so these cannot fail.
    let _ = props.insert(keys::TIMER_OUT_MS, due_ms.to_string());
    let _ = props.insert(keys::REAL_TOPIC, msg.topic.as_str());
    let _ = props.insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    msg.properties = props.encode();
    msg.topic = TIMER_TOPIC.to_owned();
    msg.queue_id = 0;
}

/// The message a due timer entry becomes: the stored record moved back to
/// its real topic and queue, stamped with `TIMER_DEQUEUE_MS`. `None` for a
/// record without a real topic.
fn from_timer(record: &[u8], now_ms: i64) -> Option<MessageToStore> {
    to_real_topic(record, |props| {
        let _ = props.insert(keys::TIMER_DEQUEUE_MS, now_ms.to_string());
    })
}

/// One pending timer: where its message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Pending {
    commit_log_offset: i64,
}

/// The thread's progress, as written to `timerProgress.json`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Progress {
    /// Timer-queue entries below this offset were read into the wheel.
    enqueue_offset: i64,
    /// Entries due at or before this instant were delivered.
    delivered_until: i64,
    /// No entry below this offset is pending.
    floor_offset: i64,
}

#[derive(Debug, Default)]
struct Wheel {
    /// (due ms, timer-queue offset) → the message.
    pending: BTreeMap<(i64, i64), Pending>,
    progress: Progress,
    /// Whether this wheel delivers (its broker is master): set by
    /// [`TimerWheel::recover`], cleared by [`TimerWheel::pause`].
    active: bool,
    /// [`TimerWheel::resume`] asked the thread to rebuild the wheel.
    resume: bool,
}

impl Wheel {
    /// The oldest timer-queue offset still pending; what a rebuilt wheel
    /// reads from. A paused wheel keeps the one it had (or was given).
    fn floor(&self) -> i64 {
        if !self.active {
            return self.progress.floor_offset;
        }
        self.pending
            .keys()
            .map(|&(_, offset)| offset)
            .min()
            .unwrap_or(self.progress.enqueue_offset)
    }
}

/// Figures of the timer wheel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerStats {
    /// Timers waiting.
    pub pending: usize,
    /// Timers delivered since start.
    pub delivered: u64,
    /// Delivered timers that were late by more than 100 ms.
    pub late: u64,
    /// How late deliveries were (stored in their topic after their due
    /// instant), in ms: median, 99th percentile and maximum since start.
    pub lateness_p50_ms: u64,
    /// See `lateness_p50_ms`.
    pub lateness_p99_ms: u64,
    /// See `lateness_p50_ms`.
    pub lateness_max_ms: u64,
}

/// The timer wheel.
#[derive(Debug)]
pub struct TimerWheel {
    wheel: Mutex<Wheel>,
    pending: AtomicUsize,
    delivered: AtomicU64,
    late: AtomicU64,
    /// Lateness of each delivery in ms (up to an hour, 3 significant digits).
    lateness: Mutex<hdrhistogram::Histogram<u64>>,
    max_pending: usize,
    path: PathBuf,
    service: ServiceLoop,
}

/// How long the thread sleeps at most when nothing is due sooner.
const IDLE: Duration = Duration::from_millis(100);

impl TimerWheel {
    /// Loads the progress from `config_dir` (missing: from the start). The
    /// wheel itself is rebuilt by [`TimerWheel::recover`].
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(config_dir: &Path, max_pending: usize) -> std::io::Result<Self> {
        let path = config_dir.join("timerProgress.json");
        let progress: Progress = persist::read_json(&path)?;
        Ok(Self {
            wheel: Mutex::new(Wheel {
                pending: BTreeMap::new(),
                progress,
                active: false,
                resume: false,
            }),
            pending: AtomicUsize::new(0),
            delivered: AtomicU64::new(0),
            late: AtomicU64::new(0),
            lateness: Mutex::new(
                hdrhistogram::Histogram::new_with_bounds(1, 3_600_000, 3)
                    .map_err(std::io::Error::other)?,
            ),
            max_pending,
            path,
            service: ServiceLoop::default(),
        })
    }

    /// Rebuilds the wheel from the timer queue: entries between the oldest
    /// pending one and the last one read that are due after the delivered
    /// instant. From then on the wheel delivers.
    pub fn recover(&self, store: &MessageStore) {
        let mut w = self.lock();
        w.pending.clear();
        w.active = true;
        let min = store.min_offset_in_queue(TIMER_TOPIC, 0);
        let max = store.max_offset_in_queue(TIMER_TOPIC, 0);
        let p = &mut w.progress;
        p.enqueue_offset = p.enqueue_offset.clamp(min, max);
        p.floor_offset = p.floor_offset.clamp(min, p.enqueue_offset);
        let (from, to, delivered_until) = (p.floor_offset, p.enqueue_offset, p.delivered_until);
        for offset in from..to {
            let Some(e) = store.queue_entry(TIMER_TOPIC, 0, offset) else {
                continue;
            };
            if e.tags_code > delivered_until {
                w.pending.insert(
                    (e.tags_code, offset),
                    Pending {
                        commit_log_offset: e.commit_log_offset,
                    },
                );
            }
        }
        self.pending.store(w.pending.len(), Ordering::Relaxed);
        if !w.pending.is_empty() {
            tracing::info!(pending = w.pending.len(), from, to, "timer wheel recovered");
        }
    }

    /// Stops delivering (the broker is no longer master) and forgets the
    /// pending entries; the progress stays, and [`TimerWheel::recover`]
    /// rebuilds the wheel from it.
    pub fn pause(&self) {
        let mut w = self.lock();
        w.resume = false;
        if !w.active {
            return;
        }
        w.progress.floor_offset = w.floor();
        w.active = false;
        w.pending.clear();
        self.pending.store(0, Ordering::Relaxed);
    }

    /// Has the running thread rebuild the wheel from the progress
    /// ([`TimerWheel::recover`]) and deliver again (the broker became
    /// master).
    pub fn resume(&self) {
        self.lock().resume = true;
        self.service.wake();
    }

    /// The progress as `GET_TIMER_CHECK_POINT` answers it: delivered up to
    /// `lastReadTimeMs`, pending from `lastTimerQueueOffset`, read up to
    /// `masterTimerQueueOffset`.
    pub fn checkpoint(&self) -> TimerCheckpoint {
        let w = self.lock();
        TimerCheckpoint {
            last_read_time_ms: w.progress.delivered_until,
            last_timer_log_flush_pos: 0,
            last_timer_queue_offset: w.floor(),
            master_timer_queue_offset: w.progress.enqueue_offset,
            data_version: DataVersion {
                timestamp: message_model::now_ms(),
                ..DataVersion::default()
            },
        }
    }

    /// Takes a master's progress ([`TimerWheel::checkpoint`]) as this
    /// wheel's, while it does not deliver itself, and writes it. Returns
    /// whether its timer-queue positions moved (the delivered instant
    /// follows the master's clock and is not counted).
    ///
    /// # Errors
    /// The progress cannot be written.
    pub fn adopt(&self, master: &TimerCheckpoint) -> std::io::Result<bool> {
        let moved = {
            let mut w = self.lock();
            let enqueue_offset = master.master_timer_queue_offset.max(0);
            let theirs = Progress {
                enqueue_offset,
                delivered_until: master.last_read_time_ms,
                floor_offset: master.last_timer_queue_offset.clamp(0, enqueue_offset),
            };
            if w.active || w.progress == theirs {
                return Ok(false);
            }
            let moved = (w.progress.enqueue_offset, w.progress.floor_offset)
                != (theirs.enqueue_offset, theirs.floor_offset);
            w.progress = theirs;
            moved
        };
        self.persist()?;
        Ok(moved)
    }

    /// Whether another timer may be accepted (the wheel is not full).
    pub fn has_room(&self) -> bool {
        self.pending.load(Ordering::Relaxed) < self.max_pending
    }

    /// The most timers the wheel holds.
    pub fn max_pending(&self) -> usize {
        self.max_pending
    }

    /// Current figures.
    pub fn stats(&self) -> TimerStats {
        let h = self.lateness.lock().unwrap_or_else(PoisonError::into_inner);
        TimerStats {
            pending: self.pending.load(Ordering::Relaxed),
            delivered: self.delivered.load(Ordering::Relaxed),
            late: self.late.load(Ordering::Relaxed),
            lateness_p50_ms: h.value_at_quantile(0.5),
            lateness_p99_ms: h.value_at_quantile(0.99),
            lateness_max_ms: h.max(),
        }
    }

    /// Reads new timer-queue entries into the wheel (delivering at once
    /// those already due) and delivers every entry due at `now_ms`; returns
    /// when the next entry is due. A store refusal leaves the entry pending.
    pub fn advance(&self, store: &MessageStore, now_ms: i64) -> Option<i64> {
        let mut w = self.lock();
        if w.resume {
            w.resume = false;
            drop(w);
            self.recover(store);
            w = self.lock();
        }
        if !w.active {
            return None;
        }
        let max = store.max_offset_in_queue(TIMER_TOPIC, 0);
        while w.progress.enqueue_offset < max {
            let offset = w.progress.enqueue_offset;
            let Some(e) = store.queue_entry(TIMER_TOPIC, 0, offset) else {
                break;
            };
            w.pending.insert(
                (e.tags_code, offset),
                Pending {
                    commit_log_offset: e.commit_log_offset,
                },
            );
            w.progress.enqueue_offset = offset + 1;
        }
        loop {
            let Some((&(due, offset), &entry)) = w.pending.first_key_value() else {
                w.progress.delivered_until = w.progress.delivered_until.max(now_ms);
                break;
            };
            if due > now_ms {
                w.progress.delivered_until = w.progress.delivered_until.max(now_ms);
                self.pending.store(w.pending.len(), Ordering::Relaxed);
                return Some(due);
            }
            if let Err(e) = self.deliver(store, entry, due, now_ms) {
                tracing::warn!(offset, cause = %e, "cannot deliver a timer message; retrying");
                // Everything due before this one is out; lowering the mark
                // (for an entry read after its due time) only weakens it.
                w.progress.delivered_until = due - 1;
                self.pending.store(w.pending.len(), Ordering::Relaxed);
                return Some(now_ms + IDLE.as_millis() as i64);
            }
            w.pending.remove(&(due, offset));
        }
        self.pending.store(w.pending.len(), Ordering::Relaxed);
        None
    }

    fn deliver(
        &self,
        store: &MessageStore,
        entry: Pending,
        due: i64,
        now_ms: i64,
    ) -> Result<(), store::PutError> {
        let msg = u64::try_from(entry.commit_log_offset)
            .ok()
            .and_then(|o| store.lookup_message(o))
            .and_then(|r| from_timer(&r, now_ms));
        let Some(msg) = msg else {
            tracing::error!(
                commit_log_offset = entry.commit_log_offset,
                "timer entry without a readable message or real topic; skipped"
            );
            return Ok(());
        };
        store.put_message(&msg)?;
        self.delivered.fetch_add(1, Ordering::Relaxed);
        let late_ms = (message_model::now_ms() - due).max(0) as u64;
        if late_ms > 100 {
            self.late.fetch_add(1, Ordering::Relaxed);
        }
        self.lateness
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .saturating_record(late_ms);
        metrics::histogram!("sluice_timer_lateness_seconds").record(late_ms as f64 / 1000.0);
        Ok(())
    }

    /// Writes the progress (and the oldest pending offset).
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn persist(&self) -> std::io::Result<()> {
        let progress = {
            let mut w = self.lock();
            w.progress.floor_offset = w.floor();
            w.progress
        };
        let text = serde_json::to_vec(&progress).map_err(std::io::Error::other)?;
        persist::write_atomically(&self.path, &text)
    }

    /// Rebuilds the wheel ([`TimerWheel::recover`]), then runs it until
    /// [`TimerWheel::stop`]: sleeps until the next entry is due (at most
    /// 100 ms, or until [`TimerWheel::poke`]), and writes the progress every
    /// `persist_every` and at the end.
    pub fn run(&self, store: &MessageStore, persist_every: Duration) {
        self.recover(store);
        self.service.run(
            IDLE,
            persist_every,
            |now| self.advance(store, now),
            || {
                if let Err(e) = self.persist() {
                    tracing::error!(cause = %e, "cannot persist the timer progress");
                }
            },
        );
    }

    /// Wakes the thread: a timer message arrived.
    pub fn poke(&self) {
        self.service.wake();
    }

    /// Ends [`TimerWheel::run`].
    pub fn stop(&self) {
        self.service.stop();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Wheel> {
        self.wheel.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use message_model::record::{self, Record};

    use super::*;
    use store::StoreConfig;

    const DAY: i64 = 86_400_000;

    fn message(props: &str) -> MessageToStore {
        MessageToStore {
            topic: "T".into(),
            queue_id: 1,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from_static(b"b"),
            properties: props.into(),
        }
    }

    #[test]
    fn timer_properties_are_read_as_rocketmq_reads_them() {
        let now = 1_000_000;
        let max = 3 * DAY;
        let at = |p: &str| timer_request("T", p, now, max);
        assert_eq!(at(""), TimerRequest::None);
        assert_eq!(
            at("TIMER_DELAY_SEC\u{1}5\u{2}"),
            TimerRequest::At(now + 5_000)
        );
        assert_eq!(
            at("TIMER_DELAY_MS\u{1}250\u{2}"),
            TimerRequest::At(now + 250)
        );
        assert_eq!(
            at("TIMER_DELIVER_MS\u{1}1000500\u{2}TIMER_DELAY_SEC\u{1}1\u{2}"),
            TimerRequest::At(now + 1_000),
            "TIMER_DELAY_SEC first"
        );
        assert_eq!(
            at("TIMER_DELIVER_MS\u{1}999\u{2}"),
            TimerRequest::None,
            "due already"
        );
        assert!(matches!(
            at("TIMER_DELAY_MS\u{1}soon\u{2}"),
            TimerRequest::Illegal(_)
        ));
        let TimerRequest::Illegal(remark) = at(&format!("TIMER_DELAY_MS\u{1}{}\u{2}", max + 1))
        else {
            panic!("too long a delay accepted")
        };
        assert!(remark.contains("max delay 259200000ms"), "{remark}");
        assert_eq!(
            timer_request(TIMER_TOPIC, "TIMER_DELAY_SEC\u{1}5\u{2}", now, max),
            TimerRequest::None
        );
        assert_eq!(
            at("TIMER_OUT_MS\u{1}5\u{2}TIMER_DELAY_SEC\u{1}5\u{2}"),
            TimerRequest::None,
            "already a delivered timer"
        );
    }

    fn open(dir: &Path) -> MessageStore {
        MessageStore::open(StoreConfig {
            mapped_file_size_commit_log: 1 << 20,
            max_message_size: 64 * 1024,
            ..StoreConfig::with_root(dir.join("store"))
        })
        .unwrap()
    }

    fn wait_indexed(store: &MessageStore, topic: &str, queue: i32, n: i64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.max_offset_in_queue(topic, queue) < n {
            assert!(Instant::now() < deadline, "{topic} not indexed");
            std::thread::yield_now();
        }
    }

    #[test]
    fn timers_fire_in_due_order_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("config");
        let store = open(dir.path());
        let wheel = TimerWheel::load(&config, 100).unwrap();
        wheel.recover(&store);
        let base = message_model::now_ms() + 60_000;
        // Sent out of due order.
        for (i, due) in [base + 300, base + 100, base + 200, base + 10_000]
            .iter()
            .enumerate()
        {
            let mut m = message(&format!("KEYS\u{1}k{i}\u{2}"));
            to_timer(&mut m, *due);
            store.put_message(&m).unwrap();
        }
        wait_indexed(&store, TIMER_TOPIC, 0, 4);
        assert_eq!(wheel.advance(&store, base), Some(base + 100));
        assert_eq!(wheel.stats().pending, 4);
        assert_eq!(wheel.advance(&store, base + 250), Some(base + 300));
        assert_eq!(wheel.stats().delivered, 2);
        wheel.persist().unwrap();

        // Restart: the two delivered stay delivered, the two others pending.
        let again = TimerWheel::load(&config, 100).unwrap();
        again.recover(&store);
        assert_eq!(again.stats().pending, 2);
        assert_eq!(again.advance(&store, base + 20_000), None);
        assert_eq!(again.stats().delivered, 2);
        wait_indexed(&store, "T", 1, 4);
        let keys: Vec<String> = (0..4)
            .map(|i| {
                let e = store.queue_entry("T", 1, i).unwrap();
                let r = store.lookup_message(e.commit_log_offset as u64).unwrap();
                let Record::Message(m) = record::check(&r, false) else {
                    panic!("not a message")
                };
                assert!(message_model::properties::find(m.properties, keys::REAL_TOPIC).is_none());
                message_model::properties::find(m.properties, keys::KEYS)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(keys, ["k1", "k2", "k0", "k3"], "due order");
        store.shutdown();
    }

    #[test]
    fn a_slave_taking_its_masters_checkpoint_delivers_only_what_the_master_had_not() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let master = TimerWheel::load(&dir.path().join("master"), 100).unwrap();
        master.recover(&store);
        let base = message_model::now_ms() + 60_000;
        for (i, due) in [base + 100, base + 200, base + 300].iter().enumerate() {
            let mut m = message(&format!("KEYS\u{1}k{i}\u{2}"));
            to_timer(&mut m, *due);
            store.put_message(&m).unwrap();
        }
        wait_indexed(&store, TIMER_TOPIC, 0, 3);
        assert_eq!(master.advance(&store, base + 150), Some(base + 200));
        assert_eq!(master.stats().delivered, 1);
        // Through the wire's bytes, as a slave receives it.
        let body = master.checkpoint().encode();
        let checkpoint = TimerCheckpoint::decode(&body).unwrap();
        assert_eq!(checkpoint.master_timer_queue_offset, 3);
        assert_eq!(checkpoint.last_timer_queue_offset, 1, "k0 is out");

        // A slave (no wheel of its own running) takes it, and keeps it.
        let slave_dir = dir.path().join("slave");
        let slave = TimerWheel::load(&slave_dir, 100).unwrap();
        assert!(slave.adopt(&checkpoint).unwrap());
        assert!(!slave.adopt(&checkpoint).unwrap(), "nothing new");
        let later = TimerCheckpoint {
            last_read_time_ms: checkpoint.last_read_time_ms + 10,
            ..checkpoint
        };
        assert!(!slave.adopt(&later).unwrap(), "the clock alone moved");
        assert_eq!(
            slave.advance(&store, base + 1_000),
            None,
            "a slave delivers nothing"
        );
        assert_eq!(slave.stats().delivered, 0);
        // Elected master: it rebuilds from the copied progress.
        master.pause();
        assert_eq!(master.advance(&store, base + 1_000), None);
        assert_eq!(
            master.stats().delivered,
            1,
            "a paused wheel delivers nothing"
        );
        // Resumed, a wheel rebuilds what is pending; paused again.
        master.resume();
        assert_eq!(master.advance(&store, base + 150), Some(base + 200));
        assert_eq!(master.stats().pending, 2);
        master.pause();
        let elected = TimerWheel::load(&slave_dir, 100).unwrap();
        elected.recover(&store);
        assert_eq!(elected.stats().pending, 2);
        assert_eq!(elected.advance(&store, base + 1_000), None);
        assert_eq!(elected.stats().delivered, 2);
        // A last message after the deliveries: once it is indexed, every
        // delivery before it is too.
        store.put_message(&message("KEYS\u{1}end\u{2}")).unwrap();
        wait_indexed(&store, "T", 1, 4);
        assert_eq!(
            store.max_offset_in_queue("T", 1),
            4,
            "each timer delivered once, then the last message"
        );
        // A delivering wheel ignores a checkpoint.
        assert!(!elected.adopt(&checkpoint).unwrap());
        store.shutdown();
    }

    #[test]
    fn a_full_wheel_has_no_room() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(dir.path());
        let wheel = TimerWheel::load(&dir.path().join("config"), 1).unwrap();
        wheel.recover(&store);
        assert!(wheel.has_room());
        let mut m = message("");
        to_timer(&mut m, message_model::now_ms() + 60_000);
        store.put_message(&m).unwrap();
        wait_indexed(&store, TIMER_TOPIC, 0, 1);
        wheel.advance(&store, message_model::now_ms());
        assert!(!wheel.has_room());
        store.shutdown();
    }
}
