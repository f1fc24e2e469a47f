//! What the experiments of `cargo xtask bench` share: the built binaries
//! and directories of one experiment ([`Setup`]), its broker processes
//! ([`Broker`]), runs of the load tool ([`load`]), and the wrapper that runs
//! one experiment and always cleans up ([`run_experiment`]).

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use bench_report::{LatencyMs, Report};
use proc_harness::{free_port, loopback, target_dir, Launch, Proc};
use serde::Serialize;

use super::Options;
use crate::{cargo, run};

/// How long a broker may take to accept connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);
/// Pause after the port opens so that the broker registers its routes.
const REGISTRATION_PAUSE: Duration = Duration::from_millis(500);
/// Slack, beyond its nominal length, for one load tool run.
pub(super) const RUN_SLACK: Duration = Duration::from_secs(30);
/// Lines of the broker log shown when something failed.
const LOG_TAIL_LINES: usize = 30;

/// The built binaries and the directories of one experiment.
pub(super) struct Setup {
    broker: PathBuf,
    pub(super) bench: PathBuf,
    /// Stores and logs; removed at the end unless something failed.
    pub(super) work: PathBuf,
    /// Results.
    pub(super) out: PathBuf,
    /// Extra broker settings from `--set`.
    settings: Vec<String>,
}

impl Setup {
    fn new(root: &Path, options: &Options, name: &str) -> Result<Self> {
        let mut build = cargo(root);
        build.args(["build", "--bin", "broker", "--bin", "sluice-bench"]);
        build.args(["-p", "broker-server", "-p", "bench"]);
        if !options.quick {
            build.arg("--release");
        }
        run(build)?;
        let target = target_dir(root);
        let bins = target.join(options.build());
        let (broker, bench) = (bins.join("broker"), bins.join("sluice-bench"));
        for bin in [&broker, &bench] {
            if !bin.is_file() {
                bail!("{} was not built", bin.display());
            }
        }
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let work = target
            .join("tmp")
            .join(format!("bench-{name}-{}-{stamp}", std::process::id()));
        fs::create_dir_all(&work).with_context(|| format!("create {}", work.display()))?;
        let out = options.out.clone().unwrap_or_else(|| target.join("bench"));
        fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
        eprintln!(
            "bench: {} build, work dir {}, results in {}",
            options.build(),
            work.display(),
            out.display()
        );
        Ok(Self {
            broker,
            bench,
            work,
            out,
            settings: options.settings.clone(),
        })
    }

    /// Removes the work directory after success; keeps it (and says so)
    /// after a failure.
    fn finish<T>(&self, outcome: Result<T>) -> Result<T> {
        match outcome {
            Ok(v) => {
                let _ = fs::remove_dir_all(&self.work);
                Ok(v)
            }
            Err(e) => {
                eprintln!("bench: failed; broker logs kept in {}", self.work.display());
                Err(e)
            }
        }
    }
}

/// A broker process, killed when dropped.
pub(super) struct Broker {
    proc: Proc,
    pub(super) addr: String,
    /// The embedded name server, `127.0.0.1:port`.
    pub(super) namesrv: String,
    /// The gRPC endpoint (`grpcListenPort`), `127.0.0.1:port`.
    pub(super) grpc: String,
    store: PathBuf,
}

impl Broker {
    /// Starts a broker with its embedded name server on free ports, its
    /// store and log under `setup.work`, and `settings` as `--set` pairs.
    pub(super) fn start(setup: &Setup, name: &str, settings: &[String]) -> Result<Self> {
        let port = free_port()?;
        let ns_port = free_port()?;
        let grpc_port = free_port()?;
        let store = setup.work.join(name);
        let launch = Launch::new(name, &setup.broker, setup.work.join(format!("{name}.log")))
            .arg("-p")
            .arg(port.to_string())
            .arg("--store-dir")
            .arg(&store)
            .settings([
                "embeddedNamesrv=true".to_owned(),
                format!("namesrvListenPort={ns_port}"),
                format!("grpcListenPort={grpc_port}"),
                "metricsListenPort=0".to_owned(),
                format!("mappedFileSizeCommitLog={}", 256 * 1024 * 1024),
            ])
            .settings(settings)
            .settings(&setup.settings);
        eprintln!(
            "bench: start broker {name}: {}",
            settings
                .iter()
                .chain(&setup.settings)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        );
        let proc = launch.spawn().context("start the broker")?;
        let mut broker = Self {
            proc,
            addr: loopback(port),
            namesrv: loopback(ns_port),
            grpc: loopback(grpc_port),
            store,
        };
        broker.wait_ready()?;
        Ok(broker)
    }

    fn wait_ready(&mut self) -> Result<()> {
        for addr in [self.addr.clone(), self.namesrv.clone(), self.grpc.clone()] {
            if let Err(e) = self.proc.wait_listening(&addr, STARTUP_LIMIT) {
                self.print_tail();
                return Err(e.into());
            }
        }
        thread::sleep(REGISTRATION_PAUSE);
        Ok(())
    }

    pub(super) fn print_tail(&self) {
        self.proc.print_tail(LOG_TAIL_LINES);
    }

    /// The broker's process id, for its CPU time.
    pub(super) fn pid(&self) -> u32 {
        self.proc.id()
    }

    /// Kills the broker and removes its store (the log stays).
    pub(super) fn stop(mut self) {
        // An error means the process already exited; nothing else to do.
        let _ = self.proc.kill();
        let _ = fs::remove_dir_all(&self.store);
    }
}

/// Creates `topic` with `queues` queues on `broker` (`sluice-bench
/// create-topic`), as the gRPC endpoint sends only to existing topics.
pub(super) fn create_topic(setup: &Setup, broker: &Broker, topic: &str, queues: u32) -> Result<()> {
    let mut create = Command::new(&setup.bench);
    create.args(["create-topic", "--broker", &broker.addr, "--topic", topic]);
    create.args(["--queues", &queues.to_string()]);
    let created = run_bounded(create, RUN_SLACK)?;
    if !created.status.success() {
        broker.print_tail();
        bail!(
            "sluice-bench create-topic {topic} failed with {}",
            created.status
        );
    }
    Ok(())
}

/// Runs `sluice-bench` with `args` and `--json`, keeps its report in
/// `<work>/<name>.json` and returns the file and the report read back.
pub(super) fn load(
    setup: &Setup,
    broker: &Broker,
    name: &str,
    args: &[String],
) -> Result<(PathBuf, Report)> {
    let file = setup.work.join(format!("{name}.json"));
    let mut cmd = Command::new(&setup.bench);
    cmd.args(["--broker", &broker.addr, "--json"]).args(args);
    eprintln!("bench: sluice-bench {}", args.join(" "));
    let secs: u64 = flag(args, "--duration").unwrap_or(10) + flag(args, "--warmup").unwrap_or(1);
    let output = run_bounded(cmd, Duration::from_secs(secs) + RUN_SLACK)?;
    if !output.status.success() {
        broker.print_tail();
        bail!(
            "sluice-bench {} failed with {}: {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    fs::write(&file, &output.stdout).with_context(|| format!("write {}", file.display()))?;
    let report = Report::from_json(&output.stdout)
        .with_context(|| format!("sluice-bench printed no JSON report for {name}"))?;
    Ok((file, report))
}

/// The numeric value of `--name N` in `args`.
fn flag(args: &[String], name: &str) -> Option<u64> {
    let at = args.iter().position(|a| a == name)?;
    args.get(at + 1)?.parse().ok()
}

/// Runs a command with its stdout captured and stderr passed through,
/// killing it after `limit`.
pub(super) fn run_bounded(mut cmd: Command, limit: Duration) -> Result<std::process::Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let program = Path::new(cmd.get_program())
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let mut child = cmd.spawn().with_context(|| format!("start {program}"))?;
    let deadline = Instant::now() + limit;
    let mut stdout = child
        .stdout
        .take()
        .with_context(|| format!("capture {program} output"))?;
    // Read in a thread so that a full pipe cannot stall the child.
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    let status = loop {
        if let Some(status) = child
            .try_wait()
            .with_context(|| format!("poll {program}"))?
        {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{program} did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stdout = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the output reader panicked"))?
        .with_context(|| format!("read {program} output"))?;
    Ok(std::process::Output {
        status,
        stdout,
        stderr: Vec::new(),
    })
}

/// Runs one experiment in its own work directory, always cleaning up, and
/// says how long it took.
pub(super) fn run_experiment(
    root: &Path,
    options: &Options,
    name: &str,
    body: fn(&Setup, &Options) -> Result<()>,
) -> Result<()> {
    let started = Instant::now();
    let setup = Setup::new(root, options, name)?;
    let outcome = setup.finish(body(&setup, options));
    eprintln!(
        "bench: {name} took {:.1} s",
        started.elapsed().as_secs_f64()
    );
    outcome
}

/// The header line of a results table whose first column is `first`.
pub(super) fn table_header(first: &str) -> String {
    format!(
        "{:<12}{:>10}{:>7}{:>12}{:>9}{:>10}{:>10}{:>10}{:>8}\n",
        first, "in flight", "conns", "msgs/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "failed"
    )
}

/// One line of a results table: the run's throughput, its latency
/// percentiles (`-` when no send succeeded) and its failures.
pub(super) fn table_row(label: &str, in_flight: u32, connections: u32, report: &Report) -> String {
    let ms = |pick: fn(&LatencyMs) -> f64| {
        report
            .latency_ms
            .as_ref()
            .map_or_else(|| "-".to_owned(), |l| format!("{:.3}", pick(l)))
    };
    format!(
        "{:<12}{:>10}{:>7}{:>12.1}{:>9.1}{:>10}{:>10}{:>10}{:>8}\n",
        label,
        in_flight,
        connections,
        report.ok_per_sec,
        report.mb_per_sec,
        ms(|l| l.p50),
        ms(|l| l.p99),
        ms(|l| l.p999),
        report.failed_total,
    )
}

/// Writes `value` to `file` as indented JSON, by way of a
/// [`serde_json::Value`] as these files always were, so that their keys keep
/// the order they had.
pub(super) fn write_json(file: &Path, value: &impl Serialize) -> Result<()> {
    let json = serde_json::to_value(value).context("build the JSON results")?;
    fs::write(file, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("write {}", file.display()))
}

pub(super) fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

/// A report of a closed-loop remoting run with these figures, for tests.
#[cfg(test)]
pub(super) fn sample_report(ok_per_sec: f64, p50: f64, p99: f64, p999: f64) -> Report {
    Report {
        protocol: "remoting".into(),
        broker: "127.0.0.1:10911".into(),
        topic: "BenchTopic".into(),
        mode: "closed".into(),
        in_flight: Some(64),
        rate_per_sec: None,
        max_outstanding: None,
        connections: 4,
        body_bytes: 1024,
        delay_level: None,
        timer_delay_ms: None,
        batch: None,
        hint_waits: 0,
        refused_after_hint: 0,
        warmup_s: 1.0,
        duration_s: 10.0,
        sent: (ok_per_sec * 10.0) as u64,
        ok: (ok_per_sec * 10.0) as u64,
        failed_total: 0,
        failed: bench_report::Failures::default(),
        ok_per_sec,
        mb_per_sec: ok_per_sec * 1024.0 / 1e6,
        latency_ms: Some(LatencyMs {
            count: (ok_per_sec * 10.0) as u64,
            p50,
            p90: p50,
            p99,
            p999,
            max: p999,
        }),
        time_to_busy_ms: None,
        period_in_queue_ms: None,
        retry_after_ms: None,
        namesrv: None,
        series: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_flags_are_read_from_the_argument_list() {
        let args = strings(&["--rate", "10", "--duration", "20"]);
        assert_eq!(flag(&args, "--duration"), Some(20));
        assert_eq!(flag(&args, "--warmup"), None);
    }

    #[test]
    fn a_report_goes_into_the_results_files_as_the_load_tool_printed_it() -> Result<()> {
        let mut report = sample_report(9_876.5, 0.125, 0.5, 2.25);
        report.failed.busy.insert("TIMEOUT_CLEAN_QUEUE".into(), 3);
        report.failed.timeout = 1;
        report.failed_total = 4;
        report.series.push(bench_report::Second {
            t: 1,
            ok: 9_876,
            busy: 3,
            other_failed: 1,
            ok_p50_ms: Some(0.125),
            ok_p99_ms: Some(0.5),
            ok_max_ms: Some(2.25),
            busy_p99_ms: None,
        });
        let printed = report.to_json()?;
        // Before the reports were typed, the files held the printed report
        // parsed as a `Value`; the typed report must write the same text.
        let untyped: serde_json::Value = serde_json::from_str(&printed)?;
        let typed = Report::from_json(printed.as_bytes())?;
        assert_eq!(
            serde_json::to_string_pretty(&serde_json::to_value(&typed)?)?,
            serde_json::to_string_pretty(&untyped)?
        );
        Ok(())
    }

    #[test]
    fn table_rows_line_up_with_the_header_and_show_missing_latency_as_a_dash() {
        let header = table_header("flush");
        let mut report = sample_report(12_345.0, 0.05, 0.2, 1.5);
        let row = table_row("ASYNC_FLUSH", 64, 4, &report);
        assert_eq!(header.len(), row.len(), "{header}{row}");
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            [
                "ASYNC_FLUSH",
                "64",
                "4",
                "12345.0",
                "12.6",
                "0.050",
                "0.200",
                "1.500",
                "0"
            ]
        );
        report.latency_ms = None;
        report.failed_total = 7;
        let row = table_row("grpc #2", 1, 1, &report);
        assert_eq!(
            row.split_whitespace().collect::<Vec<_>>(),
            ["grpc", "#2", "1", "1", "12345.0", "12.6", "-", "-", "-", "7"]
        );
    }
}
