//! Pulled messages, decoded from raw CommitLog records.

use std::collections::BTreeMap;

use bytes::Bytes;
use message_model::{
    properties::keys,
    record::{check, Record},
    MessageId, Properties,
};

use crate::ConsumerError;

/// A pulled message with where it was stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: u32,
    /// Offset in the queue.
    pub queue_offset: u64,
    /// Body, sharing the pull response's buffer.
    pub body: Bytes,
    /// Tag (the `TAGS` property), if any.
    pub tags: Option<String>,
    /// Business keys (the space-separated `KEYS` property).
    pub keys: Vec<String>,
    /// Every property, `TAGS`, `KEYS` and `UNIQ_KEY` included.
    pub properties: BTreeMap<String, String>,
    /// The producer-made unique id (`UNIQ_KEY`); for messages without one,
    /// the broker's offset message id.
    pub msg_id: String,
    /// When the broker stored it (ms since the epoch).
    pub store_timestamp_ms: i64,
    /// When the producer made it (ms since the epoch).
    pub born_timestamp_ms: i64,
    /// Redeliveries through a retry topic so far.
    pub reconsume_times: i32,
    /// Where the broker stored it in its CommitLog (what a send-back names).
    pub commit_log_offset: i64,
    /// The broker that stored it (its address in message ids).
    pub store_host: std::net::SocketAddr,
}

/// Largest body a compressed message may inflate to; beyond it the pull
/// fails naming the limit instead of inflating a decompression bomb.
pub const MAX_INFLATED_BODY_BYTES: usize = 64 * 1024 * 1024;

/// Splits a pull response body into messages, each parsed by the record
/// reader the store itself uses.
pub(crate) fn decode_records(addr: &str, body: &Bytes) -> Result<Vec<MessageExt>, ConsumerError> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        let rest = body.get(pos..).unwrap_or_default();
        let bad = |reason: &str| ConsumerError::Protocol {
            addr: addr.to_owned(),
            reason: format!("bad record at byte {pos} of a pull: {reason}"),
        };
        let msg = match check(rest, false) {
            Record::Message(m) => m,
            Record::Blank | Record::End => return Err(bad("end marker inside a pull body")),
            Record::Invalid(reason) => return Err(bad(reason)),
        };
        let properties: BTreeMap<String, String> =
            Properties::decode(msg.properties).into_iter().collect();
        let msg_id = properties
            .get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            .cloned()
            .unwrap_or_else(|| MessageId::new(msg.store_host, msg.physical_offset).encode());
        out.push(MessageExt {
            topic: msg.topic.to_owned(),
            queue_id: u32::try_from(msg.queue_id).map_err(|_| bad("negative queue id"))?,
            queue_offset: u64::try_from(msg.queue_offset)
                .map_err(|_| bad("negative queue offset"))?,
            body: message_model::compression::decompress_body(
                msg.sys_flag,
                body.slice_ref(msg.body),
                MAX_INFLATED_BODY_BYTES,
            )
            .map_err(|e| bad(&format!("compressed body cannot be decompressed: {e}")))?,
            tags: properties.get(keys::TAGS).cloned(),
            keys: properties
                .get(keys::KEYS)
                .map(|k| {
                    k.split(' ')
                        .filter(|s| !s.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            properties,
            msg_id,
            store_timestamp_ms: msg.store_timestamp,
            born_timestamp_ms: msg.born_timestamp,
            reconsume_times: msg.reconsume_times,
            commit_log_offset: msg.physical_offset,
            store_host: msg.store_host,
        });
        if msg.total_size == 0 {
            return Err(bad("zero-length record"));
        }
        pos += msg.total_size;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use message_model::{record::encode, MessageToStore};

    fn record(body: &[u8], props: &str) -> Vec<u8> {
        record_with_flag(body, props, 0)
    }

    fn record_with_flag(body: &[u8], props: &str, sys_flag: i32) -> Vec<u8> {
        let msg = MessageToStore {
            topic: "T".into(),
            queue_id: 3,
            flag: 0,
            sys_flag,
            born_timestamp: 7,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::copy_from_slice(body),
            properties: props.into(),
        };
        let mut out = Vec::new();
        encode(&msg, 1 << 20, &mut out).unwrap();
        out
    }

    #[test]
    fn compressed_bodies_are_handed_over_decompressed() {
        use message_model::compression::{compress, ZLIB_SYS_FLAG};
        let original = "sluice ".repeat(2000);
        let packed = compress(original.as_bytes()).unwrap();
        let msgs = decode_records(
            "b",
            &Bytes::from(record_with_flag(&packed, "", ZLIB_SYS_FLAG)),
        )
        .unwrap();
        assert_eq!(msgs[0].body, original.as_bytes());
        let corrupt = decode_records(
            "b",
            &Bytes::from(record_with_flag(b"not zlib", "", ZLIB_SYS_FLAG)),
        );
        assert!(corrupt.is_err());
    }

    #[test]
    fn concatenated_records_decode_with_tags_keys_and_ids() {
        let mut body = record(
            b"one",
            "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}UNIQ_KEY\u{1}ID1\u{2}",
        );
        body.extend(record(b"two", ""));
        let msgs = decode_records("b", &Bytes::from(body)).unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].body, &b"one"[..]);
        assert_eq!(msgs[0].tags.as_deref(), Some("TagA"));
        assert_eq!(msgs[0].keys, ["k1", "k2"]);
        assert_eq!(msgs[0].msg_id, "ID1");
        assert_eq!(msgs[0].queue_id, 3);
        assert_eq!(msgs[1].body, &b"two"[..]);
        assert!(msgs[1].tags.is_none());
        assert!(!msgs[1].msg_id.is_empty());
    }

    #[test]
    fn a_truncated_record_is_an_error() {
        let body = record(b"one", "");
        let cut = Bytes::copy_from_slice(&body[..body.len() - 2]);
        assert!(matches!(
            decode_records("b", &cut),
            Err(ConsumerError::Protocol { ref reason, .. }) if reason.starts_with("bad record at byte 0 ")
        ));
    }
}
