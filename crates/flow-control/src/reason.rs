//! Why a request was refused: the reason, RocketMQ's remark text for it, a
//! stable metric label and the suggested client back-off.
//!
//! The remarks are byte-for-byte RocketMQ's (spec §6.3, §6.4, §6.7), so that
//! existing clients and operators' log searches keep working. The broker
//! answers every reason with `SYSTEM_BUSY`; this crate knows no wire codes.

use std::time::Duration;

use thiserror::Error;

/// The shortest back-off a busy answer suggests.
pub const MIN_RETRY_AFTER: Duration = Duration::from_millis(10);

/// The longest back-off a busy answer suggests.
pub const MAX_RETRY_AFTER: Duration = Duration::from_millis(1000);

/// The back-off suggested when the page cache is busy or the transient store
/// pool has no free buffer.
///
/// Page cache busy means the put lock has been held for more than
/// `osPageCacheBusyTimeOutMills` (1000 ms by default); a store stalled that
/// long rarely recovers within a few milliseconds, and the pool's commit
/// service frees buffers every `commitIntervalCommitLog` (200 ms).
pub const PAGE_CACHE_RETRY_AFTER: Duration = Duration::from_millis(300);

/// The back-off suggested when a queue is full.
///
/// A full queue carries no measured wait; it holds at least as much work as
/// the send queue's 200 ms limit allows, usually far more.
pub const OVERLOAD_RETRY_AFTER: Duration = Duration::from_millis(500);

/// The shortest back-off an over-quota answer suggests: the hint is the
/// refill time itself, in the whole milliseconds the header carries.
pub const MIN_QUOTA_RETRY_AFTER: Duration = Duration::from_millis(1);

/// The longest back-off an over-quota answer suggests: a bucket in debt
/// after one very large request may need longer than [`MAX_RETRY_AFTER`].
pub const MAX_QUOTA_RETRY_AFTER: Duration = Duration::from_secs(60);

/// Why a request was refused instead of being served.
///
/// `Display` gives the remark sent to the client, the same text as
/// [`Reason::remark`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Error)]
#[non_exhaustive]
pub enum Reason {
    /// The processor refused the request before queueing it: the page cache
    /// is busy or the transient store pool has no free buffer.
    #[error("[REJECTREQUEST]system busy, start flow control for a while")]
    RejectRequest,
    /// The queue was full.
    #[error("[OVERLOAD]system busy, start flow control for a while")]
    Overload {
        /// Tasks in the queue when the request arrived.
        queue_len: usize,
        /// The queue's capacity at that moment.
        capacity: usize,
    },
    /// The sweeper drained the send queue because the page cache was busy.
    #[error(
        "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, \
         period in queue: {}ms, size of queue: {queue_len}",
        waited.as_millis()
    )]
    PcBusyCleanQueue {
        /// How long the task had waited in the queue.
        waited: Duration,
        /// Tasks left in the queue right after this one was removed.
        queue_len: usize,
    },
    /// The sweeper removed the task because it had waited in the queue for
    /// at least the queue's limit.
    #[error(
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
         period in queue: {}ms, size of queue: {queue_len}",
        waited.as_millis()
    )]
    TimeoutCleanQueue {
        /// How long the task had waited in the queue.
        waited: Duration,
        /// Tasks left in the queue right after this one was removed.
        queue_len: usize,
    },
    /// The page cache was busy when the worker was about to store the
    /// message.
    #[error("[PC_SYNCHRONIZED]broker busy, start flow control for a while")]
    PcSynchronized,
    /// Sluice's early admission: the queue already holds more work than its
    /// workers can finish within the queue's limit.
    #[error(
        "[EARLY_REJECT]broker busy, start flow control for a while, \
         predicted wait: {}ms, limit: {}ms, size of queue: {queue_len}",
        predicted_wait.as_millis(),
        limit.as_millis()
    )]
    EarlyReject {
        /// The wait the request would likely have had in the queue.
        predicted_wait: Duration,
        /// The queue's wait limit.
        limit: Duration,
        /// Tasks in the queue when the request arrived.
        queue_len: usize,
    },
    /// The queue is closed because the broker is shutting down.
    #[error("[SHUTDOWN]broker is shutting down")]
    ShuttingDown,
    /// The queue's waiting requests held its byte capacity: RocketMQ's
    /// `[OVERLOAD]` answer (clients treat it alike), with the figures.
    #[error(
        "[OVERLOAD]system busy, start flow control for a while, \
         queued bytes: {queued_bytes}, limit: {capacity_bytes}"
    )]
    OverloadBytes {
        /// Bytes of the requests waiting when this one arrived.
        queued_bytes: usize,
        /// The queue's byte capacity at that moment.
        capacity_bytes: usize,
    },
    /// Sluice's quotas: the request's key (topic or client) is over its
    /// rate; the answer says when its tokens are back.
    #[error(
        "[QUOTA]broker busy, over the {} quota of {limit} {}/s, retry after {}ms",
        scope.as_str(),
        unit.as_str(),
        retry_after.as_millis()
    )]
    OverQuota {
        /// Whose quota: the topic's or the client's.
        scope: crate::quota::QuotaScope,
        /// The limit that refused it.
        unit: crate::quota::QuotaUnit,
        /// That limit, per second.
        limit: u64,
        /// When the request would be let through.
        retry_after: Duration,
    },
    /// Sluice's fair shares: the queue was full and the request's share
    /// already held its fair part of it (RocketMQ's `[OVERLOAD]`, with the
    /// share's figures).
    #[error(
        "[OVERLOAD]system busy, start flow control for a while, \
         share full: {share_len} of {share_capacity} queued, shares waiting: {shares}"
    )]
    ShareFull {
        /// Tasks of the request's share in the queue.
        share_len: usize,
        /// The share's fair part of the capacity at that moment.
        share_capacity: usize,
        /// Shares with waiting tasks, this one included.
        shares: usize,
    },
    /// Sluice's adaptive admission: the request's share has had a standing
    /// queue (sojourns above the target for an interval) and the request
    /// would wait longer than the target: the share's oldest request has,
    /// or the work ahead of it would take longer.
    #[error(
        "[EARLY_REJECT]broker busy, start flow control for a while, \
         standing queue: period in queue: {}ms, predicted wait: {}ms, target: {}ms, \
         size of share: {share_len}",
        head_wait.as_millis(),
        predicted_wait.as_millis(),
        target.as_millis()
    )]
    StandingQueue {
        /// How long the share's oldest request had waited.
        head_wait: Duration,
        /// The wait predicted for the request.
        predicted_wait: Duration,
        /// The sojourn target.
        target: Duration,
        /// Requests of the share in the queue.
        share_len: usize,
    },
}

impl Reason {
    /// Every metric label, in a fixed order (the order of [`Reason`]'s
    /// variants).
    pub const LABELS: [&'static str; 11] = [
        "reject_request",
        "overload",
        "pcbusy_clean_queue",
        "timeout_clean_queue",
        "pc_synchronized",
        "early_reject",
        "shutting_down",
        "overload_bytes",
        "over_quota",
        "share_full",
        "standing_queue",
    ];

    /// The remark RocketMQ sends with this rejection.
    pub fn remark(&self) -> String {
        self.to_string()
    }

    /// A stable, lowercase label for metrics, one of [`Reason::LABELS`].
    pub fn label(&self) -> &'static str {
        Self::LABELS[self.index()]
    }

    /// The back-off suggested to the client (Sluice's retry hint).
    ///
    /// | reason | suggestion |
    /// |---|---|
    /// | `TimeoutCleanQueue` | the measured wait |
    /// | `PcBusyCleanQueue` | the measured wait, at least [`PAGE_CACHE_RETRY_AFTER`] |
    /// | `EarlyReject` | the predicted wait |
    /// | `RejectRequest`, `PcSynchronized` | [`PAGE_CACHE_RETRY_AFTER`] |
    /// | `Overload`, `OverloadBytes` | [`OVERLOAD_RETRY_AFTER`] |
    /// | `ShuttingDown` | [`MAX_RETRY_AFTER`] |
    /// | `OverQuota` | when the tokens are back, from [`MIN_QUOTA_RETRY_AFTER`] up to [`MAX_QUOTA_RETRY_AFTER`] |
    /// | `ShareFull` | [`OVERLOAD_RETRY_AFTER`] |
    /// | `StandingQueue` | the oldest request's wait or the predicted one, the longer |
    ///
    /// A measured or predicted wait is how long the queue currently makes
    /// requests wait, so retrying sooner would likely meet the same queue.
    /// Every suggestion but a quota's lies in
    /// [`MIN_RETRY_AFTER`]`..=`[`MAX_RETRY_AFTER`].
    pub fn retry_after(&self) -> Duration {
        let hint = match *self {
            Reason::TimeoutCleanQueue { waited, .. } => waited,
            Reason::PcBusyCleanQueue { waited, .. } => waited.max(PAGE_CACHE_RETRY_AFTER),
            Reason::EarlyReject { predicted_wait, .. } => predicted_wait,
            Reason::RejectRequest | Reason::PcSynchronized => PAGE_CACHE_RETRY_AFTER,
            Reason::Overload { .. } | Reason::OverloadBytes { .. } | Reason::ShareFull { .. } => {
                OVERLOAD_RETRY_AFTER
            }
            Reason::StandingQueue {
                head_wait,
                predicted_wait,
                ..
            } => head_wait.max(predicted_wait),
            Reason::ShuttingDown => MAX_RETRY_AFTER,
            Reason::OverQuota { retry_after, .. } => {
                return retry_after.clamp(MIN_QUOTA_RETRY_AFTER, MAX_QUOTA_RETRY_AFTER);
            }
        };
        hint.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER)
    }

    /// How long the refused request had waited in its queue before this
    /// answer: the wait of the clean-queue answers, zero for refusals made
    /// on arrival.
    pub fn queue_wait(&self) -> Duration {
        match *self {
            Reason::TimeoutCleanQueue { waited, .. } | Reason::PcBusyCleanQueue { waited, .. } => {
                waited
            }
            _ => Duration::ZERO,
        }
    }

    /// The position of this reason's variant in [`Reason::LABELS`].
    pub fn index(&self) -> usize {
        match self {
            Reason::RejectRequest => 0,
            Reason::Overload { .. } => 1,
            Reason::PcBusyCleanQueue { .. } => 2,
            Reason::TimeoutCleanQueue { .. } => 3,
            Reason::PcSynchronized => 4,
            Reason::EarlyReject { .. } => 5,
            Reason::ShuttingDown => 6,
            Reason::OverloadBytes { .. } => 7,
            Reason::OverQuota { .. } => 8,
            Reason::ShareFull { .. } => 9,
            Reason::StandingQueue { .. } => 10,
        }
    }
}

/// A request the queue refused, handed back with the reason so that the
/// caller can answer it.
#[derive(Debug, Error)]
#[error("{reason}")]
pub struct Rejected<T> {
    /// The refused request, unchanged.
    pub payload: T,
    /// Why it was refused.
    pub reason: Reason,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn only_the_clean_queue_answers_come_after_a_wait() {
        let waited = ms(250);
        assert_eq!(
            Reason::TimeoutCleanQueue {
                waited,
                queue_len: 3
            }
            .queue_wait(),
            waited
        );
        assert_eq!(
            Reason::PcBusyCleanQueue {
                waited,
                queue_len: 0
            }
            .queue_wait(),
            waited
        );
        for refused_on_arrival in [
            Reason::RejectRequest,
            Reason::Overload {
                queue_len: 1,
                capacity: 1,
            },
            Reason::EarlyReject {
                predicted_wait: waited,
                limit: ms(200),
                queue_len: 9,
            },
        ] {
            assert_eq!(refused_on_arrival.queue_wait(), Duration::ZERO);
        }
    }

    #[test]
    fn remarks_match_rocketmq_exactly() {
        assert_eq!(
            Reason::RejectRequest.remark(),
            "[REJECTREQUEST]system busy, start flow control for a while"
        );
        assert_eq!(
            Reason::Overload {
                queue_len: 10000,
                capacity: 10000
            }
            .remark(),
            "[OVERLOAD]system busy, start flow control for a while"
        );
        assert_eq!(
            Reason::PcBusyCleanQueue {
                waited: Duration::from_micros(1_234_900),
                queue_len: 7
            }
            .remark(),
            "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, \
             period in queue: 1234ms, size of queue: 7"
        );
        assert_eq!(
            Reason::TimeoutCleanQueue {
                waited: ms(205),
                queue_len: 17
            }
            .remark(),
            "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
             period in queue: 205ms, size of queue: 17"
        );
        assert_eq!(
            Reason::PcSynchronized.remark(),
            "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
        );
        assert_eq!(
            Reason::EarlyReject {
                predicted_wait: ms(350),
                limit: ms(200),
                queue_len: 4200
            }
            .remark(),
            "[EARLY_REJECT]broker busy, start flow control for a while, \
             predicted wait: 350ms, limit: 200ms, size of queue: 4200"
        );
        assert_eq!(
            Reason::ShuttingDown.remark(),
            "[SHUTDOWN]broker is shutting down"
        );
        assert_eq!(
            Reason::OverloadBytes {
                queued_bytes: 268_000_000,
                capacity_bytes: 268_435_456
            }
            .remark(),
            "[OVERLOAD]system busy, start flow control for a while, \
             queued bytes: 268000000, limit: 268435456"
        );
        assert_eq!(
            Reason::ShareFull {
                share_len: 5000,
                share_capacity: 3333,
                shares: 3
            }
            .remark(),
            "[OVERLOAD]system busy, start flow control for a while, \
             share full: 5000 of 3333 queued, shares waiting: 3"
        );
        let standing = Reason::StandingQueue {
            head_wait: Duration::from_micros(7_900),
            predicted_wait: ms(3),
            target: ms(5),
            share_len: 412,
        };
        assert_eq!(
            standing.remark(),
            "[EARLY_REJECT]broker busy, start flow control for a while, \
             standing queue: period in queue: 7ms, predicted wait: 3ms, target: 5ms, \
             size of share: 412"
        );
        assert_eq!(
            standing.retry_after(),
            MIN_RETRY_AFTER,
            "7.9 ms, clamped up"
        );
    }

    #[test]
    fn display_is_the_remark() {
        let r = Reason::TimeoutCleanQueue {
            waited: ms(401),
            queue_len: 3,
        };
        assert_eq!(r.to_string(), r.remark());
        let rejected = Rejected {
            payload: 9u32,
            reason: r,
        };
        assert_eq!(rejected.to_string(), r.remark());
    }

    #[test]
    fn labels_are_stable_and_distinct() {
        let all = [
            Reason::RejectRequest,
            Reason::Overload {
                queue_len: 0,
                capacity: 0,
            },
            Reason::PcBusyCleanQueue {
                waited: ms(0),
                queue_len: 0,
            },
            Reason::TimeoutCleanQueue {
                waited: ms(0),
                queue_len: 0,
            },
            Reason::PcSynchronized,
            Reason::EarlyReject {
                predicted_wait: ms(0),
                limit: ms(0),
                queue_len: 0,
            },
            Reason::ShuttingDown,
            Reason::OverloadBytes {
                queued_bytes: 0,
                capacity_bytes: 0,
            },
            Reason::OverQuota {
                scope: crate::quota::QuotaScope::Client,
                unit: crate::quota::QuotaUnit::Bytes,
                limit: 1,
                retry_after: ms(1),
            },
            Reason::ShareFull {
                share_len: 0,
                share_capacity: 0,
                shares: 0,
            },
            Reason::StandingQueue {
                head_wait: ms(0),
                predicted_wait: ms(0),
                target: ms(0),
                share_len: 0,
            },
        ];
        let labels: Vec<_> = all.iter().map(Reason::label).collect();
        assert_eq!(
            labels,
            [
                "reject_request",
                "overload",
                "pcbusy_clean_queue",
                "timeout_clean_queue",
                "pc_synchronized",
                "early_reject",
                "shutting_down",
                "overload_bytes",
                "over_quota",
                "share_full",
                "standing_queue"
            ]
        );
        assert_eq!(labels, Reason::LABELS);
    }

    #[test]
    fn retry_hint_follows_the_measured_or_predicted_wait() {
        let timeout = Reason::TimeoutCleanQueue {
            waited: ms(230),
            queue_len: 1,
        };
        assert_eq!(timeout.retry_after(), ms(230));
        let early = Reason::EarlyReject {
            predicted_wait: ms(450),
            limit: ms(200),
            queue_len: 9,
        };
        assert_eq!(early.retry_after(), ms(450));
    }

    #[test]
    fn retry_hint_is_clamped_to_its_range() {
        let tiny = Reason::TimeoutCleanQueue {
            waited: Duration::from_micros(5),
            queue_len: 1,
        };
        assert_eq!(tiny.retry_after(), MIN_RETRY_AFTER);
        let huge = Reason::TimeoutCleanQueue {
            waited: Duration::from_secs(31),
            queue_len: 1,
        };
        assert_eq!(huge.retry_after(), MAX_RETRY_AFTER);
        let pcbusy = Reason::PcBusyCleanQueue {
            waited: ms(5),
            queue_len: 1,
        };
        assert_eq!(pcbusy.retry_after(), PAGE_CACHE_RETRY_AFTER);
    }

    #[test]
    fn page_cache_and_overload_hints_are_fixed() {
        assert_eq!(Reason::RejectRequest.retry_after(), PAGE_CACHE_RETRY_AFTER);
        assert_eq!(Reason::PcSynchronized.retry_after(), PAGE_CACHE_RETRY_AFTER);
        let overload = Reason::Overload {
            queue_len: 5,
            capacity: 5,
        };
        assert_eq!(overload.retry_after(), OVERLOAD_RETRY_AFTER);
        assert_eq!(Reason::ShuttingDown.retry_after(), MAX_RETRY_AFTER);
        let quota = |retry_after| Reason::OverQuota {
            scope: crate::quota::QuotaScope::Topic,
            unit: crate::quota::QuotaUnit::Messages,
            limit: 100,
            retry_after,
        };
        assert_eq!(quota(ms(2500)).retry_after(), ms(2500), "not capped at 1 s");
        assert_eq!(quota(Duration::ZERO).retry_after(), MIN_QUOTA_RETRY_AFTER);
        assert_eq!(
            quota(ms(5)).retry_after(),
            ms(5),
            "a refill sooner than 10 ms"
        );
        assert_eq!(
            quota(Duration::from_secs(600)).retry_after(),
            MAX_QUOTA_RETRY_AFTER
        );
        assert_eq!(
            quota(ms(37)).remark(),
            "[QUOTA]broker busy, over the topic quota of 100 messages/s, retry after 37ms"
        );
    }
}
