//! `cargo xtask bench <experiment>`: benchmarks of a real broker process
//! driven by the load tool (`sluice-bench`), both built in release
//! (`--quick`: debug, short phases, for CI).
//!
//! - `overload`: measures the broker's sustainable rate (closed loop), then
//!   offers a multiple of it (2x) open loop with `waitTimeMillsInSendQueue`
//!   200, once with early admission on and once off, each on a fresh broker;
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
//!
//! Each broker runs with its embedded name server (and its gRPC endpoint)
//! on free loopback ports,
//! its own store directory under the target directory and its log captured
//! there; it is killed when its phase ends, also on error. The working
//! directory is removed afterwards unless something failed.

use std::{
    fs,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use proc_harness::{free_port, loopback, target_dir, Launch, Proc};
use serde_json::Value;

use crate::{cargo, run};

/// How long a broker may take to accept connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(30);
/// Pause after the port opens so that the broker registers its routes.
const REGISTRATION_PAUSE: Duration = Duration::from_millis(500);
/// Slack, beyond its nominal length, for one load tool run.
const RUN_SLACK: Duration = Duration::from_secs(30);
/// The send queue's wait limit the overload experiment uses, ms.
const WAIT_LIMIT_MS: u64 = 200;
/// Offered load of the overload experiment, as a multiple of capacity.
const OVERLOAD_FACTOR: f64 = 2.0;
/// Lines of the broker log shown when something failed.
const LOG_TAIL_LINES: usize = 30;

const USAGE: &str = "usage: cargo xtask bench <overload|closed|protocols> [options]

  overload [--quick] [--out DIR] [--bound fault|cpu] [--fault-ms N]
           capacity, then 2x capacity with early admission on and off
           (--bound fault, the default: capacity bounded by
           faultPutLockDelayMills=N, default 1; cpu: no fault)
  closed   [--quick] [--out DIR] [--connections N]
           1, 16, 64 in flight, ASYNC_FLUSH and SYNC_FLUSH, 1 KiB messages
           (default 1, 2 and 4 connections)
  protocols [--quick] [--out DIR] [--connections N]
           one ASYNC_FLUSH broker: 64 in flight over remoting, gRPC, remoting
           again, then 1 in flight over both; 1 KiB messages, gRPC/remoting
           ratios (default 4 connections or channels at 64, 1 at 1)

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
    /// Extra broker settings (`key=value`), after the experiment's own.
    settings: Vec<String>,
}

/// Parses `bench` arguments and runs the experiment.
pub fn main(root: &Path, args: &[String]) -> Result<()> {
    let Some((experiment, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(());
    };
    let mut options = Options {
        quick: false,
        out: None,
        bound: Bound::Fault(1),
        connections: None,
        settings: Vec::new(),
    };
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
                let v = value("--fault-ms")?;
                fault_ms = v.parse().ok().filter(|ms| *ms >= 1).with_context(|| {
                    format!("bench: --fault-ms {v:?}: expected a whole number of ms, at least 1")
                })?;
            }
            "--connections" => {
                let v = value("--connections")?;
                options.connections =
                    Some(v.parse().ok().filter(|n| *n >= 1).with_context(|| {
                        format!("bench: --connections {v:?}: expected at least 1")
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
        "overload" => run_experiment(root, &options, "overload", overload_in),
        "closed" => run_experiment(root, &options, "closed", closed_in),
        "protocols" => run_experiment(root, &options, "protocols", protocols_in),
        other => bail!("bench: unknown experiment {other:?}\n\n{USAGE}"),
    }
}

/// The built binaries and the directories of one experiment.
struct Setup {
    broker: PathBuf,
    bench: PathBuf,
    /// Stores and logs; removed at the end unless something failed.
    work: PathBuf,
    /// Results.
    out: PathBuf,
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
        let bins = target.join(if options.quick { "debug" } else { "release" });
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
            if options.quick { "debug" } else { "release" },
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
struct Broker {
    proc: Proc,
    addr: String,
    namesrv: String,
    /// The gRPC endpoint (`grpcListenPort`), `127.0.0.1:port`.
    grpc: String,
    store: PathBuf,
}

impl Broker {
    /// Starts a broker with its embedded name server on free ports, its
    /// store and log under `setup.work`, and `settings` as `--set` pairs.
    fn start(setup: &Setup, name: &str, settings: &[String]) -> Result<Self> {
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

    fn print_tail(&self) {
        self.proc.print_tail(LOG_TAIL_LINES);
    }

    /// Kills the broker and removes its store (the log stays).
    fn stop(mut self) {
        // An error means the process already exited; nothing else to do.
        let _ = self.proc.kill();
        let _ = fs::remove_dir_all(&self.store);
    }
}

/// Runs `sluice-bench` with `args` and `--json`, keeps its report in
/// `<work>/<name>.json` and returns the file and the parsed report.
fn load(setup: &Setup, broker: &Broker, name: &str, args: &[String]) -> Result<(PathBuf, Value)> {
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
    let report: Value = serde_json::from_slice(&output.stdout)
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
fn run_bounded(mut cmd: Command, limit: Duration) -> Result<std::process::Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().context("start sluice-bench")?;
    let deadline = Instant::now() + limit;
    let mut stdout = child.stdout.take().context("capture sluice-bench output")?;
    // Read in a thread so that a full pipe cannot stall the child.
    let reader = thread::spawn(move || {
        let mut buf = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut buf).map(|_| buf)
    });
    let status = loop {
        if let Some(status) = child.try_wait().context("poll sluice-bench")? {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("sluice-bench did not finish within {limit:?}");
        }
        thread::sleep(Duration::from_millis(100));
    };
    let stdout = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the output reader panicked"))?
        .context("read sluice-bench output")?;
    Ok(std::process::Output {
        status,
        stdout,
        stderr: Vec::new(),
    })
}

/// Runs one experiment in its own work directory, always cleaning up, and
/// says how long it took.
fn run_experiment(
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

fn overload_in(setup: &Setup, options: &Options) -> Result<()> {
    let (capacity_secs, overload_secs) = if options.quick { (2, 3) } else { (8, 20) };
    let mut common = vec![format!("waitTimeMillsInSendQueue={WAIT_LIMIT_MS}")];
    let (bound_text, in_flight, connections) = match options.bound {
        Bound::Fault(ms) => {
            common.push(format!("faultPutLockDelayMills={ms}"));
            (
                format!(
                    "faultPutLockDelayMills={ms}: every append sleeps {ms} ms holding the put lock \
                     (fault injection), so capacity is set by the lock, not by CPU"
                ),
                // Enough to keep the lock busy, too few to wait past the limit.
                16,
                options.connections.unwrap_or(1),
            )
        }
        Bound::Cpu => (
            "CPU and disk (no fault injected); the load tool shares the CPUs".to_owned(),
            64,
            options.connections.unwrap_or(2),
        ),
    };
    let conns = connections.to_string();
    let mut capacity_file = None;
    let mut capacity = 0.0;
    let mut runs = Vec::new();
    for (label, early) in [("early admission on", true), ("early admission off", false)] {
        let mut settings = common.clone();
        settings.push(format!("earlyAdmissionEnable={early}"));
        let name = if early { "on" } else { "off" };
        let broker = Broker::start(setup, &format!("broker-{name}"), &settings)?;
        if capacity_file.is_none() {
            let (file, report) = load(
                setup,
                &broker,
                "capacity",
                &strings(&[
                    "--in-flight",
                    &in_flight.to_string(),
                    "--connections",
                    &conns,
                    "--duration",
                    &capacity_secs.to_string(),
                ]),
            )?;
            capacity = report["ok_per_sec"].as_f64().unwrap_or(0.0);
            if capacity <= 0.0 {
                bail!(
                    "the capacity run had no successful send; see {}",
                    file.display()
                );
            }
            eprintln!("bench: sustainable rate {capacity:.1} msgs/s ({bound_text})");
            capacity_file = Some(file);
        }
        let rate = (capacity * OVERLOAD_FACTOR).round();
        let (file, _) = load(
            setup,
            &broker,
            &format!("overload-{name}"),
            &strings(&[
                "--rate",
                &format!("{rate}"),
                "--connections",
                &conns,
                "--duration",
                &overload_secs.to_string(),
            ]),
        )?;
        broker.stop();
        runs.push(format!("{label}={}", file.display()));
    }
    let capacity_file = capacity_file.context("no capacity run")?;
    let mut report = Command::new(&setup.bench);
    report
        .arg("overload-report")
        .arg("--capacity")
        .arg(&capacity_file)
        .args(["--limit-ms", &WAIT_LIMIT_MS.to_string()])
        .args(["--bound", &bound_text])
        .arg("--out")
        .arg(&setup.out);
    for r in &runs {
        report.arg("--run").arg(r);
    }
    println!(
        "overload experiment: capacity measured closed loop, then {OVERLOAD_FACTOR}x offered open \
         loop for {overload_secs} s, 1 KiB messages, one fresh broker per setting{}",
        if options.settings.is_empty() {
            String::new()
        } else {
            format!("; broker settings {}", options.settings.join(" "))
        }
    );
    run(report)
}

fn closed_in(setup: &Setup, options: &Options) -> Result<()> {
    let secs = if options.quick { 2 } else { 10 };
    let mut rows = Vec::new();
    for flush in ["ASYNC_FLUSH", "SYNC_FLUSH"] {
        let broker = Broker::start(
            setup,
            &format!("broker-{}", flush.to_lowercase()),
            &[format!("flushDiskType={flush}")],
        )?;
        for in_flight in [1_u32, 16, 64] {
            // What measured best on a 2-core machine.
            let connections = options.connections.unwrap_or(match in_flight {
                0..=1 => 1,
                2..=31 => 2,
                _ => 4,
            });
            let (_, report) = load(
                setup,
                &broker,
                &format!("closed-{}-{in_flight}", flush.to_lowercase()),
                &strings(&[
                    "--in-flight",
                    &in_flight.to_string(),
                    "--connections",
                    &connections.to_string(),
                    "--duration",
                    &secs.to_string(),
                    "--size",
                    "1024",
                ]),
            )?;
            rows.push((flush, in_flight, connections, report));
        }
        broker.stop();
    }
    let table = closed_table(&rows);
    println!(
        "closed loop, 1 KiB messages, {secs} s per row after 1 s warm-up, {} build{}",
        if options.quick { "debug" } else { "release" },
        if options.settings.is_empty() {
            String::new()
        } else {
            format!(", broker settings {}", options.settings.join(" "))
        }
    );
    print!("{table}");
    let json: Vec<Value> = rows
        .iter()
        .map(|(flush, in_flight, connections, report)| {
            serde_json::json!({
                "flush_disk_type": flush,
                "in_flight": in_flight,
                "connections": connections,
                "report": report,
            })
        })
        .collect();
    let file = setup.out.join("closed.json");
    fs::write(&file, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("write {}", file.display()))?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The closed-loop table: one row per flush type and in-flight count.
fn closed_table(rows: &[(&str, u32, u32, Value)]) -> String {
    let mut out = format!(
        "{:<12}{:>10}{:>7}{:>12}{:>9}{:>10}{:>10}{:>10}{:>8}\n",
        "flush", "in flight", "conns", "msgs/s", "MB/s", "p50 ms", "p99 ms", "p99.9 ms", "failed"
    );
    for (flush, in_flight, connections, r) in rows {
        let num = |v: &Value| {
            v.as_f64()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"))
        };
        out.push_str(&format!(
            "{:<12}{:>10}{:>7}{:>12.1}{:>9.1}{:>10}{:>10}{:>10}{:>8}\n",
            flush,
            in_flight,
            connections,
            r["ok_per_sec"].as_f64().unwrap_or(0.0),
            r["mb_per_sec"].as_f64().unwrap_or(0.0),
            num(&r["latency_ms"]["p50"]),
            num(&r["latency_ms"]["p99"]),
            num(&r["latency_ms"]["p999"]),
            r["failed_total"].as_u64().unwrap_or(0),
        ));
    }
    out
}

/// The topic of the protocol comparison and its queue count.
const PROTOCOLS_TOPIC: &str = "BenchTopic";
const PROTOCOLS_QUEUES: &str = "8";

/// One run of the protocol comparison.
struct ProtocolRun {
    protocol: &'static str,
    /// Which run of this protocol and in-flight count this is, from 1.
    round: u32,
    in_flight: u32,
    connections: u32,
    report: Value,
}

fn protocols_in(setup: &Setup, options: &Options) -> Result<()> {
    let secs = if options.quick { 2 } else { 10 };
    let broker = Broker::start(
        setup,
        "broker-protocols",
        &["flushDiskType=ASYNC_FLUSH".to_owned()],
    )?;
    let mut create = Command::new(&setup.bench);
    create.args([
        "create-topic",
        "--broker",
        &broker.addr,
        "--topic",
        PROTOCOLS_TOPIC,
        "--queues",
        PROTOCOLS_QUEUES,
    ]);
    let created = run_bounded(create, RUN_SLACK)?;
    if !created.status.success() {
        broker.print_tail();
        bail!("sluice-bench create-topic failed with {}", created.status);
    }
    let plan: [(&'static str, u32); 5] = [
        ("remoting", 64),
        ("grpc", 64),
        ("remoting", 64),
        ("remoting", 1),
        ("grpc", 1),
    ];
    let mut runs: Vec<ProtocolRun> = Vec::new();
    for (protocol, in_flight) in plan {
        let connections = options
            .connections
            .unwrap_or(if in_flight > 1 { 4 } else { 1 });
        let round = 1 + runs
            .iter()
            .filter(|r| r.protocol == protocol && r.in_flight == in_flight)
            .count() as u32;
        let mut args = strings(&[
            "--protocol",
            protocol,
            "--grpc",
            &broker.grpc,
            "--topic",
            PROTOCOLS_TOPIC,
            "--queues",
            PROTOCOLS_QUEUES,
            "--in-flight",
            &in_flight.to_string(),
            "--connections",
            &connections.to_string(),
            "--duration",
            &secs.to_string(),
            "--size",
            "1024",
        ]);
        if protocol == "remoting" {
            // Not used by the remoting sends; keeps the logged command short.
            args.drain(2..4);
        }
        let (_, report) = load(
            setup,
            &broker,
            &format!("protocols-{protocol}-{in_flight}-{round}"),
            &args,
        )?;
        runs.push(ProtocolRun {
            protocol,
            round,
            in_flight,
            connections,
            report,
        });
    }
    broker.stop();
    println!(
        "protocols: closed loop, 1 KiB messages, ASYNC_FLUSH, one broker, {secs} s per row after \
         1 s warm-up, {} build{}",
        if options.quick { "debug" } else { "release" },
        if options.settings.is_empty() {
            String::new()
        } else {
            format!(", broker settings {}", options.settings.join(" "))
        }
    );
    print!("{}", protocols_table(&runs));
    let ratios = protocol_ratios(&runs);
    println!();
    for line in ratio_lines(&ratios) {
        println!("{line}");
    }
    let json = serde_json::json!({
        "flush_disk_type": "ASYNC_FLUSH",
        "duration_s": secs,
        "ratios": ratios,
        "runs": runs.iter().map(|r| serde_json::json!({
            "protocol": r.protocol,
            "round": r.round,
            "in_flight": r.in_flight,
            "connections": r.connections,
            "report": r.report,
        })).collect::<Vec<_>>(),
    });
    let file = setup.out.join("protocols.json");
    fs::write(&file, serde_json::to_string_pretty(&json)?)
        .with_context(|| format!("write {}", file.display()))?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The protocol table: one row per run, in the order run.
fn protocols_table(runs: &[ProtocolRun]) -> String {
    let mut out = format!(
        "{:<12}{:>10}{:>7}{:>12}{:>9}{:>10}{:>10}{:>10}{:>8}\n",
        "protocol",
        "in flight",
        "conns",
        "msgs/s",
        "MB/s",
        "p50 ms",
        "p99 ms",
        "p99.9 ms",
        "failed"
    );
    for run in runs {
        let r = &run.report;
        let num = |v: &Value| {
            v.as_f64()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.3}"))
        };
        let label = if run.round > 1 {
            format!("{} #{}", run.protocol, run.round)
        } else {
            run.protocol.to_owned()
        };
        out.push_str(&format!(
            "{:<12}{:>10}{:>7}{:>12.1}{:>9.1}{:>10}{:>10}{:>10}{:>8}\n",
            label,
            run.in_flight,
            run.connections,
            r["ok_per_sec"].as_f64().unwrap_or(0.0),
            r["mb_per_sec"].as_f64().unwrap_or(0.0),
            num(&r["latency_ms"]["p50"]),
            num(&r["latency_ms"]["p99"]),
            num(&r["latency_ms"]["p999"]),
            r["failed_total"].as_u64().unwrap_or(0),
        ));
    }
    out
}

/// Per in-flight count: the mean msgs/s of each protocol's runs, the
/// gRPC/remoting throughput and p50 ratios, and the spread between repeated
/// remoting runs (drift of the machine during the comparison).
fn protocol_ratios(runs: &[ProtocolRun]) -> Value {
    let mut in_flights: Vec<u32> = runs.iter().map(|r| r.in_flight).collect();
    in_flights.sort_unstable_by(|a, b| b.cmp(a));
    in_flights.dedup();
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    let rows: Vec<Value> = in_flights
        .iter()
        .map(|&n| {
            let of = |protocol: &str, field: &dyn Fn(&Value) -> Option<f64>| -> Vec<f64> {
                runs.iter()
                    .filter(|r| r.in_flight == n && r.protocol == protocol)
                    .filter_map(|r| field(&r.report))
                    .collect()
            };
            let rate = |v: &Value| v["ok_per_sec"].as_f64();
            let p50 = |v: &Value| v["latency_ms"]["p50"].as_f64();
            let remoting = of("remoting", &rate);
            let grpc = of("grpc", &rate);
            let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
                (Some(a), Some(b)) if b > 0.0 => Some(a / b),
                _ => None,
            };
            let drift = (remoting.len() > 1)
                .then(|| {
                    let max = remoting.iter().copied().fold(f64::MIN, f64::max);
                    let min = remoting.iter().copied().fold(f64::MAX, f64::min);
                    ratio(Some(max - min), mean(&remoting))
                })
                .flatten();
            serde_json::json!({
                "in_flight": n,
                "remoting_msgs_per_sec": mean(&remoting),
                "grpc_msgs_per_sec": mean(&grpc),
                "throughput_ratio": ratio(mean(&grpc), mean(&remoting)),
                "p50_ratio": ratio(mean(&of("grpc", &p50)), mean(&of("remoting", &p50))),
                "remoting_runs": remoting.len(),
                "remoting_spread": drift,
            })
        })
        .collect();
    Value::Array(rows)
}

/// The ratios as printed lines.
fn ratio_lines(ratios: &Value) -> Vec<String> {
    let mut lines = Vec::new();
    for r in ratios.as_array().map(Vec::as_slice).unwrap_or_default() {
        let n = r["in_flight"].as_u64().unwrap_or(0);
        let Some(throughput) = r["throughput_ratio"].as_f64() else {
            continue;
        };
        let mut line = format!(
            "gRPC/remoting at {n} in flight: throughput {throughput:.2}x ({:.1} vs {:.1} msgs/s",
            r["grpc_msgs_per_sec"].as_f64().unwrap_or(0.0),
            r["remoting_msgs_per_sec"].as_f64().unwrap_or(0.0),
        );
        let runs = r["remoting_runs"].as_u64().unwrap_or(0);
        if runs > 1 {
            line.push_str(&format!(", remoting the mean of {runs} runs"));
        }
        line.push(')');
        if let Some(p50) = r["p50_ratio"].as_f64() {
            line.push_str(&format!(", p50 {p50:.2}x"));
        }
        lines.push(line);
        if let Some(spread) = r["remoting_spread"].as_f64() {
            lines.push(format!(
                "  remoting runs before and after gRPC differ by {:.1} % (machine drift)",
                spread * 100.0
            ));
        }
    }
    lines
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
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
    fn the_closed_table_has_a_row_per_run() {
        let report = serde_json::json!({
            "ok_per_sec": 12345.0,
            "mb_per_sec": 12.6,
            "failed_total": 0,
            "latency_ms": {"p50": 0.05, "p99": 0.2, "p999": 1.5}
        });
        let table = closed_table(&[
            ("ASYNC_FLUSH", 1, 1, report.clone()),
            ("SYNC_FLUSH", 64, 2, report),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[1].starts_with("ASYNC_FLUSH"), "{table}");
        assert!(lines[2].contains("12345.0"), "{table}");
        assert!(lines[2].contains("1.500"), "{table}");
    }

    fn protocol_run(protocol: &'static str, round: u32, in_flight: u32, rate: f64) -> ProtocolRun {
        ProtocolRun {
            protocol,
            round,
            in_flight,
            connections: 4,
            report: serde_json::json!({
                "ok_per_sec": rate,
                "mb_per_sec": rate * 1024.0 / 1e6,
                "failed_total": 0,
                "latency_ms": {"p50": 64.0 / rate * 1000.0, "p99": 2.0, "p999": 3.0}
            }),
        }
    }

    #[test]
    fn the_protocol_ratios_compare_grpc_with_the_mean_of_the_remoting_runs() {
        let runs = [
            protocol_run("remoting", 1, 64, 10_000.0),
            protocol_run("grpc", 1, 64, 6_000.0),
            protocol_run("remoting", 2, 64, 14_000.0),
            protocol_run("remoting", 1, 1, 2_000.0),
            protocol_run("grpc", 1, 1, 1_000.0),
        ];
        let ratios = protocol_ratios(&runs);
        let at64 = &ratios[0];
        assert_eq!(at64["in_flight"], 64);
        assert_eq!(at64["remoting_msgs_per_sec"], 12_000.0);
        assert_eq!(at64["throughput_ratio"], 0.5);
        // (14000 - 10000) / 12000
        let spread = at64["remoting_spread"].as_f64().unwrap_or(0.0);
        assert!((spread - 1.0 / 3.0).abs() < 1e-9, "{spread}");
        let at1 = &ratios[1];
        assert_eq!(at1["throughput_ratio"], 0.5);
        assert_eq!(at1["p50_ratio"], 2.0);
        assert_eq!(at1["remoting_spread"], Value::Null);
        let lines = ratio_lines(&ratios);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("throughput 0.50x"), "{lines:?}");
        assert!(lines[1].contains("33.3 %"), "{lines:?}");
        let table = protocols_table(&runs);
        assert_eq!(table.lines().count(), 6, "{table}");
        assert!(table.contains("remoting #2"), "{table}");
    }

    #[test]
    fn unknown_experiments_and_options_are_refused() {
        let root = Path::new(".");
        assert!(main(root, &strings(&["nothing"])).is_err());
        assert!(main(root, &strings(&["overload", "--bound", "disk"])).is_err());
        assert!(main(root, &strings(&["overload", "--fault-ms", "0"])).is_err());
        assert!(main(root, &strings(&["closed", "--fast"])).is_err());
        assert!(main(root, &strings(&["closed", "--set", "novalue"])).is_err());
        assert!(main(root, &strings(&["protocols", "--connections", "0"])).is_err());
    }
}
