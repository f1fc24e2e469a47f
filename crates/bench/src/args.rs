//! Command-line flags of `sluice-bench`: the producer benchmark (the
//! default, or `produce`), `consume`, `overload-report`, `create-topic` and
//! `nats-publish` (`drain` in [`crate::drain_args`]), and their conversion to
//! the settings of each.

use std::{path::PathBuf, time::Duration};

use anyhow::{bail, ensure, Context, Result};
use clap::{Parser, Subcommand};
use client_core::Secret;
use remoting_protocol::acl::Credentials;

use crate::{
    config::{Config, Mode, Protocol, TransactionEnd, DEFAULT_GRPC},
    consume::{ConsumeConfig, StartFrom, CONSUMER_GROUP},
    nats::NatsConfig,
};

pub use crate::drain_args::DrainArgs;

/// Load tool for RocketMQ-protocol brokers.
///
/// Without a subcommand it sends, as `produce` does: `SEND_MESSAGE_V2`
/// requests to one broker (`--broker`) or to every writable queue of a
/// topic's route (`--namesrv`), or gRPC `SendMessage` calls to a broker's
/// gRPC endpoint (`--protocol grpc --grpc host:port`), closed loop by default (`--in-flight`, 1 if
/// not given) or open loop (`--rate`, latency counted from the intended
/// send time), and reports throughput, latency percentiles and failures by
/// reason.
#[derive(Debug, Clone, Parser)]
#[command(name = "sluice-bench", version, args_conflicts_with_subcommands = true)]
pub struct Args {
    /// What to run; sending when none is given.
    #[command(subcommand)]
    pub command: Option<Command>,
    /// The flags of sending without a subcommand.
    #[command(flatten)]
    pub produce: ProduceArgs,
}

/// The subcommands.
#[derive(Debug, Clone, Subcommand)]
pub enum Command {
    /// Send messages (the same as giving no subcommand).
    Produce(ProduceArgs),
    /// Pull a topic's queues in parallel and report msgs/s, MB/s and
    /// end-to-end latency.
    Consume(ConsumeArgs),
    /// Summarize the overload experiment from the load tool's JSON reports:
    /// print its table, write overload.json and overload.png.
    OverloadReport(OverloadReportArgs),
    /// Create (or update) a topic on one broker, readable and writable.
    CreateTopic(CreateTopicArgs),
    /// Publish to a NATS JetStream stream, closed loop, each publish waiting
    /// for its acknowledgement; the same report as a send run's.
    NatsPublish(NatsPublishArgs),
    /// Measure how fast a consumer drains a backlog filled beforehand:
    /// Sluice's push consumer or a NATS JetStream pull consumer.
    Drain(DrainArgs),
    /// Measure how long the replication controllers take to commit one
    /// change, one at a time.
    ControllerCommit(ControllerCommitArgs),
}

/// Flags of `controller-commit`.
#[derive(Debug, Clone, clap::Args)]
pub struct ControllerCommitArgs {
    /// The controllers (`host:port`, `;`-separated); the leader is found.
    #[arg(long)]
    pub controller: String,
    /// How many changes to commit.
    #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub count: u64,
}

/// Flags of `nats-publish`.
#[derive(Debug, Clone, clap::Args)]
pub struct NatsPublishArgs {
    /// NATS server address (host:port).
    #[arg(long, default_value = "127.0.0.1:4222")]
    pub server: String,
    /// JetStream stream (file storage) holding the subject; created if
    /// missing.
    #[arg(long, default_value = "BENCH")]
    pub stream: String,
    /// Subject to publish to.
    #[arg(long, default_value = "bench")]
    pub subject: String,
    /// Payload size of each message, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds recorded after the warm-up.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Seconds sent before recording starts.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// Concurrent publishers, each waiting for its previous acknowledgement.
    #[arg(long, default_value_t = 1)]
    pub in_flight: u32,
    /// Client connections the publishers are spread over.
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    /// How long each publish waits for its acknowledgement, ms.
    #[arg(long, default_value_t = 3000)]
    pub timeout_ms: u64,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl NatsPublishArgs {
    /// The run these flags describe, checked.
    ///
    /// # Errors
    /// A message naming the first flag out of range.
    pub fn to_config(&self) -> Result<NatsConfig> {
        let config = NatsConfig {
            server: self.server.clone(),
            stream: self.stream.clone(),
            subject: self.subject.clone(),
            body_bytes: self.size,
            warmup: Duration::from_secs(self.warmup),
            duration: Duration::from_secs(self.duration),
            in_flight: self.in_flight,
            connections: self.connections,
            timeout: Duration::from_millis(self.timeout_ms),
            progress: true,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Flags of `create-topic`.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateTopicArgs {
    /// Broker address (host:port, the remoting port).
    #[arg(long, default_value = "127.0.0.1:10911")]
    pub broker: String,
    /// Topic to create.
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Read and write queues (1..=1024).
    #[arg(long, default_value_t = 8)]
    pub queues: u32,
    /// Timeout of the request in milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub timeout_ms: u64,
    /// What signs the request.
    #[command(flatten)]
    pub credentials: CredentialArgs,
}

impl CreateTopicArgs {
    /// Checks the flags.
    ///
    /// # Errors
    /// A message naming the first flag out of range.
    pub fn validate(&self) -> Result<()> {
        anyhow::ensure!(!self.topic.is_empty(), "topic must not be empty");
        anyhow::ensure!(
            (1..=1024).contains(&self.queues),
            "queues must be 1..=1024, got {}",
            self.queues
        );
        anyhow::ensure!(self.timeout_ms > 0, "timeout-ms must be above zero");
        self.credentials.credentials()?;
        Ok(())
    }
}

/// `--access-key` and `--secret-key`: the credentials that sign every
/// remoting request of a run, for brokers and name servers with access
/// control on (RocketMQ's session credentials).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct CredentialArgs {
    /// Access key (user name) that signs every remoting request; needs
    /// --secret-key. Without both, requests go unsigned.
    #[arg(long, value_name = "KEY", requires = "secret_key")]
    pub access_key: Option<String>,
    /// Secret key (password) of --access-key, which the signatures are made
    /// with.
    #[arg(long, value_name = "SECRET", requires = "access_key")]
    pub secret_key: Option<Secret>,
}

impl CredentialArgs {
    /// The credentials given; `None` for none.
    ///
    /// # Errors
    /// One flag without the other, or a blank one.
    pub fn credentials(&self) -> Result<Option<Credentials>> {
        match (&self.access_key, &self.secret_key) {
            (None, None) => Ok(None),
            (Some(access_key), Some(secret_key)) => {
                let secret_key = secret_key.expose();
                ensure!(
                    !access_key.trim().is_empty() && !secret_key.trim().is_empty(),
                    "access-key and secret-key must not be blank"
                );
                Ok(Some(Credentials::new(access_key, secret_key)))
            }
            _ => bail!("access-key and secret-key are given together or not at all"),
        }
    }
}

/// Flags of the producer benchmark.
#[derive(Debug, Clone, clap::Args)]
pub struct ProduceArgs {
    /// Protocol of the sends: remoting `SEND_MESSAGE_V2` to `--broker` (or
    /// the route from `--namesrv`), or gRPC `SendMessage` to `--grpc`.
    #[arg(long, value_enum, default_value = "remoting")]
    pub protocol: Protocol,
    /// The broker's gRPC endpoint (host:port, `grpcListenPort`), used with
    /// `--protocol grpc`.
    #[arg(long, default_value = DEFAULT_GRPC)]
    pub grpc: String,
    /// Broker address (host:port) to send to directly, over queues
    /// 0..queues.
    #[arg(long, default_value = "127.0.0.1:10911")]
    pub broker: String,
    /// Name server (host:port) to ask for the topic's route; sends then
    /// rotate over every writable queue of every master broker, and
    /// `--broker` is not used.
    #[arg(long, conflicts_with = "broker")]
    pub namesrv: Option<String>,
    /// Topic to send to.
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Queues to rotate over (queue ids 0..N).
    #[arg(long, default_value_t = 8)]
    pub queues: u32,
    /// Body size of each message, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Seconds recorded after the warm-up.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Seconds sent before recording starts.
    #[arg(long, default_value_t = 1)]
    pub warmup: u64,
    /// TCP connections (remoting) or HTTP/2 channels (gRPC); requests are
    /// spread over them round-robin.
    #[arg(long, default_value_t = 1)]
    pub connections: u32,
    /// Closed loop: this many concurrent senders, each waiting for its
    /// previous response [default: 1].
    #[arg(long, conflicts_with = "rate")]
    pub in_flight: Option<u32>,
    /// Open loop: requests per second on a fixed schedule.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Open loop: most requests awaiting a response; requests due beyond it
    /// are skipped and counted as `client_backlog`.
    #[arg(long, default_value_t = 100_000)]
    pub max_outstanding: u64,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 3000)]
    pub timeout_ms: u64,
    /// Put the property `DELAY` = N on every message (remoting only): the
    /// broker delivers it to the topic after delay level N's delay (level 3
    /// is 10 s with the default `messageDelayLevel`; levels above the
    /// highest count as the highest).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub delay_level: Option<u32>,
    /// Put the property `TIMER_DELAY_MS` = MS on every message (remoting
    /// only): the broker's timer wheel delivers it to the topic MS
    /// milliseconds after it stored it.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timer_delay_ms: Option<u64>,
    /// Closed loop: after a busy answer carrying `retryAfterMs`, wait that
    /// long before the next send (the report counts these waits and the
    /// sends refused again right after one).
    #[arg(long, conflicts_with = "rate")]
    pub honour_retry_after: bool,
    /// Send each message as the half of a transaction (remoting only), then
    /// commit or roll it back with `END_TRANSACTION` (a request counts both
    /// calls), or leave it open for the broker's checks.
    #[arg(long, value_enum, value_name = "END")]
    pub transaction: Option<TransactionEnd>,
    /// Send a `HEART_BEAT` naming the load tool's producer group on every
    /// connection first (remoting only), so that transaction checks reach it.
    #[arg(long)]
    pub producer_heartbeat: bool,
    /// Messages per request: above 1, each request is a
    /// `SEND_BATCH_MESSAGE` of this many messages of `--size` bytes
    /// (remoting only); the report counts requests and messages.
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Connect to the broker over TLS (remoting only), trusting any
    /// certificate, as RocketMQ's clients do by default, unless
    /// --tls-trust names the certificates to trust; the broker's
    /// `tlsServerMode` must be `permissive` or `enforcing`.
    #[arg(long)]
    pub tls: bool,
    /// PEM file of the certificates to trust instead of any: the broker's
    /// certificate must be one of them or signed by one. Needs --tls.
    #[arg(long, value_name = "PEM", requires = "tls")]
    pub tls_trust: Option<PathBuf>,
    /// What signs every request (remoting only).
    #[command(flatten)]
    pub credentials: CredentialArgs,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ProduceArgs {
    /// The run these flags describe, checked.
    ///
    /// # Errors
    /// A message naming the first flag out of range.
    pub fn to_run(&self) -> Result<(Config, Mode)> {
        let config = Config {
            protocol: self.protocol,
            broker: self.broker.clone(),
            grpc: self.grpc.clone(),
            namesrv: self.namesrv.clone(),
            topic: self.topic.clone(),
            queues: self.queues,
            body_bytes: self.size,
            warmup: Duration::from_secs(self.warmup),
            duration: Duration::from_secs(self.duration),
            connections: self.connections,
            timeout: Duration::from_millis(self.timeout_ms),
            delay_level: self.delay_level,
            timer_delay_ms: self.timer_delay_ms,
            progress: true,
            honour_retry_after: self.honour_retry_after,
            transaction: self.transaction,
            producer_heartbeat: self.producer_heartbeat,
            batch: self.batch,
            tls: self.tls,
            tls_trust: self.tls_trust.clone(),
            credentials: self.credentials.credentials()?,
        };
        let mode = match self.rate {
            Some(rate_per_sec) => Mode::Open {
                rate_per_sec,
                max_outstanding: self.max_outstanding,
            },
            None => Mode::Closed {
                in_flight: self.in_flight.unwrap_or(1),
            },
        };
        config.validate()?;
        mode.validate()?;
        Ok((config, mode))
    }
}

/// Flags of the consumer benchmark.
#[derive(Debug, Clone, clap::Args)]
pub struct ConsumeArgs {
    /// Name server(s) (host:port, `;`-separated) to find the topic's queues
    /// and brokers; a Sluice broker's embedded name server listens on 9876.
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub namesrv: String,
    /// Topic to read.
    #[arg(long, default_value = "BenchTopic")]
    pub topic: String,
    /// Consumer group the pulls declare (offsets are not committed). With
    /// `--protocol grpc` the group's POP position moves as it reads.
    #[arg(long, default_value = CONSUMER_GROUP)]
    pub group: String,
    /// `remoting`: `PULL_MESSAGE` with long polling on every queue of the
    /// route; `grpc`: `ReceiveMessage` then `AckMessage` to `--grpc`.
    #[arg(long, value_enum, default_value = "remoting")]
    pub protocol: Protocol,
    /// The broker's gRPC endpoint (host:port, `grpcListenPort`), used with
    /// `--protocol grpc`.
    #[arg(long, default_value = DEFAULT_GRPC)]
    pub grpc: String,
    /// Receives in flight at once with `--protocol grpc`.
    #[arg(long, default_value_t = 4)]
    pub receivers: usize,
    /// Where each queue starts: `last` reads what is sent during the run
    /// (end-to-end latency), `first` reads the backlog.
    #[arg(long, value_enum, default_value = "last")]
    pub from: StartFrom,
    /// Messages asked for per pull (1..=1024).
    #[arg(long, default_value_t = 32)]
    pub batch: u32,
    /// Seconds pulled.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// Timeout of each request in milliseconds (held pulls get more).
    #[arg(long, default_value_t = 3000)]
    pub timeout_ms: u64,
    /// Connect to the name servers and brokers over TLS (remoting only),
    /// trusting any certificate unless --tls-trust names the ones to
    /// trust.
    #[arg(long)]
    pub tls: bool,
    /// PEM file of the certificates to trust instead of any. Needs --tls.
    #[arg(long, value_name = "PEM", requires = "tls")]
    pub tls_trust: Option<PathBuf>,
    /// What signs every request (remoting only).
    #[command(flatten)]
    pub credentials: CredentialArgs,
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl ConsumeArgs {
    /// The run these flags describe, checked.
    ///
    /// # Errors
    /// A message naming the first flag out of range.
    pub fn to_config(&self) -> Result<ConsumeConfig> {
        let config = ConsumeConfig {
            namesrv: self.namesrv.clone(),
            topic: self.topic.clone(),
            group: self.group.clone(),
            protocol: self.protocol,
            grpc: self.grpc.clone(),
            receivers: self.receivers,
            from: self.from,
            batch: self.batch,
            duration: Duration::from_secs(self.duration),
            timeout: Duration::from_millis(self.timeout_ms),
            progress: true,
            tls: self.tls,
            tls_trust: self.tls_trust.clone(),
            credentials: self.credentials.credentials()?,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Flags of the overload experiment's summary.
#[derive(Debug, Clone, clap::Args)]
pub struct OverloadReportArgs {
    /// JSON report (`--json`) of the closed-loop run that measured capacity.
    #[arg(long)]
    pub capacity: PathBuf,
    /// An open-loop run's JSON report, as LABEL=FILE; may repeat.
    #[arg(long = "run", value_name = "LABEL=FILE", required = true)]
    pub runs: Vec<String>,
    /// The send queue's wait limit (`waitTimeMillsInSendQueue`), ms.
    #[arg(long, default_value_t = 200)]
    pub limit_ms: u64,
    /// What bounded the broker's capacity, as printed.
    #[arg(long, default_value = "not stated")]
    pub bound: String,
    /// Directory for overload.json and overload.png.
    #[arg(long)]
    pub out: PathBuf,
}

impl OverloadReportArgs {
    /// The `--run` flags split into labels and files.
    ///
    /// # Errors
    /// A `--run` value without `=`, or with an empty label or file.
    pub fn labelled_runs(&self) -> Result<Vec<(String, PathBuf)>> {
        self.runs
            .iter()
            .map(|r| {
                let (label, file) = r
                    .split_once('=')
                    .filter(|(l, f)| !l.is_empty() && !f.is_empty())
                    .with_context(|| format!("--run {r:?}: expected LABEL=FILE"))?;
                Ok((label.to_owned(), PathBuf::from(file)))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(Config, Mode)> {
        let all = std::iter::once("sluice-bench").chain(args.iter().copied());
        Args::try_parse_from(all)?.produce.to_run()
    }

    fn command(args: &[&str]) -> Result<Option<Command>> {
        let all = std::iter::once("sluice-bench").chain(args.iter().copied());
        Ok(Args::try_parse_from(all)?.command)
    }

    #[test]
    fn namesrv_replaces_the_broker() -> Result<()> {
        let (config, _) = parse(&["--namesrv", "127.0.0.1:9876"])?;
        assert_eq!(config.namesrv.as_deref(), Some("127.0.0.1:9876"));
        assert!(parse(&["--namesrv", "a:1", "--broker", "b:2"]).is_err());
        Ok(())
    }

    #[test]
    fn subcommands_take_their_own_flags() -> Result<()> {
        match command(&["produce", "--in-flight", "16"])? {
            Some(Command::Produce(p)) => {
                assert_eq!(p.to_run()?.1, Mode::Closed { in_flight: 16 });
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match command(&[
            "consume",
            "--topic",
            "T",
            "--from",
            "first",
            "--duration",
            "3",
        ])? {
            Some(Command::Consume(c)) => {
                let config = c.to_config()?;
                assert_eq!(config.topic, "T");
                assert_eq!(config.from, StartFrom::First);
                assert_eq!(config.duration, Duration::from_secs(3));
                assert_eq!(config.namesrv, "127.0.0.1:9876");
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match command(&[
            "overload-report",
            "--capacity",
            "c.json",
            "--run",
            "on=a.json",
            "--run",
            "off=b.json",
            "--out",
            "d",
        ])? {
            Some(Command::OverloadReport(o)) => {
                let runs = o.labelled_runs()?;
                assert_eq!(runs.len(), 2);
                assert_eq!(runs[1], ("off".to_owned(), PathBuf::from("b.json")));
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match command(&["create-topic", "--topic", "T", "--queues", "4"])? {
            Some(Command::CreateTopic(c)) => {
                c.validate()?;
                assert_eq!((c.topic.as_str(), c.queues), ("T", 4));
                assert_eq!(c.broker, "127.0.0.1:10911");
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        assert!(command(&["create-topic", "--queues", "0"])
            .and_then(|c| match c {
                Some(Command::CreateTopic(c)) => c.validate(),
                _ => Ok(()),
            })
            .is_err());
        assert!(command(&["consume", "--batch", "0"])
            .and_then(|c| match c {
                Some(Command::Consume(c)) => c.to_config().map(|_| ()),
                _ => Ok(()),
            })
            .is_err());
        Ok(())
    }

    #[test]
    fn no_flags_give_the_documented_defaults() -> Result<()> {
        let (config, mode) = parse(&[])?;
        assert_eq!(config.broker, "127.0.0.1:10911");
        assert_eq!(config.topic, "BenchTopic");
        assert_eq!(config.queues, 8);
        assert_eq!(config.body_bytes, 1024);
        assert_eq!(config.duration, Duration::from_secs(10));
        assert_eq!(config.warmup, Duration::from_secs(1));
        assert_eq!(config.connections, 1);
        assert_eq!(config.timeout, Duration::from_millis(3000));
        assert_eq!(mode, Mode::Closed { in_flight: 1 });
        assert_eq!(config.protocol, Protocol::Remoting);
        assert_eq!(config.grpc, "127.0.0.1:8081");
        assert_eq!(config.delay_level, None);
        Ok(())
    }

    #[test]
    fn delay_level_is_one_or_more() -> Result<()> {
        match command(&["produce", "--delay-level", "3"])? {
            Some(Command::Produce(p)) => assert_eq!(p.to_run()?.0.delay_level, Some(3)),
            other => anyhow::bail!("unexpected {other:?}"),
        }
        assert_eq!(parse(&["--delay-level", "18"])?.0.delay_level, Some(18));
        assert!(parse(&["--delay-level", "0"]).is_err());
        assert!(parse(&["--delay-level", "-1"]).is_err());
        assert!(parse(&["--protocol", "grpc", "--delay-level", "3"]).is_err());
        Ok(())
    }

    #[test]
    fn a_batch_is_one_or_more_remoting_messages_without_delays() -> Result<()> {
        assert_eq!(parse(&[])?.0.batch, 1);
        assert_eq!(parse(&["--batch", "32"])?.0.batch, 32);
        assert!(parse(&["--batch", "0"]).is_err());
        assert!(parse(&["--batch", "32", "--protocol", "grpc"]).is_err());
        assert!(parse(&["--batch", "32", "--delay-level", "3"]).is_err());
        assert!(parse(&["--batch", "32", "--transaction", "commit"]).is_err());
        // 4096 messages of 1 KiB are 4 MiB: the largest batch of that size.
        assert!(parse(&["--batch", "4096"]).is_ok());
        assert!(parse(&["--batch", "4097"]).is_err());
        Ok(())
    }

    #[test]
    fn protocol_grpc_sends_to_the_grpc_endpoint() -> Result<()> {
        let (config, mode) = parse(&[
            "--protocol",
            "grpc",
            "--grpc",
            "127.0.0.1:18081",
            "--in-flight",
            "8",
        ])?;
        assert_eq!(config.protocol, Protocol::Grpc);
        assert_eq!(config.grpc, "127.0.0.1:18081");
        assert_eq!(mode, Mode::Closed { in_flight: 8 });
        assert!(parse(&["--protocol", "http"]).is_err());
        assert!(parse(&["--protocol", "grpc", "--namesrv", "127.0.0.1:9876"]).is_err());
        Ok(())
    }

    #[test]
    fn rate_selects_the_open_loop() -> Result<()> {
        let (_, mode) = parse(&["--rate", "2500", "--max-outstanding", "50"])?;
        assert_eq!(
            mode,
            Mode::Open {
                rate_per_sec: 2500.0,
                max_outstanding: 50
            }
        );
        Ok(())
    }

    #[test]
    fn rate_and_in_flight_together_are_refused() {
        assert!(parse(&["--rate", "10", "--in-flight", "4"]).is_err());
    }

    #[test]
    fn access_and_secret_keys_sign_the_remoting_subcommands() -> Result<()> {
        let (config, _) = parse(&["--access-key", "alice", "--secret-key", "pw"])?;
        let credentials = config.credentials.context("no credentials")?;
        assert_eq!(
            (
                credentials.access_key.as_str(),
                credentials.secret_key.as_str()
            ),
            ("alice", "pw")
        );
        assert!(parse(&[])?.0.credentials.is_none());
        assert!(
            parse(&["--access-key", "alice"]).is_err(),
            "needs --secret-key"
        );
        assert!(
            parse(&["--secret-key", "pw"]).is_err(),
            "needs --access-key"
        );
        assert!(parse(&["--access-key", " ", "--secret-key", "pw"]).is_err());
        assert!(
            parse(&[
                "--protocol",
                "grpc",
                "--access-key",
                "a",
                "--secret-key",
                "b"
            ])
            .is_err(),
            "gRPC sends are not signed"
        );
        match command(&["produce", "--access-key", "a", "--secret-key", "b"])? {
            Some(Command::Produce(p)) => assert!(p.to_run()?.0.credentials.is_some()),
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match command(&["consume", "--access-key", "a", "--secret-key", "b"])? {
            Some(Command::Consume(c)) => {
                let credentials = c.to_config()?.credentials.context("no credentials")?;
                assert_eq!(credentials.access_key, "a");
                assert!(!format!("{c:?}").contains("\"b\""), "{c:?}");
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        match command(&["create-topic", "--access-key", "a", "--secret-key", "b"])? {
            Some(Command::CreateTopic(c)) => {
                c.validate()?;
                assert!(c.credentials.credentials()?.is_some());
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        assert!(command(&["create-topic", "--secret-key", "b"]).is_err());
        Ok(())
    }

    #[test]
    fn tls_trusts_any_certificate_unless_tls_trust_names_the_roots() -> Result<()> {
        let (config, _) = parse(&["--tls"])?;
        assert!(config.tls);
        assert_eq!(config.tls_trust, None);
        let (config, _) = parse(&["--tls", "--tls-trust", "/ca.pem"])?;
        assert_eq!(config.tls_trust, Some(PathBuf::from("/ca.pem")));
        assert!(parse(&["--tls-trust", "/ca.pem"]).is_err(), "needs --tls");
        Ok(())
    }

    #[test]
    fn zero_connections_or_duration_are_refused() {
        assert!(parse(&["--connections", "0"]).is_err());
        assert!(parse(&["--duration", "0"]).is_err());
        assert!(parse(&["--rate", "0"]).is_err());
    }
}
