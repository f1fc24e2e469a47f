//! The push consumer: owns a share of each subscribed topic's queues,
//! long-polls them and hands messages to a handler.

use std::{
    collections::HashMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use message_model::{flags::retry_topic, tag_hash};
use remoting_net::CancellationToken;
use remoting_net::{ClientOptions, ServerRequests};
use remoting_protocol::body::{ConsumerData, HeartbeatData, SubscriptionData};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use tokio::{
    sync::{Notify, Semaphore},
    task::JoinHandle,
};

use crate::{
    api::Api,
    consume_pool::BatchQueue,
    handler::MessageHandler,
    local_offsets::LocalOffsets,
    orderly::OrderlyQueue,
    process_queue::ProcessQueue,
    stats::{ConsumerStats, Counters},
    ConsumerConfig, ConsumerError, MessageQueue,
};

mod rebalance;

use rebalance::rebalance_loop;

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
    /// Broadcasting: where this member keeps its offsets.
    local: Option<LocalOffsets>,
    /// Broadcasting: the offsets found in that file at start.
    stored: HashMap<MessageQueue, u64>,
    owned: Mutex<HashMap<MessageQueue, Owned>>,
    /// Each topic's queues at the last route lookup.
    routes: Mutex<HashMap<String, Vec<MessageQueue>>>,
    /// Consumed (committable) offsets of owned queues.
    offsets: Mutex<HashMap<MessageQueue, u64>>,
    /// Held while offsets are sent, so that a periodic persist never sends
    /// a released queue's offset after the release committed it.
    offset_sends: tokio::sync::Mutex<()>,
    pub(crate) counters: Counters,
    /// Woken by a broker's `NOTIFY_CONSUMER_IDS_CHANGED`: rebalance now.
    rebalance_now: Arc<Notify>,
    pub(crate) pool: Arc<Semaphore>,
    /// Batches waiting for a handler call, and the workers that make them.
    pub(crate) batches: BatchQueue,
    pub(crate) stop: CancellationToken,
    /// Cleared by the first `shutdown`.
    running: AtomicBool,
}

#[derive(Debug)]
struct Owned {
    pq: Arc<ProcessQueue>,
    stop: CancellationToken,
    task: JoinHandle<()>,
    /// Orderly consumption: the queue's lock and messages, and its consume
    /// task.
    orderly: Option<(Arc<OrderlyQueue>, JoinHandle<()>)>,
}

/// How long a released orderly queue waits for its running handler before
/// it is unlocked anyway is bounded; past this the broker's lock expiry
/// (60 s) frees it (RocketMQ's `UNLOCK_DELAY_TIME_MILLS`).
const UNLOCK_WAIT: Duration = Duration::from_secs(20);

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
            if config.is_broadcasting() {
                // A stable id, so that the local offsets are found again
                // after a restart (RocketMQ's `DEFAULT`).
                "DEFAULT".to_owned()
            } else {
                format!(
                    "{}#{}",
                    std::process::id(),
                    INSTANCE.fetch_add(1, Ordering::Relaxed)
                )
            }
        });
        let ip = local_ip(config.namesrv_addr.first().map_or("", String::as_str));
        let client_id = format!("{ip}@{instance}");
        // Failed messages come back through the group's retry topic, which
        // every member subscribes to, as RocketMQ's clients do; broadcasting
        // consumers have none.
        let retry_topic = retry_topic(&config.consumer_group);
        if !config.is_broadcasting() {
            config
                .subscription
                .entry(retry_topic.clone())
                .or_insert_with(|| "*".to_owned());
        }
        let local = config.is_broadcasting().then(|| {
            LocalOffsets::new(
                &config.local_offsets_dir(),
                &client_id,
                &config.consumer_group,
            )
        });
        let stored = match &local {
            Some(l) => l.load().map_err(|e| ConsumerError::Config {
                key: "localOffsetStoreDir",
                value: config.local_offsets_dir().display().to_string(),
                allowed: format!("a directory with a readable offsets file: {e}"),
            })?,
            None => HashMap::new(),
        };
        let rebalance_now = Arc::new(Notify::new());
        let options = ClientOptions {
            on_request: Some(membership_notices(
                &config.consumer_group,
                Arc::clone(&rebalance_now),
            )),
            credentials: config.credentials()?,
            tls: config.tls()?,
            ..ClientOptions::default()
        };
        let inner = Arc::new(Inner {
            retry_topic,
            rebalance_now,
            api: Api::with_options(
                config.namesrv_addr.clone(),
                config.mq_client_api_timeout,
                options,
            ),
            client_id,
            local,
            stored,
            owned: Mutex::default(),
            routes: Mutex::default(),
            offsets: Mutex::default(),
            offset_sends: tokio::sync::Mutex::new(()),
            counters: Counters::default(),
            pool: Arc::new(Semaphore::new(config.consume_thread_max)),
            batches: BatchQueue::default(),
            stop: CancellationToken::new(),
            running: AtomicBool::new(true),
            config,
        });
        let handler = Arc::new(handler);
        inner.heartbeat_all().await;
        inner.rebalance(&handler, true).await;
        let mut tasks = vec![
            tokio::spawn(rebalance_loop(Arc::clone(&inner), handler)),
            tokio::spawn(every(
                Arc::clone(&inner),
                inner.config.heartbeat_broker_interval,
                |i| async move { i.heartbeat_all().await },
            )),
            tokio::spawn(every(
                Arc::clone(&inner),
                inner.config.persist_consumer_offset_interval,
                // An orderly queue's next owner reads this offset once the
                // lock moves: wait for each answer, so none lands late.
                |i| async move { i.persist_offsets(i.config.consume_orderly).await },
            )),
        ];
        if inner.config.consume_orderly {
            tasks.push(tokio::spawn(every(
                Arc::clone(&inner),
                inner.config.rebalance_lock_interval,
                |i| async move { i.lock_all().await },
            )));
        }
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
        let mut locked = Vec::new();
        for (mq, o) in owned {
            if let Some((_, consume)) = o.orderly {
                // Its last handler call records its offset first; a queue
                // whose handler is still running stays locked until the
                // broker expires the lock.
                let limit = inner.config.await_termination_when_shutdown;
                if tokio::time::timeout(limit, consume).await.is_ok() {
                    locked.push(mq);
                }
            }
            o.pq.drop_queue();
            let _ = o.task.await;
        }
        inner.persist_offsets(true).await;
        lock(&inner.offsets).clear();
        inner.unlock(&locked).await;
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
        match offsets.get_mut(mq) {
            Some(e) => *e = (*e).max(offset),
            None => {
                offsets.insert(mq.clone(), offset);
            }
        }
    }

    /// Sends a failed message back to the broker of its queue, to come
    /// back later through the retry topic.
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
                0,
                self.config.effective_max_reconsume_times(),
            )
            .await
    }

    /// Sends a message that failed too often straight to the dead-letter
    /// topic.
    pub(crate) async fn give_up(
        &self,
        mq: &MessageQueue,
        msg: &crate::MessageExt,
    ) -> Result<(), ConsumerError> {
        tracing::warn!(queue = %mq, offset = msg.queue_offset, reconsume_times = msg.reconsume_times, "message failed too often; sent to the dead-letter topic");
        self.api
            .send_back(
                &mq.broker_name,
                &self.config.consumer_group,
                msg,
                -1,
                self.config.effective_max_reconsume_times(),
            )
            .await
    }

    pub(crate) fn consumed_offset(&self, mq: &MessageQueue) -> Option<u64> {
        lock(&self.offsets).get(mq).copied()
    }

    /// Sends every consumed offset: oneway, or waiting for each answer.
    async fn persist_offsets(&self, wait: bool) {
        let _sending = self.offset_sends.lock().await;
        let offsets: Vec<(MessageQueue, u64)> = lock(&self.offsets)
            .iter()
            .map(|(q, o)| (q.clone(), *o))
            .collect();
        if self.local.is_some() {
            self.save_local(offsets.into_iter().collect()).await;
            return;
        }
        for (mq, offset) in offsets {
            self.send_offset(&mq, offset, wait).await;
        }
    }

    /// Broadcasting: writes offsets to the local file (off the runtime).
    async fn save_local(&self, offsets: HashMap<MessageQueue, u64>) {
        let Some(local) = self.local.clone() else {
            return;
        };
        if offsets.is_empty() {
            return;
        }
        match tokio::task::spawn_blocking(move || local.save(&offsets)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(cause = %e, "cannot write local offsets"),
            Err(e) => tracing::warn!(cause = %e, "local offsets writer failed"),
        }
    }

    /// Broadcasting: the offset found in the local file at start.
    pub(crate) fn stored_offset(&self, mq: &MessageQueue) -> Option<u64> {
        self.stored.get(mq).copied()
    }

    /// Whether every member gets every message.
    pub(crate) fn is_broadcasting(&self) -> bool {
        self.local.is_some()
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
                message_model: self.config.message_model.as_str().to_owned(),
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
}

/// Serves the brokers' requests to this consumer: a
/// `NOTIFY_CONSUMER_IDS_CHANGED` for its group wakes the rebalancing task;
/// anything else is answered `REQUEST_CODE_NOT_SUPPORTED`.
fn membership_notices(group: &str, rebalance_now: Arc<Notify>) -> ServerRequests {
    let group = group.to_owned();
    ServerRequests(Arc::new(move |broker: &str, req: &RemotingCommand| {
        if req.request_code() == RequestCode::NOTIFY_CONSUMER_IDS_CHANGED {
            if req.ext("consumerGroup") == Some(group.as_str()) {
                tracing::debug!(broker, group = %group, "group membership changed; rebalancing");
                rebalance_now.notify_one();
            }
            return None;
        }
        Some(req.response_to(
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(" request type {} not supported", req.code)),
        ))
    }))
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
