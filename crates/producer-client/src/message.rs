//! What a producer sends and what it gets back: [`Message`],
//! the [`MessageQueue`] of a [`SendResult`], [`SendStatus`], and the checks a
//! message passes before it is sent.

use std::collections::BTreeMap;

use bytes::Bytes;
use remoting_protocol::{
    message::{properties::keys, Properties},
    ResponseCode,
};

use crate::{MessageQueue, ProducerError};

/// Longest topic name the broker accepts (UTF-8 bytes).
pub const TOPIC_MAX_LEN: usize = 127;

/// Property names the producer sets itself; user properties may not use them.
const RESERVED_PROPERTIES: &[&str] = &[
    keys::TAGS,
    keys::KEYS,
    keys::DELAY_TIME_LEVEL,
    keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    keys::WAIT_STORE_MSG_OK,
];

/// A message to send.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Payload; must not be empty.
    pub body: Bytes,
    /// Tag, for consumer-side filtering (property `TAGS`).
    pub tags: Option<String>,
    /// Business keys, for lookups (property `KEYS`, space-separated).
    pub keys: Vec<String>,
    /// Delay level (property `DELAY`); 1 is the shortest delay.
    pub delay_level: Option<u32>,
    /// User flag, stored with the message.
    pub flag: i32,
    /// User properties. Names and values must be non-empty and free of the
    /// characters U+0001 and U+0002, and must not be one the producer sets
    /// (`TAGS`, `KEYS`, `DELAY`, `UNIQ_KEY`, `WAIT`).
    pub properties: BTreeMap<String, String>,
}

impl Message {
    /// A message with a topic and a body.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            body: body.into(),
            ..Self::default()
        }
    }

    /// Sets the tag.
    pub fn with_tags(mut self, tags: impl Into<String>) -> Self {
        self.tags = Some(tags.into());
        self
    }

    /// Adds a business key.
    pub fn with_key(mut self, key: impl Into<String>) -> Self {
        self.keys.push(key.into());
        self
    }

    /// Sets the delay level.
    pub fn with_delay_level(mut self, level: u32) -> Self {
        self.delay_level = Some(level);
        self
    }

    /// Sets the user flag.
    pub fn with_flag(mut self, flag: i32) -> Self {
        self.flag = flag;
        self
    }

    /// Sets a user property.
    pub fn with_property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.properties.insert(name.into(), value.into());
        self
    }
}

/// How a stored message fared beyond the store itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStatus {
    /// Stored (and flushed or replicated as the broker is configured to).
    SendOk,
    /// Stored, but the synchronous flush did not finish in time.
    FlushDiskTimeout,
    /// Stored, but the synchronous replication did not finish in time.
    FlushSlaveTimeout,
    /// Stored, but no slave was available for synchronous replication.
    SlaveNotAvailable,
}

impl SendStatus {
    /// The status a response code stands for, if it is one of the "sent"
    /// codes (`processSendResponse`).
    pub fn from_code(code: ResponseCode) -> Option<Self> {
        match code {
            ResponseCode::SUCCESS => Some(SendStatus::SendOk),
            ResponseCode::FLUSH_DISK_TIMEOUT => Some(SendStatus::FlushDiskTimeout),
            ResponseCode::FLUSH_SLAVE_TIMEOUT => Some(SendStatus::FlushSlaveTimeout),
            ResponseCode::SLAVE_NOT_AVAILABLE => Some(SendStatus::SlaveNotAvailable),
            _ => None,
        }
    }
}

/// Where a sent message landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendResult {
    /// Whether the store fully did its part.
    pub status: SendStatus,
    /// The producer's unique id (`UNIQ_KEY`); for a batch, the ids of its
    /// messages joined by commas.
    pub msg_id: String,
    /// The broker's offset id (store host and CommitLog offset); for a
    /// batch, one per message joined by commas.
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub message_queue: MessageQueue,
    /// The (first) message's offset in its queue.
    pub queue_offset: u64,
    /// The address of the broker that stored it.
    pub broker_addr: String,
    /// The broker's region (`MSG_REGION`), if it reported one.
    pub region_id: Option<String>,
    /// The transaction id the broker gave a transactional half message
    /// (its unique key on Sluice), if it reported one.
    pub transaction_id: Option<String>,
}

/// A validated message in wire form: what every attempt sends.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub topic: String,
    pub body: Bytes,
    pub flag: i32,
    /// `COMPRESSED | COMPRESSION_ZLIB` when the body was compressed, else 0.
    pub sys_flag: i32,
    pub properties: String,
    /// `UNIQ_KEY`, or the batch's keys joined by commas.
    pub msg_id: String,
    pub batch: bool,
}

impl Prepared {
    /// Whether this is the half message of a transaction.
    pub(crate) fn is_half(&self) -> bool {
        self.sys_flag & message_model::flags::TRANSACTION_PREPARED_TYPE != 0
    }
}

/// Checks a topic name as RocketMQ's `Validators.checkTopic` does, and
/// refuses sends to the auto-create template topic.
pub(crate) fn check_topic(topic: &str, create_topic_key: &str) -> Result<(), ProducerError> {
    let illegal = |reason: String| Err(ProducerError::MessageIllegal { reason });
    if topic.is_empty() {
        return illegal("the topic is empty".into());
    }
    if topic.len() > TOPIC_MAX_LEN {
        return illegal(format!(
            "the topic is {} bytes long; the limit is {TOPIC_MAX_LEN}",
            topic.len()
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')))
    {
        return illegal(format!(
            "the topic {topic:?} contains {c:?}; allowed are [%|a-zA-Z0-9_-]"
        ));
    }
    if topic == create_topic_key {
        return illegal(format!(
            "the topic {topic} is the auto-create template and cannot take messages"
        ));
    }
    Ok(())
}

/// Builds the property string of one message: its tag, keys, delay level,
/// user properties and a fresh unique key.
pub(crate) fn encode_properties(msg: &Message, uniq_key: &str) -> Result<String, ProducerError> {
    encode_properties_with(msg, uniq_key, &[])
}

/// [`encode_properties`] plus properties the producer adds itself
/// (`extra`), which take precedence over user properties of the same name.
pub(crate) fn encode_properties_with(
    msg: &Message,
    uniq_key: &str,
    extra: &[(&str, &str)],
) -> Result<String, ProducerError> {
    let illegal = |reason: String| ProducerError::MessageIllegal { reason };
    let mut props = Properties::new();
    let mut put = |name: &str, value: String| {
        props
            .insert(name, value)
            .map(|_| ())
            .map_err(|e| illegal(e.to_string()))
    };
    if let Some(tags) = &msg.tags {
        put(keys::TAGS, tags.clone())?;
    }
    if !msg.keys.is_empty() {
        put(keys::KEYS, msg.keys.join(" "))?;
    }
    match msg.delay_level {
        Some(0) => return Err(illegal("the delay level must be at least 1".into())),
        Some(level) => put(keys::DELAY_TIME_LEVEL, level.to_string())?,
        None => {}
    }
    for (name, value) in &msg.properties {
        if RESERVED_PROPERTIES.contains(&name.as_str()) {
            return Err(illegal(format!(
                "the property {name} is set by the producer; use the message's field instead"
            )));
        }
        put(name, value.clone())?;
    }
    for (name, value) in extra {
        put(name, (*value).to_owned())?;
    }
    put(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, uniq_key.to_owned())?;
    let encoded = props.encode();
    if encoded.len() > remoting_protocol::message::properties::MAX_PROPERTIES_LEN {
        return Err(illegal(format!(
            "the properties take {} bytes; the limit is {} (32 KiB - 1)",
            encoded.len(),
            remoting_protocol::message::properties::MAX_PROPERTIES_LEN
        )));
    }
    Ok(encoded)
}

/// Checks a body against the size limit.
pub(crate) fn check_body(len: usize, max_message_size: usize) -> Result<(), ProducerError> {
    if len == 0 {
        return Err(ProducerError::MessageIllegal {
            reason: "the message body is empty".into(),
        });
    }
    if len > max_message_size {
        return Err(ProducerError::MessageIllegal {
            reason: format!(
                "the message body is {len} bytes; maxMessageSize is {max_message_size}"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_follow_rocketmq_rules() {
        assert!(check_topic("Topic_A-1|%x", "TBW102").is_ok());
        for bad in ["", "has space", "TBW102", &"x".repeat(128)] {
            assert!(
                matches!(
                    check_topic(bad, "TBW102"),
                    Err(ProducerError::MessageIllegal { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn properties_carry_tags_keys_delay_and_the_unique_key() {
        let msg = Message::new("T", "b")
            .with_tags("TagA")
            .with_key("k1")
            .with_key("k2")
            .with_delay_level(3)
            .with_property("color", "red");
        let text = encode_properties(&msg, "ABC").unwrap();
        let props = Properties::decode(&text);
        assert_eq!(props.get(keys::TAGS), Some("TagA"));
        assert_eq!(props.get(keys::KEYS), Some("k1 k2"));
        assert_eq!(props.get(keys::DELAY_TIME_LEVEL), Some("3"));
        assert_eq!(props.get("color"), Some("red"));
        assert_eq!(props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX), Some("ABC"));
    }

    #[test]
    fn bad_properties_and_bodies_are_refused_naming_the_limit() {
        let reserved = Message::new("T", "b").with_property("UNIQ_KEY", "x");
        assert!(encode_properties(&reserved, "A").is_err());
        let separator = Message::new("T", "b").with_property("a", "x\u{1}y");
        assert!(encode_properties(&separator, "A").is_err());
        let huge = Message::new("T", "b").with_property("big", "v".repeat(40_000));
        let err = encode_properties(&huge, "A").unwrap_err();
        assert!(err.to_string().contains("32767"), "{err}");
        let err = check_body(11, 10).unwrap_err();
        assert!(err.to_string().contains("maxMessageSize is 10"), "{err}");
        assert!(check_body(0, 10).is_err());
        assert!(check_body(10, 10).is_ok());
    }

    #[test]
    fn sent_codes_map_to_statuses() {
        assert_eq!(
            SendStatus::from_code(ResponseCode::SUCCESS),
            Some(SendStatus::SendOk)
        );
        assert_eq!(
            SendStatus::from_code(ResponseCode::FLUSH_SLAVE_TIMEOUT),
            Some(SendStatus::FlushSlaveTimeout)
        );
        assert_eq!(SendStatus::from_code(ResponseCode::SYSTEM_BUSY), None);
    }
}
