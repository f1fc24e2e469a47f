//! Subscription groups: a consumer group's broker-side settings
//! (`SubscriptionGroupConfig`), and the table the broker keeps and persists
//! (`SubscriptionGroupWrapper`, the body of `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`
//! and the content of `subscriptionGroup.json`).
//!
//! Missing fields take RocketMQ's defaults; fields are read leniently (see
//! [`super::lenient`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use super::{
    lenient::{boolean, enum_name, int, string},
    DataVersion,
};

/// `GroupRetryPolicyType` constants in ordinal order.
pub const GROUP_RETRY_POLICY_TYPES: &[&str] = &["EXPONENTIAL", "CUSTOMIZED"];

fn retry_policy_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, GROUP_RETRY_POLICY_TYPES)
}

/// A consumer group's settings on a broker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    /// The group's name.
    #[serde(deserialize_with = "string")]
    pub group_name: String,
    /// Whether the group may consume at all.
    #[serde(deserialize_with = "boolean")]
    pub consume_enable: bool,
    /// Whether a new group may start from the queue's minimum offset.
    #[serde(deserialize_with = "boolean")]
    pub consume_from_min_enable: bool,
    /// Whether the group may consume in broadcast mode.
    #[serde(deserialize_with = "boolean")]
    pub consume_broadcast_enable: bool,
    /// Whether the group consumes in order (gRPC FIFO).
    #[serde(deserialize_with = "boolean")]
    pub consume_message_orderly: bool,
    /// Number of queues of the group's retry topic; 0 or less drops failed
    /// messages.
    #[serde(deserialize_with = "int")]
    pub retry_queue_nums: i32,
    /// Redeliveries before a message goes to the dead-letter topic.
    #[serde(deserialize_with = "int")]
    pub retry_max_times: i32,
    /// Back-off policy of gRPC consumers.
    pub group_retry_policy: GroupRetryPolicy,
    /// Broker id pulls are served from.
    #[serde(deserialize_with = "int")]
    pub broker_id: i64,
    /// Broker id suggested when the group consumes slowly.
    #[serde(deserialize_with = "int")]
    pub which_broker_when_consume_slowly: i64,
    /// Whether the group's clients are told when its membership changes.
    #[serde(deserialize_with = "boolean")]
    pub notify_consumer_ids_changed_enable: bool,
    /// Group flags, echoed in pull answers.
    #[serde(deserialize_with = "int")]
    pub group_sys_flag: i32,
    /// Consume timeout in minutes.
    #[serde(deserialize_with = "int")]
    pub consume_timeout_minute: i32,
    /// The group's subscriptions, kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<serde_json::Value>,
    /// Free-form attributes.
    pub attributes: BTreeMap<String, String>,
}

impl Default for SubscriptionGroupConfig {
    fn default() -> Self {
        Self {
            group_name: String::new(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            consume_message_orderly: false,
            retry_queue_nums: 1,
            retry_max_times: 16,
            group_retry_policy: GroupRetryPolicy::default(),
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
            group_sys_flag: 0,
            consume_timeout_minute: 15,
            subscription_data_set: None,
            attributes: BTreeMap::new(),
        }
    }
}

impl SubscriptionGroupConfig {
    /// A group with RocketMQ's default settings.
    pub fn named(group: &str) -> Self {
        Self {
            group_name: group.to_owned(),
            ..Self::default()
        }
    }
}

/// How gRPC consumers of a group back off between deliveries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupRetryPolicy {
    /// `CUSTOMIZED` (the delay levels) or `EXPONENTIAL`.
    #[serde(rename = "type", deserialize_with = "retry_policy_type")]
    pub kind: String,
    /// Settings of the exponential policy, kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exponential_retry_policy: Option<serde_json::Value>,
    /// Settings of the customized policy, kept as sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customized_retry_policy: Option<serde_json::Value>,
}

impl Default for GroupRetryPolicy {
    fn default() -> Self {
        Self {
            kind: "CUSTOMIZED".to_owned(),
            exponential_retry_policy: None,
            customized_retry_policy: None,
        }
    }
}

/// A broker's subscription groups, with their version.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupWrapper {
    /// Version of the table.
    pub data_version: DataVersion,
    /// Topics a group may not consume: group → topic → flag.
    pub forbidden_table: BTreeMap<String, BTreeMap<String, i32>>,
    /// The groups by name.
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_json};

    #[test]
    fn a_bare_name_gets_rocketmq_defaults() {
        let g: SubscriptionGroupConfig = from_json(br#"{"groupName":"G"}"#).unwrap();
        assert_eq!(g, SubscriptionGroupConfig::named("G"));
        assert_eq!((g.retry_max_times, g.retry_queue_nums), (16, 1));
        assert!(g.consume_enable && g.notify_consumer_ids_changed_enable);
    }

    #[test]
    fn fields_are_read_as_fastjson_reads_them() {
        let g: SubscriptionGroupConfig = from_json(
            br#"{"groupName":"G","retryMaxTimes":"3","consumeEnable":"false","groupRetryPolicy":{"type":0},"unknown":[1]}"#,
        )
        .unwrap();
        assert_eq!(g.retry_max_times, 3);
        assert!(!g.consume_enable);
        assert_eq!(g.group_retry_policy.kind, "EXPONENTIAL");
    }

    #[test]
    fn the_default_serializes_as_rocketmq_writes_it() {
        let json: serde_json::Value =
            serde_json::from_slice(&to_json(&SubscriptionGroupConfig::named("G"))).unwrap();
        let rocketmq: serde_json::Value = serde_json::from_str(
            r#"{"attributes":{},"brokerId":0,"consumeBroadcastEnable":true,"consumeEnable":true,"consumeFromMinEnable":true,
"consumeMessageOrderly":false,"consumeTimeoutMinute":15,"groupName":"G","groupRetryPolicy":{"type":"CUSTOMIZED"},
"groupSysFlag":0,"notifyConsumerIdsChangedEnable":true,"retryMaxTimes":16,"retryQueueNums":1,
"whichBrokerWhenConsumeSlowly":1}"#,
        )
        .unwrap();
        assert_eq!(json, rocketmq);
    }

    #[test]
    fn a_byte_order_mark_is_skipped() {
        let g: SubscriptionGroupConfig = from_json(b"\xEF\xBB\xBF{\"groupName\":\"G\"}").unwrap();
        assert_eq!(g.group_name, "G");
    }

    #[test]
    fn the_table_reads_fastjson_output() {
        let w: SubscriptionGroupWrapper = from_json(
            br#"{"dataVersion":{"counter":2,"stateVersion":0,"timestamp":1},"forbiddenTable":{},"subscriptionGroupTable":{"G":{"groupName":"G","retryMaxTimes":2}}}"#,
        )
        .unwrap();
        assert_eq!(w.data_version.counter, 2);
        assert_eq!(w.subscription_group_table["G"].retry_max_times, 2);
    }
}
