//! `cargo xtask bench transactions`: what transactions cost.
//!
//! - Throughput: on one broker, closed-loop sends at 64 in flight, plain
//!   and transactional (half, then `END_TRANSACTION` commit, both counted
//!   as one request), alternating, two rounds each; the transactional/plain
//!   ratio of msgs/s.
//! - Check pacing: plain sends' latency while the broker checks a backlog
//!   of pending half messages (`--halves`, default 1,000,000) at
//!   `transactionCheckMaxPerSecond` (1000), against the same backlog with
//!   checks off (`transactionCheckInterval` one hour), on fresh brokers in
//!   the order off, on, off, on. The load tool declares itself a producer
//!   of the halves' group, so the checks are sent to it (and ignored);
//!   the checks sent during each run are read from the broker's metrics.
//!
//! One table per part, and `transactions.json`.

use std::{
    io::{Read, Write},
    net::TcpStream,
    time::Duration,
};

use anyhow::{Context, Result};
use bench_report::Report;
use proc_harness::free_port;
use serde::Serialize;

use super::{
    runner::{load, strings, table_header, table_row, write_json, Broker, Setup},
    Options,
};

/// Body size of every message.
const BODY_BYTES: &str = "256";
/// Checks per second the broker may send (its default).
const CHECKS_PER_SECOND: u64 = 1000;

/// One measured run.
#[derive(Debug, Serialize)]
struct Run {
    /// `plain`, `tx commit` (throughput part), or `checks off` /
    /// `checks on` (pacing part).
    label: &'static str,
    in_flight: u32,
    connections: u32,
    /// Half messages left open on the broker before the run (pacing part).
    pending_halves: Option<u64>,
    /// `CHECK_TRANSACTION_STATE` requests the broker sent during the run.
    checks_sent: Option<u64>,
    /// The load tool's report of the run.
    report: Report,
}

/// What `transactions.json` holds.
#[derive(Debug, Serialize)]
struct Results {
    throughput: Vec<Run>,
    /// Mean transactional msgs/s over mean plain msgs/s.
    throughput_ratio: Option<f64>,
    pacing: Vec<Run>,
    /// Mean p99 with checks on over mean p99 with checks off.
    p99_ratio: Option<f64>,
}

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
    let secs = if options.quick { 2 } else { 10 };
    let halves = options
        .halves
        .unwrap_or(if options.quick { 20_000 } else { 1_000_000 });
    let throughput = throughput_runs(setup, secs)?;
    let throughput_ratio = ratio(&throughput, "tx commit", "plain", |r| Some(r.ok_per_sec));
    println!(
        "transactional sends (half + commit) against plain sends, {BODY_BYTES}-byte bodies, \
         {secs} s per row, {} build{}",
        options.build(),
        options.settings_note(",")
    );
    print!("{}", table(&throughput));
    println!(
        "transactional/plain msgs/s: {}\n",
        ratio_text(throughput_ratio)
    );

    let pacing = pacing_runs(setup, secs, halves)?;
    let p99_ratio = ratio(&pacing, "checks on", "checks off", |r| {
        r.latency_ms.as_ref().map(|l| l.p99)
    });
    println!(
        "plain sends beside {halves} pending half messages, checks off and on \
         (paced to {CHECKS_PER_SECOND}/s), {secs} s per row"
    );
    print!("{}", table(&pacing));
    println!("p99 with checks on / off: {}", ratio_text(p99_ratio));
    let file = setup.out.join("transactions.json");
    write_json(
        &file,
        &Results {
            throughput,
            throughput_ratio,
            pacing,
            p99_ratio,
        },
    )?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// Plain, transactional, plain, transactional at 64 in flight.
fn throughput_runs(setup: &Setup, secs: u64) -> Result<Vec<Run>> {
    let broker = Broker::start(setup, "tx-throughput", &[])?;
    let mut runs = Vec::new();
    for round in 1..=2 {
        for (label, extra) in [
            ("plain", &[][..]),
            ("tx commit", &["--transaction", "commit"][..]),
        ] {
            let mut args = closed_args(64, 4, secs);
            args.extend(strings(extra));
            let (_, report) = load(setup, &broker, &format!("tx-{label}-{round}"), &args)?;
            runs.push(Run {
                label,
                in_flight: 64,
                connections: 4,
                pending_halves: None,
                checks_sent: None,
                report,
            });
        }
    }
    broker.stop();
    Ok(runs)
}

/// Checks off, on, off, on: each a fresh broker with `halves` pending.
fn pacing_runs(setup: &Setup, secs: u64, halves: u64) -> Result<Vec<Run>> {
    let mut runs = Vec::new();
    for (i, checks_on) in [false, true, false, true].into_iter().enumerate() {
        let metrics_port = free_port()?;
        let interval = if checks_on { "1000" } else { "3600000" };
        let broker = Broker::start(
            setup,
            &format!("tx-pacing-{i}"),
            &[
                format!("metricsListenPort={metrics_port}"),
                "transactionTimeOut=1000".to_owned(),
                format!("transactionCheckInterval={interval}"),
                format!("transactionCheckMaxPerSecond={CHECKS_PER_SECOND}"),
            ],
        )?;
        let pending = fill(setup, &broker, i, halves)?;
        let before = checks_sent(metrics_port)?;
        let mut args = closed_args(16, 2, secs);
        args.push("--producer-heartbeat".to_owned());
        let label = if checks_on { "checks on" } else { "checks off" };
        let (_, report) = load(setup, &broker, &format!("tx-pacing-{i}-sends"), &args)?;
        let after = checks_sent(metrics_port)?;
        broker.stop();
        runs.push(Run {
            label,
            in_flight: 16,
            connections: 2,
            pending_halves: Some(pending),
            checks_sent: Some(after.saturating_sub(before)),
            report,
        });
    }
    Ok(runs)
}

/// Leaves at least `halves` half messages open on `broker`; returns how
/// many the load tool saw acknowledged (its warm-up's sends come on top).
fn fill(setup: &Setup, broker: &Broker, run: usize, halves: u64) -> Result<u64> {
    let mut stored = 0;
    let mut part = 0;
    while stored < halves {
        let mut args = closed_args(64, 4, 10);
        args.extend(strings(&["--transaction", "open", "--warmup", "0"]));
        let (_, report) = load(setup, broker, &format!("tx-fill-{run}-{part}"), &args)?;
        anyhow::ensure!(
            report.ok > 0,
            "filling half messages: nothing was stored ({} failed)",
            report.failed_total
        );
        stored += report.ok;
        part += 1;
    }
    Ok(stored)
}

fn closed_args(in_flight: u32, connections: u32, secs: u64) -> Vec<String> {
    strings(&[
        "--in-flight",
        &in_flight.to_string(),
        "--connections",
        &connections.to_string(),
        "--duration",
        &secs.to_string(),
        "--size",
        BODY_BYTES,
    ])
}

/// `sluice_transaction_checks_total{outcome="sent"}` of the broker whose
/// metrics listen on `port` (0 before the first check).
fn checks_sent(port: u16) -> Result<u64> {
    let mut conn = TcpStream::connect(("127.0.0.1", port))
        .with_context(|| format!("connect to the metrics port {port}"))?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))?;
    conn.write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    conn.read_to_string(&mut text)
        .context("read the metrics page")?;
    Ok(counter(
        &text,
        "sluice_transaction_checks_total",
        "outcome=\"sent\"",
    ))
}

/// The value of the Prometheus sample `name{..label..}` in `text`, 0 when
/// absent.
fn counter(text: &str, name: &str, label: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

/// Mean of `pick` over the runs labelled `top`, over the same for `bottom`.
fn ratio(runs: &[Run], top: &str, bottom: &str, pick: fn(&Report) -> Option<f64>) -> Option<f64> {
    let mean = |label: &str| {
        let values: Vec<f64> = runs
            .iter()
            .filter(|r| r.label == label)
            .filter_map(|r| pick(&r.report))
            .collect();
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let (t, b) = (mean(top)?, mean(bottom)?);
    (b > 0.0).then(|| t / b)
}

fn ratio_text(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}"))
}

/// One line per run, with the pending halves and checks sent when known.
fn table(runs: &[Run]) -> String {
    let mut out = table_header("run");
    let header_end = out.len() - 1;
    out.insert_str(header_end, &format!("{:>10}{:>9}", "pending", "checks"));
    for run in runs {
        let mut row = table_row(run.label, run.in_flight, run.connections, &run.report);
        row.pop();
        let figure = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        row.push_str(&format!(
            "{:>10}{:>9}\n",
            figure(run.pending_halves),
            figure(run.checks_sent)
        ));
        out.push_str(&row);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runner::sample_report;

    fn run(label: &'static str, msgs: f64, p99: f64) -> Run {
        Run {
            label,
            in_flight: 64,
            connections: 4,
            pending_halves: (label == "checks on").then_some(1_000_000),
            checks_sent: (label == "checks on").then_some(9_876),
            report: sample_report(msgs, 0.1, p99, 2.0),
        }
    }

    #[test]
    fn ratios_are_of_the_means_of_each_label() {
        let runs = [
            run("plain", 100.0, 1.0),
            run("tx commit", 30.0, 2.0),
            run("plain", 300.0, 1.0),
            run("tx commit", 50.0, 4.0),
        ];
        let r = ratio(&runs, "tx commit", "plain", |r| Some(r.ok_per_sec)).unwrap();
        assert!((r - 0.2).abs() < 1e-9, "{r}");
        let p = ratio(&runs, "tx commit", "plain", |r| {
            r.latency_ms.as_ref().map(|l| l.p99)
        })
        .unwrap();
        assert!((p - 3.0).abs() < 1e-9, "{p}");
        assert_eq!(
            ratio(&runs, "checks on", "plain", |r| Some(r.ok_per_sec)),
            None
        );
    }

    #[test]
    fn the_table_shows_pending_halves_and_checks() {
        let text = table(&[run("checks off", 10.0, 1.0), run("checks on", 9.0, 1.5)]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines[0].ends_with("pending   checks"), "{text}");
        assert!(lines[1].ends_with("-        -"), "{text}");
        assert!(lines[2].ends_with("1000000     9876"), "{text}");
    }

    #[test]
    fn counters_are_read_from_the_metrics_page() {
        let page = "# TYPE sluice_transaction_checks_total counter\n\
                    sluice_transaction_checks_total{outcome=\"sent\"} 1234\n\
                    sluice_transaction_checks_total{outcome=\"discarded\"} 7\n";
        assert_eq!(
            counter(page, "sluice_transaction_checks_total", "outcome=\"sent\""),
            1234
        );
        assert_eq!(counter(page, "sluice_other", "outcome=\"sent\""), 0);
    }
}
