//! One statistic as RocketMQ's `StatsItem` keeps it: a counter and the
//! number of calls that added to it, snapshotted into three rings (every
//! 10 s keeping 7 for the minute, every 10 min keeping 7 for the hour,
//! every hour keeping 25 for the day). A window's figures run from its
//! oldest snapshot to now: `sum` is the counter's increase, `tps` that per
//! second, `avgpt` that per call.
//!
//! Adding is two relaxed atomic additions; only the snapshots take a lock,
//! and only the housekeeping thread and admin requests take it.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex, PoisonError,
    },
};

use remoting_protocol::body::{BrokerStatsData, BrokerStatsItem};

/// One of a statistic's three windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last minute.
    Minute,
    /// The last hour.
    Hour,
    /// The last day.
    Day,
}

impl Window {
    /// Every window, in the order of the rings.
    pub const ALL: [Window; 3] = [Window::Minute, Window::Hour, Window::Day];

    /// How often the window is snapshotted (ms).
    pub const fn every_ms(self) -> i64 {
        match self {
            Window::Minute => 10_000,
            Window::Hour => 600_000,
            Window::Day => 3_600_000,
        }
    }

    /// How many snapshots the window keeps.
    const fn keep(self) -> usize {
        match self {
            Window::Minute | Window::Hour => 7,
            Window::Day => 25,
        }
    }

    const fn index(self) -> usize {
        match self {
            Window::Minute => 0,
            Window::Hour => 1,
            Window::Day => 2,
        }
    }
}

/// The counter and its call count at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    at_ms: i64,
    value: u64,
    times: u64,
}

/// A counter with its call count and snapshots.
#[derive(Debug)]
pub struct StatsItem {
    value: AtomicU64,
    times: AtomicU64,
    rings: Mutex<[VecDeque<Snapshot>; 3]>,
}

impl StatsItem {
    /// A counter at 0, each window starting at `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        let start = Snapshot {
            at_ms: now_ms,
            value: 0,
            times: 0,
        };
        let ring = |w: Window| {
            let mut r = VecDeque::with_capacity(w.keep() + 1);
            r.push_back(start);
            r
        };
        Self {
            value: AtomicU64::new(0),
            times: AtomicU64::new(0),
            rings: Mutex::new(Window::ALL.map(ring)),
        }
    }

    /// Adds `value` counted over `times` calls.
    pub fn add(&self, value: u64, times: u64) {
        self.value.fetch_add(value, Ordering::Relaxed);
        if times > 0 {
            self.times.fetch_add(times, Ordering::Relaxed);
        }
    }

    /// The counter's total.
    pub fn value(&self) -> u64 {
        self.value.load(Ordering::Relaxed)
    }

    /// Snapshots the counter into `window`'s ring, dropping the oldest past
    /// what the window keeps.
    pub fn sample(&self, window: Window, now_ms: i64) {
        let snapshot = Snapshot {
            at_ms: now_ms,
            value: self.value(),
            times: self.times.load(Ordering::Relaxed),
        };
        let mut rings = self.rings.lock().unwrap_or_else(PoisonError::into_inner);
        let ring = &mut rings[window.index()];
        ring.push_back(snapshot);
        while ring.len() > window.keep() {
            ring.pop_front();
        }
    }

    /// The figures of `window` from its oldest snapshot to `now_ms`.
    pub fn compute(&self, window: Window, now_ms: i64) -> BrokerStatsItem {
        let value = self.value();
        let times = self.times.load(Ordering::Relaxed);
        let rings = self.rings.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(first) = rings[window.index()].front().copied() else {
            return BrokerStatsItem::default();
        };
        drop(rings);
        let sum = value.saturating_sub(first.value);
        let elapsed = now_ms.saturating_sub(first.at_ms);
        let calls = times.saturating_sub(first.times);
        BrokerStatsItem {
            sum: i64::try_from(sum).unwrap_or(i64::MAX),
            tps: if elapsed > 0 {
                sum as f64 * 1000.0 / elapsed as f64
            } else {
                0.0
            },
            avgpt: if calls > 0 {
                sum as f64 / calls as f64
            } else {
                0.0
            },
        }
    }

    /// The three windows at `now_ms`, as `VIEW_BROKER_STATS_DATA` answers.
    pub fn data(&self, now_ms: i64) -> BrokerStatsData {
        BrokerStatsData {
            stats_minute: self.compute(Window::Minute, now_ms),
            stats_hour: self.compute(Window::Hour, now_ms),
            stats_day: self.compute(Window::Day, now_ms),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_runs_from_its_oldest_snapshot_to_now() {
        let item = StatsItem::new(0);
        item.add(30, 3);
        let m = item.compute(Window::Minute, 10_000);
        assert_eq!(m.sum, 30);
        assert!((m.tps - 3.0).abs() < 1e-9, "{m:?}");
        assert!((m.avgpt - 10.0).abs() < 1e-9, "{m:?}");
        // Nothing elapsed: no rate, and no division by zero.
        assert_eq!(StatsItem::new(5).compute(Window::Minute, 5).tps, 0.0);
    }

    #[test]
    fn the_minute_keeps_seven_snapshots_ten_seconds_apart() {
        let item = StatsItem::new(0);
        for tick in 1..=12i64 {
            item.add(10, 1);
            item.sample(Window::Minute, tick * 10_000);
        }
        // Snapshots at 60 s .. 120 s are kept; the counts before 60 s are out.
        let m = item.compute(Window::Minute, 120_000);
        assert_eq!(m.sum, 60);
        assert!((m.tps - 1.0).abs() < 1e-9, "{m:?}");
        // The hour was never snapshotted: it still starts at 0.
        let h = item.compute(Window::Hour, 120_000);
        assert_eq!(h.sum, 120);
        assert!((h.tps - 1.0).abs() < 1e-9, "{h:?}");
        assert_eq!(item.value(), 120);
    }

    #[test]
    fn the_day_keeps_twenty_five_hourly_snapshots() {
        let item = StatsItem::new(0);
        for hour in 1..=30i64 {
            item.add(1, 0);
            item.sample(Window::Day, hour * 3_600_000);
        }
        let d = item.data(30 * 3_600_000).stats_day;
        assert_eq!(d.sum, 24, "snapshots of hours 6..=30");
        assert_eq!(d.avgpt, 0.0, "no calls counted");
    }
}
