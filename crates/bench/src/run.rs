//! The load loops: closed loop (a fixed number of requests in flight) and
//! open loop (a fixed offered rate), each bounded by the warm-up plus the
//! recorded duration, plus at most one request timeout to drain. The loops
//! are the same for both protocols: only the [`Sender`] differs.
//!
//! # Invariants worth naming
//! - Every loop stops by itself: no request starts after the end, and every
//!   request waits at most the request timeout.
//! - Only requests whose (intended) send time falls after the warm-up are
//!   recorded; responses that arrive after the end still count.
//! - Open-loop latency runs from the intended send time, so a sender that
//!   falls behind (or requests skipped for backlog) cannot hide a stall.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use anyhow::Result;
use tokio::{task::JoinSet, time::Instant};

use crate::{
    config::{Config, Mode},
    outcome::{Busy, Outcome},
    report::{progress_line, Recorder, Report},
    schedule::Schedule,
    sender::Sender,
};

/// Pause of a closed-loop sender after a connection error, so a dead
/// connection is not hammered in a tight loop.
const CONNECTION_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Extra time, beyond the request timeout, allowed for draining.
const DRAIN_SLACK: Duration = Duration::from_secs(1);

/// Runs `mode` against the broker in `config` and reports the recorded part.
///
/// # Errors
/// Invalid settings, or a connection that cannot be made at the start.
pub async fn run(config: &Config, mode: Mode) -> Result<Report> {
    match mode {
        Mode::Closed { in_flight } => closed_loop(config, in_flight).await,
        Mode::Open {
            rate_per_sec,
            max_outstanding,
        } => open_loop(config, rate_per_sec, max_outstanding).await,
    }
}

/// Runs `in_flight` senders, each sending its next request when the previous
/// one's response (or timeout) arrives.
///
/// # Errors
/// Invalid settings, or a connection that cannot be made at the start.
pub async fn closed_loop(config: &Config, in_flight: u32) -> Result<Report> {
    let mode = Mode::Closed { in_flight };
    mode.validate()?;
    let shared = Arc::new(Shared::connect(config).await?);
    let progress = spawn_progress(config, &shared);
    let mut senders = JoinSet::new();
    for _ in 0..in_flight {
        let shared = Arc::clone(&shared);
        senders.spawn(async move { shared.closed_sender().await });
    }
    drain(&mut senders, shared.end + config.timeout + DRAIN_SLACK).await;
    stop(progress).await;
    Ok(shared.report(config, mode))
}

/// Sends `rate_per_sec` requests a second on a fixed schedule, whatever the
/// responses do, skipping (and counting as `client_backlog`) any request due
/// while `max_outstanding` are awaiting a response.
///
/// # Errors
/// Invalid settings, or a connection that cannot be made at the start.
pub async fn open_loop(config: &Config, rate_per_sec: f64, max_outstanding: u64) -> Result<Report> {
    let mode = Mode::Open {
        rate_per_sec,
        max_outstanding,
    };
    mode.validate()?;
    let shared = Arc::new(Shared::connect(config).await?);
    let progress = spawn_progress(config, &shared);
    let schedule = Schedule::new(shared.start, rate_per_sec);
    let outstanding = Arc::new(AtomicU64::new(0));
    let mut requests = JoinSet::new();
    let mut index = 0_u64;
    while let Some(due) = schedule.at(index).filter(|t| *t < shared.end) {
        tokio::time::sleep_until(due).await;
        // The timer fires at millisecond granularity: send everything due by now.
        let now = Instant::now();
        while let Some(intended) = schedule.at(index).filter(|t| *t <= now && *t < shared.end) {
            index += 1;
            if outstanding.load(Ordering::Relaxed) >= max_outstanding {
                if intended >= shared.warmup_end {
                    let t = shared.second_of(intended);
                    shared.with_recorder(|r| r.record_backlog_in(t));
                }
                continue;
            }
            outstanding.fetch_add(1, Ordering::Relaxed);
            let shared = Arc::clone(&shared);
            let outstanding = Arc::clone(&outstanding);
            requests.spawn(async move {
                shared.send_one(intended).await;
                outstanding.fetch_sub(1, Ordering::Relaxed);
            });
        }
        // Reap finished tasks so the set does not grow over a long run.
        while requests.try_join_next().is_some() {}
    }
    drain(&mut requests, shared.end + config.timeout + DRAIN_SLACK).await;
    stop(progress).await;
    Ok(shared.report(config, mode))
}

/// What the senders of one run share.
struct Shared {
    /// Remoting connections or gRPC channels, by the run's protocol.
    sender: Sender,
    next: AtomicU64,
    timeout: Duration,
    start: Instant,
    warmup_end: Instant,
    end: Instant,
    recorder: Mutex<Recorder>,
    honour_retry_after: bool,
    hint_waits: AtomicU64,
    refused_after_hint: AtomicU64,
}

impl Shared {
    async fn connect(config: &Config) -> Result<Self> {
        let sender = Sender::connect(config).await?;
        let start = Instant::now();
        let warmup_end = start + config.warmup;
        Ok(Self {
            sender,
            next: AtomicU64::new(0),
            timeout: config.timeout,
            start,
            warmup_end,
            end: warmup_end + config.duration,
            recorder: Mutex::new(Recorder::new()?),
            honour_retry_after: config.honour_retry_after,
            hint_waits: AtomicU64::new(0),
            refused_after_hint: AtomicU64::new(0),
        })
    }

    async fn closed_sender(&self) {
        let mut after_hint = false;
        loop {
            let sent_at = Instant::now();
            if sent_at >= self.end {
                return;
            }
            let outcome = self.send_one(sent_at).await;
            let recorded = sent_at >= self.warmup_end;
            if after_hint && recorded && matches!(outcome, Outcome::Busy(_)) {
                self.refused_after_hint.fetch_add(1, Ordering::Relaxed);
            }
            after_hint = false;
            match outcome {
                Outcome::ConnectionError => tokio::time::sleep(CONNECTION_ERROR_PAUSE).await,
                Outcome::Busy(Busy {
                    retry_after_ms: Some(ms),
                    ..
                }) if self.honour_retry_after => {
                    if recorded {
                        self.hint_waits.fetch_add(1, Ordering::Relaxed);
                    }
                    after_hint = true;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
                _ => {}
            }
        }
    }

    /// Sends the next request and records it against `intended` if that
    /// falls after the warm-up.
    async fn send_one(&self, intended: Instant) -> Outcome {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let outcome = self.sender.send(seq, self.timeout).await;
        let done = Instant::now();
        let latency = done.saturating_duration_since(intended);
        if intended >= self.warmup_end {
            let t = self.second_of(done);
            self.with_recorder(|r| r.record_in(t, &outcome, latency));
        }
        outcome
    }

    /// The second of the recorded time `at` falls in, counting from 1.
    fn second_of(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.warmup_end).as_secs() + 1
    }

    fn with_recorder<T>(&self, f: impl FnOnce(&mut Recorder) -> T) -> T {
        f(&mut self.recorder.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn report(&self, config: &Config, mode: Mode) -> Report {
        let mut report = self.with_recorder(|r| r.report(config, mode));
        report.broker = self.sender.brokers();
        report.hint_waits = self.hint_waits.load(Ordering::Relaxed);
        report.refused_after_hint = self.refused_after_hint.load(Ordering::Relaxed);
        report
    }
}

/// Prints a progress line every second until the end, if asked to.
fn spawn_progress(config: &Config, shared: &Arc<Shared>) -> Option<tokio::task::JoinHandle<()>> {
    if !config.progress {
        return None;
    }
    let shared = Arc::clone(shared);
    Some(tokio::spawn(async move {
        let mut last_ok = 0;
        let mut tick = shared.start + Duration::from_secs(1);
        while tick < shared.end {
            tokio::time::sleep_until(tick).await;
            let (ok, failed, p99) = shared.with_recorder(|r| (r.ok(), r.failed(), r.p99_ok_us()));
            let warming_up = tick <= shared.warmup_end;
            eprintln!(
                "{}",
                progress_line(tick - shared.start, warming_up, ok - last_ok, failed, p99)
            );
            last_ok = ok;
            tick += Duration::from_secs(1);
        }
    }))
}

async fn stop(progress: Option<tokio::task::JoinHandle<()>>) {
    if let Some(handle) = progress {
        handle.abort();
        let _ = handle.await;
    }
}

/// Waits for every task, aborting what is left at `deadline`.
async fn drain(tasks: &mut JoinSet<()>, deadline: Instant) {
    let all = async { while tasks.join_next().await.is_some() {} };
    if tokio::time::timeout_at(deadline, all).await.is_err() {
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}
