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
        Arc,
    },
    time::Duration,
};

use anyhow::Result;
use tokio::{task::JoinSet, time::Instant};

use crate::{
    config::{Config, Mode},
    outcome::{Busy, Outcome},
    report::Report,
    schedule::Schedule,
    sender::Sender,
    window::{drain, stop_progress, Window},
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
    let progress = shared.window.spawn_progress(config.progress);
    let mut senders = JoinSet::new();
    for _ in 0..in_flight {
        let shared = Arc::clone(&shared);
        senders.spawn(async move { shared.closed_sender().await });
    }
    drain(
        &mut senders,
        shared.window.end + config.timeout + DRAIN_SLACK,
    )
    .await;
    stop_progress(progress).await;
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
    let window = Arc::clone(&shared.window);
    let progress = window.spawn_progress(config.progress);
    let schedule = Schedule::new(window.start, rate_per_sec);
    let outstanding = Arc::new(AtomicU64::new(0));
    let mut requests = JoinSet::new();
    let mut index = 0_u64;
    while let Some(due) = schedule.at(index).filter(|t| *t < window.end) {
        tokio::time::sleep_until(due).await;
        // The timer fires at millisecond granularity: send everything due by now.
        let now = Instant::now();
        while let Some(intended) = schedule.at(index).filter(|t| *t <= now && *t < window.end) {
            index += 1;
            if outstanding.load(Ordering::Relaxed) >= max_outstanding {
                if intended >= window.warmup_end {
                    let t = window.second_of(intended);
                    window.with_recorder(|r| r.record_backlog_in(t));
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
    drain(&mut requests, window.end + config.timeout + DRAIN_SLACK).await;
    stop_progress(progress).await;
    Ok(shared.report(config, mode))
}

/// What the senders of one run share.
struct Shared {
    /// Remoting connections or gRPC channels, by the run's protocol.
    sender: Sender,
    next: AtomicU64,
    timeout: Duration,
    window: Arc<Window>,
    honour_retry_after: bool,
    hint_waits: AtomicU64,
    refused_after_hint: AtomicU64,
}

impl Shared {
    async fn connect(config: &Config) -> Result<Self> {
        let sender = Sender::connect(config).await?;
        Ok(Self {
            sender,
            next: AtomicU64::new(0),
            timeout: config.timeout,
            window: Arc::new(Window::begin(config.warmup, config.duration)?),
            honour_retry_after: config.honour_retry_after,
            hint_waits: AtomicU64::new(0),
            refused_after_hint: AtomicU64::new(0),
        })
    }

    async fn closed_sender(&self) {
        let mut after_hint = false;
        loop {
            let sent_at = Instant::now();
            if sent_at >= self.window.end {
                return;
            }
            let outcome = self.send_one(sent_at).await;
            let recorded = sent_at >= self.window.warmup_end;
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
        self.window.record(intended, Instant::now(), &outcome);
        outcome
    }

    fn report(&self, config: &Config, mode: Mode) -> Report {
        let mut report = self.window.with_recorder(|r| r.report(config, mode));
        report.broker = self.sender.brokers();
        report.hint_waits = self.hint_waits.load(Ordering::Relaxed);
        report.refused_after_hint = self.refused_after_hint.load(Ordering::Relaxed);
        report
    }
}
