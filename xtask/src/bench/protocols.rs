//! `cargo xtask bench protocols`: closed-loop 1 KiB sends over remoting and
//! over gRPC against one `ASYNC_FLUSH` broker: at 64 in flight remoting,
//! gRPC, then remoting again (the spread of the two remoting runs shows how
//! much the machine drifted), then 1 in flight over both; one table with
//! the gRPC/remoting ratios, and `protocols.json`.

use anyhow::Result;
use bench_report::Report;
use serde::Serialize;

use super::{
    runner::{create_topic, load, strings, table_header, table_row, write_json, Broker, Setup},
    Options,
};

/// The topic of the protocol comparison and its queue count.
const PROTOCOLS_TOPIC: &str = "BenchTopic";
const PROTOCOLS_QUEUES: u32 = 8;

/// One run of the protocol comparison: a line of the table and an entry of
/// `runs` in `protocols.json`.
#[derive(Debug, Serialize)]
struct ProtocolRun {
    protocol: &'static str,
    /// Which run of this protocol and in-flight count this is, from 1.
    round: u32,
    in_flight: u32,
    connections: u32,
    /// The load tool's report of the run.
    report: Report,
}

/// The comparison at one in-flight count: a line under the table and an
/// entry of `ratios` in `protocols.json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct Ratio {
    in_flight: u32,
    /// Mean msgs/s of the remoting runs.
    remoting_msgs_per_sec: Option<f64>,
    /// Mean msgs/s of the gRPC runs.
    grpc_msgs_per_sec: Option<f64>,
    /// gRPC msgs/s over remoting msgs/s.
    throughput_ratio: Option<f64>,
    /// gRPC median latency over remoting median latency (of the means).
    p50_ratio: Option<f64>,
    /// How many remoting runs the mean is of.
    remoting_runs: usize,
    /// (fastest - slowest) / mean of the remoting runs, when there are
    /// several: how much the machine drifted during the comparison.
    remoting_spread: Option<f64>,
}

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
    let secs = if options.quick { 2 } else { 10 };
    let broker = Broker::start(
        setup,
        "broker-protocols",
        &["flushDiskType=ASYNC_FLUSH".to_owned()],
    )?;
    create_topic(setup, &broker, PROTOCOLS_TOPIC, PROTOCOLS_QUEUES)?;
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
            &PROTOCOLS_QUEUES.to_string(),
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
        options.build(),
        options.settings_note(",")
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
        "runs": runs,
    });
    let file = setup.out.join("protocols.json");
    write_json(&file, &json)?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The protocol table: one row per run, in the order run.
fn protocols_table(runs: &[ProtocolRun]) -> String {
    let mut out = table_header("protocol");
    for run in runs {
        let label = if run.round > 1 {
            format!("{} #{}", run.protocol, run.round)
        } else {
            run.protocol.to_owned()
        };
        out.push_str(&table_row(
            &label,
            run.in_flight,
            run.connections,
            &run.report,
        ));
    }
    out
}

/// Per in-flight count: the mean msgs/s of each protocol's runs, the
/// gRPC/remoting throughput and p50 ratios, and the spread between repeated
/// remoting runs (drift of the machine during the comparison).
fn protocol_ratios(runs: &[ProtocolRun]) -> Vec<Ratio> {
    let mut in_flights: Vec<u32> = runs.iter().map(|r| r.in_flight).collect();
    in_flights.sort_unstable_by(|a, b| b.cmp(a));
    in_flights.dedup();
    let mean = |xs: &[f64]| (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64);
    in_flights
        .iter()
        .map(|&n| {
            let of = |protocol: &str, field: fn(&Report) -> Option<f64>| -> Vec<f64> {
                runs.iter()
                    .filter(|r| r.in_flight == n && r.protocol == protocol)
                    .filter_map(|r| field(&r.report))
                    .collect()
            };
            let rate = |r: &Report| Some(r.ok_per_sec);
            let p50 = |r: &Report| r.latency_ms.map(|l| l.p50);
            let remoting = of("remoting", rate);
            let grpc = of("grpc", rate);
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
            Ratio {
                in_flight: n,
                remoting_msgs_per_sec: mean(&remoting),
                grpc_msgs_per_sec: mean(&grpc),
                throughput_ratio: ratio(mean(&grpc), mean(&remoting)),
                p50_ratio: ratio(mean(&of("grpc", p50)), mean(&of("remoting", p50))),
                remoting_runs: remoting.len(),
                remoting_spread: drift,
            }
        })
        .collect()
}

/// The ratios as printed lines.
fn ratio_lines(ratios: &[Ratio]) -> Vec<String> {
    let mut lines = Vec::new();
    for r in ratios {
        let Some(throughput) = r.throughput_ratio else {
            continue;
        };
        let mut line = format!(
            "gRPC/remoting at {} in flight: throughput {throughput:.2}x ({:.1} vs {:.1} msgs/s",
            r.in_flight,
            r.grpc_msgs_per_sec.unwrap_or(0.0),
            r.remoting_msgs_per_sec.unwrap_or(0.0),
        );
        if r.remoting_runs > 1 {
            line.push_str(&format!(", remoting the mean of {} runs", r.remoting_runs));
        }
        line.push(')');
        if let Some(p50) = r.p50_ratio {
            line.push_str(&format!(", p50 {p50:.2}x"));
        }
        lines.push(line);
        if let Some(spread) = r.remoting_spread {
            lines.push(format!(
                "  remoting runs before and after gRPC differ by {:.1} % (machine drift)",
                spread * 100.0
            ));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runner::sample_report;

    fn protocol_run(protocol: &'static str, round: u32, in_flight: u32, rate: f64) -> ProtocolRun {
        ProtocolRun {
            protocol,
            round,
            in_flight,
            connections: 4,
            report: sample_report(rate, 64.0 / rate * 1000.0, 2.0, 3.0),
        }
    }

    #[test]
    fn the_protocol_ratios_compare_grpc_with_the_mean_of_the_remoting_runs() -> Result<()> {
        let runs = [
            protocol_run("remoting", 1, 64, 10_000.0),
            protocol_run("grpc", 1, 64, 6_000.0),
            protocol_run("remoting", 2, 64, 14_000.0),
            protocol_run("remoting", 1, 1, 2_000.0),
            protocol_run("grpc", 1, 1, 1_000.0),
        ];
        let ratios = protocol_ratios(&runs);
        assert_eq!(ratios.len(), 2);
        let at64 = &ratios[0];
        assert_eq!(at64.in_flight, 64);
        assert_eq!(at64.remoting_msgs_per_sec, Some(12_000.0));
        assert_eq!(at64.grpc_msgs_per_sec, Some(6_000.0));
        assert_eq!(at64.throughput_ratio, Some(0.5));
        assert_eq!(at64.remoting_runs, 2);
        // (14000 - 10000) / 12000
        let spread = at64.remoting_spread.unwrap_or(0.0);
        assert!((spread - 1.0 / 3.0).abs() < 1e-9, "{spread}");
        let at1 = &ratios[1];
        assert_eq!(at1.throughput_ratio, Some(0.5));
        assert_eq!(at1.p50_ratio, Some(2.0));
        assert_eq!(at1.remoting_spread, None);
        let lines = ratio_lines(&ratios);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].contains("throughput 0.50x"), "{lines:?}");
        assert!(lines[1].contains("33.3 %"), "{lines:?}");
        let table = protocols_table(&runs);
        assert_eq!(table.lines().count(), 6, "{table}");
        assert!(table.contains("remoting #2"), "{table}");
        // protocols.json holds the ratios under the same names.
        let json = serde_json::to_value(&ratios)?;
        assert_eq!(json[0]["in_flight"], 64);
        assert_eq!(json[0]["remoting_msgs_per_sec"], 12_000.0);
        assert_eq!(json[0]["throughput_ratio"], 0.5);
        assert_eq!(json[1]["p50_ratio"], 2.0);
        assert_eq!(json[1]["remoting_spread"], serde_json::Value::Null);
        assert_eq!(json[1]["remoting_runs"], 1);
        let run = serde_json::to_value(&runs[2])?;
        assert_eq!(run["protocol"], "remoting");
        assert_eq!(run["round"], 2);
        assert_eq!(run["report"]["ok_per_sec"], 14_000.0);
        Ok(())
    }
}
