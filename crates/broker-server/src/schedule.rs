//! Delay levels, as RocketMQ's clients use them: a message sent with a
//! `DELAY` property (a level of `messageDelayLevel`) is stored in
//! `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, with its real topic and queue in
//! `REAL_TOPIC`/`REAL_QID`; the store indexes it with its due time in place
//! of the tag hash. The `schedule-delivery` thread walks each level's queue
//! and, once an entry is due, stores the message again in its real topic.
//!
//! How far each level was delivered is kept in
//! `<storePathRootDir>/config/delayOffset.json` (RocketMQ's layout), written
//! every `flushDelayOffsetInterval` and at shutdown, so messages due while
//! the broker was down are delivered after it starts. A crash between a
//! delivery and the next write of that file delivers those messages again
//! (at least once, as RocketMQ).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Mutex, PoisonError,
    },
    time::Duration,
};

use message_model::{
    flags::{transaction_type, SCHEDULE_TOPIC, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE},
    properties::{keys, Properties},
    record::{self, Record, StoredMessage},
    MessageToStore,
};
use serde::Deserialize;
use store::MessageStore;

use crate::{persist, service_loop::ServiceLoop};

/// How often a level that has nothing due is looked at again, at most.
const POLL: Duration = Duration::from_millis(100);

/// What a send's `DELAY` property asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DelayRequest {
    /// No delay (no property, or a level of 0 or less).
    None,
    /// Deliver after this level's delay (already clamped to the highest).
    Level(i32),
    /// The property is not a number.
    Invalid(String),
}

/// Reads a message's `DELAY` level as RocketMQ does, clamping it to
/// `max_level`. Prepared and rolled-back transaction messages are never
/// delayed.
pub fn delay_request(properties: &str, sys_flag: i32, max_level: i32) -> DelayRequest {
    if !matches!(
        transaction_type(sys_flag),
        TRANSACTION_NOT_TYPE | TRANSACTION_COMMIT_TYPE
    ) {
        return DelayRequest::None;
    }
    match message_model::properties::find(properties, keys::DELAY_TIME_LEVEL) {
        None => DelayRequest::None,
        Some(text) => match text.parse::<i32>() {
            Ok(level) if level > 0 => DelayRequest::Level(level.min(max_level)),
            Ok(_) => DelayRequest::None,
            Err(_) => DelayRequest::Invalid(text.to_owned()),
        },
    }
}

/// Moves a message into the schedule topic for `level`: its topic and
/// queue go into `REAL_TOPIC`/`REAL_QID`, `DELAY` holds the (clamped)
/// level, and timer properties are dropped (a delay level wins over them).
pub fn to_schedule(msg: &mut MessageToStore, level: i32) {
    let mut props = Properties::decode(&msg.properties);
    for key in [
        keys::TIMER_DELIVER_MS,
        keys::TIMER_DELAY_SEC,
        keys::TIMER_DELAY_MS,
    ] {
        props.remove(key);
    }
    // Topic names and numbers hold no separator, so these cannot fail.
    let _ = props.insert(keys::DELAY_TIME_LEVEL, level.to_string());
    let _ = props.insert(keys::REAL_TOPIC, msg.topic.as_str());
    let _ = props.insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    msg.properties = props.encode();
    msg.topic = SCHEDULE_TOPIC.to_owned();
    msg.queue_id = level - 1;
}

/// The message a due schedule entry becomes: the stored record moved back
/// to its real topic and queue, with `WAIT=false` and the delay and timer
/// properties removed. `None` for a record without a real topic, or whose
/// real topic is a transaction's half topic (never delivered).
pub fn from_schedule(record: &[u8]) -> Option<MessageToStore> {
    let msg = to_real_topic(record, |props| {
        for key in [
            keys::DELAY_TIME_LEVEL,
            keys::TIMER_DELIVER_MS,
            keys::TIMER_DELAY_SEC,
            keys::TIMER_DELAY_MS,
        ] {
            props.remove(key);
        }
    })?;
    (msg.topic != "RMQ_SYS_TRANS_HALF_TOPIC").then_some(msg)
}

/// A record held on a system topic (schedule or timer) as the message to
/// store in its real topic and queue (`REAL_TOPIC`/`REAL_QID`, removed),
/// with `WAIT=false` and its other properties as `adjust` leaves them;
/// body, flags, hosts, times and redelivery count are kept. `None` for a
/// record without a real topic and queue.
pub(crate) fn to_real_topic(
    record: &[u8],
    adjust: impl FnOnce(&mut Properties),
) -> Option<MessageToStore> {
    let Record::Message(m) = record::check(record, false) else {
        return None;
    };
    let mut props = Properties::decode(m.properties);
    let topic = props.remove(keys::REAL_TOPIC)?;
    let queue_id = props.remove(keys::REAL_QUEUE_ID)?.parse().ok()?;
    adjust(&mut props);
    let _ = props.insert(keys::WAIT_STORE_MSG_OK, "false");
    Some(restored(&m, topic, queue_id, props.encode()))
}

/// A stored record as a message to store again in `topic` and `queue_id`
/// with `properties`; body, flags, hosts, times and redelivery count kept.
pub(crate) fn restored(
    m: &StoredMessage<'_>,
    topic: String,
    queue_id: i32,
    properties: String,
) -> MessageToStore {
    MessageToStore {
        topic,
        queue_id,
        flag: m.flag,
        sys_flag: m.sys_flag,
        born_timestamp: m.born_timestamp,
        born_host: m.born_host,
        store_host: m.store_host,
        reconsume_times: m.reconsume_times,
        prepared_transaction_offset: m.prepared_transaction_offset,
        body: bytes::Bytes::copy_from_slice(m.body),
        properties,
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OffsetFile {
    offset_table: BTreeMap<i32, i64>,
}

/// Delivery of delay-level messages once they are due.
#[derive(Debug)]
pub struct ScheduleService {
    delays_ms: Vec<u64>,
    /// Level → the next schedule-queue offset to deliver.
    offsets: Mutex<BTreeMap<i32, i64>>,
    dirty: AtomicBool,
    delivered: AtomicU64,
    path: PathBuf,
    service: ServiceLoop,
}

impl ScheduleService {
    /// Loads the delivery progress from `config_dir` (missing is fine).
    /// `delays_ms` is the delay of each level, level 1 first.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(config_dir: &Path, delays_ms: Vec<u64>) -> std::io::Result<Self> {
        let path = config_dir.join("delayOffset.json");
        let file: OffsetFile = persist::read_json(&path)?;
        Ok(Self {
            delays_ms,
            offsets: Mutex::new(file.offset_table),
            dirty: AtomicBool::new(false),
            delivered: AtomicU64::new(0),
            path,
            service: ServiceLoop::default(),
        })
    }

    /// The highest level.
    pub fn max_level(&self) -> i32 {
        self.delays_ms.len() as i32
    }

    /// The delay of a level in ms (`None` outside 1..=max).
    pub fn delay_ms(&self, level: i32) -> Option<u64> {
        usize::try_from(level - 1)
            .ok()
            .and_then(|i| self.delays_ms.get(i))
            .copied()
    }

    /// Messages moved to their real topic since start.
    pub fn delivered(&self) -> u64 {
        self.delivered.load(Ordering::Relaxed)
    }

    /// The next schedule-queue offset of each level, as persisted.
    pub fn offsets(&self) -> BTreeMap<i32, i64> {
        self.offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Delivers every entry that is due at `now_ms`; returns when the
    /// earliest entry still waiting is due (ms since the epoch), if any.
    /// A store refusal leaves that entry for the next pass.
    pub fn deliver_due(&self, store: &MessageStore, now_ms: i64) -> Option<i64> {
        let mut next: Option<i64> = None;
        for level in 1..=self.max_level() {
            let queue_id = level - 1;
            let max = store.max_offset_in_queue(SCHEDULE_TOPIC, queue_id);
            let min = store.min_offset_in_queue(SCHEDULE_TOPIC, queue_id);
            let start = self.offset(level).clamp(min, max);
            let mut offset = start;
            let delay = self.delay_ms(level).unwrap_or(0) as i64;
            while offset < max {
                let Some(entry) = store.queue_entry(SCHEDULE_TOPIC, queue_id, offset) else {
                    break;
                };
                // A due time beyond now + the level's delay means a clock
                // that went back; deliver it now rather than much later.
                let due = if entry.tags_code > now_ms + delay {
                    now_ms
                } else {
                    entry.tags_code
                };
                if due > now_ms {
                    next = Some(next.map_or(due, |n| n.min(due)));
                    break;
                }
                match store.lookup_message(entry.commit_log_offset as u64) {
                    Some(record) => match from_schedule(&record) {
                        Some(msg) => {
                            if let Err(e) = store.put_message(&msg) {
                                tracing::warn!(level, offset, cause = %e, "cannot deliver a delayed message; retrying");
                                next = Some(now_ms + POLL.as_millis() as i64);
                                break;
                            }
                            self.delivered.fetch_add(1, Ordering::Relaxed);
                        }
                        None => tracing::error!(
                            level,
                            offset,
                            "schedule entry without a real topic and queue; skipped"
                        ),
                    },
                    None => tracing::error!(
                        level,
                        offset,
                        commit_log_offset = entry.commit_log_offset,
                        "schedule entry points at no message; skipped"
                    ),
                }
                offset += 1;
            }
            if offset != self.offset(level) {
                self.offsets
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .insert(level, offset);
                self.dirty.store(true, Ordering::Release);
            }
        }
        next
    }

    /// Runs deliveries until [`ScheduleService::stop`]: after each pass it
    /// waits until the earliest waiting entry is due, at most 100 ms, and
    /// writes the progress every `persist_every` and at the end.
    pub fn run(&self, store: &MessageStore, persist_every: Duration) {
        self.service.run(
            POLL,
            persist_every,
            |now| self.deliver_due(store, now),
            || {
                if let Err(e) = self.persist() {
                    tracing::error!(cause = %e, "cannot persist delay offsets");
                }
            },
        );
    }

    /// Ends [`ScheduleService::run`].
    pub fn stop(&self) {
        self.service.stop();
    }

    /// Writes the progress if it changed since the last write.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let result = persist::write_atomically(&self.path, self.to_json().as_bytes());
        if result.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        result
    }

    fn offset(&self, level: i32) -> i64 {
        self.offsets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&level)
            .copied()
            .unwrap_or(0)
    }

    /// Takes a master's progress (`GET_ALL_DELAY_OFFSET`'s body, the
    /// layout of [`ScheduleService::to_json`]): each level's offset moves up
    /// to the master's, never back. Returns how many levels moved.
    ///
    /// # Errors
    /// The body is not that document.
    pub fn copy_from(&self, body: &[u8]) -> Result<usize, String> {
        let file: OffsetFile = remoting_protocol::body::from_json(body)
            .map_err(|e| format!("delay offsets do not parse: {e}"))?;
        let mut offsets = self.offsets.lock().unwrap_or_else(PoisonError::into_inner);
        let mut moved = 0;
        for (level, offset) in file.offset_table {
            let mine = offsets.entry(level).or_insert(0);
            if offset > *mine {
                *mine = offset;
                moved += 1;
            }
        }
        if moved > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(moved)
    }

    /// The progress in RocketMQ's file layout, with its unquoted integer keys:
    /// `{"dataVersion":{...},"offsetTable":{1:5,3:0}}`.
    pub fn to_json(&self) -> String {
        let table: Vec<String> = self
            .offsets()
            .iter()
            .map(|(level, offset)| format!("{level}:{offset}"))
            .collect();
        format!(
            "{{\"dataVersion\":{{\"counter\":0,\"stateVersion\":0,\"timestamp\":{}}},\"offsetTable\":{{{}}}}}",
            message_model::now_ms(),
            table.join(",")
        )
    }
}

#[cfg(test)]
mod copy_tests {
    use super::*;

    #[test]
    fn a_masters_delay_progress_only_moves_levels_forward() {
        let dir = tempfile::tempdir().unwrap();
        let s = ScheduleService::load(dir.path(), vec![1000, 5000, 10_000]).unwrap();
        assert_eq!(s.copy_from(br#"{"offsetTable":{1:5,2:7}}"#).unwrap(), 2);
        assert_eq!(s.copy_from(br#"{"offsetTable":{1:3,2:9}}"#).unwrap(), 1);
        assert_eq!(s.offsets(), BTreeMap::from([(1, 5), (2, 9)]));
        assert!(s.copy_from(b"not json").is_err());
        s.persist().unwrap();
        let again = ScheduleService::load(dir.path(), vec![1000, 5000, 10_000]).unwrap();
        assert_eq!(again.offsets(), BTreeMap::from([(1, 5), (2, 9)]));
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use message_model::flags::TRANSACTION_PREPARED_TYPE;
    use store::StoreConfig;

    fn message(topic: &str, props: &str) -> MessageToStore {
        MessageToStore {
            topic: topic.into(),
            queue_id: 2,
            flag: 7,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 3,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from_static(b"body"),
            properties: props.into(),
        }
    }

    #[test]
    fn the_delay_property_is_read_as_rocketmq_reads_it() {
        assert_eq!(delay_request("", 0, 18), DelayRequest::None);
        assert_eq!(
            delay_request("DELAY\u{1}3\u{2}", 0, 18),
            DelayRequest::Level(3)
        );
        assert_eq!(
            delay_request("DELAY\u{1}40\u{2}", 0, 18),
            DelayRequest::Level(18)
        );
        assert_eq!(delay_request("DELAY\u{1}0\u{2}", 0, 18), DelayRequest::None);
        assert_eq!(
            delay_request("DELAY\u{1}-1\u{2}", 0, 18),
            DelayRequest::None
        );
        assert_eq!(
            delay_request("DELAY\u{1}x\u{2}", 0, 18),
            DelayRequest::Invalid("x".into())
        );
        assert_eq!(
            delay_request("DELAY\u{1}3\u{2}", TRANSACTION_PREPARED_TYPE, 18),
            DelayRequest::None
        );
    }

    #[test]
    fn a_scheduled_message_goes_back_to_its_topic_intact() {
        let mut msg = message(
            "T",
            "TAGS\u{1}A\u{2}DELAY\u{1}3\u{2}TIMER_DELAY_SEC\u{1}9\u{2}",
        );
        to_schedule(&mut msg, 3);
        assert_eq!((msg.topic.as_str(), msg.queue_id), (SCHEDULE_TOPIC, 2));
        let props = Properties::decode(&msg.properties);
        assert_eq!(props.get(keys::REAL_TOPIC), Some("T"));
        assert_eq!(props.get(keys::REAL_QUEUE_ID), Some("2"));
        assert_eq!(props.get(keys::TIMER_DELAY_SEC), None);

        let dir = tempfile::tempdir().unwrap();
        let store = MessageStore::open(StoreConfig {
            mapped_file_size_commit_log: 1 << 20,
            max_message_size: 64 * 1024,
            ..StoreConfig::with_root(dir.path())
        })
        .unwrap();
        let at = store.put_message(&msg).unwrap().append.physical_offsets[0];
        let back = from_schedule(&store.lookup_message(at).unwrap()).unwrap();
        store.shutdown();
        assert_eq!((back.topic.as_str(), back.queue_id), ("T", 2));
        assert_eq!((back.flag, back.reconsume_times), (7, 3));
        assert_eq!(&back.body[..], b"body");
        let props = Properties::decode(&back.properties);
        assert_eq!(props.get(keys::TAGS), Some("A"));
        assert_eq!(props.get(keys::DELAY_TIME_LEVEL), None);
        assert_eq!(props.get(keys::REAL_TOPIC), None);
        assert_eq!(props.get(keys::WAIT_STORE_MSG_OK), Some("false"));
    }

    #[test]
    fn due_entries_are_delivered_in_order_and_progress_survives_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config_dir = dir.path().join("config");
        let store = MessageStore::open(StoreConfig {
            mapped_file_size_commit_log: 1 << 20,
            max_message_size: 64 * 1024,
            ..StoreConfig::with_root(dir.path().join("store"))
        })
        .unwrap();
        let service = ScheduleService::load(&config_dir, vec![1_000, 60_000]).unwrap();
        let mut stored_at = Vec::new();
        for (i, level) in [1, 1, 2].into_iter().enumerate() {
            let mut msg = message("T", &format!("KEYS\u{1}k{i}\u{2}"));
            to_schedule(&mut msg, level);
            stored_at.push(store.put_message(&msg).unwrap());
        }
        // The dispatch indexes asynchronously; wait for the schedule queues.
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.max_offset_in_queue(SCHEDULE_TOPIC, 0) < 2
            || store.max_offset_in_queue(SCHEDULE_TOPIC, 1) < 1
        {
            assert!(Instant::now() < deadline, "schedule queues not indexed");
            std::thread::yield_now();
        }
        let first = store.queue_entry(SCHEDULE_TOPIC, 0, 0).unwrap().tags_code;
        // Before anything is due: nothing moves, and the next due time is
        // the first level-1 entry's.
        assert_eq!(service.deliver_due(&store, first - 1), Some(first));
        assert_eq!(store.max_offset_in_queue("T", 2), 0);
        // Level 1 due, level 2 not.
        let next = service.deliver_due(&store, first + 1_000).unwrap();
        assert!(next > first + 1_000);
        assert_eq!(service.delivered(), 2);
        assert_eq!(service.offsets().get(&1), Some(&2));
        service.persist().unwrap();
        let text = std::fs::read_to_string(config_dir.join("delayOffset.json")).unwrap();
        assert!(text.contains("\"offsetTable\":{1:2}"), "{text}");

        let again = ScheduleService::load(&config_dir, vec![1_000, 60_000]).unwrap();
        assert_eq!(again.deliver_due(&store, next), None);
        assert_eq!(again.delivered(), 1, "only the level-2 message is left");
        let deadline = Instant::now() + Duration::from_secs(10);
        while store.max_offset_in_queue("T", 2) < 3 {
            assert!(Instant::now() < deadline, "delivered messages not indexed");
            std::thread::yield_now();
        }
        let keys_in_order: Vec<String> = (0..3)
            .map(|i| {
                let e = store.queue_entry("T", 2, i).unwrap();
                let rec = store.lookup_message(e.commit_log_offset as u64).unwrap();
                let Record::Message(m) = record::check(&rec, false) else {
                    panic!("not a message")
                };
                message_model::properties::find(m.properties, keys::KEYS)
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(keys_in_order, ["k0", "k1", "k2"]);
        store.shutdown();
    }
}
