//! Consumer retries, dead letters, delay levels and subscription groups on a
//! real broker, driven with raw remoting requests.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{batch_request, pull_request, send_request, TestBroker};
use message_model::{
    properties::{find, keys},
    record::{self, Record},
};
use remoting_protocol::{
    body::{self, BatchEntry, SubscriptionGroupConfig, SubscriptionGroupWrapper},
    header::{
        ConsumerSendMsgBackRequestHeader, DeleteSubscriptionGroupRequestHeader,
        SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
    },
    message::MessageId,
    RemotingCommand, RequestCode, ResponseCode,
};

/// Every level one second, so that retries come back quickly.
const ONE_SECOND_LEVELS: (&str, &str) = ("messageDelayLevel", "1s 1s 1s 1s 1s");

/// A message as pulled: what the tests look at.
#[derive(Debug)]
struct Pulled {
    topic: String,
    physical_offset: i64,
    reconsume_times: i32,
    born_timestamp: i64,
    store_timestamp: i64,
    body: Vec<u8>,
    properties: String,
}

impl Pulled {
    fn property(&self, key: &str) -> Option<&str> {
        find(&self.properties, key)
    }
}

/// Pulls one queue (as group `CG`) until it holds a message at `offset`,
/// for at most 15 s.
async fn pull_one(b: &TestBroker, topic: &str, queue_id: i32, offset: i64) -> Pulled {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let answer = b.invoke(pull_request(topic, queue_id, offset, 1)).await;
        if answer.response_code() == ResponseCode::SUCCESS {
            let Record::Message(m) = record::check(&answer.body, true) else {
                panic!("not a message record")
            };
            return Pulled {
                topic: m.topic.to_owned(),
                physical_offset: m.physical_offset,
                reconsume_times: m.reconsume_times,
                born_timestamp: m.born_timestamp,
                store_timestamp: m.store_timestamp,
                body: m.body.to_vec(),
                properties: m.properties.to_owned(),
            };
        }
        assert!(
            Instant::now() < deadline,
            "nothing at {topic}:{queue_id}@{offset} within 15 s: {:?} {:?}",
            answer.response_code(),
            answer.remark
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn send_back(offset: i64, group: &str, delay_level: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::CONSUMER_SEND_MSG_BACK,
        &ConsumerSendMsgBackRequestHeader {
            offset,
            group: group.into(),
            delay_level,
            origin_topic: Some("T".into()),
            ..ConsumerSendMsgBackRequestHeader::default()
        },
    )
}

fn create_group(config: &SubscriptionGroupConfig) -> RemotingCommand {
    RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(body::to_json(config))
}

async fn groups(b: &TestBroker) -> SubscriptionGroupWrapper {
    let all = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        ))
        .await;
    assert_eq!(all.response_code(), ResponseCode::SUCCESS);
    body::from_json(&all.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_message_comes_back_delayed_then_goes_to_the_dead_letter_topic() {
    let b = TestBroker::start(&[ONE_SECOND_LEVELS]).await;
    let group = SubscriptionGroupConfig {
        retry_max_times: 2,
        ..SubscriptionGroupConfig::named("G")
    };
    assert_eq!(
        b.invoke(create_group(&group)).await.response_code(),
        ResponseCode::SUCCESS
    );
    let sent = b
        .invoke(send_request("T", 0, b"poison", "TAGS\u{1}A\u{2}"))
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    let original = pull_one(&b, "T", 0, 0).await;
    let original_id: SendMessageResponseHeader = sent.decode_header().unwrap();

    // Attempt 1 fails: back through %RETRY%G after level 3 (1 s here).
    let answer = b.invoke(send_back(original.physical_offset, "G", 0)).await;
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    let first = pull_one(&b, "%RETRY%G", 0, 0).await;
    assert_eq!(first.reconsume_times, 1);
    assert_eq!(first.body, b"poison");
    assert_eq!(first.property(keys::RETRY_TOPIC), Some("T"));
    assert_eq!(first.property(keys::TAGS), Some("A"));
    assert_eq!(
        first.property(keys::ORIGIN_MESSAGE_ID),
        Some(original_id.msg_id.as_str()),
        "the offset id of the message first consumed"
    );
    assert!(
        first.store_timestamp >= original.store_timestamp + 1_000,
        "delivered before its delay: stored {} then {}",
        original.store_timestamp,
        first.store_timestamp
    );

    // Attempt 2 fails: back again, the count raised and the origin kept.
    let answer = b.invoke(send_back(first.physical_offset, "G", 0)).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let second = pull_one(&b, "%RETRY%G", 0, 1).await;
    assert_eq!(second.reconsume_times, 2);
    assert_eq!(second.property(keys::RETRY_TOPIC), Some("T"));
    assert_eq!(
        second.property(keys::ORIGIN_MESSAGE_ID),
        Some(original_id.msg_id.as_str())
    );

    // Attempt 3 fails: retryMaxTimes (2) reached, so the dead-letter topic,
    // at once.
    let answer = b.invoke(send_back(second.physical_offset, "G", 0)).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let dead = pull_one(&b, "%DLQ%G", 0, 0).await;
    assert_eq!(dead.topic, "%DLQ%G");
    assert_eq!(dead.reconsume_times, 3);
    assert_eq!(dead.body, b"poison");
    assert_eq!(dead.property(keys::RETRY_TOPIC), Some("T"));

    // Level -1 asks for the dead-letter topic whatever the count.
    let answer = b.invoke(send_back(original.physical_offset, "G", -1)).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let now = pull_one(&b, "%DLQ%G", 0, 1).await;
    assert_eq!(now.reconsume_times, 1);

    // Nothing is found at an offset that holds no message.
    let missing = b.invoke(send_back(1 << 40, "G", 0)).await;
    assert_eq!(missing.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(missing
        .remark
        .unwrap()
        .contains("look message by offset failed"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_send_to_a_retry_topic_past_the_maximum_goes_to_the_dead_letter_topic() {
    let b = TestBroker::start(&[ONE_SECOND_LEVELS]).await;
    let send = |reconsume_times: i32, max: i32| {
        let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
            producer_group: "CLIENT_INNER_PRODUCER".into(),
            topic: "%RETRY%J".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            born_timestamp: message_model::now_ms(),
            properties: Some("RETRY_TOPIC\u{1}T\u{2}DELAY\u{1}3\u{2}".into()),
            reconsume_times: Some(reconsume_times),
            max_reconsume_times: Some(max),
            ..SendMessageRequestHeader::default()
        });
        RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
            .with_body(b"fallback".to_vec())
    };
    // Within the maximum: delayed into the retry topic, as a send-back.
    let within = b.invoke(send(3, 3)).await;
    assert_eq!(within.response_code(), ResponseCode::SUCCESS);
    let retried = pull_one(&b, "%RETRY%J", 0, 0).await;
    assert_eq!(retried.reconsume_times, 3);
    assert!(retried.store_timestamp >= retried.born_timestamp + 1_000);
    // Past it: the dead-letter topic, undelayed.
    let past = b.invoke(send(4, 3)).await;
    assert_eq!(past.response_code(), ResponseCode::SUCCESS);
    let dead = pull_one(&b, "%DLQ%J", 0, 0).await;
    assert_eq!(dead.body, b"fallback");
    assert_eq!(dead.property(keys::DELAY_TIME_LEVEL), Some("0"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_messages_arrive_after_their_level_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [ONE_SECOND_LEVELS, ("flushDelayOffsetInterval", "100")];
    let b = TestBroker::start_in(dir.path(), &overrides).await;
    let sent = b
        .invoke(send_request(
            "D",
            1,
            b"later",
            "DELAY\u{1}2\u{2}KEYS\u{1}k\u{2}",
        ))
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    let answer: SendMessageResponseHeader = sent.decode_header().unwrap();
    assert_eq!(answer.queue_id, 1, "the queue asked for");
    let scheduled = MessageId::decode(&answer.msg_id).unwrap();
    let delivered = pull_one(&b, "D", 1, 0).await;
    assert_eq!(delivered.body, b"later");
    assert_eq!(delivered.property(keys::KEYS), Some("k"));
    assert_eq!(delivered.property(keys::REAL_TOPIC), None);
    assert!(delivered.store_timestamp >= delivered.born_timestamp + 1_000);
    assert_ne!(
        delivered.physical_offset, scheduled.commit_log_offset,
        "a new record"
    );

    // One more, then a restart before it is due: it is delivered after.
    let sent = b
        .invoke(send_request("D", 1, b"across", "DELAY\u{1}5\u{2}"))
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    b.broker.shutdown().await;
    let b = TestBroker::start_in(dir.path(), &overrides).await;
    let after = pull_one(&b, "D", 1, 1).await;
    assert_eq!(after.body, b"across");
    assert!(after.store_timestamp >= after.born_timestamp + 1_000);
    let offsets = b
        .invoke(RemotingCommand::request(RequestCode::GET_ALL_DELAY_OFFSET))
        .await;
    assert_eq!(offsets.response_code(), ResponseCode::SUCCESS);
    let text = String::from_utf8(offsets.body.to_vec()).unwrap();
    assert!(text.contains("\"offsetTable\":{"), "{text}");
    // The first message was not delivered twice.
    let nothing = b.invoke(pull_request("D", 1, 2, 1)).await;
    assert_eq!(nothing.response_code(), ResponseCode::PULL_NOT_FOUND);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_that_cannot_be_honoured_are_refused() {
    let b = TestBroker::start(&[]).await;
    let bad = b
        .invoke(send_request("E", 0, b"x", "DELAY\u{1}soon\u{2}"))
        .await;
    assert_eq!(bad.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(bad.remark.unwrap().contains("not a delay level"));

    let entries = [BatchEntry {
        body: bytes::Bytes::from_static(b"b"),
        flag: 0,
        properties: "DELAY\u{1}1\u{2}".into(),
    }];
    let batch = b.invoke(batch_request("E", &entries)).await;
    assert_eq!(batch.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    assert!(batch.remark.unwrap().contains("cannot be delayed"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_groups_are_administered_and_enforced() {
    let b = TestBroker::start(&[("autoCreateSubscriptionGroup", "false")]).await;
    let sent = b.invoke(send_request("S", 0, b"x", "")).await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);

    // Unknown groups may not pull or send back while auto-creation is off.
    let unknown = b.invoke(pull_request("S", 0, 0, 1)).await;
    assert_eq!(
        unknown.response_code(),
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST
    );
    let back = b.invoke(send_back(0, "CG", 0)).await;
    assert_eq!(
        back.response_code(),
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST
    );
    let invalid = b
        .invoke(create_group(&SubscriptionGroupConfig::named("no spaces")))
        .await;
    assert_eq!(invalid.response_code(), ResponseCode::INVALID_PARAMETER);
    assert!(invalid.remark.unwrap().contains("illegal characters"));

    // A group that may not consume.
    let disabled = SubscriptionGroupConfig {
        consume_enable: false,
        ..SubscriptionGroupConfig::named("CG")
    };
    assert_eq!(
        b.invoke(create_group(&disabled)).await.response_code(),
        ResponseCode::SUCCESS
    );
    let forbidden = b.invoke(pull_request("S", 0, 0, 1)).await;
    assert_eq!(forbidden.response_code(), ResponseCode::NO_PERMISSION);
    assert_eq!(
        forbidden.remark.as_deref(),
        Some("subscription group no permission, CG")
    );
    let table = groups(&b).await;
    assert!(!table.subscription_group_table["CG"].consume_enable);
    assert!(table
        .subscription_group_table
        .contains_key("TOOLS_CONSUMER"));

    // Enabled again, it pulls.
    assert_eq!(
        b.invoke(create_group(&SubscriptionGroupConfig::named("CG")))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let pulled = pull_one(&b, "S", 0, 0).await;
    assert_eq!(pulled.body, b"x");

    let delete = RemotingCommand::request_with_header(
        RequestCode::DELETE_SUBSCRIPTIONGROUP,
        &DeleteSubscriptionGroupRequestHeader {
            group_name: "CG".into(),
            clean_offset: Some(true),
        },
    );
    assert_eq!(
        b.invoke(delete).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert!(!groups(&b).await.subscription_group_table.contains_key("CG"));
    let gone = b.invoke(pull_request("S", 0, 0, 1)).await;
    assert_eq!(
        gone.response_code(),
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_heartbeat_creates_the_group_and_its_retry_topic() {
    let b = TestBroker::start(&[]).await;
    let heartbeat = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(
        br#"{"clientID":"c1","consumerDataSet":[{"groupName":"HB","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*"}]}],"producerDataSet":[]}"#
            .to_vec(),
    );
    assert_eq!(
        b.invoke(heartbeat).await.response_code(),
        ResponseCode::SUCCESS
    );
    let table = groups(&b).await;
    assert_eq!(table.subscription_group_table["HB"].retry_max_times, 16);
    let retry = b.broker.state().topics.get("%RETRY%HB").unwrap();
    assert_eq!((retry.read_queue_nums, retry.perm), (1, 6));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_without_broadcast_permission_may_not_pull_as_broadcasting() {
    let b = TestBroker::start(&[]).await;
    let group = SubscriptionGroupConfig {
        consume_broadcast_enable: false,
        ..SubscriptionGroupConfig::named("CG")
    };
    assert_eq!(
        b.invoke(create_group(&group)).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(
        b.invoke(send_request("B", 0, b"x", ""))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let heartbeat = |model: &str| {
        RemotingCommand::request(RequestCode::HEART_BEAT).with_body(
            format!(r#"{{"clientID":"c1","consumerDataSet":[{{"groupName":"CG","consumeType":"CONSUME_PASSIVELY","messageModel":"{model}","subscriptionDataSet":[{{"topic":"B","subString":"*"}}]}}]}}"#)
                .into_bytes(),
        )
    };
    assert_eq!(
        b.invoke(heartbeat("CLUSTERING")).await.response_code(),
        ResponseCode::SUCCESS
    );
    let _ = pull_one(&b, "B", 0, 0).await;
    assert_eq!(
        b.invoke(heartbeat("BROADCASTING")).await.response_code(),
        ResponseCode::SUCCESS
    );
    let refused = b.invoke(pull_request("B", 0, 0, 1)).await;
    assert_eq!(refused.response_code(), ResponseCode::NO_PERMISSION);
    assert_eq!(
        refused.remark.as_deref(),
        Some("the consumer group[CG] can not consume by broadcast way")
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timer_messages_arrive_at_their_instant_even_across_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let overrides = [("timerFlushIntervalMs", "100")];
    let b = TestBroker::start_in(dir.path(), &overrides).await;
    let due = message_model::now_ms() + 1_500;
    let sent = b
        .invoke(send_request(
            "Tm",
            2,
            b"at",
            &format!("TIMER_DELIVER_MS\u{1}{due}\u{2}KEYS\u{1}a\u{2}"),
        ))
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    let delayed = b
        .invoke(send_request("Tm", 2, b"in", "TIMER_DELAY_MS\u{1}800\u{2}"))
        .await;
    assert_eq!(delayed.response_code(), ResponseCode::SUCCESS);
    // Sent second, due first.
    let first = pull_one(&b, "Tm", 2, 0).await;
    assert_eq!(first.body, b"in");
    assert!(first.store_timestamp >= first.born_timestamp + 800);
    let second = pull_one(&b, "Tm", 2, 1).await;
    assert_eq!(second.body, b"at");
    assert!(
        second.store_timestamp >= due,
        "delivered before its instant"
    );
    assert_eq!(second.property(keys::KEYS), Some("a"));
    assert_eq!(second.property(keys::REAL_TOPIC), None);
    assert!(second.property(keys::TIMER_DEQUEUE_MS).is_some());
    let info = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_BROKER_RUNTIME_INFO,
        ))
        .await;
    let table: remoting_protocol::body::KvTable = body::from_json(&info.body).unwrap();
    assert_eq!(table.table["timerDelivered"], "2");
    assert_eq!(table.table["timerPending"], "0");
    assert!(table.table.contains_key("timerLatenessP99Ms"));

    // One more, then a restart before it is due.
    let due = message_model::now_ms() + 2_000;
    let sent = b
        .invoke(send_request(
            "Tm",
            2,
            b"across",
            &format!("TIMER_DELIVER_MS\u{1}{due}\u{2}"),
        ))
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    b.broker.shutdown().await;
    let b = TestBroker::start_in(dir.path(), &overrides).await;
    let after = pull_one(&b, "Tm", 2, 2).await;
    assert_eq!(after.body, b"across");
    assert!(after.store_timestamp >= due);
    let nothing = b.invoke(pull_request("Tm", 2, 3, 1)).await;
    assert_eq!(
        nothing.response_code(),
        ResponseCode::PULL_NOT_FOUND,
        "nothing delivered twice"
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timers_that_cannot_be_honoured_are_refused() {
    let b = TestBroker::start(&[("timerMaxPending", "1")]).await;
    let too_far = b
        .invoke(send_request(
            "Tr",
            0,
            b"x",
            &format!("TIMER_DELAY_SEC\u{1}{}\u{2}", 4 * 86_400),
        ))
        .await;
    assert_eq!(too_far.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    assert!(too_far
        .remark
        .unwrap()
        .contains("should not be bigger than the max delay 259200000ms"));
    let bad = b
        .invoke(send_request("Tr", 0, b"x", "TIMER_DELAY_MS\u{1}soon\u{2}"))
        .await;
    assert_eq!(bad.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    // One timer fills the wheel; once it is read in, the next is refused.
    let one = b
        .invoke(send_request("Tr", 0, b"x", "TIMER_DELAY_SEC\u{1}3600\u{2}"))
        .await;
    assert_eq!(one.response_code(), ResponseCode::SUCCESS);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while b.broker.state().timers.stats().pending < 1 {
        assert!(std::time::Instant::now() < deadline, "timer not read in");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let full = b
        .invoke(send_request("Tr", 0, b"y", "TIMER_DELAY_SEC\u{1}3600\u{2}"))
        .await;
    assert_eq!(full.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(full.remark.unwrap().contains("timerMaxPending is 1"));
    b.broker.shutdown().await;

    let off = TestBroker::start(&[("timerWheelEnable", "false")]).await;
    let refused = off
        .invoke(send_request("Tr", 0, b"x", "TIMER_DELAY_SEC\u{1}5\u{2}"))
        .await;
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        refused.remark.as_deref(),
        Some("accurate timer message is not enabled, timerWheelEnable is false")
    );
    off.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_larger_than_max_message_size_is_refused_whole() {
    let b = TestBroker::start(&[("maxMessageSize", "65536")]).await;
    let batch = |n: usize| {
        let entries: Vec<BatchEntry> = (0..n)
            .map(|_| BatchEntry {
                body: bytes::Bytes::from(vec![b'b'; 1024]),
                flag: 0,
                properties: String::new(),
            })
            .collect();
        batch_request("Batched", &entries)
    };
    let big = b.invoke(batch(100)).await;
    assert_eq!(big.response_code(), ResponseCode::MESSAGE_ILLEGAL);
    assert!(
        big.remark
            .as_deref()
            .unwrap()
            .contains("maxMessageSize 65536"),
        "{:?}",
        big.remark
    );
    let fits = b.invoke(batch(40)).await;
    assert_eq!(
        fits.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        fits.remark
    );
    b.broker.shutdown().await;
}
