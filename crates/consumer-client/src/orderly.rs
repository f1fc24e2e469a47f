//! Orderly consumption of one queue: the queue is locked on its broker for
//! this client, its pulled messages wait here in offset order, and one
//! task hands them to the handler one batch at a time. A failed batch is
//! retried on the spot after `suspendCurrentQueueTimeMillis`, so nothing
//! after it is handled first; once it reached `maxReconsumeTimes` it goes
//! to the dead-letter topic instead.
//!
//! # Invariants
//! - At most one handler call per queue runs at a time, and none while the
//!   lock is not known to be held (renewed within the last 30 s).
//! - Messages are handed over in offset order; a batch's offsets are only
//!   committed after the handler accepted it.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use remoting_net::CancellationToken;
use tokio::sync::Notify;

use crate::{
    handler::{ConsumeStatus, MessageHandler},
    process_queue::ProcessQueue,
    push::Inner,
    stats::Counters,
    MessageExt, MessageQueue,
};

/// How long this client trusts a lock after the broker granted or renewed
/// it (RocketMQ's client-side `lockMaxLiveTime`).
pub(crate) const LOCK_TRUSTED_FOR: Duration = Duration::from_secs(30);
/// Wait before looking again at a queue whose lock is not held.
const LOCK_WAIT: Duration = Duration::from_millis(100);

/// An orderly queue's messages and lock.
#[derive(Debug, Default)]
pub(crate) struct OrderlyQueue {
    messages: Mutex<BTreeMap<u64, MessageExt>>,
    arrived: Notify,
    locked_at: Mutex<Option<Instant>>,
}

impl OrderlyQueue {
    /// Adds pulled messages and wakes the consume task.
    pub(crate) fn put(&self, msgs: &[MessageExt]) {
        let mut m = lock(&self.messages);
        for msg in msgs {
            m.insert(msg.queue_offset, msg.clone());
        }
        drop(m);
        self.arrived.notify_one();
    }

    /// The lock was granted or renewed at `now`.
    pub(crate) fn locked(&self, now: Instant) {
        *lock(&self.locked_at) = Some(now);
    }

    /// The broker did not renew the lock: stop handling.
    pub(crate) fn lost(&self) {
        *lock(&self.locked_at) = None;
    }

    /// Whether the lock is held as far as this client knows.
    pub(crate) fn is_locked(&self, now: Instant) -> bool {
        lock(&self.locked_at).is_some_and(|at| now.saturating_duration_since(at) < LOCK_TRUSTED_FOR)
    }

    fn first(&self, n: usize) -> Vec<MessageExt> {
        lock(&self.messages).values().take(n).cloned().collect()
    }

    fn forget(&self, offsets: &[u64]) {
        let mut m = lock(&self.messages);
        for o in offsets {
            m.remove(o);
        }
    }

    fn count_failure(&self, offsets: &[u64]) {
        let mut m = lock(&self.messages);
        for o in offsets {
            if let Some(msg) = m.get_mut(o) {
                msg.reconsume_times += 1;
            }
        }
    }
}

/// Hands the queue's messages to the handler, in order, until `stop`
/// fires or the queue is dropped.
pub(crate) async fn run<H: MessageHandler>(
    inner: Arc<Inner>,
    handler: Arc<H>,
    mq: MessageQueue,
    pq: Arc<ProcessQueue>,
    oq: Arc<OrderlyQueue>,
    stop: CancellationToken,
) {
    let cfg = &inner.config;
    let max = cfg.effective_max_reconsume_times();
    loop {
        if stop.is_cancelled() || pq.is_dropped() {
            return;
        }
        let notified = oq.arrived.notified();
        let batch = oq.first(cfg.consume_message_batch_max_size);
        if batch.is_empty() {
            tokio::select! {
                () = stop.cancelled() => return,
                () = notified => {}
            }
            continue;
        }
        if !oq.is_locked(Instant::now()) {
            if pause(&stop, LOCK_WAIT).await {
                return;
            }
            continue;
        }
        let Ok(permit) = inner.pool.acquire().await else {
            return;
        };
        // The lock may have gone, or the queue been released, meanwhile.
        if stop.is_cancelled() || pq.is_dropped() || !oq.is_locked(Instant::now()) {
            continue;
        }
        let status = handler.consume(&batch).await;
        drop(permit);
        let offsets: Vec<u64> = batch.iter().map(|m| m.queue_offset).collect();
        match status {
            ConsumeStatus::Success => {
                Counters::add(&inner.counters.consumed, batch.len());
                finish(&inner, &mq, &pq, &oq, &offsets);
            }
            ConsumeStatus::RetryLater => {
                Counters::add(&inner.counters.retried, batch.len());
                let mut given_up = Vec::new();
                let mut again = Vec::new();
                for m in &batch {
                    if m.reconsume_times >= max && inner.give_up(&mq, m).await.is_ok() {
                        given_up.push(m.queue_offset);
                    } else {
                        again.push(m.queue_offset);
                    }
                }
                Counters::add(&inner.counters.sent_back, given_up.len());
                finish(&inner, &mq, &pq, &oq, &given_up);
                if !again.is_empty() {
                    oq.count_failure(&again);
                    if pause(&stop, cfg.suspend_current_queue_time).await {
                        return;
                    }
                }
            }
        }
    }
}

/// Forgets handled messages and commits what is safe.
fn finish(inner: &Inner, mq: &MessageQueue, pq: &ProcessQueue, oq: &OrderlyQueue, offsets: &[u64]) {
    if offsets.is_empty() {
        return;
    }
    oq.forget(offsets);
    if let Some(commit) = pq.remove(offsets.iter().copied()) {
        inner.commit_if_owned(mq, pq, commit);
    }
}

/// Sleeps unless `stop` fires first; returns whether it fired.
async fn pause(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    fn msg(offset: u64) -> MessageExt {
        MessageExt {
            topic: "T".into(),
            queue_id: 0,
            queue_offset: offset,
            body: Bytes::new(),
            tags: None,
            keys: Vec::new(),
            properties: BTreeMap::new(),
            msg_id: offset.to_string(),
            store_timestamp_ms: 0,
            born_timestamp_ms: 0,
            reconsume_times: 0,
            commit_log_offset: 0,
            store_host: std::net::SocketAddr::from(([127, 0, 0, 1], 10911)),
        }
    }

    #[test]
    fn messages_come_out_in_offset_order_and_failures_are_counted() {
        let oq = OrderlyQueue::default();
        oq.put(&[msg(7), msg(5)]);
        oq.put(&[msg(6)]);
        let first: Vec<u64> = oq.first(2).iter().map(|m| m.queue_offset).collect();
        assert_eq!(first, [5, 6]);
        oq.count_failure(&[5]);
        assert_eq!(oq.first(1)[0].reconsume_times, 1);
        oq.forget(&[5, 6]);
        assert_eq!(oq.first(5).len(), 1);
    }

    #[test]
    fn a_lock_is_trusted_for_thirty_seconds_unless_lost() {
        let oq = OrderlyQueue::default();
        let t0 = Instant::now();
        assert!(!oq.is_locked(t0));
        oq.locked(t0);
        assert!(oq.is_locked(t0 + Duration::from_secs(29)));
        assert!(!oq.is_locked(t0 + Duration::from_secs(31)));
        oq.lost();
        assert!(!oq.is_locked(t0));
    }
}
