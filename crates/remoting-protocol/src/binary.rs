//! RocketMQ's compact binary header (serialization type 1, "ROCKETMQ").
//!
//! ```text
//! code i16 | language u8 | version i16 | opaque i32 | flag i32
//! | remarkLen i32 | remark | extLen i32 | { keyLen i16 | key | valLen i32 | val }*
//! ```
//!
//! All integers are big-endian. A zero-length remark or ext value stands for
//! "absent", so encoding skips empty ext values and decoding drops them.

use bytes::{BufMut, BytesMut};

use crate::{
    code::{LanguageCode, SerializeType},
    command::{ExtFields, ExtString, RemotingCommand},
    error::{DecodeError, EncodeError},
};

/// Size of the fixed part of the header (everything before the remark).
const FIXED_LEN: usize = 17;

/// Appends the binary header of `cmd` to `dst`.
pub(crate) fn encode_header(cmd: &RemotingCommand, dst: &mut BytesMut) -> Result<(), EncodeError> {
    let code = i16::try_from(cmd.code).map_err(|_| EncodeError::BinaryFieldOutOfRange {
        field: "code",
        value: i64::from(cmd.code),
    })?;
    let version = i16::try_from(cmd.version).map_err(|_| EncodeError::BinaryFieldOutOfRange {
        field: "version",
        value: i64::from(cmd.version),
    })?;
    let remark = cmd.remark.as_deref().unwrap_or("");
    let remark_len = len_i32("remark", remark.len())?;
    let ext_len = ext_fields_len(&cmd.ext_fields)?;

    dst.reserve(FIXED_LEN + 4 + remark.len() + ext_len);
    dst.put_i16(code);
    dst.put_u8(cmd.language.code());
    dst.put_i16(version);
    dst.put_i32(cmd.opaque);
    dst.put_i32(cmd.flag);
    dst.put_i32(remark_len);
    dst.put_slice(remark.as_bytes());
    dst.put_i32(len_i32("extFields", ext_len)?);
    for (k, v) in cmd.ext_fields.iter().filter(|(_, v)| !v.is_empty()) {
        // Lengths were checked by ext_fields_len.
        dst.put_i16(k.len() as i16);
        dst.put_slice(k.as_bytes());
        dst.put_i32(v.len() as i32);
        dst.put_slice(v.as_bytes());
    }
    Ok(())
}

/// Parses a binary header into a command without a body.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut r = Reader { buf: bytes };
    let code = r.i16("code")?;
    let language = LanguageCode::from_code(r.u8("language")?);
    let version = r.i16("version")?;
    let opaque = r.i32("opaque")?;
    let flag = r.i32("flag")?;
    let remark_len = r.len32("remark length", "remark")?;
    let remark = r.string(remark_len, "remark")?;
    let ext_len = r.len32("extFields length", "extFields")?;
    let mut ext = Reader {
        buf: r.take(ext_len, "extFields")?,
    };
    let mut ext_fields = ExtFields::default();
    while !ext.buf.is_empty() {
        let key_len = ext.i16("ext key length")?;
        let key_len = usize::try_from(key_len).map_err(|_| DecodeError::NegativeLength {
            field: "ext key",
            length: i64::from(key_len),
        })?;
        let key = ext.str(key_len, "ext key")?;
        let val_len = ext.len32("ext value length", "ext value")?;
        let val = ext.str(val_len, "ext value")?;
        if !key.is_empty() && !val.is_empty() {
            ext_fields.insert(ExtString::from(key), ExtString::from(val));
        }
    }
    Ok(RemotingCommand {
        code: i32::from(code),
        language,
        version: i32::from(version),
        opaque,
        flag,
        remark: (!remark.is_empty()).then_some(remark),
        ext_fields,
        body: bytes::Bytes::new(),
        serialize_type: SerializeType::RocketMq,
    })
}

fn ext_fields_len(ext: &ExtFields) -> Result<usize, EncodeError> {
    let mut total = 0usize;
    for (k, v) in ext.iter().filter(|(_, v)| !v.is_empty()) {
        if i16::try_from(k.len()).is_err() {
            return Err(EncodeError::BinaryStringTooLong {
                field: "ext key",
                len: k.len(),
            });
        }
        len_i32("ext value", v.len())?;
        total += 2 + k.len() + 4 + v.len();
    }
    Ok(total)
}

fn len_i32(field: &'static str, len: usize) -> Result<i32, EncodeError> {
    i32::try_from(len).map_err(|_| EncodeError::BinaryStringTooLong { field, len })
}

/// A bounds-checked big-endian reader over the header bytes.
struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::TruncatedBinaryHeader {
                field,
                needed: n,
                available: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N, field)?);
        Ok(out)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(field)?[0])
    }

    fn i16(&mut self, field: &'static str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.array(field)?))
    }

    fn i32(&mut self, field: &'static str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.array(field)?))
    }

    /// Reads an i32 length and checks that it is not negative.
    fn len32(&mut self, field: &'static str, of: &'static str) -> Result<usize, DecodeError> {
        let len = self.i32(field)?;
        usize::try_from(len).map_err(|_| DecodeError::NegativeLength {
            field: of,
            length: i64::from(len),
        })
    }

    fn string(&mut self, len: usize, field: &'static str) -> Result<String, DecodeError> {
        self.str(len, field).map(str::to_owned)
    }

    fn str(&mut self, len: usize, field: &'static str) -> Result<&'a str, DecodeError> {
        let raw = self.take(len, field)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { field })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route_query() -> RemotingCommand {
        let mut cmd = RemotingCommand {
            code: 105,
            language: LanguageCode::Java,
            version: 479,
            opaque: 1,
            serialize_type: SerializeType::RocketMq,
            ..RemotingCommand::default()
        };
        cmd.set_ext("topic", "T");
        cmd
    }

    #[test]
    fn encodes_the_spec_example_byte_for_byte() {
        let mut out = BytesMut::new();
        encode_header(&route_query(), &mut out).unwrap();
        let expected = [
            0x00, 0x69, 0x00, 0x01, 0xDF, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0C, 0x00,
            0x05, b't', b'o', b'p', b'i', b'c', 0, 0, 0, 1, b'T',
        ];
        assert_eq!(&out[..], &expected[..]);
        assert_eq!(decode_header(&out).unwrap(), route_query());
    }

    #[test]
    fn codes_beyond_i16_are_refused_not_truncated() {
        let cmd = RemotingCommand {
            code: 200_050,
            ..route_query()
        };
        assert!(matches!(
            encode_header(&cmd, &mut BytesMut::new()),
            Err(EncodeError::BinaryFieldOutOfRange {
                field: "code",
                value: 200_050
            })
        ));
    }

    #[test]
    fn empty_ext_values_are_absent() {
        let mut cmd = route_query();
        cmd.set_ext("empty", "");
        let mut out = BytesMut::new();
        encode_header(&cmd, &mut out).unwrap();
        assert_eq!(decode_header(&out).unwrap(), route_query());
    }

    #[test]
    fn truncated_and_inconsistent_headers_are_errors() {
        let mut out = BytesMut::new();
        encode_header(&route_query(), &mut out).unwrap();
        for cut in 0..out.len() {
            assert!(decode_header(&out[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad = out.to_vec();
        bad[13..17].copy_from_slice(&1000i32.to_be_bytes());
        assert!(matches!(
            decode_header(&bad),
            Err(DecodeError::TruncatedBinaryHeader {
                field: "remark",
                needed: 1000,
                ..
            })
        ));
        bad[13..17].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(matches!(
            decode_header(&bad),
            Err(DecodeError::NegativeLength { .. })
        ));
    }
}
