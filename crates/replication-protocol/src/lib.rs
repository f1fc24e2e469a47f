//! Apache RocketMQ's master/slave replication protocol, byte for byte: the
//! raw TCP stream on a master's HA port that carries CommitLog bytes to its
//! slaves and their acknowledged offsets back.
//!
//! Two framings exist and are not mixed on one connection:
//! - [`classic`]: a static master and slaves (no controller). The slave
//!   reports its CommitLog end as a bare 8-byte offset; the master sends a
//!   12-byte header (start offset, body size) and the bytes.
//! - [`auto_switch`]: controller mode. Every frame starts with the sender's
//!   connection [`State`]; the slave's handshake names its broker id, the
//!   master's handshake carries its epoch history, and each transfer names
//!   the epoch its bytes belong to and the master's confirm offset.
//!
//! All integers are big-endian. A pure codec: no I/O and no runtime; the
//! codecs plug into `tokio_util::codec`.
//!
//! # Invariants worth naming
//! - Decoding never panics and never reserves a claimed body length before
//!   checking it against the codec's maximum.
//! - A frame decodes to what was encoded.
#![deny(clippy::unwrap_used)]

pub mod auto_switch;
pub mod classic;

use thiserror::Error;

/// A replication connection's state as RocketMQ numbers it
/// (`HAConnectionState` ordinals); the first field of every controller-mode
/// frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Not connected yet (0).
    Ready,
    /// Exchanging identities and epoch histories (1).
    Handshake,
    /// Streaming CommitLog bytes (2).
    Transfer,
    /// Paused (3).
    Suspend,
    /// Closed (4).
    Shutdown,
}

impl State {
    /// The state's number on the wire.
    pub fn code(self) -> i32 {
        match self {
            State::Ready => 0,
            State::Handshake => 1,
            State::Transfer => 2,
            State::Suspend => 3,
            State::Shutdown => 4,
        }
    }

    /// The state a wire number stands for, if any.
    pub fn from_code(code: i32) -> Option<Self> {
        Some(match code {
            0 => State::Ready,
            1 => State::Handshake,
            2 => State::Transfer,
            3 => State::Suspend,
            4 => State::Shutdown,
            _ => return None,
        })
    }
}

/// One entry of a master's epoch history: the epoch and the CommitLog
/// offset its first byte was written at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EpochEntry {
    /// The master epoch the controller granted.
    pub epoch: i32,
    /// The CommitLog offset where the epoch starts.
    pub start_offset: i64,
}

/// Why bytes on a replication connection are not a frame; the connection
/// is closed then.
#[derive(Debug, Error)]
pub enum FrameError {
    /// The state field holds no known state, or one not valid for the frame.
    #[error("replication frame with state {0}, which this side does not accept")]
    UnexpectedState(i32),
    /// The header claims a negative body length.
    #[error("replication frame claims a negative body of {0} bytes")]
    NegativeBody(i32),
    /// The header claims a body larger than this side accepts.
    #[error("replication frame claims a body of {size} bytes; at most {max} are accepted")]
    BodyTooLarge {
        /// Claimed size.
        size: usize,
        /// The codec's maximum.
        max: usize,
    },
    /// A handshake's epoch list is not a whole number of 12-byte entries.
    #[error("master handshake body of {0} bytes is not a whole number of 12-byte epoch entries")]
    RaggedEpochList(usize),
    /// The frame cannot be encoded (a body over 2 GiB).
    #[error("replication frame body of {0} bytes cannot be encoded")]
    Unencodable(usize),
    /// Reading or writing the socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Checks a claimed body length against `max`.
fn body_len(claimed: i32, max: usize) -> Result<usize, FrameError> {
    let size = usize::try_from(claimed).map_err(|_| FrameError::NegativeBody(claimed))?;
    if size > max {
        return Err(FrameError::BodyTooLarge { size, max });
    }
    Ok(size)
}

/// A body length as the 32-bit field carries it.
fn wire_len(len: usize) -> Result<i32, FrameError> {
    i32::try_from(len).map_err(|_| FrameError::Unencodable(len))
}

/// The largest body a slave accepts by default: RocketMQ's slave reads
/// through a 4 MiB buffer, and a master sends at most
/// `haTransferBatchSize` (32 KiB) per frame.
pub const DEFAULT_MAX_BODY: usize = 4 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_keep_rocketmqs_ordinals() {
        for (code, state) in [
            (0, State::Ready),
            (1, State::Handshake),
            (2, State::Transfer),
            (3, State::Suspend),
            (4, State::Shutdown),
        ] {
            assert_eq!(state.code(), code);
            assert_eq!(State::from_code(code), Some(state));
        }
        assert_eq!(State::from_code(5), None);
        assert_eq!(State::from_code(-1), None);
    }

    #[test]
    fn body_lengths_are_checked_before_use() {
        assert!(matches!(
            body_len(-1, 10),
            Err(FrameError::NegativeBody(-1))
        ));
        assert!(matches!(
            body_len(11, 10),
            Err(FrameError::BodyTooLarge { size: 11, max: 10 })
        ));
        assert_eq!(body_len(10, 10).unwrap(), 10);
    }
}
