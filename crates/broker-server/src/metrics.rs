//! Prometheus metrics: requests and rejections by processor family and
//! reason, queue lengths and waits, store append and flush latency, put-lock
//! hold time, bytes and messages stored.
//!
//! Handles are registered once; recording is an atomic update, so the hot
//! path takes no lock. Gauges of queue lengths and store state are refreshed
//! every second by the housekeeping thread.

use std::{
    sync::{Arc, Mutex, OnceLock, PoisonError},
    time::{Duration, Instant},
};

use flow_control::{Reason, RequestQueue};
use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use remoting_net::{CancellationToken, ConnectionLimits};
use store::MessageStore;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use crate::request::{Family, Job, PerFamily};

/// Histogram buckets in seconds, from 10 µs to 10 s.
const BUCKETS: &[f64] = &[
    0.000_01, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.2, 0.5, 1.0, 2.0, 5.0, 10.0,
];

/// Whether the broker is ready for traffic: `Ok`, or why not. Set once the
/// broker's state exists; unset, the broker is not ready.
pub type ReadyCheck = Arc<OnceLock<Box<dyn Fn() -> Result<(), String> + Send + Sync>>>;

/// Makes the Prometheus recorder the process's metrics recorder and serves
/// it on `listener`, within `limits`, until `shutdown`: `GET /live` answers
/// 200 while the process serves HTTP (never tied to flow control), `GET
/// /ready` 200 when `ready` says so and 503 with the reason otherwise, any
/// other `GET` path the metrics; one request per connection. Returns false
/// (and logs why) when another recorder is installed already.
pub fn install_exporter(
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
    ready: ReadyCheck,
) -> bool {
    let addr = listener.local_addr().ok();
    let builder = match PrometheusBuilder::new().set_buckets(BUCKETS) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(cause = %e, "invalid metrics buckets");
            return false;
        }
    };
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    if metrics::set_global_recorder(recorder).is_err() {
        tracing::warn!(
            ?addr,
            "a metrics recorder is already installed in this process; not serving another"
        );
        return false;
    }
    let upkeep = handle.clone();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(Duration::from_secs(5)) => upkeep.run_upkeep(),
            }
        }
    });
    tokio::spawn(async move {
        while let Some((stream, _peer, permit)) = limits.accept(&listener, &shutdown).await {
            let handle = handle.clone();
            let ready = Arc::clone(&ready);
            tokio::spawn(async move {
                if let Err(e) = answer(stream, &handle, &ready).await {
                    tracing::debug!(cause = %e, "metrics request failed");
                }
                drop(permit);
            });
        }
    });
    tracing::info!(?addr, "metrics endpoint listening on /metrics");
    true
}

/// Longest a metrics request may take to arrive or its answer to leave.
const METRICS_IO_LIMIT: Duration = Duration::from_secs(10);
/// Largest request head read.
const METRICS_HEAD_LIMIT: usize = 8192;

/// Reads one HTTP request head and answers it, then closes.
async fn answer(
    mut stream: TcpStream,
    handle: &PrometheusHandle,
    ready: &ReadyCheck,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(METRICS_IO_LIMIT, async {
        loop {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok::<bool, std::io::Error>(false);
            }
            head.extend_from_slice(&buf[..n]);
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                return Ok(true);
            }
            if head.len() > METRICS_HEAD_LIMIT {
                return Ok(false);
            }
        }
    })
    .await
    .unwrap_or(Ok(false))?;
    let get = head.starts_with(b"GET ");
    let path = head
        .split(|b| *b == b' ')
        .nth(1)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    let (status, body) = match (complete, get) {
        (true, true) if path == "/live" => ("200 OK", "alive\n".to_owned()),
        (true, true) if path == "/ready" => match ready.get().map(|check| check()) {
            Some(Ok(())) => ("200 OK", "ready\n".to_owned()),
            Some(Err(why)) => ("503 Service Unavailable", format!("not ready: {why}\n")),
            None => (
                "503 Service Unavailable",
                "not ready: starting (recovering the store)\n".to_owned(),
            ),
        },
        (true, true) => ("200 OK", handle.render()),
        (true, false) => ("405 Method Not Allowed", "only GET\n".to_owned()),
        (false, _) => ("400 Bad Request", "bad request\n".to_owned()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::time::timeout(METRICS_IO_LIMIT, async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await
    .unwrap_or(Ok(()))
}

/// The broker's metric handles.
#[derive(Debug)]
pub struct BrokerMetrics {
    accepted: PerFamily<Counter>,
    completed: PerFamily<Counter>,
    served_inline: PerFamily<Counter>,
    /// Per family, one counter per [`Reason::LABELS`] entry.
    rejected: PerFamily<Vec<Counter>>,
    /// Per family: how long a refused request waited before its busy answer.
    busy_answer_wait: PerFamily<Histogram>,
    queue_wait: PerFamily<Histogram>,
    queue_len: PerFamily<Gauge>,
    queue_capacity: PerFamily<Gauge>,
    /// Time a send worker spent in the store's append: encoding and copying
    /// under the put lock, and waiting for the lock. A SYNC_FLUSH send's
    /// wait for its flush is not included: the group commit answers it.
    pub append_time: Histogram,
    /// Messages stored.
    pub messages_stored: Counter,
    /// Bytes stored (whole records).
    pub bytes_stored: Counter,
    lock_held: Gauge,
    dispatch_behind: Gauge,
    unflushed: Gauge,
    pool_available: Gauge,
    pool_total: Gauge,
    /// The `sluice_share_*` series last published: queue and share label.
    share_series: Mutex<Vec<(&'static str, String)>>,
}

/// How a share is named in metrics and runtime info: its key, or
/// `(overflow)` for the overflow share (keyless requests, and keys past
/// `maxSharesPerQueue`).
pub fn share_label(key: &str) -> &str {
    if key.is_empty() {
        "(overflow)"
    } else {
        key
    }
}

impl BrokerMetrics {
    /// Registers every handle with the installed recorder (no-op handles when none is).
    pub fn new() -> Self {
        Self {
            accepted: PerFamily::new(
                |f| counter!("sluice_requests_total", "family" => f.name(), "outcome" => "accepted"),
            ),
            completed: PerFamily::new(
                |f| counter!("sluice_requests_total", "family" => f.name(), "outcome" => "completed"),
            ),
            served_inline: PerFamily::new(
                |f| counter!("sluice_requests_served_inline_total", "family" => f.name()),
            ),
            rejected: PerFamily::new(|f| {
                Reason::LABELS
                    .iter()
                    .map(|r| counter!("sluice_rejections_total", "family" => f.name(), "reason" => *r))
                    .collect()
            }),
            busy_answer_wait: PerFamily::new(
                |f| histogram!("sluice_busy_answer_wait_seconds", "family" => f.name()),
            ),
            queue_wait: PerFamily::new(
                |f| histogram!("sluice_queue_wait_seconds", "queue" => f.name()),
            ),
            queue_len: PerFamily::new(|f| gauge!("sluice_queue_length", "queue" => f.name())),
            queue_capacity: PerFamily::new(
                |f| gauge!("sluice_queue_capacity", "queue" => f.name()),
            ),
            append_time: histogram!("sluice_store_append_seconds"),
            messages_stored: counter!("sluice_store_messages_total"),
            bytes_stored: counter!("sluice_store_bytes_total"),
            lock_held: gauge!("sluice_store_put_lock_held_seconds"),
            dispatch_behind: gauge!("sluice_store_dispatch_behind_bytes"),
            unflushed: gauge!("sluice_store_unflushed_bytes"),
            pool_available: gauge!("sluice_store_transient_pool_buffers", "state" => "available"),
            pool_total: gauge!("sluice_store_transient_pool_buffers", "state" => "total"),
            share_series: Mutex::default(),
        }
    }

    /// Counts an admitted request.
    pub fn accepted(&self, family: Family) {
        self.accepted[family].increment(1);
    }

    /// Counts a served request and how long it waited in its queue.
    pub fn completed(&self, family: Family, waited_seconds: f64) {
        self.completed[family].increment(1);
        self.queue_wait[family].record(waited_seconds);
    }

    /// Counts a request served on the thread that read it.
    pub fn served_inline(&self, family: Family) {
        self.served_inline[family].increment(1);
    }

    /// Counts a refused request and how long it waited for its answer.
    pub fn rejected(&self, family: Family, reason: &Reason) {
        self.rejected[family][reason.index()].increment(1);
        self.busy_answer_wait[family].record(reason.queue_wait().as_secs_f64());
    }

    /// Refreshes the gauges of the queues and the store.
    pub fn refresh(&self, queues: &PerFamily<Arc<RequestQueue<Job>>>, store: &MessageStore) {
        for (family, q) in queues.iter() {
            self.queue_len[family].set(q.len() as f64);
            self.queue_capacity[family].set(q.capacity() as f64);
        }
        self.refresh_shares(queues);
        self.lock_held.set(store.lock_time_mills() as f64 / 1000.0);
        self.dispatch_behind
            .set(store.dispatch_behind_bytes() as f64);
        self.unflushed.set(
            store
                .max_physical_offset()
                .saturating_sub(store.flushed_physical_offset()) as f64,
        );
        // Both 0 when the pool is off.
        let (available, total) = match store.remain_transient_store_buffer_numbs() {
            usize::MAX => (0, 0),
            n => (n, store.transient_store_pool_size()),
        };
        self.pool_available.set(available as f64);
        self.pool_total.set(total as f64);
    }
}

impl BrokerMetrics {
    /// Publishes the figures of every share of the send and pull queues,
    /// and zeroes those of shares that are gone.
    fn refresh_shares(&self, queues: &PerFamily<Arc<RequestQueue<Job>>>) {
        let now = Instant::now();
        let mut current = Vec::new();
        for family in [Family::Send, Family::Pull] {
            let queue = family.name();
            for f in queues[family].shares(now) {
                let share = share_label(&f.key).to_owned();
                // In the order of SHARE_GAUGES.
                let values = [
                    f.len as f64,
                    f.head_wait.map_or(0.0, |d| d.as_secs_f64()),
                    f64::from(u8::from(f.shedding)),
                    f64::from(f.weight),
                    f.served as f64,
                ];
                for (name, value) in SHARE_GAUGES.into_iter().zip(values) {
                    gauge!(name, "queue" => queue, "share" => share.clone()).set(value);
                }
                current.push((queue, share));
            }
        }
        let mut published = self
            .share_series
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for (queue, share) in published.iter().filter(|p| !current.contains(p)) {
            for name in SHARE_GAUGES {
                gauge!(name, "queue" => *queue, "share" => share.clone()).set(0.0);
            }
        }
        *published = current;
    }
}

/// The gauges published per share.
const SHARE_GAUGES: [&str; 5] = [
    "sluice_share_queue_length",
    "sluice_share_head_wait_seconds",
    "sluice_share_shedding",
    "sluice_share_weight",
    "sluice_share_served",
];

impl Default for BrokerMetrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Counts one gRPC call by RPC and business code
/// (`sluice_grpc_requests_total{rpc,code}`) and records its latency
/// (`sluice_grpc_request_seconds{rpc}`; ReceiveMessage until its stream
/// is written, Telemetry until the stream is open).
pub fn grpc_call(rpc: &'static str, code: i32, seconds: f64) {
    let name = grpc_protocol::v2::Code::try_from(code).map_or("UNKNOWN", |c| c.as_str_name());
    counter!("sluice_grpc_requests_total", "rpc" => rpc, "code" => name).increment(1);
    histogram!("sluice_grpc_request_seconds", "rpc" => rpc).record(seconds);
}
