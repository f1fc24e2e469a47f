//! Building blocks of the store's background threads: a wakeable sleep with
//! a stop flag, and the group commit that SYNC_FLUSH appends wait on.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Condvar, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

/// A stop flag and a wake-up for one service thread.
#[derive(Debug, Default)]
pub(crate) struct Signal {
    stop: AtomicBool,
    sleeping: AtomicBool,
    woken: Mutex<bool>,
    cv: Condvar,
}

impl Signal {
    /// Sleeps up to `timeout`, returning early when woken or stopped.
    pub(crate) fn wait(&self, timeout: Duration) {
        let mut woken = self.woken.lock().unwrap_or_else(PoisonError::into_inner);
        if !*woken && !self.is_stopped() {
            self.sleeping.store(true, Ordering::SeqCst);
            woken = self
                .cv
                .wait_timeout(woken, timeout)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            self.sleeping.store(false, Ordering::SeqCst);
        }
        *woken = false;
    }

    /// Wakes the thread if it sleeps; cheap (one atomic load) when it does not.
    pub(crate) fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.wake_now();
        }
    }

    fn wake_now(&self) {
        *self.woken.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.cv.notify_one();
    }

    /// Asks the thread to stop and wakes it.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.wake_now();
    }

    /// Reports whether the thread should stop.
    pub(crate) fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Why a SYNC_FLUSH wait ended without the flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FlushWait {
    /// No flush covered the offset in time.
    TimedOut,
    /// Flushing failed; the store is poisoned.
    Failed(String),
}

#[derive(Debug, Default)]
struct GroupState {
    requested: u64,
    flushed: u64,
    waiters: usize,
    failed: Option<String>,
}

/// Group commit: appends wait until one flush covers their end offset, so
/// that one fsync serves every append that arrived while it ran.
#[derive(Debug, Default)]
pub(crate) struct GroupCommit {
    state: Mutex<GroupState>,
    requests: Condvar,
    done: Condvar,
}

impl GroupCommit {
    /// Waits until everything below `offset` is durable, up to `timeout`.
    pub(crate) fn wait_for(&self, offset: u64, timeout: Duration) -> Result<(), FlushWait> {
        let deadline = Instant::now() + timeout;
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.flushed >= offset {
            return Ok(());
        }
        st.requested = st.requested.max(offset);
        st.waiters += 1;
        self.requests.notify_one();
        let outcome = loop {
            if let Some(reason) = &st.failed {
                break Err(FlushWait::Failed(reason.clone()));
            }
            if st.flushed >= offset {
                break Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break Err(FlushWait::TimedOut);
            }
            st = self
                .done
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        st.waiters -= 1;
        outcome
    }

    /// Blocks the flush thread until some append waits for an offset beyond
    /// what is flushed, or `timeout` passes. Returns the number of waiters.
    pub(crate) fn next_request(&self, timeout: Duration, signal: &Signal) -> usize {
        let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.requested > st.flushed || signal.is_stopped() {
            return st.waiters;
        }
        let st = self
            .requests
            .wait_timeout(st, timeout)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
        st.waiters
    }

    /// Number of appends waiting now.
    pub(crate) fn waiters(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiters
    }

    /// Records a flush that reached `offset` and wakes the appends it covers.
    pub(crate) fn flushed(&self, offset: u64) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.flushed = st.flushed.max(offset);
        drop(st);
        self.done.notify_all();
    }

    /// Records a failed flush: every waiter, now and later, gets the reason.
    pub(crate) fn fail(&self, reason: String) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failed = Some(reason);
        self.done.notify_all();
    }

    /// Wakes the flush thread (for shutdown).
    pub(crate) fn wake(&self) {
        self.requests.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::{sync::Arc, thread};

    #[test]
    fn one_flush_releases_every_covered_waiter() {
        let gc = Arc::new(GroupCommit::default());
        let waiters: Vec<_> = (1..=8u64)
            .map(|i| {
                let gc = Arc::clone(&gc);
                thread::spawn(move || gc.wait_for(i * 10, Duration::from_secs(10)))
            })
            .collect();
        let signal = Signal::default();
        let deadline = Instant::now() + Duration::from_secs(10);
        while gc.waiters() < 8 && Instant::now() < deadline {
            gc.next_request(Duration::from_millis(5), &signal);
        }
        gc.flushed(80);
        for w in waiters {
            assert_eq!(w.join().unwrap(), Ok(()));
        }
    }

    #[test]
    fn waiters_time_out_or_see_the_failure() {
        let gc = GroupCommit::default();
        assert_eq!(
            gc.wait_for(5, Duration::from_millis(10)),
            Err(FlushWait::TimedOut)
        );
        gc.fail("disk gone".into());
        assert_eq!(
            gc.wait_for(5, Duration::from_secs(1)),
            Err(FlushWait::Failed("disk gone".into()))
        );
        gc.flushed(3);
        assert_eq!(gc.wait_for(2, Duration::from_secs(1)), Ok(()));
    }

    #[test]
    fn signal_wakes_a_sleeper_early() {
        let s = Arc::new(Signal::default());
        let sleeper = {
            let s = Arc::clone(&s);
            thread::spawn(move || {
                let start = Instant::now();
                s.wait(Duration::from_secs(30));
                start.elapsed()
            })
        };
        while !s.sleeping.load(Ordering::SeqCst) {
            thread::yield_now();
        }
        s.wake();
        assert!(sleeper.join().unwrap() < Duration::from_secs(30));
    }
}
