//! The read and write loops that server and client connections share.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use bytes::BytesMut;
use remoting_protocol::{decode_frame, encode_frame, DecodeError, RemotingCommand};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::{mpsc::UnboundedReceiver, Notify},
};
use tokio_util::sync::CancellationToken;

/// Why a read loop ended.
#[derive(Debug)]
pub(crate) enum ReadEnd {
    /// The peer closed the connection between frames.
    Eof,
    /// The peer closed the connection in the middle of a frame.
    Truncated,
    /// A frame could not be decoded.
    Malformed(DecodeError),
    /// Reading failed.
    Io(std::io::Error),
    /// Nothing arrived for the idle timeout.
    Idle,
    /// The connection was asked to close.
    Cancelled,
}

/// The bytes of answers queued for one connection but not yet written, and
/// their limit: past it the connection's requests are not read until the
/// writer has caught up.
#[derive(Debug)]
pub(crate) struct WriteBudget {
    queued: AtomicUsize,
    limit: usize,
    drained: Notify,
}

impl WriteBudget {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            queued: AtomicUsize::new(0),
            limit,
            drained: Notify::new(),
        }
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.queued.load(Ordering::Acquire)
    }

    pub(crate) fn add(&self, bytes: usize) {
        self.queued.fetch_add(bytes, Ordering::AcqRel);
    }

    pub(crate) fn written(&self, bytes: usize) {
        let before = self.queued.fetch_sub(bytes, Ordering::AcqRel);
        if before > self.limit && before - bytes <= self.limit {
            self.drained.notify_waiters();
        }
    }

    fn over(&self) -> bool {
        self.queued() > self.limit
    }

    /// Waits until the queue is within its limit (or `cancel` fires);
    /// returns whether it is.
    async fn wait_within(&self, cancel: &CancellationToken) -> bool {
        loop {
            let drained = self.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if !self.over() {
                return true;
            }
            tokio::select! {
                () = cancel.cancelled() => return false,
                () = drained => {}
            }
        }
    }
}

/// Reads frames until the stream ends, fails or is cancelled, handing each
/// decoded command to `on_frame`. With a `budget`, no further frame is
/// handed over while the connection's unwritten answers exceed it.
pub(crate) async fn read_frames<R: AsyncRead + Unpin>(
    mut reader: R,
    max_frame_len: usize,
    idle: Option<Duration>,
    cancel: &CancellationToken,
    budget: Option<&WriteBudget>,
    mut on_frame: impl FnMut(RemotingCommand, bool),
) -> ReadEnd {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            if let Some(b) = budget {
                if b.over() && !b.wait_within(cancel).await {
                    return ReadEnd::Cancelled;
                }
            }
            match decode_frame(&mut buf, max_frame_len) {
                // Bytes left behind the frame: the peer's next request
                // is already here (whole or in part).
                Ok(Some(cmd)) => on_frame(cmd, !buf.is_empty()),
                Ok(None) => break,
                Err(e) => return ReadEnd::Malformed(e),
            }
        }
        if buf.capacity() - buf.len() < 4096 {
            buf.reserve(64 * 1024);
        }
        let read = async {
            match idle {
                Some(limit) => tokio::time::timeout(limit, reader.read_buf(&mut buf))
                    .await
                    .ok(),
                None => Some(reader.read_buf(&mut buf).await),
            }
        };
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => return ReadEnd::Cancelled,
            outcome = read => outcome,
        };
        match outcome {
            None => return ReadEnd::Idle,
            Some(Ok(0)) if buf.is_empty() => return ReadEnd::Eof,
            Some(Ok(0)) => return ReadEnd::Truncated,
            Some(Ok(_)) => {}
            Some(Err(e)) => return ReadEnd::Io(e),
        }
    }
}

/// Most bytes gathered into one write.
const MAX_BATCH_BYTES: usize = 1 << 20;

/// A command queued for a connection's writer, with what it counts in the
/// connection's write budget (counted once, when it was queued).
pub(crate) trait Outgoing {
    fn command(&self) -> &RemotingCommand;
    fn budgeted(&self) -> usize;
}

/// A client's commands are not budgeted.
impl Outgoing for RemotingCommand {
    fn command(&self) -> &RemotingCommand {
        self
    }
    fn budgeted(&self) -> usize {
        0
    }
}

/// A server's answers, with their size in the write budget
/// ([`RemotingCommand::size_estimate`]).
impl Outgoing for (RemotingCommand, usize) {
    fn command(&self) -> &RemotingCommand {
        &self.0
    }
    fn budgeted(&self) -> usize {
        self.1
    }
}

/// Writes commands from `rx` until it closes or `cancel` fires (then writes
/// what is already queued), coalescing everything ready into one write.
/// With a `budget`, what is written is taken off it; with a `timeout`, a
/// write that cannot finish in that time fails with `TimedOut` (the peer
/// does not read).
pub(crate) async fn write_frames<W: AsyncWrite + Unpin, O: Outgoing>(
    mut writer: W,
    mut rx: UnboundedReceiver<O>,
    max_frame_len: usize,
    cancel: &CancellationToken,
    budget: Option<&WriteBudget>,
    timeout: Option<Duration>,
) -> std::io::Result<()> {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        let first = tokio::select! {
            biased;
            cmd = rx.recv() => cmd,
            () = cancel.cancelled() => {
                rx.close();
                rx.recv().await
            }
        };
        let Some(first) = first else { break };
        buf.clear();
        encode_into(first.command(), &mut buf, max_frame_len);
        let mut budgeted = first.budgeted();
        while buf.len() < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(next) => {
                    encode_into(next.command(), &mut buf, max_frame_len);
                    budgeted += next.budgeted();
                }
                Err(_) => break,
            }
        }
        let written = match timeout {
            Some(limit) => tokio::time::timeout(limit, writer.write_all(&buf))
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        format!(
                            "a write of {} bytes made no progress for {limit:?}",
                            buf.len()
                        ),
                    )
                })?,
            None => writer.write_all(&buf).await,
        };
        written?;
        if let Some(b) = budget {
            b.written(budgeted);
        }
    }
    writer.flush().await?;
    let _ = writer.shutdown().await;
    Ok(())
}

fn encode_into(cmd: &RemotingCommand, buf: &mut BytesMut, max_frame_len: usize) {
    if let Err(e) = encode_frame(cmd, buf, max_frame_len) {
        tracing::error!(code = cmd.code, opaque = cmd.opaque, cause = %e, "cannot encode command; dropped");
    }
}
