//! Per-topic and per-group statistics as RocketMQ's `BrokerStatsManager`
//! keeps them, and the RocketMQ 5 metrics derived from the same events.
//!
//! - `TOPIC_PUT_NUMS` / `TOPIC_PUT_SIZE` (key: topic), `GROUP_GET_NUMS` /
//!   `GROUP_GET_SIZE` (key: `topic@group`), `BROKER_PUT_NUMS` /
//!   `BROKER_GET_NUMS` (key: the cluster name), each a [`StatsItem`] with
//!   minute, hour and day windows, answered by `VIEW_BROKER_STATS_DATA`.
//! - The broker-wide rates and daily totals of `GET_BROKER_RUNTIME_INFO`
//!   ([`runtime`]).
//! - How far each group has pulled each queue, for `pullOffset` and the
//!   in-flight and ready counts ([`lag`]).
//! - `rocketmq_messages_in_total`, `rocketmq_throughput_in_total`,
//!   `rocketmq_messages_out_total`, `rocketmq_throughput_out_total`: their
//!   handles live in the topic's and the group's entry, so recording is
//!   the entry lookup and atomic additions, without a lock or an
//!   allocation once the entry exists.
//!
//! Snapshots are taken by [`BrokerStats::tick`], which the housekeeping
//! thread calls every second; every time is passed in, so tests choose it.

pub mod item;
pub mod lag;
pub mod runtime;

use std::{
    cell::RefCell,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
};

use dashmap::DashMap;
use message_model::{
    flags::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, TIMER_TOPIC},
    properties::{find, keys},
};
use metrics::{counter, Counter};
use remoting_protocol::body::BrokerStatsData;

pub use item::{StatsItem, Window};
pub use lag::{store_time, GaugeValues, Lag};
pub use runtime::{Mornings, RateSamples, Totals};

use crate::topics::is_rocketmq_system_topic;

/// `TOPIC_PUT_NUMS`: messages put into a topic.
pub const TOPIC_PUT_NUMS: &str = "TOPIC_PUT_NUMS";
/// `TOPIC_PUT_SIZE`: bytes put into a topic.
pub const TOPIC_PUT_SIZE: &str = "TOPIC_PUT_SIZE";
/// `GROUP_GET_NUMS`: messages a group got from a topic.
pub const GROUP_GET_NUMS: &str = "GROUP_GET_NUMS";
/// `GROUP_GET_SIZE`: bytes a group got from a topic.
pub const GROUP_GET_SIZE: &str = "GROUP_GET_SIZE";
/// `BROKER_PUT_NUMS`: messages put into the broker.
pub const BROKER_PUT_NUMS: &str = "BROKER_PUT_NUMS";
/// `BROKER_GET_NUMS`: messages got from the broker.
pub const BROKER_GET_NUMS: &str = "BROKER_GET_NUMS";

/// Most topic label sets of `rocketmq_messages_in_total` and its bytes;
/// topics past it are counted under the topic `(overflow)`.
pub const MAX_TOPIC_SERIES: usize = 1000;
/// Most `(topic, consumer_group)` label sets of the outgoing counters and
/// of the lag gauges; the rest are counted under `(overflow)` (counters)
/// or left out (gauges).
pub const MAX_GROUP_SERIES: usize = 2000;
/// The label value of what is counted past a series limit.
pub const OVERFLOW: &str = "(overflow)";

/// The kind of a stored message, RocketMQ 5's `message_type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageType {
    /// None of the others.
    Normal,
    /// Carries a sharding key (`__SHARDINGKEY`).
    Fifo,
    /// Asks for a delay level or a timer.
    Delay,
    /// The half of a transaction.
    Transaction,
}

impl MessageType {
    /// Every kind, in index order.
    pub const ALL: [MessageType; 4] = [Self::Normal, Self::Fifo, Self::Delay, Self::Transaction];

    /// The label value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "normal",
            Self::Fifo => "fifo",
            Self::Delay => "delay",
            Self::Transaction => "transaction",
        }
    }

    /// The kind of a message with these properties (`half`: it is the half
    /// of a transaction), in RocketMQ's order of precedence.
    pub fn of(properties: &str, half: bool) -> Self {
        if half {
            return Self::Transaction;
        }
        let delayed = find(properties, keys::DELAY_TIME_LEVEL)
            .is_some_and(|l| l.parse::<i32>().is_ok_and(|l| l > 0))
            || [
                keys::TIMER_DELIVER_MS,
                keys::TIMER_DELAY_SEC,
                keys::TIMER_DELAY_MS,
            ]
            .iter()
            .any(|k| find(properties, k).is_some());
        if delayed {
            Self::Delay
        } else if find(properties, keys::SHARDING_KEY).is_some() {
            Self::Fifo
        } else {
            Self::Normal
        }
    }

    const fn index(self) -> usize {
        match self {
            Self::Normal => 0,
            Self::Fifo => 1,
            Self::Delay => 2,
            Self::Transaction => 3,
        }
    }
}

/// The local day now (days since the epoch in the machine's time zone),
/// what the daily totals roll on.
pub fn local_day_now() -> i64 {
    let now = chrono::Local::now();
    runtime::local_day(
        now.timestamp_millis(),
        i64::from(now.offset().local_minus_utc()),
    )
}

/// Whether a topic counts as a system topic (`is_system` label, and left
/// out of the daily totals).
pub fn is_system_topic(topic: &str) -> bool {
    is_rocketmq_system_topic(topic) || topic == TIMER_TOPIC
}

/// Whether a group is one of RocketMQ's own (`is_system` label).
pub fn is_system_group(group: &str) -> bool {
    group.starts_with("CID_RMQ_SYS_")
        || ["TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "CID_ONSAPI_OWNER"].contains(&group)
}

/// Whether a topic is a retry or dead-letter topic (left out of the
/// RocketMQ 5 in/out counters).
pub fn is_retry_or_dlq(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) || topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// A topic's put statistics.
#[derive(Debug)]
pub struct TopicStats {
    /// `TOPIC_PUT_NUMS`.
    pub nums: StatsItem,
    /// `TOPIC_PUT_SIZE`.
    pub size: StatsItem,
    /// `rocketmq_messages_in_total` and `rocketmq_throughput_in_total` per
    /// [`MessageType`]; none for retry and dead-letter topics.
    counters: Option<[(Counter, Counter); 4]>,
}

/// A group's get statistics on one topic.
#[derive(Debug)]
pub struct GroupStats {
    /// `GROUP_GET_NUMS`.
    pub nums: StatsItem,
    /// `GROUP_GET_SIZE`.
    pub size: StatsItem,
    /// The next offset of the group's last read of each queue.
    pulled: DashMap<i32, i64>,
    /// `rocketmq_messages_out_total` and `rocketmq_throughput_out_total`;
    /// none for retry and dead-letter topics.
    counters: Option<(Counter, Counter)>,
}

/// The labels every RocketMQ 5 metric carries.
#[derive(Debug, Clone)]
pub struct CommonLabels {
    /// `cluster`: the broker's cluster.
    pub cluster: String,
    /// `node_id`: the broker's name.
    pub node_id: String,
}

/// The broker's statistics.
#[derive(Debug)]
pub struct BrokerStats {
    labels: CommonLabels,
    topics: DashMap<String, TopicStats>,
    /// Keyed by `topic@group`.
    groups: DashMap<String, GroupStats>,
    broker_put: StatsItem,
    broker_get: StatsItem,
    put_non_system: AtomicU64,
    get_non_system: AtomicU64,
    found: AtomicU64,
    miss: AtomicU64,
    transferred: AtomicU64,
    topic_series: AtomicUsize,
    group_series: AtomicUsize,
    series_warned: AtomicBool,
    rates: Mutex<RateSamples>,
    mornings: Mutex<Mornings>,
    /// The time of the last [`BrokerStats::tick`] (ms): where a new
    /// statistic's windows start (at most a tick off, and no clock read
    /// on the path that records).
    last_tick_ms: AtomicI64,
    /// When each window was last snapshotted (ms), in [`Window::ALL`] order.
    sampled: Mutex<[i64; 3]>,
    /// The lag gauges last published.
    pub(crate) lag_series: Mutex<Vec<lag::SeriesKey>>,
    /// The broker-wide RocketMQ 5 gauges.
    gauges: lag::Gauges,
}

thread_local! {
    /// The `topic@group` key of a lookup, built without allocating anew.
    static GROUP_KEY: RefCell<String> = const { RefCell::new(String::new()) };
}

impl BrokerStats {
    /// Empty statistics, their windows starting at `now_ms`, on the local
    /// day `day`.
    pub fn new(labels: CommonLabels, now_ms: i64, day: i64) -> Self {
        Self {
            topics: DashMap::new(),
            groups: DashMap::new(),
            broker_put: StatsItem::new(now_ms),
            broker_get: StatsItem::new(now_ms),
            put_non_system: AtomicU64::new(0),
            get_non_system: AtomicU64::new(0),
            found: AtomicU64::new(0),
            miss: AtomicU64::new(0),
            transferred: AtomicU64::new(0),
            topic_series: AtomicUsize::new(0),
            group_series: AtomicUsize::new(0),
            series_warned: AtomicBool::new(false),
            rates: Mutex::default(),
            mornings: Mutex::new(Mornings {
                day,
                ..Mornings::default()
            }),
            last_tick_ms: AtomicI64::new(now_ms),
            sampled: Mutex::new([now_ms; 3]),
            lag_series: Mutex::default(),
            gauges: lag::Gauges::new(&labels),
            labels,
        }
    }

    /// The labels every RocketMQ 5 metric carries.
    pub fn labels(&self) -> &CommonLabels {
        &self.labels
    }

    /// Counts `msgs` messages of `bytes` bytes stored into `topic` by one
    /// send.
    pub fn record_put(&self, topic: &str, msgs: u64, bytes: u64, kind: MessageType) {
        let entry = match self.topics.get(topic) {
            Some(e) => e,
            None => self
                .topics
                .entry(topic.to_owned())
                .or_insert_with(|| self.new_topic(topic))
                .downgrade(),
        };
        entry.nums.add(msgs, 1);
        entry.size.add(bytes, 1);
        if let Some(counters) = &entry.counters {
            let (messages, throughput) = &counters[kind.index()];
            messages.increment(msgs);
            throughput.increment(bytes);
        }
        drop(entry);
        self.broker_put.add(msgs, 0);
        if !is_system_topic(topic) {
            self.put_non_system.fetch_add(msgs, Ordering::Relaxed);
        }
    }

    /// Counts one read of `queue_id` that found `msgs` messages of `bytes`
    /// bytes for `group`, its next offset `next_offset`.
    pub fn record_get(
        &self,
        group: &str,
        topic: &str,
        queue_id: i32,
        msgs: u64,
        bytes: u64,
        next_offset: i64,
    ) {
        self.found.fetch_add(1, Ordering::Relaxed);
        self.transferred.fetch_add(msgs, Ordering::Relaxed);
        self.broker_get.add(msgs, 0);
        if !is_system_topic(topic) {
            self.get_non_system.fetch_add(msgs, Ordering::Relaxed);
        }
        GROUP_KEY.with(|key| {
            let mut key = key.borrow_mut();
            key.clear();
            key.push_str(topic);
            key.push('@');
            key.push_str(group);
            let entry = match self.groups.get(key.as_str()) {
                Some(e) => e,
                None => self
                    .groups
                    .entry(key.clone())
                    .or_insert_with(|| self.new_group(group, topic))
                    .downgrade(),
            };
            entry.nums.add(msgs, 1);
            entry.size.add(bytes, 1);
            if let Some((messages, throughput)) = &entry.counters {
                messages.increment(msgs);
                throughput.increment(bytes);
            }
            entry.pulled.insert(queue_id, next_offset);
        });
    }

    /// Counts one read that found nothing.
    pub fn record_miss(&self) {
        self.miss.fetch_add(1, Ordering::Relaxed);
    }

    /// `VIEW_BROKER_STATS_DATA`: one statistic's windows at `now_ms`;
    /// `None` when there is no such statistic.
    pub fn view(&self, name: &str, key: &str, now_ms: i64) -> Option<BrokerStatsData> {
        match name {
            TOPIC_PUT_NUMS => self.topics.get(key).map(|e| e.nums.data(now_ms)),
            TOPIC_PUT_SIZE => self.topics.get(key).map(|e| e.size.data(now_ms)),
            GROUP_GET_NUMS => self.groups.get(key).map(|e| e.nums.data(now_ms)),
            GROUP_GET_SIZE => self.groups.get(key).map(|e| e.size.data(now_ms)),
            BROKER_PUT_NUMS if key == self.labels.cluster => Some(self.broker_put.data(now_ms)),
            BROKER_GET_NUMS if key == self.labels.cluster => Some(self.broker_get.data(now_ms)),
            _ => None,
        }
    }

    /// Messages put into `topic` per second over the last minute.
    pub fn topic_put_tps(&self, topic: &str, now_ms: i64) -> f64 {
        self.topics
            .get(topic)
            .map_or(0.0, |e| e.nums.compute(Window::Minute, now_ms).tps)
    }

    /// Messages `group` got from `topic` per second over the last minute.
    pub fn group_get_tps(&self, group: &str, topic: &str, now_ms: i64) -> f64 {
        self.groups
            .get(&format!("{topic}@{group}"))
            .map_or(0.0, |e| e.nums.compute(Window::Minute, now_ms).tps)
    }

    /// The next offset of `group`'s last read of a queue, if it read it.
    pub fn pulled(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.groups
            .get(&format!("{topic}@{group}"))
            .and_then(|e| e.pulled.get(&queue_id).map(|o| *o))
    }

    /// Forgets what a deleted topic's statistics held.
    pub fn remove_topic(&self, topic: &str) {
        self.topics.remove(topic);
        let prefix = format!("{topic}@");
        self.groups.retain(|k, _| !k.starts_with(&prefix));
    }

    /// The broker's totals now.
    pub fn totals(&self) -> Totals {
        Totals {
            put: self.broker_put.value(),
            found: self.found.load(Ordering::Relaxed),
            miss: self.miss.load(Ordering::Relaxed),
            transferred: self.transferred.load(Ordering::Relaxed),
        }
    }

    /// Put and get totals without system topics: `(put, get)`.
    pub fn non_system_totals(&self) -> (u64, u64) {
        (
            self.put_non_system.load(Ordering::Relaxed),
            self.get_non_system.load(Ordering::Relaxed),
        )
    }

    /// The totals at the last two midnights.
    pub fn mornings(&self) -> Mornings {
        *self.mornings.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The rate of one of the broker's totals over 10 s, 1 min and 10 min.
    pub fn rates(&self, figure: impl Fn(&Totals) -> u64) -> String {
        self.rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .rates(figure)
    }

    /// Takes the snapshots that are due at `now_ms` (called every second):
    /// the broker's totals for the rates, each window of every statistic
    /// when its period has passed, and the daily totals when `day` (the
    /// local day) is a new one.
    pub fn tick(&self, now_ms: i64, day: i64) {
        self.last_tick_ms.store(now_ms, Ordering::Relaxed);
        let totals = self.totals();
        self.rates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .sample(now_ms, totals);
        let (put, get) = self.non_system_totals();
        self.mornings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .roll(day, put, get);
        let mut sampled = self.sampled.lock().unwrap_or_else(PoisonError::into_inner);
        for (n, window) in Window::ALL.into_iter().enumerate() {
            if now_ms - sampled[n] < window.every_ms() {
                continue;
            }
            sampled[n] = now_ms;
            self.broker_put.sample(window, now_ms);
            self.broker_get.sample(window, now_ms);
            for e in &self.topics {
                e.nums.sample(window, now_ms);
                e.size.sample(window, now_ms);
            }
            for e in &self.groups {
                e.nums.sample(window, now_ms);
                e.size.sample(window, now_ms);
            }
        }
    }

    fn new_topic(&self, topic: &str) -> TopicStats {
        let now = self.last_tick_ms.load(Ordering::Relaxed);
        let counters = (!is_retry_or_dlq(topic)).then(|| {
            let label = self.series_label(&self.topic_series, MAX_TOPIC_SERIES, topic);
            let is_system = is_system_topic(topic).to_string();
            MessageType::ALL.map(|kind| {
                let l = &self.labels;
                let labels = [
                    ("cluster", l.cluster.clone()),
                    ("node_type", "broker".to_owned()),
                    ("node_id", l.node_id.clone()),
                    ("topic", label.clone()),
                    ("message_type", kind.as_str().to_owned()),
                    ("is_system", is_system.clone()),
                ];
                (
                    counter!("rocketmq_messages_in_total", &labels),
                    counter!("rocketmq_throughput_in_total", &labels),
                )
            })
        });
        TopicStats {
            nums: StatsItem::new(now),
            size: StatsItem::new(now),
            counters,
        }
    }

    fn new_group(&self, group: &str, topic: &str) -> GroupStats {
        let now = self.last_tick_ms.load(Ordering::Relaxed);
        let counters = (!is_retry_or_dlq(topic)).then(|| {
            let over = self.group_series.fetch_add(1, Ordering::Relaxed) >= MAX_GROUP_SERIES;
            if over {
                self.warn_series("(topic, consumer_group)", MAX_GROUP_SERIES);
            }
            let pick = |v: &str| {
                if over {
                    OVERFLOW.to_owned()
                } else {
                    v.to_owned()
                }
            };
            let l = &self.labels;
            let labels = [
                ("cluster", l.cluster.clone()),
                ("node_type", "broker".to_owned()),
                ("node_id", l.node_id.clone()),
                ("topic", pick(topic)),
                ("consumer_group", pick(group)),
                (
                    "is_system",
                    (is_system_topic(topic) || is_system_group(group)).to_string(),
                ),
            ];
            (
                counter!("rocketmq_messages_out_total", &labels),
                counter!("rocketmq_throughput_out_total", &labels),
            )
        });
        GroupStats {
            nums: StatsItem::new(now),
            size: StatsItem::new(now),
            pulled: DashMap::new(),
            counters,
        }
    }

    /// `value` while fewer than `limit` series were handed out by `count`,
    /// else [`OVERFLOW`] (logged once).
    fn series_label(&self, count: &AtomicUsize, limit: usize, value: &str) -> String {
        if count.fetch_add(1, Ordering::Relaxed) < limit {
            value.to_owned()
        } else {
            self.warn_series("topic", limit);
            OVERFLOW.to_owned()
        }
    }

    fn warn_series(&self, what: &str, limit: usize) {
        if !self.series_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                what,
                limit,
                "more label sets than the metrics keep: the rest are counted under {OVERFLOW}"
            );
        }
    }
}

#[cfg(test)]
mod tests;
