//! The broker's shared state: configuration, store, topics, offsets,
//! clients, the queue of each processor family with the fast-failure
//! sweeper's limits, counters and metrics, parked pulls and POP state; and
//! the answer every refused request gets.
//!
//! The processors and the executor use this state; it uses neither.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, PoisonError, RwLock,
    },
    time::{Duration, Instant},
};

use flow_control::{Counters, FastFailure, QuotaUnit, Quotas, Reason, RequestQueue};
use remoting_protocol::{ResponseCode, RETRY_AFTER_MS};
use store::MessageStore;

use crate::{
    clients::ClientRegistry,
    config::BrokerConfig,
    long_polling::PullHold,
    metrics::BrokerMetrics,
    offsets::OffsetManager,
    pop::PopService,
    rebalance_lock::RebalanceLocks,
    request::{Family, Job, PerFamily},
    schedule::ScheduleService,
    subscriptions::SubscriptionGroupManager,
    timer::TimerWheel,
    topics::TopicManager,
};

/// What the broker loads from disk before it starts: the store and the
/// tables kept beside it.
#[derive(Debug)]
pub struct Loaded {
    /// The message store.
    pub store: MessageStore,
    /// Topics.
    pub topics: TopicManager,
    /// Consumer offsets.
    pub offsets: OffsetManager,
    /// Subscription groups.
    pub subscriptions: SubscriptionGroupManager,
    /// POP state.
    pub pop: PopService,
    /// Delay-level delivery and its progress.
    pub schedule: ScheduleService,
    /// Timer messages.
    pub timers: TimerWheel,
}

/// The broker's shared state.
#[derive(Debug)]
pub struct BrokerState {
    /// The configuration in force (some keys change at run time).
    pub config: RwLock<Arc<BrokerConfig>>,
    /// The message store.
    pub store: MessageStore,
    /// Topics.
    pub topics: TopicManager,
    /// Consumer offsets.
    pub offsets: OffsetManager,
    /// Subscription groups.
    pub subscriptions: SubscriptionGroupManager,
    /// Delay-level delivery.
    pub schedule: ScheduleService,
    /// Orderly consumers' queue locks.
    pub locks: RebalanceLocks,
    /// Timer messages.
    pub timers: TimerWheel,
    /// Clients.
    pub clients: ClientRegistry,
    /// Address in message ids.
    pub store_host: SocketAddr,
    /// The queue of each family.
    pub queues: PerFamily<Arc<RequestQueue<Job>>>,
    /// The fast-failure sweeper.
    pub fast_failure: FastFailure<Job>,
    /// Requests accepted, served and refused, by reason.
    pub counters: Counters,
    /// Prometheus metric handles.
    pub metrics: BrokerMetrics,
    /// Early admission on the send queue.
    pub early_admission: AtomicBool,
    /// Busy responses carry [`RETRY_AFTER_MS`].
    pub retry_hint: AtomicBool,
    /// Pulls parked by long polling.
    pub pull_hold: PullHold,
    /// POP consumption of the gRPC endpoint (ReceiveMessage, AckMessage,
    /// ChangeInvisibleDuration).
    pub pop: PopService,
    /// Set when topics change, so that the registration task runs at once.
    pub topics_changed: tokio::sync::Notify,
    /// When the broker started (ms since the epoch).
    pub boot_timestamp: i64,
    /// Per-topic send quotas (`topicQuotas`).
    pub quotas: Quotas,
    /// The `sluice_quota_limit` series last published.
    quota_series: Mutex<Vec<(String, &'static str)>>,
    last_warn_ms: [AtomicU64; Reason::LABELS.len()],
}

impl BrokerState {
    /// Builds the state and its queues from a configuration.
    pub fn new(config: BrokerConfig, loaded: Loaded, store_host: SocketAddr) -> Self {
        let Loaded {
            store,
            topics,
            offsets,
            subscriptions,
            pop,
            schedule,
            timers,
        } = loaded;
        let f = &config.flow;
        let b = &config.broker;
        let queues = PerFamily::new(|family| {
            let workers = match family {
                Family::Send => b.send_message_thread_pool_nums,
                Family::Pull => b.pull_message_thread_pool_nums,
                Family::ConsumerManage => b.consumer_manage_thread_pool_nums,
                Family::Heartbeat => b.heartbeat_thread_pool_nums,
                Family::Admin => b.admin_broker_thread_pool_nums,
            };
            let queue = Arc::new(RequestQueue::new(
                family.name(),
                queue_capacity(&config, family),
            ));
            queue.set_workers(workers);
            queue.set_capacity_bytes(f.request_queue_capacity_bytes);
            queue
        });
        let mut fast_failure = FastFailure::new(
            Arc::clone(&queues[Family::Send]),
            ms(f.wait_time_mills_in_send_queue),
        );
        for family in [Family::Pull, Family::Heartbeat, Family::Admin] {
            if let Some(wait) = max_wait_ms(&config, family) {
                fast_failure.watch(Arc::clone(&queues[family]), ms(wait));
            }
        }
        fast_failure.set_enabled(f.broker_fast_failure_enable);
        let quotas = Quotas::new();
        quotas.replace(&f.topic_quota_list(), Instant::now());
        Self {
            quotas,
            quota_series: Mutex::default(),
            pull_hold: PullHold::new(
                b.pull_hold_max_requests,
                b.pull_hold_max_requests_per_connection,
            ),
            pop,
            early_admission: AtomicBool::new(f.early_admission_enable),
            retry_hint: AtomicBool::new(f.busy_retry_hint_enable),
            config: RwLock::new(Arc::new(config)),
            store,
            topics,
            offsets,
            subscriptions,
            schedule,
            locks: RebalanceLocks::default(),
            timers,
            clients: ClientRegistry::default(),
            store_host,
            queues,
            fast_failure,
            counters: Counters::new(),
            metrics: BrokerMetrics::new(),
            topics_changed: tokio::sync::Notify::new(),
            boot_timestamp: message_model::now_ms(),
            last_warn_ms: Default::default(),
        }
    }

    /// The queue of a family.
    pub fn queue(&self, family: Family) -> &Arc<RequestQueue<Job>> {
        &self.queues[family]
    }

    /// The configuration in force (a shared snapshot; cheap to take).
    pub fn config(&self) -> Arc<BrokerConfig> {
        Arc::clone(&self.config.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// Answers a refused request busy (nothing for a oneway request), counts
    /// it and logs it at most once a second per reason.
    pub fn reject(&self, job: &Job, reason: Reason) {
        let request = &job.request;
        self.counters.record_rejected(&reason);
        self.metrics.rejected(job.family, &reason);
        self.warn_rate_limited(&reason, job.reply.peer(), request.code);
        if request.is_oneway() {
            return;
        }
        let mut response = request.response_to(ResponseCode::SYSTEM_BUSY, Some(reason.remark()));
        if self.retry_hint.load(Ordering::Relaxed) {
            response.set_ext(RETRY_AFTER_MS, reason.retry_after().as_millis().to_string());
        }
        job.reply.send(response);
    }

    /// Serves a parked pull again: back into the pull queue, never parked twice.
    pub fn resume(&self, mut job: Job) {
        job.resumed = true;
        if let Err(rejected) = self.queue(Family::Pull).try_push(job, Instant::now()) {
            self.reject(&rejected.payload, rejected.reason);
        }
    }

    /// Refreshes the metric gauges of the queues and the store.
    pub fn refresh_metrics(&self) {
        self.metrics.refresh(&self.queues, &self.store);
        metrics::gauge!("sluice_timer_pending").set(self.timers.stats().pending as f64);
        self.refresh_quota_metrics();
    }

    /// `sluice_quota_limit{topic,unit}` for every quota in force; a quota
    /// removed since the last refresh reads 0.
    fn refresh_quota_metrics(&self) {
        let mut now: Vec<(String, &'static str, u64)> = Vec::new();
        for (topic, quota) in self.quotas.all() {
            if let Some(n) = quota.messages_per_sec {
                now.push((topic.clone(), QuotaUnit::Messages.as_str(), n));
            }
            if let Some(n) = quota.bytes_per_sec {
                now.push((topic, QuotaUnit::Bytes.as_str(), n));
            }
        }
        let mut published = self
            .quota_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (topic, unit) in published.iter() {
            if !now.iter().any(|(t, u, _)| t == topic && u == unit) {
                metrics::gauge!("sluice_quota_limit", "topic" => topic.clone(), "unit" => *unit)
                    .set(0.0);
            }
        }
        for (topic, unit, n) in &now {
            metrics::gauge!("sluice_quota_limit", "topic" => topic.clone(), "unit" => *unit)
                .set(*n as f64);
        }
        *published = now.into_iter().map(|(t, u, _)| (t, u)).collect();
    }

    fn warn_rate_limited(&self, reason: &Reason, peer: SocketAddr, code: i32) {
        let slot = &self.last_warn_ms[reason.index()];
        let now = message_model::now_ms() as u64;
        let last = slot.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 1000
            && slot
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                reason = reason.label(),
                remark = %reason.remark(),
                %peer,
                code,
                rejected_total = self.counters.rejected(reason.label()),
                send_queue_len = self.queues[Family::Send].len(),
                lock_held_ms = self.store.lock_time_mills(),
                "request refused (logged at most once a second per reason)"
            );
        }
    }
}

/// The fast-failure wait limit of a family's queue (ms), as `cfg` sets it;
/// `None` for a family whose requests never expire in their queue.
pub fn max_wait_ms(cfg: &BrokerConfig, family: Family) -> Option<u64> {
    let f = &cfg.flow;
    match family {
        Family::Send => Some(f.wait_time_mills_in_send_queue),
        Family::Pull => Some(f.wait_time_mills_in_pull_queue),
        Family::Heartbeat => Some(f.wait_time_mills_in_heartbeat_queue),
        Family::Admin => Some(f.wait_time_mills_in_admin_broker_queue),
        Family::ConsumerManage => None,
    }
}

/// The queue capacity of a family, as `cfg` sets it.
pub fn queue_capacity(cfg: &BrokerConfig, family: Family) -> usize {
    let f = &cfg.flow;
    match family {
        Family::Send => f.send_thread_pool_queue_capacity,
        Family::Pull => f.pull_thread_pool_queue_capacity,
        Family::ConsumerManage => f.consumer_manager_thread_pool_queue_capacity,
        Family::Heartbeat => f.heartbeat_thread_pool_queue_capacity,
        Family::Admin => f.admin_broker_thread_pool_queue_capacity,
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
