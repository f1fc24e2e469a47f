//! The topic and consumer admin codes that `mqadmin`, the dashboard and the
//! exporter call, against a real broker: a topic with messages, a group
//! with a committed offset, a consumer and a producer heartbeating, and
//! then each code's figures and refusals.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{pull_request, send_request, TestBroker};
use remoting_protocol::{
    body::{
        self, ConsumeStats, ConsumerConnection, ConsumerData, GroupList, HeartbeatData,
        MessageQueueBody, OffsetWrapper, ProducerConnection, ProducerData, SubscriptionData,
        TopicConfig, TopicConfigSerializeWrapper, TopicOffset, TopicStatsTable,
    },
    header::{
        GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
        GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
        GetMaxOffsetRequestHeader, GetProducerConnectionListRequestHeader,
        GetTopicConfigRequestHeader, GetTopicStatsInfoRequestHeader, OffsetResponseHeader,
        QueryTopicConsumeByWhoRequestHeader, UpdateConsumerOffsetRequestHeader,
    },
    message::record::{check, Record},
    LanguageCode, RemotingCommand, RequestCode, ResponseCode,
};

const BROKER: &str = "broker-admin";
const TOPIC: &str = "AdminT";
/// A second topic the group has an offset on but does not subscribe to.
const OTHER: &str = "AdminU";

fn queue(topic: &str, queue_id: i32) -> MessageQueueBody {
    MessageQueueBody {
        topic: topic.into(),
        broker_name: BROKER.into(),
        queue_id,
    }
}

async fn commit(b: &TestBroker, group: &str, topic: &str, offset: i64) {
    let update = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id: 0,
            commit_offset: offset,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        b.invoke(update).await.response_code(),
        ResponseCode::SUCCESS
    );
}

async fn heartbeat(b: &TestBroker, data: &HeartbeatData, language: LanguageCode, version: i32) {
    let mut beat = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body::to_json(data));
    beat.language = language;
    beat.version = version;
    let answer = b.invoke(beat).await;
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
}

fn consumer(client: &str, group: &str, topic: &str) -> HeartbeatData {
    HeartbeatData {
        client_id: client.into(),
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: "CONSUME_PASSIVELY".into(),
            message_model: "CLUSTERING".into(),
            consume_from_where: "CONSUME_FROM_FIRST_OFFSET".into(),
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                sub_version: 1_700_000_000_000,
                ..SubscriptionData::default()
            }],
            ..ConsumerData::default()
        }],
        ..HeartbeatData::default()
    }
}

/// Sends three messages to queue 0, each in a later millisecond than the
/// one before was stored, and returns their store times, read back with a
/// pull once the queue index holds them.
async fn three_messages(b: &TestBroker) -> Vec<i64> {
    for i in 0..3 {
        let sent = b
            .invoke(send_request(TOPIC, 0, format!("m{i}").as_bytes(), ""))
            .await;
        assert_eq!(
            sent.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            sent.remark
        );
        // Distinct store times tell the messages apart in the answers.
        let stored_by = message_model::now_ms();
        while message_model::now_ms() <= stored_by {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    // The queue index follows the log asynchronously.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let max = b
            .invoke(RemotingCommand::request_with_header(
                RequestCode::GET_MAX_OFFSET,
                &GetMaxOffsetRequestHeader {
                    topic: TOPIC.into(),
                    queue_id: 0,
                    ..GetMaxOffsetRequestHeader::default()
                },
            ))
            .await;
        if max.decode_header::<OffsetResponseHeader>().unwrap().offset == 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the queue index never held 3 messages"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let pulled = b.invoke(pull_request(TOPIC, 0, 0, 32)).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    let mut times = Vec::new();
    let mut rest = &pulled.body[..];
    while !rest.is_empty() {
        let Record::Message(m) = check(rest, false) else {
            panic!("the pull body holds a bad record");
        };
        times.push(m.store_timestamp);
        rest = &rest[m.total_size..];
    }
    assert_eq!(times.len(), 3);
    times
}

fn request(code: RequestCode, header: &impl remoting_protocol::CommandHeader) -> RemotingCommand {
    RemotingCommand::request_with_header(code, header)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_codes_answer_topic_group_and_client_figures() {
    let b = TestBroker::start(&[("brokerName", BROKER)]).await;
    b.create_topic(TOPIC, 2).await;
    b.create_topic(OTHER, 2).await;
    let before = message_model::now_ms();
    let times = three_messages(&b).await;
    let after = message_model::now_ms();
    assert!(
        times.windows(2).all(|w| w[0] < w[1]) && times[0] >= before && times[2] <= after,
        "{times:?} not within [{before}, {after}]"
    );
    commit(&b, "CG", TOPIC, 2).await;
    commit(&b, "CG", OTHER, 0).await;
    commit(&b, "OffsetOnly", TOPIC, 1).await;
    heartbeat(
        &b,
        &consumer("consumer-1", "CG", TOPIC),
        LanguageCode::Java,
        479,
    )
    .await;
    heartbeat(
        &b,
        &consumer("watcher-1", "Watcher", TOPIC),
        LanguageCode::Go,
        317,
    )
    .await;
    let producer = HeartbeatData {
        client_id: "producer-1".into(),
        producer_data_set: vec![ProducerData {
            group_name: "PG".into(),
        }],
        ..HeartbeatData::default()
    };
    heartbeat(&b, &producer, LanguageCode::Cpp, 400).await;

    // GET_ALL_TOPIC_CONFIG: the whole table, fields sorted, no paging.
    let mut all = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG);
    all.set_ext("topicSeq", "0");
    all.set_ext("maxTopicNum", "1");
    let all = b.invoke(all).await;
    assert_eq!(all.response_code(), ResponseCode::SUCCESS);
    assert!(all.ext("totalTopicNum").is_none());
    let text = String::from_utf8(all.body.to_vec()).unwrap();
    assert!(text.starts_with(r#"{"dataVersion":{"counter":"#), "{text}");
    assert!(
        text.contains(r#","mappingDataVersion":{"counter":0,"#),
        "{text}"
    );
    assert!(text.ends_with(r#""topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}"#));
    let table: TopicConfigSerializeWrapper = body::from_json(&all.body).unwrap();
    assert!(
        table.topic_config_table.len() >= 3,
        "{:?}",
        table.topic_config_table.keys()
    );
    assert_eq!(table.topic_config_table[TOPIC].write_queue_nums, 2);
    assert!(table.topic_config_table.contains_key(OTHER));
    assert!(table.data_version.counter >= 2);

    // GET_TOPIC_CONFIG.
    let config = b
        .invoke(request(
            RequestCode::GET_TOPIC_CONFIG,
            &GetTopicConfigRequestHeader {
                topic: TOPIC.into(),
                lo: Some(true),
                ..GetTopicConfigRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(config.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        std::str::from_utf8(&config.body).unwrap(),
        r#"{"attributes":{},"order":false,"perm":6,"readQueueNums":2,"topicFilterType":"SINGLE_TAG","topicName":"AdminT","topicSysFlag":0,"writeQueueNums":2}"#
    );
    let parsed: TopicConfig = body::from_json(&config.body).unwrap();
    assert_eq!(parsed, table.topic_config_table[TOPIC]);
    let missing = b
        .invoke(request(
            RequestCode::GET_TOPIC_CONFIG,
            &GetTopicConfigRequestHeader {
                topic: "Nope".into(),
                ..GetTopicConfigRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(
        missing.remark.as_deref(),
        Some("No topic in this broker. topic: Nope")
    );

    // GET_TOPIC_STATS_INFO: offsets and the last message's store time.
    let stats_of = |topic: &str| {
        request(
            RequestCode::GET_TOPIC_STATS_INFO,
            &GetTopicStatsInfoRequestHeader {
                topic: topic.into(),
                ..GetTopicStatsInfoRequestHeader::default()
            },
        )
    };
    let stats = b.invoke(stats_of(TOPIC)).await;
    assert_eq!(stats.response_code(), ResponseCode::SUCCESS);
    let expected = format!(
        r#"{{"offsetTable":{{{{"brokerName":"{BROKER}","queueId":0,"topic":"{TOPIC}"}}:{{"lastUpdateTimestamp":{},"maxOffset":3,"minOffset":0}},{{"brokerName":"{BROKER}","queueId":1,"topic":"{TOPIC}"}}:{{"lastUpdateTimestamp":0,"maxOffset":0,"minOffset":0}}}},"topicPutTps":"#,
        times[2]
    );
    assert!(
        std::str::from_utf8(&stats.body)
            .unwrap()
            .starts_with(&expected),
        "{expected}"
    );
    let parsed: TopicStatsTable = body::from_json(&stats.body).unwrap();
    // Three messages were put in the last minute.
    assert!(parsed.topic_put_tps > 0.0, "{parsed:?}");
    assert_eq!(
        parsed.offset_table[&queue(TOPIC, 0)],
        TopicOffset {
            last_update_timestamp: times[2],
            max_offset: 3,
            min_offset: 0,
        }
    );
    let missing = b.invoke(stats_of("Nope")).await;
    assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(missing.remark.as_deref(), Some("topic[Nope] not exist"));

    // GET_CONSUME_STATS.
    let consume_stats = |group: &str, topic: Option<&str>, list: Option<&str>| {
        let b = &b;
        let req = request(
            RequestCode::GET_CONSUME_STATS,
            &GetConsumeStatsRequestHeader {
                consumer_group: group.into(),
                topic: topic.map(str::to_owned),
                topic_list: list.map(str::to_owned),
                ..GetConsumeStatsRequestHeader::default()
            },
        );
        async move {
            let answer = b.invoke(req).await;
            assert_eq!(
                answer.response_code(),
                ResponseCode::SUCCESS,
                "{:?}",
                answer.remark
            );
            body::from_json::<ConsumeStats>(&answer.body).unwrap()
        }
    };
    let progress = consume_stats("CG", Some(TOPIC), None).await;
    let expected_q0 = OffsetWrapper {
        broker_offset: 3,
        consumer_offset: 2,
        last_timestamp: times[1],
        // "CG" pulled all three messages, and committed two.
        pull_offset: 3,
    };
    assert_eq!(progress.offset_table.len(), 2);
    assert_eq!(progress.offset_table[&queue(TOPIC, 0)], expected_q0);
    assert_eq!(
        progress.offset_table[&queue(TOPIC, 1)],
        OffsetWrapper::default()
    );
    assert_eq!(progress.total_diff(), 1);
    // Without a topic: the group's offsets, less the topic the online
    // group does not subscribe to.
    let all_topics = consume_stats("CG", None, None).await;
    assert_eq!(all_topics.offset_table, progress.offset_table);
    // A topic list is taken as it is; unknown topics are skipped.
    let listed = consume_stats("CG", None, Some(&format!("{OTHER};Nope"))).await;
    let topics: Vec<&str> = listed
        .offset_table
        .keys()
        .map(|q| q.topic.as_str())
        .collect();
    assert_eq!(topics, [OTHER, OTHER]);
    // A group offline: every topic it has offsets on.
    let offline = consume_stats("OffsetOnly", None, None).await;
    assert_eq!(offline.offset_table[&queue(TOPIC, 0)].consumer_offset, 1);
    assert_eq!(
        offline.offset_table[&queue(TOPIC, 0)].last_timestamp,
        times[0]
    );
    let nobody = b
        .invoke(request(
            RequestCode::GET_CONSUME_STATS,
            &GetConsumeStatsRequestHeader {
                consumer_group: "Nobody".into(),
                ..GetConsumeStatsRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(
        std::str::from_utf8(&nobody.body).unwrap(),
        r#"{"consumeTps":0.0,"offsetTable":{}}"#
    );

    // QUERY_TOPIC_CONSUME_BY_WHO: online subscribers and offset holders.
    let who = b
        .invoke(request(
            RequestCode::QUERY_TOPIC_CONSUME_BY_WHO,
            &QueryTopicConsumeByWhoRequestHeader {
                topic: TOPIC.into(),
                ..QueryTopicConsumeByWhoRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(who.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        std::str::from_utf8(&who.body).unwrap(),
        r#"{"groupList":["CG","OffsetOnly","Watcher"]}"#
    );
    let groups: GroupList = body::from_json(&who.body).unwrap();
    assert_eq!(groups.group_list.len(), 3);

    // GET_CONSUMER_CONNECTION_LIST.
    let connections_of = |group: &str| {
        request(
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: group.into(),
            },
        )
    };
    let online = b.invoke(connections_of("CG")).await;
    assert_eq!(online.response_code(), ResponseCode::SUCCESS);
    let cc: ConsumerConnection = body::from_json(&online.body).unwrap();
    assert_eq!(cc.connection_set.len(), 1);
    let c = &cc.connection_set[0];
    assert_eq!(
        (c.client_id.as_str(), c.language.as_str(), c.version),
        ("consumer-1", "JAVA", 479)
    );
    assert!(c.client_addr.starts_with("127.0.0.1:"), "{}", c.client_addr);
    assert_eq!(cc.consume_type, "CONSUME_PASSIVELY");
    assert_eq!(cc.message_model, "CLUSTERING");
    assert_eq!(cc.consume_from_where, "CONSUME_FROM_FIRST_OFFSET");
    let sub = &cc.subscription_table[TOPIC];
    assert_eq!(
        (sub.sub_string.as_str(), sub.expression_type.as_str()),
        ("*", "TAG")
    );
    let text = std::str::from_utf8(&online.body).unwrap();
    assert!(
        text.starts_with(r#"{"connectionSet":[{"clientAddr":"127.0.0.1:"#),
        "{text}"
    );
    assert!(
        text.ends_with(r#""subscriptionTable":{"AdminT":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*","subVersion":1700000000000,"tagsSet":[],"topic":"AdminT"}}}"#),
        "{text}"
    );
    let ghost = b.invoke(connections_of("Ghost")).await;
    assert_eq!(ghost.response_code(), ResponseCode::CONSUMER_NOT_ONLINE);
    assert_eq!(
        ghost.remark.as_deref(),
        Some("the consumer group[Ghost] not online")
    );

    // GET_PRODUCER_CONNECTION_LIST.
    let producers_of = |group: &str| {
        request(
            RequestCode::GET_PRODUCER_CONNECTION_LIST,
            &GetProducerConnectionListRequestHeader {
                producer_group: group.into(),
            },
        )
    };
    let online = b.invoke(producers_of("PG")).await;
    assert_eq!(online.response_code(), ResponseCode::SUCCESS);
    let pc: ProducerConnection = body::from_json(&online.body).unwrap();
    let ids: Vec<(&str, &str, i32)> = pc
        .connection_set
        .iter()
        .map(|c| (c.client_id.as_str(), c.language.as_str(), c.version))
        .collect();
    assert_eq!(ids, [("producer-1", "CPP", 400)]);
    let unknown = b.invoke(producers_of("NoPG")).await;
    assert_eq!(unknown.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        unknown.remark.as_deref(),
        Some("the producer group[NoPG] not exist")
    );

    // GET_ALL_CONSUMER_OFFSET: consumerOffset.json's layout.
    let offsets = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_ALL_CONSUMER_OFFSET,
        ))
        .await;
    assert_eq!(offsets.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        std::str::from_utf8(&offsets.body).unwrap(),
        r#"{"offsetTable":{"AdminT@CG":{0:2},"AdminT@OffsetOnly":{0:1},"AdminU@CG":{0:0}}}"#
    );

    // GET_EARLIEST_MSG_STORETIME.
    let earliest = |queue_id: i32| {
        request(
            RequestCode::GET_EARLIEST_MSG_STORETIME,
            &GetEarliestMsgStoretimeRequestHeader {
                topic: TOPIC.into(),
                queue_id,
                ..GetEarliestMsgStoretimeRequestHeader::default()
            },
        )
    };
    let first = b.invoke(earliest(0)).await;
    assert_eq!(first.response_code(), ResponseCode::SUCCESS);
    let header: GetEarliestMsgStoretimeResponseHeader = first.decode_header().unwrap();
    assert_eq!(header.timestamp, times[0]);
    let empty: GetEarliestMsgStoretimeResponseHeader =
        b.invoke(earliest(1)).await.decode_header().unwrap();
    assert_eq!(empty.timestamp, -1);
    let mut no_queue = RemotingCommand::request(RequestCode::GET_EARLIEST_MSG_STORETIME);
    no_queue.set_ext("topic", TOPIC);
    let refused = b.invoke(no_queue).await;
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(refused.remark.unwrap().contains("queueId"));

    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_offsets_answers_an_empty_offset_table() {
    let b = TestBroker::start(&[]).await;
    let offsets = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_ALL_CONSUMER_OFFSET,
        ))
        .await;
    assert_eq!(offsets.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        std::str::from_utf8(&offsets.body).unwrap(),
        r#"{"offsetTable":{}}"#
    );
    b.broker.shutdown().await;
}
