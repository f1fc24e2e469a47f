//! `sluice-bench drain`: how fast a consumer drains a backlog put in
//! beforehand, for Sluice's push consumer and for a NATS JetStream pull
//! consumer ([`crate::drain_nats`]), so that both can be compared on one
//! machine.
//!
//! A run does one or both of two phases ([`Phase`]), each with a report of
//! its own ([`DrainReport`]):
//!
//! - **fill** puts exactly `messages` messages of `body_bytes` bytes in and
//!   reports its own rate.
//!   - Sluice: the topic is created (`UPDATE_AND_CREATE_TOPIC`, `queues`
//!     read and write queues) on `--broker` when given, else on every
//!     master broker of the name server's route: the topic's own, or the
//!     auto-create topic's when the topic is new. Once the name server lists
//!     the topic's queues, a producer sends batches (`send_batch`,
//!     `fill_batch` messages each) with `in_flight` batches outstanding. The
//!     producer's own retries are off, since a retry after a lost answer
//!     could store a batch twice: a batch answered busy (`SYSTEM_BUSY`,
//!     which stored nothing) is sent again after the broker's
//!     `retryAfterMs`, and any other failure ends the fill with an error.
//!     The topic is not emptied first: a fill adds to what it holds.
//!   - NATS: the stream (file storage) is deleted and created again, so it
//!     holds exactly this fill; publishes keep up to `in_flight`
//!     acknowledgements outstanding.
//! - **read** starts a consumer at the beginning and counts until
//!   `messages` messages arrived, or fails when `timeout` passes first,
//!   naming how many came.
//!   - Sluice: a [`PushConsumer`] of a fresh group
//!     (`sluice-bench-drain-<pid>-<ms since the epoch>`) starting from
//!     `CONSUME_FROM_FIRST_OFFSET`, whose handler only counts messages and
//!     body bytes; pull batch, handler threads and handler batch are the
//!     consumer's defaults unless set. Its offsets are committed as usual,
//!     periodically and at shutdown.
//!   - NATS: an ephemeral pull consumer with `DeliverPolicy::All` and
//!     `AckPolicy::None`: messages are not acknowledged one by one, as the
//!     push consumer commits offsets only periodically.
//!
//! A read's time runs from the start of the consumer (route lookups,
//! registration and queue assignment included) to the message that brought
//! the count to `messages`; the report also says when the first message
//! came. A fill's time runs from the first send to the last
//! acknowledgement, after the topic or stream was made.
//!
//! # Invariants worth naming
//! - Every phase ends by itself within `timeout`: loops are bounded by the
//!   message count, every send and publish by its own timeout, and the
//!   whole phase by `timeout`.
//! - A fill succeeds only when every one of its messages was acknowledged as
//!   stored, each exactly once.

use std::{
    fmt,
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, ensure, Context as _, Result};
use bytes::Bytes;
use clap::ValueEnum;
use client_core::{split_addrs, Deadline, NameServers};
use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, MessageExt, MessageHandler, PushConsumer,
};
use producer_client::{BusyPolicy, Message, Producer, ProducerConfig, ProducerError};
use remoting_net::RemotingClient;
use remoting_protocol::acl::Credentials;
use serde::{Deserialize, Serialize};
use tokio::{sync::Notify, task::JoinSet, time::Instant};

use crate::{
    config::{keys_of, MAX_BODY_BYTES},
    drain_nats::NatsTarget,
    route,
};

mod sluice;

pub use sluice::busy_pause;
use sluice::{fill_sluice, read_sluice};

/// Messages per `send_batch` of a Sluice fill unless set.
pub const DEFAULT_FILL_BATCH: u32 = 32;

/// Batches in flight at once during a Sluice fill unless set.
pub const DEFAULT_SLUICE_IN_FLIGHT: u32 = 16;

/// Unawaited publish acknowledgements during a NATS fill unless set.
pub const DEFAULT_NATS_IN_FLIGHT: u32 = 256;

/// Room counted for each message of a Sluice batch beyond its body (the
/// batch encoding's fixed fields and properties), so that a batch stays
/// within the producer's 4 MiB limit.
pub const BATCH_MESSAGE_OVERHEAD: usize = 512;

/// Budget of one batch send of a Sluice fill.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);

/// Timeout of the requests around a Sluice fill (route, topic creation).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// Pause before a busy batch is sent again when the broker gave no hint.
const BUSY_PAUSE: Duration = Duration::from_millis(50);

/// Longest pause before a busy batch is sent again.
const BUSY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// How often the name server is asked whether it lists a new topic yet.
const ROUTE_POLL: Duration = Duration::from_millis(100);

/// Time allowed past a phase's deadline for closing its clients.
const CLOSE_SLACK: Duration = Duration::from_secs(15);

/// How often progress is printed.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The system a drain run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum System {
    /// A Sluice (or RocketMQ) broker, through its name server.
    Sluice,
    /// A NATS server with JetStream.
    Nats,
}

/// The phases of a drain run; a report names `fill` or `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Put the messages in, then stop.
    Fill,
    /// Read the messages from the beginning.
    Read,
    /// Fill, then read.
    Both,
}

impl Phase {
    /// Whether this includes the fill.
    pub fn fills(self) -> bool {
        matches!(self, Phase::Fill | Phase::Both)
    }

    /// Whether this includes the read.
    pub fn reads(self) -> bool {
        matches!(self, Phase::Read | Phase::Both)
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Fill => "fill",
            Phase::Read => "read",
            Phase::Both => "both",
        })
    }
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            System::Sluice => "sluice",
            System::Nats => "nats",
        })
    }
}

/// Where a Sluice drain run goes, and its clients' settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SluiceTarget {
    /// Name server(s), `host:port`, `;`-separated.
    pub namesrv: String,
    /// Broker (`host:port`) to create the topic on; `None`: every master
    /// broker of the name server's route.
    pub broker: Option<String>,
    /// Topic filled and read.
    pub topic: String,
    /// Read and write queues of the topic created by a fill (1..=1024).
    pub queues: u32,
    /// Messages per batch send of a fill. At least 1, and the batch within
    /// [`MAX_BODY_BYTES`] with [`BATCH_MESSAGE_OVERHEAD`] per message.
    pub fill_batch: u32,
    /// Messages asked for per pull (`pullBatchSize`, 1..=1024); `None`: the
    /// consumer's default.
    pub pull_batch: Option<u32>,
    /// Handler calls at once (`consumeThreadMax`, at least 1); `None`: the
    /// consumer's default.
    pub consume_threads: Option<usize>,
    /// Messages per handler call (`consumeMessageBatchMaxSize`,
    /// 1..=1024); `None`: the consumer's default.
    pub consume_batch: Option<usize>,
    /// Signs every request of the fill and the read (route lookups, topic
    /// creation, sends, pulls); `None` sends them unsigned.
    pub credentials: Option<Credentials>,
}

/// Where a drain run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Sluice broker.
    Sluice(SluiceTarget),
    /// A NATS JetStream stream.
    Nats(NatsTarget),
}

impl Target {
    /// The system this is.
    pub fn system(&self) -> System {
        match self {
            Target::Sluice(_) => System::Sluice,
            Target::Nats(_) => System::Nats,
        }
    }
}

/// What a drain run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainConfig {
    /// Where the messages go and come from.
    pub target: Target,
    /// Fill, read or both.
    pub phase: Phase,
    /// Messages put in, and awaited by a read. At least 1.
    pub messages: u64,
    /// Body (payload) size of each message, 1..=[`MAX_BODY_BYTES`].
    pub body_bytes: usize,
    /// Sluice: batches in flight during a fill; NATS: unawaited publish
    /// acknowledgements. At least 1.
    pub in_flight: u32,
    /// Longest time of each phase. Above zero.
    pub timeout: Duration,
    /// Print progress to stderr every second.
    pub progress: bool,
}

impl DrainConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(self.messages >= 1, "messages must be at least 1");
        ensure!(
            (1..=MAX_BODY_BYTES).contains(&self.body_bytes),
            "size must be 1..={MAX_BODY_BYTES} bytes, got {}",
            self.body_bytes
        );
        ensure!(self.in_flight >= 1, "in-flight must be at least 1");
        ensure!(!self.timeout.is_zero(), "timeout-secs must be above zero");
        match &self.target {
            Target::Sluice(t) => t.validate(self.body_bytes),
            Target::Nats(t) => t.validate(),
        }
    }
}

impl SluiceTarget {
    /// Checks the settings for messages of `body_bytes` bytes.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self, body_bytes: usize) -> Result<()> {
        ensure!(
            !split_addrs(&self.namesrv).is_empty(),
            "namesrv must name at least one host:port"
        );
        ensure!(!self.topic.is_empty(), "topic must not be empty");
        if let Some(broker) = &self.broker {
            ensure!(!broker.is_empty(), "broker must not be empty");
        }
        ensure!(
            (1..=1024).contains(&self.queues),
            "queues must be 1..=1024, got {}",
            self.queues
        );
        ensure!(self.fill_batch >= 1, "fill-batch must be at least 1");
        let largest = batch_bytes(self.fill_batch, body_bytes);
        ensure!(
            largest <= MAX_BODY_BYTES,
            "a batch of {} messages of {body_bytes} bytes takes about {largest} bytes, over \
             {MAX_BODY_BYTES}: lower --fill-batch",
            self.fill_batch
        );
        if let Some(pull) = self.pull_batch {
            ensure!(
                (1..=1024).contains(&pull),
                "pull-batch must be 1..=1024, got {pull}"
            );
        }
        if let Some(threads) = self.consume_threads {
            ensure!(threads >= 1, "consume-threads must be at least 1");
        }
        if let Some(batch) = self.consume_batch {
            ensure!(
                (1..=1024).contains(&batch),
                "consume-batch must be 1..=1024, got {batch}"
            );
        }
        Ok(())
    }

    /// The push consumer's settings for a read by `group`.
    pub fn consumer_config(&self, group: &str) -> ConsumerConfig {
        let mut config = ConsumerConfig {
            consume_from_where: ConsumeFromWhere::FirstOffset,
            ..ConsumerConfig::new(&self.namesrv, group)
        }
        .subscribe(&self.topic, "*");
        if let Some(pull) = self.pull_batch {
            config.pull_batch_size = pull;
        }
        if let Some(threads) = self.consume_threads {
            config.consume_thread_max = threads;
        }
        if let Some(batch) = self.consume_batch {
            config.consume_message_batch_max_size = batch;
        }
        (config.access_key, config.secret_key) = keys_of(self.credentials.as_ref());
        config
    }
}

/// The encoded size, allowing [`BATCH_MESSAGE_OVERHEAD`] per message, of a
/// batch of `messages` bodies of `body_bytes` bytes.
pub fn batch_bytes(messages: u32, body_bytes: usize) -> usize {
    usize::try_from(messages)
        .unwrap_or(usize::MAX)
        .saturating_mul(body_bytes.saturating_add(BATCH_MESSAGE_OVERHEAD))
}

/// The sizes of the batches that put `total` messages in, `batch` at most
/// each: full batches, then the rest.
pub fn batch_sizes(total: u64, batch: u32) -> impl Iterator<Item = u32> {
    let batch = u64::from(batch.max(1));
    let mut left = total;
    std::iter::from_fn(move || {
        if left == 0 {
            return None;
        }
        let n = left.min(batch);
        left -= n;
        u32::try_from(n).ok()
    })
}

/// A fresh consumer group name for one read: the process id and the time.
pub fn fresh_group() -> String {
    let ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("sluice-bench-drain-{}-{ms}", std::process::id())
}

/// What one phase counted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Messages put in or received.
    pub messages: u64,
    /// Their body bytes.
    pub bytes: u64,
    /// How long the phase took (see the module docs).
    pub elapsed: Duration,
    /// A read: when the first message came, from the consumer's start.
    pub first_message: Option<Duration>,
    /// A Sluice fill: batch sends answered busy and sent again.
    pub busy_answers: u64,
}

/// The result of one phase.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainReport {
    /// `sluice` or `nats`.
    pub system: System,
    /// `fill` or `read`.
    pub phase: Phase,
    /// The name server (Sluice) or NATS server address.
    pub server: String,
    /// The topic (Sluice) or `stream/subject` (NATS).
    pub destination: String,
    /// Messages put in or received.
    pub messages: u64,
    /// Their body bytes.
    pub bytes: u64,
    /// Body size of each message sent by a fill, or asked for by a read.
    pub body_bytes: usize,
    /// Time of the phase, in seconds.
    pub seconds: f64,
    /// Messages per second.
    pub msgs_per_sec: f64,
    /// Body MiB per second.
    pub mib_per_sec: f64,
    /// A read: seconds from the consumer's start to the first message.
    pub first_message_seconds: Option<f64>,
    /// A Sluice fill: batch sends answered busy (`SYSTEM_BUSY`, nothing
    /// stored) and sent again; 0 otherwise.
    pub busy_answers: u64,
}

impl DrainReport {
    /// The report of a phase of `config` that counted `measured`.
    pub fn new(config: &DrainConfig, phase: Phase, measured: Measured) -> Self {
        let (server, destination) = match &config.target {
            Target::Sluice(t) => (t.namesrv.clone(), t.topic.clone()),
            Target::Nats(t) => (t.server.clone(), format!("{}/{}", t.stream, t.subject)),
        };
        let seconds = measured.elapsed.as_secs_f64();
        Self {
            system: config.target.system(),
            phase,
            server,
            destination,
            messages: measured.messages,
            bytes: measured.bytes,
            body_bytes: config.body_bytes,
            seconds,
            msgs_per_sec: per_second(measured.messages as f64, seconds),
            mib_per_sec: per_second(measured.bytes as f64 / (1024.0 * 1024.0), seconds),
            first_message_seconds: measured.first_message.map(|d| d.as_secs_f64()),
            busy_answers: measured.busy_answers,
        }
    }

    /// The report as one line of JSON.
    ///
    /// # Errors
    /// Serialization failed.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).context("serialize the drain report")
    }
}

/// `amount` per second over `seconds`; 0 when no time passed.
pub fn per_second(amount: f64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        amount / seconds
    } else {
        0.0
    }
}

impl fmt::Display for DrainReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {} via {}: {} messages of {} B ({:.1} MiB) in {:.3} s: {:.0} msgs/s, {:.1} MiB/s",
            self.system,
            self.phase,
            self.destination,
            self.server,
            self.messages,
            self.body_bytes,
            self.bytes as f64 / (1024.0 * 1024.0),
            self.seconds,
            self.msgs_per_sec,
            self.mib_per_sec
        )?;
        if let Some(first) = self.first_message_seconds {
            write!(f, " (first message after {first:.3} s)")?;
        }
        if self.busy_answers > 0 {
            write!(
                f,
                " ({} batches answered busy and sent again)",
                self.busy_answers
            )?;
        }
        Ok(())
    }
}

/// Runs the phases of `config`: the fill's report, then the read's.
///
/// # Errors
/// Invalid settings, or the first phase that failed.
pub async fn drain(config: &DrainConfig) -> Result<Vec<DrainReport>> {
    config.validate()?;
    let mut reports = Vec::new();
    if config.phase.fills() {
        let report = fill(config).await?;
        if config.progress && config.phase.reads() {
            eprintln!(
                "{} fill done: {} messages in {:.3} s; reading",
                report.system, report.messages, report.seconds
            );
        }
        reports.push(report);
    }
    if config.phase.reads() {
        reports.push(read(config).await?);
    }
    Ok(reports)
}

/// Puts `config.messages` messages in and reports the rate.
///
/// # Errors
/// Invalid settings, an unreachable server, a refused send, or a fill not
/// done within the timeout.
pub async fn fill(config: &DrainConfig) -> Result<DrainReport> {
    config.validate()?;
    let stored = Arc::new(AtomicU64::new(0));
    let progress = spawn_progress(config, Phase::Fill, Arc::clone(&stored));
    let deadline = Instant::now() + config.timeout;
    // Each fill stops itself at the deadline and closes its clients; this
    // bounds what is left, such as that closing.
    let outcome = tokio::time::timeout_at(deadline + CLOSE_SLACK, async {
        match &config.target {
            Target::Sluice(t) => fill_sluice(t, config, &stored, deadline).await,
            Target::Nats(t) => crate::drain_nats::fill(t, config, &stored, deadline).await,
        }
    })
    .await;
    stop(progress);
    let measured = match outcome {
        Ok(measured) => measured?,
        Err(_) => return Err(fill_timeout(config, &stored)),
    };
    Ok(DrainReport::new(config, Phase::Fill, measured))
}

/// The error of a fill that did not finish in time.
pub(crate) fn fill_timeout(config: &DrainConfig, stored: &AtomicU64) -> anyhow::Error {
    anyhow::anyhow!(
        "the {} fill did not finish within {} s: {} of {} messages stored",
        config.target.system(),
        config.timeout.as_secs_f64(),
        stored.load(Ordering::Relaxed),
        config.messages
    )
}

/// Reads from the beginning until `config.messages` messages arrived and
/// reports the rate.
///
/// # Errors
/// Invalid settings, an unreachable server, or fewer messages than
/// `config.messages` within the timeout (the error says how many came).
pub async fn read(config: &DrainConfig) -> Result<DrainReport> {
    config.validate()?;
    let counter = Arc::new(Counter::new(config.messages));
    let progress = spawn_progress(config, Phase::Read, Arc::clone(&counter.seen));
    let deadline = counter.started + config.timeout;
    // Each read stops itself at the deadline and closes its clients; this
    // bounds what is left, such as that closing.
    let outcome = tokio::time::timeout_at(deadline + CLOSE_SLACK, async {
        match &config.target {
            Target::Sluice(t) => read_sluice(t, config, &counter, deadline).await,
            Target::Nats(t) => crate::drain_nats::read(t, config, &counter, deadline).await,
        }
    })
    .await;
    stop(progress);
    match outcome {
        Ok(outcome) => outcome?,
        // Counted in time; only closing the consumer lingered.
        Err(_) if counter.is_done() => {}
        Err(_) => return Err(counter.shortfall(config, "the consumer did not stop in time")),
    }
    let measured = counter
        .measured()
        .context("the read ended before its last message was counted")?;
    Ok(DrainReport::new(config, Phase::Read, measured))
}

/// Counts what a read receives and wakes the waiter once the target is
/// reached.
#[derive(Debug)]
pub(crate) struct Counter {
    target: u64,
    started: Instant,
    tally: Mutex<Tally>,
    /// Messages so far, for progress lines.
    seen: Arc<AtomicU64>,
    done: Notify,
}

#[derive(Debug, Default)]
struct Tally {
    messages: u64,
    bytes: u64,
    first_at: Option<Instant>,
    /// When the target was reached, with the counts then.
    done: Option<(Instant, u64, u64)>,
}

impl Counter {
    /// A counter awaiting `target` messages, its clock started now.
    pub(crate) fn new(target: u64) -> Self {
        Self {
            target,
            started: Instant::now(),
            tally: Mutex::default(),
            seen: Arc::default(),
            done: Notify::new(),
        }
    }

    /// Counts `messages` messages of `bytes` body bytes received now.
    pub(crate) fn add(&self, messages: u64, bytes: u64) {
        let now = Instant::now();
        let reached = {
            let mut tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
            tally.messages += messages;
            tally.bytes += bytes;
            tally.first_at.get_or_insert(now);
            if tally.done.is_none() && tally.messages >= self.target {
                tally.done = Some((now, tally.messages, tally.bytes));
                true
            } else {
                false
            }
        };
        self.seen.fetch_add(messages, Ordering::Relaxed);
        if reached {
            // Keeps a permit when nobody waits yet.
            self.done.notify_one();
        }
    }

    /// Messages counted so far.
    pub(crate) fn messages(&self) -> u64 {
        self.tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .messages
    }

    /// Whether the target was reached.
    pub(crate) fn is_done(&self) -> bool {
        self.tally
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .done
            .is_some()
    }

    /// Waits until the target is reached, or `deadline`; whether it was.
    pub(crate) async fn wait_until(&self, deadline: Instant) -> bool {
        tokio::time::timeout_at(deadline, self.done.notified())
            .await
            .is_ok()
            || self.is_done()
    }

    /// The counts when the target was reached, timed from the counter's
    /// start; `None` before.
    pub(crate) fn measured(&self) -> Option<Measured> {
        let tally = self.tally.lock().unwrap_or_else(PoisonError::into_inner);
        let (at, messages, bytes) = tally.done?;
        Some(Measured {
            messages,
            bytes,
            elapsed: at.duration_since(self.started),
            first_message: tally.first_at.map(|f| f.duration_since(self.started)),
            busy_answers: 0,
        })
    }

    /// The error of a read that timed out.
    pub(crate) fn shortfall(&self, config: &DrainConfig, what: &str) -> anyhow::Error {
        anyhow::anyhow!(
            "only {} of {} messages arrived within {} s ({what})",
            self.messages(),
            self.target,
            config.timeout.as_secs_f64()
        )
    }
}

/// Prints `count` of `config.messages` to stderr every second until
/// stopped, when progress is on.
fn spawn_progress(
    config: &DrainConfig,
    phase: Phase,
    count: Arc<AtomicU64>,
) -> Option<tokio::task::JoinHandle<()>> {
    if !config.progress {
        return None;
    }
    let (system, total) = (config.target.system(), config.messages);
    Some(tokio::spawn(async move {
        let started = Instant::now();
        let mut tick = tokio::time::interval_at(started + PROGRESS_EVERY, PROGRESS_EVERY);
        loop {
            tick.tick().await;
            eprintln!(
                "{system} {phase}: {} of {total} messages after {:.0} s",
                count.load(Ordering::Relaxed),
                started.elapsed().as_secs_f64()
            );
        }
    }))
}

fn stop(progress: Option<tokio::task::JoinHandle<()>>) {
    if let Some(p) = progress {
        p.abort();
    }
}

#[cfg(test)]
mod tests;
