//! The `SEND_BATCH_MESSAGE` body: messages encoded back to back.
//!
//! ```text
//! TOTALSIZE i32 | MAGICCODE i32 (0) | BODYCRC i32 (0) | FLAG i32
//! | BODYLEN i32 | body | PROPLEN i16 | properties
//! ```

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::BodyError;

/// Fixed bytes of a batch record besides its body and properties.
const RECORD_OVERHEAD: usize = 4 + 4 + 4 + 4 + 4 + 2;

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BatchEntry {
    /// User flag.
    pub flag: i32,
    /// Message body (a slice of the batch body when decoded).
    pub body: Bytes,
    /// Encoded properties.
    pub properties: String,
}

/// Encodes messages as a batch body.
///
/// # Errors
/// [`BodyError::Batch`] when a message's properties exceed 32767 bytes or a
/// record exceeds `i32::MAX` bytes.
pub fn encode_batch(entries: &[BatchEntry]) -> Result<Bytes, BodyError> {
    let total: usize = entries
        .iter()
        .map(|e| RECORD_OVERHEAD + e.body.len() + e.properties.len())
        .sum();
    let mut out = BytesMut::with_capacity(total);
    for e in entries {
        let offset = out.len();
        let too_long = |reason: String| BodyError::Batch { offset, reason };
        let prop_len = i16::try_from(e.properties.len()).map_err(|_| {
            too_long(format!(
                "properties of {} bytes exceed 32767",
                e.properties.len()
            ))
        })?;
        let size = RECORD_OVERHEAD + e.body.len() + e.properties.len();
        let size = i32::try_from(size).map_err(|_| too_long(format!("record of {size} bytes")))?;
        out.put_i32(size);
        out.put_i32(0);
        out.put_i32(0);
        out.put_i32(e.flag);
        out.put_i32(e.body.len() as i32);
        out.put_slice(&e.body);
        out.put_i16(prop_len);
        out.put_slice(e.properties.as_bytes());
    }
    Ok(out.freeze())
}

/// Decodes a batch body; bodies are zero-copy slices of `body`.
///
/// # Errors
/// [`BodyError::Batch`] naming the record's offset and what was wrong.
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchEntry>, BodyError> {
    let mut entries = Vec::new();
    let mut offset = 0;
    while offset < body.len() {
        let fail = |reason: &str| BodyError::Batch {
            offset,
            reason: reason.to_owned(),
        };
        let mut rec = &body[offset..];
        if rec.len() < RECORD_OVERHEAD {
            return Err(fail("record shorter than its fixed fields"));
        }
        let size = usize::try_from(rec.get_i32()).map_err(|_| fail("negative record size"))?;
        if size < RECORD_OVERHEAD || size > body.len() - offset {
            return Err(fail("record size out of range"));
        }
        let _magic = rec.get_i32();
        let _crc = rec.get_i32();
        let flag = rec.get_i32();
        let body_len = usize::try_from(rec.get_i32()).map_err(|_| fail("negative body length"))?;
        if body_len > size - RECORD_OVERHEAD {
            return Err(fail("body length exceeds record size"));
        }
        let body_start = offset + 20;
        let mut tail = &body[body_start + body_len..offset + size];
        let prop_len =
            usize::try_from(tail.get_i16()).map_err(|_| fail("negative properties length"))?;
        if 20 + body_len + 2 + prop_len != size {
            return Err(fail("record size does not match its body and properties"));
        }
        let properties = std::str::from_utf8(&tail[..prop_len])
            .map_err(|_| fail("properties are not UTF-8"))?
            .to_owned();
        entries.push(BatchEntry {
            flag,
            body: body.slice(body_start..body_start + body_len),
            properties,
        });
        offset += size;
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn record_layout_matches_rocketmq() {
        let bytes = encode_batch(&[BatchEntry {
            flag: 7,
            body: Bytes::from_static(b"hi"),
            properties: "A\u{1}1\u{2}".into(),
        }])
        .unwrap();
        let expected: &[u8] = &[
            0, 0, 0, 28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 2, b'h', b'i', 0, 4, b'A', 1,
            b'1', 2,
        ];
        assert_eq!(&bytes[..], expected);
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let mut good = encode_batch(&[BatchEntry::default()]).unwrap().to_vec();
        good[3] += 1;
        assert!(matches!(
            decode_batch(&Bytes::from(good)),
            Err(BodyError::Batch { offset: 0, .. })
        ));
    }

    proptest! {
        #[test]
        fn batches_round_trip(entries in proptest::collection::vec(
            (any::<i32>(), proptest::collection::vec(any::<u8>(), 0..64), "[a-z]{0,16}"), 0..6)
        ) {
            let entries: Vec<BatchEntry> = entries.into_iter()
                .map(|(flag, body, properties)| BatchEntry { flag, body: body.into(), properties })
                .collect();
            let bytes = encode_batch(&entries).unwrap();
            prop_assert_eq!(decode_batch(&bytes).unwrap(), entries);
        }

        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
            let _ = decode_batch(&Bytes::from(bytes));
        }
    }
}
