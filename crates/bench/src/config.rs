//! What a run does: the broker and topic to send to, over which
//! [`Protocol`], how long, over how many connections, and in which [`Mode`].

use std::{path::PathBuf, time::Duration};

use anyhow::{ensure, Result};
use client_core::Secret;
use remoting_protocol::acl::Credentials;

/// The gRPC endpoint sent to by default (`grpcListenPort` 8081 on this host).
pub const DEFAULT_GRPC: &str = "127.0.0.1:8081";

/// Largest body accepted: RocketMQ's default `maxMessageSize` (4 MiB).
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// The protocol the sends use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Protocol {
    /// RocketMQ remoting `SEND_MESSAGE_V2` over TCP connections to `broker`
    /// (or to the brokers of the route from `namesrv`).
    #[default]
    Remoting,
    /// RocketMQ 5 gRPC `SendMessage`, one message per call, over HTTP/2
    /// channels (plain h2c) to `grpc`.
    Grpc,
}

impl Protocol {
    /// The name printed and written in reports: `remoting` or `grpc`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Remoting => "remoting",
            Protocol::Grpc => "grpc",
        }
    }
}

/// Settings shared by both modes.
#[derive(Debug, Clone)]
pub struct Config {
    /// The protocol of the sends.
    pub protocol: Protocol,
    /// Broker address (`host:port`) the requests go to directly, unless
    /// `namesrv` is given.
    pub broker: String,
    /// Address (`host:port`) of the broker's gRPC endpoint
    /// (`grpcListenPort`), used with [`Protocol::Grpc`].
    pub grpc: String,
    /// Name server (`host:port`) to ask for the topic's route; the sends then
    /// rotate over every writable queue of every master broker in it, and
    /// `broker` and `queues` are not used (except `queues` as the cap of a
    /// borrowed auto-create route).
    pub namesrv: Option<String>,
    /// Topic to send to.
    pub topic: String,
    /// Queues the requests rotate over (ids `0..queues`). At least 1.
    pub queues: u32,
    /// Body size of each message. At most [`MAX_BODY_BYTES`].
    pub body_bytes: usize,
    /// Time sent before recording starts; its requests are not counted.
    pub warmup: Duration,
    /// Time recorded after the warm-up. Must not be zero.
    pub duration: Duration,
    /// TCP connections (remoting) or HTTP/2 channels (gRPC) the requests are
    /// spread over, round-robin. At least 1.
    pub connections: u32,
    /// How long each request waits for its response. Must not be zero.
    pub timeout: Duration,
    /// Delay level put in every message's `DELAY` property, so that the
    /// broker holds it in `SCHEDULE_TOPIC_XXXX` for that level's delay
    /// before storing it in `topic`; `None` sends without the property.
    /// At least 1; remoting only (the gRPC endpoint refuses `DELAY`).
    pub delay_level: Option<u32>,
    /// Timer delay (ms) put in every message's `TIMER_DELAY_MS` property,
    /// so that the broker holds it on its timer wheel until that long after
    /// it stored it; `None` sends without it. Remoting only, and not with a
    /// delay level (which would win).
    pub timer_delay_ms: Option<u64>,
    /// Send every message as the half of a transaction (remoting only) and,
    /// unless [`TransactionEnd::Open`], end it with `END_TRANSACTION` once
    /// stored: a request then counts both calls.
    pub transaction: Option<TransactionEnd>,
    /// Declare the load tool a producer of its group with a `HEART_BEAT` on
    /// every connection (remoting only), so that the broker's transaction
    /// checks reach it (it ignores them).
    pub producer_heartbeat: bool,
    /// Messages per request: 1 sends `SEND_MESSAGE_V2`; more send
    /// `SEND_BATCH_MESSAGE` with this many messages of `body_bytes` each
    /// (remoting only, without delays or transactions). At least 1.
    pub batch: u32,
    /// Remoting over TLS, trusting any certificate (as RocketMQ's clients
    /// do by default) unless `tls_trust` names the roots: the broker's
    /// `tlsServerMode` must be `permissive` or `enforcing`. Remoting only.
    pub tls: bool,
    /// With `tls`, the PEM file of the certificates to trust instead of
    /// any: the broker's certificate must be one of them or signed by one.
    /// Only with `tls`.
    pub tls_trust: Option<PathBuf>,
    /// Signs every remoting request (route lookups included) with these
    /// credentials; `None` sends them unsigned. Remoting only.
    pub credentials: Option<Credentials>,
    /// Print a progress line to stderr every second.
    pub progress: bool,
    /// Closed loop: after a busy answer that carries `retryAfterMs`, the
    /// sender waits that long before its next send, as Sluice's producer
    /// does for quota answers.
    pub honour_retry_after: bool,
}

/// How each transactional send ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TransactionEnd {
    /// `END_TRANSACTION` commit: the message is delivered.
    Commit,
    /// `END_TRANSACTION` rollback: nothing is delivered.
    Rollback,
    /// No end: the half stays pending until the broker's checks settle it.
    Open,
}

/// How requests are paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `in_flight` senders, each sending its next request when the previous
    /// response arrives. Latency runs from the actual send.
    Closed {
        /// Concurrent senders. At least 1.
        in_flight: u32,
    },
    /// Requests at fixed intervals whatever the responses do. Latency runs
    /// from the intended send time, so a stalled broker cannot hide its
    /// stalls by slowing the sender (no coordinated omission).
    Open {
        /// Requests per second. Finite and above zero.
        rate_per_sec: f64,
        /// Most requests awaiting a response; a request due while this many
        /// are outstanding is skipped and counted as `client_backlog`.
        max_outstanding: u64,
    },
}

impl Config {
    /// Defaults for `broker`: remoting, topic `BenchTopic`, 8 queues, 1 KiB
    /// bodies, 1 s warm-up, 10 s recorded, 1 connection, 3 s timeout,
    /// no delay level, progress on; the gRPC endpoint is `127.0.0.1:8081`.
    pub fn new(broker: impl Into<String>) -> Self {
        Self {
            protocol: Protocol::Remoting,
            broker: broker.into(),
            grpc: DEFAULT_GRPC.into(),
            namesrv: None,
            topic: "BenchTopic".into(),
            queues: 8,
            body_bytes: 1024,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(10),
            connections: 1,
            timeout: Duration::from_secs(3),
            delay_level: None,
            timer_delay_ms: None,
            honour_retry_after: false,
            transaction: None,
            producer_heartbeat: false,
            batch: 1,
            tls: false,
            tls_trust: None,
            credentials: None,
            progress: true,
        }
    }

    /// Checks the ranges documented on each field.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(!self.broker.is_empty(), "broker address must not be empty");
        ensure!(
            self.namesrv.as_ref().is_none_or(|n| !n.is_empty()),
            "namesrv address must not be empty"
        );
        ensure!(!self.topic.is_empty(), "topic must not be empty");
        ensure!(
            self.tls || self.tls_trust.is_none(),
            "tls-trust is only used with tls"
        );
        if self.protocol == Protocol::Grpc {
            ensure!(!self.grpc.is_empty(), "grpc address must not be empty");
            ensure!(
                self.namesrv.is_none(),
                "namesrv is not used with protocol grpc: give the broker's gRPC endpoint \
                 (grpc host:port) instead"
            );
            ensure!(
                self.body_bytes >= 1,
                "size must be at least 1 byte with protocol grpc (the gRPC endpoint refuses \
                 empty bodies)"
            );
            ensure!(
                self.timer_delay_ms.is_none(),
                "timer-delay-ms is not used with protocol grpc: send DELAY messages with a \
                 delivery timestamp instead"
            );
            ensure!(
                self.delay_level.is_none(),
                "delay-level is not used with protocol grpc: the gRPC endpoint refuses the DELAY \
                 property"
            );
            ensure!(
                self.transaction.is_none() && !self.producer_heartbeat,
                "transaction and producer-heartbeat are remoting only"
            );
            ensure!(
                !self.tls,
                "tls is remoting only: the gRPC endpoint does not serve TLS yet"
            );
            ensure!(
                self.credentials.is_none(),
                "access-key and secret-key are remoting only: gRPC sends are not signed"
            );
        }
        ensure!(
            self.transaction.is_none()
                || (self.delay_level.is_none() && self.timer_delay_ms.is_none()),
            "transaction excludes delay-level and timer-delay-ms"
        );
        ensure!(self.queues >= 1, "queues must be at least 1");
        ensure!(
            self.body_bytes <= MAX_BODY_BYTES,
            "size must be at most {MAX_BODY_BYTES} bytes, got {}",
            self.body_bytes
        );
        ensure!(!self.duration.is_zero(), "duration must be above zero");
        ensure!(self.connections >= 1, "connections must be at least 1");
        ensure!(!self.timeout.is_zero(), "timeout must be above zero");
        ensure!(
            self.delay_level.is_none() || self.timer_delay_ms.is_none(),
            "delay-level and timer-delay-ms exclude each other (a delay level wins over a timer)"
        );
        ensure!(self.batch >= 1, "batch must be at least 1 message");
        ensure!(
            self.batch == 1
                || (self.protocol == Protocol::Remoting
                    && self.delay_level.is_none()
                    && self.timer_delay_ms.is_none()
                    && self.transaction.is_none()),
            "batch is remoting only, and excludes delay-level, timer-delay-ms and transaction              (RocketMQ refuses delayed and transactional batches)"
        );
        ensure!(
            self.body_bytes.saturating_mul(self.batch as usize) <= MAX_BODY_BYTES,
            "a batch of {} messages of {} bytes is over {MAX_BODY_BYTES} bytes",
            self.batch,
            self.body_bytes
        );
        ensure!(
            self.delay_level != Some(0),
            "delay-level must be at least 1 (level 0 is no delay: leave the flag out)"
        );
        Ok(())
    }
}

/// `credentials` as the clients' `accessKey` and `secretKey` settings.
pub fn keys_of(credentials: Option<&Credentials>) -> (Option<String>, Option<Secret>) {
    match credentials {
        Some(c) => (
            Some(c.access_key.clone()),
            Some(Secret::new(c.secret_key.clone())),
        ),
        None => (None, None),
    }
}

impl Mode {
    /// Checks the ranges documented on each variant's fields.
    ///
    /// # Errors
    /// A message naming the setting out of range.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Mode::Closed { in_flight } => ensure!(in_flight >= 1, "in-flight must be at least 1"),
            Mode::Open {
                rate_per_sec,
                max_outstanding,
            } => {
                ensure!(
                    rate_per_sec.is_finite() && rate_per_sec > 0.0,
                    "rate must be a number above zero, got {rate_per_sec}"
                );
                ensure!(max_outstanding >= 1, "max-outstanding must be at least 1");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        assert!(Config::new("127.0.0.1:10911").validate().is_ok());
        assert!(Mode::Closed { in_flight: 1 }.validate().is_ok());
    }

    #[test]
    fn out_of_range_settings_are_refused_by_name() {
        let mut config = Config::new("127.0.0.1:10911");
        config.queues = 0;
        let err = config.validate().err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("queues must be at least 1"));
        let open = Mode::Open {
            rate_per_sec: 0.0,
            max_outstanding: 10,
        };
        assert!(open.validate().is_err());
        let nan = Mode::Open {
            rate_per_sec: f64::NAN,
            max_outstanding: 10,
        };
        assert!(nan.validate().is_err());
        assert!(Mode::Closed { in_flight: 0 }.validate().is_err());
    }

    #[test]
    fn grpc_refuses_a_name_server_empty_bodies_and_a_delay_level() {
        let mut config = Config::new("127.0.0.1:10911");
        config.protocol = Protocol::Grpc;
        assert!(config.validate().is_ok());
        config.body_bytes = 0;
        assert!(config.validate().is_err());
        config.body_bytes = 1;
        config.namesrv = Some("127.0.0.1:9876".into());
        let err = config.validate().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("namesrv")));
        config.namesrv = None;
        config.delay_level = Some(3);
        let err = config.validate().err().map(|e| e.to_string());
        assert!(err.is_some_and(|e| e.contains("delay-level")));
    }

    #[test]
    fn a_delay_level_is_at_least_one() {
        let mut config = Config::new("127.0.0.1:10911");
        config.delay_level = Some(3);
        assert!(config.validate().is_ok());
        config.delay_level = Some(0);
        assert!(config.validate().is_err());
    }
}
