//! Latency fault tolerance (RocketMQ's `MQFaultStrategy` and
//! `LatencyFaultToleranceImpl`, HEAD values): a broker that answered slowly
//! or failed is avoided for a while that grows with its latency.
//!
//! Pure bookkeeping: callers pass the current instant.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

/// Latency thresholds (ms), ascending (RocketMQ ≥ 5.1.4).
const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1800, 3000, 5000, 15000];
/// How long a broker is avoided (ms) once its latency reaches the threshold
/// at the same index.
const NOT_AVAILABLE_MS: [u64; 7] = [0, 0, 2000, 5000, 6000, 10000, 30000];
/// The latency charged for a failure: it maps to 10 s of isolation.
const ISOLATION_LATENCY_MS: u64 = 10_000;

/// How long a broker is avoided after an answer that took `latency_ms`:
/// the duration of the largest threshold the latency reaches.
pub(crate) fn not_available_duration(latency_ms: u64) -> Duration {
    let ms = LATENCY_MAX_MS
        .iter()
        .zip(NOT_AVAILABLE_MS)
        .rev()
        .find(|(max, _)| latency_ms >= **max)
        .map_or(0, |(_, d)| d);
    Duration::from_millis(ms)
}

#[derive(Debug, Clone, Copy)]
struct FaultItem {
    available_at: Instant,
    reachable: bool,
}

/// Per broker name: when it becomes available again and whether the last
/// attempt reached it.
#[derive(Debug, Default)]
pub(crate) struct FaultTable {
    items: Mutex<HashMap<String, FaultItem>>,
}

impl FaultTable {
    /// Records an attempt's outcome. A failure (`isolation`) counts as a
    /// 10 s latency.
    pub(crate) fn update(
        &self,
        broker: &str,
        latency: Duration,
        isolation: bool,
        reachable: bool,
        now: Instant,
    ) {
        let latency_ms = if isolation {
            ISOLATION_LATENCY_MS
        } else {
            u64::try_from(latency.as_millis()).unwrap_or(u64::MAX)
        };
        let item = FaultItem {
            available_at: now + not_available_duration(latency_ms),
            reachable,
        };
        self.items
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(broker.to_owned(), item);
    }

    /// Reports whether the broker is outside its fault window.
    pub(crate) fn is_available(&self, broker: &str, now: Instant) -> bool {
        self.items
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(broker)
            .is_none_or(|i| now >= i.available_at)
    }

    /// Reports whether the last attempt on the broker reached it.
    pub(crate) fn is_reachable(&self, broker: &str) -> bool {
        self.items
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(broker)
            .is_none_or(|i| i.reachable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_maps_to_rocketmq_head_durations() {
        for (latency, expected) in [
            (0, 0),
            (49, 0),
            (100, 0),
            (549, 0),
            (550, 2000),
            (1800, 5000),
            (2999, 5000),
            (3000, 6000),
            (5000, 10_000),
            (10_000, 10_000),
            (15_000, 30_000),
            (u64::MAX, 30_000),
        ] {
            assert_eq!(
                not_available_duration(latency),
                Duration::from_millis(expected),
                "{latency} ms"
            );
        }
    }

    #[test]
    fn a_failed_broker_is_isolated_for_ten_seconds() {
        let table = FaultTable::default();
        let t0 = Instant::now();
        table.update("a", Duration::from_millis(3), true, false, t0);
        table.update("b", Duration::from_millis(3), false, true, t0);
        assert!(!table.is_available("a", t0 + Duration::from_millis(9_999)));
        assert!(table.is_available("a", t0 + Duration::from_secs(10)));
        assert!(!table.is_reachable("a"));
        assert!(table.is_available("b", t0) && table.is_reachable("b"));
        assert!(table.is_available("unknown", t0));
    }
}
