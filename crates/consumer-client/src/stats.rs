//! Counters of a push consumer.

use std::sync::atomic::{AtomicU64, Ordering};

/// A snapshot of a push consumer's counters since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerStats {
    /// Messages pulled.
    pub pulled: u64,
    /// Messages the handler accepted.
    pub consumed: u64,
    /// Messages the handler failed (each failure counts).
    pub retried: u64,
    /// Failed messages sent back to the broker, to come back later through
    /// the group's retry topic (or go to its dead-letter topic).
    pub sent_back: u64,
    /// Broadcast messages given up after `maxReconsumeTimes` failures
    /// (broadcasting has no retry topic).
    pub dropped: u64,
    /// Times a queue's pulling paused because its cache was over a threshold.
    pub flow_control_pauses: u64,
    /// Pulls that failed.
    pub pull_errors: u64,
    /// Rebalances that changed the owned queues.
    pub rebalances: u64,
    /// Times a broker said the group's membership changed.
    pub membership_notices: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub pulled: AtomicU64,
    pub consumed: AtomicU64,
    pub retried: AtomicU64,
    pub sent_back: AtomicU64,
    pub dropped: AtomicU64,
    pub flow_control_pauses: AtomicU64,
    pub pull_errors: AtomicU64,
    pub rebalances: AtomicU64,
    pub membership_notices: AtomicU64,
}

impl Counters {
    pub(crate) fn add(counter: &AtomicU64, n: usize) -> u64 {
        counter.fetch_add(n as u64, Ordering::Relaxed) + n as u64
    }

    pub(crate) fn snapshot(&self) -> ConsumerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ConsumerStats {
            pulled: get(&self.pulled),
            consumed: get(&self.consumed),
            retried: get(&self.retried),
            sent_back: get(&self.sent_back),
            dropped: get(&self.dropped),
            flow_control_pauses: get(&self.flow_control_pauses),
            pull_errors: get(&self.pull_errors),
            rebalances: get(&self.rebalances),
            membership_notices: get(&self.membership_notices),
        }
    }
}
