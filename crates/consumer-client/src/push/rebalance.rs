//! Rebalancing of a push consumer: which queues this member owns, taking
//! and releasing them (with their orderly locks), and the loop that
//! checks membership.

use std::{collections::HashMap, sync::Arc, time::Instant};

use super::{lock, Inner, Owned, UNLOCK_WAIT};
use crate::{
    allocate::allocate_averagely,
    handler::MessageHandler,
    orderly::{self, OrderlyQueue},
    process_queue::ProcessQueue,
    queue_task,
    stats::Counters,
    ConsumerError, MessageQueue,
};

impl Inner {
    /// Reassigns queues when the membership or the queues changed (or
    /// always, when `full`).
    pub(super) async fn rebalance<H: MessageHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        full: bool,
    ) {
        let topics: Vec<String> = self.config.subscription.keys().cloned().collect();
        for topic in topics {
            if let Err(e) = self.rebalance_topic(handler, &topic, full).await {
                tracing::debug!(topic = %topic, cause = %e, "rebalance skipped");
            }
        }
    }

    pub(super) async fn rebalance_topic<H: MessageHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        topic: &str,
        full: bool,
    ) -> Result<(), ConsumerError> {
        let cached = if full {
            None
        } else {
            lock(&self.routes).get(topic).cloned()
        };
        let queues = match cached {
            Some(q) => q,
            None => {
                let q = self.api.topic_queues(topic).await?;
                lock(&self.routes).insert(topic.to_owned(), q.clone());
                q
            }
        };
        if self.is_broadcasting() {
            self.apply(handler, topic, queues).await;
            return Ok(());
        }
        let addr = queues
            .first()
            .map(|q| self.api.broker_addr(&q.broker_name))
            .transpose()?
            .ok_or_else(|| ConsumerError::NoRoute {
                topic: topic.to_owned(),
            })?;
        let mut cids = self
            .api
            .consumer_ids(&addr, &self.config.consumer_group)
            .await
            .unwrap_or_default();
        if !cids.contains(&self.client_id) {
            // The broker forgot us (restart, idle expiry) or has not seen us yet.
            self.heartbeat_all().await;
            cids = self
                .api
                .consumer_ids(&addr, &self.config.consumer_group)
                .await?;
        }
        cids.sort();
        let mine = allocate_averagely(&queues, &cids, &self.client_id);
        self.apply(handler, topic, mine).await;
        Ok(())
    }

    /// Drops the topic's queues not in `mine` (committing their offsets and,
    /// when orderly, unlocking them) and starts pulling the new ones (when
    /// orderly, those whose lock the broker grants).
    pub(super) async fn apply<H: MessageHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        topic: &str,
        mine: Vec<MessageQueue>,
    ) {
        if self.is_stopping() {
            return;
        }
        let candidates: Vec<MessageQueue> = {
            let owned = lock(&self.owned);
            mine.iter()
                .filter(|q| !owned.contains_key(*q))
                .cloned()
                .collect()
        };
        let granted = if self.config.consume_orderly && !candidates.is_empty() {
            self.lock_queues(&candidates).await
        } else {
            candidates
        };
        let (removed, added) = {
            let mut owned = lock(&self.owned);
            if self.is_stopping() {
                return;
            }
            let gone: Vec<MessageQueue> = owned
                .keys()
                .filter(|q| q.topic == topic && !mine.contains(q))
                .cloned()
                .collect();
            let removed: Vec<(MessageQueue, Owned)> = gone
                .into_iter()
                .filter_map(|q| owned.remove(&q).map(|o| (q, o)))
                .collect();
            let mut added = Vec::new();
            for q in granted {
                if owned.contains_key(&q) {
                    continue;
                }
                let owned_queue = self.start_queue(handler, &q);
                added.push(q.clone());
                owned.insert(q, owned_queue);
            }
            (removed, added)
        };
        if removed.is_empty() && added.is_empty() {
            return;
        }
        Counters::add(&self.counters.rebalances, 1);
        for (mq, o) in removed {
            self.release(mq, o).await;
        }
        tracing::info!(topic, client = %self.client_id, added = ?added, "rebalanced");
    }

    /// Starts pulling (and, when orderly, consuming) a queue just taken.
    pub(super) fn start_queue<H: MessageHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        q: &MessageQueue,
    ) -> Owned {
        let pq = Arc::new(ProcessQueue::default());
        let stop = self.stop.child_token();
        let oq = self.config.consume_orderly.then(|| {
            let oq = Arc::new(OrderlyQueue::default());
            oq.locked(Instant::now());
            oq
        });
        let task = tokio::spawn(queue_task::run(
            Arc::clone(self),
            Arc::clone(handler),
            q.clone(),
            Arc::clone(&pq),
            oq.clone(),
            stop.clone(),
        ));
        let orderly = oq.map(|oq| {
            let consume = tokio::spawn(orderly::run(
                Arc::clone(self),
                Arc::clone(handler),
                q.clone(),
                Arc::clone(&pq),
                Arc::clone(&oq),
                stop.clone(),
            ));
            (oq, consume)
        });
        Owned {
            pq,
            stop,
            task,
            orderly,
        }
    }

    /// Stops a released queue, commits its offset and, when orderly and
    /// its handler finished in time, unlocks it.
    pub(super) async fn release(&self, mq: MessageQueue, o: Owned) {
        o.stop.cancel();
        // An orderly queue's last handler call may still record its offset:
        // nobody else can take the queue before it is unlocked below.
        let finished = match o.orderly {
            Some((_, consume)) => tokio::time::timeout(UNLOCK_WAIT, consume).await.is_ok(),
            None => true,
        };
        o.pq.drop_queue();
        let _ = o.task.await;
        {
            let _sending = self.offset_sends.lock().await;
            // After `drop_queue`, so no handler can put the offset back.
            let offset = lock(&self.offsets).remove(&mq);
            if let Some(offset) = offset {
                if self.is_broadcasting() {
                    self.save_local(HashMap::from([(mq.clone(), offset)])).await;
                } else {
                    self.send_offset(&mq, offset, true).await;
                }
            }
        }
        if self.config.consume_orderly {
            if finished {
                self.unlock(std::slice::from_ref(&mq)).await;
            } else {
                tracing::warn!(queue = %mq, "handler still running after 20 s; the queue stays locked until the broker expires the lock");
            }
        }
        tracing::info!(queue = %mq, "queue released by rebalance");
    }

    /// Locks queues on their brokers; returns those granted.
    pub(super) async fn lock_queues(&self, queues: &[MessageQueue]) -> Vec<MessageQueue> {
        let mut by_broker: HashMap<&str, Vec<MessageQueue>> = HashMap::new();
        for q in queues {
            by_broker.entry(&q.broker_name).or_default().push(q.clone());
        }
        let mut granted = Vec::new();
        for (broker, qs) in by_broker {
            match self
                .api
                .lock_batch(broker, &self.config.consumer_group, &self.client_id, &qs)
                .await
            {
                Ok(g) => granted.extend(g),
                Err(e) => tracing::warn!(broker, cause = %e, "cannot lock queues"),
            }
        }
        granted
    }

    /// Gives queue locks back (errors only logged: the broker expires them).
    pub(super) async fn unlock(&self, queues: &[MessageQueue]) {
        let mut by_broker: HashMap<&str, Vec<MessageQueue>> = HashMap::new();
        for q in queues {
            by_broker.entry(&q.broker_name).or_default().push(q.clone());
        }
        for (broker, qs) in by_broker {
            if let Err(e) = self
                .api
                .unlock_batch(broker, &self.config.consumer_group, &self.client_id, &qs)
                .await
            {
                tracing::debug!(broker, cause = %e, "cannot unlock queues");
            }
        }
    }

    /// Renews the locks of every owned orderly queue; a queue whose lock
    /// was not renewed stops being pulled and handled until it is.
    pub(super) async fn lock_all(&self) {
        let queues: Vec<(MessageQueue, Arc<OrderlyQueue>)> = lock(&self.owned)
            .iter()
            .filter_map(|(q, o)| {
                o.orderly
                    .as_ref()
                    .map(|(oq, _)| (q.clone(), Arc::clone(oq)))
            })
            .collect();
        if queues.is_empty() {
            return;
        }
        let names: Vec<MessageQueue> = queues.iter().map(|(q, _)| q.clone()).collect();
        let granted = self.lock_queues(&names).await;
        let now = Instant::now();
        for (q, oq) in queues {
            if granted.contains(&q) {
                oq.locked(now);
            } else {
                tracing::warn!(queue = %q, "queue lock not renewed; handling paused");
                oq.lost();
            }
        }
    }
}

/// Checks membership every `membership_check_interval`, and at once when a
/// broker says the group changed, and rebalances when it changed;
/// rebalances unconditionally every `rebalance_interval`.
pub(super) async fn rebalance_loop<H: MessageHandler>(inner: Arc<Inner>, handler: Arc<H>) {
    let mut last_full = Instant::now();
    loop {
        let notified = tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tokio::time::sleep(inner.config.membership_check_interval) => false,
            () = inner.rebalance_now.notified() => true,
        };
        if notified {
            Counters::add(&inner.counters.membership_notices, 1);
        }
        let full = last_full.elapsed() >= inner.config.rebalance_interval;
        if full {
            last_full = Instant::now();
        }
        inner.rebalance(&handler, full).await;
    }
}
