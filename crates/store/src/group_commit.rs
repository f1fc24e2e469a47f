//! The group commit, which completes SYNC_FLUSH appends once a flush covers
//! them (or answers them when none does in time), and the [`FlushTicket`]
//! through which an append is acknowledged.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Condvar, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use crate::{
    commit_log::AppendResult,
    services::Signal,
    state::Inner,
    store::{PutOutcome, PutStatus},
};

/// Why a SYNC_FLUSH wait ended without the flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlushWait {
    /// No flush covered the offset in time.
    TimedOut,
    /// Flushing failed; the store is poisoned.
    Failed(String),
    /// The store shut down before a flush covered the offset.
    ShutDown,
}

/// What a waiter is told: durable, or why not.
pub(crate) type FlushResult = Result<(), FlushWait>;

/// Called once when a waiter's wait ends.
pub(crate) type OnFlushed = Box<dyn FnOnce(FlushResult) + Send>;

/// Most appends that may wait for a flush at once. Each holds its answer
/// (about a kilobyte); a worker that would exceed the bound waits for room,
/// which is how a stalled disk pushes back on the send queue.
pub(crate) const MAX_PENDING: usize = 16_384;

/// An append waiting for the flush that covers it.
struct Waiter {
    end: u64,
    deadline: Instant,
    done: OnFlushed,
}

#[derive(Default)]
struct GroupState {
    requested: u64,
    flushed: u64,
    /// Waiting appends in end-offset order.
    pending: VecDeque<Waiter>,
    failed: Option<String>,
    closed: bool,
    /// The flush thread sleeps in `next_request` and needs a notify.
    flusher_idle: bool,
    /// Workers waiting for room under [`MAX_PENDING`].
    blocked: usize,
    /// The store's threads are stopping: the timer thread returns.
    stopping: bool,
}

impl std::fmt::Debug for GroupState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GroupState")
            .field("requested", &self.requested)
            .field("flushed", &self.flushed)
            .field("pending", &self.pending.len())
            .field("failed", &self.failed)
            .field("closed", &self.closed)
            .finish()
    }
}

/// Counters of the group commit since the store opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Flushes that acknowledged at least one waiting append.
    pub flushes: u64,
    /// Appends acknowledged as durable.
    pub acknowledged: u64,
    /// Appends answered `FlushDiskTimeout`: not covered within
    /// `syncFlushTimeout`, a failed flush, or a shutdown before the flush.
    pub not_flushed: u64,
    /// Most appends one flush acknowledged.
    pub largest_batch: u64,
    /// Appends waiting now.
    pub pending: u64,
}

#[derive(Debug, Default)]
struct StatCounters {
    flushes: AtomicU64,
    acknowledged: AtomicU64,
    not_flushed: AtomicU64,
    largest_batch: AtomicU64,
}

/// Group commit: appends register the end offset they need durable and a
/// completion; the flush thread flushes once for every append registered
/// meanwhile and completes them in offset order; a timer thread completes
/// those that a flush did not cover within their timeout.
///
/// Completions run on the flush or timer thread (or inline on the
/// registering thread when nothing needs waiting), never under the lock.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<GroupState>,
    requests: Condvar,
    timer: Condvar,
    room: Condvar,
    stats: StatCounters,
}

impl GroupCommit {
    /// Registers an append that needs everything below `end` durable;
    /// `done` runs once: when a flush covers `end`, when `timeout` passes
    /// first, when flushing fails, or when the store shuts down. It runs at
    /// once (on this thread) if `end` is already durable or the wait cannot
    /// succeed any more. With [`MAX_PENDING`] appends already waiting, this
    /// blocks until there is room or `timeout` passes.
    pub(crate) fn register(&self, end: u64, timeout: Duration, done: OnFlushed) {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while st.pending.len() >= MAX_PENDING && st.failed.is_none() && !st.closed {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(st);
                self.stats.not_flushed.fetch_add(1, Ordering::Relaxed);
                done(Err(FlushWait::TimedOut));
                return;
            }
            st.blocked += 1;
            st = self
                .room
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            st.blocked -= 1;
        }
        let immediate = if let Some(reason) = &st.failed {
            Some(Err(FlushWait::Failed(reason.clone())))
        } else if st.flushed >= end {
            Some(Ok(()))
        } else if st.closed {
            Some(Err(FlushWait::ShutDown))
        } else {
            None
        };
        if let Some(result) = immediate {
            drop(st);
            self.count(&result, 1);
            done(result);
            return;
        }
        // Appends register in about the order they were written; walk back
        // past the few that registered early.
        let at = st
            .pending
            .iter()
            .rposition(|w| w.end <= end)
            .map_or(0, |i| i + 1);
        st.pending.insert(
            at,
            Waiter {
                end,
                deadline,
                done,
            },
        );
        st.requested = st.requested.max(end);
        if st.flusher_idle {
            st.flusher_idle = false;
            self.requests.notify_one();
        }
    }

    /// Blocks the flush thread until some append waits for an offset beyond
    /// what is flushed, or `timeout` passes. Returns the number of waiters.
    pub(crate) fn next_request(&self, timeout: Duration, signal: &Signal) -> usize {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.requested > st.flushed || signal.is_stopped() {
            return st.pending.len();
        }
        st.flusher_idle = true;
        let mut st = self
            .requests
            .wait_timeout(st, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        st.flusher_idle = false;
        st.pending.len()
    }

    /// Number of appends waiting now.
    pub(crate) fn waiters(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pending
            .len()
    }

    /// Records a flush that reached `offset` and completes, in offset order,
    /// the appends it covers.
    pub(crate) fn flushed(&self, offset: u64) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.flushed = st.flushed.max(offset);
        let covered = st.pending.iter().take_while(|w| w.end <= offset).count();
        if covered == 0 {
            return;
        }
        let ready: Vec<Waiter> = st.pending.drain(..covered).collect();
        if st.blocked > 0 {
            self.room.notify_all();
        }
        drop(st);
        self.stats.flushes.fetch_add(1, Ordering::Relaxed);
        self.stats
            .largest_batch
            .fetch_max(ready.len() as u64, Ordering::Relaxed);
        self.count(&Ok(()), ready.len());
        for w in ready {
            (w.done)(Ok(()));
        }
    }

    /// Records a failed flush: every waiter, now and later, gets the reason.
    pub(crate) fn fail(&self, reason: String) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.failed = Some(reason.clone());
        let failed: Vec<Waiter> = st.pending.drain(..).collect();
        self.room.notify_all();
        drop(st);
        if !failed.is_empty() {
            tracing::error!(
                appends = failed.len(),
                %reason,
                "flush failed; answering the appends that waited for it FLUSH_DISK_TIMEOUT"
            );
        }
        self.complete_all(failed, &Err(FlushWait::Failed(reason)));
    }

    /// Completes the appends whose wait has passed its deadline, in offset
    /// order, until [`GroupCommit::stop`] or [`GroupCommit::close`]; sleeps until the next deadline (or `idle` with
    /// nothing waiting). Runs on the store's timer thread, so that timeouts
    /// fire while the flush thread is stuck in a slow flush and when no
    /// further append arrives.
    pub(crate) fn run_timer(&self, idle: Duration, timeout_ms: u64) {
        // Timeouts come in runs when the disk stalls: log them at most once
        // a second, with how many there were.
        let mut last_log: Option<Instant> = None;
        let mut unlogged = 0usize;
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        while !st.closed && !st.stopping {
            let now = Instant::now();
            let expired = st.pending.iter().take_while(|w| w.deadline <= now).count();
            if expired > 0 {
                let late: Vec<Waiter> = st.pending.drain(..expired).collect();
                let flushed = st.flushed;
                if st.blocked > 0 {
                    self.room.notify_all();
                }
                drop(st);
                unlogged += late.len();
                if last_log.is_none_or(|at| now.duration_since(at) >= Duration::from_secs(1)) {
                    tracing::warn!(
                        appends = unlogged,
                        last_end_offset = late.last().map_or(0, |w| w.end),
                        flushed_offset = flushed,
                        timeout_ms,
                        "flush disk timeout: no flush covered these appends within syncFlushTimeout \
                         (logged at most once a second)"
                    );
                    last_log = Some(now);
                    unlogged = 0;
                }
                self.complete_all(late, &Err(FlushWait::TimedOut));
                st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            // A millisecond past the first deadline, so that the appends
            // that registered together time out together.
            let sleep = st.pending.front().map_or(idle, |w| {
                w.deadline.saturating_duration_since(now) + Duration::from_millis(1)
            });
            st = self
                .timer
                .wait_timeout(st, sleep)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Closes the group commit at shutdown: waiters covered by `flushed`
    /// (the final flush, if it succeeded) complete as durable, the others as
    /// [`FlushWait::ShutDown`]; later registrations complete at once. Stops
    /// the timer thread.
    pub(crate) fn close(&self, flushed: Option<u64>) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.closed = true;
        if let Some(offset) = flushed {
            st.flushed = st.flushed.max(offset);
        }
        let limit = st.flushed;
        let all: Vec<Waiter> = st.pending.drain(..).collect();
        self.timer.notify_all();
        self.room.notify_all();
        self.requests.notify_all();
        drop(st);
        let (durable, lost): (Vec<Waiter>, Vec<Waiter>) =
            all.into_iter().partition(|w| w.end <= limit);
        if !lost.is_empty() {
            tracing::warn!(
                appends = lost.len(),
                flushed_offset = limit,
                "store shut down before a flush covered these appends; answering FLUSH_DISK_TIMEOUT"
            );
        }
        self.complete_all(durable, &Ok(()));
        self.complete_all(lost, &Err(FlushWait::ShutDown));
    }

    fn complete_all(&self, waiters: Vec<Waiter>, result: &FlushResult) {
        self.count(result, waiters.len());
        for w in waiters {
            (w.done)(result.clone());
        }
    }

    fn count(&self, result: &FlushResult, n: usize) {
        let counter = match result {
            Ok(()) => &self.stats.acknowledged,
            Err(_) => &self.stats.not_flushed,
        };
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The counters, and the number of appends waiting now.
    pub(crate) fn stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            flushes: self.stats.flushes.load(Ordering::Relaxed),
            acknowledged: self.stats.acknowledged.load(Ordering::Relaxed),
            not_flushed: self.stats.not_flushed.load(Ordering::Relaxed),
            largest_batch: self.stats.largest_batch.load(Ordering::Relaxed),
            pending: self.waiters() as u64,
        }
    }

    /// Wakes the flush thread and stops the timer thread (for shutdown);
    /// waiting appends stay until [`GroupCommit::close`].
    pub(crate) fn stop(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .stopping = true;
        self.requests.notify_all();
        self.timer.notify_all();
    }
}

/// An accepted append whose acknowledgement may still depend on a flush.
///
/// Under ASYNC_FLUSH, and for a message whose `WAIT` property is `false`, the
/// append is acknowledged at once: [`FlushTicket::try_complete`] gives its
/// outcome, and [`FlushTicket::on_durable`] runs its completion on the calling
/// thread (no allocation, no hand-off). Under SYNC_FLUSH it is acknowledged
/// once a group commit has flushed past its end offset:
/// [`FlushTicket::on_durable`] hands the completion to the store's flush
/// thread and returns at once, so the caller can serve something else while
/// the flush runs; [`FlushTicket::wait`] blocks for the outcome instead.
///
/// The completion runs exactly once: with [`PutStatus::Ok`] when a flush
/// covered the append, or [`PutStatus::FlushDiskTimeout`] when none did
/// within `syncFlushTimeout` (fired by the store's timer thread even when no
/// further append arrives and while a flush hangs), when flushing failed, or
/// when the store shut down first. Completions of one flush run in offset
/// order on the flush thread; they must be quick (hand the answer to a
/// connection, a channel). At most 16,384 appends wait at once; a caller
/// that would exceed that blocks in [`FlushTicket::on_durable`] until there
/// is room (or its timeout passes), so a stalled disk slows the callers
/// down instead of piling up answers.
///
/// Dropping a ticket leaves the message stored; nobody is told when it
/// becomes durable.
#[must_use = "the append is acknowledged through the ticket"]
pub struct FlushTicket<'a> {
    inner: &'a Inner,
    append: AppendResult,
    wait: bool,
}

impl std::fmt::Debug for FlushTicket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushTicket")
            .field("append", &self.append)
            .field("wait", &self.wait)
            .finish()
    }
}

impl<'a> FlushTicket<'a> {
    /// A ticket for `append`; `wait` says whether its acknowledgement waits
    /// for a flush at all (SYNC_FLUSH and the message's `WAIT` property).
    pub(crate) fn new(inner: &'a Inner, append: AppendResult, wait: bool) -> Self {
        Self {
            inner,
            append,
            wait,
        }
    }

    /// Where the append landed.
    pub fn append(&self) -> &AppendResult {
        &self.append
    }

    /// Reports whether the acknowledgement waits for a flush that has not
    /// covered the append yet.
    pub fn must_wait(&self) -> bool {
        self.wait && self.inner.commit_log.files().flushed_where() < self.append.end_offset()
    }

    /// The outcome at once when no flush needs waiting for (ASYNC_FLUSH,
    /// `WAIT=false`, or already flushed); otherwise the ticket back.
    ///
    /// # Errors
    /// The ticket itself when the outcome depends on a flush still to come.
    pub fn try_complete(self) -> Result<PutOutcome, Self> {
        if self.must_wait() {
            return Err(self);
        }
        Ok(PutOutcome {
            status: PutStatus::Ok,
            append: self.append,
        })
    }

    /// Runs `on_durable` once with the outcome: at once on this thread when
    /// no flush needs waiting for, otherwise on the store's flush or timer
    /// thread (see the type's documentation).
    pub fn on_durable<F>(self, on_durable: F)
    where
        F: FnOnce(PutOutcome) + Send + 'static,
    {
        let ticket = match self.try_complete() {
            Ok(outcome) => return on_durable(outcome),
            Err(ticket) => ticket,
        };
        let FlushTicket { inner, append, .. } = ticket;
        let end = append.end_offset();
        let timeout = Duration::from_millis(inner.config.sync_flush_timeout);
        inner.group_commit.register(
            end,
            timeout,
            Box::new(move |result| {
                let status = match result {
                    Ok(()) => PutStatus::Ok,
                    Err(_) => PutStatus::FlushDiskTimeout,
                };
                on_durable(PutOutcome { status, append });
            }),
        );
    }

    /// Blocks until the outcome is known (see the type's documentation).
    pub fn wait(self) -> PutOutcome {
        let ticket = match self.try_complete() {
            Ok(outcome) => return outcome,
            Err(ticket) => ticket,
        };
        let fallback = ticket.append.clone();
        // The completion always comes (timeouts are fired by the timer
        // thread); the bound here only guards against a stuck store.
        let bound =
            Duration::from_millis(ticket.inner.config.sync_flush_timeout) + Duration::from_secs(5);
        let slot = Arc::new((Mutex::new(None::<PutOutcome>), Condvar::new()));
        let filler = Arc::clone(&slot);
        ticket.on_durable(move |outcome| {
            *filler.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
            filler.1.notify_one();
        });
        let deadline = Instant::now() + bound;
        let mut got = slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(outcome) = got.take() {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::error!(
                    offset = fallback.physical_offset,
                    "no flush outcome for a SYNC_FLUSH append; answering FLUSH_DISK_TIMEOUT"
                );
                return PutOutcome {
                    status: PutStatus::FlushDiskTimeout,
                    append: fallback,
                };
            }
            got = slot
                .1
                .wait_timeout(got, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{
        sync::{mpsc, Arc},
        thread,
    };

    type Log = mpsc::Receiver<(u64, FlushResult)>;

    /// Registers a waiter for `end` whose completion reports to the channel.
    fn register(
        gc: &GroupCommit,
        tx: &mpsc::Sender<(u64, FlushResult)>,
        end: u64,
        timeout: Duration,
    ) {
        let tx = tx.clone();
        gc.register(
            end,
            timeout,
            Box::new(move |r| {
                let _ = tx.send((end, r));
            }),
        );
    }

    fn drain(rx: &Log) -> Vec<(u64, FlushResult)> {
        rx.try_iter().collect()
    }

    #[test]
    fn a_flush_completes_the_covered_waiters_in_offset_order() {
        let gc = GroupCommit::default();
        let (tx, rx) = mpsc::channel();
        // Registered slightly out of order, as concurrent writers do.
        for end in [10, 30, 20, 40, 60, 50] {
            register(&gc, &tx, end, Duration::from_secs(60));
        }
        assert!(drain(&rx).is_empty(), "nothing completes before a flush");
        assert_eq!(gc.waiters(), 6);
        gc.flushed(35);
        assert_eq!(
            drain(&rx),
            vec![(10, Ok(())), (20, Ok(())), (30, Ok(()))],
            "exactly the covered ones, lowest offset first"
        );
        gc.flushed(60);
        assert_eq!(drain(&rx), vec![(40, Ok(())), (50, Ok(())), (60, Ok(()))]);
        let stats = gc.stats();
        assert_eq!(stats.flushes, 2);
        assert_eq!(stats.acknowledged, 6);
        assert_eq!(stats.largest_batch, 3);
        assert_eq!(stats.pending, 0);
    }

    #[test]
    fn an_offset_already_flushed_completes_on_the_registering_thread() {
        let gc = GroupCommit::default();
        gc.flushed(100);
        let (tx, rx) = mpsc::channel();
        register(&gc, &tx, 100, Duration::from_secs(60));
        assert_eq!(drain(&rx), vec![(100, Ok(()))]);
        assert_eq!(gc.waiters(), 0);
    }

    #[test]
    fn the_timer_fires_timeouts_without_any_further_flush_or_append() {
        let gc = Arc::new(GroupCommit::default());
        let timer = {
            let gc = Arc::clone(&gc);
            thread::spawn(move || gc.run_timer(Duration::from_millis(20), 20))
        };
        let (tx, rx) = mpsc::channel();
        register(&gc, &tx, 10, Duration::from_millis(20));
        register(&gc, &tx, 20, Duration::from_millis(20));
        let first = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        let second = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(first, (10, Err(FlushWait::TimedOut)));
        assert_eq!(second, (20, Err(FlushWait::TimedOut)));
        // A flush arriving afterwards finds nobody to complete twice.
        gc.flushed(20);
        assert!(drain(&rx).is_empty());
        assert_eq!(gc.stats().not_flushed, 2);
        gc.stop();
        timer.join().unwrap();
    }

    #[test]
    fn a_failed_flush_fails_every_waiter_now_and_later() {
        let gc = GroupCommit::default();
        let (tx, rx) = mpsc::channel();
        register(&gc, &tx, 10, Duration::from_secs(60));
        register(&gc, &tx, 20, Duration::from_secs(60));
        gc.fail("disk gone".into());
        let failed = Err(FlushWait::Failed("disk gone".into()));
        assert_eq!(drain(&rx), vec![(10, failed.clone()), (20, failed.clone())]);
        register(&gc, &tx, 30, Duration::from_secs(60));
        assert_eq!(drain(&rx), vec![(30, failed)]);
    }

    #[test]
    fn close_acknowledges_what_the_last_flush_covered_and_fails_the_rest() {
        let gc = GroupCommit::default();
        let (tx, rx) = mpsc::channel();
        for end in [10, 20, 30] {
            register(&gc, &tx, end, Duration::from_secs(60));
        }
        gc.close(Some(20));
        assert_eq!(
            drain(&rx),
            vec![(10, Ok(())), (20, Ok(())), (30, Err(FlushWait::ShutDown))]
        );
        register(&gc, &tx, 40, Duration::from_secs(60));
        assert_eq!(drain(&rx), vec![(40, Err(FlushWait::ShutDown))]);
    }

    #[test]
    fn a_full_group_commit_makes_the_next_registration_wait_for_room() {
        let gc = Arc::new(GroupCommit::default());
        let (tx, rx) = mpsc::channel();
        for end in 1..=MAX_PENDING as u64 {
            register(&gc, &tx, end, Duration::from_secs(60));
        }
        let extra = {
            let (gc, tx) = (Arc::clone(&gc), tx.clone());
            thread::spawn(move || register(&gc, &tx, u64::MAX, Duration::from_secs(60)))
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while gc.state.lock().unwrap().blocked == 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(gc.state.lock().unwrap().blocked, 1, "the extra one waits");
        assert_eq!(gc.waiters(), MAX_PENDING);
        gc.flushed(10);
        extra.join().unwrap();
        assert_eq!(gc.waiters(), MAX_PENDING - 10 + 1);
        assert_eq!(drain(&rx).len(), 10);
    }

    #[test]
    fn a_registration_that_finds_no_room_in_time_times_out() {
        let gc = GroupCommit::default();
        let (tx, rx) = mpsc::channel();
        for end in 1..=MAX_PENDING as u64 {
            register(&gc, &tx, end, Duration::from_secs(60));
        }
        register(&gc, &tx, u64::MAX, Duration::from_millis(1));
        assert_eq!(drain(&rx), vec![(u64::MAX, Err(FlushWait::TimedOut))]);
        assert_eq!(gc.waiters(), MAX_PENDING);
    }

    #[test]
    fn next_request_returns_once_an_append_waits() {
        let gc = Arc::new(GroupCommit::default());
        let signal = Arc::new(Signal::default());
        let flusher = {
            let (gc, signal) = (Arc::clone(&gc), Arc::clone(&signal));
            thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut seen = 0;
                while seen == 0 && Instant::now() < deadline {
                    seen = gc.next_request(Duration::from_millis(50), &signal);
                }
                seen
            })
        };
        let (tx, _rx) = mpsc::channel();
        register(&gc, &tx, 10, Duration::from_secs(60));
        assert_eq!(flusher.join().unwrap(), 1);
    }
}
