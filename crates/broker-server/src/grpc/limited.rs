//! The gRPC listener's connections, accepted within the listener's limits
//! (`maxConnections`, `maxConnectionsPerAddress`); each holds its place
//! until it closes.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
};

use remoting_net::{CancellationToken, ConnectionLimits, ConnectionPermit};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
    sync::mpsc,
};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::server::{Connected, TcpConnectInfo};

/// A TCP connection that gives its place back when dropped.
#[derive(Debug)]
pub struct LimitedConn {
    stream: TcpStream,
    _permit: ConnectionPermit,
}

impl AsyncRead for LimitedConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for LimitedConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

impl Connected for LimitedConn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.stream.connect_info()
    }
}

/// The connections of `listener` within `limits`, until `shutdown` fires.
pub fn incoming(
    listener: TcpListener,
    limits: ConnectionLimits,
    shutdown: CancellationToken,
) -> ReceiverStream<io::Result<LimitedConn>> {
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(async move {
        while let Some((stream, _peer, permit)) = limits.accept(&listener, &shutdown).await {
            // Small answers must not wait for Nagle's algorithm.
            let _ = stream.set_nodelay(true);
            let conn = LimitedConn {
                stream,
                _permit: permit,
            };
            if tx.send(Ok(conn)).await.is_err() {
                break;
            }
        }
    });
    ReceiverStream::new(rx)
}
