//! The message model that the wire protocol, the store and the clients
//! share: property strings, well-known property keys, message ids, tag
//! hashes, flag bits, RocketMQ's CommitLog record layout and the wall clock
//! that born and store timestamps come from.
//!
//! Everything here follows Apache RocketMQ's definitions byte for byte, so a
//! message written by a RocketMQ client reads back the same way here and the
//! other way round. The crate has no I/O and no dependency on either the
//! network layer or the storage layer.
//!
//! # Invariants worth naming
//! - Property strings are `key 0x01 value 0x02` repeated; encoding and
//!   decoding are inverse for every map whose keys and values are non-empty
//!   and free of the two separator characters.
//! - Message ids render as uppercase hexadecimal, 32 characters for an IPv4
//!   host and 56 for an IPv6 host.
//! - A record that [`record::encode`] wrote and [`record::patch`] completed
//!   reads back field for field through [`record::check`].
#![deny(clippy::unwrap_used)]

pub mod clock;
pub mod compression;
pub mod flags;
pub mod id;
pub mod properties;
pub mod record;
pub mod tags;

pub use clock::now_ms;
pub use id::{IdError, MessageId, UniqueIdGenerator, UniqueKey};
pub use properties::{Properties, PropertiesError};
pub use record::MessageToStore;
pub use tags::tag_hash;
