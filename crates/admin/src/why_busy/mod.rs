//! `why-busy`: which flow-control mechanism of a broker refuses sends now or
//! is close to it, why, and which setting or action would change it.
//!
//! A [`Sample`] is what a broker says at one moment: its runtime info
//! (`GET_BROKER_RUNTIME_INFO`) and its configuration (`GET_BROKER_CONFIG`).
//! [`diagnose`] turns a sample, and optionally the one before it, into one
//! [`Finding`] per mechanism; it asks nothing, so every threshold and
//! sentence depends on the figures alone.
//!
//! A mechanism is [`State::Rejecting`] when its live figure is at its limit
//! or, with a previous look, when it refused requests since then;
//! [`State::AtRisk`] when its figure is past [`AT_RISK_FRACTION`] of the
//! limit or it refused requests since boot; [`State::Ok`] otherwise, and
//! [`State::Unknown`] when the broker does not report the figure.

use std::{collections::BTreeMap, fmt, fmt::Write as _};

use remoting_protocol::{
    body::{self, KvTable},
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, time_text, Align, Report, Table},
};

/// The part of a limit past which a mechanism is reported at risk.
pub const AT_RISK_FRACTION: f64 = 0.5;

/// The flush rate assumed to turn a SYNC_FLUSH backlog into a wait: a
/// backlog a disk writing this many bytes per second cannot flush within
/// `syncFlushTimeout` makes sends answer `FLUSH_DISK_TIMEOUT`.
pub const ASSUMED_FLUSH_BYTES_PER_SEC: u64 = 100 * 1024 * 1024;

/// How close a mechanism is to refusing requests, mildest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    /// Well within its limits.
    Ok,
    /// The broker does not report the figures it needs.
    Unknown,
    /// Past [`AT_RISK_FRACTION`] of its limit, or it refused requests since
    /// boot.
    AtRisk,
    /// At its limit now, or it refused requests since the previous look.
    Rejecting,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Ok => "OK",
            State::Unknown => "UNKNOWN",
            State::AtRisk => "AT RISK",
            State::Rejecting => "REJECTING",
        })
    }
}

/// A flow-control mechanism that can refuse requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// The CommitLog put lock held past `osPageCacheBusyTimeOutMills`.
    PageCache,
    /// No free buffer in the transient store pool.
    TransientPool,
    /// Sends waiting longer than `waitTimeMillsInSendQueue`.
    SendQueueWait,
    /// The send queue full (by count or by bytes, or a fair share full).
    SendQueueFull,
    /// Early and adaptive admission refusing sends at once.
    Admission,
    /// Topic and client send quotas.
    Quota,
    /// The disk too full for writes.
    Disk,
    /// The SYNC_FLUSH backlog.
    Flush,
    /// The pull queue.
    PullQueue,
    /// The heartbeat queue.
    HeartbeatQueue,
    /// The admin queue.
    AdminQueue,
    /// The end-transaction queue.
    EndTransactionQueue,
}

impl Mechanism {
    /// Every mechanism, in the order findings of one state are listed.
    pub const ALL: [Mechanism; 12] = [
        Mechanism::PageCache,
        Mechanism::TransientPool,
        Mechanism::SendQueueWait,
        Mechanism::SendQueueFull,
        Mechanism::Admission,
        Mechanism::Quota,
        Mechanism::Disk,
        Mechanism::Flush,
        Mechanism::PullQueue,
        Mechanism::HeartbeatQueue,
        Mechanism::AdminQueue,
        Mechanism::EndTransactionQueue,
    ];

    /// A short name for people.
    pub fn title(self) -> &'static str {
        match self {
            Mechanism::PageCache => "page cache busy (put lock)",
            Mechanism::TransientPool => "transient store pool",
            Mechanism::SendQueueWait => "send queue wait",
            Mechanism::SendQueueFull => "send queue full",
            Mechanism::Admission => "early/adaptive admission",
            Mechanism::Quota => "topic/client quotas",
            Mechanism::Disk => "disk space",
            Mechanism::Flush => "flush backlog",
            Mechanism::PullQueue => "pull queue",
            Mechanism::HeartbeatQueue => "heartbeat queue",
            Mechanism::AdminQueue => "admin queue",
            Mechanism::EndTransactionQueue => "end-transaction queue",
        }
    }

    /// What a refused client is told.
    pub fn answer(self) -> &'static str {
        match self {
            Mechanism::PageCache => "[REJECTREQUEST] [PCBUSY_CLEAN_QUEUE]",
            Mechanism::TransientPool => "[REJECTREQUEST]",
            Mechanism::SendQueueWait => "[TIMEOUT_CLEAN_QUEUE]",
            Mechanism::SendQueueFull => "[OVERLOAD]",
            Mechanism::Admission => "[EARLY_REJECT]",
            Mechanism::Quota => "[QUOTA]",
            Mechanism::Disk => "SERVICE_NOT_AVAILABLE",
            Mechanism::Flush => "FLUSH_DISK_TIMEOUT",
            Mechanism::PullQueue
            | Mechanism::HeartbeatQueue
            | Mechanism::AdminQueue
            | Mechanism::EndTransactionQueue => "[TIMEOUT_CLEAN_QUEUE] [OVERLOAD]",
        }
    }
}

/// What one mechanism is doing, with the figures behind it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// The mechanism.
    pub mechanism: Mechanism,
    /// Its name for people.
    pub title: &'static str,
    /// What a refused client is told.
    pub answer: &'static str,
    /// How close it is to refusing.
    pub state: State,
    /// The figure and its limit, as text.
    pub figures: String,
    /// The figure, in the limit's unit.
    pub value: Option<f64>,
    /// The limit.
    pub limit: Option<f64>,
    /// Requests it refused in the window ([`Diagnosis::window`]); `None`
    /// when the broker does not count them apart.
    pub refused: Option<u64>,
    /// Why it is in this state.
    pub why: String,
    /// What would change it: the setting and its direction, or the action.
    pub action: String,
}

/// Over which period refusals are counted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Window {
    /// Since the broker started.
    SinceBoot,
    /// Since the previous look, this many seconds earlier.
    SincePreviousLook {
        /// Seconds between the two looks.
        seconds: f64,
    },
}

impl Window {
    fn text(self) -> String {
        match self {
            Window::SinceBoot => "since boot".to_owned(),
            Window::SincePreviousLook { seconds } => {
                format!("in the last {seconds:.1} s")
            }
        }
    }
}

/// What a broker said at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// When it was taken (ms since the epoch).
    pub taken_ms: i64,
    /// The runtime-info table.
    pub runtime: BTreeMap<String, String>,
    /// The configuration.
    pub config: BTreeMap<String, String>,
}

impl Sample {
    /// Refusals since boot by reason label (`rejected_<label>` keys).
    pub fn rejections(&self) -> BTreeMap<String, u64> {
        self.runtime
            .iter()
            .filter_map(|(k, v)| {
                let label = k.strip_prefix("rejected_")?;
                Some((label.to_owned(), v.trim().parse().ok()?))
            })
            .collect()
    }

    fn boot(&self) -> Option<&str> {
        self.runtime.get("bootTimestamp").map(String::as_str)
    }
}

/// One broker's diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// The broker's address.
    pub broker: String,
    /// When its figures were read (ms since the epoch).
    pub taken_ms: i64,
    /// Over which period refusals are counted.
    pub window: Option<Window>,
    /// Refusals in the window by reason label, the non-zero ones.
    pub rejections: BTreeMap<String, u64>,
    /// One sentence: what refuses sends, or that nothing does.
    pub verdict: String,
    /// One finding per mechanism, most severe first.
    pub findings: Vec<Finding>,
    /// Why the broker could not be read.
    pub error: Option<String>,
}

/// `why-busy`: the diagnosis of each broker asked.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WhyBusyReport {
    /// The look's number with `--watch` (1 for the first).
    pub refresh: Option<u32>,
    /// One diagnosis per broker, by address.
    pub brokers: Vec<Diagnosis>,
}

impl Report for WhyBusyReport {
    fn text(&self) -> String {
        let mut out = String::new();
        for d in &self.brokers {
            let mut head = format!("broker {} at {}", d.broker, time_text(d.taken_ms));
            if let Some(n) = self.refresh {
                let _ = write!(head, " (refresh {n})");
            }
            if let Some(e) = &d.error {
                section(&mut out, &head, &format!("cannot be read: {e}\n"));
                continue;
            }
            let window = d.window.map_or_else(String::new, Window::text);
            let mut body = format!("{}\n\n", d.verdict);
            let mut t = Table::new(&[
                ("State", Align::Left),
                ("Mechanism", Align::Left),
                ("Answer", Align::Left),
                ("Figures", Align::Left),
                ("Refused", Align::Right),
            ]);
            for f in &d.findings {
                t.row(vec![
                    f.state.to_string(),
                    f.title.to_owned(),
                    f.answer.to_owned(),
                    f.figures.clone(),
                    f.refused.map_or_else(|| "-".to_owned(), |n| n.to_string()),
                ]);
            }
            body.push_str(&t.to_string());
            let _ = writeln!(body, "(refused: {window})");
            for f in d.findings.iter().filter(|f| f.state != State::Ok) {
                let _ = write!(
                    body,
                    "\n{} {}\n  why: {}\n  do:  {}\n",
                    f.state, f.title, f.why, f.action
                );
            }
            section(&mut out, &head, &body);
        }
        out
    }
}

mod diagnosis;
mod figures;

#[cfg(test)]
mod tests;

pub use diagnosis::*;
pub use figures::*;

// ---------------------------------------------------------------- requests

/// Reads the runtime info and configuration of the broker at `addr`.
///
/// # Errors
/// Either request fails, or its answer cannot be read.
pub async fn sample(admin: &Admin, addr: &str) -> Result<Sample, AdminError> {
    let runtime: KvTable = admin
        .broker_json(
            addr,
            RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO),
        )
        .await?;
    let answer = admin
        .call(
            Peer::Broker,
            addr,
            RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
        )
        .await?;
    let config = body::decode_config_text(&answer.body).map_err(|e| AdminError::BadAnswer {
        peer: Peer::Broker,
        addr: addr.to_owned(),
        request: RequestCode::GET_BROKER_CONFIG,
        reason: e.to_string(),
    })?;
    Ok(Sample {
        taken_ms: chrono::Utc::now().timestamp_millis(),
        runtime: runtime.table,
        config: config.into_iter().collect(),
    })
}

/// Diagnoses `broker` (else every master broker), counting refusals since
/// the samples in `previous` (by address); returns the report and the new
/// samples.
///
/// # Errors
/// The name server fails, or the one broker named cannot be read. When
/// every master is asked, a broker that cannot be read is reported in its
/// diagnosis instead.
pub async fn why_busy(
    admin: &Admin,
    broker: Option<&str>,
    previous: &BTreeMap<String, Sample>,
) -> Result<(WhyBusyReport, BTreeMap<String, Sample>), AdminError> {
    let targets = admin.targets(broker).await?;
    let mut report = WhyBusyReport::default();
    let mut samples = BTreeMap::new();
    for addr in targets {
        match sample(admin, &addr).await {
            Ok(s) => {
                report
                    .brokers
                    .push(diagnose(&addr, &s, previous.get(&addr)));
                samples.insert(addr, s);
            }
            Err(e) if broker.is_some() => return Err(e),
            Err(e) => report.brokers.push(Diagnosis {
                broker: addr,
                taken_ms: chrono::Utc::now().timestamp_millis(),
                error: Some(e.to_string()),
                ..Diagnosis::default()
            }),
        }
    }
    Ok((report, samples))
}
