//! Command-line flags of `sluice-bench` and their conversion to a
//! [`Config`] and a [`Mode`].

use std::time::Duration;

use anyhow::Result;
use clap::Parser;

use crate::config::{Config, Mode};

/// Sends `SEND_MESSAGE_V2` requests straight to one broker and reports
/// throughput, latency percentiles and failures by reason.
///
/// Closed loop by default (`--in-flight`, 1 if not given); `--rate` switches
/// to an open loop whose latency counts from the intended send time.
#[derive(Debug, Clone, Parser)]
#[command(name = "sluice-bench", version)]
pub struct Args {
    /// Broker address (host:port); no name server is asked.
    #[arg(long, default_value = "127.0.0.1:10911")]
    pub broker: String,
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
    /// TCP connections; requests are spread over them round-robin.
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
    /// Print the report as one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

impl Args {
    /// The run these flags describe, checked.
    ///
    /// # Errors
    /// A message naming the first flag out of range.
    pub fn to_run(&self) -> Result<(Config, Mode)> {
        let config = Config {
            broker: self.broker.clone(),
            topic: self.topic.clone(),
            queues: self.queues,
            body_bytes: self.size,
            warmup: Duration::from_secs(self.warmup),
            duration: Duration::from_secs(self.duration),
            connections: self.connections,
            timeout: Duration::from_millis(self.timeout_ms),
            progress: true,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<(Config, Mode)> {
        let all = std::iter::once("sluice-bench").chain(args.iter().copied());
        Args::try_parse_from(all)?.to_run()
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
    fn zero_connections_or_duration_are_refused() {
        assert!(parse(&["--connections", "0"]).is_err());
        assert!(parse(&["--duration", "0"]).is_err());
        assert!(parse(&["--rate", "0"]).is_err());
    }
}
