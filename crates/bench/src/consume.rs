//! The consumer benchmark: pulls every readable queue of a topic in
//! parallel for a fixed time, through a name server (`PULL_MESSAGE` with
//! long polling, via `consumer-client`'s [`PullConsumer`]), or receives
//! from a broker's gRPC endpoint ([`crate::grpc_consume`]), and reports
//! messages and bytes per second and the end-to-end latency of each message:
//! the time from its born timestamp (set by the producer on each send) and
//! from its store timestamp (set by the broker) to its arrival here.
//!
//! Timestamps are whole milliseconds since the epoch from two clocks (the
//! producer's or the broker's, and ours), so the latencies are in whole
//! milliseconds and only meaningful when the clocks agree (one machine).
//! Offsets are not committed: a run reads and leaves no trace in the group.

use std::{
    fmt,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use anyhow::{ensure, Context, Result};
use consumer_client::{
    ConsumerConfig, MessageExt, MessageQueue, PullConsumer, PullOptions, PullStatus,
};
use hdrhistogram::Histogram;
use message_model::now_ms;
use remoting_protocol::acl::Credentials;
use serde::{Deserialize, Serialize};
use tokio::{task::JoinSet, time::Instant};

use crate::{
    config::{keys_of, Protocol},
    report::{period_of, PeriodMs, MAX_PERIOD_MS},
};

/// Consumer group the pulls declare unless told otherwise.
pub const CONSUMER_GROUP: &str = "sluice-bench-consumer";

/// Longest a pull may be held by the broker when nothing is there.
const LONG_POLL: Duration = Duration::from_secs(1);

/// Pause of a queue's puller after a failed pull.
const ERROR_PAUSE: Duration = Duration::from_millis(200);

/// Extra time, beyond the end, allowed for the last pulls to return.
const DRAIN_SLACK: Duration = Duration::from_secs(8);

/// The protocol of reports written before the field existed.
fn remoting() -> String {
    Protocol::Remoting.name().to_owned()
}

/// Where each queue starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartFrom {
    /// The queue's first stored message: measures reading a backlog.
    First,
    /// The queue's end: only messages sent during the run (end to end).
    Last,
}

/// What a consumer run does.
#[derive(Debug, Clone)]
pub struct ConsumeConfig {
    /// Name servers (`host:port`, `;`-separated).
    pub namesrv: String,
    /// Topic to read.
    pub topic: String,
    /// Consumer group the pulls declare.
    pub group: String,
    /// `PULL_MESSAGE` through the name server's route, or gRPC
    /// `ReceiveMessage` and `AckMessage` at `grpc`.
    pub protocol: Protocol,
    /// The broker's gRPC endpoint (`host:port`), with [`Protocol::Grpc`].
    pub grpc: String,
    /// Receives in flight at once, with [`Protocol::Grpc`]; at least 1.
    pub receivers: usize,
    /// Where each queue starts. A gRPC group reads from where it stands (a
    /// new group: the queues' end), so only [`StartFrom::Last`] is allowed
    /// there.
    pub from: StartFrom,
    /// Messages asked for per pull, 1..=1024.
    pub batch: u32,
    /// Time pulled. Must not be zero.
    pub duration: Duration,
    /// Timeout of each request other than the held pulls. Must not be zero.
    pub timeout: Duration,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Connect to name servers and brokers over TLS. Remoting only.
    pub tls: bool,
    /// Trust these certificates (PEM) instead of any; with `tls` only.
    pub tls_trust: Option<std::path::PathBuf>,
    /// Signs every pull, route lookup and offset request with these
    /// credentials; `None` sends them unsigned. Remoting only.
    pub credentials: Option<Credentials>,
}

impl ConsumeConfig {
    /// Checks the ranges documented on each field.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(
            !self.namesrv.is_empty(),
            "namesrv address must not be empty"
        );
        ensure!(!self.topic.is_empty(), "topic must not be empty");
        ensure!(!self.group.is_empty(), "group must not be empty");
        ensure!(
            (1..=1024).contains(&self.batch),
            "batch must be within 1..=1024, got {}",
            self.batch
        );
        ensure!(!self.duration.is_zero(), "duration must be above zero");
        ensure!(!self.timeout.is_zero(), "timeout must be above zero");
        if self.protocol == Protocol::Grpc {
            ensure!(!self.grpc.is_empty(), "grpc address must not be empty");
            ensure!(self.receivers >= 1, "receivers must be at least 1");
            ensure!(
                self.credentials.is_none(),
                "access-key and secret-key are remoting only: gRPC receives are not signed"
            );
            ensure!(!self.tls, "--tls is remoting only");
            ensure!(
                self.from == StartFrom::Last,
                "--from first is not possible with --protocol grpc: a POP group reads from \
                 where it stands (a new group from the queues' end)"
            );
        }
        Ok(())
    }
}

/// The result of a consumer run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ConsumeReport {
    /// Name servers asked.
    pub namesrv: String,
    /// Topic read.
    pub topic: String,
    /// Consumer group.
    pub group: String,
    /// `remoting` (pulls) or `grpc` (receives).
    #[serde(default = "remoting")]
    pub protocol: String,
    /// Where each queue started.
    pub from: StartFrom,
    /// Queues pulled in parallel (remoting), or receives in flight (gRPC).
    pub queues: usize,
    /// Time pulled, seconds.
    pub duration_s: f64,
    /// Messages received.
    pub messages: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Messages per second.
    pub msgs_per_sec: f64,
    /// Body bytes per second, in MB (10^6 bytes).
    pub mb_per_sec: f64,
    /// Pull (or receive) requests answered.
    pub pulls: u64,
    /// Pull (or receive) requests that failed (no answer, refused,
    /// undecodable).
    pub pull_errors: u64,
    /// Arrival here minus born timestamp, ms.
    pub e2e_from_born_ms: Option<PeriodMs>,
    /// Arrival here minus store timestamp, ms.
    pub e2e_from_store_ms: Option<PeriodMs>,
}

/// Histograms and counters of a consumer run.
#[derive(Debug, Clone)]
pub struct ConsumeRecorder {
    from_born_ms: Histogram<u64>,
    from_store_ms: Histogram<u64>,
    messages: u64,
    bytes: u64,
    pulls: u64,
    pull_errors: u64,
}

impl ConsumeRecorder {
    /// An empty recorder.
    ///
    /// # Errors
    /// Only if the histogram library refuses the fixed bounds.
    pub fn new() -> Result<Self> {
        let h = || {
            Histogram::new_with_bounds(1, MAX_PERIOD_MS, 3).context("create a latency histogram")
        };
        Ok(Self {
            from_born_ms: h()?,
            from_store_ms: h()?,
            messages: 0,
            bytes: 0,
            pulls: 0,
            pull_errors: 0,
        })
    }

    /// Records one answered pull and its messages, received at `now_ms`
    /// (ms since the epoch). Timestamps in the future count as 0 ms.
    pub fn record_pull(&mut self, messages: &[MessageExt], now_ms: i64) {
        self.record_answer(
            messages
                .iter()
                .map(|m| (m.born_timestamp_ms, m.store_timestamp_ms, m.body.len())),
            now_ms,
        );
    }

    /// Records one answered pull or receive whose messages are given as
    /// (born timestamp, store timestamp, body length), received at `now_ms`.
    pub fn record_answer(
        &mut self,
        messages: impl IntoIterator<Item = (i64, i64, usize)>,
        now_ms: i64,
    ) {
        self.pulls += 1;
        let since = |ts: i64| u64::try_from(now_ms.saturating_sub(ts)).unwrap_or(0);
        for (born, stored, len) in messages {
            self.messages += 1;
            self.bytes += len as u64;
            self.from_born_ms.saturating_record(since(born));
            self.from_store_ms.saturating_record(since(stored));
        }
    }

    /// Records a failed pull.
    pub fn record_error(&mut self) {
        self.pulls += 1;
        self.pull_errors += 1;
    }

    /// The report of a run of `config` over `queues` queues.
    pub fn report(&self, config: &ConsumeConfig, queues: usize) -> ConsumeReport {
        let secs = config.duration.as_secs_f64();
        ConsumeReport {
            namesrv: config.namesrv.clone(),
            topic: config.topic.clone(),
            group: config.group.clone(),
            protocol: config.protocol.name().to_owned(),
            from: config.from,
            queues,
            duration_s: secs,
            messages: self.messages,
            bytes: self.bytes,
            msgs_per_sec: self.messages as f64 / secs,
            mb_per_sec: self.bytes as f64 / secs / 1e6,
            pulls: self.pulls,
            pull_errors: self.pull_errors,
            e2e_from_born_ms: period_of(&self.from_born_ms),
            e2e_from_store_ms: period_of(&self.from_store_ms),
        }
    }
}

impl ConsumeReport {
    /// The report as one line of JSON.
    ///
    /// # Errors
    /// Only if serialization fails, which plain numbers and strings do not.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string(self).context("serialize the report as json")
    }
}

impl fmt::Display for ConsumeReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "namesrv       {} topic {} group {}",
            self.namesrv, self.topic, self.group
        )?;
        if self.protocol == Protocol::Grpc.name() {
            writeln!(
                f,
                "load          {} gRPC receive(s) in flight, from where the group stands, {:.3} s",
                self.queues, self.duration_s
            )?;
        } else {
            writeln!(
                f,
                "load          {} queue(s) pulled in parallel from the {}, {:.3} s",
                self.queues,
                match self.from {
                    StartFrom::First => "first message",
                    StartFrom::Last => "end",
                },
                self.duration_s
            )?;
        }
        writeln!(f)?;
        writeln!(f, "{:<32}{:>12}", "messages", self.messages)?;
        writeln!(f, "{:<32}{:>12}", "pulls", self.pulls)?;
        writeln!(f, "{:<32}{:>12}", "failed pulls", self.pull_errors)?;
        writeln!(f)?;
        writeln!(
            f,
            "throughput    {:.1} msgs/s  {:.3} MB/s",
            self.msgs_per_sec, self.mb_per_sec
        )?;
        writeln!(f)?;
        writeln!(
            f,
            "{:<22}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "end to end (ms)", "count", "p50", "p90", "p99", "max"
        )?;
        for (name, p) in [
            ("from born", &self.e2e_from_born_ms),
            ("from store", &self.e2e_from_store_ms),
        ] {
            match p {
                Some(p) => writeln!(
                    f,
                    "{name:<22}{:>10}{:>10}{:>10}{:>10}{:>10}",
                    p.count, p.p50, p.p90, p.p99, p.max
                )?,
                None => writeln!(f, "{name:<22}{:>10}", 0)?,
            }
        }
        Ok(())
    }
}

/// Pulls every readable queue of the topic in parallel for the configured
/// time and reports what arrived.
///
/// # Errors
/// Invalid settings, or a topic whose queues cannot be found.
pub async fn consume(config: &ConsumeConfig) -> Result<ConsumeReport> {
    config.validate()?;
    if config.protocol == Protocol::Grpc {
        return crate::grpc_consume::consume(config).await;
    }
    let mut client_config = ConsumerConfig::new(&config.namesrv, config.group.clone());
    client_config.pull_batch_size = config.batch;
    client_config.mq_client_api_timeout = config.timeout;
    (client_config.access_key, client_config.secret_key) = keys_of(config.credentials.as_ref());
    client_config.use_tls = config.tls;
    client_config.tls_client_trust_cert_path = config.tls_trust.clone();
    let consumer = Arc::new(
        PullConsumer::start(client_config)
            .await
            .context("make the pull consumer")?,
    );
    let queues = consumer
        .fetch_queues(&config.topic)
        .await
        .with_context(|| format!("find the queues of topic {}", config.topic))?;
    ensure!(
        !queues.is_empty(),
        "topic {} has no readable queue",
        config.topic
    );
    let recorder = Arc::new(Mutex::new(ConsumeRecorder::new()?));
    let start = Instant::now();
    let end = start + config.duration;
    let mut pullers = JoinSet::new();
    for queue in &queues {
        let queue = queue.clone();
        let consumer = Arc::clone(&consumer);
        let recorder = Arc::clone(&recorder);
        let (from, batch) = (config.from, config.batch);
        pullers.spawn(async move {
            pull_queue(&consumer, &queue, from, batch, end, &recorder).await;
        });
    }
    let progress = config.progress.then(|| {
        let recorder = Arc::clone(&recorder);
        tokio::spawn(async move { progress(&recorder, start, end).await })
    });
    let all = async { while pullers.join_next().await.is_some() {} };
    if tokio::time::timeout_at(end + DRAIN_SLACK, all)
        .await
        .is_err()
    {
        pullers.abort_all();
        while pullers.join_next().await.is_some() {}
    }
    if let Some(p) = progress {
        p.abort();
        let _ = p.await;
    }
    consumer.shutdown().await;
    let report = lock(&recorder).report(config, queues.len());
    Ok(report)
}

/// Pulls one queue until `end`.
async fn pull_queue(
    consumer: &PullConsumer,
    queue: &MessageQueue,
    from: StartFrom,
    batch: u32,
    end: Instant,
    recorder: &Mutex<ConsumeRecorder>,
) {
    let first = match from {
        StartFrom::First => consumer.min_offset(queue).await,
        StartFrom::Last => consumer.max_offset(queue).await,
    };
    let mut offset = match first {
        Ok(offset) => offset,
        Err(e) => {
            eprintln!("consume: cannot find where {queue} starts: {e}");
            lock(recorder).record_error();
            return;
        }
    };
    loop {
        let now = Instant::now();
        if now >= end {
            return;
        }
        let options = PullOptions {
            suspend: Some(LONG_POLL.min(end - now).max(Duration::from_millis(1))),
            ..PullOptions::default()
        };
        match consumer.pull_with(queue, offset, batch, &options).await {
            Ok(result) => {
                let arrived = now_ms();
                if Instant::now() < end {
                    lock(recorder).record_pull(&result.messages, arrived);
                }
                if result.status == PullStatus::OffsetIllegal {
                    eprintln!(
                        "consume: offset {offset} of {queue} is outside the queue; going on from {}",
                        result.next_begin_offset
                    );
                }
                offset = result.next_begin_offset;
            }
            Err(e) => {
                if Instant::now() < end {
                    lock(recorder).record_error();
                }
                eprintln!("consume: pull of {queue} failed: {e}");
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }
}

/// Prints messages per second and the p99 end-to-end latency every second.
pub(crate) async fn progress(recorder: &Mutex<ConsumeRecorder>, start: Instant, end: Instant) {
    let mut last = 0;
    let mut tick = start + Duration::from_secs(1);
    while tick <= end {
        tokio::time::sleep_until(tick).await;
        let (messages, errors, p99) = {
            let r = lock(recorder);
            let p99 = (!r.from_born_ms.is_empty()).then(|| r.from_born_ms.value_at_quantile(0.99));
            (r.messages, r.pull_errors, p99)
        };
        let p99 = p99.map_or_else(|| "-".to_owned(), |v| v.to_string());
        eprintln!(
            "[{:>4}s] msgs/s {:>8}  failed pulls {:>6}  e2e p99 {p99} ms",
            (tick - start).as_secs(),
            messages - last,
            errors
        );
        last = messages;
        tick += Duration::from_secs(1);
    }
}

pub(crate) fn lock(
    recorder: &Mutex<ConsumeRecorder>,
) -> std::sync::MutexGuard<'_, ConsumeRecorder> {
    recorder.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use bytes::Bytes;

    use super::*;

    fn message(born: i64, stored: i64, len: usize) -> MessageExt {
        MessageExt {
            topic: "T".into(),
            queue_id: 0,
            queue_offset: 0,
            body: Bytes::from(vec![0; len]),
            tags: None,
            keys: Vec::new(),
            properties: BTreeMap::new(),
            msg_id: String::new(),
            store_timestamp_ms: stored,
            born_timestamp_ms: born,
            reconsume_times: 0,
            commit_log_offset: 0,
            store_host: std::net::SocketAddr::from(([127, 0, 0, 1], 10911)),
        }
    }

    fn config() -> ConsumeConfig {
        ConsumeConfig {
            namesrv: "127.0.0.1:9876".into(),
            topic: "T".into(),
            group: CONSUMER_GROUP.into(),
            protocol: Protocol::Remoting,
            grpc: "127.0.0.1:8081".into(),
            receivers: 4,
            from: StartFrom::Last,
            batch: 32,
            duration: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
            progress: false,
            tls: false,
            tls_trust: None,
            credentials: None,
        }
    }

    #[test]
    fn latencies_count_from_born_and_store_timestamps() -> Result<()> {
        let mut rec = ConsumeRecorder::new()?;
        rec.record_pull(&[message(1000, 1004, 10), message(1010, 1011, 30)], 1020);
        // A clock behind the producer's gives 0, not a wrapped huge number.
        rec.record_pull(&[message(2000, 2000, 0)], 1990);
        rec.record_error();
        let report = rec.report(&config(), 4);
        assert_eq!((report.messages, report.bytes), (3, 40));
        assert_eq!((report.pulls, report.pull_errors), (3, 1));
        assert_eq!(report.msgs_per_sec, 1.5);
        let born = report.e2e_from_born_ms.context("no born latency")?;
        assert_eq!((born.count, born.max), (3, 20));
        let stored = report.e2e_from_store_ms.context("no store latency")?;
        assert_eq!(stored.p50, 9);
        assert_eq!(stored.max, 16);
        let table = report.to_string();
        assert!(table.contains("from born"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()?)?;
        assert_eq!(json["from"], "last");
        assert_eq!(json["e2e_from_store_ms"]["max"], 16);
        Ok(())
    }

    #[test]
    fn out_of_range_settings_are_refused_by_name() {
        let mut c = config();
        c.batch = 0;
        let err = c.validate().err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("batch must be within 1..=1024, got 0"));
        let mut c = config();
        c.duration = Duration::ZERO;
        assert!(c.validate().is_err());
        let mut c = config();
        c.protocol = Protocol::Grpc;
        c.validate().expect("a gRPC run from the end is valid");
        c.from = StartFrom::First;
        let err = c
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("--from first"), "{err}");
        let mut c = config();
        c.protocol = Protocol::Grpc;
        c.receivers = 0;
        assert!(c.validate().is_err());
    }
}
