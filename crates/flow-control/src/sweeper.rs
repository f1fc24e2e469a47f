//! The fast-failure sweeper: answers busy, instead of letting them wait
//! further, the requests that can no longer be served in time.
//!
//! This is RocketMQ's `BrokerFastFailure` (spec §6.4) without its thread: the
//! broker calls [`FastFailure::sweep`] every 10 ms and answers each returned
//! task with `SYSTEM_BUSY` and the reason's remark. One sweep
//! 1. drains the send queue while the page cache is busy
//!    ([`Reason::PcBusyCleanQueue`]), then
//! 2. for every watched queue, in registration order, removes the heads that
//!    have waited at least that queue's limit ([`Reason::TimeoutCleanQueue`]).
//!
//! Limits and the on/off switch can change at run time through shared
//! references, so the admin protocol can retune a running broker.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use crate::{
    queue::{Expired, RequestQueue, Task},
    reason::Reason,
};

/// The set of queues the sweeper cleans, each with its own wait limit, and
/// the send queue it drains while the page cache is busy.
#[derive(Debug)]
pub struct FastFailure<T> {
    enabled: AtomicBool,
    send: Arc<RequestQueue<T>>,
    watched: Vec<Watched<T>>,
}

#[derive(Debug)]
struct Watched<T> {
    queue: Arc<RequestQueue<T>>,
    max_wait_nanos: AtomicU64,
}

impl<T> FastFailure<T> {
    /// An enabled sweeper that drains `send` while the page cache is busy and
    /// expires its tasks after `send_max_wait` (`waitTimeMillsInSendQueue`).
    pub fn new(send: Arc<RequestQueue<T>>, send_max_wait: Duration) -> Self {
        let mut sweeper = Self {
            enabled: AtomicBool::new(true),
            send: Arc::clone(&send),
            watched: Vec::new(),
        };
        sweeper.watch(send, send_max_wait);
        sweeper
    }

    /// Also expires the tasks of `queue` once they have waited `max_wait`
    /// (RocketMQ's `addCleanExpiredRequestQueue`). Queue names should be
    /// unique: they are how limits are changed later.
    pub fn watch(&mut self, queue: Arc<RequestQueue<T>>, max_wait: Duration) {
        self.watched.push(Watched {
            queue,
            max_wait_nanos: AtomicU64::new(nanos(max_wait)),
        });
    }

    /// Turns the sweeper on or off (`brokerFastFailureEnable`). A disabled
    /// sweeper removes nothing, not even during page-cache-busy periods.
    pub fn set_enabled(&self, enabled: bool) {
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    /// Whether sweeps remove anything.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// Changes the wait limit of every watched queue named `name`; returns
    /// whether there was one.
    #[must_use = "an unknown queue name changes nothing"]
    pub fn set_max_wait(&self, name: &str, max_wait: Duration) -> bool {
        let mut found = false;
        for w in self.watched.iter().filter(|w| w.queue.name() == name) {
            w.max_wait_nanos.store(nanos(max_wait), Ordering::Relaxed);
            found = true;
        }
        found
    }

    /// The wait limit of the watched queue named `name`.
    pub fn max_wait(&self, name: &str) -> Option<Duration> {
        self.watched
            .iter()
            .find(|w| w.queue.name() == name)
            .map(Watched::max_wait)
    }

    /// The queue drained while the page cache is busy.
    pub fn send_queue(&self) -> &Arc<RequestQueue<T>> {
        &self.send
    }

    /// Removes every task that must be answered busy now, each with the
    /// reason to answer it with. `page_cache_busy` is asked before each
    /// removal from the send queue, so the drain stops as soon as the store
    /// recovers. Removed tasks are never handed to a worker.
    pub fn sweep(
        &self,
        now: Instant,
        page_cache_busy: impl Fn() -> bool,
    ) -> Vec<(Task<T>, Reason)> {
        let mut out = Vec::new();
        if !self.is_enabled() {
            return out;
        }
        out.extend(
            self.send
                .drain_while(now, page_cache_busy)
                .into_iter()
                .map(pcbusy),
        );
        for w in &self.watched {
            out.extend(
                w.queue
                    .remove_expired(now, w.max_wait())
                    .into_iter()
                    .map(timed_out),
            );
        }
        out
    }
}

impl<T> Watched<T> {
    fn max_wait(&self) -> Duration {
        Duration::from_nanos(self.max_wait_nanos.load(Ordering::Relaxed))
    }
}

fn pcbusy<T>(e: Expired<T>) -> (Task<T>, Reason) {
    let reason = Reason::PcBusyCleanQueue {
        waited: e.waited,
        queue_len: e.queue_len,
    };
    (e.task, reason)
}

fn timed_out<T>(e: Expired<T>) -> (Task<T>, Reason) {
    let reason = Reason::TimeoutCleanQueue {
        waited: e.waited,
        queue_len: e.queue_len,
    };
    (e.task, reason)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn queues() -> (
        Arc<RequestQueue<u32>>,
        Arc<RequestQueue<u32>>,
        FastFailure<u32>,
    ) {
        let send = Arc::new(RequestQueue::new("send", 100));
        let pull = Arc::new(RequestQueue::new("pull", 100));
        let mut ff = FastFailure::new(Arc::clone(&send), ms(200));
        ff.watch(Arc::clone(&pull), ms(5000));
        (send, pull, ff)
    }

    #[test]
    fn sweep_expires_each_queue_by_its_own_limit() {
        let (send, pull, ff) = queues();
        let t0 = Instant::now();
        send.try_push(1, t0).unwrap();
        send.try_push(2, t0 + ms(100)).unwrap();
        pull.try_push(10, t0).unwrap();
        let out = ff.sweep(t0 + ms(250), || false);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0.payload, 1);
        assert_eq!(
            out[0].1,
            Reason::TimeoutCleanQueue {
                waited: ms(250),
                queue_len: 1
            }
        );
        assert_eq!(pull.len(), 1);
        let out = ff.sweep(t0 + ms(5000), || false);
        let payloads: Vec<_> = out.iter().map(|(t, _)| t.payload).collect();
        assert_eq!(payloads, [2, 10]);
        assert!(out
            .iter()
            .all(|(_, r)| matches!(r, Reason::TimeoutCleanQueue { queue_len: 0, .. })));
    }

    #[test]
    fn sweep_drains_the_send_queue_while_busy_then_expires() {
        let (send, pull, ff) = queues();
        let t0 = Instant::now();
        for i in 0..5 {
            send.try_push(i, t0 + ms(i.into())).unwrap();
        }
        pull.try_push(99, t0).unwrap();
        // Busy for the first three questions only.
        let asked = Cell::new(0);
        let busy = || {
            asked.set(asked.get() + 1);
            asked.get() <= 3
        };
        let out = ff.sweep(t0 + ms(6000), busy);
        let summary: Vec<_> = out.iter().map(|(t, r)| (t.payload, r.label())).collect();
        assert_eq!(
            summary,
            [
                (0, "pcbusy_clean_queue"),
                (1, "pcbusy_clean_queue"),
                (2, "pcbusy_clean_queue"),
                (3, "timeout_clean_queue"),
                (4, "timeout_clean_queue"),
                (99, "timeout_clean_queue"),
            ]
        );
        assert_eq!(
            out[0].1,
            Reason::PcBusyCleanQueue {
                waited: ms(6000),
                queue_len: 4
            }
        );
        assert_eq!(
            out[2].1,
            Reason::PcBusyCleanQueue {
                waited: ms(5998),
                queue_len: 2
            }
        );
        assert_eq!(
            out[3].1,
            Reason::TimeoutCleanQueue {
                waited: ms(5997),
                queue_len: 1
            }
        );
        assert!(send.is_empty() && pull.is_empty());
    }

    #[test]
    fn busy_drain_does_not_touch_other_queues() {
        let (send, pull, ff) = queues();
        let t0 = Instant::now();
        send.try_push(1, t0).unwrap();
        pull.try_push(2, t0).unwrap();
        let out = ff.sweep(t0 + ms(1), || true);
        assert_eq!(out.len(), 1);
        assert!(matches!(
            out[0].1,
            Reason::PcBusyCleanQueue { queue_len: 0, .. }
        ));
        assert_eq!(pull.len(), 1);
    }

    #[test]
    fn max_wait_changes_at_run_time_by_queue_name() {
        let (send, _pull, ff) = queues();
        let t0 = Instant::now();
        send.try_push(1, t0).unwrap();
        assert!(ff.sweep(t0 + ms(150), || false).is_empty());
        assert!(ff.set_max_wait("send", ms(100)));
        assert_eq!(ff.max_wait("send"), Some(ms(100)));
        assert_eq!(ff.sweep(t0 + ms(150), || false).len(), 1);
        assert!(!ff.set_max_wait("nonexistent", ms(1)));
        assert_eq!(ff.max_wait("nonexistent"), None);
        assert_eq!(ff.max_wait("pull"), Some(ms(5000)));
    }

    #[test]
    fn a_disabled_sweeper_removes_nothing() {
        let (send, _pull, ff) = queues();
        let t0 = Instant::now();
        send.try_push(1, t0).unwrap();
        ff.set_enabled(false);
        assert!(!ff.is_enabled());
        assert!(ff.sweep(t0 + ms(10_000), || true).is_empty());
        assert_eq!(send.len(), 1);
        ff.set_enabled(true);
        assert_eq!(ff.sweep(t0 + ms(10_000), || false).len(), 1);
    }
}
