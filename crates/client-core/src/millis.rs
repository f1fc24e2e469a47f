//! A `Duration` as whole milliseconds in configuration files, as RocketMQ
//! writes its `...Millis` and `...Interval` settings (`#[serde(with)]`).

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};

/// Writes the duration as whole milliseconds.
///
/// # Errors
/// The serializer's.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Reads whole milliseconds.
///
/// # Errors
/// The value is not an unsigned integer.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}
