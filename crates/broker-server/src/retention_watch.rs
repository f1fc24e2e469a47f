//! Warnings before retention deletes messages that consumer groups have
//! not consumed yet: for each CommitLog file about to go, every group whose
//! committed offset on a queue is below the file's end loses the messages
//! between the two. The broker logs one line per group and topic with the
//! count, and counts them in `sluice_retention_unconsumed_messages_total`.

use std::{
    collections::BTreeMap,
    sync::{Arc, Weak},
};

use store::{Expiring, RetentionListener};

use crate::state::BrokerState;

/// Messages of one group and topic that a deletion takes away unconsumed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Loss {
    /// Messages lost.
    pub messages: i64,
    /// Queues that lose any.
    pub queues: Vec<i32>,
}

/// What deleting the CommitLog bytes `[from, to)` takes from each group:
/// `(group, topic)` to its loss. Groups that consumed past `to` lose nothing.
pub fn unconsumed_in(state: &BrokerState, from: u64, to: u64) -> BTreeMap<(String, String), Loss> {
    let mut losses: BTreeMap<(String, String), Loss> = BTreeMap::new();
    for (topic, group, queue_id, committed) in state.offsets.entries() {
        let store = &state.store;
        let (Some(from), Some(end)) = (
            store.queue_offset_at_or_after(&topic, queue_id, committed, from),
            store.queue_offset_at_or_after(&topic, queue_id, committed, to),
        ) else {
            continue;
        };
        if end > from {
            let loss = losses.entry((group, topic)).or_default();
            loss.messages += end - from;
            loss.queues.push(queue_id);
        }
    }
    losses
}

/// The store's retention listener for `state`.
pub(crate) fn listener(state: Weak<BrokerState>) -> Arc<RetentionListener> {
    Arc::new(move |expiring: &Expiring| {
        let Some(state) = state.upgrade() else {
            return;
        };
        for ((group, topic), loss) in unconsumed_in(&state, expiring.from, expiring.to) {
            tracing::warn!(
                group,
                topic,
                queues = ?loss.queues,
                messages = loss.messages,
                file = %expiring.file.display(),
                forced = expiring.forced,
                "retention is deleting messages this consumer group has not consumed yet"
            );
            metrics::counter!(
                "sluice_retention_unconsumed_messages_total",
                "group" => group,
                "topic" => topic
            )
            .increment(u64::try_from(loss.messages).unwrap_or(0));
        }
    })
}
