//! `DELETE_TOPIC_IN_BROKER` and `GET_ALL_PRODUCER_INFO` against a real
//! broker: a topic with messages and committed offsets is deleted, comes
//! back empty when created again, and the refusals carry RocketMQ's
//! remarks; a heartbeating producer is listed with its language and version.
#![allow(clippy::unwrap_used)]

mod common;

use common::{send_request, TestBroker};
use message_model::flags::PULL_SUSPEND;
use remoting_protocol::{
    body::{self, HeartbeatData, ProducerData, ProducerTableInfo, TopicConfigSerializeWrapper},
    header::{
        DeleteTopicRequestHeader, GetTopicConfigRequestHeader, PullMessageRequestHeader,
        PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    message::record::{check, Record},
    LanguageCode, RemotingCommand, RequestCode, ResponseCode,
};

const TOPIC: &str = "DelT";
const GROUP: &str = "DelG";

async fn delete(b: &TestBroker, topic: &str) -> RemotingCommand {
    b.invoke(RemotingCommand::request_with_header(
        RequestCode::DELETE_TOPIC_IN_BROKER,
        &DeleteTopicRequestHeader {
            topic: topic.into(),
        },
    ))
    .await
}

async fn send(b: &TestBroker, topic: &str, queue_id: i32, body: &str) {
    let sent = b
        .invoke(send_request(topic, queue_id, body.as_bytes(), ""))
        .await;
    assert_eq!(
        sent.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        sent.remark
    );
}

async fn commit(b: &TestBroker, topic: &str, queue_id: i32, offset: i64) {
    let update = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: GROUP.into(),
            topic: topic.into(),
            queue_id,
            commit_offset: offset,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        b.invoke(update).await.response_code(),
        ResponseCode::SUCCESS
    );
}

async fn committed(b: &TestBroker, topic: &str, queue_id: i32) -> RemotingCommand {
    b.invoke(RemotingCommand::request_with_header(
        RequestCode::QUERY_CONSUMER_OFFSET,
        &QueryConsumerOffsetRequestHeader {
            consumer_group: GROUP.into(),
            topic: topic.into(),
            queue_id,
            set_zero_if_not_found: Some(false),
            ..QueryConsumerOffsetRequestHeader::default()
        },
    ))
    .await
}

/// A pull that the broker holds until the queue has a message at `offset`
/// (or 5 s pass): returns once the message is indexed.
async fn pull_waiting(b: &TestBroker, topic: &str, queue_id: i32, offset: i64) -> RemotingCommand {
    b.invoke(RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: "Reader".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: PULL_SUSPEND,
            commit_offset: 0,
            suspend_timeout_millis: 5_000,
            sub_version: 0,
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    ))
    .await
}

/// Queue offsets and bodies of the messages of a pull answer.
fn pulled(answer: &RemotingCommand) -> Vec<(i64, String)> {
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    let mut out = Vec::new();
    let mut rest = &answer.body[..];
    while !rest.is_empty() {
        let Record::Message(m) = check(rest, false) else {
            panic!("the pull body holds a bad record");
        };
        out.push((m.queue_offset, String::from_utf8_lossy(m.body).into_owned()));
        rest = &rest[m.total_size..];
    }
    out
}

async fn all_topics(b: &TestBroker) -> TopicConfigSerializeWrapper {
    let all = b
        .invoke(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG))
        .await;
    assert_eq!(all.response_code(), ResponseCode::SUCCESS);
    body::from_json(&all.body).unwrap()
}

#[tokio::test]
async fn a_deleted_topic_loses_config_offsets_and_queues_and_starts_again_at_zero() {
    let b = TestBroker::start(&[]).await;
    b.create_topic(TOPIC, 2).await;
    for i in 0..3 {
        send(&b, TOPIC, 0, &format!("old-{i}")).await;
    }
    send(&b, TOPIC, 1, "old-q1").await;
    // Both queues indexed before the deletion.
    b.until_dispatched(TOPIC, 0, 3).await;
    b.until_dispatched(TOPIC, 1, 1).await;
    assert_eq!(pulled(&pull_waiting(&b, TOPIC, 0, 2).await).len(), 1);
    assert_eq!(pulled(&pull_waiting(&b, TOPIC, 1, 0).await).len(), 1);
    commit(&b, TOPIC, 0, 2).await;
    commit(&b, TOPIC, 1, 1).await;
    // A POP retry topic of the group that consumed it goes too.
    let retry = format!("%RETRY%{GROUP}_{TOPIC}");
    b.create_topic(&retry, 1).await;
    // Another topic of the same group stays untouched.
    b.create_topic("KeptT", 1).await;
    send(&b, "KeptT", 0, "kept").await;
    commit(&b, "KeptT", 0, 1).await;
    assert_eq!(b.max_offset(TOPIC, 0).await, 3);
    let version_before = all_topics(&b).await.data_version;

    let answer = delete(&b, TOPIC).await;
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    assert_eq!(answer.remark, None);

    // The configuration is gone, and the table registered next changed.
    let config = b
        .invoke(RemotingCommand::request_with_header(
            RequestCode::GET_TOPIC_CONFIG,
            &GetTopicConfigRequestHeader {
                topic: TOPIC.into(),
                ..GetTopicConfigRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(config.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let table = all_topics(&b).await;
    assert!(!table.topic_config_table.contains_key(TOPIC));
    assert!(!table.topic_config_table.contains_key(&retry));
    assert!(table.topic_config_table.contains_key("KeptT"));
    assert!(table.data_version.counter > version_before.counter);
    assert_eq!(
        b.broker.state().topics.wrapper().data_version,
        table.data_version,
        "what the next registration sends"
    );
    // The topics file no longer holds it.
    let state = b.broker.state();
    let topics_file = std::fs::read_to_string(
        state
            .store
            .config()
            .store_path_root_dir
            .join("config")
            .join("topics.json"),
    )
    .unwrap();
    assert!(
        !topics_file.contains(&format!("\"{TOPIC}\"")),
        "{topics_file}"
    );
    assert!(topics_file.contains("\"KeptT\""));

    // The offsets are gone; the other topic's stay.
    for queue_id in [0, 1] {
        assert_eq!(
            committed(&b, TOPIC, queue_id).await.response_code(),
            ResponseCode::QUERY_NOT_FOUND
        );
    }
    let kept = committed(&b, "KeptT", 0).await;
    assert_eq!(kept.response_code(), ResponseCode::SUCCESS);

    // The queues are empty, their files gone, and a pull finds no topic.
    assert_eq!(b.max_offset(TOPIC, 0).await, 0);
    assert_eq!(b.max_offset(TOPIC, 1).await, 0);
    assert_eq!(b.max_offset("KeptT", 0).await, 1);
    assert!(!state
        .store
        .config()
        .consume_queue_dir()
        .join(TOPIC)
        .exists());
    let gone = b.invoke(common::pull_request(TOPIC, 0, 0, 32)).await;
    assert_eq!(gone.response_code(), ResponseCode::TOPIC_NOT_EXIST);

    // Created again, the topic starts at queue offset 0 and serves only
    // its new messages.
    b.create_topic(TOPIC, 2).await;
    assert_eq!(b.max_offset(TOPIC, 0).await, 0);
    let empty = b.invoke(common::pull_request(TOPIC, 0, 0, 32)).await;
    assert_eq!(empty.response_code(), ResponseCode::PULL_NOT_FOUND);
    send(&b, TOPIC, 0, "new-0").await;
    send(&b, TOPIC, 0, "new-1").await;
    let first = pull_waiting(&b, TOPIC, 0, 0).await;
    let mut got = pulled(&first);
    if got.len() < 2 {
        got.extend(pulled(&pull_waiting(&b, TOPIC, 0, 1).await));
    }
    assert_eq!(got, vec![(0, "new-0".to_owned()), (1, "new-1".to_owned())]);
    assert_eq!(b.max_offset(TOPIC, 0).await, 2);
    let header: PullMessageResponseHeader = first.decode_header().unwrap();
    assert_eq!(header.min_offset, 0);
}

#[tokio::test]
async fn an_auto_created_topic_after_a_deletion_starts_at_zero() {
    let b = TestBroker::start(&[("autoCreateTopicEnable", "true")]).await;
    for i in 0..4 {
        send(&b, "AutoDel", 0, &format!("old-{i}")).await;
    }
    b.until_dispatched("AutoDel", 0, 4).await;
    assert_eq!(pulled(&pull_waiting(&b, "AutoDel", 0, 3).await).len(), 1);
    assert_eq!(
        delete(&b, "AutoDel").await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(b.max_offset("AutoDel", 0).await, 0);
    // The send creates the topic again from the template.
    send(&b, "AutoDel", 0, "new").await;
    assert_eq!(
        pulled(&pull_waiting(&b, "AutoDel", 0, 0).await),
        vec![(0, "new".to_owned())]
    );
}

#[tokio::test]
async fn blank_and_system_topics_are_refused_with_rocketmqs_remarks() {
    let b = TestBroker::start(&[]).await;
    for blank in ["", "   "] {
        let answer = delete(&b, blank).await;
        assert_eq!(answer.response_code(), ResponseCode::INVALID_PARAMETER);
        assert_eq!(
            answer.remark.as_deref(),
            Some("The specified topic is blank.")
        );
    }
    for system in [
        "TBW102",
        "SCHEDULE_TOPIC_XXXX",
        "rmq_sys_wheel_timer",
        "RMQ_SYS_TRACE_TOPIC",
    ] {
        let answer = delete(&b, system).await;
        assert_eq!(
            answer.response_code(),
            ResponseCode::INVALID_PARAMETER,
            "{system}"
        );
        assert_eq!(
            answer.remark,
            Some(format!(
                "The topic[{system}] is conflict with system topic."
            ))
        );
    }
    // Still there.
    let table = all_topics(&b).await;
    assert!(table.topic_config_table.contains_key("TBW102"));
    // An unknown topic is nothing to refuse.
    assert_eq!(
        delete(&b, "NeverWas").await.response_code(),
        ResponseCode::SUCCESS
    );
}

#[tokio::test]
async fn producer_info_lists_heartbeating_producers_with_language_and_version() {
    let b = TestBroker::start(&[]).await;
    let empty = b
        .invoke(RemotingCommand::request(RequestCode::GET_ALL_PRODUCER_INFO))
        .await;
    assert_eq!(empty.response_code(), ResponseCode::SUCCESS);
    assert_eq!(&empty.body[..], br#"{"data":{}}"#);

    let before = message_model::now_ms();
    let producer = HeartbeatData {
        client_id: "producer-7".into(),
        producer_data_set: vec![ProducerData {
            group_name: "PG7".into(),
        }],
        ..HeartbeatData::default()
    };
    let mut beat =
        RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body::to_json(&producer));
    beat.language = LanguageCode::Cpp;
    beat.version = 401;
    assert_eq!(b.invoke(beat).await.response_code(), ResponseCode::SUCCESS);
    let after = message_model::now_ms();

    let answer = b
        .invoke(RemotingCommand::request(RequestCode::GET_ALL_PRODUCER_INFO))
        .await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let table = ProducerTableInfo::decode(&answer.body).unwrap();
    assert_eq!(table.data.len(), 1, "{:?}", table.data);
    let infos = &table.data["PG7"];
    assert_eq!(infos.len(), 1);
    let info = &infos[0];
    assert_eq!(info.client_id, "producer-7");
    assert_eq!(info.language, "CPP");
    assert_eq!(info.version, 401);
    assert!(
        info.remote_ip.starts_with("/127.0.0.1:"),
        "{}",
        info.remote_ip
    );
    assert!(
        (before - 1..=after + 1).contains(&info.last_update_timestamp),
        "{} not in {before}..={after}",
        info.last_update_timestamp
    );
    let text = String::from_utf8(answer.body.to_vec()).unwrap();
    assert!(
        text.starts_with(
            r#"{"data":{"PG7":[{"clientId":"producer-7","language":"CPP","lastUpdateTimestamp":"#
        ),
        "{text}"
    );
}
