//! The timeline of one load run, shared by the Sluice loops ([`crate::run`])
//! and the NATS publisher ([`crate::nats`]): when it started, when the
//! warm-up and the run end, the recorder of what was sent after the
//! warm-up, the progress line printed each second, and the bounded wait for
//! the last requests.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::Result;
use tokio::{
    task::{JoinHandle, JoinSet},
    time::Instant,
};

use crate::{
    outcome::Outcome,
    report::{progress_line, Recorder},
};

/// A run's timeline and what it recorded.
#[derive(Debug)]
pub(crate) struct Window {
    /// When the run (its warm-up) started.
    pub(crate) start: Instant,
    /// When recording starts.
    pub(crate) warmup_end: Instant,
    /// When no further request starts.
    pub(crate) end: Instant,
    recorder: Mutex<Recorder>,
}

impl Window {
    /// A run starting now: `warmup`, then `duration` recorded.
    ///
    /// # Errors
    /// The recorder's histograms cannot be made.
    pub(crate) fn begin(warmup: Duration, duration: Duration) -> Result<Self> {
        let start = Instant::now();
        let warmup_end = start + warmup;
        Ok(Self {
            start,
            warmup_end,
            end: warmup_end + duration,
            recorder: Mutex::new(Recorder::new()?),
        })
    }

    /// The second of the recorded time `at` falls in, counting from 1.
    pub(crate) fn second_of(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.warmup_end).as_secs() + 1
    }

    /// Runs `f` on the recorder.
    pub(crate) fn with_recorder<T>(&self, f: impl FnOnce(&mut Recorder) -> T) -> T {
        f(&mut self.recorder.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records a request meant to go at `intended` and answered at `done`
    /// with `outcome`, if `intended` falls after the warm-up.
    pub(crate) fn record(&self, intended: Instant, done: Instant, outcome: &Outcome) {
        if intended >= self.warmup_end {
            let t = self.second_of(done);
            let latency = done.saturating_duration_since(intended);
            self.with_recorder(|r| r.record_in(t, outcome, latency));
        }
    }

    /// When `on`, prints a progress line to stderr every second until the
    /// end; stop it with [`stop_progress`].
    pub(crate) fn spawn_progress(self: &Arc<Self>, on: bool) -> Option<JoinHandle<()>> {
        if !on {
            return None;
        }
        let window = Arc::clone(self);
        Some(tokio::spawn(async move {
            let mut last_ok = 0;
            let mut tick = window.start + Duration::from_secs(1);
            while tick < window.end {
                tokio::time::sleep_until(tick).await;
                let (ok, failed, p99) =
                    window.with_recorder(|r| (r.ok(), r.failed(), r.p99_ok_us()));
                let warming_up = tick <= window.warmup_end;
                eprintln!(
                    "{}",
                    progress_line(tick - window.start, warming_up, ok - last_ok, failed, p99)
                );
                last_ok = ok;
                tick += Duration::from_secs(1);
            }
        }))
    }
}

/// Stops a progress task from [`Window::spawn_progress`].
pub(crate) async fn stop_progress(progress: Option<JoinHandle<()>>) {
    if let Some(handle) = progress {
        handle.abort();
        let _ = handle.await;
    }
}

/// Waits for every task, aborting what is left at `deadline`.
pub(crate) async fn drain(tasks: &mut JoinSet<()>, deadline: Instant) {
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout_at(deadline, all).await.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}
