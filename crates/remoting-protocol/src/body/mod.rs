//! Command bodies: the JSON documents RocketMQ components exchange (routes,
//! cluster info, broker registration, heartbeats, key-value tables), the
//! batch-message body and the `key=value` configuration text.
//!
//! JSON from Java components may use fastjson's non-standard output, with
//! unquoted numeric object keys (`{"brokerAddrs":{0:"10.0.0.1:10911"}}`);
//! [`from_json`] accepts both that and standard JSON. [`to_json`] always
//! writes standard JSON.

use std::borrow::Cow;

use serde::{de::DeserializeOwned, Serialize};
use thiserror::Error;

mod batch;
mod config_text;
mod heartbeat;
pub mod lenient;
mod lock;
mod route;
mod subscription;

pub use batch::{decode_batch, encode_batch, BatchEntry};
pub use config_text::{decode_config_text, encode_config_text};
pub use heartbeat::{
    CheckClientRequestBody, ConsumerData, HeartbeatData, ProducerData, SubscriptionData,
    CONSUME_FROM_WHERE, CONSUME_TYPES, MESSAGE_MODELS,
};
pub use lock::{LockBatchRequestBody, LockBatchResponseBody, MessageQueueBody};
pub use route::{
    BrokerData, ClusterInfo, DataVersion, KvTable, QueueData, RegisterBrokerBody, TopicConfig,
    TopicConfigSerializeWrapper, TopicRouteData,
};
pub use subscription::{
    GroupRetryPolicy, SubscriptionGroupConfig, SubscriptionGroupWrapper, GROUP_RETRY_POLICY_TYPES,
};

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

/// Parses a JSON body, accepting fastjson's unquoted numeric keys and a
/// leading byte-order mark.
///
/// # Errors
/// [`BodyError::Json`] when the text is not the expected document.
pub fn from_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, BodyError> {
    // fastjson skips a UTF-8 byte-order mark.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    serde_json::from_slice(&quote_numeric_keys(bytes)).map_err(|source| BodyError::Json { source })
}

/// Renders a body as standard JSON.
pub fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    // The body types hold only strings, numbers, maps with string or
    // integer keys, and lists, all of which serialize without error.
    serde_json::to_vec(value).unwrap_or_default()
}

/// Rewrites fastjson's unquoted numeric object keys into quoted ones; returns
/// the input unchanged (borrowed) when it has none.
pub fn quote_numeric_keys(input: &[u8]) -> Cow<'_, [u8]> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_only_bare_numeric_keys() {
        let text = br#"{"a":{0:"x", -1 :"y","2":[3,{4:5}]},"s":"{6:7}"}"#;
        let fixed = quote_numeric_keys(text);
        assert_eq!(
            std::str::from_utf8(&fixed).unwrap(),
            r#"{"a":{"0":"x", "-1" :"y","2":[3,{"4":5}]},"s":"{6:7}"}"#
        );
        let standard = br#"{"a":[1,2],"b":{"0":1}}"#;
        assert!(matches!(quote_numeric_keys(standard), Cow::Borrowed(_)));
    }

    #[test]
    fn quoting_survives_escaped_quotes_and_truncation() {
        let text = br#"{"k\"":{1:2}}"#;
        assert_eq!(&quote_numeric_keys(text)[..], br#"{"k\"":{"1":2}}"#);
        for cut in 0..text.len() {
            let _ = quote_numeric_keys(&text[..cut]);
        }
    }
}
