//! Consumer lag and the RocketMQ 5 gauges.
//!
//! Lag is computed every few seconds by the housekeeping thread, for the
//! groups with committed offsets only, per `(consumer_group, topic)`:
//!
//! - `rocketmq_consumer_lag_messages`: Σ(max offset − committed offset);
//! - `rocketmq_consumer_lag_latency`: now − store time of the oldest
//!   message not consumed (the one at the committed offset), 0 when the
//!   group is not behind;
//! - `rocketmq_consumer_inflight_messages`: Σ(pulled − committed), where
//!   "pulled" is the next offset of the group's last read of the queue
//!   (the committed offset when it has not read it since the broker
//!   started);
//! - `rocketmq_consumer_ready_messages`: Σ(max offset − pulled).
//!
//! Each costs one store-time lookup per queue that is behind. At most
//! [`super::MAX_GROUP_SERIES`] pairs are published; a pair that is gone
//! reads 0.
//!
//! The other gauges (`rocketmq_processor_watermark`,
//! `rocketmq_broker_permission`, `rocketmq_topic_number`,
//! `rocketmq_consumer_group_number`, `rocketmq_storage_*`) are refreshed
//! every second from [`GaugeValues`].

use std::{collections::BTreeMap, sync::PoisonError};

use message_model::flags::RETRY_GROUP_TOPIC_PREFIX;
use metrics::{gauge, Gauge};
use store::MessageStore;

use super::{is_system_group, is_system_topic, BrokerStats, CommonLabels, MAX_GROUP_SERIES};
use crate::{
    offsets::OffsetManager,
    request::{Family, PerFamily},
};

/// A published lag series: consumer group and topic.
pub(crate) type SeriesKey = (String, String);

/// A group's lag on one topic, summed over its queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Lag {
    /// Messages stored and not consumed.
    pub messages: i64,
    /// How long the oldest of them has waited (ms); 0 when none.
    pub latency_ms: i64,
    /// Messages read and not consumed.
    pub inflight: i64,
    /// Messages not read yet.
    pub ready: i64,
}

/// Store time of the message at a queue offset, if it is still stored.
pub fn store_time(store: &MessageStore, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
    let entry = store.queue_entry(topic, queue_id, offset)?;
    let record = store.lookup_message(u64::try_from(entry.commit_log_offset).ok()?)?;
    message_model::record::read_store_timestamp(&record)
}

impl BrokerStats {
    /// The lag of every group with committed offsets on every topic it has
    /// them on, at `now_ms`; at most [`MAX_GROUP_SERIES`] pairs.
    pub fn lag(
        &self,
        store: &MessageStore,
        offsets: &OffsetManager,
        now_ms: i64,
    ) -> BTreeMap<SeriesKey, Lag> {
        let mut out: BTreeMap<SeriesKey, (Lag, Option<i64>)> = BTreeMap::new();
        let mut skipped = 0usize;
        for (topic, group, queue_id, committed) in offsets.entries() {
            let key = (group, topic);
            if !out.contains_key(&key) && out.len() >= MAX_GROUP_SERIES {
                skipped += 1;
                continue;
            }
            let (group, topic) = (&key.0, &key.1);
            let max = store.max_offset_in_queue(topic, queue_id).max(0);
            let committed = committed.clamp(0, max);
            let pulled = self
                .pulled(group, topic, queue_id)
                .map_or(committed, |p| p.clamp(committed, max));
            let oldest = if committed < max {
                let first = store.min_offset_in_queue(topic, queue_id).max(committed);
                store_time(store, topic, queue_id, first)
            } else {
                None
            };
            let (lag, earliest) = out.entry(key).or_default();
            lag.messages += max - committed;
            lag.inflight += pulled - committed;
            lag.ready += max - pulled;
            if let Some(t) = oldest {
                *earliest = Some(earliest.map_or(t, |e: i64| e.min(t)));
            }
        }
        if skipped > 0 {
            tracing::debug!(
                skipped,
                limit = MAX_GROUP_SERIES,
                "consumer lag: queues of groups past the series limit left out"
            );
        }
        out.into_iter()
            .map(|(k, (mut lag, earliest))| {
                lag.latency_ms = match earliest {
                    Some(t) if lag.messages > 0 => (now_ms - t).max(0),
                    _ => 0,
                };
                (k, lag)
            })
            .collect()
    }

    /// Publishes the lag gauges; a pair published before and absent now
    /// reads 0.
    pub fn publish_lag(&self, lags: &BTreeMap<SeriesKey, Lag>) {
        let mut published = self
            .lag_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for key in published.iter().filter(|k| !lags.contains_key(*k)) {
            for g in self.lag_gauges(key) {
                g.set(0.0);
            }
        }
        for (key, lag) in lags {
            let values = [lag.messages, lag.latency_ms, lag.inflight, lag.ready];
            for (g, v) in self.lag_gauges(key).into_iter().zip(values) {
                g.set(v as f64);
            }
        }
        *published = lags.keys().cloned().collect();
    }

    /// The gauges of one pair, in the order of [`Lag`]'s fields.
    fn lag_gauges(&self, (group, topic): &SeriesKey) -> [Gauge; 4] {
        let l = self.labels();
        let labels = [
            ("cluster", l.cluster.clone()),
            ("node_type", "broker".to_owned()),
            ("node_id", l.node_id.clone()),
            ("consumer_group", group.clone()),
            ("topic", topic.clone()),
            (
                "is_retry",
                topic.starts_with(RETRY_GROUP_TOPIC_PREFIX).to_string(),
            ),
            (
                "is_system",
                (is_system_topic(topic) || is_system_group(group)).to_string(),
            ),
        ];
        [
            gauge!("rocketmq_consumer_lag_messages", &labels),
            gauge!("rocketmq_consumer_lag_latency", &labels),
            gauge!("rocketmq_consumer_inflight_messages", &labels),
            gauge!("rocketmq_consumer_ready_messages", &labels),
        ]
    }

    /// Sets the broker-wide RocketMQ 5 gauges.
    pub fn publish_gauges(&self, v: &GaugeValues) {
        let g = &self.gauges;
        for (family, len) in v.queue_lengths.iter() {
            g.watermark[family].set(*len as f64);
        }
        g.permission.set(f64::from(v.permission));
        g.topics.set(v.topics as f64);
        g.groups.set(v.groups as f64);
        g.storage_size.set(v.storage_bytes as f64);
        g.flush_behind.set(v.flush_behind as f64);
        g.dispatch_behind.set(v.dispatch_behind as f64);
        // Left unset while the CommitLog is empty, as RocketMQ skips it.
        if let Some(t) = v.earliest_store_time.filter(|t| *t > 0) {
            g.reserve_time.set((v.now_ms - t).max(0) as f64);
        }
    }
}

/// What the broker-wide gauges show.
#[derive(Debug, Clone)]
pub struct GaugeValues {
    /// Requests waiting in each family's queue.
    pub queue_lengths: PerFamily<usize>,
    /// `brokerPermission`.
    pub permission: i32,
    /// Topics.
    pub topics: usize,
    /// Subscription groups.
    pub groups: usize,
    /// Bytes the CommitLog holds (its maximum less its minimum offset).
    pub storage_bytes: u64,
    /// Bytes written and not flushed.
    pub flush_behind: u64,
    /// Bytes written and not dispatched to the consume queues.
    pub dispatch_behind: u64,
    /// Store time of the CommitLog's first message, if known.
    pub earliest_store_time: Option<i64>,
    /// Now (ms since the epoch).
    pub now_ms: i64,
}

/// The broker-wide RocketMQ 5 gauges.
#[derive(Debug)]
pub struct Gauges {
    watermark: PerFamily<Gauge>,
    permission: Gauge,
    topics: Gauge,
    groups: Gauge,
    storage_size: Gauge,
    flush_behind: Gauge,
    dispatch_behind: Gauge,
    reserve_time: Gauge,
}

/// RocketMQ 5's `processor` label of a family's queue.
pub fn processor_label(family: Family) -> &'static str {
    match family {
        Family::Send => "send",
        Family::Pull => "pull",
        Family::ConsumerManage => "consumer_manager",
        Family::Heartbeat => "heartbeat",
        Family::Admin => "admin",
        Family::Transaction => "transaction",
    }
}

impl Gauges {
    /// Registers the gauges with the common labels.
    pub fn new(l: &CommonLabels) -> Self {
        let common = || {
            vec![
                ("cluster", l.cluster.clone()),
                ("node_type", "broker".to_owned()),
                ("node_id", l.node_id.clone()),
            ]
        };
        let store = || {
            let mut labels = common();
            labels.push(("storage_type", "local".to_owned()));
            labels.push(("storage_medium", "disk".to_owned()));
            labels
        };
        Self {
            watermark: PerFamily::new(|f| {
                let mut labels = common();
                labels.push(("processor", processor_label(f).to_owned()));
                gauge!("rocketmq_processor_watermark", &labels)
            }),
            permission: gauge!("rocketmq_broker_permission", &common()),
            topics: gauge!("rocketmq_topic_number", &common()),
            groups: gauge!("rocketmq_consumer_group_number", &common()),
            storage_size: gauge!("rocketmq_storage_size", &store()),
            flush_behind: gauge!("rocketmq_storage_flush_behind_bytes", &store()),
            dispatch_behind: gauge!("rocketmq_storage_dispatch_behind_bytes", &store()),
            reserve_time: gauge!("rocketmq_storage_message_reserve_time", &store()),
        }
    }
}
