//! The push consumer: owns a share of each subscribed topic's queues,
//! long-polls them and hands messages to a handler.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use message_model::{flags::retry_topic, tag_hash};
use remoting_net::CancellationToken;
use remoting_protocol::body::{ConsumerData, HeartbeatData, SubscriptionData};
use tokio::{sync::Semaphore, task::JoinHandle};

use crate::{
    allocate::allocate_averagely,
    api::Api,
    handler::MessageHandler,
    process_queue::ProcessQueue,
    queue_task,
    stats::{ConsumerStats, Counters},
    ConsumerConfig, ConsumerError, MessageQueue,
};

/// A clustering-mode push consumer.
///
/// Every member of a group owns a share of each subscribed topic's queues
/// (RocketMQ's average allocation over the sorted member and queue lists),
/// long-polls each owned queue and hands what it pulls to the handler. See
/// the crate docs for the delivery guarantee.
#[derive(Debug)]
pub struct PushConsumer {
    inner: Arc<Inner>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: ConsumerConfig,
    /// `%RETRY%<group>`, subscribed with `*` besides the configured topics.
    pub(crate) retry_topic: String,
    pub(crate) api: Api,
    pub(crate) client_id: String,
    owned: Mutex<HashMap<MessageQueue, Owned>>,
    /// Each topic's queues at the last route lookup.
    routes: Mutex<HashMap<String, Vec<MessageQueue>>>,
    /// Consumed (committable) offsets of owned queues.
    offsets: Mutex<HashMap<MessageQueue, u64>>,
    pub(crate) counters: Counters,
    pub(crate) pool: Arc<Semaphore>,
    pub(crate) stop: CancellationToken,
    /// Cleared by the first `shutdown`.
    running: AtomicBool,
}

#[derive(Debug)]
struct Owned {
    pq: Arc<ProcessQueue>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

static INSTANCE: AtomicU64 = AtomicU64::new(0);

impl PushConsumer {
    /// Checks the configuration and starts consuming its subscriptions:
    /// looks up routes, sends a heartbeat, takes this member's share of the
    /// queues, then keeps heartbeats, rebalancing and offset persistence
    /// going in the background.
    ///
    /// # Errors
    /// [`ConsumerError::Config`], also for a configuration without a
    /// subscription. A topic without a route is not an error: it is looked
    /// up again at every rebalance.
    pub async fn start<H: MessageHandler>(
        mut config: ConsumerConfig,
        handler: H,
    ) -> Result<Self, ConsumerError> {
        config.validate()?;
        if config.subscription.is_empty() {
            return Err(ConsumerError::Config {
                key: "subscription",
                value: "{}".to_owned(),
                allowed: "at least one topic with its tag expression".to_owned(),
            });
        }
        let instance = config.instance_name.clone().unwrap_or_else(|| {
            format!(
                "{}#{}",
                std::process::id(),
                INSTANCE.fetch_add(1, Ordering::Relaxed)
            )
        });
        let ip = local_ip(config.namesrv_addr.first().map_or("", String::as_str));
        // Failed messages come back through the group's retry topic, which
        // every member subscribes to, as RocketMQ's clients do.
        let retry_topic = retry_topic(&config.consumer_group);
        config
            .subscription
            .entry(retry_topic.clone())
            .or_insert_with(|| "*".to_owned());
        let inner = Arc::new(Inner {
            retry_topic,
            api: Api::new(config.namesrv_addr.clone(), config.mq_client_api_timeout),
            client_id: format!("{ip}@{instance}"),
            owned: Mutex::default(),
            routes: Mutex::default(),
            offsets: Mutex::default(),
            counters: Counters::default(),
            pool: Arc::new(Semaphore::new(config.consume_thread_max)),
            stop: CancellationToken::new(),
            running: AtomicBool::new(true),
            config,
        });
        let handler = Arc::new(handler);
        inner.heartbeat_all().await;
        inner.rebalance(&handler, true).await;
        let tasks = vec![
            tokio::spawn(rebalance_loop(Arc::clone(&inner), handler)),
            tokio::spawn(every(
                Arc::clone(&inner),
                inner.config.heartbeat_broker_interval,
                |i| async move { i.heartbeat_all().await },
            )),
            tokio::spawn(every(
                Arc::clone(&inner),
                inner.config.persist_consumer_offset_interval,
                |i| async move { i.persist_offsets(false).await },
            )),
        ];
        tracing::info!(group = %inner.config.consumer_group, client = %inner.client_id, "push consumer started");
        Ok(Self {
            inner,
            tasks: Mutex::new(tasks),
        })
    }

    /// This consumer's id in its group (`ip@instance`).
    pub fn client_id(&self) -> &str {
        &self.inner.client_id
    }

    /// Counters since the start.
    pub fn stats(&self) -> ConsumerStats {
        self.inner.counters.snapshot()
    }

    /// The queues this consumer owns now, sorted.
    pub fn owned_queues(&self) -> Vec<MessageQueue> {
        let mut qs: Vec<MessageQueue> = lock(&self.inner.owned).keys().cloned().collect();
        qs.sort();
        qs
    }

    /// Stops: ends pulling, waits (up to `shutdown_timeout`) for running
    /// handlers, commits the consumed offsets to the brokers, unregisters
    /// from them and closes the connections. Messages pulled but not yet
    /// handled are left to whoever owns their queue next.
    pub async fn shutdown(&self) {
        if !self.inner.running.swap(false, Ordering::AcqRel) {
            return;
        }
        let inner = &self.inner;
        inner.stop.cancel();
        let tasks: Vec<JoinHandle<()>> = lock(&self.tasks).drain(..).collect();
        for t in tasks {
            let _ = t.await;
        }
        let owned: Vec<(MessageQueue, Owned)> = lock(&inner.owned).drain().collect();
        for (_, o) in &owned {
            o.stop.cancel();
        }
        let permits = u32::try_from(inner.config.consume_thread_max).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout(
            inner.config.await_termination_when_shutdown,
            inner.pool.acquire_many(permits),
        )
        .await;
        if drained.is_err() {
            tracing::warn!(group = %inner.config.consumer_group, "handlers still running at shutdown; their messages will be redelivered");
        }
        for (_, o) in owned {
            o.pq.drop_queue();
            let _ = o.task.await;
        }
        inner.persist_offsets(true).await;
        lock(&inner.offsets).clear();
        for addr in inner.api.broker_addrs() {
            if let Err(e) = inner
                .api
                .unregister(&addr, &inner.client_id, &inner.config.consumer_group)
                .await
            {
                tracing::debug!(broker = %addr, cause = %e, "cannot unregister");
            }
        }
        inner.api.close().await;
        tracing::info!(group = %inner.config.consumer_group, client = %inner.client_id, "push consumer stopped");
    }
}

impl Inner {
    pub(crate) fn is_stopping(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// The tag expression of a subscribed topic.
    pub(crate) fn subscription(&self, topic: &str) -> Option<String> {
        self.config.subscription.get(topic).cloned()
    }

    /// Records a consumed offset unless the queue was released; offsets only
    /// move forward. The check runs under the offsets lock, which the
    /// release also takes after marking the queue dropped, so a late handler
    /// cannot resurrect the offset of a queue another consumer now owns.
    pub(crate) fn commit_if_owned(&self, mq: &MessageQueue, pq: &ProcessQueue, offset: u64) {
        let mut offsets = lock(&self.offsets);
        if pq.is_dropped() {
            return;
        }
        let e = offsets.entry(mq.clone()).or_insert(offset);
        *e = (*e).max(offset);
    }

    /// Sends a failed message back to the broker of its queue.
    pub(crate) async fn send_back(
        &self,
        mq: &MessageQueue,
        msg: &crate::MessageExt,
    ) -> Result<(), ConsumerError> {
        self.api
            .send_back(
                &mq.broker_name,
                &self.config.consumer_group,
                msg,
                self.config.effective_max_reconsume_times(),
            )
            .await
    }

    pub(crate) fn consumed_offset(&self, mq: &MessageQueue) -> Option<u64> {
        lock(&self.offsets).get(mq).copied()
    }

    /// Sends every consumed offset: oneway, or waiting for each answer.
    async fn persist_offsets(&self, wait: bool) {
        let offsets: Vec<(MessageQueue, u64)> = lock(&self.offsets)
            .iter()
            .map(|(q, o)| (q.clone(), *o))
            .collect();
        for (mq, offset) in offsets {
            self.send_offset(&mq, offset, wait).await;
        }
    }

    async fn send_offset(&self, mq: &MessageQueue, offset: u64, wait: bool) {
        let group = &self.config.consumer_group;
        if let Err(e) = self.api.update_offset(group, mq, offset, wait).await {
            tracing::warn!(queue = %mq, offset, cause = %e, "cannot commit offset");
        }
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        let now_ms = message_model::now_ms();
        let subscription_data_set = self
            .config
            .subscription
            .iter()
            .map(|(topic, expr)| {
                let tags: Vec<String> = if expr.is_empty() || expr == "*" {
                    Vec::new()
                } else {
                    expr.split("||")
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(str::to_owned)
                        .collect()
                };
                SubscriptionData {
                    class_filter_mode: false,
                    topic: topic.clone(),
                    sub_string: expr.clone(),
                    code_set: tags.iter().map(|t| tag_hash(t) as i32).collect(),
                    tags_set: tags,
                    sub_version: now_ms,
                    expression_type: "TAG".to_owned(),
                }
            })
            .collect();
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: Vec::new(),
            consumer_data_set: vec![ConsumerData {
                group_name: self.config.consumer_group.clone(),
                consume_type: "CONSUME_PASSIVELY".to_owned(),
                message_model: "CLUSTERING".to_owned(),
                consume_from_where: self.config.consume_from_where.as_str().to_owned(),
                subscription_data_set,
                unit_mode: false,
            }],
            heartbeat_fingerprint: 0,
            without_sub: false,
        }
    }

    async fn heartbeat_all(&self) {
        // The retry topic is made by the broker on this very heartbeat.
        let topics: Vec<String> = self
            .config
            .subscription
            .keys()
            .filter(|t| **t != self.retry_topic)
            .cloned()
            .collect();
        if self.api.broker_addrs().is_empty() {
            for t in &topics {
                if let Err(e) = self.api.topic_queues(t).await {
                    tracing::warn!(topic = %t, cause = %e, "no route yet");
                }
            }
        }
        let data = self.heartbeat_data();
        for addr in self.api.broker_addrs() {
            if let Err(e) = self.api.heartbeat(&addr, &data).await {
                tracing::warn!(broker = %addr, cause = %e, "heartbeat failed");
            }
        }
    }

    /// Reassigns queues when the membership or the queues changed (or
    /// always, when `full`).
    async fn rebalance<H: MessageHandler>(self: &Arc<Self>, handler: &Arc<H>, full: bool) {
        let topics: Vec<String> = self.config.subscription.keys().cloned().collect();
        for topic in topics {
            if let Err(e) = self.rebalance_topic(handler, &topic, full).await {
                tracing::debug!(topic = %topic, cause = %e, "rebalance skipped");
            }
        }
    }

    async fn rebalance_topic<H: MessageHandler>(
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

    /// Drops the topic's queues not in `mine` (committing their offsets) and
    /// starts pulling the new ones.
    async fn apply<H: MessageHandler>(
        self: &Arc<Self>,
        handler: &Arc<H>,
        topic: &str,
        mine: Vec<MessageQueue>,
    ) {
        if self.is_stopping() {
            return;
        }
        let (removed, added) = {
            let mut owned = lock(&self.owned);
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
            for q in mine {
                if owned.contains_key(&q) {
                    continue;
                }
                let pq = Arc::new(ProcessQueue::default());
                let stop = self.stop.child_token();
                let task = tokio::spawn(queue_task::run(
                    Arc::clone(self),
                    Arc::clone(handler),
                    q.clone(),
                    Arc::clone(&pq),
                    stop.clone(),
                ));
                added.push(q.clone());
                owned.insert(q, Owned { pq, stop, task });
            }
            (removed, added)
        };
        if removed.is_empty() && added.is_empty() {
            return;
        }
        Counters::add(&self.counters.rebalances, 1);
        for (mq, o) in removed {
            o.stop.cancel();
            o.pq.drop_queue();
            let _ = o.task.await;
            // After `drop_queue`, so no handler can put the offset back.
            let offset = lock(&self.offsets).remove(&mq);
            if let Some(offset) = offset {
                self.send_offset(&mq, offset, true).await;
            }
            tracing::info!(queue = %mq, "queue released by rebalance");
        }
        tracing::info!(topic, client = %self.client_id, added = ?added, "rebalanced");
    }
}

/// Checks membership every `membership_check_interval` and rebalances when it
/// changed; rebalances unconditionally every `rebalance_interval`.
async fn rebalance_loop<H: MessageHandler>(inner: Arc<Inner>, handler: Arc<H>) {
    let mut last_full = Instant::now();
    loop {
        tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tokio::time::sleep(inner.config.membership_check_interval) => {}
        }
        let full = last_full.elapsed() >= inner.config.rebalance_interval;
        if full {
            last_full = Instant::now();
        }
        inner.rebalance(&handler, full).await;
    }
}

/// Runs `f` every `period` until the consumer stops.
async fn every<F, Fut>(inner: Arc<Inner>, period: Duration, f: F)
where
    F: Fn(Arc<Inner>) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        f(Arc::clone(&inner)).await;
    }
}

/// The local address used to reach `peer`, for the client id; no packet is
/// sent. Falls back to the loopback address.
fn local_ip(peer: &str) -> String {
    std::net::UdpSocket::bind("0.0.0.0:0")
        .and_then(|s| {
            s.connect(peer)?;
            s.local_addr()
        })
        .map_or_else(|_| "127.0.0.1".to_owned(), |a| a.ip().to_string())
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
