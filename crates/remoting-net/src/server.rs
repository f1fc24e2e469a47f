//! The remoting server: a listener with a connection limit, and per
//! connection a reader task and a writer task.

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use remoting_protocol::{RemotingCommand, DEFAULT_MAX_FRAME_LEN};
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::{TcpListener, TcpStream},
    sync::{mpsc, OwnedSemaphorePermit, Semaphore},
};
use tokio_util::sync::CancellationToken;

use crate::{
    io::{read_frames, write_frames, ReadEnd, WriteBudget},
    tls::{negotiate, Accepted, ServerTls},
};

/// Settings of a server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Most connections open at once; further peers wait in the backlog.
    pub max_connections: usize,
    /// Most connections open at once from one IP address; a further one is
    /// closed as soon as it is accepted.
    pub max_connections_per_address: usize,
    /// Largest frame accepted or sent, 4-byte prefix included.
    pub max_frame_len: usize,
    /// Close a connection that sends nothing for this long.
    pub idle_timeout: Option<Duration>,
    /// Most bytes of answers queued for one connection and not yet written;
    /// past it the connection's further requests are not read until the
    /// peer has read enough. One slow reader cannot grow memory beyond it.
    pub write_queue_bytes: usize,
    /// Close a connection when a write to it makes no progress for this
    /// long (the peer does not read).
    pub write_timeout: Option<Duration>,
    /// TLS on this port: its mode and certificate. Without it every
    /// connection is plain, as with [`TlsMode::Disabled`](crate::TlsMode).
    pub tls: Option<Arc<ServerTls>>,
    /// With `tls`: how long a TLS handshake may take. (A connection that
    /// sends nothing at all is closed after `idle_timeout`, plain or not.)
    pub handshake_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            idle_timeout: Some(Duration::from_secs(120)),
            write_queue_bytes: 64 * 1024 * 1024,
            write_timeout: Some(Duration::from_secs(30)),
            tls: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// What a server does with requests.
pub trait Handler: Send + Sync + 'static {
    /// Called on the connection's reader task for each request, in arrival
    /// order. Must not block: queue the work and answer later through
    /// [`Connection::send`].
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand);

    /// What the server calls for each request: [`Handler::on_request`],
    /// told also whether more of the connection's bytes are already read
    /// and wait behind this request. A handler that serves some requests
    /// right on the reader task (briefly) does so only when none wait, so
    /// that no request waits unseen behind another.
    fn on_request_read(&self, conn: &Arc<Connection>, request: RemotingCommand, more: bool) {
        let _ = more;
        self.on_request(conn, request);
    }

    /// Called once when the connection has closed.
    fn on_close(&self, _conn: &Arc<Connection>) {}
}

/// One accepted connection, as handlers see it.
#[derive(Debug)]
pub struct Connection {
    id: u64,
    peer: SocketAddr,
    tx: mpsc::UnboundedSender<(RemotingCommand, usize)>,
    cancel: CancellationToken,
    budget: Arc<WriteBudget>,
}

impl Connection {
    /// A process-unique id of the connection.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Queues a command (usually a response) for the writer task. Callable
    /// from any thread. Returns false if the connection has closed.
    pub fn send(&self, cmd: RemotingCommand) -> bool {
        let bytes = cmd.size_estimate();
        // Counted before the writer can see it, so it is never taken off
        // before it was added.
        self.budget.add(bytes);
        if self.tx.send((cmd, bytes)).is_err() {
            self.budget.written(bytes);
            return false;
        }
        true
    }

    /// Bytes queued for this connection and not yet written.
    pub fn queued_bytes(&self) -> usize {
        self.budget.queued()
    }

    /// Closes the connection after writing what is already queued.
    pub fn close(&self) {
        self.cancel.cancel();
    }

    /// Reports whether the connection is closing or closed.
    pub fn is_closed(&self) -> bool {
        self.cancel.is_cancelled() || self.tx.is_closed()
    }
}

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// Accepts connections on `listener` until `shutdown` fires, serving each
/// with `handler`. Returns once the listener has stopped; connections close
/// when `shutdown` fires, after writing what was queued for them.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    options: ServerOptions,
    shutdown: CancellationToken,
) {
    let limits =
        ConnectionLimits::new(options.max_connections, options.max_connections_per_address);
    while let Some((stream, peer, permit)) = limits.accept(&listener, &shutdown).await {
        let handler = Arc::clone(&handler);
        let options = options.clone();
        let cancel = shutdown.child_token();
        tokio::spawn(async move {
            let _ = stream.set_nodelay(true);
            let accepted = match options.tls.clone() {
                None => Ok(Accepted::Plain(stream)),
                Some(tls) => negotiate(
                    &tls,
                    stream,
                    options.idle_timeout,
                    options.handshake_timeout,
                )
                .await
                .inspect_err(|refused| {
                    tracing::info!(%peer, tls_mode = %tls.mode(), cause = %refused,
                                "connection closed");
                }),
            };
            match accepted {
                Ok(Accepted::Plain(stream)) => {
                    let (reader, writer) = stream.into_split();
                    run_connection(reader, writer, peer, handler, options, cancel).await;
                }
                Ok(Accepted::Tls(session)) => {
                    let (reader, writer) = tokio::io::split(*session);
                    run_connection(reader, writer, peer, handler, options, cancel).await;
                }
                Err(_) => {}
            }
            drop(permit);
        });
    }
}

/// The connection limits of one listener: a total, and a share per IP
/// address.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    total: Arc<Semaphore>,
    per_address: Arc<Mutex<HashMap<IpAddr, usize>>>,
    max_per_address: usize,
}

/// A connection's place in its listener's limits; given back on drop.
#[derive(Debug)]
pub struct ConnectionPermit {
    _total: OwnedSemaphorePermit,
    _slot: AddressSlot,
}

impl ConnectionLimits {
    /// At most `max_total` connections open at once (further peers wait in
    /// the listen backlog), at most `max_per_address` of them from one IP
    /// address (a further one is closed as soon as it is accepted).
    pub fn new(max_total: usize, max_per_address: usize) -> Self {
        Self {
            total: Arc::new(Semaphore::new(max_total.max(1))),
            per_address: Arc::default(),
            max_per_address: max_per_address.max(1),
        }
    }

    /// Waits for a free place, then for a connection that is within its
    /// address's share; `None` once `shutdown` fires. Accept errors (such
    /// as too many open files) are logged and retried with a back-off.
    pub async fn accept(
        &self,
        listener: &TcpListener,
        shutdown: &CancellationToken,
    ) -> Option<(TcpStream, SocketAddr, ConnectionPermit)> {
        let mut backoff = Duration::from_millis(100);
        let total = tokio::select! {
            () = shutdown.cancelled() => return None,
            permit = Arc::clone(&self.total).acquire_owned() => permit.ok()?,
        };
        loop {
            let accepted = tokio::select! {
                () = shutdown.cancelled() => return None,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, peer)) => {
                    match AddressSlot::take(&self.per_address, peer.ip(), self.max_per_address) {
                        Some(slot) => {
                            return Some((
                                stream,
                                peer,
                                ConnectionPermit {
                                    _total: total,
                                    _slot: slot,
                                },
                            ))
                        }
                        None => {
                            tracing::warn!(%peer, limit = self.max_per_address,
                                "too many connections from one address; closing the new one");
                            drop(stream);
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(cause = %e, retry_in_ms = backoff.as_millis() as u64, "failed to accept");
                    tokio::select! {
                        () = shutdown.cancelled() => return None,
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(64));
                }
            }
        }
    }
}

/// One open connection's place in its address's count; given back on drop.
#[derive(Debug)]
struct AddressSlot {
    counts: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl AddressSlot {
    /// A place for a connection from `ip`, unless it has `limit` already.
    fn take(counts: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, limit: usize) -> Option<Self> {
        let mut map = counts.lock().unwrap_or_else(PoisonError::into_inner);
        let n = map.entry(ip).or_default();
        if *n >= limit.max(1) {
            return None;
        }
        *n += 1;
        Some(Self {
            counts: Arc::clone(counts),
            ip,
        })
    }
}

impl Drop for AddressSlot {
    fn drop(&mut self) {
        let mut map = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

#[tracing::instrument(skip_all, fields(peer = %peer))]
async fn run_connection<H, R, W>(
    reader: R,
    writer: W,
    peer: SocketAddr,
    handler: Arc<H>,
    options: ServerOptions,
    cancel: CancellationToken,
) where
    H: Handler,
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::unbounded_channel();
    let budget = Arc::new(WriteBudget::new(options.write_queue_bytes.max(1)));
    let conn = Arc::new(Connection {
        id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
        peer,
        tx,
        cancel: cancel.clone(),
        budget: Arc::clone(&budget),
    });
    tracing::debug!(conn = conn.id, "connection open");
    let writer_cancel = cancel.clone();
    let max_frame_len = options.max_frame_len;
    let writer_budget = Arc::clone(&budget);
    let write_timeout = options.write_timeout;
    let writer = tokio::spawn(async move {
        let written = write_frames(
            writer,
            rx,
            max_frame_len,
            &writer_cancel,
            Some(&writer_budget),
            write_timeout,
        )
        .await;
        if written.is_err() {
            // Nothing more can be written: stop reading requests too.
            writer_cancel.cancel();
        }
        written
    });
    let end = read_frames(
        reader,
        options.max_frame_len,
        options.idle_timeout,
        &cancel,
        Some(&budget),
        |cmd, more| {
            if cmd.is_response() {
                tracing::debug!(opaque = cmd.opaque, "response from a client ignored");
            } else {
                handler.on_request_read(&conn, cmd, more);
            }
        },
    )
    .await;
    match &end {
        ReadEnd::Eof | ReadEnd::Cancelled => tracing::debug!(conn = conn.id, "connection closed"),
        ReadEnd::Idle => tracing::info!(conn = conn.id, "closing idle connection"),
        ReadEnd::Truncated => tracing::warn!(
            conn = conn.id,
            "peer closed the connection in the middle of a frame"
        ),
        ReadEnd::Malformed(e) => {
            tracing::warn!(conn = conn.id, cause = %e, "malformed frame; closing the connection")
        }
        ReadEnd::Io(e) => tracing::info!(conn = conn.id, cause = %e, "connection read failed"),
    }
    // Let the writer send what is queued, then stop it.
    cancel.cancel();
    match writer.await {
        Ok(Ok(())) => {}
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::TimedOut => tracing::warn!(
            conn = conn.id,
            queued_bytes = conn.queued_bytes(),
            cause = %e,
            "peer does not read its answers; connection closed"
        ),
        Ok(Err(e)) => tracing::debug!(conn = conn.id, cause = %e, "connection write failed"),
        Err(e) => tracing::error!(conn = conn.id, cause = %e, "connection writer task failed"),
    }
    handler.on_close(&conn);
}
