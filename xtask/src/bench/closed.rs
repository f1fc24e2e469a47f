//! `cargo xtask bench closed`: closed-loop throughput and latency of 1 KiB
//! sends at 1, 16 and 64 in flight under `ASYNC_FLUSH` and `SYNC_FLUSH`,
//! one broker per flush type; one table and `closed.json`.

use std::fs;

use anyhow::{Context, Result};
use serde_json::Value;

use super::{
    runner::{load, strings, Broker, Setup},
    Options,
};

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
