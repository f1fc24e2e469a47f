//! The store's background threads: `store-commit` (copies transient store
//! pool buffers into the files), `store-flush` (ASYNC_FLUSH every interval,
//! or the SYNC_FLUSH group commit), `store-flush-timer` (answers appends no
//! flush covered in time), `store-housekeeping` (flushes the ConsumeQueues
//! and the checkpoint, watches the disk), the start of `store-reput` (see
//! [`crate::dispatch`]) and of `store-clean` (see [`crate::retention`]); how they start and stop, and the [`Signal`] each one
//! sleeps on. The `store-alloc` thread, which makes the next CommitLog file
//! ahead of time, belongs to the file queue (`file_queue`).

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Condvar, Mutex, PoisonError,
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use crate::{config::FlushDiskType, error::StoreError, state::Inner};

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

/// Starts the store's threads, adding each to `threads` as it starts (so
/// that those already running are stopped even when a later one fails to
/// start).
///
/// # Errors
/// [`StoreError`] when a thread cannot be started.
pub(crate) fn start(
    inner: &Arc<Inner>,
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<(), StoreError> {
    let spawn = |name: &str, f: fn(&Inner)| -> Result<JoinHandle<()>, StoreError> {
        let inner = Arc::clone(inner);
        thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || f(&inner))
            .map_err(StoreError::io("start thread", name))
    };
    threads.push(spawn("store-flush", Inner::run_flush)?);
    if inner.config.flush_disk_type == FlushDiskType::SyncFlush {
        threads.push(spawn("store-flush-timer", Inner::run_flush_timer)?);
    }
    if inner.pool.is_some() {
        threads.push(spawn("store-commit", Inner::run_commit)?);
    }
    threads.push(spawn("store-reput", Inner::run_reput)?);
    threads.push(spawn("store-housekeeping", Inner::run_housekeeping)?);
    threads.push(spawn("store-clean", Inner::run_clean)?);
    Ok(())
}

/// Refuses further appends, stops every thread and joins them. Appends
/// still waiting for a flush stay waiting (see [`GroupCommit::close`]).
///
/// [`GroupCommit::close`]: crate::group_commit::GroupCommit::close
pub(crate) fn stop(inner: &Inner, threads: &mut Vec<JoinHandle<()>>) {
    inner.shutting_down.store(true, Ordering::Release);
    for signal in [
        &inner.commit,
        &inner.reput,
        &inner.housekeeping,
        &inner.clean,
        &inner.flush,
    ] {
        signal.stop();
    }
    inner.group_commit.stop();
    for handle in threads.drain(..) {
        let _ = handle.join();
    }
}

impl Inner {
    fn run_commit(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.commit.is_stopped() {
            self.commit
                .wait(Duration::from_millis(cfg.commit_interval_commit_log));
            let mut least = cfg.commit_commit_log_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.commit_commit_log_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            let ts = self.last_store_ts.load(Ordering::Acquire);
            let before = self.commit_log.files().committed_where();
            if self.commit_log.files().commit(least) > before {
                self.committed_ts.fetch_max(ts, Ordering::AcqRel);
                if self.arrival.watched() {
                    self.reput.wake();
                }
                self.flush.wake();
            }
        }
    }

    fn run_flush(&self) {
        match self.config.flush_disk_type {
            FlushDiskType::AsyncFlush => self.run_async_flush(),
            FlushDiskType::SyncFlush => self.run_group_commit(),
        }
    }

    fn run_flush_timer(&self) {
        let timeout = self.config.sync_flush_timeout;
        self.group_commit
            .run_timer(Duration::from_millis(timeout), timeout);
    }

    fn run_async_flush(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.flush.is_stopped() {
            self.flush
                .wait(Duration::from_millis(cfg.flush_interval_commit_log));
            let mut least = cfg.flush_commit_log_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.flush_commit_log_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            if !self.flush_once(least) {
                return;
            }
        }
    }

    fn run_group_commit(&self) {
        // The most appends seen waiting at once lately, decaying slowly, so
        // that the gather below knows how many to expect.
        let mut peak = 0.0f64;
        while !self.flush.is_stopped() {
            let waiters = self
                .group_commit
                .next_request(Duration::from_millis(10), &self.flush);
            peak = (peak * 0.99).max(waiters as f64);
            if waiters > 1 {
                self.gather((peak * 0.9).ceil() as usize);
            }
            peak = peak.max(self.group_commit.waiters() as f64);
            if self.pool.is_some() {
                self.commit_log.files().commit(0);
            }
            if !self.flush_once(0) {
                return;
            }
        }
    }

    /// With several appends already waiting, more are usually on their way
    /// (writers just released by the previous flush): wait until about as
    /// many wait as lately did, for at most 500 µs, so that one fsync covers
    /// them all. A lone writer never waits here.
    fn gather(&self, target: usize) {
        let deadline = Instant::now() + Duration::from_micros(500);
        while self.group_commit.waiters() < target && Instant::now() < deadline {
            // Sleep rather than spin: on a small machine the writers we wait
            // for need the CPU.
            thread::sleep(Duration::from_micros(50));
        }
    }

    /// One flush of the log; returns false (and poisons the store) on failure.
    fn flush_once(&self, least_pages: usize) -> bool {
        let delay = self.config.fault_flush_delay_mills;
        if delay > 0 {
            thread::sleep(Duration::from_millis(delay));
        }
        let ts = if self.pool.is_some() {
            self.committed_ts.load(Ordering::Acquire)
        } else {
            self.last_store_ts.load(Ordering::Acquire)
        };
        let before = self.commit_log.files().flushed_where();
        let started = Instant::now();
        let result = self.commit_log.files().flush(least_pages);
        if result.as_ref().is_ok_and(|&flushed| flushed > before) {
            self.flush_time.record(started.elapsed().as_secs_f64());
        }
        match result {
            Ok(flushed) => {
                if flushed > before {
                    self.checkpoint.set_physic_msg_timestamp(ts);
                }
                self.group_commit.flushed(flushed);
                true
            }
            Err(e) => {
                let reason = format!("commit log flush failed: {e}");
                self.commit_log.poison(reason.clone());
                self.group_commit.fail(reason);
                false
            }
        }
    }

    fn run_housekeeping(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.housekeeping.is_stopped() {
            self.housekeeping
                .wait(Duration::from_millis(cfg.flush_interval_consume_queue));
            let mut least = cfg.flush_consume_queue_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.flush_consume_queue_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            self.flush_queues_and_checkpoint(least);
            self.check_disk_space();
        }
    }

    /// Flushes the ConsumeQueues (see [`MappedFile::flush`] for
    /// `least_pages`) and the IndexFiles that are full, and writes the
    /// checkpoint. Only a flush of every dirty
    /// page (`least_pages` 0) moves the checkpoint's ConsumeQueue time: a
    /// partial one may leave the newest entries of a queue unflushed, and
    /// recovery after a crash trusts that time.
    ///
    /// [`MappedFile::flush`]: crate::mmap::MappedFile::flush
    pub(crate) fn flush_queues_and_checkpoint(&self, least_pages: usize) {
        let ts = self.dispatched_ts.load(Ordering::Acquire);
        match self.flush_queues(least_pages) {
            Ok(()) if least_pages == 0 => self.checkpoint.set_logics_msg_timestamp(ts),
            Ok(()) => {}
            Err(e) => self
                .commit_log
                .poison(format!("consume queue flush failed: {e}")),
        }
        self.index.flush_full(&self.checkpoint);
        if let Err(e) = self.checkpoint.flush() {
            tracing::warn!(cause = %e, "cannot write checkpoint");
        }
    }

    /// Lets appends resume once the disk has room for two CommitLog files.
    fn check_disk_space(&self) {
        if !self.commit_log.is_disk_full() {
            return;
        }
        let dir = self.config.commit_log_dir();
        match rustix::fs::statvfs(&dir) {
            Ok(st) => {
                let free = st.f_bavail.saturating_mul(st.f_frsize);
                if free >= 2 * self.config.mapped_file_size_commit_log as u64 {
                    self.commit_log.clear_disk_full();
                }
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), cause = %e, "cannot check free disk space")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
