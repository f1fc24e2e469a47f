//! `cargo xtask image [--tag T] [--build-arg K=V]... [--no-build]`: builds
//! the container image (`Dockerfile`) and runs a replicated group from it
//! as `deploy/k8s` does: each process a container started with its
//! manifest's command and its ConfigMap's file (`deploy/k8s/config`), a
//! name server with a controller and two brokers in controller mode. They
//! share the host's network, so the ports and peer addresses of the
//! configuration files are overridden with `--set` (one controller instead
//! of three). Passes when both brokers answer `/ready`, the master counts
//! its slave in sync, a load of sends is all acknowledged `SUCCESS`, the
//! admin tool inside the image names the master, and every container stops
//! on SIGTERM with exit status 0. Needs a running Docker engine
//! (`scripts/docker-local.sh` sets one up on Debian).

use std::{
    io::{Read, Write},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Output},
    thread,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use bench_report::Report;
use proc_harness::{free_port, loopback, target_dir};

use crate::{cargo, run};

/// What to build and run.
struct Options {
    tag: String,
    build_args: Vec<String>,
    build: bool,
}

/// Parses the options and runs the build and the check.
pub fn main(root: &Path, args: &[String]) -> Result<()> {
    let mut options = Options {
        tag: "sluice:dev".to_owned(),
        build_args: Vec::new(),
        build: true,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--tag" => options.tag = args.next().context("--tag needs a value")?.clone(),
            "--build-arg" => options
                .build_args
                .push(args.next().context("--build-arg needs KEY=VALUE")?.clone()),
            "--no-build" => options.build = false,
            other => {
                bail!("image: unknown option {other:?} (--tag T, --build-arg K=V, --no-build)")
            }
        }
    }
    if !docker(&["info"]).is_ok_and(|o| o.status.success()) {
        bail!(
            "image: no Docker engine answers `docker info` (on Debian, scripts/docker-local.sh \
             installs and starts one)"
        );
    }
    if options.build {
        let started = Instant::now();
        let mut build = Command::new("docker");
        // The host's network: builds work where Docker has no bridge.
        build.args(["build", "--network", "host", "-t", &options.tag]);
        for arg in &options.build_args {
            build.args(["--build-arg", arg]);
        }
        build.arg(root);
        run(build)?;
        eprintln!(
            "image: built {} in {:.0} s",
            options.tag,
            started.elapsed().as_secs_f64()
        );
    }
    let size = docker(&["image", "inspect", "-f", "{{.Size}}", &options.tag])?;
    let size: u64 = String::from_utf8_lossy(&size.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    eprintln!("image: {} is {} MB", options.tag, size / 1_000_000);
    let bench = build_bench(root)?;
    check(root, &options.tag, &bench)
}

/// The shell command a manifest of `deploy/k8s` runs its container with:
/// the argument that starts with `exec <program>`.
fn manifest_command(root: &Path, manifest: &str, program: &str) -> Result<String> {
    let file = root.join("deploy/k8s").join(manifest);
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("read {}", file.display()))?;
    let wanted = format!("exec {program} ");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("- "))
        .find(|arg| arg.starts_with(&wanted))
        .map(str::to_owned)
        .with_context(|| format!("{}: no `exec {program}` command", file.display()))
}

/// Builds the load tool (debug) on the host; its path.
fn build_bench(root: &Path) -> Result<PathBuf> {
    let mut build = cargo(root);
    build.args(["build", "-p", "bench", "--bin", "sluice-bench"]);
    run(build)?;
    Ok(target_dir(root).join("debug").join("sluice-bench"))
}

/// Containers of one check, removed when dropped (their logs printed first
/// when the check failed).
struct Containers {
    names: Vec<String>,
    passed: bool,
}

impl Containers {
    /// Starts a container named `name` from `image` on the host's network
    /// with the `docker run` options `options`, running `script` with
    /// `/bin/sh -c` as a manifest does.
    fn start(&mut self, name: &str, image: &str, options: &[String], script: &str) -> Result<()> {
        let mut cmd = vec!["run", "-d", "--name", name, "--network", "host"];
        cmd.extend(options.iter().map(String::as_str));
        cmd.extend(["--entrypoint", "/bin/sh", image, "-c", script]);
        let out = docker(&cmd)?;
        if !out.status.success() {
            bail!(
                "docker run {name}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        self.names.push(name.to_owned());
        Ok(())
    }
}

impl Drop for Containers {
    fn drop(&mut self) {
        for name in &self.names {
            if !self.passed {
                if let Ok(out) = docker(&["logs", "--tail", "30", name]) {
                    eprintln!("--- {name} (last lines)");
                    eprintln!(
                        "{}{}",
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
            let _ = docker(&["rm", "-f", name]);
        }
    }
}

/// Runs the group from `image` and checks it; see the module's doc.
fn check(root: &Path, image: &str, bench: &Path) -> Result<()> {
    let id = std::process::id();
    let (ns, ctl) = (free_port()?, free_port()?);
    let ctl_addr = loopback(ctl);
    let config = root.join("deploy/k8s/config");
    let mount = |file: &str, at: &str| {
        format!(
            "--volume={}:/etc/sluice/{at}:ro",
            config.join(file).display()
        )
    };
    let mut containers = Containers {
        names: Vec::new(),
        passed: false,
    };
    let namesrv = manifest_command(root, "namesrv.yaml", "namesrv")?;
    containers.start(
        &format!("sluice-check-ns-{id}"),
        image,
        // The ordinal in the host name names the controller, as in a
        // StatefulSet.
        &[
            "--hostname=sluice-namesrv-0".to_owned(),
            mount("namesrv.toml", "namesrv.toml"),
        ],
        &format!("{namesrv} --set listenPort={ns} --set controllerDLegerPeers=n0-{ctl_addr}"),
    )?;
    let broker = manifest_command(root, "broker-a.yaml", "broker")?;
    let started = Instant::now();
    let mut brokers = Vec::new();
    for i in 0..2 {
        let (port, ha, metrics) = (free_port()?, free_port()?, free_port()?);
        containers.start(
            &format!("sluice-check-broker-{i}-{id}"),
            image,
            &[
                "--env=POD_IP=127.0.0.1".to_owned(),
                mount("broker-a.toml", "broker.toml"),
            ],
            &format!(
                "{broker} --set listenPort={port} --set haListenPort={ha} \
                 --set metricsListenPort={metrics} --set grpcListenPort=0 \
                 --set namesrvAddr={} --set controllerAddr={ctl_addr}",
                loopback(ns)
            ),
        )?;
        brokers.push((loopback(port), metrics));
    }
    for (addr, metrics) in &brokers {
        wait_for(Duration::from_secs(120), &format!("{addr} ready"), || {
            Ok(http_get(*metrics, "/ready")?.0 == 200)
        })?;
    }
    eprintln!(
        "image: both brokers ready {:.1} s after the name server started",
        started.elapsed().as_secs_f64()
    );
    // The master is the broker whose metrics count a replica in sync.
    let mut master = None;
    wait_for(Duration::from_secs(60), "a slave in sync", || {
        for (addr, metrics) in &brokers {
            let (_, body) = http_get(*metrics, "/metrics")?;
            if body
                .lines()
                .any(|l| l.starts_with("sluice_replica_in_sync{") && l.ends_with(" 1"))
            {
                master = Some(addr.clone());
                return Ok(true);
            }
        }
        Ok(false)
    })?;
    let master = master.context("no master")?;
    let target = [
        "--broker",
        master.as_str(),
        "--topic",
        "ImageCheck",
        "--queues",
        "4",
    ];
    let created = Command::new(bench)
        .arg("create-topic")
        .args(target)
        .output()
        .context("start sluice-bench")?;
    if !created.status.success() {
        bail!(
            "create-topic: {}",
            String::from_utf8_lossy(&created.stderr).trim()
        );
    }
    let sent = Command::new(bench)
        .args(target)
        .args(["--in-flight", "8"])
        .args(["--duration", "5", "--warmup", "1", "--json"])
        .output()
        .context("start sluice-bench")?;
    let report = Report::from_json(&sent.stdout).context("sluice-bench printed no report")?;
    if report.ok == 0 || report.failed_total > 0 {
        bail!(
            "sends to {master}: {} acknowledged, {} failed ({:?})",
            report.ok,
            report.failed_total,
            report.failed
        );
    }
    eprintln!(
        "image: {} sends acknowledged by every replica, none failed ({:.0}/s, debug load tool)",
        report.ok, report.ok_per_sec
    );
    let admin = docker(&[
        "exec",
        &containers.names[1],
        "sluice-admin",
        "controller",
        "sync-state",
        "--controller",
        &ctl_addr,
        "--broker-name",
        "broker-a",
    ])?;
    let said = String::from_utf8_lossy(&admin.stdout);
    if !admin.status.success() || !said.contains(master.as_str()) {
        bail!(
            "sluice-admin in the image did not name {master}: {said}{}",
            String::from_utf8_lossy(&admin.stderr)
        );
    }
    eprintln!("image: sluice-admin in the image names {master} master");
    // Brokers first, the name server last, as a rolling shutdown does.
    for name in containers.names.iter().rev() {
        let stopped = docker(&["stop", "-t", "30", name])?;
        if !stopped.status.success() {
            bail!(
                "docker stop {name}: {}",
                String::from_utf8_lossy(&stopped.stderr).trim()
            );
        }
        let code = docker(&["inspect", "-f", "{{.State.ExitCode}}", name])?;
        let code = String::from_utf8_lossy(&code.stdout).trim().to_owned();
        if code != "0" {
            bail!("{name} exited with {code} on SIGTERM");
        }
    }
    containers.passed = true;
    eprintln!("image: every container stopped on SIGTERM with status 0; passed");
    Ok(())
}

/// Runs `docker` with `args`, capturing its output.
fn docker(args: &[&str]) -> Result<Output> {
    Command::new("docker")
        .args(args)
        .output()
        .context("run docker (is it installed?)")
}

/// Calls `ready` every 200 ms until it says so or `limit` passed.
fn wait_for(limit: Duration, what: &str, mut ready: impl FnMut() -> Result<bool>) -> Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        if ready().unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("image: not {what} within {} s", limit.as_secs());
        }
        thread::sleep(Duration::from_millis(200));
    }
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body.
fn http_get(port: u16, path: &str) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP status")?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_owned();
    Ok((status, body))
}
