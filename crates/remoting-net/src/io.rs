//! The read and write loops that server and client connections share.

use std::time::Duration;

use bytes::BytesMut;
use remoting_protocol::{decode_frame, encode_frame, DecodeError, RemotingCommand};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    sync::mpsc::UnboundedReceiver,
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

/// Reads frames until the stream ends, fails or is cancelled, handing each
/// decoded command to `on_frame`.
pub(crate) async fn read_frames<R: AsyncRead + Unpin>(
    mut reader: R,
    max_frame_len: usize,
    idle: Option<Duration>,
    cancel: &CancellationToken,
    mut on_frame: impl FnMut(RemotingCommand),
) -> ReadEnd {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        loop {
            match decode_frame(&mut buf, max_frame_len) {
                Ok(Some(cmd)) => on_frame(cmd),
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

/// Writes commands from `rx` until it closes or `cancel` fires (then writes
/// what is already queued), coalescing everything ready into one write.
pub(crate) async fn write_frames<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut rx: UnboundedReceiver<RemotingCommand>,
    max_frame_len: usize,
    cancel: &CancellationToken,
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
        encode_into(&first, &mut buf, max_frame_len);
        while buf.len() < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(cmd) => encode_into(&cmd, &mut buf, max_frame_len),
                Err(_) => break,
            }
        }
        writer.write_all(&buf).await?;
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
