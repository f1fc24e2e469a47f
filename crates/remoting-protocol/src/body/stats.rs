//! The `VIEW_BROKER_STATS_DATA` (315) answer: one statistic of the broker
//! (`TOPIC_PUT_NUMS` of a topic, `GROUP_GET_NUMS` of `topic@group`, ...)
//! over its last minute, hour and day, as `mqadmin statsAll`, the dashboard
//! and the exporter read it. Written as fastjson writes it: fields sorted by
//! name, doubles as Java spells them ([`java_double`]).

use serde::{Deserialize, Serialize};

use super::lenient::{double, int};

/// One window of a statistic (`BrokerStatsItem`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsItem {
    /// The counter's increase over the window.
    #[serde(deserialize_with = "int")]
    pub sum: i64,
    /// `sum` per second over the window.
    #[serde(deserialize_with = "double")]
    pub tps: f64,
    /// `sum` per recorded call over the window (0.0 when none was recorded).
    #[serde(deserialize_with = "double")]
    pub avgpt: f64,
}

/// A statistic over its last minute, hour and day (`BrokerStatsData`).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerStatsData {
    /// The last minute.
    pub stats_minute: BrokerStatsItem,
    /// The last hour.
    pub stats_hour: BrokerStatsItem,
    /// The last day.
    pub stats_day: BrokerStatsItem,
}

impl BrokerStatsData {
    /// The body as fastjson writes it.
    pub fn encode(&self) -> Vec<u8> {
        let item = |i: &BrokerStatsItem| {
            format!(
                r#"{{"avgpt":{},"sum":{},"tps":{}}}"#,
                java_double(i.avgpt),
                i.sum,
                java_double(i.tps)
            )
        };
        format!(
            r#"{{"statsDay":{},"statsHour":{},"statsMinute":{}}}"#,
            item(&self.stats_day),
            item(&self.stats_hour),
            item(&self.stats_minute)
        )
        .into_bytes()
    }
}

/// A double as Java's `Double.toString` lays it out (with the shortest
/// digits that read back the same): `0.0`, `1.5`, `12345.0`; below 10^-3
/// and from 10^7 on in scientific form, `2.5E-4`, `1.0E7`; `NaN`,
/// `Infinity`, `-Infinity`.
pub fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".to_owned();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let magnitude = value.abs();
    if magnitude == 0.0 || (1e-3..1e7).contains(&magnitude) {
        // Debug keeps a fraction on whole numbers: `3.0`.
        return format!("{value:?}");
    }
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}
