//! `message get`: stored messages read back from the brokers, decoded into
//! their fields, properties and body: one from a broker's CommitLog
//! (`VIEW_MESSAGE_BY_ID`, by physical offset, or by an offset message id
//! decoded into the broker's address and the offset), or those of a topic
//! under a key or a unique key (`QUERY_MESSAGE`, in [`super::query`]).

use std::{collections::BTreeMap, fmt::Write as _};

use remoting_protocol::{
    message::{
        compression::decompress_body,
        flags::COMPRESSED,
        properties::keys,
        record::{check, Record, StoredMessage},
        MessageId, Properties,
    },
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use super::{now_ms, query_messages, KeyQuery};
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, time_text, Align, Report, Table},
};

/// How much of a body is shown without `--full-body`: its first this many
/// bytes.
pub const BODY_PREVIEW_BYTES: usize = 512;
/// The most a compressed body may inflate to when it is shown.
pub const MAX_INFLATED_BODY: usize = 64 * 1024 * 1024;

/// `message get`: the messages found.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageReport {
    /// The messages, in the order the broker answered them.
    pub messages: Vec<MessageView>,
}

/// One stored message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    /// The offset message id: store host and CommitLog offset.
    pub msg_id: String,
    /// The producer's unique key (`UNIQ_KEY`), if it set one.
    pub unique_key: Option<String>,
    /// The broker asked.
    pub broker_addr: String,
    /// The topic.
    pub topic: String,
    /// The queue id.
    pub queue_id: i32,
    /// The offset in the queue.
    pub queue_offset: i64,
    /// The physical offset in the CommitLog.
    pub commit_log_offset: i64,
    /// `KEYS`, if any.
    pub keys: Option<String>,
    /// `TAGS`, if any.
    pub tags: Option<String>,
    /// When the producer made it, ms since the epoch.
    pub born_timestamp: i64,
    /// The producer's address.
    pub born_host: String,
    /// When the broker stored it, ms since the epoch.
    pub store_timestamp: i64,
    /// The storing broker's address.
    pub store_host: String,
    /// Redeliveries so far.
    pub reconsume_times: i32,
    /// The user flag.
    pub flag: i32,
    /// The system flag (compression, transaction state, host families).
    pub sys_flag: i32,
    /// Every property, by name.
    pub properties: BTreeMap<String, String>,
    /// The body's length in bytes (after decompression).
    pub body_size: usize,
    /// `utf8` when the body is UTF-8 text, else `hex`.
    pub body_encoding: String,
    /// The body (or its first bytes), as text or as hexadecimal.
    pub body: String,
    /// Whether `body` holds only the first bytes (`--full-body` shows all).
    pub body_truncated: bool,
    /// How the body was read when not as stored (decompressed, or why it
    /// could not be).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_note: Option<String>,
}

/// `bytes` as text when it is UTF-8, else as uppercase hexadecimal; only
/// the first [`BODY_PREVIEW_BYTES`] unless `full`. Returns the encoding,
/// the text and whether it was cut.
pub fn body_text(bytes: &[u8], full: bool) -> (&'static str, String, bool) {
    let cut = !full && bytes.len() > BODY_PREVIEW_BYTES;
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            let mut end = if cut { BODY_PREVIEW_BYTES } else { text.len() };
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            ("utf8", text[..end].to_owned(), cut)
        }
        Err(_) => {
            let shown = if cut {
                &bytes[..BODY_PREVIEW_BYTES]
            } else {
                bytes
            };
            let mut hex = String::with_capacity(shown.len() * 2);
            for b in shown {
                let _ = write!(hex, "{b:02X}");
            }
            ("hex", hex, cut)
        }
    }
}

/// The view of one decoded record: `body` is its body, decompressed when
/// the record says it is compressed (`inflated` gives the result of that).
fn view(
    addr: &str,
    m: &StoredMessage<'_>,
    inflated: Option<Result<Vec<u8>, String>>,
    full: bool,
) -> MessageView {
    let properties: BTreeMap<String, String> = Properties::decode(m.properties)
        .iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let (body, body_note) = match &inflated {
        Some(Ok(b)) => (b.as_slice(), Some("decompressed".to_owned())),
        Some(Err(e)) => (m.body, Some(format!("shown as stored: {e}"))),
        None => (m.body, None),
    };
    let (encoding, text, truncated) = body_text(body, full);
    MessageView {
        msg_id: MessageId::new(m.store_host, m.physical_offset).encode(),
        unique_key: properties.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).cloned(),
        broker_addr: addr.to_owned(),
        topic: m.topic.to_owned(),
        queue_id: m.queue_id,
        queue_offset: m.queue_offset,
        commit_log_offset: m.physical_offset,
        keys: properties.get(keys::KEYS).cloned(),
        tags: properties.get(keys::TAGS).cloned(),
        born_timestamp: m.born_timestamp,
        born_host: m.born_host.to_string(),
        store_timestamp: m.store_timestamp,
        store_host: m.store_host.to_string(),
        reconsume_times: m.reconsume_times,
        flag: m.flag,
        sys_flag: m.sys_flag,
        properties,
        body_size: body.len(),
        body_encoding: encoding.to_owned(),
        body: text,
        body_truncated: truncated,
        body_note,
    }
}

/// The messages of a body of back-to-back CommitLog records, as `addr`
/// answered them.
///
/// # Errors
/// A record that cannot be read, with its position.
pub fn decode_records(addr: &str, body: &[u8], full: bool) -> Result<Vec<MessageView>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < body.len() {
        match check(&body[pos..], false) {
            Record::Message(m) => {
                let inflated = (m.sys_flag & COMPRESSED != 0).then(|| {
                    let stored = bytes::Bytes::copy_from_slice(m.body);
                    decompress_body(m.sys_flag, stored, MAX_INFLATED_BODY)
                        .map(|b| b.to_vec())
                        .map_err(|e| e.to_string())
                });
                out.push(view(addr, &m, inflated, full));
                pos += m.total_size;
            }
            Record::Invalid(why) => return Err(format!("record at byte {pos}: {why}")),
            Record::Blank | Record::End => {
                return Err(format!("record at byte {pos}: no message there"))
            }
        }
    }
    Ok(out)
}

impl Report for MessageReport {
    fn text(&self) -> String {
        let mut out = String::new();
        for m in &self.messages {
            let mut t = Table::new(&[("Field", Align::Left), ("Value", Align::Left)]);
            let dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".to_owned());
            for (k, v) in [
                ("Topic", m.topic.clone()),
                ("Queue", m.queue_id.to_string()),
                ("QueueOffset", m.queue_offset.to_string()),
                ("MsgId", m.msg_id.clone()),
                ("UniqueKey", dash(&m.unique_key)),
                ("Keys", dash(&m.keys)),
                ("Tags", dash(&m.tags)),
                ("BornTime(UTC)", time_text(m.born_timestamp)),
                ("BornHost", m.born_host.clone()),
                ("StoreTime(UTC)", time_text(m.store_timestamp)),
                ("StoreHost", m.store_host.clone()),
                ("CommitLogOffset", m.commit_log_offset.to_string()),
                ("ReconsumeTimes", m.reconsume_times.to_string()),
                ("Flag", m.flag.to_string()),
                ("SysFlag", m.sys_flag.to_string()),
                ("BodySize", m.body_size.to_string()),
            ] {
                t.row(vec![k.to_owned(), v]);
            }
            section(
                &mut out,
                &format!("message from broker {}", m.broker_addr),
                &t.to_string(),
            );
            let mut p = Table::new(&[("Property", Align::Left), ("Value", Align::Left)]);
            for (k, v) in &m.properties {
                p.row(vec![k.clone(), v.clone()]);
            }
            section(&mut out, "", &p.to_string());
            let mut title = format!("body ({}, {} bytes", m.body_encoding, m.body_size);
            if let Some(note) = &m.body_note {
                let _ = write!(title, ", {note}");
            }
            if m.body_truncated {
                let _ = write!(
                    title,
                    ", first {BODY_PREVIEW_BYTES} bytes shown; --full-body shows all"
                );
            }
            title.push_str("):");
            section(&mut out, &title, &format!("{}\n", m.body));
        }
        if self.messages.is_empty() {
            out.push_str("no message found\n");
        }
        out
    }
}

/// The message at CommitLog `offset` of the broker at `addr`
/// (`VIEW_MESSAGE_BY_ID`).
///
/// # Errors
/// The broker's failure (an offset with no message: `SYSTEM_ERROR`), or an
/// answer that is not a record.
pub async fn view_by_offset(
    admin: &Admin,
    addr: &str,
    offset: i64,
    full: bool,
) -> Result<Vec<MessageView>, AdminError> {
    let mut request = RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID);
    request.set_ext("offset", offset.to_string());
    let answer = admin.call(Peer::Broker, addr, request).await?;
    decode_records(addr, &answer.body, full).map_err(|reason| AdminError::BadAnswer {
        peer: Peer::Broker,
        addr: addr.to_owned(),
        request: RequestCode::VIEW_MESSAGE_BY_ID,
        reason,
    })
}

/// The broker address and CommitLog offset an offset message id names.
///
/// # Errors
/// [`AdminError::BadMessageId`] when `id` is not one.
pub fn decode_offset_id(id: &str) -> Result<(String, i64), AdminError> {
    let decoded = MessageId::decode(id.trim()).map_err(|e| AdminError::BadMessageId {
        id: id.to_owned(),
        reason: e.to_string(),
    })?;
    Ok((decoded.store_host.to_string(), decoded.commit_log_offset))
}

/// What `message get` looks a message up by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MessageLookup {
    /// A CommitLog offset on a broker.
    Offset {
        /// The broker's address.
        broker: String,
        /// The physical offset.
        offset: i64,
    },
    /// An offset message id, or (with a topic) a unique key.
    Id(String),
    /// The messages of a topic under a key of their `KEYS`.
    Key(KeyQuery),
}

/// The message at `offset` of the broker at `addr`; with `topic`, it must
/// belong to that topic.
async fn by_offset(
    admin: &Admin,
    addr: String,
    offset: i64,
    topic: Option<&str>,
    full: bool,
) -> Result<MessageReport, AdminError> {
    let messages = view_by_offset(admin, &addr, offset, full).await?;
    if let Some(topic) = topic {
        if let Some(other) = messages.iter().find(|m| m.topic != topic) {
            return Err(AdminError::OtherTopic {
                addr,
                offset,
                topic: topic.to_owned(),
                found: other.topic.clone(),
            });
        }
    }
    Ok(MessageReport { messages })
}

/// `message get --id`: an id that reads as an offset message id is looked
/// up with `VIEW_MESSAGE_BY_ID` first; with `topic`, any failure of that
/// (and an id that is no offset message id) falls back to the query by
/// unique key, as RocketMQ's admin does. When that finds nothing, the error
/// also says why the offset id named no message.
async fn by_id(
    admin: &Admin,
    id: &str,
    topic: Option<&str>,
    full: bool,
) -> Result<MessageReport, AdminError> {
    let Some(topic) = topic else {
        let needs_topic = |reason: String| AdminError::NeedsTopic {
            id: id.to_owned(),
            reason,
        };
        return match decode_offset_id(id) {
            Ok((addr, offset)) => by_offset(admin, addr, offset, None, full)
                .await
                .map_err(|e| {
                    needs_topic(format!("names no message as an offset message id ({e})"))
                }),
            Err(e) => Err(needs_topic(format!("is not an offset message id ({e})"))),
        };
    };
    let tried = match decode_offset_id(id) {
        Ok((addr, offset)) => match by_offset(admin, addr, offset, Some(topic), full).await {
            Ok(report) => return Ok(report),
            Err(e) => Some(e),
        },
        Err(_) => None,
    };
    let query = KeyQuery::by_unique_key(topic, id.trim(), now_ms());
    match (query_messages(admin, &query, full).await, tried) {
        // A topic without a route has no message to find by unique key:
        // what the offset id named says more.
        (Err(AdminError::NoRoute { .. }), Some(first)) => Err(first),
        (Err(AdminError::NoMessage(mut none)), first) => {
            none.tried = first.map(|e| e.to_string());
            Err(AdminError::NoMessage(none))
        }
        (found, _) => found,
    }
}

/// `message get`: the message(s) `lookup` names; with `topic`, they must
/// belong to that topic.
///
/// # Errors
/// A malformed id, an id that needs a topic, the broker's failure,
/// [`AdminError::OtherTopic`], or [`AdminError::NoMessage`].
pub async fn message_get(
    admin: &Admin,
    lookup: &MessageLookup,
    topic: Option<&str>,
    full: bool,
) -> Result<MessageReport, AdminError> {
    match lookup {
        MessageLookup::Offset { broker, offset } => {
            by_offset(admin, broker.clone(), *offset, topic, full).await
        }
        MessageLookup::Id(id) => by_id(admin, id, topic, full).await,
        MessageLookup::Key(query) => query_messages(admin, query, full).await,
    }
}
