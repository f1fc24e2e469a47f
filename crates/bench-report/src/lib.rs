//! The load tool's report: what `sluice-bench --json` prints for one run,
//! as serde types.
//!
//! The `bench` crate fills a [`Report`] from its histograms and counters and
//! writes it with [`Report::to_json`]; `cargo xtask bench` reads it back with
//! [`Report::from_json`] to build its tables. Both use these types, so the
//! schema has one definition. Latencies are in milliseconds with
//! microsecond resolution ([`LatencyMs`]); periods in queue and retry hints
//! in the whole milliseconds the broker reports ([`PeriodMs`]).
//!
//! Only serde and serde_json: `xtask` depends on this crate and must stay
//! quick to build.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The result of a run, in the form printed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Protocol of the sends: `remoting` or `grpc`.
    #[serde(default = "remoting")]
    pub protocol: String,
    /// Broker address (the gRPC endpoint's with protocol `grpc`).
    pub broker: String,
    /// Topic.
    pub topic: String,
    /// `closed` or `open`.
    pub mode: String,
    /// Concurrent senders (closed loop).
    pub in_flight: Option<u32>,
    /// Offered requests per second (open loop).
    pub rate_per_sec: Option<f64>,
    /// Cap on outstanding requests (open loop).
    pub max_outstanding: Option<u64>,
    /// TCP connections (remoting) or HTTP/2 channels (gRPC).
    pub connections: u32,
    /// Body size of each message.
    pub body_bytes: usize,
    /// Delay level of every message's `DELAY` property, when it had one;
    /// left out of the JSON when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_level: Option<u32>,
    /// Timer delay of every message's `TIMER_DELAY_MS` property (ms), when
    /// it had one; left out of the JSON when not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_delay_ms: Option<u64>,
    /// Messages in each request, when requests were batches
    /// (`SEND_BATCH_MESSAGE`); left out of the JSON for single sends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// Unrecorded warm-up, seconds.
    pub warmup_s: f64,
    /// Recorded time, seconds.
    pub duration_s: f64,
    /// Requests sent in the recorded time.
    pub sent: u64,
    /// `SUCCESS` responses.
    pub ok: u64,
    /// Failures of every kind, `client_backlog` skips included.
    pub failed_total: u64,
    /// Failures by kind.
    pub failed: Failures,
    /// `ok` requests per recorded second.
    pub ok_per_sec: f64,
    /// Body bytes of the messages of `ok` requests per recorded second, in
    /// MB (10^6 bytes).
    pub mb_per_sec: f64,
    /// Latency of `SUCCESS` responses.
    pub latency_ms: Option<LatencyMs>,
    /// Latency of `SYSTEM_BUSY` responses: how long it took to hear "busy".
    pub time_to_busy_ms: Option<LatencyMs>,
    /// The `period in queue` busy remarks reported.
    pub period_in_queue_ms: Option<PeriodMs>,
    /// The `retryAfterMs` back-off busy responses suggested.
    pub retry_after_ms: Option<PeriodMs>,
    /// Closed loop honouring `retryAfterMs`: the waits it made (recorded
    /// time only).
    #[serde(default)]
    pub hint_waits: u64,
    /// Of those, the sends refused busy again right after their wait: a
    /// hint shorter than the real wait.
    #[serde(default)]
    pub refused_after_hint: u64,
    /// Name server the route came from, when one was asked.
    pub namesrv: Option<String>,
    /// Each second of the recorded time (by completion).
    pub series: Vec<Second>,
}

/// Failed requests by kind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failures {
    /// `FLUSH_DISK_TIMEOUT` responses.
    pub flush_disk_timeout: u64,
    /// `SYSTEM_BUSY` responses by remark tag (`TIMEOUT_CLEAN_QUEUE`, ...).
    pub busy: BTreeMap<String, u64>,
    /// Other response codes, by number.
    pub other_code: BTreeMap<i32, u64>,
    /// gRPC business status codes without a remoting counterpart, by number.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grpc_code: BTreeMap<i32, u64>,
    /// gRPC calls that failed with a status of their own, by gRPC status
    /// code (deadline exceeded counts as `timeout`, unavailable and cancelled
    /// as `connection_error`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub rpc_status: BTreeMap<i32, u64>,
    /// Requests without a response within the timeout.
    pub timeout: u64,
    /// Requests whose connection failed or closed.
    pub connection_error: u64,
    /// Open-loop requests skipped, unsent, because too many were outstanding.
    pub client_backlog: u64,
}

/// One recorded second: what completed in it (1 is the first second after
/// the warm-up).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Second {
    /// Seconds since the end of the warm-up, counting from 1.
    pub t: u64,
    /// `SUCCESS` responses.
    pub ok: u64,
    /// `SYSTEM_BUSY` responses.
    pub busy: u64,
    /// Every other failure (timeouts, other codes, backlog skips, ...).
    pub other_failed: u64,
    /// Median latency of this second's `SUCCESS` responses.
    pub ok_p50_ms: Option<f64>,
    /// 99th percentile latency of this second's `SUCCESS` responses.
    pub ok_p99_ms: Option<f64>,
    /// Largest latency of this second's `SUCCESS` responses.
    pub ok_max_ms: Option<f64>,
    /// 99th percentile of this second's time to hear "busy".
    pub busy_p99_ms: Option<f64>,
}

/// Latency percentiles in milliseconds (microsecond resolution).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyMs {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest value.
    pub max: f64,
}

/// Percentiles of a quantity recorded in whole milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeriodMs {
    /// Values recorded.
    pub count: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest value.
    pub max: u64,
}

impl Report {
    /// The report as one line of JSON, as `sluice-bench --json` prints it.
    ///
    /// # Errors
    /// Only if serialization fails, which plain numbers and strings do not.
    pub fn to_json(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }

    /// Reads a report printed by `sluice-bench --json` (or kept in a file).
    /// Reports written before `protocol` was recorded read as `remoting`.
    ///
    /// # Errors
    /// When the text is not JSON or not a report.
    pub fn from_json(json: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(json)
    }

    /// Messages stored per recorded second: `ok_per_sec` times the
    /// messages of each request.
    pub fn msgs_per_sec(&self) -> f64 {
        self.ok_per_sec * f64::from(self.batch.unwrap_or(1))
    }
}

impl Failures {
    /// Failures of every kind.
    pub fn total(&self) -> u64 {
        self.flush_disk_timeout
            + self.busy.values().sum::<u64>()
            + self.other_code.values().sum::<u64>()
            + self.grpc_code.values().sum::<u64>()
            + self.rpc_status.values().sum::<u64>()
            + self.timeout
            + self.connection_error
            + self.client_backlog
    }
}

/// The protocol of reports written before it was recorded.
fn remoting() -> String {
    "remoting".to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        let mut failed = Failures {
            timeout: 2,
            client_backlog: 1,
            ..Failures::default()
        };
        failed.busy.insert("TIMEOUT_CLEAN_QUEUE".into(), 3);
        Report {
            protocol: "remoting".into(),
            broker: "127.0.0.1:10911".into(),
            topic: "BenchTopic".into(),
            mode: "open".into(),
            in_flight: None,
            rate_per_sec: Some(100.0),
            max_outstanding: Some(10),
            connections: 1,
            body_bytes: 1024,
            delay_level: None,
            timer_delay_ms: None,
            batch: None,
            warmup_s: 1.0,
            duration_s: 2.0,
            sent: 200,
            ok: 194,
            failed_total: failed.total(),
            failed,
            ok_per_sec: 97.0,
            mb_per_sec: 0.099_328,
            latency_ms: Some(LatencyMs {
                count: 194,
                p50: 0.5,
                p90: 0.9,
                p99: 1.25,
                p999: 3.5,
                max: 4.0,
            }),
            time_to_busy_ms: None,
            period_in_queue_ms: Some(PeriodMs {
                count: 3,
                p50: 210,
                p90: 250,
                p99: 250,
                max: 250,
            }),
            retry_after_ms: None,
            hint_waits: 0,
            refused_after_hint: 0,
            namesrv: None,
            series: vec![Second {
                t: 1,
                ok: 97,
                ok_p99_ms: Some(1.25),
                ..Second::default()
            }],
        }
    }

    #[test]
    fn failures_of_every_kind_add_up() {
        let mut f = report().failed;
        assert_eq!(f.total(), 6);
        f.flush_disk_timeout = 1;
        f.other_code.insert(12, 1);
        f.grpc_code.insert(41302, 1);
        f.rpc_status.insert(12, 1);
        f.connection_error = 1;
        assert_eq!(f.total(), 11);
    }

    #[test]
    fn a_report_reads_back_as_written() -> serde_json::Result<()> {
        let r = report();
        let json = r.to_json()?;
        assert!(!json.contains('\n'), "one line: {json}");
        let v: serde_json::Value = serde_json::from_str(&json)?;
        assert_eq!(v["failed"]["busy"]["TIMEOUT_CLEAN_QUEUE"], 3);
        assert_eq!(v["latency_ms"]["p99"], 1.25);
        assert_eq!(v["in_flight"], serde_json::Value::Null);
        // Empty gRPC kinds and no delay level are left out of the JSON.
        assert!(v["failed"].get("grpc_code").is_none(), "{json}");
        assert!(v.get("delay_level").is_none(), "{json}");
        let back = Report::from_json(json.as_bytes())?;
        assert_eq!(back.to_json()?, json);
        assert_eq!(back.failed, r.failed);
        assert_eq!(back.latency_ms, r.latency_ms);
        assert_eq!(back.series, r.series);
        Ok(())
    }

    #[test]
    fn reports_without_a_protocol_or_grpc_kinds_are_remoting_reports() -> serde_json::Result<()> {
        let mut v: serde_json::Value = serde_json::from_str(&report().to_json()?)?;
        if let Some(o) = v.as_object_mut() {
            o.remove("protocol");
        }
        let back = Report::from_json(v.to_string().as_bytes())?;
        assert_eq!(back.protocol, "remoting");
        assert!(back.failed.grpc_code.is_empty() && back.failed.rpc_status.is_empty());
        assert!(Report::from_json(b"{\"ok\": 1}").is_err());
        Ok(())
    }

    #[test]
    fn a_delay_level_is_written_and_read_back() -> serde_json::Result<()> {
        let r = Report {
            delay_level: Some(3),
            ..report()
        };
        let json = r.to_json()?;
        let v: serde_json::Value = serde_json::from_str(&json)?;
        assert_eq!(v["delay_level"], 3);
        assert_eq!(Report::from_json(json.as_bytes())?.delay_level, Some(3));
        Ok(())
    }

    #[test]
    fn a_batch_multiplies_the_messages_and_single_sends_leave_it_out() -> serde_json::Result<()> {
        let single = report();
        assert_eq!(single.msgs_per_sec(), 97.0);
        let v: serde_json::Value = serde_json::from_str(&single.to_json()?)?;
        assert!(v.get("batch").is_none(), "{v}");
        let r = Report {
            batch: Some(32),
            ..report()
        };
        assert_eq!(r.msgs_per_sec(), 97.0 * 32.0);
        assert_eq!(Report::from_json(r.to_json()?.as_bytes())?.batch, Some(32));
        Ok(())
    }
}
