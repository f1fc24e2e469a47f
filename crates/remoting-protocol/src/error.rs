//! Errors of the frame codec.

use thiserror::Error;

/// Why a frame could not be decoded. Any of these means the byte stream can
/// no longer be trusted: the connection that produced it should be closed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The length prefix was negative, too small to hold the header-length
    /// word, or larger than the configured maximum frame length.
    #[error(
        "frame length {length} is out of range: a frame needs at least 4 bytes after its \
         length prefix and may be at most {max_frame_len} bytes including the prefix"
    )]
    FrameLength {
        /// The length prefix as sent (bytes following the prefix).
        length: i64,
        /// The configured maximum frame length, prefix included.
        max_frame_len: usize,
    },
    /// The header length word claimed more bytes than the frame holds.
    #[error("header length {header_len} exceeds the {available} bytes left in the frame")]
    HeaderLength {
        /// Header length from the header-length word.
        header_len: usize,
        /// Bytes in the frame after the header-length word.
        available: usize,
    },
    /// The serialization type byte was neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown header serialization type {code} (expected 0 for JSON or 1 for ROCKETMQ)")]
    UnknownSerializeType {
        /// The byte found.
        code: u8,
    },
    /// The JSON header was not valid JSON or had a field of the wrong type.
    #[error("bad JSON header: {source}")]
    Json {
        /// What the JSON parser reported.
        #[source]
        source: serde_json::Error,
    },
    /// The binary header ended before a field it declares.
    #[error("truncated binary header: {field} needs {needed} bytes but only {available} remain")]
    TruncatedBinaryHeader {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: usize,
        /// Bytes left in the header.
        available: usize,
    },
    /// A binary-header length field was negative.
    #[error("negative length {length} for {field} in binary header")]
    NegativeLength {
        /// The field whose length was negative.
        field: &'static str,
        /// The length found.
        length: i64,
    },
    /// A binary-header string was not UTF-8.
    #[error("{field} in binary header is not valid UTF-8")]
    InvalidUtf8 {
        /// The field holding the string.
        field: &'static str,
    },
    /// Reading from the transport failed.
    #[error("transport error while reading frames: {0}")]
    Io(#[from] std::io::Error),
}

/// Why a command could not be encoded.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The encoded frame would exceed the configured maximum frame length.
    #[error("encoded frame of {frame_len} bytes exceeds the maximum frame length of {max_frame_len} bytes")]
    FrameTooLong {
        /// Length of the frame, prefix included.
        frame_len: usize,
        /// The configured maximum.
        max_frame_len: usize,
    },
    /// The header is longer than the 24 bits of the header-length word allow.
    #[error(
        "header of {header_len} bytes exceeds the 16777215-byte limit of the header-length word"
    )]
    HeaderTooLong {
        /// Length of the encoded header.
        header_len: usize,
    },
    /// A value does not fit the binary header's field width.
    #[error(
        "{field} value {value} does not fit the binary header's 16-bit field; use the JSON header"
    )]
    BinaryFieldOutOfRange {
        /// The field (`code` or `version`).
        field: &'static str,
        /// The value that did not fit.
        value: i64,
    },
    /// A string in the binary header is longer than its length field allows.
    #[error("{field} of {len} bytes is too long for the binary header")]
    BinaryStringTooLong {
        /// The field holding the string.
        field: &'static str,
        /// Its length.
        len: usize,
    },
    /// Writing to the transport failed.
    #[error("transport error while writing frames: {0}")]
    Io(#[from] std::io::Error),
}
