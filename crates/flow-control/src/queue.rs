//! A bounded queue of requests, each stamped with the instant it arrived,
//! shared by the I/O side that pushes and the worker threads that pop.
//!
//! Inside, each share (a key the caller gives: a topic, a client, a
//! consumer group) has its own FIFO, and workers take from the shares in
//! deficit round robin ([`crate::share`]). Pushed without a key, every task
//! goes to one share and the queue is RocketMQ's plain FIFO.
//!
//! # Invariants
//! - Every pushed task leaves the queue exactly once: popped by a worker,
//!   removed by the sweeper ([`RequestQueue::remove_expired`],
//!   [`RequestQueue::drain_while`]) or drained. All of them take the same
//!   lock, so a task the sweeper removed is never handed to a worker.
//! - Tasks of one share leave in arrival order; the sweeper only ever
//!   removes a share's head.
//! - With one share the queue holds at most `capacity` tasks. With several,
//!   a share is refused once it holds its fair part (`capacity / shares
//!   waiting`) while the queue is at capacity, so a flooding share cannot
//!   lock the others out; and every share is refused once the queue holds
//!   twice `capacity`. Bytes are bounded the same way by the byte capacity,
//!   except that a task alone in its share is always taken.
//! - Shrinking the capacity never drops a queued task; it only refuses new
//!   ones while the queue is over the new capacity.
//! - The queue's byte count is the sum of its tasks' sizes: every task that
//!   leaves takes its size with it.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Condvar, Mutex, MutexGuard, PoisonError,
    },
    time::{Duration, Instant},
};

pub use crate::share::Task;
use crate::{
    estimator::ServiceTimeEstimator,
    reason::{Reason, Rejected},
    share::{ShareFigures, Shares},
    sojourn::SojournControl,
};

/// How many keys get a share of their own unless
/// [`RequestQueue::set_max_shares`] says otherwise.
pub const DEFAULT_MAX_SHARES: usize = 64;

/// A task taken off the queue by the sweeper, with the figures its busy
/// answer reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expired<T> {
    /// The removed task.
    pub task: Task<T>,
    /// How long it had waited in the queue.
    pub waited: Duration,
    /// Tasks left in the queue right after its removal.
    pub queue_len: usize,
}

/// A bounded, thread-safe queue of time-stamped tasks in fair shares, with
/// an estimate of how long its tasks take to serve.
#[derive(Debug)]
pub struct RequestQueue<T> {
    name: &'static str,
    capacity: AtomicUsize,
    capacity_bytes: AtomicUsize,
    workers: AtomicUsize,
    service: ServiceTimeEstimator,
    /// Adaptive admission's target in nanoseconds; 0 means off.
    sojourn_target: AtomicU64,
    sojourn_interval: AtomicU64,
    state: Mutex<State<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct State<T> {
    shares: Shares<T>,
    closed: bool,
    /// Poppers blocked on `ready`. A push only notifies when there is one,
    /// because a condvar notification is a system call even with no waiter.
    waiting: usize,
    /// Turns of idle workers claimed by callers serving a task themselves:
    /// that many of the `waiting` workers stay waiting while the turns are
    /// held, so tasks served by workers and by callers together never
    /// outnumber the workers.
    claimed: usize,
}

/// An idle worker's turn, claimed by a caller that serves one task on its
/// own thread instead of queueing it ([`RequestQueue::try_claim_idle`]);
/// given back when dropped.
#[derive(Debug)]
pub struct IdleTurn<'q, T> {
    queue: &'q RequestQueue<T>,
}

impl<T> Drop for IdleTurn<'_, T> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.claimed -= 1;
        // A task may have waited for this worker.
        let wake = state.shares.len > 0 && state.waiting > state.claimed;
        drop(state);
        if wake {
            self.queue.ready.notify_one();
        }
    }
}

/// Where a task goes and what admission applies to it.
#[derive(Debug, Clone, Copy, Default)]
pub struct Admission<'a> {
    /// The share's key; empty for the overflow share.
    pub share: &'a str,
    /// The task's size in bytes, counted against the byte capacity.
    pub bytes: usize,
    /// Early admission's wait limit, when it is on.
    pub max_wait: Option<Duration>,
}

impl<T> RequestQueue<T> {
    /// An empty, open queue holding at most `capacity` tasks, served by one
    /// worker until [`RequestQueue::set_workers`] says otherwise, without
    /// adaptive admission until [`RequestQueue::set_sojourn_control`].
    pub fn new(name: &'static str, capacity: usize) -> Self {
        Self {
            name,
            capacity: AtomicUsize::new(capacity),
            capacity_bytes: AtomicUsize::new(usize::MAX),
            workers: AtomicUsize::new(1),
            service: ServiceTimeEstimator::new(),
            sojourn_target: AtomicU64::new(0),
            sojourn_interval: AtomicU64::new(0),
            state: Mutex::new(State {
                shares: Shares::new(DEFAULT_MAX_SHARES),
                closed: false,
                waiting: 0,
                claimed: 0,
            }),
            ready: Condvar::new(),
        }
    }

    /// The queue's name, for metrics and logs.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Tasks waiting now.
    pub fn len(&self) -> usize {
        self.lock().shares.len
    }

    /// Whether no task is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most tasks the queue accepts (with one share waiting).
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Bytes of the tasks waiting now (as given when pushed).
    pub fn bytes(&self) -> usize {
        self.lock().shares.bytes
    }

    /// The most bytes of waiting tasks the queue accepts (unbounded unless set).
    pub fn capacity_bytes(&self) -> usize {
        self.capacity_bytes.load(Ordering::Relaxed)
    }

    /// Changes the byte capacity at run time; like [`RequestQueue::set_capacity`]
    /// it never drops a queued task.
    pub fn set_capacity_bytes(&self, bytes: usize) {
        self.capacity_bytes.store(bytes, Ordering::Relaxed);
    }

    /// Changes the capacity at run time. Tasks already queued stay queued
    /// even when more than the new capacity; new ones are refused until the
    /// queue is below it.
    pub fn set_capacity(&self, capacity: usize) {
        self.capacity.store(capacity, Ordering::Relaxed);
    }

    /// The number of worker threads serving the queue, used to predict waits.
    pub fn workers(&self) -> usize {
        self.workers.load(Ordering::Relaxed)
    }

    /// Sets the number of worker threads serving the queue. Zero counts as
    /// one in predictions.
    pub fn set_workers(&self, workers: usize) {
        self.workers.store(workers, Ordering::Relaxed);
    }

    /// Turns adaptive admission ([`crate::sojourn`]) on with these
    /// parameters, or off with `None`. Shares keep their state across a
    /// change of parameters.
    pub fn set_sojourn_control(&self, control: Option<SojournControl>) {
        let (target, interval) = control.map_or((0, 0), |c| (nanos(c.target), nanos(c.interval)));
        self.sojourn_interval.store(interval, Ordering::Relaxed);
        self.sojourn_target.store(target, Ordering::Relaxed);
    }

    /// Adaptive admission's parameters, `None` when it is off.
    pub fn sojourn_control(&self) -> Option<SojournControl> {
        match self.sojourn_target.load(Ordering::Relaxed) {
            0 => None,
            target => Some(SojournControl {
                target: Duration::from_nanos(target),
                interval: Duration::from_nanos(self.sojourn_interval.load(Ordering::Relaxed)),
            }),
        }
    }

    /// Sets how many keys get a share of their own; the others go to the
    /// overflow share. Shares already made are kept.
    pub fn set_max_shares(&self, max_shares: usize) {
        self.lock().shares.max_shares = max_shares;
    }

    /// Sets the weights of share keys (tasks per round; missing keys weigh
    /// 1), for the shares now and later.
    pub fn set_share_weights(&self, weights: HashMap<Arc<str>, u32>) {
        self.lock().shares.set_weights(weights);
    }

    /// The figures of every share with a key of its own, and of the
    /// overflow share, at `now`.
    pub fn shares(&self, now: Instant) -> Vec<ShareFigures> {
        let control = self.sojourn_control();
        self.lock()
            .shares
            .figures(now, |s| control.is_some() && s.is_shedding(now))
    }

    /// Records how long a worker took to serve one task; see
    /// [`crate::estimator`] for how samples are averaged.
    pub fn record_service_time(&self, d: Duration) {
        self.service.record(d);
    }

    /// The recent average service time, or `None` before any was recorded.
    pub fn avg_service_time(&self) -> Option<Duration> {
        self.service.average()
    }

    /// The wait a task pushed now could expect, or `None` before any service
    /// time was recorded.
    pub fn predicted_wait(&self) -> Option<Duration> {
        self.service.predict_wait(self.len(), self.workers())
    }

    /// Appends a task that arrived at `now`.
    ///
    /// # Errors
    /// Hands the payload back with [`Reason::ShuttingDown`] once the queue is
    /// closed, or [`Reason::Overload`] when it holds `capacity` tasks or more.
    pub fn try_push(&self, payload: T, now: Instant) -> Result<(), Rejected<T>> {
        self.push(payload, now, Admission::default())
    }

    /// Like [`RequestQueue::try_push`], but when `early` is set also refuses a
    /// task whose predicted wait (`queue length * average service time /
    /// workers`) exceeds `max_wait`: it would only time out in the queue.
    /// Without a recorded service time nothing is refused early.
    ///
    /// # Errors
    /// As [`RequestQueue::try_push`], plus [`Reason::EarlyReject`]. A full
    /// queue reports [`Reason::Overload`] even when early rejection applies.
    pub fn try_push_with_admission(
        &self,
        payload: T,
        now: Instant,
        max_wait: Duration,
        early: bool,
    ) -> Result<(), Rejected<T>> {
        let admission = Admission {
            max_wait: early.then_some(max_wait),
            ..Admission::default()
        };
        self.push(payload, now, admission)
    }

    /// Like [`RequestQueue::try_push_with_admission`] (`max_wait` set means
    /// early admission is on) for a task of `bytes` bytes, which is also
    /// refused when it would take the queue's bytes past its byte capacity
    /// (a task alone in the queue is always taken).
    ///
    /// # Errors
    /// As [`RequestQueue::try_push_with_admission`], plus
    /// [`Reason::OverloadBytes`].
    pub fn try_push_sized(
        &self,
        payload: T,
        bytes: usize,
        now: Instant,
        max_wait: Option<Duration>,
    ) -> Result<(), Rejected<T>> {
        let admission = Admission {
            bytes,
            max_wait,
            ..Admission::default()
        };
        self.push(payload, now, admission)
    }

    /// Appends a task that arrived at `now` to the share `admission.share`,
    /// unless admission refuses it. In this order: a closed queue; a full
    /// queue, or a full share while the queue is full ([`Reason::Overload`],
    /// [`Reason::ShareFull`]); the byte capacity, the same way; adaptive
    /// admission while the share is shedding ([`Reason::StandingQueue`]);
    /// early admission, whose predicted wait counts the tasks the round
    /// robin serves before this one ([`Reason::EarlyReject`]).
    ///
    /// # Errors
    /// The refused payload with its reason.
    pub fn push(
        &self,
        payload: T,
        now: Instant,
        admission: Admission<'_>,
    ) -> Result<(), Rejected<T>> {
        self.push_with(payload, now, admission, |_| None)
    }

    /// Like [`RequestQueue::push`], with the share's key read from the
    /// payload by `share_of` when it gives one (`admission.share`
    /// otherwise), so that a key the payload holds needs no copy.
    ///
    /// # Errors
    /// As [`RequestQueue::push`].
    pub fn push_with(
        &self,
        payload: T,
        now: Instant,
        admission: Admission<'_>,
        share_of: impl FnOnce(&T) -> Option<&str>,
    ) -> Result<(), Rejected<T>> {
        let mut state = self.lock();
        let slot = state
            .shares
            .slot_for(share_of(&payload).unwrap_or(admission.share));
        if let Some(reason) = self.refusal(&state, slot, &admission, now) {
            return Err(Rejected { payload, reason });
        }
        state.shares.push(
            slot,
            Task {
                payload,
                arrived: now,
                bytes: admission.bytes,
            },
        );
        let wake = state.waiting > state.claimed;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    fn refusal(
        &self,
        state: &State<T>,
        slot: usize,
        a: &Admission<'_>,
        now: Instant,
    ) -> Option<Reason> {
        if state.closed {
            return Some(Reason::ShuttingDown);
        }
        let shares = &state.shares;
        let share = shares.share(slot);
        let (queue_len, share_len) = (shares.len, share.tasks.len());
        // Shares waiting once this task is in.
        let waiting = shares.active() + usize::from(share_len == 0);
        let capacity = self.capacity();
        if queue_len >= capacity {
            let share_capacity = (capacity / waiting).max(1);
            if waiting == 1 {
                return Some(Reason::Overload {
                    queue_len,
                    capacity,
                });
            }
            // Shares that joined one after the other each got their fair
            // part of a full queue; twice the capacity bounds the sum.
            if share_len >= share_capacity || queue_len >= capacity.saturating_mul(2) {
                return Some(Reason::ShareFull {
                    share_len,
                    share_capacity,
                    shares: waiting,
                });
            }
        }
        let capacity_bytes = self.capacity_bytes();
        // One task alone in its share is always accepted, however large: the
        // frame limit bounds it, and refusing it would refuse it forever.
        let bytes_after = shares.bytes.saturating_add(a.bytes);
        if a.bytes > 0
            && share_len > 0
            && bytes_after > capacity_bytes
            && (waiting == 1
                || share.bytes.saturating_add(a.bytes) > capacity_bytes / waiting
                || bytes_after > capacity_bytes.saturating_mul(2))
        {
            return Some(Reason::OverloadBytes {
                queued_bytes: shares.bytes,
                capacity_bytes,
            });
        }
        let control = self.sojourn_control();
        if control.is_none() && a.max_wait.is_none() {
            return None;
        }
        // Under round robin a newcomer waits for its share's tasks and, for
        // each of them, a turn of every other waiting share.
        let ahead = queue_len.min((share_len + 1).saturating_mul(waiting));
        let predicted_wait = self.service.predict_wait(ahead, self.workers());
        if let Some(control) = control {
            let head_wait = share.head_wait(now);
            if share
                .sojourn
                .refuses(&control, head_wait, predicted_wait, now)
            {
                return Some(Reason::StandingQueue {
                    head_wait: head_wait.unwrap_or_default(),
                    predicted_wait: predicted_wait.unwrap_or_default(),
                    target: control.target,
                    share_len,
                });
            }
        }
        let limit = a.max_wait?;
        let predicted_wait = predicted_wait?;
        (predicted_wait > limit).then_some(Reason::EarlyReject {
            predicted_wait,
            limit,
            queue_len,
        })
    }

    /// Workers waiting for work now, less the turns claimed from them.
    pub fn idle_workers(&self) -> usize {
        let state = self.lock();
        state.waiting.saturating_sub(state.claimed)
    }

    /// Claims the turn of an idle worker, so that the caller serves its
    /// task itself with no wait in the queue: given only while the queue
    /// is open and empty and more workers wait for work than turns are
    /// already claimed. That worker keeps waiting until the turn is given
    /// back (dropped), however many tasks arrive meanwhile. Otherwise
    /// `None`, and the task goes through [`RequestQueue::push`] as usual.
    pub fn try_claim_idle(&self) -> Option<IdleTurn<'_, T>> {
        let mut state = self.lock();
        if state.closed || state.shares.len > 0 || state.waiting <= state.claimed {
            return None;
        }
        state.claimed += 1;
        Some(IdleTurn { queue: self })
    }

    /// Takes the next task, waiting up to `timeout` for one to arrive.
    ///
    /// Returns `None` when the timeout passes with the queue empty, or when
    /// the queue is closed and empty. A closed queue still hands out the
    /// tasks it holds.
    pub fn pop(&self, timeout: Duration) -> Option<Task<T>> {
        // Read the clock before taking the lock, to keep the lock short.
        let now = self.sojourn_control().map(|_| Instant::now());
        let mut state = self.lock();
        if let Some(now) = now {
            if let Some(task) = self.take_at(&mut state, now) {
                return Some(task);
            }
        } else if let Some((task, _, _)) = state.shares.pop() {
            return Some(task);
        }
        // A worker coming back from a task holds no claimed turn and takes
        // at once (above); one that waits takes only while more workers
        // wait than turns are claimed.
        state.waiting += 1;
        let (mut state, _) = self
            .ready
            .wait_timeout_while(state, timeout, |s| {
                (s.shares.len == 0 || s.waiting <= s.claimed) && !s.closed
            })
            .unwrap_or_else(PoisonError::into_inner);
        let may_take = state.waiting > state.claimed || state.closed;
        state.waiting -= 1;
        if may_take {
            self.take(&mut state)
        } else {
            None
        }
    }

    /// Takes the next task if there is one, without waiting.
    pub fn try_pop(&self) -> Option<Task<T>> {
        self.try_pop_at(Instant::now())
    }

    /// Like [`RequestQueue::try_pop`], taking the task at `now` (its
    /// sojourn, for adaptive admission, ends then).
    pub fn try_pop_at(&self, now: Instant) -> Option<Task<T>> {
        let mut state = self.lock();
        self.take_at(&mut state, now)
    }

    fn take(&self, state: &mut State<T>) -> Option<Task<T>> {
        if self.sojourn_target.load(Ordering::Relaxed) == 0 {
            return state.shares.pop().map(|(task, _, _)| task);
        }
        self.take_at(state, Instant::now())
    }

    /// A worker's pop: the next task in round-robin order, whose sojourn
    /// feeds its share's adaptive admission.
    fn take_at(&self, state: &mut State<T>, now: Instant) -> Option<Task<T>> {
        let (task, slot, emptied) = state.shares.pop()?;
        if let Some(control) = self.sojourn_control() {
            state.shares.share_mut(slot).sojourn.on_dequeue(
                &control,
                task.waited(now),
                emptied,
                now,
            );
        }
        Some(task)
    }

    /// Closes the queue: every later push is refused with
    /// [`Reason::ShuttingDown`] and every waiting [`RequestQueue::pop`] wakes.
    pub fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Whether [`RequestQueue::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.lock().closed
    }

    /// Removes and returns every queued task, each share oldest first.
    pub fn drain(&self) -> Vec<Task<T>> {
        self.lock().shares.drain()
    }

    /// How long the oldest task has waited at `now`, or `None` when empty.
    pub fn head_wait(&self, now: Instant) -> Option<Duration> {
        self.lock().shares.head_wait(now)
    }

    /// Removes, from the head of every share, the tasks that have waited at
    /// least `max_wait`, stopping at each share's first younger head
    /// (RocketMQ's BrokerFastFailure: only heads are examined, in FIFO
    /// order).
    pub fn remove_expired(&self, now: Instant, max_wait: Duration) -> Vec<Expired<T>> {
        let mut state = self.lock();
        let mut expired = Vec::new();
        for slot in state.shares.active_slots() {
            while let Some(waited) = state.shares.share(slot).head_wait(now) {
                if waited < max_wait {
                    break;
                }
                if let Some(task) = state.shares.pop_from(slot) {
                    expired.push(Expired {
                        task,
                        waited,
                        queue_len: state.shares.len,
                    });
                }
            }
        }
        expired
    }

    /// Removes tasks, in round-robin order, while `busy()` holds, asking it
    /// again before each removal (the page-cache-busy drain). `busy` runs
    /// without the queue's lock held.
    pub fn drain_while(&self, now: Instant, busy: impl Fn() -> bool) -> Vec<Expired<T>> {
        let mut drained = Vec::new();
        while busy() {
            let mut state = self.lock();
            let Some((task, _, _)) = state.shares.pop() else {
                break;
            };
            let queue_len = state.shares.len;
            drop(state);
            drained.push(Expired {
                waited: task.waited(now),
                task,
                queue_len,
            });
        }
        drained
    }

    /// The state, even if a thread panicked while holding the lock: every
    /// critical section leaves the shares and flag consistent, so a poisoned
    /// lock holds valid data.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}
