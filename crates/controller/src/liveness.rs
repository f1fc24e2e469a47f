//! Which brokers are alive, from their heartbeats, and when a master's
//! lease must have run out.
//!
//! Liveness is each controller's own view (brokers beat to every
//! controller); it is not replicated. Leases are granted only by a leader
//! sure of its leadership, and counted here from when the leader received
//! the beat it answered; the master counts its lease from when it sent that
//! beat, so its lease always ends first.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

/// What a heartbeat reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Beat {
    /// The broker's remoting address.
    pub addr: String,
    /// How long it counts as alive without another beat.
    pub timeout: Duration,
    /// The last master epoch its log holds (-1: unknown).
    pub epoch: i32,
    /// Its CommitLog's end (-1: unknown).
    pub max_offset: i64,
    /// Its confirm offset (-1: unknown).
    pub confirm_offset: i64,
    /// Election priority: lower is preferred.
    pub priority: i32,
}

#[derive(Debug, Clone)]
struct Live {
    beat: Beat,
    last: Instant,
    conn: Option<u64>,
}

/// A broker: its group's name and its id.
pub type BrokerKey = (String, u64);

/// Heartbeats by broker, and the leases granted.
#[derive(Debug, Default)]
pub struct Liveness {
    live: HashMap<BrokerKey, Live>,
    /// When the last granted lease's beat was received, per broker; kept
    /// after the broker is declared dead, until the group elects again.
    granted: HashMap<BrokerKey, Instant>,
    /// When this controller last became leader.
    leader_since: Option<Instant>,
}

impl Liveness {
    /// Records a beat received at `now` on connection `conn`.
    pub fn beat(&mut self, key: BrokerKey, beat: Beat, now: Instant, conn: Option<u64>) {
        match self.live.get_mut(&key) {
            Some(live) => {
                // Progress only moves forward: a reordered older beat keeps
                // the newer figures.
                let newer = beat.epoch > live.beat.epoch
                    || (beat.epoch == live.beat.epoch && beat.max_offset >= live.beat.max_offset);
                if newer {
                    live.beat.epoch = beat.epoch;
                    live.beat.max_offset = beat.max_offset;
                    live.beat.confirm_offset = beat.confirm_offset;
                }
                live.beat.addr = beat.addr;
                live.beat.timeout = beat.timeout;
                live.beat.priority = beat.priority;
                live.last = now;
                live.conn = conn;
            }
            None => {
                self.live.insert(
                    key,
                    Live {
                        beat,
                        last: now,
                        conn,
                    },
                );
            }
        }
    }

    /// Whether `key` beat within its timeout before `now`.
    #[must_use]
    pub fn is_alive(&self, key: &BrokerKey, now: Instant) -> bool {
        self.live
            .get(key)
            .is_some_and(|l| now.saturating_duration_since(l.last) <= l.beat.timeout)
    }

    /// The last beat of `key`, if it is known.
    #[must_use]
    pub fn last_beat(&self, key: &BrokerKey) -> Option<&Beat> {
        self.live.get(key).map(|l| &l.beat)
    }

    /// Forgets the brokers whose beats came on `conn`, which closed.
    pub fn connection_closed(&mut self, conn: u64) -> Vec<BrokerKey> {
        let gone: Vec<BrokerKey> = self
            .live
            .iter()
            .filter(|(_, l)| l.conn == Some(conn))
            .map(|(k, _)| k.clone())
            .collect();
        for key in &gone {
            self.live.remove(key);
        }
        gone
    }

    /// Forgets the brokers silent past their timeout at `now`.
    pub fn expire(&mut self, now: Instant) -> Vec<BrokerKey> {
        let gone: Vec<BrokerKey> = self
            .live
            .iter()
            .filter(|(_, l)| now.saturating_duration_since(l.last) > l.beat.timeout)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &gone {
            self.live.remove(key);
        }
        gone
    }

    /// Notes that this controller became leader at `now`: leases granted
    /// by earlier leaders are taken to last until `now` plus a lease.
    pub fn became_leader(&mut self, now: Instant) {
        self.leader_since = Some(now);
    }

    /// Notes that a lease was granted to `key` for a beat received at
    /// `received`.
    pub fn granted(&mut self, key: BrokerKey, received: Instant) {
        self.granted.insert(key, received);
    }

    /// When the lease of master `key` must have run out, with leases
    /// `lease` long: after the last one this leader granted, and after any
    /// an earlier leader may have granted.
    #[must_use]
    pub fn lease_end(&self, key: &BrokerKey, lease: Duration) -> Option<Instant> {
        let since = [self.granted.get(key).copied(), self.leader_since]
            .into_iter()
            .flatten()
            .max()?;
        Some(since + lease)
    }

    /// Forgets the lease of `key` (its group elected another master).
    pub fn forget_lease(&mut self, key: &BrokerKey) {
        self.granted.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn beat(epoch: i32, max_offset: i64) -> Beat {
        Beat {
            addr: "a:1".into(),
            timeout: Duration::from_secs(3),
            epoch,
            max_offset,
            confirm_offset: max_offset,
            priority: i32::MAX,
        }
    }

    #[test]
    fn brokers_live_until_their_timeout_or_their_connection_closes() {
        let t0 = Instant::now();
        let mut l = Liveness::default();
        let b1 = ("b".to_owned(), 1);
        let b2 = ("b".to_owned(), 2);
        l.beat(b1.clone(), beat(1, 100), t0, Some(7));
        l.beat(b2.clone(), beat(1, 50), t0, Some(8));
        assert!(l.is_alive(&b1, t0 + Duration::from_secs(3)));
        assert!(!l.is_alive(&b1, t0 + Duration::from_millis(3001)));
        // An older beat refreshes the time, not the figures.
        l.beat(
            b1.clone(),
            beat(1, 90),
            t0 + Duration::from_secs(1),
            Some(7),
        );
        assert_eq!(l.last_beat(&b1).unwrap().max_offset, 100);
        assert!(l.is_alive(&b1, t0 + Duration::from_millis(3500)));
        assert_eq!(l.connection_closed(8), std::slice::from_ref(&b2));
        assert!(!l.is_alive(&b2, t0));
        assert_eq!(
            l.expire(t0 + Duration::from_secs(5)),
            std::slice::from_ref(&b1)
        );
        assert!(l.last_beat(&b1).is_none());
    }

    #[test]
    fn a_lease_ends_a_lease_after_the_later_of_the_grant_and_the_leadership() {
        let t0 = Instant::now();
        let lease = Duration::from_secs(3);
        let mut l = Liveness::default();
        let m = ("b".to_owned(), 1);
        assert_eq!(l.lease_end(&m, lease), None);
        l.became_leader(t0);
        assert_eq!(l.lease_end(&m, lease), Some(t0 + lease));
        l.granted(m.clone(), t0 + Duration::from_secs(2));
        assert_eq!(l.lease_end(&m, lease), Some(t0 + Duration::from_secs(5)));
        // Declared dead: the lease still counts.
        l.expire(t0 + Duration::from_secs(60));
        assert_eq!(l.lease_end(&m, lease), Some(t0 + Duration::from_secs(5)));
        l.forget_lease(&m);
        assert_eq!(l.lease_end(&m, lease), Some(t0 + lease));
    }
}
