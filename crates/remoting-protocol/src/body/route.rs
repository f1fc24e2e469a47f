//! Routes, cluster info and broker registration bodies.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Deserializer, Serialize};

use super::lenient::{boolean, enum_name, int, list, string};

/// `TopicFilterType` constants in ordinal order.
const TOPIC_FILTER_TYPES: &[&str] = &["SINGLE_TAG", "MULTI_TAG"];

fn topic_filter_type<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    enum_name(d, TOPIC_FILTER_TYPES)
}

/// Where a topic lives: its queues per broker and the brokers' addresses
/// (`GET_ROUTEINFO_BY_TOPIC` response body).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicRouteData {
    /// Ordered-topic configuration (`brokerA:8;brokerB:8`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_topic_conf: Option<String>,
    /// Queue counts and permissions per broker name.
    #[serde(deserialize_with = "list")]
    pub queue_datas: Vec<QueueData>,
    /// Addresses per broker name.
    #[serde(deserialize_with = "list")]
    pub broker_datas: Vec<BrokerData>,
    /// Filter servers per broker address.
    pub filter_server_table: BTreeMap<String, Vec<String>>,
    /// Static-topic queue mappings, kept as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic_queue_mapping_by_broker: Option<serde_json::Value>,
}

/// A topic's queues on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueData {
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// Readable queue count.
    #[serde(deserialize_with = "int")]
    pub read_queue_nums: i32,
    /// Writable queue count.
    #[serde(deserialize_with = "int")]
    pub write_queue_nums: i32,
    /// Permission bits.
    #[serde(deserialize_with = "int")]
    pub perm: i32,
    /// Topic system flag.
    #[serde(deserialize_with = "int")]
    pub topic_sys_flag: i32,
}

/// The addresses of one broker name: broker id to `ip:port`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerData {
    /// Cluster name.
    #[serde(deserialize_with = "string")]
    pub cluster: String,
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// Broker id (0 = master) to address.
    pub broker_addrs: BTreeMap<i64, String>,
    /// Zone name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_name: Option<String>,
    /// Acting-master mode.
    #[serde(deserialize_with = "boolean")]
    pub enable_acting_master: bool,
}

impl BrokerData {
    /// The master's address, if the broker name has a master.
    pub fn master_addr(&self) -> Option<&str> {
        self.broker_addrs
            .get(&message_model::flags::MASTER_ID)
            .map(String::as_str)
    }
}

/// Every broker of every cluster (`GET_BROKER_CLUSTER_INFO` response body).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ClusterInfo {
    /// Broker name to its addresses.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name to its broker names.
    pub cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
}

/// Version stamp of a configuration table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// State version.
    #[serde(deserialize_with = "int")]
    pub state_version: i64,
    /// When the table last changed (ms since the epoch).
    #[serde(deserialize_with = "int")]
    pub timestamp: i64,
    /// Change counter.
    #[serde(deserialize_with = "int")]
    pub counter: i64,
}

/// A topic's configuration on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// Topic name.
    #[serde(deserialize_with = "string")]
    pub topic_name: String,
    /// Readable queue count (default 16).
    #[serde(deserialize_with = "int")]
    pub read_queue_nums: i32,
    /// Writable queue count (default 16).
    #[serde(deserialize_with = "int")]
    pub write_queue_nums: i32,
    /// Permission bits (default 6, read and write).
    #[serde(deserialize_with = "int")]
    pub perm: i32,
    /// Tag filter type (`SINGLE_TAG` or `MULTI_TAG`).
    #[serde(deserialize_with = "topic_filter_type")]
    pub topic_filter_type: String,
    /// Topic system flag.
    #[serde(deserialize_with = "int")]
    pub topic_sys_flag: i32,
    /// Ordered topic.
    #[serde(deserialize_with = "boolean")]
    pub order: bool,
    /// Topic attributes.
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        Self {
            topic_name: String::new(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: message_model::flags::PERM_READ | message_model::flags::PERM_WRITE,
            topic_filter_type: "SINGLE_TAG".to_owned(),
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
        }
    }
}

/// A broker's topic table with its version.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Topic name to configuration.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Version of the table.
    pub data_version: DataVersion,
    /// Static-topic mapping info, kept as received.
    pub topic_queue_mapping_info_map: serde_json::Map<String, serde_json::Value>,
    /// Static-topic mapping details, kept as received.
    pub topic_queue_mapping_detail_map: serde_json::Map<String, serde_json::Value>,
    /// Version of the mappings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mapping_data_version: Option<DataVersion>,
}

/// `REGISTER_BROKER` request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// The broker's topics.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    /// Filter servers.
    #[serde(deserialize_with = "list")]
    pub filter_server_list: Vec<String>,
}

/// A string table (`{"table":{...}}`), used by runtime info and KV config.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct KvTable {
    /// Keys to values.
    pub table: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_json};

    const LEGACY_ROUTE: &str = r#"{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}"#;

    #[test]
    fn legacy_route_with_unquoted_broker_ids_parses() {
        let route: TopicRouteData = from_json(LEGACY_ROUTE.as_bytes()).unwrap();
        assert_eq!(route.broker_datas[0].master_addr(), Some("10.0.0.1:10911"));
        assert_eq!(route.broker_datas[0].broker_addrs.len(), 2);
        assert_eq!(route.queue_datas[0].write_queue_nums, 4);
        let standard = String::from_utf8(to_json(&route)).unwrap();
        assert!(standard.contains(r#""brokerAddrs":{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}"#));
        assert_eq!(
            from_json::<TopicRouteData>(standard.as_bytes()).unwrap(),
            route
        );
    }

    #[test]
    fn topic_configs_and_queue_data_read_as_fastjson_reads_them() {
        let config: TopicConfig = from_json(
            br#"{"topicName":"T","readQueueNums":"8","writeQueueNums":4.0,"perm":"6","topicFilterType":1,"order":"1","unknown":[1]}"#,
        )
        .unwrap();
        assert_eq!(
            (config.read_queue_nums, config.write_queue_nums, config.perm),
            (8, 4, 6)
        );
        assert_eq!(config.topic_filter_type, "MULTI_TAG");
        assert!(config.order);
        let named: TopicConfig = from_json(br#"{"topicFilterType":"multi_tag"}"#).unwrap();
        assert_eq!(named.topic_filter_type, "MULTI_TAG");
        assert_eq!(
            named.read_queue_nums, 16,
            "absent fields keep Java's initializers"
        );
        let route: TopicRouteData = from_json(
            br#"{"queueDatas":null,"brokerDatas":[{"brokerName":"b","enableActingMaster":"0"}]}"#,
        )
        .unwrap();
        assert!(route.queue_datas.is_empty());
        assert!(!route.broker_datas[0].enable_acting_master);
    }

    #[test]
    fn register_body_parses_with_defaults_and_string_longs() {
        let text = r#"{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicName":"T","readQueueNums":8,"writeQueueNums":8,"perm":6,"topicFilterType":"SINGLE_TAG","topicSysFlag":0,"order":false,"attributes":{}}},"dataVersion":{"stateVersion":0,"timestamp":"9007199254740993","counter":3},"topicQueueMappingInfoMap":{},"topicQueueMappingDetailMap":{}},"filterServerList":[]}"#;
        let body: RegisterBrokerBody = from_json(text.as_bytes()).unwrap();
        let wrapper = &body.topic_config_serialize_wrapper;
        assert_eq!(wrapper.topic_config_table["T"].read_queue_nums, 8);
        assert_eq!(wrapper.data_version.timestamp, 9_007_199_254_740_993);
        assert_eq!(wrapper.data_version.counter, 3);
        let partial: TopicConfig = from_json(br#"{"topicName":"X"}"#).unwrap();
        assert_eq!((partial.read_queue_nums, partial.perm), (16, 6));
    }

    #[test]
    fn cluster_info_parses() {
        let text = r#"{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}},"clusterAddrTable":{"C":["broker-a"]}}"#;
        let info: ClusterInfo = from_json(text.as_bytes()).unwrap();
        assert!(info.cluster_addr_table["C"].contains("broker-a"));
        assert_eq!(
            info.broker_addr_table["broker-a"].master_addr(),
            Some("127.0.0.1:10911")
        );
    }
}
