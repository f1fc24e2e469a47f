//! Counts of accepted, completed and rejected requests, the last by reason,
//! for "why is this broker busy" answers.
//!
//! Every update is one relaxed atomic add: no lock on the hot path. A
//! snapshot reads each counter separately, so under load its figures may be
//! a few updates apart from one another.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::reason::Reason;

/// Cheap, shareable counters of flow-control outcomes.
#[derive(Debug, Default)]
pub struct Counters {
    accepted: AtomicU64,
    completed: AtomicU64,
    served_inline: AtomicU64,
    rejected: [AtomicU64; Reason::LABELS.len()],
}

/// The counters' values at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountersSnapshot {
    /// Requests admitted to a queue.
    pub accepted: u64,
    /// Requests a worker finished serving.
    pub completed: u64,
    /// Of the accepted and completed requests, those served on the thread
    /// that read them, with an idle worker's turn.
    pub served_inline: u64,
    /// Rejections by reason label, one entry per label in
    /// [`Reason::LABELS`] order, zeros included.
    pub rejected: Vec<(&'static str, u64)>,
}

impl Counters {
    /// All counters at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one request admitted to a queue.
    pub fn record_accepted(&self) {
        self.accepted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request a worker finished serving.
    pub fn record_completed(&self) {
        self.completed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one request served on the thread that read it (it is also
    /// counted accepted and completed).
    pub fn record_served_inline(&self) {
        self.served_inline.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one rejection under its reason's label.
    pub fn record_rejected(&self, reason: &Reason) {
        self.rejected[reason.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Rejections counted under `label` (zero for an unknown label).
    pub fn rejected(&self, label: &str) -> u64 {
        Reason::LABELS
            .iter()
            .position(|l| *l == label)
            .map_or(0, |i| self.rejected[i].load(Ordering::Relaxed))
    }

    /// Current values of every counter.
    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            accepted: self.accepted.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            served_inline: self.served_inline.load(Ordering::Relaxed),
            rejected: Reason::LABELS
                .iter()
                .zip(&self.rejected)
                .map(|(label, n)| (*label, n.load(Ordering::Relaxed)))
                .collect(),
        }
    }
}

impl CountersSnapshot {
    /// Total rejections over every reason.
    pub fn rejected_total(&self) -> u64 {
        self.rejected.iter().map(|(_, n)| n).sum()
    }
}

#[cfg(test)]
mod tests {
    use std::{sync::Arc, thread, time::Duration};

    use super::*;

    #[test]
    fn rejections_are_counted_by_label() {
        let c = Counters::new();
        c.record_rejected(&Reason::RejectRequest);
        c.record_rejected(&Reason::TimeoutCleanQueue {
            waited: Duration::from_millis(201),
            queue_len: 3,
        });
        c.record_rejected(&Reason::TimeoutCleanQueue {
            waited: Duration::from_millis(250),
            queue_len: 2,
        });
        c.record_accepted();
        c.record_accepted();
        c.record_completed();
        assert_eq!(c.rejected("timeout_clean_queue"), 2);
        assert_eq!(c.rejected("reject_request"), 1);
        assert_eq!(c.rejected("overload"), 0);
        assert_eq!(c.rejected("no_such_label"), 0);
        let s = c.snapshot();
        assert_eq!(s.accepted, 2);
        assert_eq!(s.completed, 1);
        assert_eq!(s.rejected_total(), 3);
        assert_eq!(s.rejected.len(), Reason::LABELS.len());
        assert_eq!(s.rejected[0], ("reject_request", 1));
        assert_eq!(s.rejected[3], ("timeout_clean_queue", 2));
    }

    #[test]
    fn counts_from_many_threads_all_arrive() {
        let c = Arc::new(Counters::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    for _ in 0..10_000 {
                        c.record_accepted();
                        c.record_rejected(&Reason::PcSynchronized);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = c.snapshot();
        assert_eq!(s.accepted, 40_000);
        assert_eq!(c.rejected("pc_synchronized"), 40_000);
    }
}
