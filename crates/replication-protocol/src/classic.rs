//! The classic framing, for a static master and its slaves
//! (`DefaultHAClient` / `DefaultHAConnection` in RocketMQ).
//!
//! ```text
//! slave -> master:  | max offset i64 |                         8 bytes
//! master -> slave:  | offset i64 | body size i32 | body ... |  12 + N bytes
//! ```
//!
//! The slave reports its CommitLog end when it appended and at least every
//! heartbeat interval; the master's bytes start at `offset`, which must be
//! the slave's end. A transfer with an empty body is a heartbeat.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::{body_len, wire_len, FrameError, DEFAULT_MAX_BODY};

/// Bytes of a slave's offset report.
pub const REPORT_SIZE: usize = 8;
/// Bytes of a master's transfer header.
pub const TRANSFER_HEADER_SIZE: usize = 8 + 4;

/// CommitLog bytes from the master, starting at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// CommitLog offset of the first byte of `body`.
    pub offset: i64,
    /// The bytes; empty for a heartbeat.
    pub body: Bytes,
}

/// The master's side: reads offset reports, writes transfers.
#[derive(Debug, Clone, Copy, Default)]
pub struct MasterCodec;

impl Decoder for MasterCodec {
    type Item = i64;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<i64>, FrameError> {
        if src.len() < REPORT_SIZE {
            return Ok(None);
        }
        Ok(Some(src.get_i64()))
    }
}

impl Encoder<Transfer> for MasterCodec {
    type Error = FrameError;

    fn encode(&mut self, item: Transfer, dst: &mut BytesMut) -> Result<(), FrameError> {
        let len = wire_len(item.body.len())?;
        dst.reserve(TRANSFER_HEADER_SIZE + item.body.len());
        dst.put_i64(item.offset);
        dst.put_i32(len);
        dst.put_slice(&item.body);
        Ok(())
    }
}

/// The slave's side: reads transfers, writes offset reports.
#[derive(Debug, Clone, Copy)]
pub struct SlaveCodec {
    max_body: usize,
}

impl SlaveCodec {
    /// A codec that refuses transfers whose body exceeds `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        Self { max_body }
    }
}

impl Default for SlaveCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_BODY)
    }
}

impl Decoder for SlaveCodec {
    type Item = Transfer;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Transfer>, FrameError> {
        if src.len() < TRANSFER_HEADER_SIZE {
            return Ok(None);
        }
        let mut header = &src[..TRANSFER_HEADER_SIZE];
        let offset = header.get_i64();
        let size = body_len(header.get_i32(), self.max_body)?;
        if src.len() < TRANSFER_HEADER_SIZE + size {
            src.reserve(TRANSFER_HEADER_SIZE + size - src.len());
            return Ok(None);
        }
        src.advance(TRANSFER_HEADER_SIZE);
        let body = src.split_to(size).freeze();
        Ok(Some(Transfer { offset, body }))
    }
}

impl Encoder<i64> for SlaveCodec {
    type Error = FrameError;

    fn encode(&mut self, max_offset: i64, dst: &mut BytesMut) -> Result<(), FrameError> {
        dst.put_i64(max_offset);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slave_report_is_its_offset_in_eight_big_endian_bytes() {
        let mut out = BytesMut::new();
        SlaveCodec::default()
            .encode(0x0102_0304_0506_0708, &mut out)
            .unwrap();
        assert_eq!(&out[..], [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut master = MasterCodec;
        // Two reports and a partial third: the partial one waits.
        let mut input =
            BytesMut::from(&[0u8, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x20, 0, 0, 0][..]);
        assert_eq!(master.decode(&mut input).unwrap(), Some(0x1000));
        assert_eq!(master.decode(&mut input).unwrap(), Some(0x2000));
        assert_eq!(master.decode(&mut input).unwrap(), None);
        assert_eq!(input.len(), 2);
    }

    #[test]
    fn a_transfer_is_offset_size_and_bytes() {
        let golden = [
            0, 0, 0, 0, 0x40, 0, 0, 0, // offset 1 GiB
            0, 0, 0, 3, // body size
            b'a', b'b', b'c',
        ];
        let mut out = BytesMut::new();
        MasterCodec
            .encode(
                Transfer {
                    offset: 1 << 30,
                    body: Bytes::from_static(b"abc"),
                },
                &mut out,
            )
            .unwrap();
        assert_eq!(&out[..], golden);
        let mut slave = SlaveCodec::default();
        // Byte by byte: nothing until the frame is whole.
        let mut input = BytesMut::new();
        for (i, b) in golden.iter().enumerate() {
            input.put_u8(*b);
            let got = slave.decode(&mut input).unwrap();
            if i + 1 < golden.len() {
                assert_eq!(got, None, "at byte {i}");
            } else {
                assert_eq!(
                    got,
                    Some(Transfer {
                        offset: 1 << 30,
                        body: Bytes::from_static(b"abc")
                    })
                );
            }
        }
        assert!(input.is_empty());
    }

    #[test]
    fn a_heartbeat_has_an_empty_body() {
        let mut input = BytesMut::from(&[0u8, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0][..]);
        assert_eq!(
            SlaveCodec::default().decode(&mut input).unwrap(),
            Some(Transfer {
                offset: 7,
                body: Bytes::new()
            })
        );
    }

    #[test]
    fn oversized_and_negative_bodies_are_refused_before_any_reservation() {
        let mut slave = SlaveCodec::new(16);
        let mut input = BytesMut::from(&[0u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 17][..]);
        assert!(matches!(
            slave.decode(&mut input),
            Err(FrameError::BodyTooLarge { size: 17, max: 16 })
        ));
        let mut input = BytesMut::from(&[0u8, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff][..]);
        assert!(matches!(
            slave.decode(&mut input),
            Err(FrameError::NegativeBody(-1))
        ));
    }
}
