//! `sluice-bench nats-publish`: closed-loop JetStream publishes to a NATS
//! server, for comparing Sluice with NATS on the same machine
//! (`cargo xtask bench peers`).
//!
//! Each of `in_flight` senders publishes a message to the subject and waits
//! for the stream's acknowledgement (`PubAck`) before its next publish,
//! as the closed loop of [`crate::run`] waits for each `SEND_MESSAGE_V2`
//! response. The stream (file storage, the subject only) is created first
//! unless it exists. The result is the same [`Report`] as a Sluice run's,
//! with protocol `nats`.
//!
//! # Invariants worth naming
//! - The run stops by itself: nothing starts after warm-up plus duration,
//!   and every publish waits at most the request timeout.
//! - Only publishes sent after the warm-up are recorded.

use std::{sync::Arc, time::Duration};

use anyhow::{ensure, Context as _, Result};
use async_nats::jetstream::{self, context::PublishErrorKind, stream::StorageType};
use bytes::Bytes;
use tokio::{task::JoinSet, time::Instant};

use crate::{
    config::{Config, Mode, Protocol, MAX_BODY_BYTES},
    outcome::Outcome,
    report::Report,
    window::{drain, stop_progress, Window},
};

/// Pause of a sender after a failed publish other than a timeout, so a
/// broken connection is not hammered in a tight loop.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

/// Extra time, beyond the request timeout, allowed for draining.
const DRAIN_SLACK: Duration = Duration::from_secs(1);

/// What a NATS publish run does.
#[derive(Debug, Clone)]
pub struct NatsConfig {
    /// Server address (`host:port`).
    pub server: String,
    /// JetStream stream the subject belongs to (created if missing).
    pub stream: String,
    /// Subject published to.
    pub subject: String,
    /// Payload size of each message. At most [`MAX_BODY_BYTES`].
    pub body_bytes: usize,
    /// Time sent before recording starts.
    pub warmup: Duration,
    /// Time recorded after the warm-up. Must not be zero.
    pub duration: Duration,
    /// Concurrent senders. At least 1.
    pub in_flight: u32,
    /// Client connections the senders are spread over. At least 1.
    pub connections: u32,
    /// How long each publish waits for its acknowledgement.
    pub timeout: Duration,
    /// Print a progress line to stderr every second.
    pub progress: bool,
}

impl NatsConfig {
    /// Checks the settings.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(!self.stream.is_empty(), "stream must not be empty");
        ensure!(!self.subject.is_empty(), "subject must not be empty");
        ensure!(
            self.body_bytes <= MAX_BODY_BYTES,
            "size must be at most {MAX_BODY_BYTES}"
        );
        ensure!(!self.duration.is_zero(), "duration must be above zero");
        ensure!(self.in_flight >= 1, "in-flight must be at least 1");
        ensure!(self.connections >= 1, "connections must be at least 1");
        ensure!(!self.timeout.is_zero(), "timeout must be above zero");
        Ok(())
    }

    /// The load tool's run settings these stand for, so that the report is
    /// built as a Sluice run's is.
    fn as_run(&self) -> Config {
        Config {
            protocol: Protocol::Remoting,
            broker: self.server.clone(),
            grpc: String::new(),
            namesrv: None,
            topic: self.subject.clone(),
            queues: 1,
            body_bytes: self.body_bytes,
            warmup: self.warmup,
            duration: self.duration,
            connections: self.connections,
            timeout: self.timeout,
            delay_level: None,
            timer_delay_ms: None,
            transaction: None,
            producer_heartbeat: false,
            batch: 1,
            tls: false,
            tls_trust: None,
            credentials: None,
            progress: self.progress,
            honour_retry_after: false,
        }
    }
}

/// What a failed publish counts as: no acknowledgement in time is a
/// timeout, anything else a connection error.
pub fn outcome_of(kind: &PublishErrorKind) -> Outcome {
    match kind {
        PublishErrorKind::TimedOut => Outcome::Timeout,
        _ => Outcome::ConnectionError,
    }
}

/// What the senders share.
struct Shared {
    contexts: Vec<jetstream::Context>,
    subject: String,
    payload: Bytes,
    timeout: Duration,
    window: Arc<Window>,
}

impl Shared {
    /// Publishes until the end, waiting for each acknowledgement.
    async fn sender(&self, index: usize) {
        let context = &self.contexts[index % self.contexts.len()];
        loop {
            let sent_at = Instant::now();
            if sent_at >= self.window.end {
                return;
            }
            let outcome = self.publish_one(context).await;
            self.window.record(sent_at, Instant::now(), &outcome);
            if matches!(outcome, Outcome::ConnectionError) {
                tokio::time::sleep(ERROR_PAUSE).await;
            }
        }
    }

    async fn publish_one(&self, context: &jetstream::Context) -> Outcome {
        let publish = async {
            let ack = context
                .publish(self.subject.clone(), self.payload.clone())
                .await?;
            ack.await
        };
        match tokio::time::timeout(self.timeout, publish).await {
            Ok(Ok(_)) => Outcome::Ok,
            Ok(Err(e)) => outcome_of(&e.kind()),
            Err(_) => Outcome::Timeout,
        }
    }
}

/// Connects, makes sure the stream exists, runs the closed loop and reports
/// the recorded part.
///
/// # Errors
/// Invalid settings, a server that cannot be reached, or a stream that
/// cannot be created.
pub async fn publish(config: &NatsConfig) -> Result<Report> {
    config.validate()?;
    let url = format!("nats://{}", config.server);
    let mut contexts = Vec::new();
    for _ in 0..config.connections {
        let client = async_nats::connect(&url)
            .await
            .with_context(|| format!("connect to {url}"))?;
        let context = jetstream::ContextBuilder::new()
            .timeout(config.timeout)
            .build(client);
        contexts.push(context);
    }
    contexts[0]
        .get_or_create_stream(jetstream::stream::Config {
            name: config.stream.clone(),
            subjects: vec![config.subject.clone()],
            storage: StorageType::File,
            ..Default::default()
        })
        .await
        .with_context(|| format!("create the stream {}", config.stream))?;
    let window = Arc::new(Window::begin(config.warmup, config.duration)?);
    let shared = Arc::new(Shared {
        contexts,
        subject: config.subject.clone(),
        payload: Bytes::from(vec![b'x'; config.body_bytes]),
        timeout: config.timeout,
        window: Arc::clone(&window),
    });
    let progress = window.spawn_progress(config.progress);
    let mut senders = JoinSet::new();
    for index in 0..config.in_flight as usize {
        let shared = Arc::clone(&shared);
        senders.spawn(async move { shared.sender(index).await });
    }
    drain(&mut senders, window.end + config.timeout + DRAIN_SLACK).await;
    stop_progress(progress).await;
    let mode = Mode::Closed {
        in_flight: config.in_flight,
    };
    let mut report = window.with_recorder(|r| r.report(&config.as_run(), mode));
    report.protocol = "nats".to_owned();
    report.broker = url;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Recorder;

    fn config() -> NatsConfig {
        NatsConfig {
            server: "127.0.0.1:4222".into(),
            stream: "BENCH".into(),
            subject: "bench".into(),
            body_bytes: 1024,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(5),
            in_flight: 16,
            connections: 1,
            timeout: Duration::from_secs(3),
            progress: false,
        }
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert!(config().validate().is_ok());
        let mut c = config();
        c.in_flight = 0;
        assert!(c.validate().is_err());
        let mut c = config();
        c.duration = Duration::ZERO;
        assert!(c.validate().is_err());
        let mut c = config();
        c.subject.clear();
        assert!(c.validate().is_err());
    }

    #[test]
    fn a_missing_ack_is_a_timeout_and_other_failures_connection_errors() {
        assert_eq!(outcome_of(&PublishErrorKind::TimedOut), Outcome::Timeout);
        assert_eq!(
            outcome_of(&PublishErrorKind::BrokenPipe),
            Outcome::ConnectionError
        );
        assert_eq!(
            outcome_of(&PublishErrorKind::StreamNotFound),
            Outcome::ConnectionError
        );
    }

    #[test]
    fn the_report_names_nats_and_its_settings() -> Result<()> {
        let c = config();
        let mut recorder = Recorder::new()?;
        recorder.record_in(1, &Outcome::Ok, Duration::from_micros(250));
        let report = recorder.report(&c.as_run(), Mode::Closed { in_flight: 16 });
        assert_eq!(report.in_flight, Some(16));
        assert_eq!(report.body_bytes, 1024);
        assert_eq!(report.topic, "bench");
        assert_eq!(report.ok, 1);
        Ok(())
    }

    #[tokio::test]
    async fn an_unreachable_server_is_an_error() {
        let mut c = config();
        // A port nothing listens on: bind one, then drop it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap_or(1);
        c.server = format!("127.0.0.1:{port}");
        c.timeout = Duration::from_millis(500);
        let outcome = tokio::time::timeout(Duration::from_secs(10), publish(&c)).await;
        assert!(matches!(outcome, Ok(Err(_))), "{outcome:?}");
    }
}
