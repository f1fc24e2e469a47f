//! Flags of `sluice-bench drain` and their conversion to a
//! [`DrainConfig`](crate::drain::DrainConfig).

use std::time::Duration;

use anyhow::Result;

/// Flags of `drain`. The flags of the other system are not used; those
/// without a default that only one system takes are refused for the other.
#[derive(Debug, Clone, clap::Args)]
pub struct DrainArgs {
    /// System measured: `sluice` (its push consumer) or `nats` (a JetStream
    /// pull consumer).
    #[arg(long, value_enum)]
    pub system: crate::drain::System,
    /// `fill` puts the messages in, `read` drains them from the beginning,
    /// `both` does one, then the other.
    #[arg(long, value_enum, default_value = "both")]
    pub phase: crate::drain::Phase,
    /// Messages put in by a fill and awaited by a read.
    #[arg(long, default_value_t = 1_000_000)]
    pub messages: u64,
    /// Body size of each message, in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Sluice: name server(s) (host:port, `;`-separated); a Sluice broker's
    /// embedded name server listens on 9876.
    #[arg(long, default_value = "127.0.0.1:9876")]
    pub namesrv: String,
    /// Sluice: broker (host:port, the remoting port) a fill creates the
    /// topic on [default: every master broker of the name server's route
    /// for the topic, or of the auto-create topic's for a new topic].
    #[arg(long)]
    pub broker: Option<String>,
    /// Sluice: topic filled and read.
    #[arg(long, default_value = "DrainTopic")]
    pub topic: String,
    /// Sluice: read and write queues of the topic a fill creates (1..=1024).
    #[arg(long, default_value_t = 8)]
    pub queues: u32,
    /// Sluice: messages per batch send of a fill.
    #[arg(long, default_value_t = crate::drain::DEFAULT_FILL_BATCH)]
    pub fill_batch: u32,
    /// Sluice: batch sends in flight during a fill [default: 16]; NATS:
    /// publish acknowledgements not yet awaited [default: 256].
    #[arg(long)]
    pub in_flight: Option<u32>,
    /// Sluice: messages per pull (`pullBatchSize`, 1..=1024) [default: the
    /// push consumer's]; NATS: messages per pull request [default: 1000].
    #[arg(long)]
    pub pull_batch: Option<u32>,
    /// Sluice: handler calls at once (`consumeThreadMax`) [default: the
    /// push consumer's].
    #[arg(long)]
    pub consume_threads: Option<usize>,
    /// Sluice: messages per handler call (`consumeMessageBatchMaxSize`,
    /// 1..=1024) [default: the push consumer's].
    #[arg(long)]
    pub consume_batch: Option<usize>,
    /// NATS: server address (host:port).
    #[arg(long, default_value = "127.0.0.1:4222")]
    pub server: String,
    /// NATS: stream (file storage) that a fill deletes and creates again and
    /// a read drains.
    #[arg(long, default_value = "DRAIN")]
    pub stream: String,
    /// NATS: subject published to and read.
    #[arg(long, default_value = "drain")]
    pub subject: String,
    /// Longest time of each phase, in seconds; a read that has not received
    /// every message by then fails, saying how many came.
    #[arg(long, default_value_t = 120)]
    pub timeout_secs: u64,
    /// Sluice: what signs every request of the fill and the read.
    #[command(flatten)]
    pub credentials: crate::args::CredentialArgs,
    /// Print each phase's report as one JSON object (a line each) instead of
    /// a line of text.
    #[arg(long)]
    pub json: bool,
}

impl DrainArgs {
    /// The run these flags describe, checked.
    ///
    /// # Errors
    /// A message naming the first flag out of range, or a flag the system
    /// does not take.
    pub fn to_config(&self) -> Result<crate::drain::DrainConfig> {
        use crate::drain::{DrainConfig, SluiceTarget, System, Target};
        use crate::drain_nats::{NatsTarget, DEFAULT_NATS_PULL_BATCH};
        let (target, in_flight) = match self.system {
            System::Sluice => (
                Target::Sluice(SluiceTarget {
                    namesrv: self.namesrv.clone(),
                    broker: self.broker.clone(),
                    topic: self.topic.clone(),
                    queues: self.queues,
                    fill_batch: self.fill_batch,
                    pull_batch: self.pull_batch,
                    consume_threads: self.consume_threads,
                    consume_batch: self.consume_batch,
                    credentials: self.credentials.credentials()?,
                }),
                crate::drain::DEFAULT_SLUICE_IN_FLIGHT,
            ),
            System::Nats => {
                for (flag, given) in [
                    ("--broker", self.broker.is_some()),
                    ("--consume-threads", self.consume_threads.is_some()),
                    ("--consume-batch", self.consume_batch.is_some()),
                    ("--access-key", self.credentials.access_key.is_some()),
                    ("--secret-key", self.credentials.secret_key.is_some()),
                ] {
                    anyhow::ensure!(!given, "{flag} is for --system sluice only");
                }
                (
                    Target::Nats(NatsTarget {
                        server: self.server.clone(),
                        stream: self.stream.clone(),
                        subject: self.subject.clone(),
                        pull_batch: self.pull_batch.unwrap_or(DEFAULT_NATS_PULL_BATCH),
                    }),
                    crate::drain::DEFAULT_NATS_IN_FLIGHT,
                )
            }
        };
        let config = DrainConfig {
            target,
            phase: self.phase,
            messages: self.messages,
            body_bytes: self.size,
            in_flight: self.in_flight.unwrap_or(in_flight),
            timeout: Duration::from_secs(self.timeout_secs),
            progress: true,
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::args::{Args, Command};

    fn command(args: &[&str]) -> Result<Option<Command>> {
        let all = std::iter::once("sluice-bench").chain(args.iter().copied());
        Ok(Args::try_parse_from(all)?.command)
    }

    fn drain(args: &[&str]) -> Result<crate::drain::DrainConfig> {
        match command(&[&["drain"], args].concat())? {
            Some(Command::Drain(d)) => d.to_config(),
            other => anyhow::bail!("unexpected {other:?}"),
        }
    }

    #[test]
    fn drain_takes_the_sluice_flags() -> Result<()> {
        use crate::drain::{Phase, SluiceTarget, Target};
        let config = drain(&[
            "--system",
            "sluice",
            "--namesrv",
            "127.0.0.1:9876",
            "--topic",
            "DrainTopic",
            "--messages",
            "1000000",
            "--size",
            "1024",
            "--phase",
            "fill",
            "--json",
            "--timeout-secs",
            "120",
        ])?;
        assert_eq!(config.phase, Phase::Fill);
        assert_eq!(config.messages, 1_000_000);
        assert_eq!(config.body_bytes, 1024);
        assert_eq!(config.timeout, Duration::from_secs(120));
        assert_eq!(config.in_flight, crate::drain::DEFAULT_SLUICE_IN_FLIGHT);
        assert_eq!(
            config.target,
            Target::Sluice(SluiceTarget {
                namesrv: "127.0.0.1:9876".into(),
                broker: None,
                topic: "DrainTopic".into(),
                queues: 8,
                fill_batch: 32,
                pull_batch: None,
                consume_threads: None,
                consume_batch: None,
                credentials: None,
            })
        );
        let config = drain(&[
            "--system",
            "sluice",
            "--broker",
            "127.0.0.1:10911",
            "--in-flight",
            "4",
            "--pull-batch",
            "64",
            "--consume-threads",
            "2",
            "--consume-batch",
            "16",
        ])?;
        assert_eq!(config.phase, Phase::Both);
        assert_eq!(config.in_flight, 4);
        match config.target {
            Target::Sluice(t) => {
                assert_eq!(t.broker.as_deref(), Some("127.0.0.1:10911"));
                let consumer = t.consumer_config("G");
                assert_eq!(consumer.pull_batch_size, 64);
                assert_eq!(consumer.consume_thread_max, 2);
                assert_eq!(consumer.consume_message_batch_max_size, 16);
                assert_eq!(consumer.access_key, None);
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        let signed = drain(&[
            "--system",
            "sluice",
            "--access-key",
            "alice",
            "--secret-key",
            "pw",
        ])?;
        match signed.target {
            Target::Sluice(t) => {
                let consumer = t.consumer_config("G");
                assert_eq!(consumer.access_key.as_deref(), Some("alice"));
                assert_eq!(consumer.secret_key.as_ref().map(|s| s.expose()), Some("pw"));
                assert!(consumer.validate().is_ok());
            }
            other => anyhow::bail!("unexpected {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn drain_takes_the_nats_flags() -> Result<()> {
        use crate::drain::{Phase, Target};
        use crate::drain_nats::NatsTarget;
        let config = drain(&[
            "--system",
            "nats",
            "--server",
            "127.0.0.1:4222",
            "--stream",
            "DRAIN",
            "--subject",
            "drain",
            "--messages",
            "1000000",
            "--size",
            "1024",
            "--phase",
            "read",
            "--json",
        ])?;
        assert_eq!(config.phase, Phase::Read);
        assert_eq!(config.in_flight, crate::drain::DEFAULT_NATS_IN_FLIGHT);
        assert_eq!(
            config.target,
            Target::Nats(NatsTarget {
                server: "127.0.0.1:4222".into(),
                stream: "DRAIN".into(),
                subject: "drain".into(),
                pull_batch: crate::drain_nats::DEFAULT_NATS_PULL_BATCH,
            })
        );
        match drain(&["--system", "nats", "--pull-batch", "500"])?.target {
            Target::Nats(t) => assert_eq!(t.pull_batch, 500),
            other => anyhow::bail!("unexpected {other:?}"),
        }
        Ok(())
    }

    #[test]
    fn drain_refuses_flags_out_of_range() {
        assert!(drain(&[]).is_err(), "--system is required");
        assert!(drain(&["--system", "kafka"]).is_err());
        assert!(drain(&["--system", "sluice", "--phase", "drain"]).is_err());
        assert!(drain(&["--system", "sluice", "--messages", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--size", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--timeout-secs", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--in-flight", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--fill-batch", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--queues", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--pull-batch", "1025"]).is_err());
        assert!(drain(&["--system", "sluice", "--consume-threads", "0"]).is_err());
        assert!(drain(&["--system", "sluice", "--consume-batch", "0"]).is_err());
        // 32 messages of 128 KiB do not fit a 4 MiB batch; 31 do.
        assert!(drain(&["--system", "sluice", "--size", "131072"]).is_err());
        assert!(drain(&[
            "--system",
            "sluice",
            "--size",
            "131072",
            "--fill-batch",
            "31"
        ])
        .is_ok());
        assert!(drain(&["--system", "nats", "--broker", "h:1"]).is_err());
        assert!(drain(&["--system", "nats", "--consume-threads", "4"]).is_err());
        assert!(drain(&["--system", "nats", "--access-key", "a", "--secret-key", "b"]).is_err());
        assert!(drain(&["--system", "sluice", "--access-key", "a"]).is_err());
        assert!(drain(&["--system", "nats", "--stream", "A.B"]).is_err());
        assert!(drain(&["--system", "nats", "--pull-batch", "0"]).is_err());
    }
}
