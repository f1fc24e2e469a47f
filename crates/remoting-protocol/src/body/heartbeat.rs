//! The `HEART_BEAT` body: a client's producer and consumer groups.
//!
//! Read as leniently as RocketMQ's fastjson reads it (see [`super::lenient`]):
//! the C++ client writes the enums as ordinals and `subVersion` as a string,
//! the Go client writes `codeSet` elements as strings, and either leaves out
//! what it has no value for.

use serde::{Deserialize, Deserializer, Serialize};

use super::lenient::{boolean, enum_name, int, int_list, list, string};

/// `ConsumeType` constants in ordinal order.
pub const CONSUME_TYPES: &[&str] = &["CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP"];
/// `MessageModel` constants in ordinal order.
pub const MESSAGE_MODELS: &[&str] = &["BROADCASTING", "CLUSTERING"];
/// `ConsumeFromWhere` constants in ordinal order.
pub const CONSUME_FROM_WHERE: &[&str] = &[
    "CONSUME_FROM_LAST_OFFSET",
    "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
    "CONSUME_FROM_MIN_OFFSET",
    "CONSUME_FROM_MAX_OFFSET",
    "CONSUME_FROM_FIRST_OFFSET",
    "CONSUME_FROM_TIMESTAMP",
];

fn consume_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, CONSUME_TYPES)
}

fn message_model<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, MESSAGE_MODELS)
}

fn consume_from_where<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, CONSUME_FROM_WHERE)
}

/// What a client declares in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    /// Client id.
    #[serde(rename = "clientID", deserialize_with = "string")]
    pub client_id: String,
    /// Producer groups of the client.
    #[serde(deserialize_with = "list")]
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups of the client.
    #[serde(deserialize_with = "list")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// Fingerprint of the heartbeat's content.
    #[serde(deserialize_with = "int")]
    pub heartbeat_fingerprint: i32,
    /// The heartbeat omits subscriptions.
    #[serde(
        rename = "withoutSub",
        alias = "isWithoutSub",
        deserialize_with = "boolean"
    )]
    pub without_sub: bool,
}

/// A producer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group name.
    #[serde(deserialize_with = "string")]
    pub group_name: String,
}

/// A consumer group and its subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Group name.
    #[serde(deserialize_with = "string")]
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull), `CONSUME_PASSIVELY` (push) or
    /// `CONSUME_POP`; `""` when the client sent none or an unknown one.
    #[serde(deserialize_with = "consume_type")]
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`; `""` when absent or unknown.
    #[serde(deserialize_with = "message_model")]
    pub message_model: String,
    /// Where a new group starts, e.g. `CONSUME_FROM_LAST_OFFSET`; `""` when
    /// absent or unknown.
    #[serde(deserialize_with = "consume_from_where")]
    pub consume_from_where: String,
    /// Subscriptions.
    #[serde(deserialize_with = "list")]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    #[serde(deserialize_with = "boolean")]
    pub unit_mode: bool,
}

/// One topic subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Class filter mode.
    #[serde(deserialize_with = "boolean")]
    pub class_filter_mode: bool,
    /// Topic.
    #[serde(deserialize_with = "string")]
    pub topic: String,
    /// Expression, e.g. `TagA || TagB` or `*`.
    #[serde(deserialize_with = "string")]
    pub sub_string: String,
    /// Tags of a tag expression.
    #[serde(deserialize_with = "list")]
    pub tags_set: Vec<String>,
    /// Tag hashes of a tag expression.
    #[serde(deserialize_with = "int_list")]
    pub code_set: Vec<i32>,
    /// Subscription version.
    #[serde(deserialize_with = "int")]
    pub sub_version: i64,
    /// `TAG` or `SQL92`; `""` (as absent) means `TAG`.
    #[serde(deserialize_with = "string")]
    pub expression_type: String,
}

/// The `CHECK_CLIENT_CONFIG` body: a consumer asks whether the broker can
/// serve one of its subscriptions (in practice: its filter type).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct CheckClientRequestBody {
    /// Client id.
    #[serde(deserialize_with = "string")]
    pub client_id: String,
    /// Consumer group.
    #[serde(deserialize_with = "string")]
    pub group: String,
    /// The subscription to check.
    pub subscription_data: Option<SubscriptionData>,
    /// Namespace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::from_json;

    #[test]
    fn java_heartbeat_parses() {
        let text = r#"{"clientID":"10.0.0.5@1234","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"G","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],"withoutSub":false}"#;
        let hb: HeartbeatData = from_json(text.as_bytes()).unwrap();
        assert_eq!(hb.client_id, "10.0.0.5@1234");
        let sub = &hb.consumer_data_set[0].subscription_data_set[0];
        assert_eq!(sub.code_set, [2_598_919]);
        assert_eq!(sub.tags_set, ["TagA"]);
        assert_eq!(hb.producer_data_set[0].group_name, "CLIENT_INNER_PRODUCER");
    }
}
