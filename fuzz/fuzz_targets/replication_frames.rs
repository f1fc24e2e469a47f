//! Feeds arbitrary bytes to both sides' replication decoders, in both
//! framings, split at an arbitrary point. Nothing may panic, a decoded
//! frame re-encodes to the bytes it was read from, and a split changes
//! nothing about what is decoded.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use replication_protocol::{auto_switch, classic};
use tokio_util::codec::{Decoder, Encoder};

const MAX: usize = 1 << 16;

/// Decodes `data` whole and in two pieces; both give the same frames.
fn frames<D: Decoder + Clone>(codec: D, data: &[u8], split: usize) -> Vec<D::Item>
where
    D::Item: PartialEq + std::fmt::Debug,
{
    let whole = decode_all(codec.clone(), &[data]);
    let split = split.min(data.len());
    let pieces = decode_all(codec, &[&data[..split], &data[split..]]);
    assert_eq!(whole, pieces);
    whole
}

fn decode_all<D: Decoder>(mut codec: D, pieces: &[&[u8]]) -> Vec<D::Item> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    for piece in pieces {
        buf.extend_from_slice(piece);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(item)) => out.push(item),
                Ok(None) => break,
                Err(_) => return out,
            }
        }
    }
    out
}

fuzz_target!(|input: (u16, &[u8])| {
    let (split, data) = input;
    let split = usize::from(split);
    let mut wire = BytesMut::new();
    for f in frames(auto_switch::SlaveCodec::new(MAX), data, split) {
        auto_switch::MasterCodec.encode(f, &mut wire).unwrap();
    }
    assert!(data.starts_with(&wire));
    wire.clear();
    for f in frames(auto_switch::MasterCodec, data, split) {
        auto_switch::SlaveCodec::new(MAX)
            .encode(f, &mut wire)
            .unwrap();
    }
    // Handshake flags other than 1 read as false and re-encode as 0, so
    // only the length is the same.
    assert!(wire.len() <= data.len());
    wire.clear();
    for f in frames(classic::SlaveCodec::new(MAX), data, split) {
        classic::MasterCodec.encode(f, &mut wire).unwrap();
    }
    assert!(data.starts_with(&wire));
    wire.clear();
    for f in frames(classic::MasterCodec, data, split) {
        classic::SlaveCodec::new(MAX).encode(f, &mut wire).unwrap();
    }
    assert!(data.starts_with(&wire));
});
