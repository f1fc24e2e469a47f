//! Queue locks of orderly consumers (`LOCK_BATCH_MQ`, `UNLOCK_BATCH_MQ`):
//! per group and queue, the client that may consume it, until it lets go or
//! stops renewing the lock for 60 s. Kept in memory only, as RocketMQ
//! does: after a restart clients lock again within their renewal period.

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
    time::{Duration, Instant},
};

use remoting_protocol::body::MessageQueueBody;

/// How long a lock lives without renewal (RocketMQ's
/// `REBALANCE_LOCK_MAX_LIVE_TIME`).
pub const LOCK_MAX_LIVE: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
struct Entry {
    client_id: String,
    renewed: Instant,
}

impl Entry {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.renewed) > LOCK_MAX_LIVE
    }
}

/// The lock table.
#[derive(Debug, Default)]
pub struct RebalanceLocks {
    groups: Mutex<HashMap<String, HashMap<MessageQueueBody, Entry>>>,
}

impl RebalanceLocks {
    /// Locks (or renews) each queue that is free, expired or already the
    /// client's; returns those the client now holds.
    pub fn try_lock_batch(
        &self,
        group: &str,
        client_id: &str,
        queues: &[MessageQueueBody],
        now: Instant,
    ) -> Vec<MessageQueueBody> {
        let mut groups = self.lock();
        let table = groups.entry(group.to_owned()).or_default();
        let mut granted = Vec::new();
        for q in queues {
            match table.get_mut(q) {
                Some(e) if e.client_id == client_id => e.renewed = now,
                Some(e) if !e.expired(now) => continue,
                Some(e) => {
                    tracing::info!(group, topic = %q.topic, queue_id = q.queue_id, from = %e.client_id, to = client_id, "expired queue lock taken over");
                    *e = Entry {
                        client_id: client_id.to_owned(),
                        renewed: now,
                    };
                }
                None => {
                    table.insert(
                        q.clone(),
                        Entry {
                            client_id: client_id.to_owned(),
                            renewed: now,
                        },
                    );
                }
            }
            granted.push(q.clone());
        }
        granted
    }

    /// Releases the queues the client holds; others are left alone.
    pub fn unlock_batch(&self, group: &str, client_id: &str, queues: &[MessageQueueBody]) {
        let mut groups = self.lock();
        if let Some(table) = groups.get_mut(group) {
            for q in queues {
                if table.get(q).is_some_and(|e| e.client_id == client_id) {
                    table.remove(q);
                }
            }
            if table.is_empty() {
                groups.remove(group);
            }
        }
    }

    /// Whether the group holds no lock that is still alive (a group with an
    /// alive lock consumes in order, so its failed messages go straight to
    /// the dead-letter topic).
    pub fn is_lock_all_expired(&self, group: &str, now: Instant) -> bool {
        self.lock()
            .get(group)
            .is_none_or(|t| t.values().all(|e| e.expired(now)))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, HashMap<MessageQueueBody, Entry>>> {
        self.groups.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: i32) -> MessageQueueBody {
        MessageQueueBody {
            topic: "T".into(),
            broker_name: "b".into(),
            queue_id: id,
        }
    }

    #[test]
    fn a_queue_is_held_by_one_client_until_released_or_expired() {
        let locks = RebalanceLocks::default();
        let t0 = Instant::now();
        assert!(locks.is_lock_all_expired("G", t0));
        assert_eq!(
            locks.try_lock_batch("G", "a", &[q(0), q(1)], t0),
            [q(0), q(1)]
        );
        assert!(!locks.is_lock_all_expired("G", t0));
        // b gets only the free one; a renews its own.
        assert_eq!(locks.try_lock_batch("G", "b", &[q(1), q(2)], t0), [q(2)]);
        let later = t0 + Duration::from_secs(30);
        assert_eq!(locks.try_lock_batch("G", "a", &[q(0)], later), [q(0)]);
        // b cannot release a's lock; a can.
        locks.unlock_batch("G", "b", &[q(1)]);
        assert!(locks.try_lock_batch("G", "b", &[q(1)], later).is_empty());
        locks.unlock_batch("G", "a", &[q(1)]);
        assert_eq!(locks.try_lock_batch("G", "b", &[q(1)], later), [q(1)]);
        // a's q(0) was renewed at 30 s: alive at 80 s, expired at 91 s.
        let at = |s| t0 + Duration::from_secs(s);
        assert!(locks.try_lock_batch("G", "b", &[q(0)], at(80)).is_empty());
        assert_eq!(locks.try_lock_batch("G", "b", &[q(0)], at(91)), [q(0)]);
        assert!(locks.is_lock_all_expired("G", at(200)));
        assert!(locks.is_lock_all_expired("Other", t0));
    }
}
