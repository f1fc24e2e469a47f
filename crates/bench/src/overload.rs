//! The overload experiment's summary: from the closed-loop run that measured
//! the broker's capacity and one open-loop run per setting at a multiple of
//! it, the figures that say how the broker behaved when offered more than it
//! can do: goodput as a share of capacity, latency of the accepted sends,
//! how long a producer waited to hear "busy", and the period in queue the
//! rejections reported against the queue's wait limit.
//!
//! `cargo xtask bench overload` runs the broker and the load and hands the
//! reports here (`sluice-bench overload-report`), which prints the table and
//! writes `overload.json` and the chart (see [`crate::chart`]).

use std::{collections::BTreeSet, fmt};

use anyhow::{ensure, Result};
use serde::{Deserialize, Serialize};

use crate::report::Report;

/// One open-loop run of the experiment and the figures drawn from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadRun {
    /// What was set for this run, e.g. `early admission on`.
    pub label: String,
    /// Requests per second offered (the open loop's rate).
    pub offered_per_sec: f64,
    /// Requests per second actually sent in the recorded time; below the
    /// offered rate when the load tool could not keep up.
    pub sent_per_sec: f64,
    /// `SUCCESS` responses per second.
    pub goodput_per_sec: f64,
    /// Goodput as a percentage of the measured capacity.
    pub goodput_pct_of_capacity: f64,
    /// The load tool's full report of the run (per-second series included).
    pub report: Report,
}

/// The experiment: capacity, the wait limit, and each run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Overload {
    /// What bounded the broker's capacity (e.g. a fault-injected put-lock
    /// delay, or CPU).
    pub capacity_bound: String,
    /// The queue's wait limit (`waitTimeMillsInSendQueue`), ms.
    pub limit_ms: u64,
    /// Sustainable rate: `SUCCESS` per second of the closed-loop run.
    pub capacity_per_sec: f64,
    /// The closed-loop run that measured it.
    pub capacity_report: Report,
    /// The open-loop runs, one per setting.
    pub runs: Vec<OverloadRun>,
}

impl Overload {
    /// The summary of a capacity run and labelled open-loop runs.
    ///
    /// # Errors
    /// A capacity run without any success, or an open-loop run that is not
    /// one.
    pub fn new(
        capacity_bound: String,
        limit_ms: u64,
        capacity_report: Report,
        runs: Vec<(String, Report)>,
    ) -> Result<Self> {
        let capacity_per_sec = capacity_report.ok_per_sec;
        ensure!(
            capacity_per_sec > 0.0,
            "the capacity run had no successful send: nothing to compare with"
        );
        let runs = runs
            .into_iter()
            .map(|(label, report)| {
                let offered_per_sec = report.rate_per_sec.ok_or_else(|| {
                    anyhow::anyhow!("run {label:?} is not an open-loop run (no rate)")
                })?;
                let sent_per_sec = if report.duration_s > 0.0 {
                    report.sent as f64 / report.duration_s
                } else {
                    0.0
                };
                Ok(OverloadRun {
                    label,
                    offered_per_sec,
                    sent_per_sec,
                    goodput_per_sec: report.ok_per_sec,
                    goodput_pct_of_capacity: 100.0 * report.ok_per_sec / capacity_per_sec,
                    report,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            capacity_bound,
            limit_ms,
            capacity_per_sec,
            capacity_report,
            runs,
        })
    }

    /// Runs in which the load tool sent less than 95 % of what it offered:
    /// their figures describe the load tool as much as the broker.
    pub fn underfed_runs(&self) -> Vec<&OverloadRun> {
        self.runs
            .iter()
            .filter(|r| r.sent_per_sec < 0.95 * r.offered_per_sec)
            .collect()
    }

    /// The summary as JSON, indented.
    ///
    /// # Errors
    /// Only if serialization fails, which plain numbers and strings do not.
    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)?)
    }
}

impl fmt::Display for Overload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cap = &self.capacity_report;
        writeln!(f, "capacity bound   {}", self.capacity_bound)?;
        writeln!(
            f,
            "capacity         {:.1} msgs/s (closed loop, {} in flight, {} connection(s), {:.0} s; p99 {} ms)",
            self.capacity_per_sec,
            cap.in_flight.unwrap_or(0),
            cap.connections,
            cap.duration_s,
            cap.latency_ms.map_or_else(|| "-".to_owned(), |l| format!("{:.3}", l.p99))
        )?;
        writeln!(
            f,
            "wait limit       waitTimeMillsInSendQueue = {} ms",
            self.limit_ms
        )?;
        writeln!(f)?;
        let width = self
            .runs
            .iter()
            .map(|r| r.label.len())
            .max()
            .unwrap_or(0)
            .max(12)
            + 2;
        write!(f, "{:<34}", "")?;
        for r in &self.runs {
            write!(f, "{:>width$}", r.label)?;
        }
        writeln!(f)?;
        let row = |f: &mut fmt::Formatter<'_>,
                   name: &str,
                   cell: &dyn Fn(&OverloadRun) -> String|
         -> fmt::Result {
            write!(f, "{name:<34}")?;
            for r in &self.runs {
                write!(f, "{:>width$}", cell(r))?;
            }
            writeln!(f)
        };
        let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.3}"));
        let whole = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| v.to_string());
        row(f, "offered (msgs/s)", &|r| {
            format!("{:.1}", r.offered_per_sec)
        })?;
        row(f, "sent (msgs/s)", &|r| format!("{:.1}", r.sent_per_sec))?;
        row(f, "goodput (msgs/s)", &|r| {
            format!("{:.1}", r.goodput_per_sec)
        })?;
        row(f, "goodput (% of capacity)", &|r| {
            format!("{:.1} %", r.goodput_pct_of_capacity)
        })?;
        row(f, "accepted p50 (ms)", &|r| {
            ms(r.report.latency_ms.map(|l| l.p50))
        })?;
        row(f, "accepted p99 (ms)", &|r| {
            ms(r.report.latency_ms.map(|l| l.p99))
        })?;
        row(f, "accepted max (ms)", &|r| {
            ms(r.report.latency_ms.map(|l| l.max))
        })?;
        let tags: BTreeSet<&String> = self
            .runs
            .iter()
            .flat_map(|r| r.report.failed.busy.keys())
            .collect();
        for tag in tags {
            row(f, &format!("busy {tag}"), &|r| {
                r.report
                    .failed
                    .busy
                    .get(tag)
                    .copied()
                    .unwrap_or(0)
                    .to_string()
            })?;
        }
        row(f, "unsent (load tool backlog)", &|r| {
            r.report.failed.client_backlog.to_string()
        })?;
        row(f, "other failures", &|r| {
            let busy: u64 = r.report.failed.busy.values().sum();
            let failed = &r.report.failed;
            (failed.total() - busy - failed.client_backlog).to_string()
        })?;
        row(f, "time to busy p50 (ms)", &|r| {
            ms(r.report.time_to_busy_ms.map(|l| l.p50))
        })?;
        row(f, "time to busy p99 (ms)", &|r| {
            ms(r.report.time_to_busy_ms.map(|l| l.p99))
        })?;
        let limit = self.limit_ms;
        row(f, &format!("period in queue p50 (limit {limit})"), &|r| {
            whole(r.report.period_in_queue_ms.map(|p| p.p50))
        })?;
        row(f, &format!("period in queue p99 (limit {limit})"), &|r| {
            whole(r.report.period_in_queue_ms.map(|p| p.p99))
        })?;
        row(f, &format!("period in queue max (limit {limit})"), &|r| {
            whole(r.report.period_in_queue_ms.map(|p| p.max))
        })?;
        for r in self.underfed_runs() {
            writeln!(
                f,
                "\nwarning: in run {:?} the load tool sent {:.1}/s of the {:.1}/s offered: \
                 it, not the broker, limited the offered load",
                r.label, r.sent_per_sec, r.offered_per_sec
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        config::{Config, Mode},
        outcome::{Busy, Outcome},
        report::Recorder,
    };

    fn busy(tag: &str, period: u64) -> Outcome {
        Outcome::Busy(Busy {
            tag: tag.into(),
            period_in_queue_ms: Some(period),
            retry_after_ms: None,
        })
    }

    fn config() -> Config {
        let mut c = Config::new("b:1");
        c.duration = Duration::from_secs(1);
        c
    }

    fn open(ok: u64, rejections: &[Outcome], sent_extra: u64) -> Result<Report> {
        let mut rec = Recorder::new()?;
        for _ in 0..ok {
            rec.record_in(1, &Outcome::Ok, Duration::from_millis(1));
        }
        for o in rejections {
            rec.record_in(1, o, Duration::from_micros(500));
        }
        for _ in 0..sent_extra {
            rec.record_in(1, &Outcome::Timeout, Duration::from_secs(3));
        }
        Ok(rec.report(
            &config(),
            Mode::Open {
                rate_per_sec: 200.0,
                max_outstanding: 1000,
            },
        ))
    }

    #[test]
    fn goodput_is_a_share_of_the_measured_capacity() -> Result<()> {
        let mut rec = Recorder::new()?;
        for _ in 0..100 {
            rec.record_in(1, &Outcome::Ok, Duration::from_millis(1));
        }
        let capacity = rec.report(&config(), Mode::Closed { in_flight: 4 });
        let on = open(98, &[busy("EARLY_REJECT", 0), busy("EARLY_REJECT", 0)], 100)?;
        let off = open(50, &[busy("TIMEOUT_CLEAN_QUEUE", 201)], 0)?;
        let summary = Overload::new(
            "test".into(),
            200,
            capacity,
            vec![("on".into(), on), ("off".into(), off)],
        )?;
        assert_eq!(summary.capacity_per_sec, 100.0);
        assert_eq!(summary.runs[0].goodput_pct_of_capacity, 98.0);
        assert_eq!(summary.runs[0].sent_per_sec, 200.0);
        assert_eq!(summary.runs[1].goodput_pct_of_capacity, 50.0);
        // The second run sent 51 of 200 offered: flagged.
        let underfed: Vec<&str> = summary
            .underfed_runs()
            .iter()
            .map(|r| r.label.as_str())
            .collect();
        assert_eq!(underfed, ["off"]);
        let table = summary.to_string();
        assert!(table.contains("busy EARLY_REJECT"), "{table}");
        assert!(table.contains("busy TIMEOUT_CLEAN_QUEUE"), "{table}");
        assert!(table.contains("98.0 %"), "{table}");
        assert!(table.contains("period in queue max (limit 200)"), "{table}");
        assert!(table.contains("warning: in run \"off\""), "{table}");
        assert!(table.contains("unsent (load tool backlog)"), "{table}");
        let back: Overload = serde_json::from_str(&summary.to_json()?)?;
        assert_eq!(back.runs.len(), 2);
        assert_eq!(
            back.runs[1].report.period_in_queue_ms.map(|p| p.max),
            Some(201)
        );
        Ok(())
    }

    #[test]
    fn a_capacity_run_without_success_is_refused() -> Result<()> {
        let rec = Recorder::new()?;
        let capacity = rec.report(&config(), Mode::Closed { in_flight: 1 });
        assert!(Overload::new("t".into(), 200, capacity, Vec::new()).is_err());
        Ok(())
    }
}
