//! The path of a request through the broker: admission to its family's
//! bounded queue (or an immediate answer), the worker threads that serve
//! each queue through the request table, and the fast-failure sweeper that
//! answers what waited too long.
//!
//! # Threads
//! - `<family>-worker-<i>`: pop their family's queue and run the request's
//!   processor; a request that expired while queued is answered busy instead.
//! - `fast-failure`: every 10 ms, serves again the parked pulls whose hold
//!   time passed and answers busy what the sweeper removes.
//!
//! Admission runs on the caller's thread: a remoting connection's reader
//! task, or the gRPC handler. A send is served right there instead
//! (`inlineServeEnable`), sparing the hand-off to a worker and back, when
//! it would find its queue empty, a send worker idle and the put lock
//! free, sends take less than `inlineServeMaxMicros` on average (a slower
//! one would hold up the thread's other connections), and no request of
//! its connection waits behind it. It holds the idle worker's turn
//! meanwhile (that worker waits until it is given back), so no more sends
//! run at once than there are send workers.

use std::{
    io,
    sync::{atomic::Ordering, Arc},
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use flow_control::{Admission, OverQuota, QuotaScope, Reason, RequestQueue};
use remoting_net::{Connection, Handler};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};

use crate::{
    processor,
    request::{Family, Job, Reply, Work},
    state::BrokerState,
};

/// How long a worker waits on an empty queue before it checks whether the
/// queue was closed.
const IDLE_POLL: Duration = Duration::from_millis(200);
/// How often the sweeper looks at the queues and the parked pulls.
const SWEEP_PERIOD: Duration = Duration::from_millis(10);
/// The send queue's wait limit when the sweeper has none for it.
const DEFAULT_SEND_WAIT: Duration = Duration::from_millis(200);

/// Admits a request to its family's queue, or answers it at once: a code
/// without a route is answered `REQUEST_CODE_NOT_SUPPORTED`; a send is
/// refused busy while the page cache is busy or the transient store pool
/// is exhausted, then by early admission or the plain capacity check.
/// Remoting requests and the gRPC endpoint's sends both enter here.
pub fn admit(state: &BrokerState, reply: Reply, request: RemotingCommand) {
    admit_or_serve(state, reply, request, true);
}

/// [`admit`], serving a send on the calling thread only when `may_serve`
/// (no request of the same connection waits behind it) and the send queue
/// is idle; see the module's documentation.
fn admit_or_serve(state: &BrokerState, reply: Reply, request: RemotingCommand, may_serve: bool) {
    let Some(route) = processor::route(request.request_code()) else {
        tracing::debug!(code = request.code, peer = %reply.peer(), "request code not supported");
        if !request.is_oneway() {
            reply.send(processor::not_supported(&request));
        }
        return;
    };
    if let Reply::Remoting(conn) = &reply {
        if let Err(e) = state.access.check(&request, conn.peer().ip()) {
            let name = request.request_code().name().unwrap_or("request");
            state
                .access
                .note_refusal("remoting", conn.peer().ip(), name, &e);
            if !request.is_oneway() {
                reply.send(request.response_to(ResponseCode::NO_PERMISSION, Some(e.to_string())));
            }
            return;
        }
    }
    let family = route.family;
    let job = Job {
        family,
        reply,
        request,
        resumed: false,
        work: None,
    };
    if family == Family::Send
        && (state.store.is_os_page_cache_busy() || state.store.is_transient_store_pool_deficient())
    {
        state.reject(&job, Reason::RejectRequest);
        return;
    }
    let now = Instant::now();
    if family == Family::Send && !(state.quotas.is_empty() && state.client_quotas.is_empty()) {
        if let Some(over) = over_quota(state, &job, now) {
            state.reject(&job, over);
            return;
        }
    }
    let queue = state.queue(family);
    if family == Family::Send
        && may_serve
        && state.inline_serve.load(Ordering::Relaxed)
        && state.store.is_put_lock_free()
        && queue.avg_service_time().is_some_and(|d| {
            d.as_micros() < u128::from(state.inline_serve_max_micros.load(Ordering::Relaxed))
        })
    {
        if let Some(turn) = queue.try_claim_idle() {
            serve_inline(state, queue, &job, route);
            drop(turn);
            return;
        }
    }
    let early =
        (family == Family::Send && state.early_admission.load(Ordering::Relaxed)).then(|| {
            state
                .fast_failure
                .max_wait(queue.name())
                .unwrap_or(DEFAULT_SEND_WAIT)
        });
    let bytes = job.request.size_estimate();
    let admission = Admission {
        bytes,
        max_wait: early,
        ..Admission::default()
    };
    if state.enqueue(job, now, admission) {
        state.counters.record_accepted();
        state.metrics.accepted(family);
    }
}

/// Serves `job` on the calling thread, with an idle worker's turn: it is
/// counted as accepted and completed with a queue wait of zero, and its
/// service time feeds the queue's estimate as a worker's would.
fn serve_inline(
    state: &BrokerState,
    queue: &RequestQueue<Job>,
    job: &Job,
    route: &processor::Route,
) {
    state.counters.record_accepted();
    state.metrics.accepted(job.family);
    let started = Instant::now();
    if let Some(response) = route.run(state, job) {
        job.reply.send(response);
    }
    record_served(state, queue, job.family, started, Duration::ZERO);
    state.counters.record_served_inline();
    state.metrics.served_inline(job.family);
}

/// Records a request served from `started` after waiting `waited` in its
/// queue: the queue's service-time estimate, the counters and metrics.
fn record_served(
    state: &BrokerState,
    queue: &RequestQueue<Job>,
    family: Family,
    started: Instant,
    waited: Duration,
) {
    queue.record_service_time(started.elapsed());
    state.counters.record_completed();
    state.metrics.completed(family, waited.as_secs_f64());
}

/// Queues `work` in `family`'s queue, in the fair share that `request`'s
/// fields name, to run on one of the family's workers. When the queue
/// refuses it, or it waits past the queue's limit, it is dropped unrun and
/// the busy answer goes to `reply`, as for a request of that family.
pub fn submit(
    state: &BrokerState,
    family: Family,
    reply: Reply,
    request: RemotingCommand,
    work: Work,
) {
    let bytes = request.size_estimate();
    let job = Job {
        family,
        reply,
        request,
        resumed: false,
        work: Some(work),
    };
    let admission = Admission {
        bytes,
        ..Admission::default()
    };
    if state.enqueue(job, Instant::now(), admission) {
        state.counters.record_accepted();
        state.metrics.accepted(family);
    }
}

/// The refusal of a send whose topic is over its quota (`topicQuotas`)
/// or whose client is over its own (`clientQuotas`), taking the send's
/// tokens from both when neither refuses (and from neither when one does).
/// Only message sends count: `SEND_MESSAGE`, `SEND_MESSAGE_V2` and, by its
/// entries, `SEND_BATCH_MESSAGE`.
fn over_quota(state: &BrokerState, job: &Job, now: Instant) -> Option<Reason> {
    let request = &job.request;
    let code = request.request_code();
    let sends = [
        RequestCode::SEND_MESSAGE,
        RequestCode::SEND_MESSAGE_V2,
        RequestCode::SEND_BATCH_MESSAGE,
    ];
    if !sends.contains(&code) {
        return None;
    }
    let topic = job.header("b", "topic")?;
    let messages = if code == RequestCode::SEND_BATCH_MESSAGE {
        batch_entries(&request.body)
    } else {
        1
    };
    let bytes = request.body.len() as u64;
    // Only keys with a quota are counted, so the label sets stay bounded.
    let refused = |scope: QuotaScope, key: &str, over: OverQuota| {
        let unit = over.unit.as_str();
        match scope {
            QuotaScope::Topic => metrics::counter!(
                "sluice_quota_refusals_total", "topic" => key.to_owned(), "unit" => unit
            ),
            QuotaScope::Client => metrics::counter!(
                "sluice_client_quota_refusals_total", "client" => key.to_owned(), "unit" => unit
            ),
        }
        .increment(1);
        Some(Reason::OverQuota {
            scope,
            unit: over.unit,
            limit: over.limit,
            retry_after: over.retry_after,
        })
    };
    if let Err(over) = state.quotas.admit(topic, messages, bytes, now) {
        return refused(QuotaScope::Topic, topic, over);
    }
    if state.client_quotas.is_empty() {
        return None;
    }
    let client = state.client_key(job);
    if let Err(over) = state.client_quotas.admit(&client, messages, bytes, now) {
        state.quotas.give_back(topic, messages, bytes, now);
        return refused(QuotaScope::Client, &client, over);
    }
    None
}

/// The number of entries of a batch body (each starts with its total size,
/// big-endian); at least 1.
fn batch_entries(body: &[u8]) -> u64 {
    let (mut at, mut n) = (0usize, 0u64);
    while let Some(size) = body.get(at..at + 4) {
        let size = u32::from_be_bytes([size[0], size[1], size[2], size[3]]) as usize;
        if size == 0 {
            break;
        }
        at = at.saturating_add(size);
        n += 1;
    }
    n.max(1)
}

/// Starts the worker threads of every family and the sweeper thread.
///
/// # Errors
/// A thread cannot be started.
pub fn start(state: &Arc<BrokerState>) -> io::Result<Vec<JoinHandle<()>>> {
    let mut handles = Vec::new();
    for family in Family::ALL {
        let workers = state.queue(family).workers().max(1);
        for i in 0..workers {
            let state = Arc::clone(state);
            handles.push(
                thread::Builder::new()
                    .name(format!("{}-worker-{i}", family.name()))
                    .spawn(move || run_worker(&state, family))?,
            );
        }
    }
    let state = Arc::clone(state);
    handles.push(
        thread::Builder::new()
            .name("fast-failure".into())
            .spawn(move || run_sweeper(&state))?,
    );
    Ok(handles)
}

/// Closes every queue and answers busy (`[SHUTDOWN]`) what is still queued
/// or parked; the workers then finish what they hold and stop.
pub fn close_queues(state: &BrokerState) {
    for job in state.pull_hold.drain() {
        state.reject(&job, Reason::ShuttingDown);
    }
    for queue in state.queues.values() {
        queue.close();
        for task in queue.drain() {
            state.reject(&task.payload, Reason::ShuttingDown);
        }
    }
}

/// Admits the requests of remoting connections and forgets the clients of
/// closed ones.
#[derive(Debug)]
pub struct RemotingHandler(pub Arc<BrokerState>);

impl Handler for RemotingHandler {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        admit(&self.0, Reply::Remoting(Arc::clone(conn)), request);
    }

    fn on_request_read(&self, conn: &Arc<Connection>, request: RemotingCommand, more: bool) {
        admit_or_serve(&self.0, Reply::Remoting(Arc::clone(conn)), request, !more);
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        let parked = self.0.pull_hold.connection_closed(conn.id());
        if parked > 0 {
            tracing::debug!(
                conn = conn.id(),
                parked,
                "parked pulls of a closed connection dropped"
            );
        }
        let left = self.0.clients.connection_closed(conn.id());
        processor::notify_ids_changed(&self.0, &left);
    }
}

fn run_worker(state: &BrokerState, family: Family) {
    let queue = Arc::clone(state.queue(family));
    loop {
        let Some(mut task) = queue.pop(IDLE_POLL) else {
            if queue.is_closed() {
                return;
            }
            continue;
        };
        let started = Instant::now();
        let waited = task.waited(started);
        if let Some(reason) = expired_at_pickup(state, &queue, waited) {
            state.reject(&task.payload, reason);
            continue;
        }
        let job = &mut task.payload;
        if let Some(work) = job.work.take() {
            work.run();
        } else if let Some(route) = processor::route(job.request.request_code()) {
            // Admission only queues codes with a route.
            // `None` also means "answered later": a parked pull, or a
            // SYNC_FLUSH send that the store's flush thread answers. The
            // service time recorded below is then the worker's part only,
            // which is what holds the queue up and so what the
            // early-admission estimate of the queue wait needs.
            if let Some(response) = route.run(state, job) {
                job.reply.send(response);
            }
        }
        record_served(state, &queue, family, started, waited);
    }
}

/// A task that waited past its queue's limit before a worker took it is
/// answered like the sweeper would have answered it, never served: the
/// sweeper looks every 10 ms, a worker may get there first.
fn expired_at_pickup(
    state: &BrokerState,
    queue: &RequestQueue<Job>,
    waited: Duration,
) -> Option<Reason> {
    if !state.fast_failure.is_enabled() {
        return None;
    }
    let limit = state.fast_failure.max_wait(queue.name())?;
    (waited >= limit).then(|| Reason::TimeoutCleanQueue {
        waited,
        queue_len: queue.len(),
    })
}

fn run_sweeper(state: &BrokerState) {
    let send = Arc::clone(state.queue(Family::Send));
    while !send.is_closed() {
        thread::sleep(SWEEP_PERIOD);
        for job in state.pull_hold.expired(Instant::now()) {
            state.resume(job);
        }
        for (task, reason) in state
            .fast_failure
            .sweep(Instant::now(), || state.store.is_os_page_cache_busy())
        {
            state.reject(&task.payload, reason);
        }
    }
}
