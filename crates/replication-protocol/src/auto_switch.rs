//! The controller-mode framing (`AutoSwitchHAClient` /
//! `AutoSwitchHAConnection` in RocketMQ). Every frame starts with the
//! sender's [`State`].
//!
//! ```text
//! slave -> master
//!   handshake  | state=1 i32 | syncFromLastFile i16 | asyncLearner i16 | brokerId i64 |   16 bytes
//!   report     | state=2 i32 | max offset i64 |                                          12 bytes
//! master -> slave
//!   handshake  | state=1 i32 | body size i32 | max offset i64 | last epoch i32 |        20 bytes
//!              then body size / 12 epoch entries | epoch i32 | start offset i64 |
//!   transfer   | state=2 i32 | body size i32 | offset i64 | epoch i32 |
//!              | epoch start offset i64 | confirm offset i64 |                          36 bytes
//!              then the CommitLog bytes
//! ```
//!
//! A transfer's bytes all belong to its epoch; a transfer with an empty
//! body is a heartbeat that still carries the confirm offset.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::{body_len, wire_len, EpochEntry, FrameError, State, DEFAULT_MAX_BODY};

/// Bytes of a slave's handshake.
pub const SLAVE_HANDSHAKE_SIZE: usize = 4 + 4 + 8;
/// Bytes of a slave's offset report.
pub const SLAVE_REPORT_SIZE: usize = 4 + 8;
/// Bytes of a master's handshake header (before its epoch entries).
pub const MASTER_HANDSHAKE_HEADER_SIZE: usize = 4 + 4 + 8 + 4;
/// Bytes of a master's transfer header (before its CommitLog bytes).
pub const MASTER_TRANSFER_HEADER_SIZE: usize = MASTER_HANDSHAKE_HEADER_SIZE + 8 + 8;
/// Bytes of one epoch entry in a master's handshake.
pub const EPOCH_ENTRY_SIZE: usize = 4 + 8;

/// What a slave sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlaveFrame {
    /// The slave's identity and wishes, first on a connection.
    Handshake {
        /// Start from the master's last CommitLog file instead of its first
        /// when the slave has nothing.
        sync_from_last_file: bool,
        /// The slave replicates but never joins the in-sync replica set.
        async_learner: bool,
        /// The slave's broker id.
        broker_id: i64,
    },
    /// The slave's CommitLog end: everything below is stored there.
    Report {
        /// The slave's CommitLog end offset.
        max_offset: i64,
    },
}

/// A master's handshake: its log end and epoch history, from which the
/// slave finds where its own log stops agreeing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterHandshake {
    /// The master's CommitLog end offset.
    pub max_offset: i64,
    /// The master's newest epoch (-1 without any).
    pub last_epoch: i32,
    /// The master's epochs, oldest first.
    pub epochs: Vec<EpochEntry>,
}

/// CommitLog bytes of one epoch, starting at `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterTransfer {
    /// CommitLog offset of the first byte of `body` (for a heartbeat, where
    /// the next bytes will start).
    pub offset: i64,
    /// The epoch the bytes were written in.
    pub epoch: i32,
    /// Where that epoch starts.
    pub epoch_start_offset: i64,
    /// The master's confirm offset: every byte below it is on all in-sync
    /// replicas.
    pub confirm_offset: i64,
    /// The bytes; empty for a heartbeat.
    pub body: Bytes,
}

/// What a master sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MasterFrame {
    /// The answer to the slave's handshake.
    Handshake(MasterHandshake),
    /// CommitLog bytes or a heartbeat.
    Transfer(MasterTransfer),
}

/// The master's side: reads slave frames, writes master frames.
#[derive(Debug, Clone, Copy, Default)]
pub struct MasterCodec;

impl Decoder for MasterCodec {
    type Item = SlaveFrame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<SlaveFrame>, FrameError> {
        if src.len() < 4 {
            return Ok(None);
        }
        let code = (&src[..4]).get_i32();
        match State::from_code(code) {
            Some(State::Handshake) => {
                if src.len() < SLAVE_HANDSHAKE_SIZE {
                    return Ok(None);
                }
                src.advance(4);
                let sync_from_last_file = src.get_i16() == 1;
                let async_learner = src.get_i16() == 1;
                let broker_id = src.get_i64();
                Ok(Some(SlaveFrame::Handshake {
                    sync_from_last_file,
                    async_learner,
                    broker_id,
                }))
            }
            Some(State::Transfer) => {
                if src.len() < SLAVE_REPORT_SIZE {
                    return Ok(None);
                }
                src.advance(4);
                Ok(Some(SlaveFrame::Report {
                    max_offset: src.get_i64(),
                }))
            }
            _ => Err(FrameError::UnexpectedState(code)),
        }
    }
}

impl Encoder<MasterFrame> for MasterCodec {
    type Error = FrameError;

    fn encode(&mut self, item: MasterFrame, dst: &mut BytesMut) -> Result<(), FrameError> {
        match item {
            MasterFrame::Handshake(h) => {
                let body = h.epochs.len() * EPOCH_ENTRY_SIZE;
                dst.reserve(MASTER_HANDSHAKE_HEADER_SIZE + body);
                dst.put_i32(State::Handshake.code());
                dst.put_i32(wire_len(body)?);
                dst.put_i64(h.max_offset);
                dst.put_i32(h.last_epoch);
                for e in &h.epochs {
                    dst.put_i32(e.epoch);
                    dst.put_i64(e.start_offset);
                }
            }
            MasterFrame::Transfer(t) => {
                dst.reserve(MASTER_TRANSFER_HEADER_SIZE + t.body.len());
                dst.put_i32(State::Transfer.code());
                dst.put_i32(wire_len(t.body.len())?);
                dst.put_i64(t.offset);
                dst.put_i32(t.epoch);
                dst.put_i64(t.epoch_start_offset);
                dst.put_i64(t.confirm_offset);
                dst.put_slice(&t.body);
            }
        }
        Ok(())
    }
}

/// The slave's side: reads master frames, writes slave frames.
#[derive(Debug, Clone, Copy)]
pub struct SlaveCodec {
    max_body: usize,
}

impl SlaveCodec {
    /// A codec that refuses frames whose body exceeds `max_body` bytes.
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
    type Item = MasterFrame;
    type Error = FrameError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<MasterFrame>, FrameError> {
        if src.len() < 8 {
            return Ok(None);
        }
        let mut head = &src[..8];
        let code = head.get_i32();
        let header = match State::from_code(code) {
            Some(State::Handshake) => MASTER_HANDSHAKE_HEADER_SIZE,
            Some(State::Transfer) => MASTER_TRANSFER_HEADER_SIZE,
            _ => return Err(FrameError::UnexpectedState(code)),
        };
        let size = body_len(head.get_i32(), self.max_body)?;
        if header == MASTER_HANDSHAKE_HEADER_SIZE && size % EPOCH_ENTRY_SIZE != 0 {
            return Err(FrameError::RaggedEpochList(size));
        }
        if src.len() < header + size {
            src.reserve(header + size - src.len());
            return Ok(None);
        }
        src.advance(8);
        if header == MASTER_HANDSHAKE_HEADER_SIZE {
            let max_offset = src.get_i64();
            let last_epoch = src.get_i32();
            let epochs = (0..size / EPOCH_ENTRY_SIZE)
                .map(|_| EpochEntry {
                    epoch: src.get_i32(),
                    start_offset: src.get_i64(),
                })
                .collect();
            return Ok(Some(MasterFrame::Handshake(MasterHandshake {
                max_offset,
                last_epoch,
                epochs,
            })));
        }
        let offset = src.get_i64();
        let epoch = src.get_i32();
        let epoch_start_offset = src.get_i64();
        let confirm_offset = src.get_i64();
        let body = src.split_to(size).freeze();
        Ok(Some(MasterFrame::Transfer(MasterTransfer {
            offset,
            epoch,
            epoch_start_offset,
            confirm_offset,
            body,
        })))
    }
}

impl Encoder<SlaveFrame> for SlaveCodec {
    type Error = FrameError;

    fn encode(&mut self, item: SlaveFrame, dst: &mut BytesMut) -> Result<(), FrameError> {
        match item {
            SlaveFrame::Handshake {
                sync_from_last_file,
                async_learner,
                broker_id,
            } => {
                dst.reserve(SLAVE_HANDSHAKE_SIZE);
                dst.put_i32(State::Handshake.code());
                dst.put_i16(i16::from(sync_from_last_file));
                dst.put_i16(i16::from(async_learner));
                dst.put_i64(broker_id);
            }
            SlaveFrame::Report { max_offset } => {
                dst.reserve(SLAVE_REPORT_SIZE);
                dst.put_i32(State::Transfer.code());
                dst.put_i64(max_offset);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn encode_slave(frame: SlaveFrame) -> Vec<u8> {
        let mut out = BytesMut::new();
        SlaveCodec::default().encode(frame, &mut out).unwrap();
        out.to_vec()
    }

    fn encode_master(frame: MasterFrame) -> Vec<u8> {
        let mut out = BytesMut::new();
        MasterCodec.encode(frame, &mut out).unwrap();
        out.to_vec()
    }

    /// Feeds `bytes` one at a time; the frame appears only with the last.
    fn decode_bytewise<D: Decoder>(codec: &mut D, bytes: &[u8]) -> D::Item
    where
        D::Error: std::fmt::Debug,
    {
        let mut input = BytesMut::new();
        for (i, b) in bytes.iter().enumerate() {
            input.put_u8(*b);
            let got = codec.decode(&mut input).unwrap();
            if i + 1 < bytes.len() {
                assert!(got.is_none(), "a frame before its byte {}", bytes.len());
            } else {
                assert!(input.is_empty());
                return got.unwrap();
            }
        }
        unreachable!("empty input")
    }

    #[test]
    fn slave_handshake_golden_bytes() {
        let frame = SlaveFrame::Handshake {
            sync_from_last_file: true,
            async_learner: false,
            broker_id: 2,
        };
        let golden = [
            0, 0, 0, 1, // HANDSHAKE
            0, 1, // syncFromLastFile
            0, 0, // asyncLearner
            0, 0, 0, 0, 0, 0, 0, 2, // brokerId
        ];
        assert_eq!(encode_slave(frame), golden);
        assert_eq!(decode_bytewise(&mut MasterCodec, &golden), frame);
    }

    #[test]
    fn slave_report_golden_bytes() {
        let frame = SlaveFrame::Report {
            max_offset: 0x0102_0304_0506_0708,
        };
        let golden = [0, 0, 0, 2, 1, 2, 3, 4, 5, 6, 7, 8];
        assert_eq!(encode_slave(frame), golden);
        assert_eq!(decode_bytewise(&mut MasterCodec, &golden), frame);
    }

    #[test]
    fn master_handshake_golden_bytes() {
        let frame = MasterFrame::Handshake(MasterHandshake {
            max_offset: 4096,
            last_epoch: 3,
            epochs: vec![
                EpochEntry {
                    epoch: 1,
                    start_offset: 0,
                },
                EpochEntry {
                    epoch: 3,
                    start_offset: 1024,
                },
            ],
        });
        let golden = [
            0, 0, 0, 1, // HANDSHAKE
            0, 0, 0, 24, // two entries
            0, 0, 0, 0, 0, 0, 0x10, 0, // max offset 4096
            0, 0, 0, 3, // last epoch
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, // epoch 1 at 0
            0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 4, 0, // epoch 3 at 1024
        ];
        assert_eq!(encode_master(frame.clone()), golden);
        assert_eq!(decode_bytewise(&mut SlaveCodec::default(), &golden), frame);
    }

    #[test]
    fn master_transfer_golden_bytes() {
        let frame = MasterFrame::Transfer(MasterTransfer {
            offset: 1024,
            epoch: 3,
            epoch_start_offset: 512,
            confirm_offset: 900,
            body: Bytes::from_static(b"xy"),
        });
        let golden = [
            0, 0, 0, 2, // TRANSFER
            0, 0, 0, 2, // body size
            0, 0, 0, 0, 0, 0, 4, 0, // offset 1024
            0, 0, 0, 3, // epoch
            0, 0, 0, 0, 0, 0, 2, 0, // epoch start 512
            0, 0, 0, 0, 0, 0, 3, 0x84, // confirm 900
            b'x', b'y',
        ];
        assert_eq!(encode_master(frame.clone()), golden);
        assert_eq!(decode_bytewise(&mut SlaveCodec::default(), &golden), frame);
    }

    #[test]
    fn bad_frames_are_named() {
        let mut slave = SlaveCodec::new(100);
        let mut input = BytesMut::from(&[0u8, 0, 0, 9, 0, 0, 0, 0][..]);
        assert!(matches!(
            slave.decode(&mut input),
            Err(FrameError::UnexpectedState(9))
        ));
        let mut input = BytesMut::from(&[0u8, 0, 0, 1, 0, 0, 0, 13][..]);
        assert!(matches!(
            slave.decode(&mut input),
            Err(FrameError::RaggedEpochList(13))
        ));
        let mut input = BytesMut::from(&[0u8, 0, 0, 2, 0, 0, 0, 101][..]);
        assert!(matches!(
            slave.decode(&mut input),
            Err(FrameError::BodyTooLarge {
                size: 101,
                max: 100
            })
        ));
        let mut input = BytesMut::from(&[0u8, 0, 0, 0][..]);
        assert!(matches!(
            MasterCodec.decode(&mut input),
            Err(FrameError::UnexpectedState(0))
        ));
    }

    proptest! {
        #[test]
        fn master_frames_round_trip(
            offset in any::<i64>(),
            epoch in any::<i32>(),
            start in any::<i64>(),
            confirm in any::<i64>(),
            body in proptest::collection::vec(any::<u8>(), 0..64),
            epochs in proptest::collection::vec((any::<i32>(), any::<i64>()), 0..8),
        ) {
            let frames = [
                MasterFrame::Transfer(MasterTransfer {
                    offset, epoch, epoch_start_offset: start, confirm_offset: confirm,
                    body: Bytes::from(body),
                }),
                MasterFrame::Handshake(MasterHandshake {
                    max_offset: offset,
                    last_epoch: epoch,
                    epochs: epochs.into_iter().map(|(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect(),
                }),
            ];
            // Both frames back to back in one buffer.
            let mut wire = BytesMut::new();
            for f in &frames {
                MasterCodec.encode(f.clone(), &mut wire).unwrap();
            }
            let mut codec = SlaveCodec::default();
            for f in &frames {
                let got = codec.decode(&mut wire).unwrap();
                prop_assert_eq!(got.as_ref(), Some(f));
            }
            prop_assert!(wire.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let mut input = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = SlaveCodec::new(64).decode(&mut input) {}
            let mut input = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = MasterCodec.decode(&mut input) {}
        }
    }
}
