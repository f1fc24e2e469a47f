//! A queue's cache of pulled, not yet consumed messages, and the offset that
//! may be committed for it.
//!
//! # Invariants
//! - The commit offset is the smallest offset still cached, or one past the
//!   largest offset ever cached when none is; so a committed offset never
//!   passes a message whose handler has not succeeded.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicBool, Ordering},
        Mutex, PoisonError,
    },
};

use crate::MessageExt;

/// The cache of one owned queue.
#[derive(Debug, Default)]
pub(crate) struct ProcessQueue {
    state: Mutex<State>,
    dropped: AtomicBool,
}

#[derive(Debug, Default)]
struct State {
    /// Queue offset to body length.
    messages: BTreeMap<u64, usize>,
    bytes: u64,
    max_cached: Option<u64>,
}

impl ProcessQueue {
    /// Caches freshly pulled messages.
    pub(crate) fn put(&self, msgs: &[MessageExt]) {
        let mut s = self.lock();
        for m in msgs {
            if s.messages.insert(m.queue_offset, m.body.len()).is_none() {
                s.bytes += m.body.len() as u64;
            }
            s.max_cached = Some(
                s.max_cached
                    .map_or(m.queue_offset, |x| x.max(m.queue_offset)),
            );
        }
    }

    /// Forgets consumed messages; returns the offset now safe to commit.
    pub(crate) fn remove(&self, offsets: impl IntoIterator<Item = u64>) -> Option<u64> {
        let mut s = self.lock();
        for o in offsets {
            if let Some(len) = s.messages.remove(&o) {
                s.bytes -= len as u64;
            }
        }
        match s.messages.keys().next() {
            Some(first) => Some(*first),
            None => s.max_cached.map(|m| m + 1),
        }
    }

    /// Cached messages and their body bytes.
    pub(crate) fn size(&self) -> (usize, u64) {
        let s = self.lock();
        (s.messages.len(), s.bytes)
    }

    /// Marks the queue as no longer owned: nothing more is committed for it.
    pub(crate) fn drop_queue(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn msg(offset: u64) -> MessageExt {
        MessageExt {
            topic: "T".into(),
            queue_id: 0,
            queue_offset: offset,
            body: Bytes::from_static(b"abcd"),
            tags: None,
            keys: Vec::new(),
            properties: BTreeMap::new(),
            msg_id: offset.to_string(),
            store_timestamp_ms: 0,
            born_timestamp_ms: 0,
            reconsume_times: 0,
            commit_log_offset: 0,
            store_host: std::net::SocketAddr::from(([127, 0, 0, 1], 10911)),
        }
    }

    #[test]
    fn the_commit_offset_is_the_smallest_message_in_flight() {
        let pq = ProcessQueue::default();
        pq.put(&[msg(10), msg(11), msg(12)]);
        assert_eq!(pq.size(), (3, 12));
        // 11 done while 10 is still running: only 10 is safe.
        assert_eq!(pq.remove([11]), Some(10));
        assert_eq!(pq.remove([10]), Some(12));
        assert_eq!(pq.remove([12]), Some(13));
        assert_eq!(pq.size(), (0, 0));
    }

    #[test]
    fn nothing_cached_ever_means_nothing_to_commit() {
        assert_eq!(ProcessQueue::default().remove([5]), None);
    }
}
