//! The two-topic phase of `cargo xtask bench overload`: one topic floods
//! the broker at 10x its capacity while another sends at a tenth of it.
//! The quiet topic runs alone first (its unloaded latency), then beside the
//! flood with fair shares per topic (the default), then beside the flood
//! with one FIFO and no adaptive admission (RocketMQ's behaviour). Each on
//! a fresh broker. The table, `overload.json` and `overload.png` (latency
//! over time, one line per topic and setting) go to `two-topics/` in the
//! output directory, followed by the figures the targets name.

use std::{path::PathBuf, process::Command, thread};

use anyhow::{Context, Result};
use bench_report::Report;

use super::runner::{load, strings, Broker, Setup};

/// The flooding topic's offered load, as a multiple of capacity.
const FLOOD_FACTOR: f64 = 10.0;
/// The quiet topic's offered load, as a multiple of capacity.
const QUIET_FACTOR: f64 = 0.1;

/// What the two-topic phase needs from the overload experiment.
pub(super) struct Phase<'a> {
    /// Settings every broker of the experiment gets.
    pub common: &'a [String],
    /// The capacity run's report file and its goodput.
    pub capacity_file: &'a PathBuf,
    pub capacity: f64,
    /// Seconds each run records.
    pub secs: u64,
    /// Connections of each load tool run.
    pub connections: u32,
    /// What bounds capacity, for the table.
    pub bound_text: &'a str,
    /// The queue wait limit, for the table.
    pub limit_ms: u64,
}

/// Runs the phase and prints its table and verdict figures.
pub(super) fn run(setup: &Setup, p: &Phase<'_>) -> Result<()> {
    let quiet_rate = (p.capacity * QUIET_FACTOR).round().max(1.0);
    let flood_rate = (p.capacity * FLOOD_FACTOR).round();
    let conns = p.connections.to_string();
    let args = |topic: &str, rate: f64| {
        strings(&[
            "--topic",
            topic,
            "--rate",
            &format!("{rate}"),
            "--connections",
            &conns,
            "--duration",
            &p.secs.to_string(),
        ])
    };
    let mut runs: Vec<(String, PathBuf, Report)> = Vec::new();
    let broker = Broker::start(setup, "two-alone", p.common)?;
    let (file, alone) = load(setup, &broker, "quiet-alone", &args("Quiet", quiet_rate))?;
    broker.stop();
    runs.push(("Quiet alone".into(), file, alone));
    for (name, label, extra) in [
        ("shares", "fair shares", &[][..]),
        (
            "fifo",
            "one FIFO",
            &["sendShareKey=none", "adaptiveAdmissionEnable=false"][..],
        ),
    ] {
        let mut settings = p.common.to_vec();
        settings.extend(extra.iter().map(|s| (*s).to_owned()));
        let broker = Broker::start(setup, &format!("two-{name}"), &settings)?;
        let (quiet, flood) = thread::scope(|s| {
            let flood = s.spawn(|| {
                load(
                    setup,
                    &broker,
                    &format!("flood-{name}"),
                    &args("Flood", flood_rate),
                )
            });
            let quiet = load(
                setup,
                &broker,
                &format!("quiet-{name}"),
                &args("Quiet", quiet_rate),
            );
            let flood = flood
                .join()
                .map_err(|_| anyhow::anyhow!("the flood's load thread panicked"));
            (quiet, flood)
        });
        let (quiet, flood) = (quiet?, flood??);
        broker.stop();
        runs.push((format!("Quiet, {label}"), quiet.0, quiet.1));
        runs.push((format!("Flood, {label}"), flood.0, flood.1));
    }
    let out = setup.out.join("two-topics");
    std::fs::create_dir_all(&out).with_context(|| format!("create {}", out.display()))?;
    let mut report = Command::new(&setup.bench);
    report
        .arg("overload-report")
        .arg("--capacity")
        .arg(p.capacity_file)
        .args(["--limit-ms", &p.limit_ms.to_string()])
        .args(["--bound", p.bound_text])
        .arg("--out")
        .arg(&out);
    for (label, file, _) in &runs {
        report
            .arg("--run")
            .arg(format!("{label}={}", file.display()));
    }
    println!(
        "\ntwo topics: Flood offered {FLOOD_FACTOR}x capacity ({flood_rate}/s) and Quiet \
         {QUIET_FACTOR}x ({quiet_rate}/s) at once, {} s, one fresh broker per setting; \
         Quiet alone first",
        p.secs
    );
    crate::run(report)?;
    let p99 = |r: &Report| r.latency_ms.map_or(f64::NAN, |l| l.p99);
    let alone = &runs[0].2;
    for pair in runs[1..].chunks(2) {
        let [(label, _, quiet), (_, _, flood)] = pair else {
            continue;
        };
        println!(
            "{label}: Quiet p99 {:.3} ms = {:.2}x alone ({:.3} ms), Quiet failed {} of {}; \
             Flood goodput {:.1} % of capacity",
            p99(quiet),
            p99(quiet) / p99(alone),
            p99(alone),
            quiet.failed.total(),
            quiet.sent,
            100.0 * flood.ok_per_sec / p.capacity,
        );
    }
    Ok(())
}
