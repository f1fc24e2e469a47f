//! The broker's shared state and the path of a request: the processor's
//! reject check, admission to its family's bounded queue, the worker threads
//! that serve it, and the fast-failure sweeper that answers what waited too
//! long.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, RwLock,
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use flow_control::{Counters, FastFailure, Reason, RequestQueue};
use remoting_net::{Connection, Handler};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use store::MessageStore;
use tokio::sync::oneshot;

use crate::{
    clients::ClientRegistry, config::BrokerConfig, metrics::BrokerMetrics, offsets::OffsetManager,
    processor, topics::TopicManager,
};

/// Ext field carrying Sluice's suggested back-off (ms) on busy responses.
pub const RETRY_AFTER_MS: &str = "retryAfterMs";

/// Where the answer to a queued request goes.
///
/// Remoting requests are answered on their connection; requests that the
/// gRPC endpoint translated into remoting commands are answered through a
/// one-shot channel that its handler awaits. Both take the same queue,
/// workers, sweeper and rejection path.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A remoting connection.
    Remoting(Arc<Connection>),
    /// A waiting gRPC handler.
    Channel(Arc<ChannelReply>),
}

/// The answer slot of a request submitted by the gRPC endpoint.
#[derive(Debug)]
pub struct ChannelReply {
    peer: SocketAddr,
    tx: Mutex<Option<oneshot::Sender<RemotingCommand>>>,
}

impl Reply {
    /// A reply target for an in-process caller at `peer`, and the receiver
    /// that gets the one answer.
    pub fn channel(peer: SocketAddr) -> (Self, oneshot::Receiver<RemotingCommand>) {
        let (tx, rx) = oneshot::channel();
        let slot = ChannelReply {
            peer,
            tx: Mutex::new(Some(tx)),
        };
        (Reply::Channel(Arc::new(slot)), rx)
    }

    /// Delivers the answer; false when nobody takes it any more (connection
    /// closed, caller gone, or already answered).
    pub fn send(&self, response: RemotingCommand) -> bool {
        match self {
            Reply::Remoting(conn) => conn.send(response),
            Reply::Channel(slot) => slot
                .tx
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .is_some_and(|tx| tx.send(response).is_ok()),
        }
    }

    /// The address the request came from.
    pub fn peer(&self) -> SocketAddr {
        match self {
            Reply::Remoting(conn) => conn.peer(),
            Reply::Channel(slot) => slot.peer,
        }
    }

    /// The remoting connection's id; `None` for gRPC callers.
    pub fn connection_id(&self) -> Option<u64> {
        match self {
            Reply::Remoting(conn) => Some(conn.id()),
            Reply::Channel(_) => None,
        }
    }
}

/// A request waiting for a worker.
#[derive(Debug)]
pub struct Job {
    /// Where the answer goes.
    pub reply: Reply,
    /// The request.
    pub request: RemotingCommand,
    /// A parked pull served again: it is answered now, never parked twice.
    pub resumed: bool,
}

/// Processor families, each with its own queue and workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Sends.
    Send,
    /// Pulls.
    Pull,
    /// Consumer offsets and group membership queries.
    ConsumerManage,
    /// Heartbeats and client registration.
    Heartbeat,
    /// Administration, and every code without a processor.
    Admin,
}

impl Family {
    /// The family serving a request code.
    pub fn of(code: RequestCode) -> Self {
        match code {
            RequestCode::SEND_MESSAGE
            | RequestCode::SEND_MESSAGE_V2
            | RequestCode::SEND_BATCH_MESSAGE
            | RequestCode::CONSUMER_SEND_MSG_BACK => Family::Send,
            RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => Family::Pull,
            RequestCode::QUERY_CONSUMER_OFFSET
            | RequestCode::UPDATE_CONSUMER_OFFSET
            | RequestCode::GET_CONSUMER_LIST_BY_GROUP => Family::ConsumerManage,
            RequestCode::HEART_BEAT
            | RequestCode::UNREGISTER_CLIENT
            | RequestCode::CHECK_CLIENT_CONFIG => Family::Heartbeat,
            _ => Family::Admin,
        }
    }

    /// Every family.
    pub const ALL: [Family; 5] = [
        Family::Send,
        Family::Pull,
        Family::ConsumerManage,
        Family::Heartbeat,
        Family::Admin,
    ];

    /// Queue and thread-name prefix.
    pub fn name(self) -> &'static str {
        match self {
            Family::Send => "send",
            Family::Pull => "pull",
            Family::ConsumerManage => "consumer-manage",
            Family::Heartbeat => "heartbeat",
            Family::Admin => "admin",
        }
    }
}

/// The broker's shared state.
#[derive(Debug)]
pub struct BrokerCore {
    /// The configuration in force (some keys change at run time).
    pub config: RwLock<Arc<BrokerConfig>>,
    /// The message store.
    pub store: MessageStore,
    /// Topics.
    pub topics: TopicManager,
    /// Consumer offsets.
    pub offsets: OffsetManager,
    /// Clients.
    pub clients: ClientRegistry,
    /// Address in message ids.
    pub store_host: SocketAddr,
    /// Queues per family, in [`Family::ALL`] order.
    pub queues: [Arc<RequestQueue<Job>>; 5],
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
    pub pull_hold: crate::long_polling::PullHold,
    /// POP consumption of the gRPC endpoint (ReceiveMessage, AckMessage,
    /// ChangeInvisibleDuration).
    pub pop: crate::pop::PopService,
    /// Set when topics change, so that the registration task runs at once.
    pub topics_changed: tokio::sync::Notify,
    /// When the broker started (ms since the epoch).
    pub boot_timestamp: i64,
    last_warn_ms: [AtomicU64; 8],
}

impl BrokerCore {
    /// Builds the state and its queues from a configuration.
    pub fn new(
        config: BrokerConfig,
        store: MessageStore,
        topics: TopicManager,
        offsets: OffsetManager,
        pop: crate::pop::PopService,
        store_host: SocketAddr,
    ) -> Self {
        let f = &config.flow;
        let b = &config.broker;
        let make = |family: Family, capacity: usize, workers: usize| {
            let q = Arc::new(RequestQueue::new(family.name(), capacity));
            q.set_workers(workers);
            q
        };
        let queues = [
            make(
                Family::Send,
                f.send_thread_pool_queue_capacity,
                b.send_message_thread_pool_nums,
            ),
            make(
                Family::Pull,
                f.pull_thread_pool_queue_capacity,
                b.pull_message_thread_pool_nums,
            ),
            make(
                Family::ConsumerManage,
                f.consumer_manager_thread_pool_queue_capacity,
                b.consumer_manage_thread_pool_nums,
            ),
            make(
                Family::Heartbeat,
                f.heartbeat_thread_pool_queue_capacity,
                b.heartbeat_thread_pool_nums,
            ),
            make(
                Family::Admin,
                f.admin_broker_thread_pool_queue_capacity,
                b.admin_broker_thread_pool_nums,
            ),
        ];
        let mut fast_failure =
            FastFailure::new(Arc::clone(&queues[0]), ms(f.wait_time_mills_in_send_queue));
        fast_failure.watch(Arc::clone(&queues[1]), ms(f.wait_time_mills_in_pull_queue));
        fast_failure.watch(
            Arc::clone(&queues[3]),
            ms(f.wait_time_mills_in_heartbeat_queue),
        );
        fast_failure.watch(
            Arc::clone(&queues[4]),
            ms(f.wait_time_mills_in_admin_broker_queue),
        );
        fast_failure.set_enabled(f.broker_fast_failure_enable);
        let pull_hold = crate::long_polling::PullHold::new(b.pull_hold_max_requests);
        Self {
            pull_hold,
            pop,
            early_admission: AtomicBool::new(f.early_admission_enable),
            retry_hint: AtomicBool::new(f.busy_retry_hint_enable),
            config: RwLock::new(Arc::new(config)),
            store,
            topics,
            offsets,
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
        let index = Family::ALL.iter().position(|f| *f == family).unwrap_or(4);
        &self.queues[index]
    }

    /// The configuration in force (a shared snapshot; cheap to take).
    pub fn config(&self) -> Arc<BrokerConfig> {
        Arc::clone(
            &self
                .config
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// Answers a refused request busy (nothing for a oneway request), counts
    /// it and logs it at most once a second per reason.
    pub fn reject(&self, reply: &Reply, request: &RemotingCommand, reason: Reason) {
        self.counters.record_rejected(&reason);
        self.metrics
            .rejected(Family::of(request.request_code()), &reason);
        self.warn_rate_limited(&reason, reply.peer(), request.code);
        if request.is_oneway() {
            return;
        }
        let mut response = request.response_to(ResponseCode::SYSTEM_BUSY, Some(reason.remark()));
        if self.retry_hint.load(Ordering::Relaxed) {
            response.set_ext(RETRY_AFTER_MS, reason.retry_after().as_millis().to_string());
        }
        reply.send(response);
    }

    fn warn_rate_limited(&self, reason: &Reason, peer: SocketAddr, code: i32) {
        let slot = &self.last_warn_ms[reason_slot(reason)];
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
                send_queue_len = self.queues[0].len(),
                lock_held_ms = self.store.lock_time_mills(),
                "request refused (logged at most once a second per reason)"
            );
        }
    }

    /// Serves one request on a worker thread.
    fn serve(&self, job: &Job) -> Option<RemotingCommand> {
        processor::process(self, job)
    }

    /// Starts the worker threads of every family and the sweeper thread.
    ///
    /// # Errors
    /// A thread cannot be started.
    pub fn start_threads(self: &Arc<Self>) -> std::io::Result<Vec<JoinHandle<()>>> {
        let mut handles = Vec::new();
        for family in Family::ALL {
            let workers = self.queue(family).workers().max(1);
            for i in 0..workers {
                let core = Arc::clone(self);
                handles.push(
                    thread::Builder::new()
                        .name(format!("{}-worker-{i}", family.name()))
                        .spawn(move || core.run_worker(family))?,
                );
            }
        }
        let core = Arc::clone(self);
        handles.push(
            thread::Builder::new()
                .name("fast-failure".into())
                .spawn(move || core.run_sweeper())?,
        );
        Ok(handles)
    }

    fn run_worker(&self, family: Family) {
        let queue = Arc::clone(self.queue(family));
        loop {
            match queue.pop(Duration::from_millis(200)) {
                Some(task) => {
                    let started = Instant::now();
                    let waited = task.waited(started);
                    if let Some(reason) = self.expired_at_pickup(&queue, waited) {
                        self.reject(&task.payload.reply, &task.payload.request, reason);
                        continue;
                    }
                    let waited = waited.as_secs_f64();
                    // `None` also means "answered later": a parked pull, or a
                    // SYNC_FLUSH send that the store's flush thread answers.
                    // The service time recorded below is then the worker's
                    // part only, which is what holds the queue up and so what
                    // the early-admission estimate of the queue wait needs.
                    if let Some(response) = self.serve(&task.payload) {
                        if !task.payload.request.is_oneway() {
                            task.payload.reply.send(response);
                        }
                    }
                    queue.record_service_time(started.elapsed());
                    self.counters.record_completed();
                    self.metrics.completed(family, waited);
                }
                None if queue.is_closed() => return,
                None => {}
            }
        }
    }

    /// A task that waited past its queue's limit before a worker took it is
    /// answered like the sweeper would have answered it, never served: the
    /// sweeper looks every 10 ms, a worker may get there first.
    fn expired_at_pickup(&self, queue: &RequestQueue<Job>, waited: Duration) -> Option<Reason> {
        if !self.fast_failure.is_enabled() {
            return None;
        }
        let limit = self.fast_failure.max_wait(queue.name())?;
        (waited >= limit).then(|| Reason::TimeoutCleanQueue {
            waited,
            queue_len: queue.len(),
        })
    }

    fn run_sweeper(&self) {
        let send = Arc::clone(&self.queues[0]);
        while !send.is_closed() {
            thread::sleep(Duration::from_millis(10));
            for job in self.pull_hold.expired(Instant::now()) {
                self.resume(job);
            }
            for (task, reason) in self
                .fast_failure
                .sweep(Instant::now(), || self.store.is_os_page_cache_busy())
            {
                self.reject(&task.payload.reply, &task.payload.request, reason);
            }
        }
    }

    /// Serves a parked pull again: back into the pull queue, never parked twice.
    pub fn resume(&self, mut job: Job) {
        job.resumed = true;
        if let Err(rejected) = self.queue(Family::Pull).try_push(job, Instant::now()) {
            self.reject(
                &rejected.payload.reply,
                &rejected.payload.request,
                rejected.reason,
            );
        }
    }

    /// Closes every queue and answers what is still queued as refused.
    pub fn close_queues(&self) {
        for job in self.pull_hold.drain() {
            self.reject(&job.reply, &job.request, Reason::ShuttingDown);
        }
        for queue in &self.queues {
            queue.close();
            for task in queue.drain() {
                self.reject(
                    &task.payload.reply,
                    &task.payload.request,
                    Reason::ShuttingDown,
                );
            }
        }
    }
}

impl BrokerCore {
    /// Admits a request to its family's queue, or answers it busy: the
    /// send family's page-cache and transient-pool checks first, then early
    /// admission (sends) or the plain capacity check. Remoting requests and
    /// the gRPC endpoint's sends both enter here.
    pub fn admit(&self, reply: Reply, request: RemotingCommand) {
        let family = Family::of(request.request_code());
        if family == Family::Send
            && (self.store.is_os_page_cache_busy()
                || self.store.is_transient_store_pool_deficient())
        {
            self.reject(&reply, &request, Reason::RejectRequest);
            return;
        }
        let queue = self.queue(family);
        let job = Job {
            reply,
            request,
            resumed: false,
        };
        let now = Instant::now();
        let pushed = if family == Family::Send {
            let limit = self
                .fast_failure
                .max_wait(queue.name())
                .unwrap_or(Duration::from_millis(200));
            queue.try_push_with_admission(
                job,
                now,
                limit,
                self.early_admission.load(Ordering::Relaxed),
            )
        } else {
            queue.try_push(job, now)
        };
        match pushed {
            Ok(()) => {
                self.counters.record_accepted();
                self.metrics.accepted(family);
            }
            Err(rejected) => self.reject(
                &rejected.payload.reply,
                &rejected.payload.request,
                rejected.reason,
            ),
        }
    }
}

impl Handler for BrokerCore {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        self.admit(Reply::Remoting(Arc::clone(conn)), request);
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.clients.connection_closed(conn.id());
    }
}

fn reason_slot(reason: &Reason) -> usize {
    match reason.label() {
        "reject_request" => 0,
        "overload" => 1,
        "pcbusy_clean_queue" => 2,
        "timeout_clean_queue" => 3,
        "pc_synchronized" => 4,
        "early_reject" => 5,
        "shutting_down" => 6,
        _ => 7,
    }
}

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}
