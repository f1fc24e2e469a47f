//! Apache RocketMQ's remoting protocol, byte for byte: commands, request and
//! response codes, the frame codec with both header encodings, typed headers
//! and the bodies RocketMQ components exchange.
//!
//! A pure codec: no I/O and no runtime. [`codec::RemotingCodec`] plugs the
//! pure functions into `tokio_util::codec` for callers that want it.
//!
//! # Wire format
//!
//! ```text
//! 0       4                   8            8+H          4+L
//! +-------+-------------------+------------+------------+
//! | L i32 | type u8 | H u24   | header (H) | body       |
//! +-------+-------------------+------------+------------+
//! ```
//!
//! `L` counts the bytes after itself; the type byte is 0 for a JSON header
//! and 1 for the binary ("ROCKETMQ") header; integers are big-endian.
//!
//! # Invariants worth naming
//! - Decoding never panics and never allocates a claimed length before
//!   checking it against the maximum frame length.
//! - A command decodes to what was encoded, in both header encodings, except
//!   that the binary header cannot carry codes or versions beyond 16 bits
//!   (encoding refuses them) and treats empty strings as absent.
//! - Codes are open sets: unknown request, response and language codes are
//!   kept, not refused.
#![deny(clippy::unwrap_used)]

pub mod acl;
mod binary;
pub mod body;
pub mod code;
pub mod codec;
pub mod command;
pub mod error;
pub mod header;
mod json;
mod names;

pub use code::{LanguageCode, RequestCode, ResponseCode, SerializeType};
pub use codec::{decode_frame, encode_frame, RemotingCodec, DEFAULT_MAX_FRAME_LEN};
pub use command::{ExtFields, ExtString, RemotingCommand};
pub use error::{DecodeError, EncodeError};
pub use header::{CommandHeader, HeaderError};
/// The message model shared with the store: properties, ids, tag hashes, flags.
pub use message_model as message;
pub use names::{AUTO_CREATE_TOPIC, RETRY_AFTER_MS};
