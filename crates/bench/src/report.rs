//! Recording and reporting: HDR histograms and outcome counters while a run
//! goes, then a [`Report`] printed as a table ([`Table`]) or as one JSON
//! object ([`Report::to_json`]). The report's types are the `bench-report`
//! crate's, re-exported here, so that `cargo xtask bench` reads the same
//! schema without building the load tool.
//!
//! Latencies are kept in microseconds up to [`MAX_LATENCY_US`] and printed in
//! milliseconds with three decimals; periods in queue are kept in the
//! milliseconds the broker reports.
//!
//! Besides the totals, a run keeps one [`Second`] per recorded second (by
//! the time each response arrived, counted from the end of the warm-up):
//! counts and the latency percentiles of that second alone, for charts of
//! latency and rejections over time. Only the current second has a
//! histogram; earlier ones keep their figures, so memory stays bounded by
//! [`MAX_SERIES_SECONDS`].

use std::{fmt, time::Duration};

use anyhow::{Context, Result};
pub use bench_report::{Failures, LatencyMs, PeriodMs, Report, Second};
use hdrhistogram::Histogram;
use remoting_protocol::ResponseCode;

use crate::{
    config::{Config, Mode, Protocol},
    outcome::{grpc_code_name, Outcome},
};

/// Largest latency recorded (60 s in µs); longer ones count as this.
pub const MAX_LATENCY_US: u64 = 60_000_000;

/// Largest period in queue or retry hint recorded (1 h in ms).
pub const MAX_PERIOD_MS: u64 = 3_600_000;

/// Significant decimal digits the histograms keep.
const SIGNIFICANT_DIGITS: u8 = 3;

/// Most seconds the per-second series keeps; later seconds count only in
/// the totals.
pub const MAX_SERIES_SECONDS: usize = 86_400;

/// Histograms and counters of the recorded part of a run.
#[derive(Debug, Clone)]
pub struct Recorder {
    latency_us: Histogram<u64>,
    busy_latency_us: Histogram<u64>,
    period_in_queue_ms: Histogram<u64>,
    retry_after_ms: Histogram<u64>,
    sent: u64,
    ok: u64,
    failed: Failures,
    series: Series,
}

/// The per-second series under construction.
#[derive(Debug, Clone)]
struct Series {
    seconds: Vec<Second>,
    /// Index into `seconds` whose histograms are open.
    current: usize,
    ok_us: Histogram<u64>,
    busy_us: Histogram<u64>,
}

impl Series {
    fn new() -> Result<Self> {
        Ok(Self {
            seconds: Vec::new(),
            current: 0,
            ok_us: histogram(MAX_LATENCY_US)?,
            busy_us: histogram(MAX_LATENCY_US)?,
        })
    }

    /// Counts an outcome in second `t` (from 1); a second earlier than the
    /// current one only gets its counts, its percentiles being closed.
    fn record(&mut self, t: u64, outcome: &Outcome, latency_us: u64) {
        let Some(index) = usize::try_from(t.max(1) - 1)
            .ok()
            .filter(|i| *i < MAX_SERIES_SECONDS)
        else {
            return;
        };
        if index > self.current || self.seconds.is_empty() {
            self.close();
            self.current = index;
        }
        while self.seconds.len() <= index {
            let t = self.seconds.len() as u64 + 1;
            self.seconds.push(Second {
                t,
                ..Second::default()
            });
        }
        let open = index == self.current;
        let second = &mut self.seconds[index];
        match outcome {
            Outcome::Ok => {
                second.ok += 1;
                if open {
                    self.ok_us.saturating_record(latency_us);
                }
            }
            Outcome::Busy(_) => {
                second.busy += 1;
                if open {
                    self.busy_us.saturating_record(latency_us);
                }
            }
            _ => second.other_failed += 1,
        }
    }

    /// Writes the open second's percentiles and empties its histograms.
    fn close(&mut self) {
        if let Some(second) = self.seconds.get_mut(self.current) {
            if let Some(l) = latency_of(&self.ok_us) {
                second.ok_p50_ms = Some(l.p50);
                second.ok_p99_ms = Some(l.p99);
                second.ok_max_ms = Some(l.max);
            }
            second.busy_p99_ms = latency_of(&self.busy_us).map(|l| l.p99);
        }
        self.ok_us.reset();
        self.busy_us.reset();
    }

    /// The series so far, the open second included.
    fn snapshot(&self) -> Vec<Second> {
        let mut copy = self.clone();
        copy.close();
        copy.seconds
    }
}

impl Recorder {
    /// An empty recorder.
    ///
    /// # Errors
    /// Only if the histogram library refuses the fixed bounds.
    pub fn new() -> Result<Self> {
        Ok(Self {
            latency_us: histogram(MAX_LATENCY_US)?,
            busy_latency_us: histogram(MAX_LATENCY_US)?,
            period_in_queue_ms: histogram(MAX_PERIOD_MS)?,
            retry_after_ms: histogram(MAX_PERIOD_MS)?,
            sent: 0,
            ok: 0,
            failed: Failures::default(),
            series: Series::new()?,
        })
    }

    /// Records a request as [`Recorder::record`] does, and counts it in
    /// second `t` (from 1) of the per-second series.
    pub fn record_in(&mut self, t: u64, outcome: &Outcome, latency: Duration) {
        let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.series.record(t, outcome, latency_us);
        self.record(outcome, latency);
    }

    /// Records a backlog skip as [`Recorder::record_backlog`] does, and
    /// counts it in second `t` of the series.
    pub fn record_backlog_in(&mut self, t: u64) {
        self.series.record(t, &Outcome::Timeout, 0);
        self.record_backlog();
    }

    /// Records a request that was sent and what became of it.
    pub fn record(&mut self, outcome: &Outcome, latency: Duration) {
        self.sent += 1;
        let latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        match outcome {
            Outcome::Ok => {
                self.ok += 1;
                self.latency_us.saturating_record(latency_us);
            }
            Outcome::FlushDiskTimeout => self.failed.flush_disk_timeout += 1,
            Outcome::Busy(busy) => {
                *self.failed.busy.entry(busy.tag.clone()).or_default() += 1;
                self.busy_latency_us.saturating_record(latency_us);
                if let Some(ms) = busy.period_in_queue_ms {
                    self.period_in_queue_ms.saturating_record(ms);
                }
                if let Some(ms) = busy.retry_after_ms {
                    self.retry_after_ms.saturating_record(ms);
                }
            }
            Outcome::OtherCode(code) => *self.failed.other_code.entry(*code).or_default() += 1,
            Outcome::GrpcCode(code) => *self.failed.grpc_code.entry(*code).or_default() += 1,
            Outcome::RpcStatus(code) => *self.failed.rpc_status.entry(*code).or_default() += 1,
            Outcome::Timeout => self.failed.timeout += 1,
            Outcome::ConnectionError => self.failed.connection_error += 1,
        }
    }

    /// Records an open-loop request skipped because too many were outstanding.
    pub fn record_backlog(&mut self) {
        self.failed.client_backlog += 1;
    }

    /// `SUCCESS` responses so far.
    pub fn ok(&self) -> u64 {
        self.ok
    }

    /// Failures of every kind so far.
    pub fn failed(&self) -> u64 {
        self.failed.total()
    }

    /// The 99th percentile of `SUCCESS` latency so far, if any.
    pub fn p99_ok_us(&self) -> Option<u64> {
        (!self.latency_us.is_empty()).then(|| self.latency_us.value_at_quantile(0.99))
    }

    /// The report of a run with these settings.
    pub fn report(&self, config: &Config, mode: Mode) -> Report {
        let (mode_name, in_flight, rate_per_sec, max_outstanding) = match mode {
            Mode::Closed { in_flight } => ("closed", Some(in_flight), None, None),
            Mode::Open {
                rate_per_sec,
                max_outstanding,
            } => ("open", None, Some(rate_per_sec), Some(max_outstanding)),
        };
        let duration_s = config.duration.as_secs_f64();
        let per_sec = |n: f64| {
            if duration_s > 0.0 {
                n / duration_s
            } else {
                0.0
            }
        };
        Report {
            protocol: config.protocol.name().to_owned(),
            broker: match config.protocol {
                Protocol::Remoting => config.broker.clone(),
                Protocol::Grpc => config.grpc.clone(),
            },
            topic: config.topic.clone(),
            mode: mode_name.to_owned(),
            in_flight,
            rate_per_sec,
            max_outstanding,
            connections: config.connections,
            body_bytes: config.body_bytes,
            delay_level: config.delay_level,
            timer_delay_ms: config.timer_delay_ms,
            batch: (config.batch > 1).then_some(config.batch),
            warmup_s: config.warmup.as_secs_f64(),
            duration_s,
            sent: self.sent,
            ok: self.ok,
            failed_total: self.failed.total(),
            failed: self.failed.clone(),
            ok_per_sec: per_sec(self.ok as f64),
            mb_per_sec: per_sec(
                self.ok as f64 * f64::from(config.batch.max(1)) * config.body_bytes as f64,
            ) / 1e6,
            latency_ms: latency_of(&self.latency_us),
            time_to_busy_ms: latency_of(&self.busy_latency_us),
            period_in_queue_ms: period_of(&self.period_in_queue_ms),
            retry_after_ms: period_of(&self.retry_after_ms),
            hint_waits: 0,
            refused_after_hint: 0,
            namesrv: config.namesrv.clone(),
            series: self.series.snapshot(),
        }
    }
}

/// Each non-zero kind of failure with its printed name, in a fixed order.
pub fn failure_rows(failed: &Failures) -> Vec<(String, u64)> {
    let mut rows = Vec::new();
    if failed.flush_disk_timeout > 0 {
        rows.push(("flush_disk_timeout".to_owned(), failed.flush_disk_timeout));
    }
    for (tag, n) in &failed.busy {
        rows.push((format!("busy {tag}"), *n));
    }
    for (code, n) in &failed.other_code {
        let name = match ResponseCode(*code).name() {
            Some(name) => format!("code {code} ({name})"),
            None => format!("code {code}"),
        };
        rows.push((name, *n));
    }
    for (code, n) in &failed.grpc_code {
        let name = match grpc_code_name(*code) {
            Some(name) => format!("grpc code {code} ({name})"),
            None => format!("grpc code {code}"),
        };
        rows.push((name, *n));
    }
    for (code, n) in &failed.rpc_status {
        let name = format!("rpc status {code} ({:?})", tonic::Code::from(*code));
        rows.push((name, *n));
    }
    for (name, n) in [
        ("timeout", failed.timeout),
        ("connection_error", failed.connection_error),
        ("client_backlog", failed.client_backlog),
    ] {
        if n > 0 {
            rows.push((name.to_owned(), n));
        }
    }
    rows
}

/// A report shown as the table `sluice-bench` prints without `--json`.
#[derive(Debug, Clone, Copy)]
pub struct Table<'a>(pub &'a Report);

impl fmt::Display for Table<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let report = self.0;
        let mode = match (
            report.in_flight,
            report.rate_per_sec,
            report.max_outstanding,
        ) {
            (Some(n), _, _) => format!("closed loop, {n} in flight"),
            (None, Some(rate), Some(cap)) => {
                format!("open loop, {rate}/s offered, at most {cap} outstanding")
            }
            _ => report.mode.clone(),
        };
        writeln!(
            f,
            "broker        {} topic {} ({})",
            report.broker, report.topic, report.protocol
        )?;
        writeln!(f, "mode          {mode}")?;
        writeln!(
            f,
            "load          {} connection(s), {}-byte bodies, {:.3} s recorded after {:.3} s warm-up",
            report.connections, report.body_bytes, report.duration_s, report.warmup_s
        )?;
        if let Some(level) = report.delay_level {
            writeln!(f, "delay level   {level} (DELAY property on every message)")?;
        }
        if let Some(ms) = report.timer_delay_ms {
            writeln!(
                f,
                "timer delay   {ms} ms (TIMER_DELAY_MS property on every message)"
            )?;
        }
        if let Some(batch) = report.batch {
            writeln!(f, "batch         {batch} messages per SEND_BATCH_MESSAGE")?;
        }
        writeln!(f)?;
        writeln!(f, "{:<32}{:>12}", "sent", report.sent)?;
        writeln!(f, "{:<32}{:>12}", "ok", report.ok)?;
        writeln!(f, "{:<32}{:>12}", "failed", report.failed_total)?;
        for (name, n) in failure_rows(&report.failed) {
            writeln!(f, "  {name:<30}{n:>12}")?;
        }
        writeln!(f)?;
        match report.batch {
            Some(batch) => writeln!(
                f,
                "throughput    {:.1} msgs/s in {:.1} batches/s of {batch}  {:.3} MB/s",
                report.msgs_per_sec(),
                report.ok_per_sec,
                report.mb_per_sec
            )?,
            None => writeln!(
                f,
                "throughput    {:.1} msgs/s  {:.3} MB/s",
                report.ok_per_sec, report.mb_per_sec
            )?,
        }
        writeln!(f)?;
        writeln!(
            f,
            "{:<18}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
            "(ms)", "count", "p50", "p90", "p99", "p99.9", "max"
        )?;
        latency_row(f, "latency ok", report.latency_ms.as_ref())?;
        if let Some(busy) = &report.time_to_busy_ms {
            latency_row(f, "time to busy", Some(busy))?;
        }
        if let Some(period) = &report.period_in_queue_ms {
            period_row(f, "period in queue", period)?;
        }
        if let Some(retry) = &report.retry_after_ms {
            period_row(f, "retry after", retry)?;
        }
        if report.hint_waits > 0 {
            writeln!(
                f,
                "{:<18}{} (refused again right after one: {})",
                "hinted waits", report.hint_waits, report.refused_after_hint
            )?;
        }
        Ok(())
    }
}

/// Latency percentiles of a histogram of microseconds, or `None` when empty.
pub fn latency_of(us: &Histogram<u64>) -> Option<LatencyMs> {
    if us.is_empty() {
        return None;
    }
    let ms = |q: f64| micros_to_ms(us.value_at_quantile(q));
    Some(LatencyMs {
        count: us.len(),
        p50: ms(0.50),
        p90: ms(0.90),
        p99: ms(0.99),
        p999: ms(0.999),
        max: micros_to_ms(us.max()),
    })
}

/// Percentiles of a histogram of milliseconds, or `None` when empty.
pub fn period_of(ms: &Histogram<u64>) -> Option<PeriodMs> {
    if ms.is_empty() {
        return None;
    }
    Some(PeriodMs {
        count: ms.len(),
        p50: ms.value_at_quantile(0.50),
        p90: ms.value_at_quantile(0.90),
        p99: ms.value_at_quantile(0.99),
        max: ms.max(),
    })
}

/// Milliseconds with three decimals, from microseconds, exactly.
pub fn format_ms(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// One progress line: time since the start, `SUCCESS` responses in the last
/// second, failures so far and the 99th percentile so far.
pub fn progress_line(
    elapsed: Duration,
    warming_up: bool,
    ok_last_sec: u64,
    failed: u64,
    p99_us: Option<u64>,
) -> String {
    let secs = elapsed.as_secs();
    if warming_up {
        return format!("[{secs:>4}s] warming up");
    }
    let p99 = p99_us.map_or_else(|| "-".to_owned(), format_ms);
    format!("[{secs:>4}s] ok/s {ok_last_sec:>8}  failed {failed:>8}  p99 {p99} ms")
}

fn histogram(high: u64) -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, high, SIGNIFICANT_DIGITS)
        .with_context(|| format!("create a histogram with bounds 1..={high}"))
}

fn micros_to_ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

fn latency_row(f: &mut fmt::Formatter<'_>, name: &str, l: Option<&LatencyMs>) -> fmt::Result {
    match l {
        Some(l) => writeln!(
            f,
            "{name:<18}{:>10}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}",
            l.count, l.p50, l.p90, l.p99, l.p999, l.max
        ),
        None => writeln!(f, "{name:<18}{:>10}", 0),
    }
}

fn period_row(f: &mut fmt::Formatter<'_>, name: &str, p: &PeriodMs) -> fmt::Result {
    writeln!(
        f,
        "{name:<18}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}",
        p.count, p.p50, p.p90, p.p99, "-", p.max
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Busy;

    fn busy(tag: &str, period: Option<u64>) -> Outcome {
        Outcome::Busy(Busy {
            tag: tag.into(),
            period_in_queue_ms: period,
            retry_after_ms: None,
        })
    }

    #[test]
    fn milliseconds_are_printed_with_three_exact_decimals() {
        assert_eq!(format_ms(0), "0.000");
        assert_eq!(format_ms(5), "0.005");
        assert_eq!(format_ms(1_234_567), "1234.567");
        assert_eq!(format_ms(60_000_000), "60000.000");
    }

    #[test]
    fn latency_percentiles_come_from_the_recorded_microseconds() -> Result<()> {
        let mut rec = Recorder::new()?;
        for us in 1..=1000 {
            rec.record(&Outcome::Ok, Duration::from_micros(us));
        }
        let report = rec.report(&Config::new("b:1"), Mode::Closed { in_flight: 1 });
        let l = report
            .latency_ms
            .ok_or_else(|| anyhow::anyhow!("no latency"))?;
        assert_eq!(l.count, 1000);
        assert_eq!(l.p50, 0.5);
        assert_eq!(l.p90, 0.9);
        assert_eq!(l.p99, 0.99);
        assert_eq!(l.p999, 0.999);
        assert_eq!(l.max, 1.0);
        assert_eq!(report.time_to_busy_ms, None);
        Ok(())
    }

    #[test]
    fn latencies_beyond_the_range_are_clamped_not_lost() -> Result<()> {
        let mut rec = Recorder::new()?;
        rec.record(&Outcome::Ok, Duration::from_secs(3600));
        assert_eq!(rec.ok(), 1);
        assert!(rec.p99_ok_us() >= Some(MAX_LATENCY_US - MAX_LATENCY_US / 1000));
        Ok(())
    }

    #[test]
    fn outcomes_are_counted_by_kind_and_busy_tag() -> Result<()> {
        let mut rec = Recorder::new()?;
        let ms = Duration::from_millis(1);
        rec.record(&Outcome::Ok, ms);
        rec.record(&busy("TIMEOUT_CLEAN_QUEUE", Some(250)), ms);
        rec.record(&busy("TIMEOUT_CLEAN_QUEUE", Some(100)), ms);
        rec.record(&busy("OVERLOAD", None), ms);
        rec.record(&Outcome::OtherCode(12), ms);
        rec.record(&Outcome::GrpcCode(41302), ms);
        rec.record(&Outcome::RpcStatus(12), ms);
        rec.record(&Outcome::FlushDiskTimeout, ms);
        rec.record(&Outcome::Timeout, ms);
        rec.record(&Outcome::ConnectionError, ms);
        rec.record_backlog();
        let report = rec.report(&Config::new("b:1"), Mode::Closed { in_flight: 1 });
        assert_eq!(report.sent, 10);
        assert_eq!(report.ok, 1);
        assert_eq!(report.failed_total, 10);
        assert_eq!(report.failed.busy.get("TIMEOUT_CLEAN_QUEUE"), Some(&2));
        assert_eq!(report.failed.busy.get("OVERLOAD"), Some(&1));
        assert_eq!(report.failed.other_code.get(&12), Some(&1));
        let period = report
            .period_in_queue_ms
            .ok_or_else(|| anyhow::anyhow!("no period"))?;
        assert_eq!((period.count, period.max), (2, 250));
        assert_eq!(report.time_to_busy_ms.map(|b| b.count), Some(3));
        let rows: Vec<String> = failure_rows(&report.failed)
            .into_iter()
            .map(|r| r.0)
            .collect();
        assert_eq!(
            rows,
            [
                "flush_disk_timeout",
                "busy OVERLOAD",
                "busy TIMEOUT_CLEAN_QUEUE",
                "code 12 (FLUSH_SLAVE_TIMEOUT)",
                "grpc code 41302 (MESSAGE_BODY_EMPTY)",
                "rpc status 12 (Unimplemented)",
                "timeout",
                "connection_error",
                "client_backlog",
            ]
        );
        Ok(())
    }

    #[test]
    fn throughput_is_per_recorded_second() -> Result<()> {
        let mut rec = Recorder::new()?;
        for _ in 0..4000 {
            rec.record(&Outcome::Ok, Duration::from_micros(100));
        }
        let mut config = Config::new("b:1");
        config.duration = Duration::from_secs(2);
        config.body_bytes = 1000;
        let report = rec.report(&config, Mode::Closed { in_flight: 1 });
        assert_eq!(report.ok_per_sec, 2000.0);
        assert_eq!(report.mb_per_sec, 2.0);
        Ok(())
    }

    #[test]
    fn a_delay_level_is_shown_only_when_sent() -> Result<()> {
        let mut rec = Recorder::new()?;
        rec.record(&Outcome::Ok, Duration::from_micros(1500));
        let mut config = Config::new("b:1");
        let plain = rec.report(&config, Mode::Closed { in_flight: 1 });
        assert!(!Table(&plain).to_string().contains("delay level"));
        config.delay_level = Some(3);
        let delayed = rec.report(&config, Mode::Closed { in_flight: 1 });
        let table = Table(&delayed).to_string();
        assert!(table.contains("delay level   3"), "{table}");
        assert_eq!(delayed.delay_level, Some(3));
        Ok(())
    }

    #[test]
    fn table_and_json_show_the_same_numbers() -> Result<()> {
        let mut rec = Recorder::new()?;
        rec.record(&Outcome::Ok, Duration::from_micros(1500));
        rec.record(
            &busy("TIMEOUT_CLEAN_QUEUE", Some(250)),
            Duration::from_micros(200),
        );
        let report = rec.report(
            &Config::new("b:1"),
            Mode::Open {
                rate_per_sec: 100.0,
                max_outstanding: 10,
            },
        );
        let table = Table(&report).to_string();
        assert!(table.contains("open loop, 100/s offered"), "{table}");
        assert!(table.contains("busy TIMEOUT_CLEAN_QUEUE"), "{table}");
        assert!(table.contains("1.500"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&report.to_json()?)?;
        assert_eq!(json["mode"], "open");
        assert_eq!(json["failed"]["busy"]["TIMEOUT_CLEAN_QUEUE"], 1);
        assert_eq!(json["latency_ms"]["max"], 1.5);
        assert_eq!(json["period_in_queue_ms"]["max"], 250);
        assert_eq!(json["in_flight"], serde_json::Value::Null);
        assert_eq!(json["protocol"], "remoting");
        // Reports written before the gRPC kinds existed still read back.
        let mut old = json.clone();
        if let Some(o) = old.as_object_mut() {
            o.remove("protocol");
        }
        let back: Report = serde_json::from_value(old)?;
        assert_eq!(back.protocol, "remoting");
        assert_eq!(back.failed, report.failed);
        Ok(())
    }

    #[test]
    fn the_series_keeps_each_seconds_own_counts_and_percentiles() -> Result<()> {
        let mut rec = Recorder::new()?;
        for us in 1..=100 {
            rec.record_in(1, &Outcome::Ok, Duration::from_micros(us * 10));
        }
        rec.record_in(1, &busy("EARLY_REJECT", None), Duration::from_micros(50));
        rec.record_in(3, &Outcome::Ok, Duration::from_micros(1500));
        // A late arrival for a closed second counts, without percentiles.
        rec.record_in(1, &Outcome::Ok, Duration::from_secs(5));
        rec.record_in(3, &Outcome::Timeout, Duration::from_secs(3));
        rec.record_backlog_in(3);
        let series = rec
            .report(&Config::new("b:1"), Mode::Closed { in_flight: 1 })
            .series;
        assert_eq!(series.len(), 3);
        assert_eq!(
            (
                series[0].t,
                series[0].ok,
                series[0].busy,
                series[0].other_failed
            ),
            (1, 101, 1, 0)
        );
        assert_eq!(series[0].ok_p99_ms, Some(0.99));
        assert_eq!(series[0].ok_max_ms, Some(1.0));
        assert_eq!(series[0].busy_p99_ms, Some(0.05));
        assert_eq!(
            (series[1].t, series[1].ok, series[1].ok_p99_ms),
            (2, 0, None)
        );
        assert_eq!((series[2].ok, series[2].other_failed), (1, 2));
        assert_eq!(series[2].ok_p50_ms, Some(1.5));
        assert_eq!(series[2].busy_p99_ms, None);
        Ok(())
    }

    #[test]
    fn progress_line_shows_rate_failures_and_p99() {
        assert_eq!(
            progress_line(Duration::from_millis(3200), false, 1200, 7, Some(2345)),
            "[   3s] ok/s     1200  failed        7  p99 2.345 ms"
        );
        assert_eq!(
            progress_line(Duration::from_secs(5), false, 0, 0, None),
            "[   5s] ok/s        0  failed        0  p99 - ms"
        );
        assert_eq!(
            progress_line(Duration::ZERO, true, 0, 0, None),
            "[   0s] warming up"
        );
    }
}
