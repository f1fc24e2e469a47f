//! The load loops: closed loop (a fixed number of requests in flight) and
//! open loop (a fixed offered rate), each bounded by the warm-up plus the
//! recorded duration, plus at most one request timeout to drain.
//!
//! # Invariants worth naming
//! - Every loop stops by itself: no request starts after the end, and every
//!   request waits at most the request timeout.
//! - Only requests whose (intended) send time falls after the warm-up are
//!   recorded; responses that arrive after the end still count.
//! - Open-loop latency runs from the intended send time, so a sender that
//!   falls behind (or requests skipped for backlog) cannot hide a stall.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use anyhow::{Context, Result};
use bytes::Bytes;
use remoting_net::{client::ClientConnection, ClientOptions};
use remoting_protocol::{
    command::next_opaque,
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode,
};
use tokio::{task::JoinSet, time::Instant};

use crate::{
    config::{Config, Mode},
    outcome::Outcome,
    report::{progress_line, Recorder, Report},
    route::{self, Destination},
    schedule::Schedule,
};

/// Producer group the requests declare.
pub const PRODUCER_GROUP: &str = "sluice-bench";

/// Pause of a closed-loop sender after a connection error, so a dead
/// connection is not hammered in a tight loop.
const CONNECTION_ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Extra time, beyond the request timeout, allowed for draining.
const DRAIN_SLACK: Duration = Duration::from_secs(1);

/// Ext field of `SEND_MESSAGE_V2` holding the born timestamp (RocketMQ's
/// `bornTimestamp`), set afresh on every send so that consumers can measure
/// end-to-end latency.
const BORN_TIMESTAMP_V2: &str = "g";

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

/// One queue the run sends to.
struct Target {
    /// The request for this queue, copied for each send.
    template: RemotingCommand,
    /// The connections to the queue's broker.
    connections: Vec<Arc<ClientConnection>>,
}

/// What the senders of one run share.
struct Shared {
    /// Every queue, in the order requests rotate over them.
    targets: Vec<Target>,
    /// The brokers sent to, for the report.
    brokers: String,
    next: AtomicU64,
    timeout: Duration,
    start: Instant,
    warmup_end: Instant,
    end: Instant,
    recorder: Mutex<Recorder>,
}

impl Shared {
    async fn connect(config: &Config) -> Result<Self> {
        config.validate()?;
        let destinations = match &config.namesrv {
            Some(namesrv) => {
                route::lookup(namesrv, &config.topic, config.queues, config.timeout).await?
            }
            None => route::direct(&config.broker, config.queues),
        };
        let targets = connect_all(config, &destinations).await?;
        let mut brokers: Vec<String> = Vec::new();
        for d in &destinations {
            let label = if d.broker_name == d.addr {
                d.addr.clone()
            } else {
                format!("{}={}", d.broker_name, d.addr)
            };
            if !brokers.contains(&label) {
                brokers.push(label);
            }
        }
        let start = Instant::now();
        let warmup_end = start + config.warmup;
        Ok(Self {
            targets,
            brokers: brokers.join(","),
            next: AtomicU64::new(0),
            timeout: config.timeout,
            start,
            warmup_end,
            end: warmup_end + config.duration,
            recorder: Mutex::new(Recorder::new()?),
        })
    }

    async fn closed_sender(&self) {
        loop {
            let sent_at = Instant::now();
            if sent_at >= self.end {
                return;
            }
            let outcome = self.send_one(sent_at).await;
            if outcome == Some(Outcome::ConnectionError) {
                tokio::time::sleep(CONNECTION_ERROR_PAUSE).await;
            }
        }
    }

    /// Sends the next request and records it against `intended` if that
    /// falls after the warm-up.
    async fn send_one(&self, intended: Instant) -> Option<Outcome> {
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        let target = pick(&self.targets, seq)?;
        let round = seq / u64::try_from(self.targets.len()).ok()?;
        let conn = pick(&target.connections, round)?;
        let mut request = target.template.clone();
        request.opaque = next_opaque();
        request.set_ext(BORN_TIMESTAMP_V2, now_ms().to_string());
        let result = conn.invoke(request, self.timeout).await;
        let done = Instant::now();
        let latency = done.saturating_duration_since(intended);
        let outcome = Outcome::of(&result);
        if intended >= self.warmup_end {
            let t = self.second_of(done);
            self.with_recorder(|r| r.record_in(t, &outcome, latency));
        }
        Some(outcome)
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
        report.broker = self.brokers.clone();
        report
    }
}

/// Opens `config.connections` connections to each broker of `destinations`
/// and pairs every destination with its request and its broker's connections.
async fn connect_all(config: &Config, destinations: &[Destination]) -> Result<Vec<Target>> {
    let options = ClientOptions::default();
    let mut by_addr: BTreeMap<&str, Vec<Arc<ClientConnection>>> = BTreeMap::new();
    for d in destinations {
        if by_addr.contains_key(d.addr.as_str()) {
            continue;
        }
        let mut connections = Vec::new();
        for i in 0..config.connections {
            let conn = ClientConnection::connect(&d.addr, &options)
                .await
                .with_context(|| format!("open connection {i} to broker {}", d.addr))?;
            connections.push(conn);
        }
        by_addr.insert(&d.addr, connections);
    }
    let body = Bytes::from(vec![b'x'; config.body_bytes]);
    destinations
        .iter()
        .map(|d| {
            Ok(Target {
                template: send_request(&config.topic, d.queue_id, body.clone(), config.queues)?,
                connections: by_addr.get(d.addr.as_str()).cloned().unwrap_or_default(),
            })
        })
        .collect()
}

/// Milliseconds since the Unix epoch, 0 if the clock is before it.
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A `SEND_MESSAGE_V2` request for `queue_id`, without a fresh opaque;
/// `default_queues` is the queue count of the topic if the broker creates it
/// on this send.
///
/// # Errors
/// A queue id or queue count beyond `i32`.
pub fn send_request(
    topic: &str,
    queue_id: u32,
    body: Bytes,
    default_queues: u32,
) -> Result<RemotingCommand> {
    let born_timestamp = now_ms();
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: i32::try_from(default_queues)
            .context("queue count beyond i32")?,
        queue_id: i32::try_from(queue_id).context("queue id beyond i32")?,
        sys_flag: 0,
        born_timestamp,
        flag: 0,
        ..SendMessageRequestHeader::default()
    });
    Ok(RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header).with_body(body))
}

fn pick<T>(items: &[T], seq: u64) -> Option<&T> {
    let len = u64::try_from(items.len()).ok()?;
    let index = usize::try_from(seq.checked_rem(len)?).ok()?;
    items.get(index)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_rotate_over_connections_and_queues() {
        let items = [10, 11, 12];
        let picked: Vec<i32> = (0..5).filter_map(|s| pick(&items, s).copied()).collect();
        assert_eq!(picked, [10, 11, 12, 10, 11]);
        assert_eq!(pick::<i32>(&[], 3), None);
    }

    #[test]
    fn send_request_carries_topic_queue_and_body() -> Result<()> {
        let cmd = send_request("T", 5, Bytes::from_static(b"abc"), 8)?;
        assert_eq!(cmd.request_code(), RequestCode::SEND_MESSAGE_V2);
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(header.topic, "T");
        assert_eq!(header.queue_id, 5);
        assert_eq!(header.producer_group, PRODUCER_GROUP);
        assert_eq!(&cmd.body[..], b"abc");
        Ok(())
    }
}
