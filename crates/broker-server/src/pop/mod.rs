//! POP consumption, the model behind the RocketMQ 5 ReceiveMessage,
//! AckMessage and ChangeInvisibleDuration calls: the broker, not the
//! consumer, tracks what each consumer group has been given.
//!
//! A pop hands out messages of every queue of a topic; each stays invisible
//! to the group for its invisible duration. An ack removes it; otherwise it
//! is delivered again once that time has passed, with a new receipt handle
//! and its delivery attempt raised by one. Changing the invisible duration
//! restarts the timer and replaces the handle. Only the newest handle of a
//! delivery is valid.
//!
//! A group seen for the first time on a topic starts at each queue's end, so
//! it gets only messages sent after its first pop. A queue that appears
//! later for a known group starts at its beginning.
//!
//! # Durability
//! [`PopService::persist`] writes `popState.json` (next offsets, in-flight
//! messages, the handle sequence) atomically. Saved on shutdown, nothing
//! acknowledged is delivered again after a restart, and unacknowledged
//! messages come back after their invisible time. Saved periodically, a
//! crash loads an older picture: messages delivered or acknowledged since
//! are delivered again, none is lost.
//!
//! # Long polling
//! When a pop returns nothing the caller waits for an arrival or a
//! redelivery, without a race against messages arriving during the pop:
//!
//! ```text
//! let arrival = pop.arrival(topic);
//! loop {
//!     let notified = arrival.notified(); // created before the pop: an
//!                                        // arrival during it still wakes it
//!     let got = pop.pop(&store, &request, now_ms())?;
//!     if !got.is_empty() || past the deadline { return got }
//!     let wake = deadline.min(pop.next_visible_ms(group, topic));
//!     tokio::time::timeout(wake - now, notified).await;
//! }
//! ```
//!
//! [`tokio::sync::Notify::notify_waiters`] wakes every `Notified` created
//! before it, polled or not; the store's arrival listener calls
//! [`PopService::arrived`].
//!
//! # Invariants worth naming
//! - A message is in flight at most once per group: a queue's next offset
//!   stays above every in-flight offset of that queue.
//! - The committed offset of a queue (lowest not acknowledged) never passes
//!   a message that was not acknowledged or skipped by the group's filter.
//! - Sequence numbers start at the boot time in microseconds (or above the
//!   saved one), so handles differ across restarts.

mod filter;
mod handle;
mod read;
mod state;

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use bytes::Bytes;
use dashmap::DashMap;
use store::MessageStore;
use tokio::sync::Notify;

pub use self::filter::TagFilter;
use self::{
    handle::Handle,
    read::Pass,
    state::{GroupTopic, Inflight, SavedGroupTopic, SavedState, FILE_VERSION},
};
use crate::persist;

/// Name of the state file in the broker's config directory.
pub const STATE_FILE: &str = "popState.json";

/// Most record bytes one pop returns (at least one message is always
/// returned when one is available).
const MAX_POP_BYTES: usize = 8 * 1024 * 1024;

/// Most ConsumeQueue entries one pop examines for new messages, so that a
/// filter that matches little cannot make one call scan a whole queue.
const SCAN_BUDGET: usize = 32 * 1024;

/// Bounds of the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PopLimits {
    /// Most messages delivered and not acknowledged per group and topic;
    /// at the limit a pop returns only redeliveries.
    pub max_inflight_per_group_topic: usize,
    /// Most messages one pop returns (larger requests are cut down).
    pub max_batch: usize,
}

impl Default for PopLimits {
    /// 20,000 in flight per group and topic, 1,024 per pop.
    fn default() -> Self {
        Self {
            max_inflight_per_group_topic: 20_000,
            max_batch: 1024,
        }
    }
}

/// One pop.
#[derive(Debug, Clone, Copy)]
pub struct PopRequest<'a> {
    /// Consumer group.
    pub group: &'a str,
    /// Topic.
    pub topic: &'a str,
    /// Queues of the topic on this broker to read new messages from.
    pub queue_ids: &'a [i32],
    /// Which messages the group wants; the others are skipped for good.
    pub filter: &'a TagFilter,
    /// Most messages to return (cut to [`PopLimits::max_batch`]).
    pub max_messages: usize,
    /// How long the returned messages stay invisible.
    pub invisible: Duration,
    /// The group consumes in order (gRPC FIFO): a queue with a message in
    /// flight gives no new one until it is acknowledged or due again.
    pub fifo: bool,
}

/// A message handed out by a pop.
#[derive(Debug, Clone)]
pub struct PoppedMessage {
    /// The whole stored record; decode it with [`message_model::record::check`].
    pub record: Bytes,
    /// Queue id.
    pub queue_id: i32,
    /// Queue offset.
    pub queue_offset: i64,
    /// The handle to ack it or change its invisible duration with.
    pub receipt_handle: String,
    /// 1 on the first delivery, one more on each redelivery.
    pub delivery_attempt: u32,
    /// When it becomes visible again unless acknowledged (ms since the epoch).
    pub invisible_until_ms: i64,
}

/// Why a POP operation failed.
#[derive(Debug, thiserror::Error)]
pub enum PopError {
    /// The handle is malformed, stale (a newer one exists), of an
    /// acknowledged message or unknown.
    #[error("invalid receipt handle: {0}")]
    InvalidReceiptHandle(String),
    /// The filter expression cannot be used.
    #[error("illegal filter expression: {0}")]
    IllegalFilter(String),
    /// The group has as many messages in flight on the topic as allowed and
    /// none is due for redelivery.
    #[error(
        "group {group} has {limit} messages of topic {topic} in flight, the limit: \
         acknowledge some or wait for their invisible time to end"
    )]
    TooManyInflight {
        /// Consumer group.
        group: String,
        /// Topic.
        topic: String,
        /// The limit reached.
        limit: usize,
    },
    /// The state file could not be read or written.
    #[error("POP state: {0}")]
    Io(#[from] std::io::Error),
}

/// Group and topic.
type Key = (String, String);

/// The POP engine: bookkeeping of every group on every topic, shared by
/// all request handlers.
#[derive(Debug)]
pub struct PopService {
    limits: PopLimits,
    path: PathBuf,
    states: DashMap<Key, Arc<Mutex<GroupTopic>>>,
    arrivals: DashMap<String, Arc<Notify>>,
    next_seq: AtomicU64,
    dirty: AtomicBool,
    persist_lock: Mutex<()>,
}

impl PopService {
    /// Loads the state from `<config_dir>/popState.json`; a missing file is
    /// an empty state.
    ///
    /// # Errors
    /// A limit of zero, or a file that cannot be read or parsed (the error
    /// names the file).
    pub fn load(config_dir: &Path, limits: PopLimits) -> std::io::Result<Self> {
        if limits.max_batch == 0 || limits.max_inflight_per_group_topic == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "POP limits must be at least 1 (max_batch {}, max_inflight_per_group_topic {})",
                    limits.max_batch, limits.max_inflight_per_group_topic
                ),
            ));
        }
        let path = config_dir.join(STATE_FILE);
        let named = |kind, e: &dyn std::fmt::Display| {
            std::io::Error::new(kind, format!("{}: {e}", path.display()))
        };
        let saved: SavedState = match std::fs::read(&path) {
            Ok(bytes) => {
                let saved: SavedState = serde_json::from_slice(&bytes)
                    .map_err(|e| named(std::io::ErrorKind::InvalidData, &e))?;
                if saved.version != FILE_VERSION {
                    return Err(named(
                        std::io::ErrorKind::InvalidData,
                        &format!(
                            "layout version {} is not the supported {FILE_VERSION}",
                            saved.version
                        ),
                    ));
                }
                saved
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => SavedState::default(),
            Err(e) => return Err(named(e.kind(), &e)),
        };
        let states = DashMap::new();
        let mut next_seq = saved.next_seq;
        let mut inflight = 0;
        let loaded_ms = message_model::now_ms();
        for g in &saved.groups {
            let mut gt = GroupTopic::from_saved(g);
            if gt.last_used_ms == 0 {
                gt.last_used_ms = loaded_ms;
            }
            for q in gt.queues.values() {
                for e in q.inflight.values() {
                    next_seq = next_seq.max(e.seq.saturating_add(1));
                }
            }
            inflight += gt.inflight;
            states.insert((g.group.clone(), g.topic.clone()), Arc::new(Mutex::new(gt)));
        }
        tracing::info!(
            file = %path.display(),
            groups = states.len(),
            inflight,
            "POP state loaded"
        );
        Ok(Self {
            limits,
            path,
            states,
            arrivals: DashMap::new(),
            next_seq: AtomicU64::new(next_seq.max(now_micros())),
            dirty: AtomicBool::new(false),
            persist_lock: Mutex::new(()),
        })
    }

    /// The limits in force.
    pub fn limits(&self) -> PopLimits {
        self.limits
    }

    /// Pops up to `req.max_messages` messages for the group: first those
    /// whose invisible time has ended (redeliveries, from any queue of the
    /// topic), then new messages from `req.queue_ids`, starting at a
    /// different queue on each call. New messages the filter rejects are
    /// skipped for the group. An empty result means nothing is available.
    ///
    /// # Errors
    /// [`PopError::TooManyInflight`] when the group is at its in-flight limit
    /// and no message is due for redelivery.
    pub fn pop(
        &self,
        store: &MessageStore,
        req: &PopRequest<'_>,
        now_ms: i64,
    ) -> Result<Vec<PoppedMessage>, PopError> {
        let max = req.max_messages.min(self.limits.max_batch);
        if max == 0 {
            return Ok(Vec::new());
        }
        let mut pass = Pass {
            store,
            group: req.group,
            topic: req.topic,
            filter: req.filter,
            now_ms,
            visible_at: now_ms.saturating_add(duration_ms(req.invisible)),
            max,
            out: Vec::new(),
            bytes: 0,
            scanned: 0,
            changed: false,
            started: false,
        };
        let cell = self.entry(req.group, req.topic);
        let room = {
            let mut gt = lock(&cell);
            gt.last_used_ms = now_ms;
            pass.start_queues(&mut gt, req.queue_ids);
            self.redeliver(&mut pass, &mut gt);
            let room = self
                .limits
                .max_inflight_per_group_topic
                .saturating_sub(gt.inflight);
            let want = (max - pass.out.len()).min(room);
            if want > 0 {
                let free: Vec<i32>;
                let queue_ids = if req.fifo {
                    free = req
                        .queue_ids
                        .iter()
                        .copied()
                        .filter(|q| gt.queues.get(q).is_none_or(|s| s.inflight.is_empty()))
                        .collect();
                    &free
                } else {
                    req.queue_ids
                };
                self.read_new(&mut pass, &mut gt, queue_ids, want);
            }
            room
        };
        if pass.changed {
            self.dirty.store(true, Ordering::Release);
        }
        if pass.started {
            // A group's starting point is written at once: recovered from an
            // older state after a crash, the group would count as new and
            // start at the queues' end, skipping what arrived meanwhile.
            if let Err(e) = self.persist() {
                tracing::warn!(group = req.group, topic = req.topic, error = %e,
                    "cannot write the POP state after a new group's first receive");
            }
        }
        if pass.scanned >= SCAN_BUDGET {
            // More entries wait to be examined: wake long polls to come back.
            self.arrived(req.topic);
        }
        if pass.out.is_empty() && room == 0 {
            return Err(PopError::TooManyInflight {
                group: req.group.to_owned(),
                topic: req.topic.to_owned(),
                limit: self.limits.max_inflight_per_group_topic,
            });
        }
        Ok(pass.out)
    }

    /// Acknowledges a delivery: the message is done for the group. A handle
    /// whose invisible time has ended is still accepted while the message
    /// has not been delivered again.
    ///
    /// # Errors
    /// [`PopError::InvalidReceiptHandle`] for a malformed, stale or unknown
    /// handle, or one of another topic.
    pub fn ack(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &str,
        now_ms: i64,
    ) -> Result<(), PopError> {
        let (cell, h) = self.find(group, topic, receipt_handle)?;
        let entry = {
            let mut gt = lock(&cell);
            let entry = current(&gt, group, &h)?;
            gt.remove(h.queue_id, h.offset);
            gt.last_used_ms = now_ms;
            entry
        };
        self.dirty.store(true, Ordering::Release);
        if now_ms > entry.visible_at {
            tracing::debug!(
                group,
                topic,
                queue = h.queue_id,
                offset = h.offset,
                late_ms = now_ms - entry.visible_at,
                "ack after the invisible time ended"
            );
        }
        Ok(())
    }

    /// The queue id and queue offset of the delivery a handle names, if the
    /// handle is still its newest; nothing changes.
    ///
    /// # Errors
    /// [`PopError::InvalidReceiptHandle`] as for [`PopService::ack`].
    pub fn locate(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &str,
    ) -> Result<(i32, i64), PopError> {
        let (cell, h) = self.find(group, topic, receipt_handle)?;
        current(&lock(&cell), group, &h)?;
        Ok((h.queue_id, h.offset))
    }

    /// Makes a delivered message invisible for `invisible` from `now_ms`
    /// and returns its new handle; the old one is no longer valid. The
    /// delivery attempt stays the same.
    ///
    /// # Errors
    /// [`PopError::InvalidReceiptHandle`] as for [`PopService::ack`].
    pub fn change_invisible(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &str,
        invisible: Duration,
        now_ms: i64,
    ) -> Result<String, PopError> {
        let (cell, h) = self.find(group, topic, receipt_handle)?;
        let seq = {
            let mut gt = lock(&cell);
            let entry = current(&gt, group, &h)?;
            gt.last_used_ms = now_ms;
            let seq = self.next_seq();
            gt.insert(
                h.queue_id,
                h.offset,
                Inflight {
                    seq,
                    attempt: entry.attempt,
                    visible_at: now_ms.saturating_add(duration_ms(invisible)),
                },
            );
            seq
        };
        self.dirty.store(true, Ordering::Release);
        Ok(Handle { seq, ..h }.encode())
    }

    /// Forgets the state of every group on every topic not used (pop, ack,
    /// invisible-time change) for `ttl_ms` at `now_ms`, its in-flight
    /// messages included, unless the group is `online`; returns the
    /// forgotten `(group, topic)` pairs. State loaded from a file that did
    /// not record a last use counts from the load.
    pub fn expire(
        &self,
        now_ms: i64,
        ttl_ms: i64,
        online: impl Fn(&str) -> bool,
    ) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        self.states.retain(|(group, topic), cell| {
            if online(group) || now_ms.saturating_sub(lock(cell).last_used_ms) < ttl_ms {
                return true;
            }
            gone.push((group.clone(), topic.clone()));
            false
        });
        if !gone.is_empty() {
            self.dirty.store(true, Ordering::Release);
        }
        gone
    }

    /// The earliest moment (ms since the epoch) a message of the group on
    /// the topic becomes visible again; `None` with nothing in flight.
    pub fn next_visible_ms(&self, group: &str, topic: &str) -> Option<i64> {
        let cell = self.existing(group, topic)?;
        let gt = lock(&cell);
        gt.timers.first().map(|t| t.0)
    }

    /// Wakes everyone waiting on [`PopService::arrival`] for the topic; the
    /// store's arrival listener calls it (cheap: one map lookup).
    pub fn arrived(&self, topic: &str) {
        if let Some(notify) = self.arrivals.get(topic) {
            notify.notify_waiters();
        }
    }

    /// The notifier of new messages on a topic. Call `notified()` on it
    /// before the pop that found nothing and await that future (with a
    /// timeout): an arrival during the pop then still wakes it. See the
    /// module documentation.
    pub fn arrival(&self, topic: &str) -> Arc<Notify> {
        if let Some(notify) = self.arrivals.get(topic) {
            return Arc::clone(&notify);
        }
        Arc::clone(&self.arrivals.entry(topic.to_owned()).or_default())
    }

    /// `(group, topic, queue id, committed offset)` for every queue known,
    /// the committed offset being the lowest one not acknowledged (or
    /// skipped by the filter), sorted.
    pub fn committed_offsets(&self) -> Vec<(String, String, i32, i64)> {
        let mut out = Vec::new();
        for (key, cell) in self.snapshot_cells() {
            let gt = lock(&cell);
            for (queue_id, q) in &gt.queues {
                out.push((key.0.clone(), key.1.clone(), *queue_id, q.committed()));
            }
        }
        out.sort();
        out
    }

    /// Forgets every group's POP state on a topic (next offsets and
    /// messages in flight); returns the groups that had some.
    pub fn remove_topic(&self, topic: &str) -> Vec<String> {
        let mut groups = Vec::new();
        self.states.retain(|(group, t), _| {
            if t == topic {
                groups.push(group.clone());
                false
            } else {
                true
            }
        });
        if !groups.is_empty() {
            self.dirty.store(true, Ordering::Release);
        }
        groups.sort();
        groups
    }

    /// The groups with POP state on a topic.
    pub fn groups_of(&self, topic: &str) -> Vec<String> {
        let mut groups: Vec<String> = self
            .states
            .iter()
            .filter(|e| e.key().1 == topic)
            .map(|e| e.key().0.clone())
            .collect();
        groups.sort();
        groups
    }

    /// Number of messages of the group on the topic delivered and not
    /// acknowledged.
    pub fn inflight(&self, group: &str, topic: &str) -> usize {
        self.existing(group, topic).map_or(0, |c| lock(&c).inflight)
    }

    /// Writes the state to `popState.json` (a temporary file renamed over
    /// it) if it changed since the last write.
    ///
    /// # Errors
    /// The file cannot be written (the error names it); the state stays
    /// marked as changed.
    pub fn persist(&self) -> std::io::Result<()> {
        let _one_writer = self
            .persist_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let mut groups: Vec<SavedGroupTopic> = self
            .snapshot_cells()
            .into_iter()
            .map(|(key, cell)| lock(&cell).to_saved(&key.0, &key.1))
            .collect();
        groups.sort_by(|a, b| (&a.group, &a.topic).cmp(&(&b.group, &b.topic)));
        // Read after every group: above each sequence the snapshot holds.
        let next_seq = self.next_seq.load(Ordering::Acquire);
        let saved = SavedState {
            version: FILE_VERSION,
            next_seq,
            groups,
        };
        let result = serde_json::to_vec(&saved)
            .map_err(std::io::Error::other)
            .and_then(|bytes| persist::write_atomically(&self.path, &bytes))
            .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", self.path.display())));
        if result.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        result
    }

    fn next_seq(&self) -> u64 {
        self.next_seq.fetch_add(1, Ordering::AcqRel)
    }

    fn entry(&self, group: &str, topic: &str) -> Arc<Mutex<GroupTopic>> {
        let key = (group.to_owned(), topic.to_owned());
        if let Some(cell) = self.states.get(&key) {
            return Arc::clone(&cell);
        }
        Arc::clone(&self.states.entry(key).or_default())
    }

    fn existing(&self, group: &str, topic: &str) -> Option<Arc<Mutex<GroupTopic>>> {
        let key = (group.to_owned(), topic.to_owned());
        self.states.get(&key).map(|c| Arc::clone(&c))
    }

    fn snapshot_cells(&self) -> Vec<(Key, Arc<Mutex<GroupTopic>>)> {
        self.states
            .iter()
            .map(|e| (e.key().clone(), Arc::clone(e.value())))
            .collect()
    }

    /// Parses a handle and finds its group's state.
    fn find<'h>(
        &self,
        group: &str,
        topic: &str,
        receipt_handle: &'h str,
    ) -> Result<(Arc<Mutex<GroupTopic>>, Handle<'h>), PopError> {
        let h = Handle::parse(receipt_handle).map_err(PopError::InvalidReceiptHandle)?;
        if h.topic != topic {
            return Err(PopError::InvalidReceiptHandle(format!(
                "the handle is of topic {}, not {topic}",
                h.topic
            )));
        }
        let cell = self.existing(group, topic).ok_or_else(|| {
            PopError::InvalidReceiptHandle(format!(
                "group {group} has received nothing from topic {topic}"
            ))
        })?;
        Ok((cell, h))
    }
}

/// The entry of a handle if the handle is its newest.
fn current(gt: &GroupTopic, group: &str, h: &Handle<'_>) -> Result<Inflight, PopError> {
    let entry = gt.get(h.queue_id, h.offset).ok_or_else(|| {
        PopError::InvalidReceiptHandle(format!(
            "message {} queue {} offset {} is not in flight for group {group} \
             (acknowledged already, or never delivered to it)",
            h.topic, h.queue_id, h.offset
        ))
    })?;
    if entry.seq != h.seq {
        return Err(PopError::InvalidReceiptHandle(format!(
            "stale handle: message {} queue {} offset {} was delivered again or had its \
             invisible time changed since this handle was issued",
            h.topic, h.queue_id, h.offset
        )));
    }
    Ok(entry)
}

fn lock(cell: &Mutex<GroupTopic>) -> MutexGuard<'_, GroupTopic> {
    cell.lock().unwrap_or_else(PoisonError::into_inner)
}

fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}
