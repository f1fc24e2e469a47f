//! `cargo xtask e2e [--quick]`: the end-to-end suite against real processes.
//!
//! Builds the `namesrv` and `broker` binaries once, starts one name server
//! and two brokers (`broker-a`, `broker-b`) on free loopback ports with their
//! stores and logs in a fresh temporary directory, waits until they listen,
//! then runs `cargo test -p e2e-tests` with their addresses in `SLUICE_E2E_*`
//! environment variables. The processes are always killed afterwards, also
//! when the run is interrupted (Ctrl-C, SIGTERM) or times out: the test run
//! gets a process group of its own, so brokers that scenarios start go with
//! it. When the tests fail, the tail of each process log is printed.

use std::{
    env, fs,
    net::{SocketAddr, TcpListener, TcpStream},
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::{bail, Context, Result};

use crate::{cargo, run};

/// How long each process may take to accept TCP connections.
const STARTUP_LIMIT: Duration = Duration::from_secs(20);
/// Pause after the ports are open so that both brokers have registered.
const REGISTRATION_PAUSE: Duration = Duration::from_secs(1);
/// How long the test run may take before it is killed.
const TEST_LIMIT: Duration = Duration::from_secs(15 * 60);
/// Lines of each process log shown when something failed.
const LOG_TAIL_LINES: usize = 40;

/// One started process, killed when dropped.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Errors mean the process already exited; nothing else to do.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the suite; `quick` shrinks the message counts.
pub fn run_suite(root: &Path, quick: bool) -> Result<()> {
    let started = Instant::now();
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .context("install the interrupt handler")?;
    }
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

    let dir = env::temp_dir().join(format!(
        "sluice-e2e-{}-{}",
        std::process::id(),
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    ));
    fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    eprintln!("e2e: working directory {}", dir.display());

    let ns_port = free_port()?;
    let ns_addr = format!("127.0.0.1:{ns_port}");
    let mut procs = Vec::new();
    let mut ns_cmd = Command::new(&namesrv_bin);
    ns_cmd.args(["--bind", "127.0.0.1", "--listen-port", &ns_port.to_string()]);
    procs.push(spawn("namesrv", ns_cmd, &dir)?);
    let mut brokers = Vec::new();
    let mut grpc = Vec::new();
    for name in ["broker-a", "broker-b"] {
        let port = free_port()?;
        let grpc_port = free_port()?;
        let mut cmd = Command::new(&broker_bin);
        cmd.arg("-p")
            .arg(port.to_string())
            .arg("-n")
            .arg(&ns_addr)
            .arg("--store-dir")
            .arg(dir.join(name));
        for set in [
            "embeddedNamesrv=false".to_owned(),
            "metricsListenPort=0".to_owned(),
            format!("grpcListenPort={grpc_port}"),
            format!("brokerName={name}"),
            format!("mappedFileSizeCommitLog={}", 64 * 1024 * 1024),
        ] {
            cmd.arg("--set").arg(set);
        }
        procs.push(spawn(name, cmd, &dir)?);
        brokers.push(format!("127.0.0.1:{port}"));
        grpc.push(format!("127.0.0.1:{grpc_port}"));
    }

    let outcome = wait_ready(&mut procs, &ns_addr, &brokers, &interrupted).and_then(|()| {
        let mut test = cargo(root);
        test.args([
            "test",
            "-p",
            "e2e-tests",
            "--",
            "--test-threads=1",
            "--nocapture",
        ])
        .env("SLUICE_E2E_NAMESRV", &ns_addr)
        .env("SLUICE_E2E_BROKER_A", &brokers[0])
        .env("SLUICE_E2E_BROKER_B", &brokers[1])
        .env("SLUICE_E2E_GRPC_A", &grpc[0])
        .env("SLUICE_E2E_BROKER_A_BIN", &broker_bin)
        .env("SLUICE_E2E_DIR", &dir);
        if quick {
            test.env("SLUICE_E2E_QUICK", "1");
        }
        run_bounded(test, TEST_LIMIT, &interrupted)
    });
    // Still-running processes are a result too: a crash mid-test shows here.
    for p in &mut procs {
        if let Ok(Some(status)) = p.child.try_wait() {
            eprintln!("e2e: {} exited early with {status}", p.name);
        }
    }
    if outcome.is_err() {
        for p in &procs {
            print_tail(p);
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

/// The target directory `cargo build` uses: `CARGO_TARGET_DIR` or `<root>/target`.
fn target_dir(root: &Path) -> PathBuf {
    match env::var_os("CARGO_TARGET_DIR") {
        Some(d) => root.join(d),
        None => root.join("target"),
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("bind a free loopback port")?;
    Ok(listener.local_addr().context("read the bound port")?.port())
}

/// Starts `cmd` with its stdout and stderr appended to `<dir>/<name>.log`.
fn spawn(name: &'static str, mut cmd: Command, dir: &Path) -> Result<Proc> {
    let log = dir.join(format!("{name}.log"));
    let file = fs::File::create(&log).with_context(|| format!("create {}", log.display()))?;
    let err = file.try_clone().context("duplicate the log file handle")?;
    cmd.stdin(Stdio::null()).stdout(file).stderr(err);
    eprintln!("e2e: start {name}: {cmd:?}");
    let child = cmd.spawn().with_context(|| format!("start {name}"))?;
    Ok(Proc { name, child, log })
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
    let deadline = Instant::now() + STARTUP_LIMIT;
    for (proc, addr) in procs.iter_mut().zip(addrs) {
        let sock: SocketAddr = addr.parse().with_context(|| format!("parse {addr}"))?;
        loop {
            if TcpStream::connect_timeout(&sock, Duration::from_millis(200)).is_ok() {
                break;
            }
            if let Some(status) = proc.child.try_wait().context("poll a child process")? {
                bail!("{} exited with {status} before listening", proc.name);
            }
            if Instant::now() >= deadline {
                bail!(
                    "{} not listening on {addr} within {STARTUP_LIMIT:?}",
                    proc.name
                );
            }
            if interrupted.load(Ordering::Relaxed) {
                bail!("interrupted while waiting for {}", proc.name);
            }
            thread::sleep(Duration::from_millis(100));
        }
        eprintln!("e2e: {} listening on {addr}", proc.name);
    }
    thread::sleep(REGISTRATION_PAUSE);
    Ok(())
}

/// Runs a command in a process group of its own, killing the whole group if
/// it takes longer than `limit` or the run is interrupted.
fn run_bounded(mut cmd: Command, limit: Duration, interrupted: &AtomicBool) -> Result<()> {
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

/// Prints the last lines of a process's log.
fn print_tail(p: &Proc) {
    match fs::read_to_string(&p.log) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let from = lines.len().saturating_sub(LOG_TAIL_LINES);
            eprintln!(
                "----- last {} lines of {} -----",
                lines.len() - from,
                p.log.display()
            );
            for line in &lines[from..] {
                eprintln!("{line}");
            }
        }
        Err(e) => eprintln!("e2e: cannot read {}: {e}", p.log.display()),
    }
}
