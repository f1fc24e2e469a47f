//! What the `peers` experiment needs besides Sluice's broker: the NATS and
//! Redis server processes ([`PeerServer`]), runs of `redis-benchmark`
//! ([`redis_benchmark`]) and of `sluice-bench nats-publish`
//! ([`nats_publish`]), and the CPU time of a server process from
//! `/proc/<pid>/stat` ([`CpuClock`]).

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use bench_report::Report;
use proc_harness::{free_port, loopback, Launch, Proc};
use serde::Serialize;

use super::runner::{run_bounded, Setup, RUN_SLACK};

/// How long a peer server may take to accept connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);
/// Lines of a server log shown when something failed.
const LOG_TAIL_LINES: usize = 30;
/// Ticks per second of `/proc/<pid>/stat` when `getconf` cannot say.
const DEFAULT_CLK_TCK: u64 = 100;
/// The Redis stream the runs append to.
pub(super) const REDIS_STREAM: &str = "bench";
/// Most XADDs one `redis-benchmark` run is asked for.
const MAX_REDIS_REQUESTS: u64 = 50_000_000;
/// Fewest XADDs one `redis-benchmark` run is asked for.
const MIN_REDIS_REQUESTS: u64 = 1_000;

/// Where a program is: on `PATH`, or in `/usr/sbin` (where Debian puts
/// `nats-server`, not on every user's `PATH`).
pub(super) fn find_program(name: &str) -> Result<PathBuf> {
    let path = env::var_os("PATH").unwrap_or_default();
    env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/usr/bin")])
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .with_context(|| format!("{name} not found: install it with .ci/install.sh"))
}

/// A NATS or Redis server process on a free loopback port, its data under
/// the experiment's work directory; killed when dropped.
pub(super) struct PeerServer {
    proc: Proc,
    /// `127.0.0.1:port`.
    pub(super) addr: String,
    pub(super) port: u16,
}

impl PeerServer {
    /// `nats-server` with JetStream, file storage under `<work>/nats`.
    /// JetStream writes each message to its file at once and syncs the
    /// files on its own interval (two minutes by default), not per message.
    pub(super) fn nats(setup: &Setup) -> Result<Self> {
        let (port, dir, launch) = Self::prepare(setup, "nats", "nats-server")?;
        let launch = launch
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(&dir);
        Self::start(launch, port)
    }

    /// `redis-server` appending every write to its AOF file, synced once a
    /// second (`appendfsync everysec`), no RDB snapshots and no automatic
    /// AOF rewrite (a forked child on the same CPUs in the middle of a run),
    /// under `<work>/redis`.
    pub(super) fn redis(setup: &Setup) -> Result<Self> {
        let (port, dir, launch) = Self::prepare(setup, "redis", "redis-server")?;
        let launch = launch
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--dir"])
            .arg(&dir)
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "everysec",
                "--save",
                "",
                "--auto-aof-rewrite-percentage",
                "0",
                "--daemonize",
                "no",
            ]);
        Self::start(launch, port)
    }

    /// A free port, the data directory `<work>/<name>` (created) and the
    /// launch of `program` logging to `<work>/<name>.log`.
    fn prepare(setup: &Setup, name: &str, program: &str) -> Result<(u16, PathBuf, Launch)> {
        let port = free_port()?;
        let dir = setup.work.join(name);
        fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let log = setup.work.join(format!("{name}.log"));
        Ok((port, dir, Launch::new(name, find_program(program)?, log)))
    }

    fn start(launch: Launch, port: u16) -> Result<Self> {
        eprintln!("bench: start {launch:?}");
        let mut proc = launch.spawn()?;
        let addr = loopback(port);
        if let Err(e) = proc.wait_listening(&addr, STARTUP_LIMIT) {
            proc.print_tail(LOG_TAIL_LINES);
            return Err(e.into());
        }
        Ok(Self { proc, addr, port })
    }

    /// The process id, for its CPU time.
    pub(super) fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Prints the end of the server's log.
    pub(super) fn print_tail(&self) {
        self.proc.print_tail(LOG_TAIL_LINES);
    }
}

/// Runs `sluice-bench nats-publish` against `server`: `in_flight`
/// publishers, `body` bytes each, `warmup` + `secs` seconds. The JSON
/// report is kept in `<work>/<name>.json`.
pub(super) fn nats_publish(
    setup: &Setup,
    server: &PeerServer,
    name: &str,
    in_flight: u32,
    warmup: u64,
    secs: u64,
) -> Result<Report> {
    let mut cmd = Command::new(&setup.bench);
    let args = [
        "nats-publish".to_owned(),
        "--server".to_owned(),
        server.addr.clone(),
        "--in-flight".to_owned(),
        in_flight.to_string(),
        "--duration".to_owned(),
        secs.to_string(),
        "--warmup".to_owned(),
        warmup.to_string(),
        "--size".to_owned(),
        "1024".to_owned(),
        "--json".to_owned(),
    ];
    cmd.args(&args);
    eprintln!("bench: sluice-bench {}", args.join(" "));
    let output = run_bounded(cmd, Duration::from_secs(warmup + secs) + RUN_SLACK)?;
    if !output.status.success() {
        server.print_tail();
        bail!(
            "sluice-bench {} failed with {}",
            args.join(" "),
            output.status
        );
    }
    let file = setup.work.join(format!("{name}.json"));
    fs::write(&file, &output.stdout).with_context(|| format!("write {}", file.display()))?;
    Report::from_json(&output.stdout)
        .with_context(|| format!("sluice-bench printed no JSON report for {name}"))
}

/// What `redis-benchmark --csv` reported for one command.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(super) struct RedisResult {
    /// Requests it sent (`-n`).
    pub(super) requests: u64,
    /// Requests per second.
    pub(super) rps: f64,
    /// Median latency, ms, if printed.
    pub(super) p50_ms: Option<f64>,
    /// 99th percentile latency, ms, if printed.
    pub(super) p99_ms: Option<f64>,
    /// Wall time of the run, seconds (measured here).
    pub(super) seconds: f64,
}

/// Runs `redis-benchmark -c <clients> -P <pipeline> -n <requests> --csv
/// XADD <stream> * f <value>` against `server`, with a value of `body`
/// bytes: `clients` connections, each with `pipeline` XADDs outstanding.
pub(super) fn redis_benchmark(
    server: &PeerServer,
    (clients, pipeline): (u32, u32),
    requests: u64,
    body: usize,
    limit: Duration,
) -> Result<RedisResult> {
    let mut cmd = Command::new(find_program("redis-benchmark")?);
    cmd.args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-c", &clients.to_string(), "-P", &pipeline.to_string()])
        .args(["-n", &requests.to_string(), "--csv"])
        .args(["XADD", REDIS_STREAM, "*", "f"])
        .arg("x".repeat(body));
    eprintln!(
        "bench: redis-benchmark -p {} -c {clients} -P {pipeline} -n {requests} --csv XADD {REDIS_STREAM} * f <{body} bytes>",
        server.port
    );
    let started = Instant::now();
    let output = run_bounded(cmd, limit)?;
    let seconds = started.elapsed().as_secs_f64();
    if !output.status.success() {
        server.print_tail();
        bail!("redis-benchmark failed with {}", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    let mut result = parse_redis_csv(&text)
        .with_context(|| format!("redis-benchmark printed no result: {text:?}"))?;
    result.requests = requests;
    result.seconds = seconds;
    Ok(result)
}

/// Deletes the stream the runs append to (`redis-benchmark -n 1 DEL`), so
/// that the server's memory holds one run's messages at most.
pub(super) fn redis_clear(server: &PeerServer) -> Result<()> {
    let mut cmd = Command::new(find_program("redis-benchmark")?);
    cmd.args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args(["-c", "1", "-n", "1", "--csv", "DEL", REDIS_STREAM]);
    let output = run_bounded(cmd, RUN_SLACK)?;
    if !output.status.success() {
        server.print_tail();
        bail!(
            "redis-benchmark DEL {REDIS_STREAM} failed with {}",
            output.status
        );
    }
    Ok(())
}

/// How many requests to ask of a `redis-benchmark` run meant to last
/// `secs` seconds, from the rate of an earlier run.
pub(super) fn redis_requests_for(rps: f64, secs: u64) -> u64 {
    let n = (rps * secs as f64).round();
    if n.is_finite() && n > 0.0 {
        (n as u64).clamp(MIN_REDIS_REQUESTS, MAX_REDIS_REQUESTS)
    } else {
        MIN_REDIS_REQUESTS
    }
}

/// Reads `redis-benchmark --csv` output: a header line naming the columns
/// (`"test","rps",...,"p50_latency_ms",...,"p99_latency_ms",...`) and one
/// line per command. The test name (the whole command line) may hold
/// commas, so the figures are taken from the end of the line. Older
/// versions print only `"test","rps"`: the latencies are then `None`.
pub(super) fn parse_redis_csv(text: &str) -> Option<RedisResult> {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let header: Vec<String> = split_csv(lines.next()?);
    if header.first().map(String::as_str) != Some("test") {
        return None;
    }
    let row: Vec<String> = split_csv(lines.next()?);
    let figures = header.len() - 1;
    if row.len() < header.len() {
        return None;
    }
    let values = &row[row.len() - figures..];
    let column = |name: &str| -> Option<f64> {
        let at = header.iter().skip(1).position(|h| h == name)?;
        values[at].parse().ok()
    };
    Some(RedisResult {
        requests: 0,
        rps: column("rps")?,
        p50_ms: column("p50_latency_ms"),
        p99_ms: column("p99_latency_ms"),
        seconds: 0.0,
    })
}

/// The fields of one CSV line, quotes removed (no escaped quotes inside).
fn split_csv(line: &str) -> Vec<String> {
    line.split(',')
        .map(|f| f.trim().trim_matches('"').to_owned())
        .collect()
}

/// Reads CPU time of processes from `/proc/<pid>/stat`.
pub(super) struct CpuClock {
    /// Clock ticks per second (`getconf CLK_TCK`).
    ticks_per_sec: u64,
}

impl CpuClock {
    /// Asks `getconf CLK_TCK` for the tick rate (100 if it cannot say).
    pub(super) fn new() -> Self {
        let ticks_per_sec = Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .filter(|t| *t > 0)
            .unwrap_or(DEFAULT_CLK_TCK);
        Self { ticks_per_sec }
    }

    /// CPU seconds `pid` has used so far: user and system time, its own and
    /// that of children it has waited for (Redis's AOF rewrites).
    pub(super) fn seconds(&self, pid: u32) -> Result<f64> {
        let path = Path::new("/proc").join(pid.to_string()).join("stat");
        let text = fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        let ticks =
            cpu_ticks(&text).with_context(|| format!("{} is not a stat line", path.display()))?;
        Ok(ticks as f64 / self.ticks_per_sec as f64)
    }
}

/// `utime + stime + cutime + cstime` (fields 14 to 17) of a
/// `/proc/<pid>/stat` line, in clock ticks. The command name (field 2) is
/// in parentheses and may hold spaces and parentheses itself, so the
/// fields are counted from the last `)`.
pub(super) fn cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // `rest` starts at field 3 (state): field N is at index N - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<i64>().ok();
    let total = field(14)? + field(15)? + field(16)? + field(17)?;
    u64::try_from(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CSV: &str = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\",\"p50_latency_ms\",\"p95_latency_ms\",\"p99_latency_ms\",\"max_latency_ms\"\n\"XADD bench * f xxxx\",\"37243.95\",\"0.093\",\"0.016\",\"0.071\",\"0.135\",\"0.239\",\"5.527\"\n";

    #[test]
    fn redis_benchmark_csv_gives_the_rate_and_latencies() {
        let r = parse_redis_csv(CSV).expect("a result");
        assert_eq!(r.rps, 37243.95);
        assert_eq!(r.p50_ms, Some(0.071));
        assert_eq!(r.p99_ms, Some(0.239));
    }

    #[test]
    fn a_test_name_with_commas_does_not_shift_the_figures() {
        let csv = CSV.replace("XADD bench * f xxxx", "XADD bench * f a,b,c");
        let r = parse_redis_csv(&csv).expect("a result");
        assert_eq!(r.rps, 37243.95);
        assert_eq!(r.p50_ms, Some(0.071));
        assert_eq!(r.p99_ms, Some(0.239));
    }

    #[test]
    fn csv_without_latency_columns_gives_the_rate_alone() {
        let r = parse_redis_csv("\"test\",\"rps\"\n\"XADD bench * f x\",\"1234.50\"\n")
            .expect("a result");
        assert_eq!(r.rps, 1234.5);
        assert_eq!(r.p50_ms, None);
        assert_eq!(r.p99_ms, None);
    }

    #[test]
    fn output_that_is_not_the_csv_report_is_refused() {
        assert_eq!(parse_redis_csv(""), None);
        assert_eq!(parse_redis_csv("\"test\",\"rps\"\n"), None);
        assert_eq!(
            parse_redis_csv("XADD: 29411.76 requests per second, p50=0.039 msec"),
            None
        );
        assert_eq!(
            parse_redis_csv("\"test\",\"rps\"\n\"XADD\",\"fast\"\n"),
            None
        );
    }

    #[test]
    fn the_request_count_follows_the_rate_within_bounds() {
        assert_eq!(redis_requests_for(20_000.0, 5), 100_000);
        assert_eq!(redis_requests_for(10.0, 2), MIN_REDIS_REQUESTS);
        assert_eq!(redis_requests_for(1e12, 5), MAX_REDIS_REQUESTS);
        assert_eq!(redis_requests_for(f64::NAN, 5), MIN_REDIS_REQUESTS);
    }

    #[test]
    fn cpu_ticks_add_user_system_and_waited_children_time() {
        // Fields 14..=17 are 1234, 567, 8, 9.
        let stat = "4242 (redis-server) S 1 4242 4242 0 -1 4194560 2000 0 0 0 1234 567 8 9 20 0 5 0 100 1000000 2000 18446744073709551615 1 1 0 0 0 0 0 4097 17987 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(cpu_ticks(stat), Some(1234 + 567 + 8 + 9));
    }

    #[test]
    fn a_command_name_with_spaces_and_parentheses_does_not_shift_the_fields() {
        let stat = "77 (a) b (c) R 1 77 77 0 -1 0 0 0 0 0 10 20 0 0 20 0 1 0 5 0 0";
        assert_eq!(cpu_ticks(stat), Some(30));
    }

    #[test]
    fn a_truncated_stat_line_is_refused() {
        assert_eq!(cpu_ticks("77 (broker) R 1 77 77 0 -1 0 0 0 0 0 10"), None);
        assert_eq!(cpu_ticks("no parentheses at all"), None);
    }

    #[test]
    fn this_process_has_a_cpu_time() -> Result<()> {
        let clock = CpuClock::new();
        let secs = clock.seconds(std::process::id())?;
        assert!(secs >= 0.0);
        Ok(())
    }
}
