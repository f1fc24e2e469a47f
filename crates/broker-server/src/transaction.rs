//! Transactional messages, as RocketMQ stores them: a half (prepared)
//! message waits in `RMQ_SYS_TRANS_HALF_TOPIC`, queue 0, with its real
//! topic and queue in `REAL_TOPIC`/`REAL_QID`, invisible to consumers. The
//! producer's `END_TRANSACTION` commits it (the message is stored again in
//! its real topic) or rolls it back; either way an op record, tag `d` with
//! the half's queue offset in a body of comma-terminated offsets, goes to
//! `RMQ_SYS_TRANS_OP_HALF_TOPIC`, queue 0.
//!
//! Both topics are in the store, so they survive a crash like any message;
//! which halves have ended is read back from the op queue when the broker
//! starts ([`Transactions::load`]), from a persisted [`Checkpoint`]: below
//! it every half has ended and no op record names a later half, so memory
//! and start-up time follow the halves still pending, not all ever sent.
//!
//! A commit records its op first and stores the message second, both under
//! [`Transactions::lock`], so at most the last op can lack its message: the
//! broker looks for it when it starts and stores it if the broker stopped
//! in between. The other order would let a check commit the half a second
//! time. An op carries its outcome ([`END_OUTCOME`]); a commit whose
//! message the store refused is undone by an op with [`UNDO_TAG`].

use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, MutexGuard, PoisonError,
    },
};

use message_model::{
    flags::TRANSACTION_TYPE_MASK,
    properties::{keys, Properties},
    record::{self, Record, StoredMessage},
    MessageToStore,
};
use serde::{Deserialize, Serialize};
use store::MessageStore;

use crate::{persist, service_loop::ServiceLoop};

/// Where half messages wait for their end.
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where the ends of half messages are recorded.
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// The tag of an op record: the half messages it names have ended.
pub const REMOVE_TAG: &str = "d";
/// The tag of an op record that undoes an end: the half it names is
/// pending again (its commit could not be stored).
pub const UNDO_TAG: &str = "u";
/// The op record's property naming how the half ended: [`COMMIT`],
/// [`ROLLBACK`] or [`DISCARD`].
pub const END_OUTCOME: &str = "TRAN_END_OUTCOME";
/// The half was committed: its message is stored in its real topic.
pub const COMMIT: &str = "commit";
/// The half was rolled back.
pub const ROLLBACK: &str = "rollback";
/// The half was checked too often and moved aside.
pub const DISCARD: &str = "discard";
/// The one queue of each transaction topic.
pub const QUEUE_ID: i32 = 0;
/// The property a producer sets to be checked no earlier than this many
/// seconds after the send.
pub const CHECK_IMMUNITY: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Op records read per store call.
const LOAD_BATCH: usize = 1024;

/// Moves a prepared send into the half topic: its topic and queue go into
/// `REAL_TOPIC`/`REAL_QID`, `__transactionId__` is its unique key, and its
/// transaction bits are cleared (the half topic holds plain records).
pub fn to_half(msg: &mut MessageToStore, unique_key: &str) {
    let mut props = Properties::decode(&msg.properties);
    // Topic names, numbers and unique keys hold no separator: these cannot
    // fail.
    let _ = props.insert(keys::REAL_TOPIC, msg.topic.as_str());
    let _ = props.insert(keys::REAL_QUEUE_ID, msg.queue_id.to_string());
    let _ = props.insert(keys::TRANSACTION_ID, unique_key);
    msg.properties = props.encode();
    msg.sys_flag &= !TRANSACTION_TYPE_MASK;
    msg.topic = HALF_TOPIC.to_owned();
    msg.queue_id = QUEUE_ID;
}

/// The op record saying that the half message at `half_offset` (its queue
/// offset in the half topic) has ended with `outcome`.
pub fn op_record(half_offset: i64, outcome: &str, store_host: SocketAddr) -> MessageToStore {
    let mut op = undo_record(half_offset, store_host);
    let mut props = Properties::default();
    let _ = props.insert(keys::TAGS, REMOVE_TAG);
    let _ = props.insert(END_OUTCOME, outcome);
    let _ = props.insert(keys::WAIT_STORE_MSG_OK, "false");
    op.properties = props.encode();
    op
}

/// The op record saying that the end of the half message at `half_offset`
/// is undone: it is pending again.
pub fn undo_record(half_offset: i64, store_host: SocketAddr) -> MessageToStore {
    let mut props = Properties::default();
    let _ = props.insert(keys::TAGS, UNDO_TAG);
    let _ = props.insert(keys::WAIT_STORE_MSG_OK, "false");
    MessageToStore {
        topic: OP_TOPIC.to_owned(),
        queue_id: QUEUE_ID,
        flag: 0,
        sys_flag: 0,
        born_timestamp: message_model::now_ms(),
        born_host: store_host,
        store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: bytes::Bytes::from(format!("{half_offset},")),
        properties: props.encode(),
    }
}

/// The half-queue offsets an op record's body names (`"17,18,"`); what does
/// not parse is skipped.
pub fn op_offsets(body: &[u8]) -> impl Iterator<Item = i64> + '_ {
    body.split(|&b| b == b',')
        .filter_map(|part| std::str::from_utf8(part).ok()?.trim().parse().ok())
}

/// The ended halves: every one below a watermark, and those named one by
/// one above it.
#[derive(Debug, Default)]
pub struct Ended {
    /// Every half below this has ended.
    below: i64,
    /// Ended halves at or above `below`.
    above: BTreeSet<i64>,
}

impl Ended {
    /// Whether the half at `offset` has ended.
    pub fn contains(&self, offset: i64) -> bool {
        offset < self.below || self.above.contains(&offset)
    }

    /// Records that the half at `offset` has ended.
    pub fn insert(&mut self, offset: i64) {
        if offset >= self.below {
            self.above.insert(offset);
        }
    }

    /// Every half below `to` has ended: they are no longer named one by one.
    fn advance(&mut self, to: i64) {
        if to > self.below {
            self.below = to;
            self.above = self.above.split_off(&to);
        }
    }

    /// Ended halves named one by one (the memory they take).
    pub fn named(&self) -> usize {
        self.above.len()
    }

    /// Every half below this has ended.
    pub fn watermark(&self) -> i64 {
        self.below
    }
}

/// Where the `transaction-check` thread stands, persisted in
/// `<config>/transactionCheckpoint.json` so that a restart reads only the
/// op records that may name a pending half.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Checkpoint {
    /// Every half below this queue offset has ended.
    pub half_offset: i64,
    /// Every op record below this queue offset names only halves below
    /// `half_offset`.
    pub op_offset: i64,
}

/// The checkpoint file in the broker's config directory.
pub const CHECKPOINT_FILE: &str = "transactionCheckpoint.json";

/// Which half messages have ended, by their queue offset in the half topic.
///
/// Holding [`Transactions::lock`] while ending a half keeps a second end of
/// the same half from storing it twice.
#[derive(Debug, Default)]
pub struct Transactions {
    ended: Mutex<Ended>,
    /// Where the check thread stood when it last advanced (or the broker
    /// started).
    progress: Mutex<Checkpoint>,
    /// What this run last wrote to the checkpoint file.
    persisted: Mutex<Option<Checkpoint>>,
    /// Op records read when the broker started.
    read_at_start: u64,
    /// Where the checkpoint is kept (none: not kept).
    checkpoint_path: Option<PathBuf>,
    /// How often each pending half was checked since the broker started.
    checks: Mutex<HashMap<i64, u32>>,
    /// Round robin over a producer group's connections.
    next_connection: AtomicUsize,
    /// The `transaction-check` thread's loop.
    pub service: ServiceLoop,
}

impl Transactions {
    /// Reads the checkpoint in `config_dir` and every op record after it
    /// still in the store.
    ///
    /// # Errors
    /// The checkpoint file exists but cannot be read.
    pub fn load(store: &MessageStore, config_dir: &Path) -> std::io::Result<Self> {
        let path = config_dir.join(CHECKPOINT_FILE);
        let saved: Checkpoint = persist::read_json(&path)?;
        let half_end = store.max_offset_in_queue(HALF_TOPIC, QUEUE_ID);
        // A store that lost its tail (a power loss) may hold fewer halves
        // than the checkpoint says ended: halves stored from there on are new.
        let below = saved
            .half_offset
            .min(half_end)
            .max(store.min_offset_in_queue(HALF_TOPIC, QUEUE_ID));
        let op_start = saved.op_offset.clamp(
            store.min_offset_in_queue(OP_TOPIC, QUEUE_ID),
            store.max_offset_in_queue(OP_TOPIC, QUEUE_ID),
        );
        let mut ended = Ended {
            below,
            above: BTreeSet::new(),
        };
        let mut read = 0_u64;
        for_each_op(store, op_start, |m| {
            read += 1;
            if Properties::decode(m.properties).get(keys::TAGS) == Some(UNDO_TAG) {
                for offset in op_offsets(m.body) {
                    ended.above.remove(&offset);
                }
            } else {
                for offset in op_offsets(m.body) {
                    ended.insert(offset);
                }
            }
            true
        });
        if read > 0 || below > 0 {
            tracing::info!(
                ended_below = below,
                ended_above = ended.above.len(),
                op_records_read = read,
                "transaction ends read back from {OP_TOPIC}"
            );
        }
        Ok(Self {
            ended: Mutex::new(ended),
            progress: Mutex::new(Checkpoint {
                half_offset: below,
                op_offset: op_start,
            }),
            checkpoint_path: Some(path),
            read_at_start: read,
            ..Self::default()
        })
    }

    /// How many op records were read when the broker started.
    pub fn op_records_read_at_start(&self) -> u64 {
        self.read_at_start
    }

    /// How often the half at `offset` was checked since the broker started.
    pub fn checked(&self, offset: i64) -> u32 {
        self.checks_lock().get(&offset).copied().unwrap_or(0)
    }

    /// Counts one more check of the half at `offset`.
    pub fn record_check(&self, offset: i64) {
        *self.checks_lock().entry(offset).or_default() += 1;
    }

    /// Forgets the checks of a half that ended.
    pub fn forget_checks(&self, offset: i64) {
        self.checks_lock().remove(&offset);
    }

    /// Where the next check starts its round over a group's connections.
    pub fn next_connection(&self) -> usize {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    fn checks_lock(&self) -> MutexGuard<'_, HashMap<i64, u32>> {
        self.checks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The ended halves, held while a half is ended.
    pub fn lock(&self) -> MutexGuard<'_, Ended> {
        self.ended.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every half below `half_offset` has ended (the check thread found no
    /// pending one there): stops naming them one by one, moves past the op
    /// records that name only such halves, and persists where it stands
    /// when this run has not written that yet.
    ///
    /// # Errors
    /// The checkpoint file cannot be written.
    pub fn advance(&self, store: &MessageStore, half_offset: i64) -> std::io::Result<Checkpoint> {
        let below = {
            let mut ended = self.lock();
            ended.advance(half_offset);
            ended.below
        };
        let mut progress = self.progress.lock().unwrap_or_else(PoisonError::into_inner);
        let mut at = progress
            .op_offset
            .max(store.min_offset_in_queue(OP_TOPIC, QUEUE_ID));
        for_each_op(store, at, |m| {
            if op_offsets(m.body).any(|offset| offset >= below) {
                return false;
            }
            at = m.queue_offset + 1;
            true
        });
        let checkpoint = Checkpoint {
            half_offset: below,
            op_offset: at,
        };
        *progress = checkpoint;
        drop(progress);
        let mut persisted = self
            .persisted
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *persisted != Some(checkpoint) {
            if let Some(path) = &self.checkpoint_path {
                let json = serde_json::to_vec(&checkpoint).map_err(std::io::Error::other)?;
                persist::write_atomically(path, &json)?;
            }
            *persisted = Some(checkpoint);
        }
        Ok(checkpoint)
    }

    /// Half messages stored and not ended yet (`half_end` is the half
    /// queue's end offset, `half_min` its first); forgets the ends of halves
    /// below `half_min`, which retention deleted.
    pub fn pending(&self, half_min: i64, half_end: i64) -> u64 {
        let mut ended = self.lock();
        ended.advance(half_min);
        // Named ends are of stored halves, so none lies at or past the end:
        // this walks no entries, where counting those below it would walk
        // them all, once a second for the gauge.
        let past_end = ended.above.range(half_end..).count();
        let counted = (ended.above.len() - past_end) as u64;
        u64::try_from(half_end - ended.below)
            .unwrap_or(0)
            .saturating_sub(counted)
    }
}

/// Calls `f` with each op record from queue offset `from`, in order, until
/// it returns false or the indexed records end.
fn for_each_op(store: &MessageStore, from: i64, mut f: impl FnMut(&StoredMessage<'_>) -> bool) {
    let mut offset = from;
    let end = store.max_offset_in_queue(OP_TOPIC, QUEUE_ID);
    while offset < end {
        let got = store.get_messages(OP_TOPIC, QUEUE_ID, offset, LOAD_BATCH, usize::MAX, None);
        for stored in &got.messages {
            if let Record::Message(m) = record::check(stored, false) {
                if !f(&m) {
                    return;
                }
            }
        }
        if got.next_begin_offset <= offset {
            return;
        }
        offset = got.next_begin_offset;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(topic: &str, queue_id: i32, sys_flag: i32, properties: &str) -> MessageToStore {
        MessageToStore {
            topic: topic.into(),
            queue_id,
            flag: 0,
            sys_flag,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: bytes::Bytes::from_static(b"b"),
            properties: properties.into(),
        }
    }

    #[test]
    fn a_half_keeps_its_real_place_and_loses_its_transaction_bits() {
        let mut m = message(
            "Orders",
            3,
            0x4 | 0x1,
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}G\u{2}",
        );
        to_half(&mut m, "ABC");
        assert_eq!(
            (m.topic.as_str(), m.queue_id, m.sys_flag),
            (HALF_TOPIC, 0, 0x1)
        );
        let props = Properties::decode(&m.properties);
        assert_eq!(props.get(keys::REAL_TOPIC), Some("Orders"));
        assert_eq!(props.get(keys::REAL_QUEUE_ID), Some("3"));
        assert_eq!(props.get(keys::TRANSACTION_ID), Some("ABC"));
        assert_eq!(props.get(keys::PRODUCER_GROUP), Some("G"));
    }

    #[test]
    fn op_records_name_their_half_offsets() {
        let op = op_record(17, COMMIT, "127.0.0.1:2".parse().unwrap());
        assert_eq!((op.topic.as_str(), op.queue_id), (OP_TOPIC, 0));
        assert_eq!(&op.body[..], b"17,");
        let props = Properties::decode(&op.properties);
        assert_eq!(props.get(keys::TAGS), Some(REMOVE_TAG));
        assert_eq!(props.get(END_OUTCOME), Some(COMMIT));
        let undo = undo_record(17, "127.0.0.1:2".parse().unwrap());
        assert_eq!(
            (undo.topic.as_str(), &undo.body[..]),
            (OP_TOPIC, &b"17,"[..])
        );
        assert_eq!(
            Properties::decode(&undo.properties).get(keys::TAGS),
            Some(UNDO_TAG)
        );
        let named: Vec<i64> = op_offsets(b"17,18, 19,x,").collect();
        assert_eq!(named, [17, 18, 19]);
    }

    #[test]
    fn pending_counts_the_halves_without_an_end() {
        let t = Transactions::default();
        for offset in [2, 3, 9] {
            t.lock().insert(offset);
        }
        assert_eq!(t.pending(0, 5), 3);
        assert_eq!(t.pending(3, 10), 5);
        // The end of half 2 is forgotten once retention passed it.
        assert_eq!(t.lock().named(), 2);
        assert_eq!(t.pending(5, 5), 0);
        assert_eq!(t.pending(9, 12), 2);
    }

    #[test]
    fn ends_below_the_watermark_are_not_named() {
        let mut e = Ended::default();
        for offset in [0, 1, 3, 7] {
            e.insert(offset);
        }
        assert!(!e.contains(2));
        e.advance(2);
        assert_eq!(e.named(), 2, "3 and 7 stay named");
        assert!(e.contains(0) && e.contains(1) && e.contains(3) && !e.contains(2));
        e.insert(1);
        assert_eq!(e.named(), 2, "an end below the watermark adds nothing");
        e.advance(1);
        assert_eq!(e.below, 2, "the watermark never goes back");
    }
}
