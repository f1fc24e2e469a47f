//! `cargo xtask e2e [--quick] [--include-ignored] [FILTER]`: the end-to-end
//! suite against real processes (with a filter, only the scenarios whose
//! names contain it).
//!
//! Builds the `namesrv` and `broker` binaries once, starts one name server
//! and two brokers (`broker-a`, `broker-b`) on free loopback ports with their
//! stores and logs in a fresh temporary directory, waits until they listen,
//! then runs `cargo test -p e2e-tests` with their addresses in `SLUICE_E2E_*`
//! environment variables (and, in `SLUICE_E2E_CPP_PYTHON`, the python of the
//! RocketMQ C++ client's venv when `scripts/install-cpp-client.sh` has
//! installed it). The processes are always killed afterwards, also when the
//! run is interrupted (Ctrl-C, SIGTERM) or times out: the test run gets a
//! process group of its own, so brokers that scenarios start go with it.
//! When the tests fail, the tail of each process log is printed.

use std::{
    env, fs,
    os::unix::process::CommandExt,
    path::Path,
    process::Command,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};
use proc_harness::{free_port, loopback, target_dir, Launch, Proc};

use crate::{cargo, run};

/// How long each process may take to accept TCP connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);
/// Pause after the ports are open so that both brokers have registered.
const REGISTRATION_PAUSE: Duration = Duration::from_secs(1);
/// How long the test run may take before it is killed.
const TEST_LIMIT: Duration = Duration::from_secs(15 * 60);
/// Lines of each process log shown when something failed.
const LOG_TAIL_LINES: usize = 40;

/// The python of the venv that `scripts/install-cpp-client.sh` fills with
/// Apache's RocketMQ C++ client, relative to the workspace root.
const CPP_CLIENT_PYTHON: &str = "target/cpp-client/venv/bin/python";

/// The C++ client's python, when it is installed.
fn cpp_client_python(root: &Path) -> Option<std::path::PathBuf> {
    let python = root.join(CPP_CLIENT_PYTHON);
    python.is_file().then_some(python)
}

/// How to run the suite.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Smaller message counts (`SLUICE_E2E_QUICK=1`).
    pub quick: bool,
    /// Also the `#[ignore]`d scenarios: those of features the broker does
    /// not have yet.
    pub include_ignored: bool,
    /// Only the scenarios whose names contain this.
    pub filter: Option<String>,
}

/// Runs the suite.
pub fn run_suite(root: &Path, options: Options) -> Result<()> {
    let started = Instant::now();
    let interrupted = interrupt_flag()?;
    let mut build = cargo(root);
    build.args([
        "build",
        "--bins",
        "-p",
        "broker-server",
        "-p",
        "name-server",
    ]);
    run(build)?;
    let bin_dir = target_dir(root).join("debug");
    let namesrv_bin = bin_dir.join("namesrv");
    let broker_bin = bin_dir.join("broker");
    for bin in [&namesrv_bin, &broker_bin] {
        if !bin.is_file() {
            bail!("{} was not built", bin.display());
        }
    }

    let dir = fresh_dir("sluice-e2e")?;
    eprintln!("e2e: working directory {}", dir.display());

    let ns_port = free_port()?;
    let ns_addr = loopback(ns_port);
    let mut procs = Vec::new();
    let kv_config = dir.join("namesrv").join("kvConfig.json");
    let namesrv = Launch::new("namesrv", &namesrv_bin, dir.join("namesrv.log")).args([
        "--bind",
        "127.0.0.1",
        "--listen-port",
        &ns_port.to_string(),
        "--kv-config-path",
        &kv_config.to_string_lossy(),
    ]);
    procs.push(start(namesrv)?);
    let mut brokers = Vec::new();
    let mut grpc = Vec::new();
    for name in ["broker-a", "broker-b"] {
        let port = free_port()?;
        let grpc_port = free_port()?;
        let broker = Launch::new(name, &broker_bin, dir.join(format!("{name}.log")))
            .arg("-p")
            .arg(port.to_string())
            .arg("-n")
            .arg(&ns_addr)
            .arg("--store-dir")
            .arg(dir.join(name))
            .settings([
                "embeddedNamesrv=false".to_owned(),
                "metricsListenPort=0".to_owned(),
                format!("grpcListenPort={grpc_port}"),
                format!("brokerName={name}"),
                format!("mappedFileSizeCommitLog={}", 64 * 1024 * 1024),
                // Transactions left unknown are checked within seconds.
                "transactionTimeOut=1000".to_owned(),
                "transactionCheckInterval=1000".to_owned(),
            ]);
        procs.push(start(broker)?);
        brokers.push(loopback(port));
        grpc.push(loopback(grpc_port));
    }

    let outcome = wait_ready(&mut procs, &ns_addr, &brokers, &interrupted).and_then(|()| {
        let mut test = cargo(root);
        test.args(["test", "-p", "e2e-tests"]);
        if options.include_ignored {
            // The scenarios of missing features fail; the others still run.
            test.arg("--no-fail-fast");
        }
        test.arg("--");
        if let Some(filter) = &options.filter {
            test.arg(filter);
        }
        test.args(["--test-threads=1", "--nocapture"])
            .env("SLUICE_E2E_NAMESRV", &ns_addr)
            .env("SLUICE_E2E_BROKER_A", &brokers[0])
            .env("SLUICE_E2E_BROKER_B", &brokers[1])
            .env("SLUICE_E2E_GRPC_A", &grpc[0])
            .env("SLUICE_E2E_BROKER_A_BIN", &broker_bin)
            .env("SLUICE_E2E_DIR", &dir);
        match cpp_client_python(root) {
            Some(python) => {
                test.env("SLUICE_E2E_CPP_PYTHON", python);
            }
            None => eprintln!(
                "e2e: the RocketMQ C++ client is not installed ({CPP_CLIENT_PYTHON} is missing), \
                 so its scenarios skip; `scripts/install-cpp-client.sh` installs it"
            ),
        }
        if options.include_ignored {
            test.arg("--include-ignored");
        }
        if options.quick {
            test.env("SLUICE_E2E_QUICK", "1");
        }
        run_bounded(test, TEST_LIMIT, &interrupted)
    });
    // Still-running processes are a result too: a crash mid-test shows here.
    for p in &mut procs {
        if let Ok(Some(status)) = p.try_wait() {
            eprintln!("e2e: {} exited early with {status}", p.name());
        }
    }
    if outcome.is_err() {
        for p in &procs {
            p.print_tail(LOG_TAIL_LINES);
        }
    }
    drop(procs);
    let took = started.elapsed().as_secs_f64();
    match outcome {
        Ok(()) => {
            // Logs are only worth keeping when something failed.
            let _ = fs::remove_dir_all(&dir);
            eprintln!("e2e: passed in {took:.1} s");
            Ok(())
        }
        Err(e) => {
            eprintln!(
                "e2e: failed after {took:.1} s; logs kept in {}",
                dir.display()
            );
            Err(e)
        }
    }
}

/// A flag set by Ctrl-C or SIGTERM, so that a run can stop its processes.
pub(crate) fn interrupt_flag() -> Result<Arc<AtomicBool>> {
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("install the interrupt handler")?;
    }
    Ok(interrupted)
}

/// A new directory `<prefix>-<pid>-<ms>` under the system's temporary one.
pub(crate) fn fresh_dir(prefix: &str) -> Result<std::path::PathBuf> {
    let dir = env::temp_dir().join(format!(
        "{prefix}-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    ));
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    Ok(dir)
}

/// Starts a process, saying so.
fn start(launch: Launch) -> Result<Proc> {
    eprintln!("e2e: start {}: {launch:?}", launch.name());
    Ok(launch.spawn()?)
}

/// Waits until every process accepts connections, then lets the brokers register.
fn wait_ready(
    procs: &mut [Proc],
    ns_addr: &str,
    brokers: &[String],
    interrupted: &AtomicBool,
) -> Result<()> {
    let addrs: Vec<&str> = std::iter::once(ns_addr)
        .chain(brokers.iter().map(String::as_str))
        .collect();
    for (proc, addr) in procs.iter_mut().zip(addrs) {
        proc.wait_listening_unless(addr, STARTUP_LIMIT, interrupted)?;
        eprintln!("e2e: {} listening on {addr}", proc.name());
    }
    thread::sleep(REGISTRATION_PAUSE);
    Ok(())
}

/// Runs a command in a process group of its own, killing the whole group if
/// it takes longer than `limit` or the run is interrupted.
pub(crate) fn run_bounded(
    mut cmd: Command,
    limit: Duration,
    interrupted: &AtomicBool,
) -> Result<()> {
    let shown = format!("{cmd:?}");
    eprintln!("$ {shown}");
    cmd.process_group(0);
    let mut child = cmd.spawn().with_context(|| format!("start {shown}"))?;
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().context("poll cargo test")? {
            if !status.success() {
                bail!("{shown} failed with {status}");
            }
            return Ok(());
        }
        let why = if interrupted.load(Ordering::Relaxed) {
            Some("was interrupted".to_owned())
        } else if Instant::now() >= deadline {
            Some(format!("did not finish within {limit:?}"))
        } else {
            None
        };
        if let Some(why) = why {
            let group = rustix::process::Pid::from_child(&child);
            // An error means the group is already gone.
            let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            let _ = child.wait();
            bail!("{shown} {why}; its processes were killed");
        }
        thread::sleep(Duration::from_millis(200));
    }
}
