//! Golden bodies of the topic and consumer administration answers: each
//! encodes to exactly the text fastjson writes for RocketMQ's class (fields
//! sorted by name, nulls left out, queue objects as map keys), and what a
//! Java broker sends decodes.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use remoting_protocol::body::{
    from_json, java_double, to_fastjson, BrokerStatsData, BrokerStatsItem, ClientConnection,
    ConsumeStats, ConsumerConnection, DataVersion, GroupList, MessageQueueBody, OffsetWrapper,
    ProducerConnection, SubscriptionData, TopicConfig, TopicConfigSerializeWrapper, TopicOffset,
    TopicStatsTable,
};

fn queue(topic: &str, broker: &str, queue_id: i32) -> MessageQueueBody {
    MessageQueueBody {
        topic: topic.into(),
        broker_name: broker.into(),
        queue_id,
    }
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap()
}

/// The example of the facts sheet, as a Java broker writes it.
const FACTS_TOPIC_STATS: &str = r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":3,"minOffset":0}},"topicPutTps":0.0}"#;

#[test]
fn topic_stats_encode_with_queue_objects_as_keys() {
    let stats = TopicStatsTable {
        offset_table: BTreeMap::from([
            (
                queue("T", "broker-a", 1),
                TopicOffset {
                    last_update_timestamp: 0,
                    max_offset: 0,
                    min_offset: 0,
                },
            ),
            (
                queue("T", "broker-a", 0),
                TopicOffset {
                    last_update_timestamp: 1_700_000_000_123,
                    max_offset: 3,
                    min_offset: 1,
                },
            ),
        ]),
        topic_put_tps: 0.0,
    };
    assert_eq!(
        text(&stats.encode()),
        r#"{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"lastUpdateTimestamp":1700000000123,"maxOffset":3,"minOffset":1},{"brokerName":"broker-a","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}},"topicPutTps":0.0}"#
    );
    assert_eq!(
        text(&TopicStatsTable::default().encode()),
        r#"{"offsetTable":{},"topicPutTps":0.0}"#
    );
}

#[test]
fn topic_stats_from_a_java_broker_decode_and_encode_back() {
    let stats: TopicStatsTable = from_json(FACTS_TOPIC_STATS.as_bytes()).unwrap();
    assert_eq!(
        stats.offset_table[&queue("T", "b", 0)],
        TopicOffset {
            last_update_timestamp: 0,
            max_offset: 3,
            min_offset: 0,
        }
    );
    assert_eq!(text(&stats.encode()), FACTS_TOPIC_STATS);
    // HashMap order, spaces, and a TPS figure.
    let java = r#"{"offsetTable":{{"brokerName":"b","queueId":1,"topic":"T"}:{"lastUpdateTimestamp":1700000000000,"maxOffset":9,"minOffset":2}, {"brokerName":"b","queueId":0,"topic":"T"} : {"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}},"topicPutTps":12.5}"#;
    let stats: TopicStatsTable = from_json(java.as_bytes()).unwrap();
    assert_eq!(stats.offset_table.len(), 2);
    assert_eq!(stats.offset_table[&queue("T", "b", 1)].min_offset, 2);
    assert!((stats.topic_put_tps - 12.5).abs() < f64::EPSILON);
}

#[test]
fn consume_stats_encode_with_queue_objects_as_keys() {
    let stats = ConsumeStats {
        consume_tps: 0.0,
        offset_table: BTreeMap::from([
            (
                queue("T", "broker-a", 0),
                OffsetWrapper {
                    broker_offset: 3,
                    consumer_offset: 2,
                    last_timestamp: 1_700_000_000_456,
                    pull_offset: 2,
                },
            ),
            (queue("%RETRY%G", "broker-a", 0), OffsetWrapper::default()),
        ]),
    };
    assert_eq!(
        text(&stats.encode()),
        r#"{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"%RETRY%G"}:{"brokerOffset":0,"consumerOffset":0,"lastTimestamp":0,"pullOffset":0},{"brokerName":"broker-a","queueId":0,"topic":"T"}:{"brokerOffset":3,"consumerOffset":2,"lastTimestamp":1700000000456,"pullOffset":2}}}"#
    );
    assert_eq!(stats.total_diff(), 1);
}

#[test]
fn consume_stats_from_a_java_broker_decode() {
    let java = r#"{"consumeTps":3.25,"offsetTable":{{"brokerName":"b","queueId":3,"topic":"T"}:{"brokerOffset":10,"consumerOffset":4,"lastTimestamp":1700000000000,"pullOffset":6}}}"#;
    let stats: ConsumeStats = from_json(java.as_bytes()).unwrap();
    assert_eq!(
        stats.offset_table[&queue("T", "b", 3)],
        OffsetWrapper {
            broker_offset: 10,
            consumer_offset: 4,
            last_timestamp: 1_700_000_000_000,
            pull_offset: 6,
        }
    );
    assert!((stats.consume_tps - 3.25).abs() < f64::EPSILON);
    assert_eq!(text(&stats.encode()), java);
    let empty: ConsumeStats = from_json(br#"{"consumeTps":0.0,"offsetTable":{}}"#).unwrap();
    assert!(empty.offset_table.is_empty());
}

#[test]
fn group_lists_encode_sorted_and_decode() {
    let groups = GroupList {
        group_list: ["G2".to_owned(), "G1".to_owned()].into(),
    };
    assert_eq!(text(&to_fastjson(&groups)), r#"{"groupList":["G1","G2"]}"#);
    let java: GroupList = from_json(br#"{"groupList":["B","A","B"]}"#).unwrap();
    assert_eq!(java.group_list.into_iter().collect::<Vec<_>>(), ["A", "B"]);
    let none: GroupList = from_json(br#"{}"#).unwrap();
    assert!(none.group_list.is_empty());
}

fn java_connection() -> ClientConnection {
    ClientConnection {
        client_addr: "127.0.0.1:54321".into(),
        client_id: "10.0.0.5@1234".into(),
        language: "JAVA".into(),
        version: 479,
    }
}

const JAVA_CONSUMER_CONNECTION: &str = r#"{"connectionSet":[{"clientAddr":"127.0.0.1:54321","clientId":"10.0.0.5@1234","language":"JAVA","version":479}],"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","subscriptionTable":{"T":{"classFilterMode":false,"codeSet":[2598919],"expressionType":"TAG","subString":"TagA","subVersion":1700000000000,"tagsSet":["TagA"],"topic":"T"}}}"#;

#[test]
fn consumer_connections_encode_as_fastjson() {
    let connection = ConsumerConnection {
        connection_set: vec![java_connection()],
        consume_from_where: "CONSUME_FROM_LAST_OFFSET".into(),
        consume_type: "CONSUME_PASSIVELY".into(),
        message_model: "CLUSTERING".into(),
        subscription_table: BTreeMap::from([(
            "T".to_owned(),
            SubscriptionData {
                class_filter_mode: false,
                topic: "T".into(),
                sub_string: "TagA".into(),
                tags_set: vec!["TagA".into()],
                code_set: vec![2_598_919],
                sub_version: 1_700_000_000_000,
                expression_type: "TAG".into(),
            },
        )]),
    };
    assert_eq!(text(&to_fastjson(&connection)), JAVA_CONSUMER_CONNECTION);
    // Unknown enums are Java's nulls: left out.
    let bare = ConsumerConnection {
        connection_set: vec![ClientConnection {
            language: String::new(),
            ..java_connection()
        }],
        ..ConsumerConnection::default()
    };
    assert_eq!(
        text(&to_fastjson(&bare)),
        r#"{"connectionSet":[{"clientAddr":"127.0.0.1:54321","clientId":"10.0.0.5@1234","version":479}],"subscriptionTable":{}}"#
    );
}

#[test]
fn consumer_connections_from_a_java_broker_decode() {
    let got: ConsumerConnection = from_json(JAVA_CONSUMER_CONNECTION.as_bytes()).unwrap();
    assert_eq!(got.connection_set, [java_connection()]);
    assert_eq!(got.message_model, "CLUSTERING");
    assert_eq!(got.subscription_table["T"].code_set, [2_598_919]);
    assert_eq!(got.min_version(), 479);
    // Ordinals and unknown names, as older or other clients' brokers write them.
    let odd: ConsumerConnection = from_json(
        br#"{"connectionSet":[{"clientId":"c","language":9,"version":"317"}],"consumeType":0,"messageModel":"broadcasting","consumeFromWhere":"NOWHERE"}"#,
    )
    .unwrap();
    assert_eq!(odd.connection_set[0].language, "GO");
    assert_eq!(odd.connection_set[0].version, 317);
    assert_eq!(odd.consume_type, "CONSUME_ACTIVELY");
    assert_eq!(odd.message_model, "BROADCASTING");
    assert_eq!(odd.consume_from_where, "");
}

#[test]
fn producer_connections_encode_and_decode() {
    let producers = ProducerConnection {
        connection_set: vec![java_connection()],
    };
    let expected = r#"{"connectionSet":[{"clientAddr":"127.0.0.1:54321","clientId":"10.0.0.5@1234","language":"JAVA","version":479}]}"#;
    assert_eq!(text(&to_fastjson(&producers)), expected);
    assert_eq!(
        from_json::<ProducerConnection>(expected.as_bytes()).unwrap(),
        producers
    );
}

fn topic_config() -> TopicConfig {
    TopicConfig {
        topic_name: "T".into(),
        read_queue_nums: 8,
        write_queue_nums: 4,
        ..TopicConfig::default()
    }
}

const JAVA_TOPIC_CONFIG: &str = r#"{"attributes":{},"order":false,"perm":6,"readQueueNums":8,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#;

#[test]
fn topic_configs_encode_sorted() {
    assert_eq!(text(&to_fastjson(&topic_config())), JAVA_TOPIC_CONFIG);
    assert_eq!(
        from_json::<TopicConfig>(JAVA_TOPIC_CONFIG.as_bytes()).unwrap(),
        topic_config()
    );
}

#[test]
fn the_topic_table_encodes_as_topic_config_and_mapping_wrapper() {
    let version = DataVersion {
        state_version: 0,
        timestamp: 1_700_000_000_000,
        counter: 2,
    };
    let wrapper = TopicConfigSerializeWrapper {
        topic_config_table: BTreeMap::from([("T".to_owned(), topic_config())]),
        data_version: version,
        mapping_data_version: Some(DataVersion {
            counter: 0,
            ..version
        }),
        ..TopicConfigSerializeWrapper::default()
    };
    let expected = format!(
        r#"{{"dataVersion":{{"counter":2,"stateVersion":0,"timestamp":1700000000000}},"mappingDataVersion":{{"counter":0,"stateVersion":0,"timestamp":1700000000000}},"topicConfigTable":{{"T":{JAVA_TOPIC_CONFIG}}},"topicQueueMappingDetailMap":{{}},"topicQueueMappingInfoMap":{{}}}}"#
    );
    assert_eq!(text(&to_fastjson(&wrapper)), expected);
    assert_eq!(
        from_json::<TopicConfigSerializeWrapper>(expected.as_bytes()).unwrap(),
        wrapper
    );
}

/// `BrokerStatsData` as fastjson writes it: windows and their fields sorted
/// by name, whole doubles with `.0`, small ones in scientific form.
const JAVA_BROKER_STATS: &str = r#"{"statsDay":{"avgpt":2.0,"sum":20,"tps":2.314814814814815E-4},"statsHour":{"avgpt":2.0,"sum":20,"tps":0.005555555555555556},"statsMinute":{"avgpt":0.0,"sum":0,"tps":0.0}}"#;

#[test]
fn broker_stats_encode_sorted_with_doubles_and_decode() {
    let item = |sum: i64, tps: f64, avgpt: f64| BrokerStatsItem { sum, tps, avgpt };
    let stats = BrokerStatsData {
        stats_minute: item(0, 0.0, 0.0),
        stats_hour: item(20, 20.0 / 3600.0, 2.0),
        stats_day: item(20, 20.0 / 86_400.0, 2.0),
    };
    assert_eq!(text(&stats.encode()), JAVA_BROKER_STATS);
    assert_eq!(
        from_json::<BrokerStatsData>(JAVA_BROKER_STATS.as_bytes()).unwrap(),
        stats
    );
    let minute: BrokerStatsData =
        from_json(br#"{"statsMinute":{"sum":"7","tps":"0.5","avgpt":"1"}}"#).unwrap();
    assert_eq!(minute.stats_minute, item(7, 0.5, 1.0));
    assert_eq!(minute.stats_day, BrokerStatsItem::default());
}

#[test]
fn doubles_are_spelt_as_java_spells_them() {
    for (value, java) in [
        (0.0, "0.0"),
        (1.5, "1.5"),
        (12_345.0, "12345.0"),
        (0.001, "0.001"),
        (0.000_25, "2.5E-4"),
        (1e7, "1.0E7"),
        (12_345_678.9, "1.23456789E7"),
        (-3.0, "-3.0"),
        (f64::NAN, "NaN"),
    ] {
        assert_eq!(java_double(value), java, "{value}");
    }
}
