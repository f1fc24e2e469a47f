//! A bounded FIFO of requests, each stamped with the instant it arrived,
//! shared by the I/O side that pushes and the worker threads that pop.
//!
//! # Invariants
//! - Every pushed task leaves the queue exactly once: popped by a worker,
//!   removed by the sweeper ([`RequestQueue::remove_expired`],
//!   [`RequestQueue::drain_while`]) or drained. All of them take the same
//!   lock, so a task the sweeper removed is never handed to a worker.
//! - Tasks leave in arrival order; the sweeper only ever removes the head.
//! - Shrinking the capacity never drops a queued task; it only refuses new
//!   ones while the queue is over the new capacity.
//! - The queue's byte count is the sum of its tasks' sizes: every task that
//!   leaves takes its size with it.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Condvar, Mutex, MutexGuard, PoisonError,
    },
    time::{Duration, Instant},
};

use crate::{
    estimator::ServiceTimeEstimator,
    reason::{Reason, Rejected},
};

/// A queued request and the instant it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task<T> {
    /// The request.
    pub payload: T,
    /// When the request was pushed.
    pub arrived: Instant,
    /// Its size as given when pushed (0 for tasks pushed without one).
    pub bytes: usize,
}

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

/// A bounded, thread-safe FIFO of time-stamped tasks with an estimate of how
/// long its tasks take to serve.
#[derive(Debug)]
pub struct RequestQueue<T> {
    name: &'static str,
    capacity: AtomicUsize,
    capacity_bytes: AtomicUsize,
    workers: AtomicUsize,
    service: ServiceTimeEstimator,
    state: Mutex<State<T>>,
    ready: Condvar,
}

#[derive(Debug)]
struct State<T> {
    tasks: VecDeque<Task<T>>,
    /// Sum of the queued tasks' sizes.
    bytes: usize,
    closed: bool,
    /// Poppers blocked on `ready`. A push only notifies when there is one,
    /// because a condvar notification is a system call even with no waiter.
    waiting: usize,
}

impl<T> Task<T> {
    /// How long the task has waited at `now` (zero if `now` is earlier than
    /// its arrival).
    pub fn waited(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.arrived)
    }
}

impl<T> RequestQueue<T> {
    /// An empty, open queue holding at most `capacity` tasks, served by one
    /// worker until [`RequestQueue::set_workers`] says otherwise.
    pub fn new(name: &'static str, capacity: usize) -> Self {
        Self {
            name,
            capacity: AtomicUsize::new(capacity),
            capacity_bytes: AtomicUsize::new(usize::MAX),
            workers: AtomicUsize::new(1),
            service: ServiceTimeEstimator::new(),
            state: Mutex::new(State {
                tasks: VecDeque::new(),
                bytes: 0,
                closed: false,
                waiting: 0,
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
        self.lock().tasks.len()
    }

    /// Whether no task is waiting.
    pub fn is_empty(&self) -> bool {
        self.lock().tasks.is_empty()
    }

    /// The most tasks the queue accepts.
    pub fn capacity(&self) -> usize {
        self.capacity.load(Ordering::Relaxed)
    }

    /// Bytes of the tasks waiting now (as given to [`RequestQueue::try_push_sized`]).
    pub fn bytes(&self) -> usize {
        self.lock().bytes
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
        self.try_push_sized(payload, 0, now, None)
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
        self.try_push_sized(payload, 0, now, early.then_some(max_wait))
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
        let mut state = self.lock();
        let queue_len = state.tasks.len();
        let capacity = self.capacity();
        let capacity_bytes = self.capacity_bytes();
        let reason = if state.closed {
            Some(Reason::ShuttingDown)
        } else if queue_len >= capacity {
            Some(Reason::Overload {
                queue_len,
                capacity,
            })
        } else if bytes > 0 && state.bytes.saturating_add(bytes) > capacity_bytes && queue_len > 0 {
            // One task alone is always accepted, however large: the frame
            // limit bounds it, and refusing it would refuse it forever.
            Some(Reason::OverloadBytes {
                queued_bytes: state.bytes,
                capacity_bytes,
            })
        } else {
            max_wait.and_then(|limit| {
                let predicted_wait = self.service.predict_wait(queue_len, self.workers())?;
                (predicted_wait > limit).then_some(Reason::EarlyReject {
                    predicted_wait,
                    limit,
                    queue_len,
                })
            })
        };
        if let Some(reason) = reason {
            return Err(Rejected { payload, reason });
        }
        state.tasks.push_back(Task {
            payload,
            arrived: now,
            bytes,
        });
        state.bytes += bytes;
        let wake = state.waiting > 0;
        drop(state);
        if wake {
            self.ready.notify_one();
        }
        Ok(())
    }

    /// Takes the oldest task, waiting up to `timeout` for one to arrive.
    ///
    /// Returns `None` when the timeout passes with the queue empty, or when
    /// the queue is closed and empty. A closed queue still hands out the
    /// tasks it holds.
    pub fn pop(&self, timeout: Duration) -> Option<Task<T>> {
        let mut state = self.lock();
        if let Some(task) = state.pop_front() {
            return Some(task);
        }
        state.waiting += 1;
        let (mut state, _) = self
            .ready
            .wait_timeout_while(state, timeout, |s| s.tasks.is_empty() && !s.closed)
            .unwrap_or_else(PoisonError::into_inner);
        state.waiting -= 1;
        state.pop_front()
    }

    /// Takes the oldest task if there is one, without waiting.
    pub fn try_pop(&self) -> Option<Task<T>> {
        self.lock().pop_front()
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

    /// Removes and returns every queued task, oldest first.
    pub fn drain(&self) -> Vec<Task<T>> {
        let mut state = self.lock();
        state.bytes = 0;
        state.tasks.drain(..).collect()
    }

    /// How long the oldest task has waited at `now`, or `None` when empty.
    pub fn head_wait(&self, now: Instant) -> Option<Duration> {
        self.lock().tasks.front().map(|t| t.waited(now))
    }

    /// Removes tasks from the head while the head has waited at least
    /// `max_wait`, stopping at the first younger head (RocketMQ's
    /// BrokerFastFailure: only the head is examined, in FIFO order).
    pub fn remove_expired(&self, now: Instant, max_wait: Duration) -> Vec<Expired<T>> {
        let mut state = self.lock();
        let mut expired = Vec::new();
        while let Some(head) = state.tasks.front() {
            let waited = head.waited(now);
            if waited < max_wait {
                break;
            }
            if let Some(task) = state.pop_front() {
                expired.push(Expired {
                    task,
                    waited,
                    queue_len: state.tasks.len(),
                });
            }
        }
        expired
    }

    /// Removes tasks from the head while `busy()` holds, asking it again
    /// before each removal (the page-cache-busy drain). `busy` runs without
    /// the queue's lock held.
    pub fn drain_while(&self, now: Instant, busy: impl Fn() -> bool) -> Vec<Expired<T>> {
        let mut drained = Vec::new();
        while busy() {
            let mut state = self.lock();
            let Some(task) = state.pop_front() else {
                break;
            };
            let queue_len = state.tasks.len();
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
    /// critical section leaves the deque and flag consistent, so a poisoned
    /// lock holds valid data.
    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl<T> State<T> {
    /// Takes the head task and its bytes off the queue.
    fn pop_front(&mut self) -> Option<Task<T>> {
        let task = self.tasks.pop_front()?;
        self.bytes -= task.bytes;
        Some(task)
    }
}
