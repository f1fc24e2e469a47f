//! `cargo xtask bench peers`: Sluice beside NATS JetStream and Redis
//! Streams on the same machine, in one run.
//!
//! Three servers run side by side on free loopback ports, each with its
//! data under the work directory: Sluice's broker (`ASYNC_FLUSH`, embedded
//! name server), `nats-server -js` (a file-storage stream, written but not
//! synced per message) and `redis-server` (AOF, `appendfsync everysec`, no
//! RDB snapshots). For each in-flight level and each run, in turn, every
//! server gets closed-loop 1 KiB appends for the same time: Sluice from
//! `sluice-bench`, NATS from `sluice-bench nats-publish` (publish, then
//! wait for the stream's ack), Redis from `redis-benchmark ... XADD`. Each
//! measured load run is preceded by an unmeasured warm-up run (for Redis,
//! the short run that sizes the measured one). The CPU time each server
//! used during its measured run comes from `/proc/<pid>/stat`. One table
//! and `peers.json`.

use std::{fs, time::Duration};

use anyhow::Result;
use bench_report::Report;
use serde::Serialize;

use super::{
    peer_servers::{
        nats_publish, redis_benchmark, redis_requests_for, CpuClock, PeerServer, RedisResult,
    },
    runner::{load, strings, write_json, Broker, Setup, RUN_SLACK},
    Options,
};

/// In-flight levels by default, and with `--quick`.
const IN_FLIGHT: [u32; 3] = [1, 16, 64];
const QUICK_IN_FLIGHT: [u32; 2] = [1, 16];
/// Runs per level, by default.
const RUNS: u32 = 2;
/// Recorded seconds of each run, by default and with `--quick`.
const SECONDS: u64 = 5;
const QUICK_SECONDS: u64 = 2;
/// Seconds of the unmeasured warm-up run before each measured run.
const WARMUP_SECS: u64 = 1;
/// XADDs of the Redis warm-up run, which also measures the rate that sizes
/// the measured run.
const REDIS_WARMUP_REQUESTS: u64 = 10_000;
/// Body size of every message.
const BODY: usize = 1024;

/// The servers compared, in the order they run.
const SERVERS: [&str; 3] = ["sluice", "nats", "redis"];

/// What the experiment does.
#[derive(Debug, Clone, Serialize)]
struct Plan {
    in_flight: Vec<u32>,
    runs: u32,
    seconds: u64,
    build: &'static str,
}

impl Plan {
    fn new(options: &Options) -> Self {
        let quick = options.quick;
        Self {
            in_flight: options.in_flight.clone().unwrap_or_else(|| {
                if quick {
                    QUICK_IN_FLIGHT.to_vec()
                } else {
                    IN_FLIGHT.to_vec()
                }
            }),
            runs: options.runs.unwrap_or(if quick { 1 } else { RUNS }),
            seconds: options
                .seconds
                .unwrap_or(if quick { QUICK_SECONDS } else { SECONDS }),
            build: options.build(),
        }
    }
}

/// One measured run of one server: a cell of the table and an entry of
/// `peers.json`.
#[derive(Debug, Clone, Serialize)]
struct Measured {
    server: &'static str,
    in_flight: u32,
    run: u32,
    msgs_per_sec: f64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    /// Messages the server took in during the measured run.
    messages: u64,
    /// CPU seconds the server used during the measured run.
    cpu_s: f64,
    /// `cpu_s` per message, in µs.
    cpu_us_per_msg: Option<f64>,
    /// The load tool's report (Sluice and NATS).
    #[serde(skip_serializing_if = "Option::is_none")]
    report: Option<Report>,
    /// What `redis-benchmark` printed (Redis).
    #[serde(skip_serializing_if = "Option::is_none")]
    redis: Option<RedisResult>,
}

impl Measured {
    fn from_report(server: &'static str, run: u32, report: Report, cpu_s: f64) -> Self {
        let messages = report.sent;
        Self {
            server,
            in_flight: report.in_flight.unwrap_or(0),
            run,
            msgs_per_sec: report.ok_per_sec,
            p50_ms: report.latency_ms.map(|l| l.p50),
            p99_ms: report.latency_ms.map(|l| l.p99),
            messages,
            cpu_s,
            cpu_us_per_msg: per_msg(cpu_s, messages),
            report: Some(report),
            redis: None,
        }
    }

    fn from_redis(in_flight: u32, run: u32, result: RedisResult, cpu_s: f64) -> Self {
        Self {
            server: "redis",
            in_flight,
            run,
            msgs_per_sec: result.rps,
            p50_ms: result.p50_ms,
            p99_ms: result.p99_ms,
            messages: result.requests,
            cpu_s,
            cpu_us_per_msg: per_msg(cpu_s, result.requests),
            report: None,
            redis: Some(result),
        }
    }
}

fn per_msg(cpu_s: f64, messages: u64) -> Option<f64> {
    (messages > 0).then(|| cpu_s * 1e6 / messages as f64)
}

/// The median of one server at one level, over its runs.
#[derive(Debug, Clone, Serialize)]
struct Median {
    server: &'static str,
    in_flight: u32,
    msgs_per_sec: f64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    cpu_us_per_msg: Option<f64>,
}

/// What `peers.json` holds.
#[derive(Debug, Serialize)]
struct Results<'a> {
    plan: &'a Plan,
    machine: &'a Machine,
    runs: &'a [Measured],
    medians: Vec<Median>,
}

/// The machine the experiment ran on.
#[derive(Debug, Clone, Serialize)]
struct Machine {
    cpus: usize,
    cpu_model: String,
    memory_gib: f64,
}

impl Machine {
    fn read() -> Self {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Self {
            cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            cpu_model: field_of(&cpuinfo, "model name").unwrap_or_else(|| "unknown".to_owned()),
            memory_gib: field_of(&meminfo, "MemTotal")
                .and_then(|v| v.trim_end_matches("kB").trim().parse::<f64>().ok())
                .map_or(0.0, |kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0),
        }
    }
}

/// The value of the first `key: value` line of a `/proc` file.
fn field_of(text: &str, key: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_owned())
    })
}

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
    let plan = Plan::new(options);
    let clock = CpuClock::new();
    let sluice = Broker::start(setup, "sluice", &["flushDiskType=ASYNC_FLUSH".to_owned()])?;
    let nats = PeerServer::nats(setup)?;
    let redis = PeerServer::redis(setup)?;
    let mut rows = Vec::new();
    for &in_flight in &plan.in_flight {
        for run in 1..=plan.runs {
            rows.push(run_sluice(setup, &clock, &sluice, &plan, in_flight, run)?);
            rows.push(run_nats(setup, &clock, &nats, &plan, in_flight, run)?);
            rows.push(run_redis(&clock, &redis, &plan, in_flight, run)?);
        }
    }
    // The servers go before the results are written, also on error (drop).
    sluice.stop();
    drop(nats);
    drop(redis);
    let machine = Machine::read();
    println!(
        "peers: closed loop, 1 KiB messages, {} s per run after a {WARMUP_SECS} s warm-up run, {} run(s), {} build; \
         Sluice ASYNC_FLUSH, NATS JetStream file storage (not synced per message), Redis AOF everysec; \
         {} CPUs ({}), {} GiB, servers and load tools on the same CPUs",
        plan.seconds, plan.runs, plan.build, machine.cpus, machine.cpu_model, machine.memory_gib
    );
    print!("{}", peers_table(&plan, &rows));
    let file = setup.out.join("peers.json");
    let results = Results {
        plan: &plan,
        machine: &machine,
        runs: &rows,
        medians: medians(&plan, &rows),
    };
    write_json(&file, &results)?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// Connections of Sluice's load tool by in-flight level, as in `closed`.
fn sluice_connections(in_flight: u32) -> u32 {
    match in_flight {
        0..=1 => 1,
        2..=31 => 2,
        _ => 4,
    }
}

fn run_sluice(
    setup: &Setup,
    clock: &CpuClock,
    broker: &Broker,
    plan: &Plan,
    in_flight: u32,
    run: u32,
) -> Result<Measured> {
    let args = |secs: u64| {
        strings(&[
            "--in-flight",
            &in_flight.to_string(),
            "--connections",
            &sluice_connections(in_flight).to_string(),
            "--duration",
            &secs.to_string(),
            "--warmup",
            "0",
            "--size",
            &BODY.to_string(),
        ])
    };
    let name = format!("peers-sluice-{in_flight}-{run}");
    load(setup, broker, &format!("{name}-warmup"), &args(WARMUP_SECS))?;
    let before = clock.seconds(broker.pid())?;
    let (_, report) = load(setup, broker, &name, &args(plan.seconds))?;
    let cpu_s = clock.seconds(broker.pid())? - before;
    Ok(Measured::from_report("sluice", run, report, cpu_s))
}

fn run_nats(
    setup: &Setup,
    clock: &CpuClock,
    nats: &PeerServer,
    plan: &Plan,
    in_flight: u32,
    run: u32,
) -> Result<Measured> {
    let name = format!("peers-nats-{in_flight}-{run}");
    nats_publish(
        setup,
        nats,
        &format!("{name}-warmup"),
        in_flight,
        0,
        WARMUP_SECS,
    )?;
    let before = clock.seconds(nats.pid())?;
    let report = nats_publish(setup, nats, &name, in_flight, 0, plan.seconds)?;
    let cpu_s = clock.seconds(nats.pid())? - before;
    Ok(Measured::from_report("nats", run, report, cpu_s))
}

fn run_redis(
    clock: &CpuClock,
    redis: &PeerServer,
    plan: &Plan,
    in_flight: u32,
    run: u32,
) -> Result<Measured> {
    let limit = Duration::from_secs(plan.seconds * 3) + RUN_SLACK;
    let warmup = redis_benchmark(redis, in_flight, REDIS_WARMUP_REQUESTS, BODY, limit)?;
    let requests = redis_requests_for(warmup.rps, plan.seconds);
    let before = clock.seconds(redis.pid())?;
    let result = redis_benchmark(redis, in_flight, requests, BODY, limit)?;
    let cpu_s = clock.seconds(redis.pid())? - before;
    Ok(Measured::from_redis(in_flight, run, result, cpu_s))
}

/// The median of `values` (the mean of the middle two for an even count).
fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Medians over the runs of each server at each level.
fn medians(plan: &Plan, rows: &[Measured]) -> Vec<Median> {
    let mut out = Vec::new();
    for &in_flight in &plan.in_flight {
        for server in SERVERS {
            let of: Vec<&Measured> = rows
                .iter()
                .filter(|r| r.server == server && r.in_flight == in_flight)
                .collect();
            let pick = |f: fn(&Measured) -> Option<f64>| {
                median(&mut of.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
            };
            if let Some(msgs_per_sec) = pick(|r| Some(r.msgs_per_sec)) {
                out.push(Median {
                    server,
                    in_flight,
                    msgs_per_sec,
                    p50_ms: pick(|r| r.p50_ms),
                    p99_ms: pick(|r| r.p99_ms),
                    cpu_us_per_msg: pick(|r| r.cpu_us_per_msg),
                });
            }
        }
    }
    out
}

/// Throughput (p50/p99 ms), e.g. `12345 (0.071/0.239)`.
fn cell(msgs_per_sec: f64, p50: Option<f64>, p99: Option<f64>) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    format!("{msgs_per_sec:.0} ({}/{})", ms(p50), ms(p99))
}

fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".to_owned()
    }
}

/// One line of the table from the three servers' figures (Sluice, NATS,
/// Redis): `(msgs/s, p50, p99, CPU µs/msg)` each.
fn table_line(label: &str, in_flight: u32, figures: [Option<Figures>; 3]) -> String {
    let cells: Vec<String> = figures
        .iter()
        .map(|f| f.map_or_else(|| "-".to_owned(), |f| cell(f.0, f.1, f.2)))
        .collect();
    let cpu: Vec<String> = figures
        .iter()
        .map(|f| {
            f.and_then(|f| f.3)
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
        })
        .collect();
    let rate = |i: usize| figures[i].map_or(0.0, |f| f.0);
    format!(
        "{:>9}  {:<7}{:>24}{:>24}{:>24}{:>22}{:>8}{:>8}\n",
        in_flight,
        label,
        cells[0],
        cells[1],
        cells[2],
        cpu.join("/"),
        ratio(rate(0), rate(1)),
        ratio(rate(0), rate(2)),
    )
}

/// msgs/s, p50 ms, p99 ms, CPU µs per message.
type Figures = (f64, Option<f64>, Option<f64>, Option<f64>);

/// The table: per level, a line per run and a median line.
fn peers_table(plan: &Plan, rows: &[Measured]) -> String {
    let mut out = format!(
        "{:>9}  {:<7}{:>24}{:>24}{:>24}{:>22}{:>8}{:>8}\n",
        "in flight",
        "run",
        "Sluice msgs/s (p50/p99)",
        "NATS msgs/s (p50/p99)",
        "Redis msgs/s (p50/p99)",
        "CPU µs/msg S/N/R",
        "S/N",
        "S/R"
    );
    let medians = medians(plan, rows);
    for &in_flight in &plan.in_flight {
        for run in 1..=plan.runs {
            let figures = SERVERS.map(|server| {
                rows.iter()
                    .find(|r| r.server == server && r.in_flight == in_flight && r.run == run)
                    .map(|r| (r.msgs_per_sec, r.p50_ms, r.p99_ms, r.cpu_us_per_msg))
            });
            out.push_str(&table_line(&run.to_string(), in_flight, figures));
        }
        let figures = SERVERS.map(|server| {
            medians
                .iter()
                .find(|m| m.server == server && m.in_flight == in_flight)
                .map(|m| (m.msgs_per_sec, m.p50_ms, m.p99_ms, m.cpu_us_per_msg))
        });
        out.push_str(&table_line("median", in_flight, figures));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runner::sample_report;

    fn plan() -> Plan {
        Plan {
            in_flight: vec![1, 16],
            runs: 2,
            seconds: 5,
            build: "release",
        }
    }

    fn rows() -> Vec<Measured> {
        let mut rows = Vec::new();
        for in_flight in [1, 16] {
            for run in 1..=2 {
                let mut report = sample_report(10_000.0 * f64::from(run), 0.1, 0.5, 1.0);
                report.in_flight = Some(in_flight);
                rows.push(Measured::from_report("sluice", run, report.clone(), 2.0));
                report.protocol = "nats".into();
                rows.push(Measured::from_report("nats", run, report, 1.0));
                let redis = RedisResult {
                    requests: 200_000,
                    rps: 40_000.0,
                    p50_ms: Some(0.05),
                    p99_ms: None,
                    seconds: 5.0,
                };
                rows.push(Measured::from_redis(in_flight, run, redis, 1.0));
            }
        }
        rows
    }

    #[test]
    fn medians_of_two_runs_are_their_means_and_of_one_the_value() {
        assert_eq!(median(&mut [3.0, 1.0]), Some(2.0));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut []), None);
        let m = medians(&plan(), &rows());
        assert_eq!(m.len(), 6);
        let sluice = &m[0];
        assert_eq!((sluice.server, sluice.in_flight), ("sluice", 1));
        assert_eq!(sluice.msgs_per_sec, 15_000.0);
        assert_eq!(m[2].p99_ms, None, "Redis printed no p99");
    }

    #[test]
    fn cpu_per_message_divides_the_cpu_time_by_the_messages() {
        let r = &rows()[2];
        assert_eq!(r.server, "redis");
        // 1 CPU second over 200,000 messages.
        assert_eq!(r.cpu_us_per_msg, Some(5.0));
        assert_eq!(per_msg(1.0, 0), None);
    }

    #[test]
    fn the_table_has_a_line_per_run_and_a_median_per_level_with_ratios() {
        let table = peers_table(&plan(), &rows());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 1 + 2 * 3, "{table}");
        assert!(lines[0].contains("Sluice msgs/s"), "{table}");
        let median: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(median[..2], ["1", "median"], "{table}");
        assert_eq!(median[2..4], ["15000", "(0.100/0.500)"], "{table}");
        assert_eq!(median[6..8], ["40000", "(0.050/-)"], "{table}");
        // Sluice/NATS 1.00, Sluice/Redis 15000/40000.
        assert_eq!(median[median.len() - 2..], ["1.00", "0.38"], "{table}");
    }

    #[test]
    fn proc_fields_are_found_by_key() {
        let text = "processor\t: 0\nmodel name\t: Some CPU @ 2.00GHz\n";
        assert_eq!(
            field_of(text, "model name").as_deref(),
            Some("Some CPU @ 2.00GHz")
        );
        assert_eq!(field_of(text, "MemTotal"), None);
    }
}
