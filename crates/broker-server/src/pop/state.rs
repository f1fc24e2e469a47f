//! The bookkeeping of one consumer group on one topic: per queue the next
//! offset to read and the messages in flight (delivered, not acknowledged),
//! plus a timer index ordering the in-flight messages by the moment they
//! become visible again; and the file layout it is saved in.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One delivered, unacknowledged message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inflight {
    /// Sequence number of the current delivery (its handle's).
    pub seq: u64,
    /// Deliveries so far (1 for the first).
    pub attempt: u32,
    /// When it becomes visible again (ms since the epoch).
    pub visible_at: i64,
}

/// One queue of a group on a topic.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct QueueState {
    /// Next queue offset to read for new messages.
    pub next: i64,
    /// In-flight messages by queue offset.
    pub inflight: BTreeMap<i64, Inflight>,
}

impl QueueState {
    /// Lowest offset not yet acknowledged.
    pub fn committed(&self) -> i64 {
        self.inflight
            .keys()
            .next()
            .map_or(self.next, |first| (*first).min(self.next))
    }
}

/// A consumer group on a topic.
#[derive(Debug, Default)]
pub(crate) struct GroupTopic {
    /// Queues by id.
    pub queues: BTreeMap<i32, QueueState>,
    /// `(visible_at, queue id, offset)` of every in-flight message.
    pub timers: BTreeSet<(i64, i32, i64)>,
    /// Number of in-flight messages (the size of `timers`).
    pub inflight: usize,
    /// Where the next read of new messages starts in the caller's queue list.
    pub cursor: usize,
    /// When the group last popped, acknowledged or changed an invisible time
    /// here (ms since the epoch).
    pub last_used_ms: i64,
}

impl GroupTopic {
    /// Adds an in-flight message.
    pub fn insert(&mut self, queue_id: i32, offset: i64, entry: Inflight) {
        let queue = self.queues.entry(queue_id).or_default();
        if let Some(old) = queue.inflight.insert(offset, entry) {
            self.timers.remove(&(old.visible_at, queue_id, offset));
        } else {
            self.inflight += 1;
        }
        self.timers.insert((entry.visible_at, queue_id, offset));
    }

    /// Removes an in-flight message.
    pub fn remove(&mut self, queue_id: i32, offset: i64) -> Option<Inflight> {
        let old = self.queues.get_mut(&queue_id)?.inflight.remove(&offset)?;
        self.timers.remove(&(old.visible_at, queue_id, offset));
        self.inflight -= 1;
        Some(old)
    }

    /// The in-flight message at a queue offset.
    pub fn get(&self, queue_id: i32, offset: i64) -> Option<Inflight> {
        self.queues.get(&queue_id)?.inflight.get(&offset).copied()
    }

    /// Removes every in-flight message of a queue at or above `end`.
    pub fn truncate(&mut self, queue_id: i32, end: i64) -> usize {
        let offsets: Vec<i64> = match self.queues.get(&queue_id) {
            Some(q) => q.inflight.range(end..).map(|(o, _)| *o).collect(),
            None => return 0,
        };
        for offset in &offsets {
            self.remove(queue_id, *offset);
        }
        offsets.len()
    }

    /// The saved form.
    pub fn to_saved(&self, group: &str, topic: &str) -> SavedGroupTopic {
        SavedGroupTopic {
            group: group.to_owned(),
            topic: topic.to_owned(),
            last_used_ms: self.last_used_ms,
            queues: self
                .queues
                .iter()
                .map(|(id, q)| SavedQueue {
                    queue_id: *id,
                    next: q.next,
                    inflight: q
                        .inflight
                        .iter()
                        .map(|(offset, e)| SavedInflight {
                            offset: *offset,
                            seq: e.seq,
                            attempt: e.attempt,
                            visible_at: e.visible_at,
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Rebuilds from the saved form; a queue's next offset is raised above
    /// its in-flight messages, so none of them is read again as new.
    pub fn from_saved(saved: &SavedGroupTopic) -> Self {
        let mut gt = Self {
            last_used_ms: saved.last_used_ms,
            ..Self::default()
        };
        for q in &saved.queues {
            for e in &q.inflight {
                gt.insert(
                    q.queue_id,
                    e.offset,
                    Inflight {
                        seq: e.seq,
                        attempt: e.attempt,
                        visible_at: e.visible_at,
                    },
                );
            }
            let queue = gt.queues.entry(q.queue_id).or_default();
            let above = queue.inflight.keys().next_back().map_or(0, |o| o + 1);
            queue.next = q.next.max(above);
        }
        gt
    }
}

/// Version of the file layout written.
pub(crate) const FILE_VERSION: u32 = 1;

/// The content of `popState.json`.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SavedState {
    /// Layout version.
    pub version: u32,
    /// A sequence number above every one issued before the save.
    pub next_seq: u64,
    /// Every group on every topic.
    pub groups: Vec<SavedGroupTopic>,
}

/// A group on a topic, saved.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SavedGroupTopic {
    /// Consumer group.
    pub group: String,
    /// Topic.
    pub topic: String,
    /// Its queues.
    pub queues: Vec<SavedQueue>,
    /// Its last use (ms since the epoch); 0 in files written before it was
    /// kept.
    #[serde(default)]
    pub last_used_ms: i64,
}

/// A queue, saved.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SavedQueue {
    /// Queue id.
    pub queue_id: i32,
    /// Next offset to read.
    pub next: i64,
    /// In-flight messages.
    pub inflight: Vec<SavedInflight>,
}

/// An in-flight message, saved.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct SavedInflight {
    /// Queue offset.
    pub offset: i64,
    /// Delivery sequence number.
    pub seq: u64,
    /// Deliveries so far.
    pub attempt: u32,
    /// When it becomes visible again (ms since the epoch).
    pub visible_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64, visible_at: i64) -> Inflight {
        Inflight {
            seq,
            attempt: 1,
            visible_at,
        }
    }

    #[test]
    fn insert_remove_keep_the_timer_index_and_count_in_step() {
        let mut gt = GroupTopic::default();
        gt.insert(0, 5, entry(1, 100));
        gt.insert(1, 3, entry(2, 50));
        gt.insert(0, 5, entry(3, 200));
        assert_eq!(gt.inflight, 2);
        assert_eq!(
            gt.timers.iter().copied().collect::<Vec<_>>(),
            vec![(50, 1, 3), (200, 0, 5)]
        );
        assert_eq!(gt.remove(0, 5), Some(entry(3, 200)));
        assert_eq!(gt.remove(0, 5), None);
        assert_eq!(gt.inflight, 1);
        assert_eq!(gt.timers.len(), 1);
    }

    #[test]
    fn committed_is_the_lowest_unacknowledged_offset() {
        let mut gt = GroupTopic::default();
        gt.queues.entry(0).or_default().next = 10;
        assert_eq!(gt.queues[&0].committed(), 10);
        gt.insert(0, 4, entry(1, 1));
        gt.insert(0, 7, entry(2, 1));
        assert_eq!(gt.queues[&0].committed(), 4);
        gt.remove(0, 4);
        assert_eq!(gt.queues[&0].committed(), 7);
    }

    #[test]
    fn truncate_drops_entries_at_and_above_the_end() {
        let mut gt = GroupTopic::default();
        for o in 0..6 {
            gt.insert(2, o, entry(o as u64, o));
        }
        assert_eq!(gt.truncate(2, 4), 2);
        assert_eq!(gt.inflight, 4);
        assert!(gt.get(2, 4).is_none() && gt.get(2, 3).is_some());
    }

    #[test]
    fn saved_form_round_trips_and_next_stays_above_inflight() {
        let mut gt = GroupTopic::default();
        gt.queues.entry(0).or_default().next = 3;
        gt.insert(0, 8, entry(9, 77));
        let saved = gt.to_saved("G", "T");
        let back = GroupTopic::from_saved(&saved);
        assert_eq!(back.get(0, 8), Some(entry(9, 77)));
        assert_eq!(back.queues[&0].next, 9);
        assert_eq!(back.inflight, 1);
    }
}
