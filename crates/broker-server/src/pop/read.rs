//! The reading side of a pop: messages due for redelivery first, then new
//! messages from the group's queues (a fair share of each, within the byte
//! and scan budgets), each checked against the store and the tag filter.

use bytes::Bytes;
use message_model::{
    properties::{self, keys},
    record::{self, Record},
};
use store::MessageStore;

use super::{
    handle::Handle,
    state::{GroupTopic, Inflight},
    PopService, PoppedMessage, TagFilter, MAX_POP_BYTES, SCAN_BUDGET,
};

/// What one pop gathers while it holds its group's lock.
pub(super) struct Pass<'a> {
    pub(super) store: &'a MessageStore,
    pub(super) group: &'a str,
    pub(super) topic: &'a str,
    pub(super) filter: &'a TagFilter,
    pub(super) now_ms: i64,
    pub(super) visible_at: i64,
    pub(super) max: usize,
    pub(super) out: Vec<PoppedMessage>,
    pub(super) bytes: usize,
    pub(super) scanned: usize,
    pub(super) changed: bool,
    /// The group's start on the topic was fixed by this pass.
    pub(super) started: bool,
}

impl PopService {
    /// Delivers again the messages whose invisible time has ended.
    pub(super) fn redeliver(&self, pass: &mut Pass<'_>, gt: &mut GroupTopic) {
        let due: Vec<(i64, i32, i64)> = gt
            .timers
            .iter()
            .take_while(|t| t.0 <= pass.now_ms)
            .take(pass.max)
            .copied()
            .collect();
        for (_, queue_id, offset) in due {
            if pass.out.len() >= pass.max || pass.bytes >= MAX_POP_BYTES {
                break;
            }
            let Some(old) = gt.get(queue_id, offset) else {
                continue;
            };
            pass.changed = true;
            match read_at(pass.store, pass.topic, queue_id, offset) {
                Ok(record) => {
                    let entry = Inflight {
                        seq: self.next_seq(),
                        attempt: old.attempt.saturating_add(1),
                        visible_at: pass.visible_at,
                    };
                    gt.insert(queue_id, offset, entry);
                    pass.push(record, queue_id, offset, entry);
                }
                Err(why) => {
                    gt.remove(queue_id, offset);
                    tracing::warn!(
                        group = pass.group,
                        topic = pass.topic,
                        queue = queue_id,
                        offset,
                        why,
                        "in-flight message dropped: it is no longer in the store"
                    );
                }
            }
        }
    }

    /// Reads up to `want` new messages, a fair share from each queue first,
    /// then whatever the queues still hold.
    pub(super) fn read_new(
        &self,
        pass: &mut Pass<'_>,
        gt: &mut GroupTopic,
        queue_ids: &[i32],
        want: usize,
    ) {
        let n = queue_ids.len();
        if n == 0 {
            return;
        }
        let start = gt.cursor % n;
        gt.cursor = (start + 1) % n;
        let share = want.div_ceil(n);
        let mut taken = 0;
        for pass_no in 0..2 {
            for i in 0..n {
                if taken >= want || pass.bytes >= MAX_POP_BYTES || pass.scanned >= SCAN_BUDGET {
                    return;
                }
                let limit = if pass_no == 0 {
                    share.min(want - taken)
                } else {
                    want - taken
                };
                taken += self.read_queue(pass, gt, queue_ids[(start + i) % n], limit);
            }
        }
    }

    /// Reads up to `limit` new messages of one queue; returns how many.
    fn read_queue(
        &self,
        pass: &mut Pass<'_>,
        gt: &mut GroupTopic,
        queue_id: i32,
        limit: usize,
    ) -> usize {
        let (store, topic) = (pass.store, pass.topic);
        let min = store.min_offset_in_queue(topic, queue_id);
        let end = store.max_offset_in_queue(topic, queue_id);
        let mut next = gt.queues.entry(queue_id).or_default().next;
        if next > end {
            let dropped = gt.truncate(queue_id, end);
            tracing::warn!(
                group = pass.group,
                topic,
                queue = queue_id,
                next,
                end,
                dropped,
                "queue ends before the group's next offset (store recovered to an earlier end): \
                 reading on from its end"
            );
            next = end;
            pass.changed = true;
        }
        if next < min {
            next = min;
            pass.changed = true;
        }
        let mut taken = 0;
        while taken < limit
            && next < end
            && pass.bytes < MAX_POP_BYTES
            && pass.scanned < SCAN_BUDGET
        {
            let offset = next;
            next += 1;
            pass.scanned += 1;
            pass.changed = true;
            let Some(cq) = store.queue_entry(topic, queue_id, offset) else {
                continue;
            };
            if !pass.filter.matches_code(cq.tags_code) || gt.get(queue_id, offset).is_some() {
                continue;
            }
            let record = match read_at(store, topic, queue_id, offset) {
                Ok(record) => record,
                Err(why) => {
                    tracing::warn!(
                        topic,
                        queue = queue_id,
                        offset,
                        why,
                        "message skipped: unreadable"
                    );
                    continue;
                }
            };
            if !pass.filter.is_all() && !pass.filter.matches(tags_of(&record)) {
                continue;
            }
            let entry = Inflight {
                seq: self.next_seq(),
                attempt: 1,
                visible_at: pass.visible_at,
            };
            gt.insert(queue_id, offset, entry);
            pass.push(record, queue_id, offset, entry);
            taken += 1;
        }
        gt.queues.entry(queue_id).or_default().next = next;
        taken
    }
}

impl Pass<'_> {
    /// Gives every queue the group has not seen a next offset: its end for
    /// a group new to the topic, its beginning otherwise.
    pub(super) fn start_queues(&mut self, gt: &mut GroupTopic, queue_ids: &[i32]) {
        let brand_new = gt.queues.is_empty();
        for &queue_id in queue_ids {
            if gt.queues.contains_key(&queue_id) {
                continue;
            }
            let next = if brand_new {
                self.store.max_offset_in_queue(self.topic, queue_id)
            } else {
                self.store.min_offset_in_queue(self.topic, queue_id)
            };
            gt.queues.entry(queue_id).or_default().next = next;
            self.changed = true;
            self.started |= brand_new;
        }
    }

    fn push(&mut self, record: Bytes, queue_id: i32, queue_offset: i64, entry: Inflight) {
        self.bytes += record.len();
        self.out.push(PoppedMessage {
            record,
            queue_id,
            queue_offset,
            receipt_handle: Handle {
                seq: entry.seq,
                queue_id,
                offset: queue_offset,
                topic: self.topic,
            }
            .encode(),
            delivery_attempt: entry.attempt,
            invisible_until_ms: entry.visible_at,
        });
    }
}

/// The stored record at a queue offset, checked to be that message.
fn read_at(
    store: &MessageStore,
    topic: &str,
    queue_id: i32,
    offset: i64,
) -> Result<Bytes, &'static str> {
    let cq = store
        .queue_entry(topic, queue_id, offset)
        .ok_or("no queue entry at the offset")?;
    let physical = u64::try_from(cq.commit_log_offset).map_err(|_| "bad queue entry")?;
    let record = store
        .lookup_message(physical)
        .ok_or("CommitLog no longer holds it")?;
    match record::check(&record, false) {
        Record::Message(m)
            if m.queue_id == queue_id && m.queue_offset == offset && m.topic == topic => {}
        Record::Message(_) => return Err("queue entry points at another message"),
        _ => return Err("CommitLog record unreadable"),
    }
    Ok(record)
}

/// The `TAGS` property of a stored record.
fn tags_of(record: &[u8]) -> Option<&str> {
    match record::check(record, false) {
        Record::Message(m) => properties::find(m.properties, keys::TAGS),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use message_model::MessageToStore;

    use super::*;

    fn stored(properties: &str) -> Vec<u8> {
        let msg = MessageToStore {
            topic: "T".into(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from_static(b"x"),
            properties: properties.into(),
        };
        let mut out = Vec::new();
        record::encode(&msg, 1024, &mut out).unwrap();
        out
    }

    #[test]
    fn the_tag_of_a_record_is_its_last_tags_property() {
        assert_eq!(tags_of(&stored("KEYS\u{1}k\u{2}")), None);
        assert_eq!(tags_of(&stored("TAGS\u{1}TagA\u{2}")), Some("TagA"));
        assert_eq!(
            tags_of(&stored("TAGS\u{1}TagA\u{2}TAGS\u{1}TagB\u{2}")),
            Some("TagB")
        );
        assert_eq!(tags_of(b"not a record"), None);
    }
}
