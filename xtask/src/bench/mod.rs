//! `cargo xtask bench <experiment>`: benchmarks of a real broker process
//! driven by the load tool (`sluice-bench`), both built in release
//! (`--quick`: debug, short phases, for CI).
//!
//! - `overload`: measures the broker's sustainable rate (closed loop), then
//!   offers a multiple of it (2x) open loop with `waitTimeMillsInSendQueue`
//!   200, under adaptive admission (the default), early admission alone,
//!   and neither (RocketMQ's behaviour), each on a fresh broker;
//!   prints the table (`sluice-bench overload-report`) and writes
//!   `overload.json` and `overload.png` to the output directory. By default
//!   the capacity is bounded by a fault-injected put-lock delay
//!   (`faultPutLockDelayMills=1`), so that the load tool, which shares the
//!   CPUs with the broker, can offer twice what the broker sustains;
//!   `--bound cpu` removes the fault and says when the load tool could not
//!   keep up.
//! - `closed`: closed-loop throughput and latency of 1 KiB sends at 1, 16
//!   and 64 in flight under `ASYNC_FLUSH` and `SYNC_FLUSH`, one table, and
//!   `closed.json`.
//! - `protocols`: the same closed-loop sends over remoting and over gRPC
//!   against one broker (`ASYNC_FLUSH`): at 64 in flight remoting, gRPC,
//!   then remoting again (the difference between the two remoting runs
//!   shows how much the machine drifted), then 1 in flight over both; one
//!   table with the gRPC/remoting ratios, and `protocols.json`.
//! - `transactions`: transactional sends (half and commit) against plain
//!   ones at 64 in flight, and plain sends' latency beside a backlog of
//!   pending half messages with the broker's checks off and on (see
//!   `transactions.rs`); `transactions.json`.
//! - `peers`: Sluice (`ASYNC_FLUSH`) beside NATS JetStream (file storage,
//!   `nats-server -js`) and Redis Streams (`redis-server`, AOF `everysec`)
//!   on the same machine: closed-loop 1 KiB appends at 1, 16 and 64 in
//!   flight, the three servers in turn for each run (Sluice and NATS from
//!   the load tool, Redis from `redis-benchmark ... XADD`), throughput,
//!   p50/p99 and each server's CPU time per message from
//!   `/proc/<pid>/stat`; then batches (Sluice `SEND_BATCH_MESSAGE` against
//!   Redis's pipelined `XADD`), Sluice's own paths (`ASYNC_FLUSH`,
//!   `SYNC_FLUSH`, gRPC) at one level, and a backlog drained by Sluice's
//!   push consumer and a NATS JetStream pull consumer; a table per part
//!   with the ratios, and `peers.json` (see `peers.rs`; `peers_table.rs`
//!   holds the figures and tables, `peer_servers.rs` runs the NATS and
//!   Redis processes and tools, `peers_drain.rs` the drains).
//!
//! Each broker runs with its embedded name server (and its gRPC endpoint)
//! on free loopback ports,
//! its own store directory under the target directory and its log captured
//! there; it is killed when its phase ends, also on error. The working
//! directory is removed afterwards unless something failed.
//!
//! `runner.rs` holds what the experiments share (build, work directory,
//! broker process, load tool runs); `overload.rs`, `closed.rs` and
//! `protocols.rs` hold one experiment each, with its table.

mod closed;
mod overload;
mod peer_servers;
mod peers;
mod peers_drain;
mod peers_table;
mod protocols;
mod quota;
mod runner;
mod transactions;
mod two_topics;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use runner::run_experiment;

const USAGE: &str =
    "usage: cargo xtask bench <overload|closed|protocols|transactions|peers> [options]

  overload [--quick] [--out DIR] [--bound fault|cpu] [--fault-ms N]
           capacity, then 2x capacity with adaptive admission, early
           admission alone, and neither
           (--bound fault, the default: capacity bounded by
           faultPutLockDelayMills=N, default 1; cpu: no fault)
  closed   [--quick] [--out DIR] [--connections N]
           1, 16, 64 in flight, ASYNC_FLUSH and SYNC_FLUSH, 1 KiB messages
           (default 1, 2 and 4 connections)
  protocols [--quick] [--out DIR] [--connections N]
           one ASYNC_FLUSH broker: 64 in flight over remoting, gRPC, remoting
           again, then 1 in flight over both; 1 KiB messages, gRPC/remoting
           ratios (default 4 connections or channels at 64, 1 at 1)
  transactions [--quick] [--out DIR] [--halves N]
           half + commit against plain sends at 64 in flight; plain sends
           beside N pending half messages (default 1000000; quick 20000)
           with checks off and on
  peers    [--quick] [--out DIR] [--runs N] [--in-flight 1,16,64] [--seconds S]
           [--backlog N]
           Sluice (ASYNC_FLUSH) beside NATS JetStream (nats-server -js, file
           storage) and Redis Streams (redis-server, AOF everysec): closed-loop
           1 KiB appends at each in-flight level, the three in turn per run;
           batches of 32 (Sluice SEND_BATCH_MESSAGE, Redis 16-deep pipelines)
           at 16 in flight; Sluice ASYNC_FLUSH, SYNC_FLUSH and gRPC at 64 in
           flight; a backlog of N messages (default 1000000, quick 20000)
           drained by Sluice's push consumer and a NATS pull consumer.
           msgs/s, p50/p99 and server CPU µs per message, peers.json
           (default 2 runs of 5 s; quick: 1 run of 2 s, appends at 1 and 16
           in flight, paths at 16; needs nats-server, redis-server and
           redis-benchmark: .ci/install.sh)

  --quick  debug build and short phases (for CI)
  --out    where the results go (default <target>/bench)
  --set KEY=VALUE  a broker setting added to each broker's (may repeat)";

/// What bounds the broker's capacity in the overload experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Bound {
    /// `faultPutLockDelayMills` = this many ms.
    Fault(u64),
    /// Nothing injected: CPU and disk.
    Cpu,
}

/// Options shared by the experiments.
#[derive(Debug, Clone)]
struct Options {
    quick: bool,
    out: Option<PathBuf>,
    bound: Bound,
    connections: Option<u32>,
    /// Pending half messages of the transactions experiment.
    halves: Option<u64>,
    /// Extra broker settings (`key=value`), after the experiment's own.
    settings: Vec<String>,
    /// Runs per level of the peers experiment.
    runs: Option<u32>,
    /// In-flight levels of the peers experiment.
    in_flight: Option<Vec<u32>>,
    /// Recorded seconds of each run of the peers experiment.
    seconds: Option<u64>,
    /// Messages of each drain backlog of the peers experiment.
    backlog: Option<u64>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            quick: false,
            out: None,
            bound: Bound::Fault(1),
            connections: None,
            halves: None,
            settings: Vec::new(),
            runs: None,
            in_flight: None,
            seconds: None,
            backlog: None,
        }
    }
}

impl Options {
    /// `debug` or `release`: the build the experiment runs.
    fn build(&self) -> &'static str {
        if self.quick {
            "debug"
        } else {
            "release"
        }
    }

    /// `<sep> broker settings a=1 b=2`, or nothing without extra settings.
    fn settings_note(&self, sep: &str) -> String {
        if self.settings.is_empty() {
            String::new()
        } else {
            format!("{sep} broker settings {}", self.settings.join(" "))
        }
    }
}

/// `v`, the value of `flag`, as a number that `ok` accepts; otherwise an
/// error naming the flag, the value and what is `expected`.
fn number<T: std::str::FromStr + Copy>(
    flag: &str,
    v: &str,
    ok: impl Fn(T) -> bool,
    expected: &str,
) -> Result<T> {
    v.parse()
        .ok()
        .filter(|n| ok(*n))
        .with_context(|| format!("bench: {flag} {v:?}: expected {expected}"))
}

/// Parses `bench` arguments and runs the experiment.
pub fn main(root: &Path, args: &[String]) -> Result<()> {
    let Some((experiment, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(());
    };
    let mut options = Options::default();
    let mut bound_cpu = false;
    let mut fault_ms = 1;
    let mut it = rest.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("bench: {name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--quick" => options.quick = true,
            "--out" => options.out = Some(PathBuf::from(value("--out")?)),
            "--set" => {
                let v = value("--set")?;
                if !v.contains('=') {
                    bail!("bench: --set {v:?}: expected KEY=VALUE");
                }
                options.settings.push(v);
            }
            "--bound" => match value("--bound")?.as_str() {
                "fault" => bound_cpu = false,
                "cpu" => bound_cpu = true,
                other => bail!("bench: --bound {other:?}: expected fault or cpu"),
            },
            "--fault-ms" => {
                fault_ms = number(
                    "--fault-ms",
                    &value("--fault-ms")?,
                    |ms| ms >= 1,
                    "a whole number of ms, at least 1",
                )?;
            }
            "--connections" => {
                let v = value("--connections")?;
                options.connections = Some(number("--connections", &v, |n| n >= 1, "at least 1")?);
            }
            "--halves" => {
                let v = value("--halves")?;
                options.halves = Some(number("--halves", &v, |n| n >= 1, "at least 1")?);
            }
            "--runs" => {
                let v = value("--runs")?;
                options.runs = Some(number(
                    "--runs",
                    &v,
                    |n| (1..=100).contains(&n),
                    "1 to 100",
                )?);
            }
            "--seconds" => {
                let v = value("--seconds")?;
                let ok = |n| (1..=3600).contains(&n);
                options.seconds = Some(number("--seconds", &v, ok, "1 to 3600")?);
            }
            "--backlog" => {
                let v = value("--backlog")?;
                let ok = |n| (1..=100_000_000).contains(&n);
                options.backlog = Some(number("--backlog", &v, ok, "1 to 100000000")?);
            }
            "--in-flight" => {
                let v = value("--in-flight")?;
                options.in_flight = Some(parse_levels(&v).with_context(|| {
                    format!("bench: --in-flight {v:?}: expected levels like 1,16,64 (1 to 10000)")
                })?);
            }
            other => bail!("bench: unknown option {other:?}\n\n{USAGE}"),
        }
    }
    options.bound = if bound_cpu {
        Bound::Cpu
    } else {
        Bound::Fault(fault_ms)
    };
    match experiment.as_str() {
        "overload" => run_experiment(root, &options, "overload", overload::run),
        "closed" => run_experiment(root, &options, "closed", closed::run),
        "protocols" => run_experiment(root, &options, "protocols", protocols::run),
        "transactions" => run_experiment(root, &options, "transactions", transactions::run),
        "peers" => run_experiment(root, &options, "peers", peers::run),
        other => bail!("bench: unknown experiment {other:?}\n\n{USAGE}"),
    }
}

/// `1,16,64` as levels, each 1 to 10000; at most 16 of them.
fn parse_levels(text: &str) -> Option<Vec<u32>> {
    let levels = text
        .split(',')
        .map(|l| l.trim().parse().ok().filter(|n| (1..=10_000).contains(n)))
        .collect::<Option<Vec<u32>>>()?;
    (levels.len() <= 16).then_some(levels)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner::strings;

    #[test]
    fn unknown_experiments_and_options_are_refused() {
        let root = Path::new(".");
        assert!(main(root, &strings(&["nothing"])).is_err());
        assert!(main(root, &strings(&["overload", "--bound", "disk"])).is_err());
        assert!(main(root, &strings(&["overload", "--fault-ms", "0"])).is_err());
        assert!(main(root, &strings(&["closed", "--fast"])).is_err());
        assert!(main(root, &strings(&["closed", "--set", "novalue"])).is_err());
        assert!(main(root, &strings(&["protocols", "--connections", "0"])).is_err());
        assert!(main(root, &strings(&["transactions", "--halves", "0"])).is_err());
        assert!(main(root, &strings(&["peers", "--runs", "0"])).is_err());
        assert!(main(root, &strings(&["peers", "--seconds", "x"])).is_err());
        assert!(main(root, &strings(&["peers", "--in-flight", "1,,16"])).is_err());
        assert!(main(root, &strings(&["peers", "--backlog", "0"])).is_err());
    }

    #[test]
    fn in_flight_levels_are_a_comma_separated_list() {
        assert_eq!(parse_levels("1,16,64"), Some(vec![1, 16, 64]));
        assert_eq!(parse_levels(" 4 "), Some(vec![4]));
        assert_eq!(parse_levels("0,16"), None);
        assert_eq!(parse_levels("1,x"), None);
        assert_eq!(parse_levels(""), None);
    }
}
