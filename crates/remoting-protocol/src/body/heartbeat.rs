//! The `HEART_BEAT` body: a client's producer and consumer groups.

use serde::{Deserialize, Serialize};

/// What a client declares in a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HeartbeatData {
    /// Client id.
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Producer groups of the client.
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups of the client.
    pub consumer_data_set: Vec<ConsumerData>,
    /// Fingerprint of the heartbeat's content.
    pub heartbeat_fingerprint: i32,
    /// The heartbeat omits subscriptions.
    #[serde(rename = "withoutSub", alias = "isWithoutSub")]
    pub without_sub: bool,
}

/// A producer group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group name.
    pub group_name: String,
}

/// A consumer group and its subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Group name.
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    pub consume_type: String,
    /// `CLUSTERING` or `BROADCASTING`.
    pub message_model: String,
    /// Where a new group starts, e.g. `CONSUME_FROM_LAST_OFFSET`.
    pub consume_from_where: String,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode.
    pub unit_mode: bool,
}

/// One topic subscription.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Class filter mode.
    pub class_filter_mode: bool,
    /// Topic.
    pub topic: String,
    /// Expression, e.g. `TagA || TagB` or `*`.
    pub sub_string: String,
    /// Tags of a tag expression.
    pub tags_set: Vec<String>,
    /// Tag hashes of a tag expression.
    pub code_set: Vec<i32>,
    /// Subscription version.
    pub sub_version: i64,
    /// `TAG` or `SQL92`.
    pub expression_type: String,
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
