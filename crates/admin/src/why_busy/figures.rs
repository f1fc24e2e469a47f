//! The figures one diagnosis reads, and the helpers that turn a figure
//! against its limit into a state and a sentence.

use std::collections::BTreeMap;

use super::{Finding, Mechanism, Sample, State, Window, AT_RISK_FRACTION};

/// The figures one diagnosis reads: the sample, the refusals in the window.
#[derive(Debug, Clone)]
pub struct Figures<'a> {
    sample: &'a Sample,
    pub(super) refused: BTreeMap<String, u64>,
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

    pub(super) fn rt(&self, key: &str) -> Option<&str> {
        self.sample.runtime.get(key).map(|v| v.trim())
    }

    pub(super) fn rt_f64(&self, key: &str) -> Option<f64> {
        self.rt(key)?.parse().ok()
    }

    pub(super) fn rt_bool(&self, key: &str) -> Option<bool> {
        self.rt(key)?.parse().ok()
    }

    pub(super) fn cfg(&self, key: &str) -> Option<&str> {
        self.sample.config.get(key).map(|v| v.trim())
    }

    pub(super) fn cfg_f64(&self, key: &str, default: f64) -> f64 {
        self.cfg(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    pub(super) fn cfg_bool(&self, key: &str, default: bool) -> bool {
        self.cfg(key)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// Refusals in the window under any of `labels`; `None` when the broker
    /// counts none of them.
    pub(super) fn refused(&self, labels: &[&str]) -> Option<u64> {
        let counts: Vec<u64> = labels
            .iter()
            .filter_map(|l| self.refused.get(*l).copied())
            .collect();
        (!counts.is_empty()).then(|| counts.iter().sum())
    }

    pub(super) fn fresh(&self) -> bool {
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
pub(super) fn with_refusals(state: State, refused: Option<u64>, fresh: bool) -> State {
    match refused {
        Some(n) if n > 0 => state.max(if fresh {
            State::Rejecting
        } else {
            State::AtRisk
        }),
        _ => state,
    }
}

pub(super) fn refusals_sentence(refused: Option<u64>, window: Window) -> String {
    match refused {
        Some(n) if n > 0 => format!(" It refused {n} request(s) {}.", window.text()),
        _ => String::new(),
    }
}

pub(super) fn percent(value: f64, limit: f64) -> String {
    if limit > 0.0 {
        format!(" ({:.0} %)", value * 100.0 / limit)
    } else {
        String::new()
    }
}

pub(super) fn bytes_text(bytes: f64) -> String {
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

pub(super) fn unknown(m: Mechanism, missing: &str) -> Finding {
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

pub(super) const NOTHING_TO_DO: &str = "Nothing to do.";
