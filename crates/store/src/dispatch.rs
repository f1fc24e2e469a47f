//! The dispatch (RocketMQ's reput service): follows the CommitLog, writes a
//! ConsumeQueue entry for every committed message, indexes its keys in the
//! IndexFiles, and tells the arrival listener which queues grew.

use std::{
    cell::Cell,
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, MutexGuard, PoisonError, RwLock,
    },
    time::Duration,
};

use message_model::{
    flags::{
        transaction_type, SCHEDULE_TOPIC, TIMER_TOPIC, TRANSACTION_PREPARED_TYPE,
        TRANSACTION_ROLLBACK_TYPE,
    },
    properties::{self, keys},
    record::{self, Record, StoredMessage},
};

use crate::{
    consume_queue::{ConsumeQueue, CqEntry},
    state::{Inner, QueueMap},
};

/// Called after new messages were indexed: topic, queue id and the queue's
/// new end offset.
pub type ArrivalListener = dyn Fn(&str, i32, i64) + Send + Sync;

/// Held by whoever waits to hear of new messages (a parked pull, a gRPC
/// receive): while any is held, every append wakes the dispatch thread at
/// once, so the waiter hears of it within microseconds. With none held,
/// appends wake nobody and the dispatch thread finds them on its own
/// within a millisecond, as RocketMQ's does.
#[derive(Debug)]
pub struct ArrivalWatch(Arc<AtomicUsize>);

impl Drop for ArrivalWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Where the arrival listener is kept (empty until one is set), and how
/// many [`ArrivalWatch`]es are held.
#[derive(Default)]
pub(crate) struct ArrivalSlot {
    listener: RwLock<Option<Arc<ArrivalListener>>>,
    watchers: Arc<AtomicUsize>,
}

impl ArrivalSlot {
    /// Sets (or replaces) the listener.
    pub(crate) fn set(&self, listener: Arc<ArrivalListener>) {
        *self
            .listener
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    fn get(&self) -> Option<Arc<ArrivalListener>> {
        self.listener
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A new watch, counted until dropped.
    pub(crate) fn watch(&self) -> ArrivalWatch {
        self.watchers.fetch_add(1, Ordering::AcqRel);
        ArrivalWatch(Arc::clone(&self.watchers))
    }

    /// Whether anyone holds a watch.
    pub(crate) fn watched(&self) -> bool {
        self.watchers.load(Ordering::Acquire) > 0
    }
}

impl std::fmt::Debug for ArrivalSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArrivalSlot")
    }
}

thread_local! {
    /// Whether this thread runs a dispatch pass (and so holds the dispatch
    /// lock).
    static IN_PASS: Cell<bool> = const { Cell::new(false) };
}

/// Marks this thread as in a pass until dropped.
struct InPass(bool);

impl InPass {
    fn enter() -> Self {
        Self(IN_PASS.with(|p| p.replace(true)))
    }
}

impl Drop for InPass {
    fn drop(&mut self) {
        IN_PASS.with(|p| p.set(self.0));
    }
}

impl Inner {
    /// Indexes every readable record after `reput_from`. Returns whether
    /// anything was indexed.
    pub(crate) fn dispatch_available(&self) -> bool {
        let pass = self
            .dispatch_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.dispatch_pass(&pass)
    }

    /// Indexes, on the caller's thread, what the dispatch thread has not
    /// indexed yet, so that a read that follows an acknowledged append sees
    /// it: waits for a pass (or a topic deletion) that holds the dispatch
    /// lock, then indexes what is still left. Does nothing when nothing is
    /// left, or when called from inside a pass (the arrival listener's
    /// reads), which would otherwise wait for itself.
    pub(crate) fn catch_up(&self) {
        if IN_PASS.with(Cell::get) || self.reput_from.load(Ordering::Acquire) >= self.dispatch_end()
        {
            return;
        }
        let pass = self
            .dispatch_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.dispatch_pass(&pass);
    }

    /// Where dispatch stops: the readable end, or the confirm offset of a
    /// replicated CommitLog when that is lower.
    pub(crate) fn dispatch_end(&self) -> u64 {
        self.commit_log
            .readable_end()
            .min(self.confirm_offset.load(Ordering::Acquire))
    }

    /// One dispatch pass; `_pass` is the held dispatch lock.
    fn dispatch_pass(&self, _pass: &MutexGuard<'_, ()>) -> bool {
        let _in_pass = InPass::enter();
        // Fences change only under the dispatch lock: fixed for this pass.
        let fences = self
            .fences
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let files = self.commit_log.files();
        let mut from = self.reput_from.load(Ordering::Acquire);
        let start = from;
        let mut queues = QueueCache::default();
        let end = self.dispatch_end();
        'log: while from < end {
            let Some(file) = files.find(from) else { break };
            let data = file.committed_bytes();
            let data = &data[..data.len().min((end - file.from_offset()) as usize)];
            let mut pos = (from - file.from_offset()) as usize;
            while pos < data.len() {
                if incomplete(&data[pos..]) {
                    // The rest of the record is not readable (or not
                    // confirmed) yet.
                    break 'log;
                }
                match record::check(&data[pos..], false) {
                    Record::Message(m) => {
                        self.dispatch(&m, &mut queues, &fences);
                        pos += m.total_size;
                    }
                    Record::Blank => pos = file.size(),
                    Record::End => break,
                    Record::Invalid(reason) => {
                        let at = file.from_offset() + pos as u64;
                        tracing::error!(
                            offset = at,
                            reason,
                            "cannot index commit log record; dispatch stalls"
                        );
                        self.reput_from.store(at, Ordering::Release);
                        break 'log;
                    }
                }
            }
            let reached = file.from_offset() + pos as u64;
            if reached == from {
                break;
            }
            from = reached;
            self.reput_from.store(from, Ordering::Release);
        }
        if from > start {
            if let Some(listener) = self.arrival.get() {
                for q in queues.touched() {
                    listener(q.topic(), q.queue_id(), q.max_offset());
                }
            }
        }
        from > start
    }

    fn dispatch(
        &self,
        m: &StoredMessage<'_>,
        queues: &mut QueueCache,
        fences: &HashMap<String, u64>,
    ) {
        if !fences.is_empty()
            && fences
                .get(m.topic)
                .is_some_and(|&f| u64::try_from(m.physical_offset).map_or(true, |o| o < f))
        {
            // A record of a deleted topic's former incarnation.
            return;
        }
        if self.index.enabled() && transaction_type(m.sys_flag) != TRANSACTION_ROLLBACK_TYPE {
            self.index.build(m);
        }
        if matches!(
            transaction_type(m.sys_flag),
            TRANSACTION_PREPARED_TYPE | TRANSACTION_ROLLBACK_TYPE
        ) {
            return;
        }
        let entry = CqEntry {
            commit_log_offset: m.physical_offset,
            size: m.total_size as i32,
            tags_code: if m.topic == SCHEDULE_TOPIC {
                deliver_timestamp(m, &self.delay_levels_ms)
            } else if m.topic == TIMER_TOPIC {
                properties::find(m.properties, keys::TIMER_OUT_MS)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(m.store_timestamp)
            } else {
                tags_code(m.properties)
            },
        };
        let cq = queues.get(m.topic, m.queue_id, || {
            self.queue_or_create(m.topic, m.queue_id)
        });
        if let Err(e) = cq.put(m.queue_offset, entry) {
            tracing::error!(topic = m.topic, queue_id = m.queue_id, cause = %e, "cannot write consume queue entry");
            self.commit_log
                .poison(format!("consume queue write failed: {e}"));
            return;
        }
        self.dispatched_ts
            .fetch_max(m.store_timestamp, Ordering::AcqRel);
    }

    /// The `store-reput` thread: dispatches whatever is readable, polling
    /// every millisecond when nothing is (appends also wake it while an
    /// [`ArrivalWatch`] is held).
    pub(crate) fn run_reput(&self) {
        while !self.reput.is_stopped() {
            if !self.dispatch_available() {
                self.reput.wait(Duration::from_millis(1));
            }
        }
    }
}

/// The queues one dispatch pass has used, so that consecutive records skip
/// the shared map and arrivals can be announced once per queue per pass.
#[derive(Default)]
struct QueueCache {
    queues: QueueMap,
}

impl QueueCache {
    fn get(
        &mut self,
        topic: &str,
        queue_id: i32,
        load: impl FnOnce() -> Arc<ConsumeQueue>,
    ) -> Arc<ConsumeQueue> {
        if let Some(q) = self.queues.get(topic).and_then(|m| m.get(&queue_id)) {
            return Arc::clone(q);
        }
        let q = load();
        self.queues
            .entry(topic.to_owned())
            .or_default()
            .insert(queue_id, Arc::clone(&q));
        q
    }

    fn touched(&self) -> impl Iterator<Item = &ConsumeQueue> {
        self.queues.values().flat_map(|q| q.values()).map(|q| &**q)
    }
}

/// The tag hash of a message's `TAGS` property (0 without tags).
/// Whether `rest` starts with a record that continues past its end (or
/// with too few bytes to tell): a replica receives a master's bytes in
/// pieces and the confirm offset may fall inside a record. The filler at a
/// file's end and zeroes are whole.
fn incomplete(rest: &[u8]) -> bool {
    if rest.len() < 8 {
        return rest.iter().any(|&b| b != 0);
    }
    let total = i32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
    let magic = i32::from_be_bytes([rest[4], rest[5], rest[6], rest[7]]);
    matches!(magic, record::MAGIC_V1 | record::MAGIC_V2)
        && usize::try_from(total).is_ok_and(|t| t > rest.len())
}

fn tags_code(properties: &str) -> i64 {
    properties::find(properties, keys::TAGS).map_or(0, message_model::tag_hash)
}

/// When a delay-level message is due (ms since the epoch): its store time
/// plus its level's delay, the level clamped to the highest one; a missing
/// or unknown level waits one second. A schedule queue's tags code holds
/// this instead of a tag hash.
fn deliver_timestamp(m: &StoredMessage<'_>, delays_ms: &[u64]) -> i64 {
    let level = properties::find(m.properties, keys::DELAY_TIME_LEVEL)
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0)
        .min(delays_ms.len() as i64);
    let delay = usize::try_from(level - 1)
        .ok()
        .and_then(|i| delays_ms.get(i))
        .copied()
        .unwrap_or(1_000);
    m.store_timestamp.saturating_add(delay as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_wake_the_dispatch_thread_only_while_a_watch_is_held() {
        let slot = ArrivalSlot::default();
        assert!(!slot.watched());
        let first = slot.watch();
        let second = slot.watch();
        assert!(slot.watched());
        drop(first);
        assert!(slot.watched(), "one watch is still held");
        drop(second);
        assert!(!slot.watched());
    }

    #[test]
    fn a_schedule_entry_is_due_at_store_time_plus_its_levels_delay() {
        let delays = [1_000, 5_000, 10_000];
        let at = |props: &str| {
            let m = StoredMessage {
                total_size: 0,
                magic: 0,
                body_crc: 0,
                queue_id: 0,
                flag: 0,
                queue_offset: 0,
                physical_offset: 0,
                sys_flag: 0,
                born_timestamp: 0,
                born_host: "127.0.0.1:1".parse().unwrap(),
                store_timestamp: 100_000,
                store_host: "127.0.0.1:2".parse().unwrap(),
                reconsume_times: 0,
                prepared_transaction_offset: 0,
                body: b"",
                topic: SCHEDULE_TOPIC,
                properties: props,
            };
            deliver_timestamp(&m, &delays)
        };
        assert_eq!(at("DELAY\u{1}2\u{2}"), 105_000);
        assert_eq!(at("DELAY\u{1}9\u{2}"), 110_000, "clamped to the last level");
        assert_eq!(at(""), 101_000);
        assert_eq!(at("DELAY\u{1}x\u{2}"), 101_000);
    }

    #[test]
    fn the_tags_code_is_the_hash_of_the_last_tags_property() {
        assert_eq!(tags_code(""), 0);
        assert_eq!(tags_code("KEYS\u{1}k\u{2}"), 0);
        assert_eq!(
            tags_code("KEYS\u{1}k\u{2}TAGS\u{1}TagA\u{2}"),
            message_model::tag_hash("TagA")
        );
        assert_eq!(
            tags_code("TAGS\u{1}TagA\u{2}TAGS\u{1}TagB\u{2}"),
            message_model::tag_hash("TagB")
        );
    }
}
