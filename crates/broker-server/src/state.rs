//! The broker's shared state: configuration, store, topics, offsets,
//! clients, the queue of each processor family with the fast-failure
//! sweeper's limits, counters and metrics, parked pulls and POP state; and
//! the answer every refused request gets.
//!
//! The processors and the executor use this state; it uses neither.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering},
        Arc, Mutex, PoisonError, RwLock,
    },
    time::{Duration, Instant},
};

use flow_control::{
    Counters, FastFailure, FlowControlConfig, QuotaScope, QuotaUnit, Quotas, Reason, RequestQueue,
    ShareKey,
};
use remoting_protocol::{ResponseCode, RETRY_AFTER_MS};
use store::MessageStore;

pub(crate) use crate::throttle::once_a_second;
use crate::{
    access::Access,
    clients::{ClientRegistry, TelemetryProducers},
    config::BrokerConfig,
    ha::Ha,
    long_polling::PullHold,
    metrics::BrokerMetrics,
    offsets::OffsetManager,
    pop::PopService,
    rebalance_lock::RebalanceLocks,
    request::{Family, Job, PerFamily},
    schedule::ScheduleService,
    stats::{BrokerStats, CommonLabels, GaugeValues},
    subscriptions::SubscriptionGroupManager,
    timer::TimerWheel,
    topics::TopicManager,
    transaction::Transactions,
};

/// What the broker loads from disk before it starts: the store and the
/// tables kept beside it.
#[derive(Debug)]
pub struct Loaded {
    /// The message store.
    pub store: Arc<MessageStore>,
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
    /// Which transactional half messages have ended.
    pub transactions: Transactions,
    /// Users, policies and the access checks.
    pub access: Access,
    /// Replication.
    pub ha: Ha,
}

/// The broker's shared state.
#[derive(Debug)]
pub struct BrokerState {
    /// The configuration in force (some keys change at run time).
    pub config: RwLock<Arc<BrokerConfig>>,
    /// The message store.
    pub store: Arc<MessageStore>,
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
    pub timers: Arc<TimerWheel>,
    /// Which transactional half messages have ended.
    pub transactions: Transactions,
    /// Users, policies and the access checks.
    pub access: Access,
    /// Replication: the role, and the master's or slave's service.
    pub ha: Ha,
    /// Clients.
    pub clients: ClientRegistry,
    /// gRPC producers' telemetry streams, for transaction checks.
    pub grpc_producers: TelemetryProducers,
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
    /// Per-topic and per-group statistics, the runtime rates, consumer lag
    /// and the RocketMQ 5 metrics.
    pub stats: BrokerStats,
    /// Early admission on the send queue.
    pub early_admission: AtomicBool,
    /// Sends served on the reading thread when the send queue is idle.
    pub inline_serve: AtomicBool,
    /// Longest average send service time (µs) at which sends are served inline.
    pub inline_serve_max_micros: AtomicU64,
    /// What the send and pull queues' fair shares are per.
    pub share_keys: ShareKeys,
    /// Busy responses carry [`RETRY_AFTER_MS`].
    pub retry_hint: AtomicBool,
    /// Pulls parked by long polling.
    pub pull_hold: PullHold,
    /// POP consumption of the gRPC endpoint (ReceiveMessage, AckMessage,
    /// ChangeInvisibleDuration).
    pub pop: PopService,
    /// Set when topics change, so that the registration task runs at once.
    pub topics_changed: tokio::sync::Notify,
    /// Whether some name server accepted a registration (readiness).
    pub registered: AtomicBool,
    /// Threads that write on the master's behalf (delay, timer and
    /// transaction-check delivery), once started; in controller mode they
    /// start when the broker first becomes master.
    pub writer_threads: Mutex<Option<Vec<std::thread::JoinHandle<()>>>>,
    /// When the broker started (ms since the epoch).
    pub boot_timestamp: i64,
    /// Per-topic send quotas (`topicQuotas`).
    pub quotas: Quotas,
    /// Per-client send quotas (`clientQuotas`).
    pub client_quotas: Quotas,
    /// The quota limit series last published: scope, key, unit.
    quota_series: Mutex<Vec<(QuotaScope, String, &'static str)>>,
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
            transactions,
            access,
            ha,
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
                Family::Transaction => b.end_transaction_thread_pool_nums,
            };
            let queue = Arc::new(RequestQueue::new(
                family.name(),
                queue_capacity(&config, family),
            ));
            queue.set_workers(workers);
            queue
        });
        configure_queues(&queues, f);
        let mut fast_failure = FastFailure::new(
            Arc::clone(&queues[Family::Send]),
            ms(f.wait_time_mills_in_send_queue),
        );
        for family in [
            Family::Pull,
            Family::Heartbeat,
            Family::Admin,
            Family::Transaction,
        ] {
            if let Some(wait) = max_wait_ms(&config, family) {
                fast_failure.watch(Arc::clone(&queues[family]), ms(wait));
            }
        }
        fast_failure.set_enabled(f.broker_fast_failure_enable);
        let quotas = Quotas::new();
        quotas.replace(&f.topic_quota_list(), Instant::now());
        let client_quotas = Quotas::new();
        client_quotas.replace(&f.client_quota_list(), Instant::now());
        let stats = BrokerStats::new(
            CommonLabels {
                cluster: b.broker_cluster_name.clone(),
                node_id: b.broker_name.clone(),
            },
            message_model::now_ms(),
            crate::stats::local_day_now(),
        );
        Self {
            stats,
            transactions,
            access,
            ha,
            quotas,
            client_quotas,
            quota_series: Mutex::default(),
            pull_hold: PullHold::new(
                b.pull_hold_max_requests,
                b.pull_hold_max_requests_per_connection,
            ),
            pop,
            early_admission: AtomicBool::new(f.early_admission_enable),
            inline_serve: AtomicBool::new(f.inline_serve_enable),
            inline_serve_max_micros: AtomicU64::new(f.inline_serve_max_micros),
            share_keys: ShareKeys::new(f),
            retry_hint: AtomicBool::new(f.busy_retry_hint_enable),
            config: RwLock::new(Arc::new(config)),
            store,
            topics,
            offsets,
            subscriptions,
            schedule,
            locks: RebalanceLocks::default(),
            timers: Arc::new(timers),
            clients: ClientRegistry::default(),
            grpc_producers: TelemetryProducers::default(),
            store_host,
            queues,
            fast_failure,
            counters: Counters::new(),
            metrics: BrokerMetrics::new(),
            topics_changed: tokio::sync::Notify::new(),
            registered: AtomicBool::new(false),
            writer_threads: Mutex::new(None),
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

    /// Whether the broker is ready for traffic (the metrics port's
    /// `/ready`): its store recovered (this state exists only after), a
    /// role assigned (controller mode), and registered with a name server.
    ///
    /// # Errors
    /// Why it is not ready.
    pub fn readiness(&self) -> Result<(), String> {
        if self.ha.controlled() && self.ha.master_epoch() == 0 {
            return Err("no role yet: waiting for the controllers".to_owned());
        }
        if !self.registered.load(Ordering::Acquire) {
            return Err("not registered with any name server yet".to_owned());
        }
        Ok(())
    }

    /// Registers with the name servers as broker `id` of the group from now
    /// on (controller mode: 0 as master, its own id as slave).
    pub fn set_registered_broker_id(&self, id: i64) {
        let mut config = self.config.write().unwrap_or_else(PoisonError::into_inner);
        let mut changed = (**config).clone();
        changed.broker.broker_id = id;
        *config = Arc::new(changed);
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

    /// Admits `job` to its family's queue, in the fair share its key
    /// (`sendShareKey`, `pullShareKey`) names: the overflow share for a
    /// queue without shares and for requests without the key's field.
    /// Answers a refused job busy ([`BrokerState::reject`]) and returns
    /// whether it was queued.
    pub fn enqueue(&self, job: Job, now: Instant, admission: flow_control::Admission<'_>) -> bool {
        let pushed = self.push_to_share(job, now, admission);
        if let Err(rejected) = &pushed {
            self.reject(&rejected.payload, rejected.reason);
        }
        pushed.is_ok()
    }

    #[allow(clippy::result_large_err)] // the refused job goes straight to `reject`
    fn push_to_share(
        &self,
        job: Job,
        now: Instant,
        admission: flow_control::Admission<'_>,
    ) -> Result<(), flow_control::Rejected<Job>> {
        let queue = self.queue(job.family);
        let kind = self.share_keys.of(job.family);
        if kind == ShareKey::ClientId {
            let client = self.client_key(&job);
            let admission = flow_control::Admission {
                share: &client,
                ..admission
            };
            return queue.push(job, now, admission);
        }
        queue.push_with(job, now, admission, |job| {
            let (short, long) = match kind {
                ShareKey::Topic => ("b", "topic"),
                ShareKey::ProducerGroup => ("a", "producerGroup"),
                ShareKey::ConsumerGroup => ("consumerGroup", "consumerGroup"),
                ShareKey::ClientId | ShareKey::None => return Some(""),
            };
            Some(job.header(short, long).unwrap_or(""))
        })
    }

    /// Serves a parked pull again: back into the pull queue, never parked twice.
    pub fn resume(&self, mut job: Job) {
        job.resumed = true;
        self.enqueue(job, Instant::now(), flow_control::Admission::default());
    }

    /// Refreshes the metric gauges of the queues and the store, and takes
    /// the statistics' snapshots that are due.
    pub fn refresh_metrics(&self) {
        self.metrics.refresh(&self.queues, &self.store);
        let now_ms = message_model::now_ms();
        self.stats.tick(now_ms, crate::stats::local_day_now());
        let (min, max) = (
            self.store.min_physical_offset(),
            self.store.max_physical_offset(),
        );
        self.stats.publish_gauges(&GaugeValues {
            queue_lengths: PerFamily::new(|f| self.queues[f].len()),
            permission: self.config().broker.broker_permission,
            topics: self.topics.len(),
            groups: self.subscriptions.wrapper().subscription_group_table.len(),
            storage_bytes: max.saturating_sub(min),
            flush_behind: max.saturating_sub(self.store.flushed_physical_offset()),
            dispatch_behind: self.store.dispatch_behind_bytes(),
            earliest_store_time: self.earliest_store_time(),
            now_ms,
        });
        metrics::gauge!("sluice_timer_pending").set(self.timers.stats().pending as f64);
        metrics::gauge!("sluice_transaction_half_pending").set(self.half_pending() as f64);
        self.ha.publish_gauges(max);
        self.refresh_quota_metrics();
    }

    /// Computes and publishes the consumer lag gauges (every few seconds).
    pub fn refresh_lag(&self) {
        let lags = self
            .stats
            .lag(&self.store, &self.offsets, message_model::now_ms());
        self.stats.publish_lag(&lags);
    }

    /// Store time of the CommitLog's first message, if it holds one.
    pub fn earliest_store_time(&self) -> Option<i64> {
        let first = self.store.min_physical_offset();
        if first >= self.store.max_physical_offset() {
            return None;
        }
        let record = self.store.lookup_message(first)?;
        message_model::record::read_store_timestamp(&record)
    }

    /// Transactional half messages stored and not ended yet.
    pub fn half_pending(&self) -> u64 {
        use crate::transaction::{HALF_TOPIC, QUEUE_ID};
        self.transactions.pending(
            self.store.min_offset_in_queue(HALF_TOPIC, QUEUE_ID),
            self.store.max_offset_in_queue(HALF_TOPIC, QUEUE_ID),
        )
    }

    /// `sluice_quota_limit{topic,unit}` and
    /// `sluice_client_quota_limit{client,unit}` for every quota in force; a
    /// quota removed since the last refresh reads 0.
    fn refresh_quota_metrics(&self) {
        let mut now: Vec<(QuotaScope, String, &'static str, u64)> = Vec::new();
        for (scope, quotas) in [
            (QuotaScope::Topic, &self.quotas),
            (QuotaScope::Client, &self.client_quotas),
        ] {
            for (key, quota) in quotas.all() {
                if let Some(n) = quota.messages_per_sec {
                    now.push((scope, key.clone(), QuotaUnit::Messages.as_str(), n));
                }
                if let Some(n) = quota.bytes_per_sec {
                    now.push((scope, key, QuotaUnit::Bytes.as_str(), n));
                }
            }
        }
        let gauge = |scope: QuotaScope, key: &str, unit: &'static str| match scope {
            QuotaScope::Topic => {
                metrics::gauge!("sluice_quota_limit", "topic" => key.to_owned(), "unit" => unit)
            }
            QuotaScope::Client => metrics::gauge!(
                "sluice_client_quota_limit",
                "client" => key.to_owned(),
                "unit" => unit
            ),
        };
        let mut published = self
            .quota_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (scope, key, unit) in published.iter() {
            if !now
                .iter()
                .any(|(s, k, u, _)| s == scope && k == key && u == unit)
            {
                gauge(*scope, key, unit).set(0.0);
            }
        }
        for (scope, key, unit, n) in &now {
            gauge(*scope, key, unit).set(*n as f64);
        }
        *published = now.into_iter().map(|(s, k, u, _)| (s, k, u)).collect();
    }

    /// The key of the client that sent `job` for shares and quotas: the id
    /// it registered with on its connection, else its address.
    pub fn client_key(&self, job: &Job) -> String {
        job.reply
            .connection_id()
            .and_then(|conn| {
                self.clients
                    .with_client_id_of(conn, |id| id.map(str::to_owned))
            })
            .unwrap_or_else(|| job.reply.peer().to_string())
    }

    fn warn_rate_limited(&self, reason: &Reason, peer: SocketAddr, code: i32) {
        if once_a_second(&self.last_warn_ms[reason.index()]) {
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

/// What the send and pull queues' fair shares are per (`sendShareKey`,
/// `pullShareKey`), changeable at run time; the other queues have none.
#[derive(Debug)]
pub struct ShareKeys {
    send: AtomicU8,
    pull: AtomicU8,
}

const SHARE_KEYS: [ShareKey; 5] = [
    ShareKey::None,
    ShareKey::Topic,
    ShareKey::ProducerGroup,
    ShareKey::ConsumerGroup,
    ShareKey::ClientId,
];

impl ShareKeys {
    fn new(f: &FlowControlConfig) -> Self {
        let keys = Self {
            send: AtomicU8::new(0),
            pull: AtomicU8::new(0),
        };
        keys.set(f);
        keys
    }

    /// Takes the keys of a configuration.
    pub fn set(&self, f: &FlowControlConfig) {
        let code = |k: ShareKey| SHARE_KEYS.iter().position(|&x| x == k).unwrap_or(0) as u8;
        self.send.store(code(f.send_share_key), Ordering::Relaxed);
        self.pull.store(code(f.pull_share_key), Ordering::Relaxed);
    }

    /// What the shares of `family`'s queue are per.
    pub fn of(&self, family: Family) -> ShareKey {
        let code = match family {
            Family::Send => self.send.load(Ordering::Relaxed),
            Family::Pull => self.pull.load(Ordering::Relaxed),
            _ => 0,
        };
        SHARE_KEYS[usize::from(code) % SHARE_KEYS.len()]
    }
}

/// Sets what the configuration says about every queue: byte capacity,
/// share bounds and weights, and adaptive admission (send queue only).
pub fn configure_queues(queues: &PerFamily<Arc<RequestQueue<Job>>>, f: &FlowControlConfig) {
    let weights = f.share_weight_map();
    for queue in queues.values() {
        queue.set_capacity_bytes(f.request_queue_capacity_bytes);
        queue.set_max_shares(f.max_shares_per_queue);
        queue.set_share_weights(weights.clone());
    }
    queues[Family::Send].set_sojourn_control(f.sojourn_control());
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
        Family::Transaction => Some(f.wait_time_mills_in_transaction_queue),
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
        Family::Transaction => f.end_transaction_pool_queue_capacity,
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
