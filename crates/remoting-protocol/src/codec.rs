//! Frames: length-prefixed commands on a byte stream.
//!
//! ```text
//! length i32 | serializeType u8 + headerLen u24 | header | body
//! ```
//!
//! `length` counts everything after itself (4 + header + body). The maximum
//! frame length counts the prefix too, as RocketMQ's decoder does, so a frame
//! is accepted when `4 + length <= max_frame_len`.
//!
//! [`decode_frame`] and [`encode_frame`] are pure functions over buffers;
//! [`RemotingCodec`] adapts them to `tokio_util::codec`.

use bytes::{Buf, BufMut, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::{
    binary,
    code::SerializeType,
    command::RemotingCommand,
    error::{DecodeError, EncodeError},
    json,
};

/// RocketMQ's default maximum frame length (16 MiB, prefix included).
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 * 1024 * 1024;

/// Largest header the 24-bit header-length field can describe.
pub const MAX_HEADER_LEN: usize = 0x00FF_FFFF;

/// Decodes one frame from the front of `src`.
///
/// Returns `Ok(None)` when `src` does not yet hold a whole frame; in that case
/// nothing is consumed, and `src` is grown to fit the frame only after its
/// length has been checked against `max_frame_len`.
///
/// # Errors
/// [`DecodeError`] when the frame is malformed; the stream is then unusable.
pub fn decode_frame(
    src: &mut BytesMut,
    max_frame_len: usize,
) -> Result<Option<RemotingCommand>, DecodeError> {
    if src.len() < 4 {
        return Ok(None);
    }
    let length = i32::from_be_bytes([src[0], src[1], src[2], src[3]]);
    let frame_len = match usize::try_from(length) {
        Ok(len) if len >= 4 && len <= max_frame_len.saturating_sub(4) => len + 4,
        _ => {
            return Err(DecodeError::FrameLength {
                length: i64::from(length),
                max_frame_len,
            })
        }
    };
    if src.len() < frame_len {
        src.reserve(frame_len - src.len());
        return Ok(None);
    }
    let mut frame = src.split_to(frame_len);
    frame.advance(4);
    let word = frame.get_u32();
    let type_code = (word >> 24) as u8;
    let header_len = (word & 0x00FF_FFFF) as usize;
    if header_len > frame.len() {
        return Err(DecodeError::HeaderLength {
            header_len,
            available: frame.len(),
        });
    }
    let header = frame.split_to(header_len);
    let mut cmd = match SerializeType::from_code(type_code) {
        Some(SerializeType::Json) => json::decode_header(&header)?,
        Some(SerializeType::RocketMq) => binary::decode_header(&header)?,
        None => return Err(DecodeError::UnknownSerializeType { code: type_code }),
    };
    cmd.body = frame.freeze();
    Ok(Some(cmd))
}

/// Appends `cmd` as one frame to `dst`, with its header in
/// `cmd.serialize_type`. On error `dst` is left as it was.
///
/// # Errors
/// [`EncodeError`] when the header or the frame exceeds its limit, or a value
/// does not fit the binary header.
pub fn encode_frame(
    cmd: &RemotingCommand,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<(), EncodeError> {
    let start = dst.len();
    let result = encode_prefix_and_header(cmd, dst, max_frame_len);
    match result {
        Ok(()) => {
            dst.extend_from_slice(&cmd.body);
            Ok(())
        }
        Err(e) => {
            dst.truncate(start);
            Err(e)
        }
    }
}

/// Appends the length prefix, header-length word and header of `cmd` to
/// `dst`, but not its body, so that a writer can send the body from its own
/// buffer (vectored write) without copying it.
///
/// # Errors
/// As [`encode_frame`]; on error `dst` may hold a partial header.
pub fn encode_prefix_and_header(
    cmd: &RemotingCommand,
    dst: &mut BytesMut,
    max_frame_len: usize,
) -> Result<(), EncodeError> {
    let start = dst.len();
    dst.reserve(8 + 128);
    dst.put_u64(0);
    match cmd.serialize_type {
        SerializeType::Json => json::encode_header(cmd, dst),
        SerializeType::RocketMq => binary::encode_header(cmd, dst)?,
    }
    let header_len = dst.len() - start - 8;
    if header_len > MAX_HEADER_LEN {
        return Err(EncodeError::HeaderTooLong { header_len });
    }
    let frame_len = 8 + header_len + cmd.body.len();
    if frame_len > max_frame_len {
        return Err(EncodeError::FrameTooLong {
            frame_len,
            max_frame_len,
        });
    }
    let word = (u32::from(cmd.serialize_type.code()) << 24) | header_len as u32;
    // frame_len <= max_frame_len, which callers keep far below i32::MAX.
    let length = (frame_len - 4) as u32;
    dst[start..start + 4].copy_from_slice(&length.to_be_bytes());
    dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
    Ok(())
}

/// `tokio_util` codec for remoting frames.
#[derive(Debug, Clone, Copy)]
pub struct RemotingCodec {
    max_frame_len: usize,
}

impl RemotingCodec {
    /// Creates a codec with RocketMQ's default maximum frame length.
    pub fn new() -> Self {
        Self::with_max_frame_len(DEFAULT_MAX_FRAME_LEN)
    }

    /// Creates a codec with the given maximum frame length (prefix included),
    /// capped at `i32::MAX` since the length prefix is an i32.
    pub fn with_max_frame_len(max_frame_len: usize) -> Self {
        Self {
            max_frame_len: max_frame_len.min(i32::MAX as usize),
        }
    }

    /// The maximum frame length, prefix included.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl Default for RemotingCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for RemotingCodec {
    type Item = RemotingCommand;
    type Error = DecodeError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<RemotingCommand>, DecodeError> {
        decode_frame(src, self.max_frame_len)
    }
}

impl Encoder<RemotingCommand> for RemotingCodec {
    type Error = EncodeError;

    fn encode(&mut self, cmd: RemotingCommand, dst: &mut BytesMut) -> Result<(), EncodeError> {
        encode_frame(&cmd, dst, self.max_frame_len)
    }
}

impl Encoder<&RemotingCommand> for RemotingCodec {
    type Error = EncodeError;

    fn encode(&mut self, cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), EncodeError> {
        encode_frame(cmd, dst, self.max_frame_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::code::RequestCode;

    #[test]
    fn partial_frames_consume_nothing() {
        let cmd = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(&b"hello"[..]);
        let mut full = BytesMut::new();
        encode_frame(&cmd, &mut full, DEFAULT_MAX_FRAME_LEN).unwrap();
        for cut in 0..full.len() {
            let mut part = BytesMut::from(&full[..cut]);
            assert!(decode_frame(&mut part, DEFAULT_MAX_FRAME_LEN)
                .unwrap()
                .is_none());
            assert_eq!(part.len(), cut);
        }
        let decoded = decode_frame(&mut full, DEFAULT_MAX_FRAME_LEN)
            .unwrap()
            .unwrap();
        assert_eq!(decoded, cmd);
        assert!(full.is_empty());
    }

    #[test]
    fn oversized_length_is_refused_before_any_allocation() {
        let mut src = BytesMut::from(&[0x7F, 0xFF, 0xFF, 0xFF][..]);
        let err = decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN).unwrap_err();
        assert!(matches!(
            err,
            DecodeError::FrameLength {
                length: 2_147_483_647,
                ..
            }
        ));
        assert!(src.capacity() < 1024);
    }

    #[test]
    fn max_frame_len_counts_the_prefix() {
        let cmd = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(vec![7u8; 100]);
        let mut buf = BytesMut::new();
        encode_frame(&cmd, &mut buf, DEFAULT_MAX_FRAME_LEN).unwrap();
        let exact = buf.len();
        assert!(decode_frame(&mut buf.clone(), exact).unwrap().is_some());
        assert!(matches!(
            decode_frame(&mut buf.clone(), exact - 1),
            Err(DecodeError::FrameLength { .. })
        ));
        let mut out = BytesMut::new();
        assert!(matches!(
            encode_frame(&cmd, &mut out, exact - 1),
            Err(EncodeError::FrameTooLong { .. })
        ));
        assert!(out.is_empty());
    }

    #[test]
    fn small_and_negative_lengths_are_refused() {
        for length in [-1i32, 0, 3, i32::MIN] {
            let mut src = BytesMut::from(&length.to_be_bytes()[..]);
            assert!(matches!(
                decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN),
                Err(DecodeError::FrameLength { .. })
            ));
        }
    }

    #[test]
    fn header_longer_than_frame_is_refused() {
        let mut src = BytesMut::new();
        src.put_i32(8);
        src.put_u32(100);
        src.put_u32(0);
        assert!(matches!(
            decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN),
            Err(DecodeError::HeaderLength {
                header_len: 100,
                available: 4
            })
        ));
    }

    #[test]
    fn unknown_serialize_type_is_refused() {
        let mut src = BytesMut::new();
        src.put_i32(4);
        src.put_u32(0x0200_0000);
        assert!(matches!(
            decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN),
            Err(DecodeError::UnknownSerializeType { code: 2 })
        ));
    }
}
