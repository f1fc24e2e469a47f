//! The remoting client: one multiplexed connection per address, responses
//! matched to requests by `opaque`.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use remoting_protocol::{
    acl::{self, Credentials},
    RemotingCommand, DEFAULT_MAX_FRAME_LEN,
};
use thiserror::Error;
use tokio::{
    io::{AsyncRead, AsyncWrite},
    net::TcpStream,
    sync::{mpsc, oneshot},
};
use tokio_util::sync::CancellationToken;

use crate::{
    io::{read_frames, write_frames, ReadEnd},
    tls::ClientTls,
};

/// Why a request got no response.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The connection could not be made.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// No response came within the timeout.
    #[error("no response from {addr} within {timeout_ms} ms (opaque {opaque})")]
    Timeout {
        /// The address.
        addr: String,
        /// The timeout.
        timeout_ms: u64,
        /// The request's opaque.
        opaque: i32,
    },
    /// The connection closed before the response came.
    #[error("connection to {addr} closed before the response came")]
    ConnectionClosed {
        /// The address.
        addr: String,
    },
}

/// Settings of a client.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// How long to wait for a connection (RocketMQ: 3000 ms).
    pub connect_timeout: Duration,
    /// Longest pause between connects to an address that keeps refusing
    /// (the pause starts at 100 ms and doubles per failure). Default 5 s.
    pub max_reconnect_backoff: Duration,
    /// Largest frame accepted or sent, 4-byte prefix included.
    pub max_frame_len: usize,
    /// Serves requests a server sends to this client (such as a broker's
    /// `NOTIFY_CONSUMER_IDS_CHANGED`); without one they are ignored.
    pub on_request: Option<ServerRequests>,
    /// TLS for every connection (RocketMQ's `useTLS`); `None`: plain.
    pub tls: Option<ClientTls>,
    /// Signs every request this client sends (RocketMQ's session
    /// credentials, as its `AclClientRPCHook` signs them): `AccessKey`,
    /// `SecurityToken` if any, and `Signature` are added last, over every
    /// other ext field and the body. Responses to a server's requests are
    /// not signed. `None` sends requests unsigned.
    pub credentials: Option<Credentials>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(3),
            max_reconnect_backoff: Duration::from_secs(5),
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            on_request: None,
            tls: None,
            credentials: None,
        }
    }
}

/// What a client does with a request from a server: called on the
/// connection's reader task with the server's address and the request; the
/// command it returns (if any, and if the request is not oneway) is sent
/// back as the response. It must be quick.
#[derive(Clone)]
pub struct ServerRequests(pub Arc<ServeServerRequest>);

/// The function behind [`ServerRequests`].
pub type ServeServerRequest =
    dyn Fn(&str, &RemotingCommand) -> Option<RemotingCommand> + Send + Sync;

impl std::fmt::Debug for ServerRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ServerRequests")
    }
}

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>>;

/// One connection to a remoting server.
#[derive(Debug)]
pub struct ClientConnection {
    addr: String,
    tx: mpsc::UnboundedSender<RemotingCommand>,
    pending: Pending,
    cancel: CancellationToken,
    /// What every request is signed with, if anything.
    credentials: Option<Arc<Credentials>>,
}

impl ClientConnection {
    /// Connects to `addr` (`host:port`).
    ///
    /// # Errors
    /// [`ClientError::Connect`] when the connection fails or takes too long.
    pub async fn connect(addr: &str, options: &ClientOptions) -> Result<Arc<Self>, ClientError> {
        let failed = |source| ClientError::Connect {
            addr: addr.to_owned(),
            source,
        };
        let timed_out = || {
            failed(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "connect timed out",
            ))
        };
        let deadline = tokio::time::Instant::now() + options.connect_timeout;
        let stream = tokio::time::timeout_at(deadline, TcpStream::connect(addr))
            .await
            .map_err(|_| timed_out())?
            .map_err(failed)?;
        let _ = stream.set_nodelay(true);
        match &options.tls {
            None => {
                let (reader, writer) = stream.into_split();
                Ok(Self::start(addr, reader, writer, options))
            }
            Some(tls) => {
                let session = tokio::time::timeout_at(deadline, tls.connect(addr, stream))
                    .await
                    .map_err(|_| timed_out())?
                    .map_err(failed)?;
                let (reader, writer) = tokio::io::split(session);
                Ok(Self::start(addr, reader, writer, options))
            }
        }
    }

    /// Starts the reader and writer tasks of a connection made to `addr`.
    fn start<R, W>(addr: &str, reader: R, writer: W, options: &ClientOptions) -> Arc<Self>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let pending: Pending = Arc::default();
        let cancel = CancellationToken::new();
        let conn = Arc::new(Self {
            addr: addr.to_owned(),
            tx,
            pending: Arc::clone(&pending),
            cancel: cancel.clone(),
            credentials: options.credentials.clone().map(Arc::new),
        });
        let max = options.max_frame_len;
        let writer_cancel = cancel.clone();
        tokio::spawn(async move {
            if let Err(e) = write_frames(writer, rx, max, &writer_cancel, None, None).await {
                tracing::debug!(cause = %e, "client write failed");
            }
            writer_cancel.cancel();
        });
        let peer = addr.to_owned();
        let on_request = options.on_request.clone();
        let reply_tx = conn.tx.clone();
        tokio::spawn(async move {
            let end = read_frames(reader, max, None, &cancel, None, |cmd, _| {
                if cmd.is_response() {
                    let waiter = pending
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&cmd.opaque);
                    match waiter {
                        Some(w) => {
                            let _ = w.send(cmd);
                        }
                        None => tracing::debug!(
                            peer,
                            opaque = cmd.opaque,
                            "response for no pending request"
                        ),
                    }
                } else if let Some(ServerRequests(serve)) = &on_request {
                    let answer = serve(&peer, &cmd);
                    if let Some(mut answer) = answer.filter(|_| !cmd.is_oneway()) {
                        answer.opaque = cmd.opaque;
                        answer.mark_response();
                        let _ = reply_tx.send(answer);
                    }
                } else {
                    tracing::debug!(peer, code = cmd.code, "request from server ignored");
                }
            })
            .await;
            if let ReadEnd::Malformed(e) = &end {
                tracing::warn!(peer, cause = %e, "malformed frame from server; closing");
            }
            cancel.cancel();
            // Dropping the senders fails every waiter at once.
            pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
        });
        conn
    }

    /// Sends a request and waits for its response; with credentials, the
    /// request is signed first.
    ///
    /// # Errors
    /// [`ClientError::Timeout`] or [`ClientError::ConnectionClosed`].
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        self.sign(&mut request);
        let opaque = request.opaque;
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(opaque, tx);
        if self.is_closed() || self.tx.send(request).is_err() {
            self.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&opaque);
            return Err(self.closed());
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(_)) => Err(self.closed()),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(&opaque);
                Err(ClientError::Timeout {
                    addr: self.addr.clone(),
                    timeout_ms: timeout.as_millis() as u64,
                    opaque,
                })
            }
        }
    }

    /// Sends a oneway request; with credentials, signed first.
    ///
    /// # Errors
    /// [`ClientError::ConnectionClosed`].
    pub fn invoke_oneway(&self, mut request: RemotingCommand) -> Result<(), ClientError> {
        request.mark_oneway();
        self.sign(&mut request);
        if self.is_closed() || self.tx.send(request).is_err() {
            return Err(self.closed());
        }
        Ok(())
    }

    /// Signs `request` with the connection's credentials, if it has any:
    /// the last change before it is queued for encoding.
    fn sign(&self, request: &mut RemotingCommand) {
        if let Some(credentials) = &self.credentials {
            acl::sign(request, credentials);
        }
    }

    /// Requests waiting for a response.
    pub fn pending(&self) -> usize {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Reports whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Closes the connection.
    pub fn close(&self) {
        self.cancel.cancel();
    }

    fn closed(&self) -> ClientError {
        ClientError::ConnectionClosed {
            addr: self.addr.clone(),
        }
    }
}

impl Drop for ClientConnection {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Connections to many servers, made on first use and remade after they close.
#[derive(Debug, Default)]
pub struct RemotingClient {
    options: ClientOptions,
    connections: tokio::sync::Mutex<HashMap<String, Arc<ClientConnection>>>,
    /// Per address: consecutive failed connects and when the next may start.
    backoff: Mutex<HashMap<String, (u32, std::time::Instant)>>,
}

impl RemotingClient {
    /// A client with the given settings.
    pub fn new(options: ClientOptions) -> Self {
        Self {
            options,
            connections: tokio::sync::Mutex::default(),
            backoff: Mutex::default(),
        }
    }

    /// The open connection to `addr`, connecting if there is none. After a
    /// failed connect, further attempts to that address fail at once until a
    /// back-off (100 ms, doubling per failure, at most `max_reconnect_backoff`)
    /// has passed.
    ///
    /// # Errors
    /// [`ClientError::Connect`].
    pub async fn connection(&self, addr: &str) -> Result<Arc<ClientConnection>, ClientError> {
        if let Some(conn) = self.open_connection(addr).await {
            return Ok(conn);
        }
        // After failed connects, wait before trying again (100 ms doubling up
        // to 5 s), so that a dead address costs nothing but a quick error.
        let now = std::time::Instant::now();
        if let Some((failures, retry_at)) = self.backoff_lock().get(addr).copied() {
            if now < retry_at {
                return Err(ClientError::Connect {
                    addr: addr.to_owned(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::ConnectionRefused,
                        format!(
                            "{failures} connect attempt(s) failed; next attempt in {} ms",
                            retry_at.duration_since(now).as_millis()
                        ),
                    ),
                });
            }
        }
        // Connect without holding the map, so that a slow or dead address
        // does not stall requests to the others.
        let fresh = match ClientConnection::connect(addr, &self.options).await {
            Ok(c) => {
                self.backoff_lock().remove(addr);
                c
            }
            Err(e) => {
                let mut backoff = self.backoff_lock();
                let failures = backoff.get(addr).map_or(0, |b| b.0) + 1;
                let delay = Duration::from_millis(100 << (failures - 1).min(6))
                    .min(self.options.max_reconnect_backoff);
                backoff.insert(
                    addr.to_owned(),
                    (failures, std::time::Instant::now() + delay),
                );
                return Err(e);
            }
        };
        let mut conns = self.connections.lock().await;
        if let Some(existing) = conns.get(addr).filter(|c| !c.is_closed()) {
            // Another caller connected first; use theirs.
            fresh.close();
            return Ok(Arc::clone(existing));
        }
        conns.insert(addr.to_owned(), Arc::clone(&fresh));
        Ok(fresh)
    }

    fn backoff_lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, (u32, std::time::Instant)>> {
        self.backoff.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a connection to `addr` is open now (none is made).
    pub async fn is_connected(&self, addr: &str) -> bool {
        self.open_connection(addr).await.is_some()
    }

    async fn open_connection(&self, addr: &str) -> Option<Arc<ClientConnection>> {
        let conns = self.connections.lock().await;
        conns.get(addr).filter(|c| !c.is_closed()).cloned()
    }

    /// Sends a request to `addr` and waits for its response.
    ///
    /// # Errors
    /// [`ClientError`] when there is no response.
    pub async fn invoke(
        &self,
        addr: &str,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        self.connection(addr).await?.invoke(request, timeout).await
    }

    /// Sends a oneway request to `addr`.
    ///
    /// # Errors
    /// [`ClientError`] when it cannot be sent.
    pub async fn invoke_oneway(
        &self,
        addr: &str,
        request: RemotingCommand,
    ) -> Result<(), ClientError> {
        self.connection(addr).await?.invoke_oneway(request)
    }

    /// Closes every connection.
    pub async fn close_all(&self) {
        for (_, conn) in self.connections.lock().await.drain() {
            conn.close();
        }
    }
}
