//! Body compression as RocketMQ's Java client does it: zlib at level 5,
//! marked in `sysFlag` by `COMPRESSED | COMPRESSION_ZLIB` (`0x1 | 0x300`).
//! Producers use [`compress`], consumers [`decompress_body`].

use std::io::{Read, Write};

use crate::flags::{COMPRESSED, COMPRESSION_TYPE_MASK, COMPRESSION_ZLIB};
use bytes::Bytes;
use flate2::{read::ZlibDecoder, write::ZlibEncoder, Compression};
use thiserror::Error;

/// The zlib level of the Java client (`rocketmq.message.compressLevel`).
pub const COMPRESS_LEVEL: u32 = 5;

/// Why a stored body could not be decompressed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecompressError {
    /// The body is marked compressed with a codec this client does not
    /// implement: LZ4 (`0x100`) or Zstandard (`0x200`).
    #[error("unsupported compression type {compression_type:#x} in sysFlag {sys_flag:#x}")]
    UnsupportedType {
        /// The compression type bits (`sysFlag & 0x700`).
        compression_type: i32,
        /// The whole `sysFlag`.
        sys_flag: i32,
    },
    /// The body inflates to more than the limit (a decompression bomb, or
    /// a body larger than the receiver accepts); inflating stopped there.
    #[error("compressed body of {len} bytes inflates to more than {limit} bytes")]
    TooLarge {
        /// The compressed body's length.
        len: usize,
        /// The most inflated bytes accepted.
        limit: usize,
    },
    /// The body is not valid zlib data.
    #[error("corrupt zlib body of {len} bytes")]
    Corrupt {
        /// The compressed body's length.
        len: usize,
        /// What the decoder reported.
        #[source]
        source: std::io::Error,
    },
}

/// Returns a message's original body: `body` itself when `sys_flag` has no
/// `COMPRESSED` bit, else the zlib-inflated body, inflated no further than
/// `limit` bytes.
///
/// A compression type of 0 with the `COMPRESSED` bit is read as zlib, as the
/// Java client does for messages from clients older than the type bits.
///
/// # Errors
/// [`DecompressError::UnsupportedType`] for LZ4 or Zstandard bodies,
/// [`DecompressError::TooLarge`] past `limit` and
/// [`DecompressError::Corrupt`] when inflating fails.
pub fn decompress_body(sys_flag: i32, body: Bytes, limit: usize) -> Result<Bytes, DecompressError> {
    if sys_flag & COMPRESSED == 0 {
        return Ok(body);
    }
    let compression_type = sys_flag & COMPRESSION_TYPE_MASK;
    if compression_type != 0 && compression_type != COMPRESSION_ZLIB {
        return Err(DecompressError::UnsupportedType {
            compression_type,
            sys_flag,
        });
    }
    // Compressed bodies usually shrink several-fold; start with room for that.
    let mut out = Vec::with_capacity(body.len().saturating_mul(4).min(limit));
    ZlibDecoder::new(&body[..])
        .take(u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1))
        .read_to_end(&mut out)
        .map_err(|source| DecompressError::Corrupt {
            len: body.len(),
            source,
        })?;
    if out.len() > limit {
        return Err(DecompressError::TooLarge {
            len: body.len(),
            limit,
        });
    }
    Ok(Bytes::from(out))
}

/// The sysFlag bits of a body compressed by [`compress`].
pub const ZLIB_SYS_FLAG: i32 = COMPRESSED | COMPRESSION_ZLIB;

/// Zlib-compresses a body at [`COMPRESS_LEVEL`]; `None` if the encoder
/// fails, in which case the body is sent as it is (as the Java client does).
pub fn compress(body: &[u8]) -> Option<Bytes> {
    let mut encoder = ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2),
        Compression::new(COMPRESS_LEVEL),
    );
    encoder.write_all(body).ok()?;
    encoder.finish().ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use crate::flags::COMPRESSION_LZ4;

    use super::*;

    #[test]
    fn a_compressed_body_inflates_to_the_original() {
        let original = Bytes::from("sluice ".repeat(1000));
        let packed = compress(&original).unwrap();
        assert!(packed.len() < original.len() / 10);
        assert_eq!(
            decompress_body(ZLIB_SYS_FLAG, packed.clone(), 1 << 20).unwrap(),
            original
        );
        assert_eq!(
            decompress_body(COMPRESSED, packed, 1 << 20).unwrap(),
            original,
            "type 0 is zlib, as for old Java clients"
        );
    }

    #[test]
    fn uncompressed_bodies_pass_through_and_other_codecs_are_refused() {
        let body = Bytes::from_static(b"plain");
        assert_eq!(decompress_body(0x2, body.clone(), 1 << 20).unwrap(), body);
        assert!(matches!(
            decompress_body(COMPRESSED | COMPRESSION_LZ4, body.clone(), 1 << 20),
            Err(DecompressError::UnsupportedType {
                compression_type: 0x100,
                ..
            })
        ));
        assert!(matches!(
            decompress_body(ZLIB_SYS_FLAG, body, 1 << 20),
            Err(DecompressError::Corrupt { len: 5, .. })
        ));
    }

    #[test]
    fn a_decompression_bomb_is_refused_without_inflating_it() {
        // 64 MiB of zeros compress to about 64 KiB.
        let bomb = compress(&vec![0u8; 64 << 20]).unwrap();
        assert!(bomb.len() < 100 << 10);
        match decompress_body(ZLIB_SYS_FLAG, bomb.clone(), 4 << 20) {
            Err(DecompressError::TooLarge { limit, .. }) => assert_eq!(limit, 4 << 20),
            other => panic!("a bomb was inflated: {:?}", other.map(|b| b.len())),
        }
        assert_eq!(
            decompress_body(ZLIB_SYS_FLAG, bomb, 64 << 20)
                .unwrap()
                .len(),
            64 << 20,
            "exactly at the limit is fine"
        );
    }
}
