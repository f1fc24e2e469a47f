//! Unit tests of the merges and the text and JSON reports of the commands.

use std::collections::BTreeMap;

use remoting_protocol::body::{
    ConsumeStats, MessageQueueBody, OffsetWrapper, SubscriptionGroupConfig,
    SubscriptionGroupWrapper, TopicConfig, TopicConfigSerializeWrapper, TopicOffset,
    TopicStatsTable,
};

use super::*;
use crate::render::Report;

fn mq(topic: &str, broker: &str, id: i32) -> MessageQueueBody {
    MessageQueueBody {
        topic: topic.into(),
        broker_name: broker.into(),
        queue_id: id,
    }
}

#[test]
fn permissions_read_as_rocketmq_writes_them() {
    assert_eq!(perm_text(6), "RW-");
    assert_eq!(perm_text(4), "R--");
    assert_eq!(perm_text(7), "RWX");
    assert_eq!(perm_text(0), "---");
}

#[test]
fn runtime_info_gives_version_tps_and_todays_counts() {
    let mut b = ClusterBroker::default();
    let table: BTreeMap<String, String> = [
        ("brokerVersionDesc", "V5_3_3"),
        ("putTps", "12.5 10.0 "),
        ("msgPutTotalTodayNow", "150"),
        ("msgPutTotalTodayMorning", "100"),
        ("msgGetTotalTodayNow", "x"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    b.read_runtime(&table);
    assert_eq!(b.version.as_deref(), Some("V5_3_3"));
    assert_eq!(b.put_tps, Some(12.5));
    assert_eq!((b.in_today, b.out_today), (Some(50), None));
    b.read_runtime(&BTreeMap::from([("putTps".to_owned(), " ".to_owned())]));
    assert_eq!((b.version, b.put_tps), (None, None));
}

#[test]
fn topics_merge_over_brokers() {
    let wrapper = |topics: &[(&str, i32)]| TopicConfigSerializeWrapper {
        topic_config_table: topics
            .iter()
            .map(|(t, q)| {
                (
                    (*t).to_owned(),
                    TopicConfig {
                        topic_name: (*t).to_owned(),
                        read_queue_nums: *q,
                        write_queue_nums: *q,
                        ..TopicConfig::default()
                    },
                )
            })
            .collect(),
        ..TopicConfigSerializeWrapper::default()
    };
    let report = merge_topics(&[
        ("a:1".into(), wrapper(&[("T", 4), ("Only", 1)])),
        ("b:1".into(), wrapper(&[("T", 8)])),
    ]);
    let names: Vec<&str> = report.topics.iter().map(|t| t.topic.as_str()).collect();
    assert_eq!(names, ["Only", "T"]);
    assert_eq!(report.topics[1].brokers, ["a:1", "b:1"]);
    assert_eq!(report.topics[1].read_queues, 12);
    assert_eq!(
        report.text(),
        "Topic  Read  Write  Perm  Brokers\n\
         Only      1      1  RW-   a:1\n\
         T        12     12  RW-   a:1,b:1\n"
    );
    let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["topics"][1]["writeQueues"], 12);
    assert_eq!(json["topics"][1]["brokers"][1], "b:1");
}

#[test]
fn topic_status_sorts_queues_and_counts_stored_messages() {
    let table = |broker: &str, offsets: &[(i32, i64, i64)]| TopicStatsTable {
        offset_table: offsets
            .iter()
            .map(|(id, min, max)| {
                (
                    mq("T", broker, *id),
                    TopicOffset {
                        min_offset: *min,
                        max_offset: *max,
                        last_update_timestamp: if *max > 0 { 1_714_564_800_123 } else { 0 },
                    },
                )
            })
            .collect(),
        topic_put_tps: 0.0,
    };
    let report = merge_topic_stats(
        "T",
        &[
            ("b:1".into(), table("b", &[(1, 0, 0), (0, 2, 5)])),
            ("a:1".into(), table("a", &[(0, 0, 10)])),
        ],
    );
    let order: Vec<(&str, i32)> = report
        .queues
        .iter()
        .map(|q| (q.broker_name.as_str(), q.queue_id))
        .collect();
    assert_eq!(order, [("a", 0), ("b", 0), ("b", 1)]);
    assert_eq!(report.stored(), 13);
    let text = report.text();
    assert!(
        text.starts_with(
            "Broker  Address  Queue  MinOffset  MaxOffset  LastUpdated(UTC)\n\
             a       a:1          0          0         10  2024-05-01 12:00:00.123\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("b       b:1          1          0          0  -\n"),
        "{text}"
    );
    assert!(
        text.ends_with("topic T: 3 queues, 13 messages stored\n"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        json["queues"][0]["lastUpdateTimestamp"],
        1_714_564_800_123_i64
    );
    assert_eq!(json["queues"][1]["minOffset"], 2);
}

#[test]
fn lag_is_broker_minus_consumer_offset_with_totals() {
    let stats = |rows: &[(&str, i32, i64, i64)]| ConsumeStats {
        consume_tps: 1.5,
        offset_table: rows
            .iter()
            .map(|(topic, id, broker, consumer)| {
                (
                    mq(topic, "a", *id),
                    OffsetWrapper {
                        broker_offset: *broker,
                        consumer_offset: *consumer,
                        last_timestamp: 0,
                        pull_offset: *consumer,
                    },
                )
            })
            .collect(),
    };
    let all = [(
        "a:1".to_owned(),
        stats(&[("T", 0, 10, 4), ("T", 1, 3, 3), ("U", 0, 7, 0)]),
    )];
    let report = merge_consume_stats("G", None, &all);
    assert_eq!(report.queues.len(), 3);
    assert_eq!(
        (
            report.total_broker_offset,
            report.total_consumer_offset,
            report.total_lag
        ),
        (20, 7, 13)
    );
    assert_eq!(report.queues[0].lag, 6);
    let text = report.text();
    assert!(
        text.contains("\nT      a           0            10               4    6  -\n"),
        "{text}"
    );
    assert!(
        text.contains("\nTotal                           20               7   13\n"),
        "{text}"
    );
    assert!(
        text.ends_with("group G: 3 queues, lag 13, consume TPS 1.50\n"),
        "{text}"
    );
    let only_t = merge_consume_stats("G", Some("T"), &all);
    assert_eq!((only_t.queues.len(), only_t.total_lag), (2, 6));
    let json: serde_json::Value = serde_json::from_str(&crate::render::render(&only_t, true))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["totalLag"], 6);
    assert_eq!(json["topic"], "T");
    assert_eq!(json["queues"][0]["consumerOffset"], 4);
}

#[test]
fn groups_merge_over_brokers() {
    let wrapper = |groups: &[&str]| SubscriptionGroupWrapper {
        subscription_group_table: groups
            .iter()
            .map(|g| ((*g).to_owned(), SubscriptionGroupConfig::named(g)))
            .collect(),
        ..SubscriptionGroupWrapper::default()
    };
    let report = merge_groups(&[
        ("a:1".into(), wrapper(&["G", "H"])),
        ("b:1".into(), wrapper(&["G"])),
    ]);
    assert_eq!(report.groups.len(), 2);
    assert_eq!(report.groups[0].brokers, ["a:1", "b:1"]);
    assert_eq!(report.groups[0].retry_max_times, 16);
    assert!(report
        .text()
        .contains("\nH      true     true       false    "));
}

#[test]
fn change_and_config_reports_read_plainly() {
    let change = ChangeReport {
        action: "created topic T with 4 queues".into(),
        brokers: vec!["a:1".into(), "b:1".into()],
    };
    assert_eq!(
        change.text(),
        "created topic T with 4 queues on a:1\ncreated topic T with 4 queues on b:1\n"
    );
    let config = ConfigReport {
        broker: "a:1".into(),
        config: BTreeMap::from([("k".into(), "v".into()), ("long-key".into(), "2".into())]),
    };
    assert_eq!(config.text(), "Key       Value\nk         v\nlong-key  2\n");
}
