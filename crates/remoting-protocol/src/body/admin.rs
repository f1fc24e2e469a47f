//! Bodies of the topic and consumer administration answers that `mqadmin`,
//! `rocketmq-dashboard` and `rocketmq-exporter` read: queue offsets of a
//! topic (`TopicStatsTable`), a group's progress (`ConsumeStats`), the
//! groups consuming a topic (`GroupList`) and the clients of a group
//! (`ConsumerConnection`, `ProducerConnection`), and the offsets a reset
//! moved a group to (`ResetOffsetBody`).
//!
//! The three tables keyed by queue are written as fastjson writes them, with
//! the queue object itself as the key (not valid JSON, but what every Java
//! admin tool parses): their `encode` does that. The others render with
//! [`super::to_fastjson`]. Reading accepts both the object-keyed form and
//! keys that are strings holding the queue's JSON; fields are read
//! leniently (see [`super::lenient`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{de, Deserialize, Deserializer, Serialize};

use super::{
    from_json,
    lenient::{double, enum_name, int, list, string},
    to_fastjson, MessageQueueBody, SubscriptionData, CONSUME_FROM_WHERE, CONSUME_TYPES,
    MESSAGE_MODELS,
};

/// `LanguageCode` constants in ordinal order (the ordinal is the code).
pub const LANGUAGE_NAMES: &[&str] = &[
    "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO", "PHP",
    "OMS", "RUST", "NODE_JS",
];

fn language<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, LANGUAGE_NAMES)
}

fn consume_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, CONSUME_TYPES)
}

fn message_model<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, MESSAGE_MODELS)
}

fn consume_from_where<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, CONSUME_FROM_WHERE)
}

fn string_set<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeSet<String>, D::Error> {
    #[derive(Deserialize)]
    struct Name(#[serde(deserialize_with = "string")] String);
    Ok(list::<D, Name>(d)?.into_iter().map(|n| n.0).collect())
}

/// A map keyed by queue: each key is an object (fastjson's form, made a
/// string by [`super::quote_bare_keys`]) or a string holding one.
fn queue_map<'de, D, V>(d: D) -> Result<BTreeMap<MessageQueueBody, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    Option::<BTreeMap<String, V>>::deserialize(d)?
        .unwrap_or_default()
        .into_iter()
        .map(|(key, value)| {
            from_json::<MessageQueueBody>(key.as_bytes())
                .map(|queue| (queue, value))
                .map_err(|e| de::Error::custom(format!("queue key {key:?}: {e}")))
        })
        .collect()
}

/// Appends `{<queue>:<value>,...}` with each queue object as the key.
fn write_queue_map<V: Serialize>(out: &mut Vec<u8>, map: &BTreeMap<MessageQueueBody, V>) {
    out.push(b'{');
    for (n, (queue, value)) in map.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&to_fastjson(queue));
        out.push(b':');
        out.extend_from_slice(&to_fastjson(value));
    }
    out.push(b'}');
}

/// Appends a double as fastjson writes it (`0.0`, `1.5`; NaN as `null`).
fn write_double(out: &mut Vec<u8>, value: f64) {
    out.extend_from_slice(&serde_json::to_vec(&value).unwrap_or_else(|_| b"null".to_vec()));
}

/// One queue's offsets in a `TopicStatsTable`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicOffset {
    /// Store time of the queue's last message (ms since the epoch); 0 when
    /// the queue is empty.
    #[serde(deserialize_with = "int")]
    pub last_update_timestamp: i64,
    /// The queue's next offset (its message count, old messages included).
    #[serde(deserialize_with = "int")]
    pub max_offset: i64,
    /// The queue's first offset still stored.
    #[serde(deserialize_with = "int")]
    pub min_offset: i64,
}

/// `GET_TOPIC_STATS_INFO` (202) answer: a topic's queues on one broker.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicStatsTable {
    /// Offsets per queue.
    #[serde(deserialize_with = "queue_map")]
    pub offset_table: BTreeMap<MessageQueueBody, TopicOffset>,
    /// Messages put per second into the topic over the last minute.
    #[serde(deserialize_with = "double")]
    pub topic_put_tps: f64,
}

impl TopicStatsTable {
    /// The body as fastjson writes it, queue objects as keys.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"offsetTable\":".to_vec();
        write_queue_map(&mut out, &self.offset_table);
        out.extend_from_slice(b",\"topicPutTps\":");
        write_double(&mut out, self.topic_put_tps);
        out.push(b'}');
        out
    }
}

/// One queue's progress in a `ConsumeStats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct OffsetWrapper {
    /// The queue's next offset.
    #[serde(deserialize_with = "int")]
    pub broker_offset: i64,
    /// The group's committed offset (0 when it has none).
    #[serde(deserialize_with = "int")]
    pub consumer_offset: i64,
    /// Store time of the last message consumed (the one before the
    /// committed offset); 0 when unknown.
    #[serde(deserialize_with = "int")]
    pub last_timestamp: i64,
    /// How far the group has pulled: never below the committed offset.
    #[serde(deserialize_with = "int")]
    pub pull_offset: i64,
}

/// `GET_CONSUME_STATS` (208) answer: a group's progress on one broker.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumeStats {
    /// Messages fetched per second by the group over the last minute.
    #[serde(deserialize_with = "double")]
    pub consume_tps: f64,
    /// Progress per queue.
    #[serde(deserialize_with = "queue_map")]
    pub offset_table: BTreeMap<MessageQueueBody, OffsetWrapper>,
}

impl ConsumeStats {
    /// The body as fastjson writes it, queue objects as keys.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"consumeTps\":".to_vec();
        write_double(&mut out, self.consume_tps);
        out.extend_from_slice(b",\"offsetTable\":");
        write_queue_map(&mut out, &self.offset_table);
        out.push(b'}');
        out
    }

    /// Messages stored and not yet consumed, over every queue.
    pub fn total_diff(&self) -> i64 {
        self.offset_table
            .values()
            .map(|o| o.broker_offset - o.consumer_offset)
            .sum()
    }
}

/// `QUERY_TOPIC_CONSUME_BY_WHO` (300) answer: group names.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupList {
    /// The groups.
    #[serde(deserialize_with = "string_set")]
    pub group_list: BTreeSet<String>,
}

/// One client connection of a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClientConnection {
    /// The client's address as the broker sees it (`ip:port`).
    #[serde(deserialize_with = "string")]
    pub client_addr: String,
    /// The client's id.
    #[serde(deserialize_with = "string")]
    pub client_id: String,
    /// The client's `LanguageCode` name; `""` (left out) when unknown.
    #[serde(
        deserialize_with = "language",
        skip_serializing_if = "String::is_empty"
    )]
    pub language: String,
    /// The client's version (RocketMQ's `MQVersion` ordinal).
    #[serde(deserialize_with = "int")]
    pub version: i32,
}

/// `GET_CONSUMER_CONNECTION_LIST` (203) answer: a consumer group's clients
/// and what they declared.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerConnection {
    /// The clients.
    #[serde(deserialize_with = "list")]
    pub connection_set: Vec<ClientConnection>,
    /// Where a new consumer starts, e.g. `CONSUME_FROM_LAST_OFFSET`; `""`
    /// (left out) when unknown.
    #[serde(
        deserialize_with = "consume_from_where",
        skip_serializing_if = "String::is_empty"
    )]
    pub consume_from_where: String,
    /// `CONSUME_PASSIVELY` (push), `CONSUME_ACTIVELY` (pull) or
    /// `CONSUME_POP`; `""` (left out) when unknown.
    #[serde(
        deserialize_with = "consume_type",
        skip_serializing_if = "String::is_empty"
    )]
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`; `""` (left out) when unknown.
    #[serde(
        deserialize_with = "message_model",
        skip_serializing_if = "String::is_empty"
    )]
    pub message_model: String,
    /// Subscriptions by topic.
    pub subscription_table: BTreeMap<String, SubscriptionData>,
}

impl ConsumerConnection {
    /// The lowest version among the clients (`i32::MAX` without clients).
    pub fn min_version(&self) -> i32 {
        self.connection_set
            .iter()
            .map(|c| c.version)
            .min()
            .unwrap_or(i32::MAX)
    }
}

/// `GET_PRODUCER_CONNECTION_LIST` (204) answer: a producer group's clients.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerConnection {
    /// The clients.
    #[serde(deserialize_with = "list")]
    pub connection_set: Vec<ClientConnection>,
}

/// One producer client in [`ProducerTableInfo`].
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerInfo {
    /// The client's id.
    #[serde(deserialize_with = "string")]
    pub client_id: String,
    /// The client's address as the broker sees it (RocketMQ writes the
    /// socket address's text, `/ip:port`).
    #[serde(rename = "remoteIP", deserialize_with = "string")]
    pub remote_ip: String,
    /// The client's `LanguageCode` name; `""` (left out) when unknown.
    #[serde(
        deserialize_with = "language",
        skip_serializing_if = "String::is_empty"
    )]
    pub language: String,
    /// The client's version (RocketMQ's `MQVersion` ordinal).
    #[serde(deserialize_with = "int")]
    pub version: i32,
    /// When the client's last heartbeat arrived (ms since the epoch).
    #[serde(deserialize_with = "int")]
    pub last_update_timestamp: i64,
}

/// `GET_ALL_PRODUCER_INFO` (328) answer: every producer group's clients.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerTableInfo {
    /// Producer group to its clients.
    pub data: BTreeMap<String, Vec<ProducerInfo>>,
}

impl ProducerTableInfo {
    /// The body as fastjson writes it.
    pub fn encode(&self) -> Vec<u8> {
        to_fastjson(self)
    }

    /// Reads a body.
    ///
    /// # Errors
    /// The body is not a `ProducerTableInfo`.
    pub fn decode(body: &[u8]) -> Result<Self, super::BodyError> {
        from_json(body)
    }
}

/// `INVOKE_BROKER_TO_RESET_OFFSET` (222) answer: the offset each queue of
/// the group was reset to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResetOffsetBody {
    /// The new offset per queue.
    #[serde(deserialize_with = "queue_map")]
    pub offset_table: BTreeMap<MessageQueueBody, i64>,
}

impl ResetOffsetBody {
    /// The body as fastjson writes it, queue objects as keys.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = b"{\"offsetTable\":".to_vec();
        write_queue_map(&mut out, &self.offset_table);
        out.push(b'}');
        out
    }

    /// Reads a body, in fastjson's object-keyed form or with string keys.
    ///
    /// # Errors
    /// The body is not a `ResetOffsetBody`.
    pub fn decode(body: &[u8]) -> Result<Self, super::BodyError> {
        from_json(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::LanguageCode;

    #[test]
    fn reset_offset_body_is_written_with_queue_objects_as_keys() {
        let queue = |queue_id| MessageQueueBody {
            topic: "T".into(),
            broker_name: "broker-a".into(),
            queue_id,
        };
        let body = ResetOffsetBody {
            offset_table: BTreeMap::from([(queue(1), 7), (queue(0), 12)]),
        };
        let expected = concat!(
            r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:12,"#,
            r#"{"brokerName":"broker-a","queueId":1,"topic":"T"}:7}}"#
        );
        assert_eq!(String::from_utf8(body.encode()).unwrap(), expected);
        assert_eq!(ResetOffsetBody::decode(expected.as_bytes()).unwrap(), body);
        assert_eq!(
            ResetOffsetBody::default().encode(),
            br#"{"offsetTable":{}}"#
        );
    }

    #[test]
    fn producer_table_info_is_written_as_fastjson_writes_it() {
        let table = ProducerTableInfo {
            data: BTreeMap::from([
                (
                    "PG_B".to_owned(),
                    vec![ProducerInfo {
                        client_id: "10.0.0.2@2".into(),
                        remote_ip: "/10.0.0.2:50002".into(),
                        language: String::new(),
                        version: 0,
                        last_update_timestamp: 5,
                    }],
                ),
                (
                    "PG_A".to_owned(),
                    vec![ProducerInfo {
                        client_id: "10.0.0.1@1".into(),
                        remote_ip: "/10.0.0.1:50001".into(),
                        language: "JAVA".into(),
                        version: 475,
                        last_update_timestamp: 1_700_000_000_123,
                    }],
                ),
            ]),
        };
        let expected = concat!(
            r#"{"data":{"PG_A":[{"clientId":"10.0.0.1@1","language":"JAVA","#,
            r#""lastUpdateTimestamp":1700000000123,"remoteIP":"/10.0.0.1:50001","version":475}],"#,
            r#""PG_B":[{"clientId":"10.0.0.2@2","lastUpdateTimestamp":5,"#,
            r#""remoteIP":"/10.0.0.2:50002","version":0}]}}"#
        );
        assert_eq!(String::from_utf8(table.encode()).unwrap(), expected);
        assert_eq!(
            ProducerTableInfo::decode(expected.as_bytes()).unwrap(),
            table
        );
        let empty = ProducerTableInfo::default();
        assert_eq!(empty.encode(), br#"{"data":{}}"#);
    }

    #[test]
    fn language_names_follow_the_codes() {
        for (code, name) in LANGUAGE_NAMES.iter().enumerate() {
            let code = u8::try_from(code).unwrap();
            assert_eq!(LanguageCode::from_code(code).name(), *name);
        }
    }

    #[test]
    fn a_string_key_holding_the_queue_reads_too() {
        let stats: TopicStatsTable = from_json(
            br#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":\"2\",\"topic\":\"T\"}":{"maxOffset":"5"}},"topicPutTps":"1.5"}"#,
        )
        .unwrap();
        let (queue, offset) = stats.offset_table.iter().next().unwrap();
        assert_eq!((queue.queue_id, offset.max_offset), (2, 5));
        assert!((stats.topic_put_tps - 1.5).abs() < f64::EPSILON);
        assert!(from_json::<TopicStatsTable>(br#"{"offsetTable":{"not a queue":{}}}"#).is_err());
    }
}
