//! Command bodies: the JSON documents RocketMQ components exchange (routes,
//! cluster info, broker registration, heartbeats, key-value tables, broker
//! statistics), the
//! batch-message body and the `key=value` configuration text.
//!
//! JSON from Java components may use fastjson's non-standard output, with
//! unquoted numeric object keys (`{"brokerAddrs":{0:"10.0.0.1:10911"}}`)
//! and objects as keys (`{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}}`);
//! [`from_json`] accepts both of those and standard JSON. [`to_json`] always
//! writes standard JSON; [`to_fastjson`] writes it with every object's
//! fields sorted by name, as fastjson does, and the bodies whose maps are
//! keyed by queues have an `encode` of their own that writes object keys.

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Serialize};
use thiserror::Error;

mod admin;
mod auth;
mod batch;
mod config_text;
mod controller;
mod heartbeat;
pub mod lenient;
mod lock;
mod namesrv;
mod route;
mod stats;
mod subscription;
mod timer;

pub use admin::ResetOffsetBody;
pub use admin::{
    ClientConnection, ConsumeStats, ConsumerConnection, GroupList, OffsetWrapper,
    ProducerConnection, TopicOffset, TopicStatsTable, LANGUAGE_NAMES,
};
pub use admin::{ProducerInfo, ProducerTableInfo};
pub use auth::{AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo};
pub use batch::{decode_batch, encode_batch, BatchEntry};
pub use config_text::{decode_config_text, encode_config_text};
pub use controller::{
    BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody, EpochEntryBody,
    EpochEntryCache, ReplicaIdentity, ReplicasInfo, SyncStateSet,
};
pub use heartbeat::{
    CheckClientRequestBody, ConsumerData, HeartbeatData, ProducerData, SubscriptionData,
    CONSUME_FROM_WHERE, CONSUME_TYPES, MESSAGE_MODELS,
};
pub use lock::{LockBatchRequestBody, LockBatchResponseBody, MessageQueueBody};
pub use namesrv::TopicList;
pub use route::{
    BrokerData, ClusterInfo, DataVersion, KvTable, QueueData, RegisterBrokerBody, TopicConfig,
    TopicConfigSerializeWrapper, TopicRouteData,
};
pub use stats::{java_double, BrokerStatsData, BrokerStatsItem};
pub use subscription::{
    GroupRetryPolicy, SubscriptionGroupConfig, SubscriptionGroupWrapper, GROUP_RETRY_POLICY_TYPES,
};
pub use timer::TimerCheckpoint;

/// Why a body could not be read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum BodyError {
    /// The body was not the JSON document expected.
    #[error("bad JSON body: {source}")]
    Json {
        /// What the parser reported.
        #[source]
        source: serde_json::Error,
    },
    /// A batch body was malformed.
    #[error("bad batch body at byte {offset}: {reason}")]
    Batch {
        /// Offset of the record that failed.
        offset: usize,
        /// What was wrong.
        reason: String,
    },
    /// A text body was not UTF-8.
    #[error("body is not valid UTF-8")]
    InvalidUtf8,
}

/// Parses a JSON body, accepting fastjson's unquoted numeric keys, its
/// object keys (read as strings holding the key's JSON text) and a leading
/// byte-order mark.
///
/// # Errors
/// [`BodyError::Json`] when the text is not the expected document.
pub fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    // fastjson skips a UTF-8 byte-order mark.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice(&quote_bare_keys(bytes)).map_err(|source| BodyError::Json { source })
}

/// Renders a body as standard JSON.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // The body types hold only strings, numbers, maps with string or
    // integer keys, and lists, all of which serialize without error.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Renders a body as fastjson does: standard JSON with the fields of every
/// object (and the keys of every map) sorted by name, and nulls left out
/// where the type skips them.
pub fn to_fastjson<T: Serialize>(value: &T) -> Vec<u8> {
    // Without serde_json's `preserve_order`, a `Value` object is a sorted map.
    serde_json::to_value(value)
        .map(|v| serde_json::to_vec(&v).unwrap_or_default())
        .unwrap_or_default()
}

/// Rewrites fastjson's bare object keys into quoted ones: an unquoted
/// number keeps its text (`{0:1}` → `{"0":1}`), an object key becomes a
/// string holding its JSON text (`{{"a":1}:2}` → `{"{\"a\":1}":2}`).
/// Returns the input unchanged (borrowed) when it has none.
pub fn quote_bare_keys(input: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    // true for an object, false for an array.
    let mut stack: Vec<bool> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < input.len() {
        match input[i] {
            b'"' => {
                i += 1;
                while i < input.len() && input[i] != b'"' {
                    i += if input[i] == b'\\' { 2 } else { 1 };
                }
                expect_key = false;
            }
            b'{' if expect_key => {
                let start = i;
                let Some(end) = object_end(input, start) else {
                    break;
                };
                let buf = out.get_or_insert_with(|| Vec::with_capacity(input.len() + 64));
                buf.extend_from_slice(&input[copied..start]);
                buf.push(b'"');
                for &b in &input[start..end] {
                    match b {
                        b'"' => buf.extend_from_slice(b"\\\""),
                        b'\\' => buf.extend_from_slice(b"\\\\"),
                        b'\n' => buf.extend_from_slice(b"\\n"),
                        b'\r' => buf.extend_from_slice(b"\\r"),
                        b'\t' => buf.extend_from_slice(b"\\t"),
                        other => buf.push(other),
                    }
                }
                buf.push(b'"');
                copied = end;
                i = end;
                expect_key = false;
                continue;
            }
            b'{' => {
                stack.push(true);
                expect_key = true;
            }
            b'[' => {
                stack.push(false);
                expect_key = false;
            }
            b'}' | b']' => {
                stack.pop();
                expect_key = false;
            }
            b',' => expect_key = stack.last() == Some(&true),
            b' ' | b'\t' | b'\r' | b'\n' => {}
            c if expect_key && (c.is_ascii_digit() || c == b'-') => {
                let start = i;
                while i < input.len()
                    && matches!(input[i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
                {
                    i += 1;
                }
                let buf = out.get_or_insert_with(|| Vec::with_capacity(input.len() + 16));
                buf.extend_from_slice(&input[copied..start]);
                buf.push(b'"');
                buf.extend_from_slice(&input[start..i]);
                buf.push(b'"');
                copied = i;
                expect_key = false;
                continue;
            }
            _ => expect_key = false,
        }
        i += 1;
    }
    match out {
        Some(mut buf) => {
            buf.extend_from_slice(&input[copied.min(input.len())..]);
            Cow::Owned(buf)
        }
        None => Cow::Borrowed(input),
    }
}

/// The index just past the object that opens at `start`, skipping strings;
/// `None` when the input ends first.
fn object_end(input: &[u8], start: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = start;
    while i < input.len() {
        match input[i] {
            b'"' => {
                i += 1;
                while i < input.len() && input[i] != b'"' {
                    i += if input[i] == b'\\' { 2 } else { 1 };
                }
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_bare_numeric_keys() {
        let text = br#"{"a":{0:"x", -1 :"y","2":[3,{4:5}]},"s":"{6:7}"}"#;
        let fixed = quote_bare_keys(text);
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"a":{"0":"x", "-1" :"y","2":[3,{"4":5}]},"s":"{6:7}"}"#
        );
        let standard = br#"{"a":[1,2],"b":{"0":1}}"#;
        assert!(matches!(quote_bare_keys(standard), Cow::Borrowed(_)));
    }

    #[test]
    fn object_keys_become_strings_holding_their_json() {
        let text = br#"{"t":{{"brokerName":"b","queueId":0,"topic":"T"}:{"x":1},{"a":"q\"}"}:[2]},"v":{"w":{"y":0}}}"#;
        let fixed = quote_bare_keys(text);
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"t":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"T\"}":{"x":1},"{\"a\":\"q\\\"}\"}":[2]},"v":{"w":{"y":0}}}"#
        );
        let value: serde_json::Value = serde_json::from_slice(&fixed).unwrap();
        let keys: Vec<&String> = value["t"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                r#"{"a":"q\"}"}"#,
                r#"{"brokerName":"b","queueId":0,"topic":"T"}"#
            ]
        );
        assert!(matches!(
            quote_bare_keys(br#"{"a":{"b":[{"c":1}]}}"#),
            Cow::Borrowed(_)
        ));
        let cut = br#"{"t":{{"brokerName":"b""#;
        assert_eq!(&quote_bare_keys(cut)[..], &cut[..]);
    }

    #[test]
    fn quoting_survives_escaped_quotes_and_truncation() {
        let text = br#"{"k\"":{1:2}}"#;
        assert_eq!(&quote_bare_keys(text)[..], br#"{"k\"":{"1":2}}"#);
        for cut in 0..text.len() {
            let _ = quote_bare_keys(&text[..cut]);
        }
    }
}
