//! `cargo xtask bench closed`: closed-loop throughput and latency of 1 KiB
//! sends at 1, 16 and 64 in flight under `ASYNC_FLUSH` and `SYNC_FLUSH`,
//! one broker per flush type; one table and `closed.json`.

use anyhow::Result;
use bench_report::Report;
use serde::Serialize;

use super::{
    runner::{load, strings, table_header, table_row, write_json, Broker, Setup},
    Options,
};

/// One run: a line of the table and an entry of `closed.json`.
#[derive(Debug, Serialize)]
struct Row {
    flush_disk_type: &'static str,
    in_flight: u32,
    connections: u32,
    /// The load tool's report of the run.
    report: Report,
}

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
            rows.push(Row {
                flush_disk_type: flush,
                in_flight,
                connections,
                report,
            });
        }
        broker.stop();
    }
    let table = closed_table(&rows);
    println!(
        "closed loop, 1 KiB messages, {secs} s per row after 1 s warm-up, {} build{}",
        options.build(),
        options.settings_note(",")
    );
    print!("{table}");
    let file = setup.out.join("closed.json");
    write_json(&file, &rows)?;
    println!("\nwrote {}", file.display());
    Ok(())
}

/// The closed-loop table: one row per flush type and in-flight count.
fn closed_table(rows: &[Row]) -> String {
    let mut out = table_header("flush");
    for row in rows {
        out.push_str(&table_row(
            row.flush_disk_type,
            row.in_flight,
            row.connections,
            &row.report,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runner::sample_report;

    fn row(flush_disk_type: &'static str, in_flight: u32, connections: u32) -> Row {
        Row {
            flush_disk_type,
            in_flight,
            connections,
            report: sample_report(12_345.0, 0.05, 0.2, 1.5),
        }
    }

    #[test]
    fn the_closed_table_has_a_row_per_run() {
        let table = closed_table(&[row("ASYNC_FLUSH", 1, 1), row("SYNC_FLUSH", 64, 2)]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("flush"), "{table}");
        assert!(lines[1].starts_with("ASYNC_FLUSH"), "{table}");
        assert!(lines[2].starts_with("SYNC_FLUSH"), "{table}");
        assert!(lines[2].contains("12345.0"), "{table}");
        assert!(lines[2].contains("1.500"), "{table}");
    }

    #[test]
    fn each_row_of_closed_json_holds_its_settings_and_the_whole_report() -> Result<()> {
        let json = serde_json::to_value([row("SYNC_FLUSH", 64, 2)])?;
        let entry = &json[0];
        assert_eq!(entry["flush_disk_type"], "SYNC_FLUSH");
        assert_eq!(entry["in_flight"], 64);
        assert_eq!(entry["connections"], 2);
        assert_eq!(entry["report"]["ok_per_sec"], 12_345.0);
        assert_eq!(entry["report"]["latency_ms"]["p999"], 1.5);
        // What the file holds reads back as the load tool's report.
        let back: Report = serde_json::from_value(entry["report"].clone())?;
        assert_eq!(back.latency_ms, row("SYNC_FLUSH", 64, 2).report.latency_ms);
        Ok(())
    }
}
