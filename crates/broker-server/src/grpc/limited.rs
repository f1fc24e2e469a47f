//! The gRPC listener's connections, accepted within the listener's limits
//! (`maxConnections`, `maxConnectionsPerAddress`); each holds its place
//! until it closes. With TLS set up, each connection's first byte tells a
//! TLS handshake from plain HTTP/2 (h2c), and the port's mode decides
//! which it takes, as on the remoting port.

use std::{
    io,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use remoting_net::{
    negotiate, Accepted, CancellationToken, ConnectionLimits, ConnectionPermit, ServerTls,
    TlsServerStream,
};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// A connection, plain or TLS, that gives its place back when dropped.
#[derive(Debug)]
pub struct LimitedConn {
    stream: Stream,
    _permit: ConnectionPermit,
}

#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsServerStream>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

/// Calls `$method` on whichever stream the connection has.
macro_rules! on_stream {
    ($self:ident, $method:ident ( $($arg:expr),* )) => {
        match &mut $self.get_mut().stream {
            Stream::Plain(s) => Pin::new(s).$method($($arg),*),
            Stream::Tls(s) => Pin::new(s.as_mut()).$method($($arg),*),
        }
    };
}

impl AsyncRead for LimitedConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        on_stream!(self, poll_read(cx, buf))
    }
}

impl AsyncWrite for LimitedConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        on_stream!(self, poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        on_stream!(self, poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match &self.stream {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_stream!(self, poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        on_stream!(self, poll_shutdown(cx))
    }
}

impl Connected for LimitedConn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.tcp().connect_info()
    }
}

/// How long a TLS handshake may take, and a connection may stay silent
/// before its first byte, on a port with TLS.
const HANDSHAKE_LIMIT: Duration = Duration::from_secs(10);

/// The connections of `listener` within `limits`, until `shutdown` fires;
/// with `tls`, each after its first byte was looked at (and its handshake
/// done) on a task of its own, so a slow peer holds up no other.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    tls: Option<Arc<ServerTls>>,
    shutdown: CancellationToken,
) -> ReceiverStream<io::Result<LimitedConn>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        while let Some((stream, peer, permit)) = limits.accept(&listener, &shutdown).await {
            // Small answers must not wait for Nagle's algorithm.
            let _ = stream.set_nodelay(true);
            let Some(tls) = &tls else {
                let conn = LimitedConn {
                    stream: Stream::Plain(stream),
                    _permit: permit,
                };
                if tx.send(Ok(conn)).await.is_err() {
                    break;
                }
                continue;
            };
            let (tls, tx) = (Arc::clone(tls), tx.clone());
            tokio::spawn(async move {
                let stream = match negotiate(&tls, stream, Some(HANDSHAKE_LIMIT), HANDSHAKE_LIMIT)
                    .await
                {
                    Ok(Accepted::Plain(s)) => Stream::Plain(s),
                    Ok(Accepted::Tls(s)) => Stream::Tls(s),
                    Err(why) => {
                        tracing::info!(%peer, mode = %tls.mode(), reason = %why, "gRPC connection refused");
                        return;
                    }
                };
                let _ = tx
                    .send(Ok(LimitedConn {
                        stream,
                        _permit: permit,
                    }))
                    .await;
            });
        }
    });
    ReceiverStream::new(rx)
}
