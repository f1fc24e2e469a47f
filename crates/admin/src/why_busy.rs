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

// ---------------------------------------------------------------- figures

/// The figures one diagnosis reads: the sample, the refusals in the window.
#[derive(Debug, Clone)]
pub struct Figures<'a> {
    sample: &'a Sample,
    refused: BTreeMap<String, u64>,
    /// Over which period `refused` counts.
    pub window: Window,
}

impl<'a> Figures<'a> {
    /// The figures of `sample`, refusals counted since `previous` when it
    /// is from the same run of the broker, else since boot.
    pub fn new(sample: &'a Sample, previous: Option<&Sample>) -> Self {
        let now = sample.rejections();
        let previous = previous.filter(|p| {
            p.boot() == sample.boot()
                && p.rejections()
                    .iter()
                    .all(|(k, v)| now.get(k).is_some_and(|n| n >= v))
        });
        match previous {
            Some(p) => {
                let before = p.rejections();
                let refused = now
                    .iter()
                    .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
                    .collect();
                let seconds = (sample.taken_ms - p.taken_ms).max(0) as f64 / 1000.0;
                Self {
                    sample,
                    refused,
                    window: Window::SincePreviousLook { seconds },
                }
            }
            None => Self {
                sample,
                refused: now,
                window: Window::SinceBoot,
            },
        }
    }

    fn rt(&self, key: &str) -> Option<&str> {
        self.sample.runtime.get(key).map(|v| v.trim())
    }

    fn rt_f64(&self, key: &str) -> Option<f64> {
        self.rt(key)?.parse().ok()
    }

    fn rt_bool(&self, key: &str) -> Option<bool> {
        self.rt(key)?.parse().ok()
    }

    fn cfg(&self, key: &str) -> Option<&str> {
        self.sample.config.get(key).map(|v| v.trim())
    }

    fn cfg_f64(&self, key: &str, default: f64) -> f64 {
        self.cfg(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    fn cfg_bool(&self, key: &str, default: bool) -> bool {
        self.cfg(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// Refusals in the window under any of `labels`; `None` when the broker
    /// counts none of them.
    fn refused(&self, labels: &[&str]) -> Option<u64> {
        let counts: Vec<u64> = labels
            .iter()
            .filter_map(|l| self.refused.get(*l).copied())
            .collect();
        (!counts.is_empty()).then(|| counts.iter().sum())
    }

    fn fresh(&self) -> bool {
        matches!(self.window, Window::SincePreviousLook { .. })
    }
}

/// The state of a figure against its limit.
pub fn level(value: f64, limit: f64) -> State {
    if limit <= 0.0 {
        State::Ok
    } else if value >= limit {
        State::Rejecting
    } else if value > limit * AT_RISK_FRACTION {
        State::AtRisk
    } else {
        State::Ok
    }
}

/// `state` raised by `refused` requests in the window: to
/// [`State::Rejecting`] for refusals since the previous look, to
/// [`State::AtRisk`] for refusals since boot.
fn with_refusals(state: State, refused: Option<u64>, fresh: bool) -> State {
    match refused {
        Some(n) if n > 0 => state.max(if fresh {
            State::Rejecting
        } else {
            State::AtRisk
        }),
        _ => state,
    }
}

fn refusals_sentence(refused: Option<u64>, window: Window) -> String {
    match refused {
        Some(n) if n > 0 => format!(" It refused {n} request(s) {}.", window.text()),
        _ => String::new(),
    }
}

fn percent(value: f64, limit: f64) -> String {
    if limit > 0.0 {
        format!(" ({:.0} %)", value * 100.0 / limit)
    } else {
        String::new()
    }
}

fn bytes_text(bytes: f64) -> String {
    const KIB: f64 = 1024.0;
    if bytes < KIB {
        format!("{bytes:.0} B")
    } else if bytes < KIB * KIB {
        format!("{:.1} KiB", bytes / KIB)
    } else if bytes < KIB * KIB * KIB {
        format!("{:.1} MiB", bytes / KIB / KIB)
    } else {
        format!("{:.1} GiB", bytes / KIB / KIB / KIB)
    }
}

fn unknown(m: Mechanism, missing: &str) -> Finding {
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state: State::Unknown,
        figures: "-".to_owned(),
        value: None,
        limit: None,
        refused: None,
        why: format!("The broker does not report {missing}."),
        action: "Ask a Sluice broker, or read the figure from its metrics.".to_owned(),
    }
}

const NOTHING_TO_DO: &str = "Nothing to do.";

// ---------------------------------------------------------------- diagnosis

/// One finding per mechanism from `sample` (refusals counted since
/// `previous` when given), most severe first.
pub fn diagnose(broker: &str, sample: &Sample, previous: Option<&Sample>) -> Diagnosis {
    let f = Figures::new(sample, previous);
    let mut findings: Vec<Finding> = Mechanism::ALL.iter().map(|m| finding(*m, &f)).collect();
    findings.sort_by(|a, b| {
        b.state
            .cmp(&a.state)
            .then_with(|| a.mechanism.cmp(&b.mechanism))
    });
    Diagnosis {
        broker: broker.to_owned(),
        taken_ms: sample.taken_ms,
        window: Some(f.window),
        rejections: f
            .refused
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect(),
        verdict: verdict(&findings),
        findings,
        error: None,
    }
}

/// One sentence naming the mechanisms that refuse or are close to it.
pub fn verdict(findings: &[Finding]) -> String {
    let names = |s: State| -> Vec<&str> {
        findings
            .iter()
            .filter(|f| f.state == s)
            .map(|f| f.title)
            .collect()
    };
    let rejecting = names(State::Rejecting);
    let at_risk = names(State::AtRisk);
    match (rejecting.is_empty(), at_risk.is_empty()) {
        (false, _) => format!("REJECTING: {}.", rejecting.join(", ")),
        (true, false) => format!("AT RISK: {}.", at_risk.join(", ")),
        (true, true) => {
            "OK: no flow-control mechanism is refusing requests or close to it.".to_owned()
        }
    }
}

/// The finding of one mechanism.
pub fn finding(m: Mechanism, f: &Figures<'_>) -> Finding {
    match m {
        Mechanism::PageCache => page_cache(f),
        Mechanism::TransientPool => transient_pool(f),
        Mechanism::SendQueueWait => send_queue_wait(f),
        Mechanism::SendQueueFull => send_queue_full(f),
        Mechanism::Admission => admission(f),
        Mechanism::Quota => quota(f),
        Mechanism::Disk => disk(f),
        Mechanism::Flush => flush(f),
        Mechanism::PullQueue => other_queue(m, f, &PULL),
        Mechanism::HeartbeatQueue => other_queue(m, f, &HEARTBEAT),
        Mechanism::AdminQueue => other_queue(m, f, &ADMIN),
        Mechanism::EndTransactionQueue => other_queue(m, f, &END_TRANSACTION),
    }
}

/// Whether the transient store pool is on and out of buffers.
fn pool_exhausted(f: &Figures<'_>) -> bool {
    let enabled = f.rt_f64("transientStorePoolTotalBuffers").map_or_else(
        || f.cfg_bool("transientStorePoolEnable", false),
        |n| n > 0.0,
    );
    enabled && f.rt_f64("remainTransientStoreBufferNumbs") == Some(0.0)
}

fn page_cache(f: &Figures<'_>) -> Finding {
    let m = Mechanism::PageCache;
    let Some(held) = f.rt_f64("pageCacheLockTimeMills") else {
        return unknown(m, "pageCacheLockTimeMills");
    };
    let limit = f.cfg_f64("osPageCacheBusyTimeOutMills", 1000.0);
    let busy = f.rt_bool("osPageCacheBusy").unwrap_or(false);
    // `[REJECTREQUEST]` is the page cache's unless the pool is out of buffers.
    let labels: &[&str] = if pool_exhausted(f) {
        &["pcbusy_clean_queue", "pc_synchronized"]
    } else {
        &["reject_request", "pcbusy_clean_queue", "pc_synchronized"]
    };
    let refused = f.refused(labels);
    let live = if busy {
        State::Rejecting
    } else {
        level(held, limit)
    };
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "The CommitLog put lock has been held {held:.0} ms, past osPageCacheBusyTimeOutMills \
             ({limit:.0} ms): the page cache counts as busy, so new sends are refused at once \
             ([REJECTREQUEST]) and queued sends are drained ([PCBUSY_CLEAN_QUEUE])."
        ),
        State::AtRisk => format!(
            "The CommitLog put lock has been held {held:.0} ms, more than half of \
             osPageCacheBusyTimeOutMills ({limit:.0} ms); at the limit sends are refused."
        ),
        _ => format!(
            "The CommitLog put lock is held {held:.0} ms, well within \
             osPageCacheBusyTimeOutMills ({limit:.0} ms)."
        ),
    } + &refusals_sentence(refused, f.window);
    let fault = f.cfg_f64("faultPutLockDelayMills", 0.0);
    let action = if fault > 0.0 {
        format!(
            "faultPutLockDelayMills is {fault:.0} ms, a put-lock delay injected on purpose: \
             set it to 0 (broker config set --key faultPutLockDelayMills --value 0)."
        )
    } else if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Find what stalls CommitLog appends (disk latency, flushes, memory pressure) or lower \
         the write load; transientStorePoolEnable=true writes through off-heap buffers; raise \
         osPageCacheBusyTimeOutMills only if such stalls are harmless."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "put lock held {held:.0} ms of {limit:.0} ms{}",
            percent(held, limit)
        ),
        value: Some(held),
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn transient_pool(f: &Figures<'_>) -> Finding {
    let m = Mechanism::TransientPool;
    let total = f
        .rt_f64("transientStorePoolTotalBuffers")
        .unwrap_or_else(|| {
            if f.cfg_bool("transientStorePoolEnable", false) {
                f.cfg_f64("transientStorePoolSize", 5.0)
            } else {
                0.0
            }
        });
    let refused = if pool_exhausted(f) {
        f.refused(&["reject_request"])
    } else {
        None
    };
    if total <= 0.0 {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: "pool off".to_owned(),
            value: None,
            limit: None,
            refused,
            why: "transientStorePoolEnable is false: sends need no pool buffer.".to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let Some(free) = f.rt_f64("remainTransientStoreBufferNumbs") else {
        return unknown(m, "remainTransientStoreBufferNumbs");
    };
    let used = (total - free).max(0.0);
    let live = level(used, total);
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "All {total:.0} transient store pool buffers are in use \
             (remainTransientStoreBufferNumbs is {free:.0}): sends are refused at admission \
             ([REJECTREQUEST]) until the commit thread returns a buffer."
        ),
        State::AtRisk => format!(
            "{used:.0} of the {total:.0} transient store pool buffers are in use; with none \
             free, sends are refused ([REJECTREQUEST])."
        ),
        _ => format!("{free:.0} of the {total:.0} transient store pool buffers are free."),
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Raise transientStorePoolSize (each buffer is one CommitLog file; restart needed) or \
         lower commitIntervalCommitLog so buffers come back sooner; a faster disk helps the \
         commit thread; transientStorePoolEnable=false writes without the pool."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{used:.0} of {total:.0} buffers in use{}",
            percent(used, total)
        ),
        value: Some(used),
        limit: Some(total),
        refused,
        why,
        action,
    }
}

fn send_queue_wait(f: &Figures<'_>) -> Finding {
    let m = Mechanism::SendQueueWait;
    let Some(head) = f.rt_f64("sendThreadPoolQueueHeadWaitTimeMills") else {
        return unknown(m, "sendThreadPoolQueueHeadWaitTimeMills");
    };
    let limit = f.cfg_f64("waitTimeMillsInSendQueue", 200.0);
    let workers = f
        .rt_f64("sendThreadPoolQueueWorkers")
        .unwrap_or_else(|| f.cfg_f64("sendMessageThreadPoolNums", 1.0));
    let refused = f.refused(&["timeout_clean_queue"]);
    let live = level(head, limit);
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "The oldest queued send has waited {head:.0} ms, past waitTimeMillsInSendQueue \
             ({limit:.0} ms): such sends are answered [TIMEOUT_CLEAN_QUEUE] instead of being \
             served."
        ),
        State::AtRisk => format!(
            "The oldest queued send has waited {head:.0} ms, more than half of \
             waitTimeMillsInSendQueue ({limit:.0} ms)."
        ),
        _ => format!(
            "The oldest queued send has waited {head:.0} ms, well within \
             waitTimeMillsInSendQueue ({limit:.0} ms)."
        ),
    } + &refusals_sentence(refused, f.window)
        + if refused.is_some_and(|n| n > 0) {
            " (The count covers every queue.)"
        } else {
            ""
        };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        format!(
            "Sends arrive faster than the {workers:.0} send worker(s) store them: raise \
             sendMessageThreadPoolNums if appends are slow but the disk is not saturated, else \
             send slower or add brokers; raise waitTimeMillsInSendQueue only if producers can \
             wait longer (their sendMsgTimeout is 3 s)."
        )
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "head wait {head:.0} ms of {limit:.0} ms{}",
            percent(head, limit)
        ),
        value: Some(head),
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn send_queue_full(f: &Figures<'_>) -> Finding {
    let m = Mechanism::SendQueueFull;
    let (Some(len), Some(cap)) = (
        f.rt_f64("sendThreadPoolQueueSize"),
        f.rt_f64("sendThreadPoolQueueCapacity"),
    ) else {
        return unknown(m, "sendThreadPoolQueueSize and sendThreadPoolQueueCapacity");
    };
    let bytes = f.rt_f64("sendThreadPoolQueueBytes");
    let cap_bytes = f.rt_f64("sendThreadPoolQueueCapacityBytes");
    let refused = f.refused(&["overload", "overload_bytes", "share_full"]);
    let by_count = level(len, cap);
    let by_bytes = match (bytes, cap_bytes) {
        (Some(b), Some(c)) => level(b, c),
        _ => State::Ok,
    };
    let bytes_bound = by_bytes > by_count;
    let live = by_count.max(by_bytes);
    let state = with_refusals(live, refused, f.fresh());
    let mut figures = format!("{len:.0} of {cap:.0} queued{}", percent(len, cap));
    if let (Some(b), Some(c)) = (bytes, cap_bytes) {
        let _ = write!(figures, ", {} of {}", bytes_text(b), bytes_text(c));
    }
    let why = match (live, bytes_bound) {
        (State::Rejecting, false) => format!(
            "The send queue holds {len:.0} sends, its sendThreadPoolQueueCapacity \
             ({cap:.0}): new sends are refused at once ([OVERLOAD])."
        ),
        (State::Rejecting, true) => {
            "The sends waiting in the queue hold requestQueueCapacityBytes: new sends are \
             refused at once ([OVERLOAD] ... queued bytes)."
                .to_owned()
        }
        (State::AtRisk, _) => format!(
            "The send queue is more than half full ({len:.0} of {cap:.0}); when full, sends \
             are refused ([OVERLOAD])."
        ),
        _ => format!("The send queue holds {len:.0} of {cap:.0} sends."),
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else if bytes_bound {
        "Large messages arrive faster than the store takes them: send slower or spread the \
         load over more brokers; a larger requestQueueCapacityBytes only moves the wait into \
         the queue."
            .to_owned()
    } else {
        "A larger sendThreadPoolQueueCapacity only moves the wait into the queue (and into \
         [TIMEOUT_CLEAN_QUEUE]): send slower, spread the load over more brokers, or make the \
         store faster (sendMessageThreadPoolNums, disk)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: Some(len),
        limit: Some(cap),
        refused,
        why,
        action,
    }
}

/// The shares of `sendQueueShares` (`key:length:head wait ms:shedding`
/// entries separated by `;`) that are shedding.
pub fn shedding_shares(entries: &str) -> Vec<String> {
    entries
        .split(';')
        .filter_map(|e| {
            let mut parts = e.trim().rsplitn(4, ':');
            let shedding = parts.next()?;
            let _wait = parts.next()?;
            let _len = parts.next()?;
            let key = parts.next()?;
            (shedding == "true").then(|| key.to_owned())
        })
        .collect()
}

fn admission(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Admission;
    let early = f
        .rt_bool("sendQueueEarlyAdmission")
        .unwrap_or_else(|| f.cfg_bool("earlyAdmissionEnable", true));
    let target = f
        .rt_f64("sendQueueAdmissionTargetMills")
        .unwrap_or_else(|| {
            if f.cfg_bool("adaptiveAdmissionEnable", true) {
                f.cfg_f64("admissionTargetMills", 5.0)
            } else {
                0.0
            }
        });
    let limit = f.cfg_f64("waitTimeMillsInSendQueue", 200.0);
    let predicted = f
        .rt_f64("sendThreadPoolQueuePredictedWaitMills")
        .filter(|p| *p >= 0.0);
    let head = f
        .rt_f64("sendThreadPoolQueueHeadWaitTimeMills")
        .unwrap_or(0.0);
    let shedding = shedding_shares(f.rt("sendQueueShares").unwrap_or(""));
    let shedding_count = f
        .rt_f64("sendQueueSheddingShares")
        .unwrap_or(shedding.len() as f64)
        .max(shedding.len() as f64);
    let refused = f.refused(&["early_reject", "standing_queue"]);
    if !early && target <= 0.0 {
        let state = with_refusals(State::Ok, refused, f.fresh());
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state,
            figures: "off".to_owned(),
            value: None,
            limit: None,
            refused,
            why: "earlyAdmissionEnable and adaptiveAdmissionEnable are false: sends are \
                  admitted as RocketMQ does, until the queue is full or they time out."
                .to_owned()
                + &refusals_sentence(refused, f.window),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let by_prediction = match (early, predicted) {
        (true, Some(p)) => level(p, limit),
        _ => State::Ok,
    };
    let by_shedding = if target > 0.0 && shedding_count > 0.0 {
        State::Rejecting
    } else if target > 0.0 && head > target {
        State::AtRisk
    } else {
        State::Ok
    };
    let live = by_prediction.max(by_shedding);
    let state = with_refusals(live, refused, f.fresh());
    let names = if shedding.is_empty() {
        String::new()
    } else {
        format!(" ({})", shedding.join(", "))
    };
    let why = if by_shedding == State::Rejecting {
        format!(
            "Adaptive admission is shedding {shedding_count:.0} share(s){names}: their sends \
             waited longer than admissionTargetMills ({target:.0} ms) for a whole \
             admissionIntervalMills, so sends that would wait longer are refused at once \
             ([EARLY_REJECT] ... standing queue)."
        )
    } else if by_prediction == State::Rejecting {
        format!(
            "The send queue holds about {:.0} ms of work, past waitTimeMillsInSendQueue \
             ({limit:.0} ms): early admission refuses new sends at once ([EARLY_REJECT]) \
             instead of letting them time out.",
            predicted.unwrap_or(0.0)
        )
    } else if live == State::AtRisk {
        format!(
            "Sends wait longer than they should: the oldest has waited {head:.0} ms \
             (admissionTargetMills {target:.0} ms) and the predicted wait is {} ms \
             (waitTimeMillsInSendQueue {limit:.0} ms); a standing queue makes admission shed.",
            predicted.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}"))
        )
    } else {
        "No share is shedding and the predicted wait is well within the limit.".to_owned()
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "The broker is serving at full speed and refusing only the excess: send slower or \
         spread the load over more brokers; adaptiveAdmissionEnable=false and \
         earlyAdmissionEnable=false restore RocketMQ's admission (longer waits, no more \
         throughput)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{shedding_count:.0} share(s) shedding; predicted wait {} of {limit:.0} ms",
            predicted.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}"))
        ),
        value: predicted,
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn quota(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Quota;
    let text = |key: &str| {
        f.cfg(key)
            .or_else(|| f.rt(key))
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    let topic = text("topicQuotas");
    let client = text("clientQuotas");
    let refused = f.refused(&["over_quota"]);
    let state = with_refusals(State::Ok, refused, f.fresh());
    let shown = |q: &str| if q.is_empty() { "none" } else { q }.to_owned();
    let figures = format!(
        "topicQuotas {}; clientQuotas {}",
        shown(&topic),
        shown(&client)
    );
    let why = if topic.is_empty() && client.is_empty() {
        "No topicQuotas or clientQuotas are set.".to_owned()
    } else if state == State::Ok {
        "Quotas are set and refused no send in the window.".to_owned()
    } else {
        "Sends over a topic's or client's rate are refused at once ([QUOTA]) until their \
         tokens are back."
            .to_owned()
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Send slower, or raise the quota at run time: broker config set --key topicQuotas \
         (or clientQuotas) with a higher N/s or bytes/s limit."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: None,
        limit: None,
        refused,
        why,
        action,
    }
}

fn disk(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Disk;
    let Some(ratio) = f.rt_f64("commitLogDiskRatio").filter(|r| *r >= 0.0) else {
        return unknown(m, "commitLogDiskRatio");
    };
    if f.rt_f64("retentionPasses") == Some(0.0) {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: "not measured yet".to_owned(),
            value: None,
            limit: None,
            refused: None,
            why: "The broker has not measured its disk use yet (no retention pass so far)."
                .to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let used = ratio * 100.0;
    let warning = f.cfg_f64("diskSpaceWarningLevelRatio", 90.0);
    let clean = f.cfg_f64("diskSpaceCleanForciblyRatio", 85.0);
    let state = if used >= warning {
        State::Rejecting
    } else if used >= clean {
        State::AtRisk
    } else {
        State::Ok
    };
    let why = match state {
        State::Rejecting => format!(
            "The CommitLog's disk is {used:.1} % used, past diskSpaceWarningLevelRatio \
             ({warning:.0} %): the store refuses writes (SERVICE_NOT_AVAILABLE) until cleaning \
             brings it down to diskSpaceCleanForciblyRatio ({clean:.0} %)."
        ),
        State::AtRisk => format!(
            "The CommitLog's disk is {used:.1} % used, past diskSpaceCleanForciblyRatio \
             ({clean:.0} %): old files are deleted early; at diskSpaceWarningLevelRatio \
             ({warning:.0} %) writes are refused."
        ),
        _ => format!(
            "The CommitLog's disk is {used:.1} % used, below diskSpaceCleanForciblyRatio \
             ({clean:.0} %)."
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Free disk space or lower fileReservedTime; DELETE_EXPIRED_COMMITLOG deletes expired \
         files at once."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!("disk {used:.1} % used of {warning:.0} %"),
        value: Some(used),
        limit: Some(warning),
        refused: None,
        why,
        action,
    }
}

fn flush(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Flush;
    let lag = f
        .rt_f64("remainHowManyDataToFlushBytes")
        .or_else(|| f.rt_f64("remainHowManyDataToFlush"));
    let Some(lag) = lag else {
        return unknown(m, "remainHowManyDataToFlushBytes");
    };
    let sync = f.cfg("flushDiskType") == Some("SYNC_FLUSH");
    if !sync {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: format!("{} unflushed (ASYNC_FLUSH)", bytes_text(lag)),
            value: Some(lag),
            limit: None,
            refused: None,
            why: "flushDiskType is ASYNC_FLUSH: sends do not wait for flushes.".to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let timeout = f.cfg_f64("syncFlushTimeout", 5000.0);
    let limit = timeout / 1000.0 * ASSUMED_FLUSH_BYTES_PER_SEC as f64;
    let state = level(lag, limit);
    let why = match state {
        State::Ok => format!(
            "Under SYNC_FLUSH, {} wait to be flushed, little against syncFlushTimeout \
             ({timeout:.0} ms).",
            bytes_text(lag)
        ),
        _ => format!(
            "Under SYNC_FLUSH, {} wait to be flushed: more than a disk writing {} per second \
             flushes in {} of syncFlushTimeout ({timeout:.0} ms); sends time out waiting \
             (FLUSH_DISK_TIMEOUT, the message is stored).",
            bytes_text(lag),
            bytes_text(ASSUMED_FLUSH_BYTES_PER_SEC as f64),
            if state == State::Rejecting {
                "all"
            } else {
                "half"
            }
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "A faster disk or less write load; raise syncFlushTimeout if producers can wait; \
         flushDiskType=ASYNC_FLUSH acknowledges from the page cache (less durable)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{} unflushed of {}{}",
            bytes_text(lag),
            bytes_text(limit),
            percent(lag, limit)
        ),
        value: Some(lag),
        limit: Some(limit),
        refused: None,
        why,
        action,
    }
}

/// The runtime keys and settings of a queue other than the send queue.
#[derive(Debug)]
struct QueueKeys {
    what: &'static str,
    size: &'static str,
    capacity: &'static str,
    head_wait: Option<&'static str>,
    wait_key: Option<(&'static str, f64)>,
    capacity_key: &'static str,
    threads_key: &'static str,
}

const PULL: QueueKeys = QueueKeys {
    what: "pull",
    size: "pullThreadPoolQueueSize",
    capacity: "pullThreadPoolQueueCapacity",
    head_wait: Some("pullThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInPullQueue", 5000.0)),
    capacity_key: "pullThreadPoolQueueCapacity",
    threads_key: "pullMessageThreadPoolNums",
};

const HEARTBEAT: QueueKeys = QueueKeys {
    what: "heartbeat",
    size: "heartbeatThreadPoolQueueSize",
    capacity: "heartbeatThreadPoolQueueCapacity",
    head_wait: Some("heartbeatThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInHeartbeatQueue", 31000.0)),
    capacity_key: "heartbeatThreadPoolQueueCapacity",
    threads_key: "heartbeatThreadPoolNums",
};

const ADMIN: QueueKeys = QueueKeys {
    what: "admin",
    size: "adminBrokerThreadPoolQueueSize",
    capacity: "adminBrokerThreadPoolQueueCapacity",
    head_wait: Some("adminBrokerThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInAdminBrokerQueue", 5000.0)),
    capacity_key: "adminBrokerThreadPoolQueueCapacity",
    threads_key: "adminBrokerThreadPoolNums",
};

const END_TRANSACTION: QueueKeys = QueueKeys {
    what: "end-transaction",
    size: "EndTransactionQueueSize",
    capacity: "EndTransactionThreadPoolQueueCapacity",
    head_wait: None,
    wait_key: None,
    capacity_key: "endTransactionPoolQueueCapacity",
    threads_key: "endTransactionThreadPoolNums",
};

fn other_queue(m: Mechanism, f: &Figures<'_>, k: &QueueKeys) -> Finding {
    let (Some(len), Some(cap)) = (f.rt_f64(k.size), f.rt_f64(k.capacity)) else {
        return unknown(m, k.size);
    };
    let wait = match (k.head_wait.and_then(|h| f.rt_f64(h)), k.wait_key) {
        (Some(head), Some((key, default))) => Some((head, f.cfg_f64(key, default), key)),
        _ => None,
    };
    let by_len = level(len, cap);
    let by_wait = wait.map_or(State::Ok, |(h, l, _)| level(h, l));
    let state = by_len.max(by_wait);
    let what = k.what;
    let mut figures = format!("{len:.0} of {cap:.0} queued{}", percent(len, cap));
    if let Some((h, l, _)) = wait {
        let _ = write!(figures, "; head wait {h:.0} of {l:.0} ms");
    }
    let why = match (state, wait) {
        (State::Ok, _) => format!("The {what} queue is well within its limits."),
        (_, Some((h, l, key))) if by_wait >= by_len => format!(
            "The oldest {what} request has waited {h:.0} ms against {key} ({l:.0} ms); at \
             the limit it is answered [TIMEOUT_CLEAN_QUEUE]."
        ),
        _ => format!(
            "The {what} queue holds {len:.0} of its {cap:.0} ({}); when full, requests are \
             refused [OVERLOAD].",
            k.capacity_key
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        format!(
            "Requests arrive faster than the {what} workers serve them: raise {} if the \
             broker has spare CPU, or lower the request rate; a larger {} only moves the wait \
             into the queue.",
            k.threads_key, k.capacity_key
        )
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: Some(len),
        limit: Some(cap),
        refused: None,
        why,
        action,
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A Sluice broker's figures at rest, with default settings.
    fn idle() -> Sample {
        let runtime = [
            ("bootTimestamp", "1000"),
            ("pageCacheLockTimeMills", "0"),
            ("osPageCacheBusy", "false"),
            ("remainTransientStoreBufferNumbs", "2147483647"),
            ("transientStorePoolTotalBuffers", "0"),
            ("sendThreadPoolQueueSize", "0"),
            ("sendThreadPoolQueueCapacity", "10000"),
            ("sendThreadPoolQueueHeadWaitTimeMills", "0"),
            ("sendThreadPoolQueueBytes", "0"),
            ("sendThreadPoolQueueCapacityBytes", "268435456"),
            ("sendThreadPoolQueueWorkers", "2"),
            ("sendThreadPoolQueuePredictedWaitMills", "-1"),
            ("sendQueueEarlyAdmission", "true"),
            ("sendQueueAdmissionTargetMills", "5"),
            ("sendQueueSheddingShares", "0"),
            ("sendQueueShares", ""),
            ("pullThreadPoolQueueSize", "0"),
            ("pullThreadPoolQueueCapacity", "100000"),
            ("pullThreadPoolQueueHeadWaitTimeMills", "0"),
            ("heartbeatThreadPoolQueueSize", "0"),
            ("heartbeatThreadPoolQueueCapacity", "50000"),
            ("heartbeatThreadPoolQueueHeadWaitTimeMills", "0"),
            ("adminBrokerThreadPoolQueueSize", "0"),
            ("adminBrokerThreadPoolQueueCapacity", "10000"),
            ("adminBrokerThreadPoolQueueHeadWaitTimeMills", "0"),
            ("EndTransactionQueueSize", "0"),
            ("EndTransactionThreadPoolQueueCapacity", "100000"),
            ("commitLogDiskRatio", "0.42"),
            ("retentionPasses", "3"),
            ("remainHowManyDataToFlush", "0 B"),
            ("remainHowManyDataToFlushBytes", "0"),
            ("topicQuotas", ""),
            ("clientQuotas", ""),
            ("rejected_reject_request", "0"),
            ("rejected_overload", "0"),
            ("rejected_pcbusy_clean_queue", "0"),
            ("rejected_timeout_clean_queue", "0"),
            ("rejected_pc_synchronized", "0"),
            ("rejected_early_reject", "0"),
            ("rejected_overload_bytes", "0"),
            ("rejected_over_quota", "0"),
            ("rejected_share_full", "0"),
            ("rejected_standing_queue", "0"),
        ];
        let config = [
            ("osPageCacheBusyTimeOutMills", "1000"),
            ("faultPutLockDelayMills", "0"),
            ("transientStorePoolEnable", "false"),
            ("transientStorePoolSize", "5"),
            ("waitTimeMillsInSendQueue", "200"),
            ("waitTimeMillsInPullQueue", "5000"),
            ("sendMessageThreadPoolNums", "2"),
            ("earlyAdmissionEnable", "true"),
            ("adaptiveAdmissionEnable", "true"),
            ("admissionTargetMills", "5"),
            ("diskSpaceWarningLevelRatio", "90"),
            ("diskSpaceCleanForciblyRatio", "85"),
            ("flushDiskType", "ASYNC_FLUSH"),
            ("syncFlushTimeout", "5000"),
            ("topicQuotas", ""),
            ("clientQuotas", ""),
        ];
        Sample {
            taken_ms: 10_000,
            runtime: runtime
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            config: config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    fn with(mut s: Sample, runtime: &[(&str, &str)], config: &[(&str, &str)]) -> Sample {
        for (k, v) in runtime {
            s.runtime.insert((*k).to_owned(), (*v).to_owned());
        }
        for (k, v) in config {
            s.config.insert((*k).to_owned(), (*v).to_owned());
        }
        s
    }

    fn find(sample: &Sample, previous: Option<&Sample>, m: Mechanism) -> Finding {
        finding(m, &Figures::new(sample, previous))
    }

    /// Checks the state of `m` under `runtime` and `config`, and that its
    /// advice names `setting` unless the state is OK.
    fn check(
        m: Mechanism,
        runtime: &[(&str, &str)],
        config: &[(&str, &str)],
        state: State,
        setting: &str,
    ) -> Finding {
        let s = with(idle(), runtime, config);
        let got = find(&s, None, m);
        assert_eq!(got.state, state, "{m:?} {runtime:?} {config:?}: {got:#?}");
        if state != State::Ok {
            assert!(
                got.action.contains(setting),
                "{m:?}: the advice should name {setting}: {}",
                got.action
            );
        } else {
            assert_eq!(got.action, NOTHING_TO_DO, "{got:#?}");
        }
        got
    }

    #[test]
    fn an_idle_broker_is_ok_everywhere() {
        let d = diagnose("b:1", &idle(), None);
        assert_eq!(d.findings.len(), Mechanism::ALL.len());
        for f in &d.findings {
            assert_eq!(f.state, State::Ok, "{f:#?}");
        }
        assert!(d.verdict.starts_with("OK:"), "{}", d.verdict);
        assert_eq!(d.window, Some(Window::SinceBoot));
        assert!(d.rejections.is_empty());
    }

    #[test]
    fn levels_split_at_the_limit_and_half_of_it() {
        assert_eq!(level(200.0, 200.0), State::Rejecting);
        assert_eq!(level(101.0, 200.0), State::AtRisk);
        assert_eq!(level(100.0, 200.0), State::Ok);
        assert_eq!(level(5.0, 0.0), State::Ok);
    }

    #[test]
    fn page_cache_follows_the_lock_against_the_busy_limit() {
        let busy = check(
            Mechanism::PageCache,
            &[
                ("pageCacheLockTimeMills", "1200"),
                ("osPageCacheBusy", "true"),
            ],
            &[],
            State::Rejecting,
            "osPageCacheBusyTimeOutMills",
        );
        assert_eq!(busy.figures, "put lock held 1200 ms of 1000 ms (120 %)");
        assert!(busy.why.contains("[REJECTREQUEST]"), "{}", busy.why);
        check(
            Mechanism::PageCache,
            &[("pageCacheLockTimeMills", "600")],
            &[],
            State::AtRisk,
            "osPageCacheBusyTimeOutMills",
        );
        check(
            Mechanism::PageCache,
            &[("pageCacheLockTimeMills", "12")],
            &[],
            State::Ok,
            "",
        );
        // An injected delay is named as the thing to undo.
        check(
            Mechanism::PageCache,
            &[("pageCacheLockTimeMills", "150")],
            &[
                ("osPageCacheBusyTimeOutMills", "100"),
                ("faultPutLockDelayMills", "400"),
            ],
            State::Rejecting,
            "faultPutLockDelayMills",
        );
    }

    #[test]
    fn transient_pool_follows_its_free_buffers() {
        let on = [("transientStorePoolTotalBuffers", "4")];
        let out = check(
            Mechanism::TransientPool,
            &[on[0], ("remainTransientStoreBufferNumbs", "0")],
            &[("transientStorePoolEnable", "true")],
            State::Rejecting,
            "transientStorePoolSize",
        );
        assert_eq!(out.figures, "4 of 4 buffers in use (100 %)");
        check(
            Mechanism::TransientPool,
            &[on[0], ("remainTransientStoreBufferNumbs", "1")],
            &[("transientStorePoolEnable", "true")],
            State::AtRisk,
            "transientStorePoolSize",
        );
        check(
            Mechanism::TransientPool,
            &[on[0], ("remainTransientStoreBufferNumbs", "3")],
            &[("transientStorePoolEnable", "true")],
            State::Ok,
            "",
        );
        // Off: nothing to run out of.
        check(Mechanism::TransientPool, &[], &[], State::Ok, "");
    }

    #[test]
    fn an_empty_pool_takes_the_reject_request_count_from_the_page_cache() {
        let s = with(
            idle(),
            &[
                ("transientStorePoolTotalBuffers", "1"),
                ("remainTransientStoreBufferNumbs", "0"),
                ("rejected_reject_request", "7"),
            ],
            &[],
        );
        assert_eq!(
            find(&s, None, Mechanism::TransientPool).refused,
            Some(7),
            "the pool refused them"
        );
        let page = find(&s, None, Mechanism::PageCache);
        assert_eq!(page.refused, Some(0));
        assert_eq!(page.state, State::Ok);
        let pool_free = with(s, &[("remainTransientStoreBufferNumbs", "1")], &[]);
        let page = find(&pool_free, None, Mechanism::PageCache);
        assert_eq!(page.refused, Some(7));
        assert_eq!(page.state, State::AtRisk, "refused since boot");
    }

    #[test]
    fn send_queue_wait_follows_the_head_against_the_wait_limit() {
        let late = check(
            Mechanism::SendQueueWait,
            &[("sendThreadPoolQueueHeadWaitTimeMills", "250")],
            &[],
            State::Rejecting,
            "waitTimeMillsInSendQueue",
        );
        assert!(late.action.contains("sendMessageThreadPoolNums"));
        assert!(late.why.contains("[TIMEOUT_CLEAN_QUEUE]"));
        check(
            Mechanism::SendQueueWait,
            &[("sendThreadPoolQueueHeadWaitTimeMills", "150")],
            &[],
            State::AtRisk,
            "waitTimeMillsInSendQueue",
        );
        check(
            Mechanism::SendQueueWait,
            &[("sendThreadPoolQueueHeadWaitTimeMills", "20")],
            &[],
            State::Ok,
            "",
        );
    }

    #[test]
    fn send_queue_full_follows_length_and_bytes_against_capacity() {
        let full = check(
            Mechanism::SendQueueFull,
            &[
                ("sendThreadPoolQueueSize", "2"),
                ("sendThreadPoolQueueCapacity", "2"),
            ],
            &[],
            State::Rejecting,
            "sendThreadPoolQueueCapacity",
        );
        assert!(full.figures.starts_with("2 of 2 queued (100 %)"));
        check(
            Mechanism::SendQueueFull,
            &[("sendThreadPoolQueueSize", "6000")],
            &[],
            State::AtRisk,
            "sendThreadPoolQueueCapacity",
        );
        check(
            Mechanism::SendQueueFull,
            &[("sendThreadPoolQueueBytes", "268435456")],
            &[],
            State::Rejecting,
            "requestQueueCapacityBytes",
        );
        check(
            Mechanism::SendQueueFull,
            &[("sendThreadPoolQueueSize", "10")],
            &[],
            State::Ok,
            "",
        );
    }

    #[test]
    fn admission_follows_shedding_shares_and_the_predicted_wait() {
        let shed = check(
            Mechanism::Admission,
            &[
                ("sendQueueSheddingShares", "1"),
                ("sendQueueShares", "Orders:40:30:true;Logs:1:0:false"),
            ],
            &[],
            State::Rejecting,
            "adaptiveAdmissionEnable",
        );
        assert!(shed.why.contains("(Orders)"), "{}", shed.why);
        check(
            Mechanism::Admission,
            &[("sendThreadPoolQueuePredictedWaitMills", "240")],
            &[],
            State::Rejecting,
            "earlyAdmissionEnable",
        );
        check(
            Mechanism::Admission,
            &[("sendThreadPoolQueuePredictedWaitMills", "120")],
            &[],
            State::AtRisk,
            "adaptiveAdmissionEnable",
        );
        check(
            Mechanism::Admission,
            &[("sendThreadPoolQueueHeadWaitTimeMills", "9")],
            &[],
            State::AtRisk,
            "adaptiveAdmissionEnable",
        );
        check(
            Mechanism::Admission,
            &[("sendThreadPoolQueuePredictedWaitMills", "3")],
            &[],
            State::Ok,
            "",
        );
        // Off: it cannot refuse.
        check(
            Mechanism::Admission,
            &[
                ("sendQueueEarlyAdmission", "false"),
                ("sendQueueAdmissionTargetMills", "0"),
                ("sendThreadPoolQueuePredictedWaitMills", "900"),
            ],
            &[],
            State::Ok,
            "",
        );
    }

    #[test]
    fn shedding_shares_are_read_from_the_right() {
        assert_eq!(
            shedding_shares("a:b:3:10:true;c:0:0:false; d:1:2:true"),
            vec!["a:b".to_owned(), "d".to_owned()]
        );
        assert!(shedding_shares("").is_empty());
    }

    #[test]
    fn quotas_follow_their_refusals() {
        let quotas = [("topicQuotas", "Orders=5/s")];
        let before = with(idle(), &[], &quotas);
        let now = with(before.clone(), &[("rejected_over_quota", "3")], &[]);
        let fresh = find(&now, Some(&before), Mechanism::Quota);
        assert_eq!(fresh.state, State::Rejecting);
        assert_eq!(fresh.refused, Some(3));
        assert!(fresh.action.contains("topicQuotas"), "{}", fresh.action);
        assert!(fresh.figures.contains("Orders=5/s"));
        check(
            Mechanism::Quota,
            &[("rejected_over_quota", "3")],
            &quotas,
            State::AtRisk,
            "topicQuotas",
        );
        check(Mechanism::Quota, &[], &quotas, State::Ok, "");
        // Nothing new since the previous look.
        assert_eq!(find(&now, Some(&now), Mechanism::Quota).state, State::Ok);
    }

    #[test]
    fn disk_follows_the_warning_and_clean_ratios() {
        check(
            Mechanism::Disk,
            &[("commitLogDiskRatio", "0.93")],
            &[],
            State::Rejecting,
            "fileReservedTime",
        );
        check(
            Mechanism::Disk,
            &[("commitLogDiskRatio", "0.87")],
            &[],
            State::AtRisk,
            "fileReservedTime",
        );
        check(
            Mechanism::Disk,
            &[("commitLogDiskRatio", "0.5")],
            &[],
            State::Ok,
            "",
        );
        check(
            Mechanism::Disk,
            &[("commitLogDiskRatio", "-1")],
            &[],
            State::Unknown,
            "",
        );
        let unmeasured = check(
            Mechanism::Disk,
            &[("commitLogDiskRatio", "0"), ("retentionPasses", "0")],
            &[],
            State::Ok,
            "",
        );
        assert_eq!(unmeasured.figures, "not measured yet");
    }

    #[test]
    fn flush_lag_matters_only_under_sync_flush() {
        let sync = [
            ("flushDiskType", "SYNC_FLUSH"),
            ("syncFlushTimeout", "1000"),
        ];
        let mib = 1024 * 1024;
        check(
            Mechanism::Flush,
            &[("remainHowManyDataToFlushBytes", &(200 * mib).to_string())],
            &sync,
            State::Rejecting,
            "syncFlushTimeout",
        );
        check(
            Mechanism::Flush,
            &[("remainHowManyDataToFlushBytes", &(60 * mib).to_string())],
            &sync,
            State::AtRisk,
            "syncFlushTimeout",
        );
        check(
            Mechanism::Flush,
            &[("remainHowManyDataToFlushBytes", "4096")],
            &sync,
            State::Ok,
            "",
        );
        check(
            Mechanism::Flush,
            &[("remainHowManyDataToFlushBytes", &(900 * mib).to_string())],
            &[],
            State::Ok,
            "",
        );
    }

    #[test]
    fn other_queues_follow_length_and_head_wait() {
        check(
            Mechanism::PullQueue,
            &[("pullThreadPoolQueueHeadWaitTimeMills", "6000")],
            &[],
            State::Rejecting,
            "pullMessageThreadPoolNums",
        );
        check(
            Mechanism::PullQueue,
            &[("pullThreadPoolQueueSize", "60000")],
            &[],
            State::AtRisk,
            "pullThreadPoolQueueCapacity",
        );
        check(
            Mechanism::HeartbeatQueue,
            &[("heartbeatThreadPoolQueueSize", "50000")],
            &[],
            State::Rejecting,
            "heartbeatThreadPoolQueueCapacity",
        );
        check(
            Mechanism::AdminQueue,
            &[("adminBrokerThreadPoolQueueHeadWaitTimeMills", "3000")],
            &[],
            State::AtRisk,
            "adminBrokerThreadPoolNums",
        );
        check(
            Mechanism::EndTransactionQueue,
            &[("EndTransactionQueueSize", "100000")],
            &[],
            State::Rejecting,
            "endTransactionPoolQueueCapacity",
        );
        check(Mechanism::PullQueue, &[], &[], State::Ok, "");
        let rocketmq = Sample {
            runtime: BTreeMap::from([("pageCacheLockTimeMills".to_owned(), "0".to_owned())]),
            ..Sample::default()
        };
        assert_eq!(
            find(&rocketmq, None, Mechanism::HeartbeatQueue).state,
            State::Unknown
        );
    }

    #[test]
    fn refusals_count_since_the_previous_look_of_the_same_run() {
        let before = idle();
        let mut now = with(
            before.clone(),
            &[
                ("rejected_overload", "5"),
                ("rejected_timeout_clean_queue", "2"),
            ],
            &[],
        );
        now.taken_ms = before.taken_ms + 2500;
        let d = diagnose("b:1", &now, Some(&before));
        assert_eq!(d.window, Some(Window::SincePreviousLook { seconds: 2.5 }));
        assert_eq!(d.rejections.get("overload"), Some(&5));
        // Most severe first: the two mechanisms that refused lead.
        assert_eq!(d.findings[0].mechanism, Mechanism::SendQueueWait);
        assert_eq!(d.findings[0].state, State::Rejecting);
        assert_eq!(d.findings[1].mechanism, Mechanism::SendQueueFull);
        assert_eq!(d.findings[1].refused, Some(5));
        assert_eq!(d.verdict, "REJECTING: send queue wait, send queue full.");
        // A restart resets the counters: count since boot again.
        let restarted = with(now.clone(), &[("bootTimestamp", "99")], &[]);
        let d = diagnose("b:1", &restarted, Some(&before));
        assert_eq!(d.window, Some(Window::SinceBoot));
        assert_eq!(d.findings[0].state, State::AtRisk);
    }

    #[test]
    fn text_names_the_state_figures_why_and_what_to_do() {
        let s = with(
            idle(),
            &[("sendThreadPoolQueueHeadWaitTimeMills", "250")],
            &[],
        );
        let report = WhyBusyReport {
            refresh: Some(2),
            brokers: vec![diagnose("b:1", &s, None)],
        };
        let text = report.text();
        assert!(text.contains("broker b:1 at "), "{text}");
        assert!(text.contains("(refresh 2)"), "{text}");
        assert!(text.contains("REJECTING: send queue wait."), "{text}");
        assert!(
            text.contains("REJECTING  send queue wait"),
            "table row: {text}"
        );
        assert!(
            text.contains("head wait 250 ms of 200 ms (125 %)"),
            "{text}"
        );
        assert!(text.contains("  why: The oldest queued send"), "{text}");
        assert!(text.contains("  do:  Sends arrive faster"), "{text}");
        assert!(text.contains("(refused: since boot)"), "{text}");
        let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
            .unwrap_or_else(|e| panic!("{e}"));
        let first = &json["brokers"][0]["findings"][0];
        assert_eq!(first["mechanism"], "send_queue_wait");
        assert_eq!(first["state"], "REJECTING");
        assert_eq!(first["value"], 250.0);
        assert_eq!(json["brokers"][0]["window"]["kind"], "sinceBoot");
    }
}
