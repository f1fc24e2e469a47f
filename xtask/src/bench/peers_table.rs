//! The figures of `cargo xtask bench peers`: one measured run of one server
//! ([`Measured`]), the medians over runs ([`Median`]), and the tables, one
//! per part of the experiment ([`Section`]), each laid out by a [`Layout`].

use bench_report::Report;
use serde::Serialize;

use super::peer_servers::RedisResult;

/// The parts of the experiment, in the order they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Section {
    /// Single 1 KiB appends at each in-flight level: Sluice, NATS, Redis.
    Send,
    /// Sluice's `SEND_BATCH_MESSAGE` against Redis's pipelined `XADD`.
    Batch,
    /// Sluice's own paths at one level: remoting `ASYNC_FLUSH`, remoting
    /// `SYNC_FLUSH` (a second broker) and gRPC `SendMessage`.
    Paths,
    /// A backlog read from the beginning: Sluice's push consumer against a
    /// NATS JetStream pull consumer.
    Drain,
}

/// One measured run of one server: a cell of a table and an entry of
/// `peers.json`.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Measured {
    pub(super) section: Section,
    /// The column: `sluice`, `nats`, `redis`; in [`Section::Paths`]
    /// `async`, `sync`, `grpc`.
    pub(super) server: &'static str,
    /// Requests in flight.
    pub(super) in_flight: u32,
    pub(super) run: u32,
    pub(super) msgs_per_sec: f64,
    pub(super) p50_ms: Option<f64>,
    pub(super) p99_ms: Option<f64>,
    /// Messages the server took in (or handed out) during the measured run.
    pub(super) messages: u64,
    /// CPU seconds the server used during the measured run.
    pub(super) cpu_s: f64,
    /// `cpu_s` per message, in µs.
    pub(super) cpu_us_per_msg: Option<f64>,
    /// The load tool's report (Sluice and NATS appends).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) report: Option<Report>,
    /// What `redis-benchmark` printed (Redis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) redis: Option<RedisResult>,
}

impl Measured {
    /// A run of `sluice-bench`: messages are the successful requests times
    /// the messages of each (batches).
    pub(super) fn from_report(
        section: Section,
        server: &'static str,
        run: u32,
        report: Report,
        cpu_s: f64,
    ) -> Self {
        let messages = report.ok * u64::from(report.batch.unwrap_or(1));
        Self {
            section,
            server,
            in_flight: report.in_flight.unwrap_or(0),
            run,
            msgs_per_sec: report.msgs_per_sec(),
            p50_ms: report.latency_ms.map(|l| l.p50),
            p99_ms: report.latency_ms.map(|l| l.p99),
            messages,
            cpu_s,
            cpu_us_per_msg: per_msg(cpu_s, messages),
            report: Some(report),
            redis: None,
        }
    }

    /// A run of `redis-benchmark` with `in_flight` connections.
    pub(super) fn from_redis(
        section: Section,
        in_flight: u32,
        run: u32,
        result: RedisResult,
        cpu_s: f64,
    ) -> Self {
        Self {
            section,
            server: "redis",
            in_flight,
            run,
            msgs_per_sec: result.rps,
            p50_ms: result.p50_ms,
            p99_ms: result.p99_ms,
            messages: result.requests,
            cpu_s,
            cpu_us_per_msg: per_msg(cpu_s, result.requests),
            report: None,
            redis: Some(result),
        }
    }
}

/// CPU µs per message, `None` without messages.
pub(super) fn per_msg(cpu_s: f64, messages: u64) -> Option<f64> {
    (messages > 0).then(|| cpu_s * 1e6 / messages as f64)
}

/// The median of one server at one level of one section, over its runs.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Median {
    pub(super) section: Section,
    pub(super) server: &'static str,
    pub(super) in_flight: u32,
    pub(super) msgs_per_sec: f64,
    pub(super) p50_ms: Option<f64>,
    pub(super) p99_ms: Option<f64>,
    pub(super) cpu_us_per_msg: Option<f64>,
}

/// How one section's table looks: a title, three columns (a server key and
/// its heading each) and two ratios of columns.
#[derive(Debug, Clone)]
pub(super) struct Layout {
    pub(super) section: Section,
    pub(super) title: String,
    /// In-flight levels, a group of lines each.
    pub(super) levels: Vec<u32>,
    /// Server keys of the three columns.
    pub(super) servers: [&'static str; 3],
    /// Headings of the three columns.
    pub(super) heads: [&'static str; 3],
    /// Heading of the CPU column.
    pub(super) cpu_head: &'static str,
    /// `(a, b, heading)`: column a's msgs/s over column b's.
    pub(super) ratios: [(usize, usize, &'static str); 2],
}

/// The median of `values` (the mean of the middle two for an even count).
pub(super) fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Medians over the runs of each server at each level of each section.
pub(super) fn medians(layouts: &[Layout], rows: &[Measured]) -> Vec<Median> {
    let mut out = Vec::new();
    for layout in layouts {
        for &in_flight in &layout.levels {
            for server in layout.servers {
                let of: Vec<&Measured> = rows
                    .iter()
                    .filter(|r| {
                        r.section == layout.section
                            && r.server == server
                            && r.in_flight == in_flight
                    })
                    .collect();
                let pick = |f: fn(&Measured) -> Option<f64>| {
                    median(&mut of.iter().filter_map(|r| f(r)).collect::<Vec<_>>())
                };
                if let Some(msgs_per_sec) = pick(|r| Some(r.msgs_per_sec)) {
                    out.push(Median {
                        section: layout.section,
                        server,
                        in_flight,
                        msgs_per_sec,
                        p50_ms: pick(|r| r.p50_ms),
                        p99_ms: pick(|r| r.p99_ms),
                        cpu_us_per_msg: pick(|r| r.cpu_us_per_msg),
                    });
                }
            }
        }
    }
    out
}

/// msgs/s, p50 ms, p99 ms, CPU µs per message.
type Figures = (f64, Option<f64>, Option<f64>, Option<f64>);

/// Throughput (p50/p99 ms), e.g. `12345 (0.071/0.239)`.
fn cell(f: Figures) -> String {
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
    format!("{:.0} ({}/{})", f.0, ms(f.1), ms(f.2))
}

fn ratio(a: f64, b: f64) -> String {
    if a > 0.0 && b > 0.0 {
        format!("{:.2}", a / b)
    } else {
        "-".to_owned()
    }
}

fn line(level: &str, label: &str, cells: [String; 3], cpu: String, ratios: [String; 2]) -> String {
    format!(
        "{level:>9}  {label:<7}{:>24}{:>24}{:>24}{cpu:>22}{:>8}{:>8}\n",
        cells[0], cells[1], cells[2], ratios[0], ratios[1]
    )
}

/// One line of a table from its three columns' figures.
fn table_line(
    layout: &Layout,
    label: &str,
    in_flight: u32,
    figures: [Option<Figures>; 3],
) -> String {
    let cells = figures.map(|f| f.map_or_else(|| "-".to_owned(), cell));
    let cpu: Vec<String> = figures
        .iter()
        .map(|f| {
            f.and_then(|f| f.3)
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
        })
        .collect();
    let rate = |i: usize| figures[i].map_or(0.0, |f| f.0);
    let level = if in_flight == 0 {
        "-".to_owned()
    } else {
        in_flight.to_string()
    };
    let ratios = layout.ratios.map(|(a, b, _)| ratio(rate(a), rate(b)));
    line(&level, label, cells, cpu.join("/"), ratios)
}

/// One section's table: its title, and per level a line per run and a
/// median line; empty when the section has no runs.
pub(super) fn section_table(layout: &Layout, runs: u32, rows: &[Measured]) -> String {
    let rows: Vec<&Measured> = rows
        .iter()
        .filter(|r| r.section == layout.section)
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!("{}\n", layout.title);
    out.push_str(&line(
        "in flight",
        "run",
        layout.heads.map(str::to_owned),
        layout.cpu_head.to_owned(),
        layout.ratios.map(|(_, _, head)| head.to_owned()),
    ));
    let medians = medians(
        std::slice::from_ref(layout),
        &rows.iter().copied().cloned().collect::<Vec<_>>(),
    );
    for &in_flight in &layout.levels {
        for run in 1..=runs {
            let figures = layout.servers.map(|server| {
                rows.iter()
                    .find(|r| r.server == server && r.in_flight == in_flight && r.run == run)
                    .map(|r| (r.msgs_per_sec, r.p50_ms, r.p99_ms, r.cpu_us_per_msg))
            });
            out.push_str(&table_line(layout, &run.to_string(), in_flight, figures));
        }
        let figures = layout.servers.map(|server| {
            medians
                .iter()
                .find(|m| m.server == server && m.in_flight == in_flight)
                .map(|m| (m.msgs_per_sec, m.p50_ms, m.p99_ms, m.cpu_us_per_msg))
        });
        out.push_str(&table_line(layout, "median", in_flight, figures));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::runner::sample_report;

    fn layout() -> Layout {
        Layout {
            section: Section::Send,
            title: "appends".into(),
            levels: vec![1, 16],
            servers: ["sluice", "nats", "redis"],
            heads: ["Sluice", "NATS", "Redis"],
            cpu_head: "CPU µs/msg S/N/R",
            ratios: [(0, 1, "S/N"), (0, 2, "S/R")],
        }
    }

    fn rows() -> Vec<Measured> {
        let mut rows = Vec::new();
        for in_flight in [1, 16] {
            for run in 1..=2 {
                let mut report = sample_report(10_000.0 * f64::from(run), 0.1, 0.5, 1.0);
                report.in_flight = Some(in_flight);
                rows.push(Measured::from_report(
                    Section::Send,
                    "sluice",
                    run,
                    report.clone(),
                    2.0,
                ));
                report.protocol = "nats".into();
                rows.push(Measured::from_report(
                    Section::Send,
                    "nats",
                    run,
                    report,
                    1.0,
                ));
                let redis = RedisResult {
                    requests: 200_000,
                    rps: 40_000.0,
                    p50_ms: Some(0.05),
                    p99_ms: None,
                    seconds: 5.0,
                };
                rows.push(Measured::from_redis(
                    Section::Send,
                    in_flight,
                    run,
                    redis,
                    1.0,
                ));
            }
        }
        rows
    }

    #[test]
    fn medians_of_two_runs_are_their_means_and_of_one_the_value() {
        assert_eq!(median(&mut [3.0, 1.0]), Some(2.0));
        assert_eq!(median(&mut [5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&mut []), None);
        let m = medians(&[layout()], &rows());
        assert_eq!(m.len(), 6);
        let sluice = &m[0];
        assert_eq!((sluice.server, sluice.in_flight), ("sluice", 1));
        assert_eq!(sluice.msgs_per_sec, 15_000.0);
        assert_eq!(m[2].p99_ms, None, "Redis printed no p99");
    }

    #[test]
    fn cpu_per_message_divides_the_cpu_time_by_the_messages() {
        let r = &rows()[2];
        assert_eq!(r.server, "redis");
        // 1 CPU second over 200,000 messages.
        assert_eq!(r.cpu_us_per_msg, Some(5.0));
        assert_eq!(per_msg(1.0, 0), None);
    }

    #[test]
    fn a_batch_run_counts_every_message_of_its_requests() {
        let mut report = sample_report(1_000.0, 0.5, 1.0, 2.0);
        report.batch = Some(32);
        let r = Measured::from_report(Section::Batch, "sluice", 1, report, 3.2);
        assert_eq!(r.msgs_per_sec, 32_000.0);
        assert_eq!(r.messages, 320_000);
        assert_eq!(r.cpu_us_per_msg, Some(10.0));
    }

    #[test]
    fn the_table_has_a_line_per_run_and_a_median_per_level_with_ratios() {
        let table = section_table(&layout(), 2, &rows());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 2 + 2 * 3, "{table}");
        assert_eq!(lines[0], "appends");
        assert!(lines[1].contains("Sluice"), "{table}");
        let median: Vec<&str> = lines[4].split_whitespace().collect();
        assert_eq!(median[..2], ["1", "median"], "{table}");
        assert_eq!(median[2..4], ["15000", "(0.100/0.500)"], "{table}");
        assert_eq!(median[6..8], ["40000", "(0.050/-)"], "{table}");
        // Sluice/NATS 1.00, Sluice/Redis 15000/40000.
        assert_eq!(median[median.len() - 2..], ["1.00", "0.38"], "{table}");
    }

    #[test]
    fn a_missing_column_shows_a_dash_and_no_ratio() {
        let rows: Vec<Measured> = rows().into_iter().filter(|r| r.server != "nats").collect();
        let table = section_table(&layout(), 2, &rows);
        let median: Vec<&str> = table
            .lines()
            .nth(4)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        assert_eq!(median[4], "-", "{table}");
        assert_eq!(median[median.len() - 2..], ["-", "0.38"], "{table}");
        let batch = Layout {
            section: Section::Batch,
            ..layout()
        };
        assert_eq!(
            section_table(&batch, 2, &rows),
            "",
            "no batch runs, no table"
        );
    }
}
