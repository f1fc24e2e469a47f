//! `cargo xtask chaos [--quick] [--replication]`: the chaos suite
//! (`tests/tests/chaos/`) against real broker processes, each case pushing
//! one limit and printing one line with its figure and PASS or FAIL; the
//! lines are repeated as a table at the end. `--quick` is the short form CI
//! runs (about four minutes); the full form writes more and runs longer
//! (about half an hour). `--replication` runs only the replicated-group
//! cases (controllers in name servers, brokers in controller mode, faults
//! cycle after cycle, network partitions between namespaces).
//!
//! Cases that need root (a small tmpfs as the broker's disk, network
//! namespaces and nftables) say SKIP without it.

use std::{
    fs,
    process::Stdio,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use proc_harness::target_dir;

use crate::{
    cargo,
    e2e::{fresh_dir, interrupt_flag, run_bounded},
    run,
};

/// Runs the suite.
pub fn main(root: &std::path::Path, args: &[String]) -> Result<()> {
    let mut quick = false;
    let mut replication = false;
    for arg in args {
        match arg.as_str() {
            "--quick" => quick = true,
            "--replication" => replication = true,
            other => bail!("chaos: unknown option {other:?} (--quick, --replication)"),
        }
    }
    let started = Instant::now();
    let interrupted = interrupt_flag()?;
    let mut build = cargo(root);
    build.args([
        "build",
        "--bin",
        "broker",
        "-p",
        "broker-server",
        "--bin",
        "sluice-bench",
        "-p",
        "bench",
        "--bin",
        "namesrv",
        "-p",
        "name-server",
    ]);
    run(build)?;
    let broker_bin = target_dir(root).join("debug").join("broker");
    let bench_bin = target_dir(root).join("debug").join("sluice-bench");
    let namesrv_bin = target_dir(root).join("debug").join("namesrv");
    let dir = fresh_dir("sluice-chaos")?;
    let log_path = dir.join("chaos.log");
    let log =
        fs::File::create(&log_path).with_context(|| format!("create {}", log_path.display()))?;
    eprintln!("chaos: working directory {}", dir.display());
    let mut test = cargo(root);
    test.args(["test", "-p", "e2e-tests", "--test", "chaos", "--"]);
    if replication {
        test.arg("replication_");
    }
    test.args(["--test-threads=1", "--nocapture"])
        .env("SLUICE_CHAOS_DIR", &dir)
        .env("SLUICE_CHAOS_BROKER_BIN", &broker_bin)
        .env("SLUICE_CHAOS_BENCH_BIN", &bench_bin)
        .env("SLUICE_CHAOS_NAMESRV_BIN", &namesrv_bin)
        .stdout(Stdio::from(log));
    if quick {
        test.env("SLUICE_CHAOS_QUICK", "1");
    }
    let limit = Duration::from_secs(if quick { 12 * 60 } else { 90 * 60 });
    let outcome = run_bounded(test, limit, &interrupted);
    let text = fs::read_to_string(&log_path).unwrap_or_default();
    println!("\ncase | figure | verdict");
    // libtest prints `test <name> ... ` on the same line as the case's own.
    for line in text
        .lines()
        .filter_map(|l| l.find("chaos: ").map(|at| &l[at + "chaos: ".len()..]))
    {
        println!("{line}");
    }
    let took = started.elapsed().as_secs_f64();
    match outcome {
        Ok(()) => {
            let _ = fs::remove_dir_all(&dir);
            eprintln!("chaos: passed in {took:.1} s");
            Ok(())
        }
        Err(e) => {
            let lines: Vec<&str> = text.lines().collect();
            for line in &lines[lines.len().saturating_sub(60)..] {
                eprintln!("{line}");
            }
            eprintln!(
                "chaos: failed after {took:.1} s; output and logs kept in {}",
                dir.display()
            );
            Err(e)
        }
    }
}
