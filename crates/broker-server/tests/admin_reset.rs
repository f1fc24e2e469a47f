//! `INVOKE_BROKER_TO_RESET_OFFSET` against a real broker: messages stored
//! at known times, a group's offsets reset by a time in the middle, the
//! group's next pull of each queue told where to go on, its commits ignored
//! until then, and the refusals.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    collections::BTreeMap,
    time::{Duration, Instant},
};

use common::{pull_request, send_request, TestBroker};
use message_model::flags::PULL_COMMIT_OFFSET;
use remoting_protocol::{
    body::{self, MessageQueueBody, ResetOffsetBody, SubscriptionGroupConfig},
    header::{
        OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader,
        QueryConsumerOffsetRequestHeader, ResetOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    message::record::{check, Record},
    RemotingCommand, RequestCode, ResponseCode,
};

const BROKER: &str = "broker-reset";
const TOPIC: &str = "ResetT";
const GROUP: &str = "ResetG";

fn queue(queue_id: i32) -> MessageQueueBody {
    MessageQueueBody {
        topic: TOPIC.into(),
        broker_name: BROKER.into(),
        queue_id,
    }
}

async fn create_group(b: &TestBroker, group: &str) {
    let create = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
        .with_body(body::to_json(&SubscriptionGroupConfig::named(group)));
    assert_eq!(
        b.invoke(create).await.response_code(),
        ResponseCode::SUCCESS
    );
}

/// Waits until the millisecond clock has moved past the current one.
async fn next_millisecond() {
    let now = message_model::now_ms();
    while message_model::now_ms() <= now {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Store times of the messages in a pull's body.
fn store_times(pulled: &RemotingCommand) -> Vec<i64> {
    let mut times = Vec::new();
    let mut rest = &pulled.body[..];
    while !rest.is_empty() {
        let Record::Message(m) = check(rest, false) else {
            panic!("the pull body holds a bad record");
        };
        times.push(m.store_timestamp);
        rest = &rest[m.total_size..];
    }
    times
}

/// Sends three messages to each of the two queues, alternating queues and
/// each in a later millisecond than the one before; returns each queue's
/// store times once the queue index holds them all.
async fn six_messages(b: &TestBroker) -> [Vec<i64>; 2] {
    for i in 0..3 {
        for queue_id in 0..2 {
            let sent = b
                .invoke(send_request(
                    TOPIC,
                    queue_id,
                    format!("m{i}").as_bytes(),
                    "",
                ))
                .await;
            assert_eq!(
                sent.response_code(),
                ResponseCode::SUCCESS,
                "{:?}",
                sent.remark
            );
            next_millisecond().await;
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while b.max_offset(TOPIC, 0).await != 3 || b.max_offset(TOPIC, 1).await != 3 {
        assert!(
            Instant::now() < deadline,
            "the queue index never held the messages"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut times = [Vec::new(), Vec::new()];
    for (queue_id, t) in (0..2).zip(times.iter_mut()) {
        let pulled = b.invoke(pull_request(TOPIC, queue_id, 0, 32)).await;
        assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
        *t = store_times(&pulled);
        assert_eq!(t.len(), 3);
    }
    times
}

fn reset(
    group: &str,
    topic: &str,
    timestamp: i64,
    queue_id: Option<i32>,
    offset: Option<i64>,
) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::INVOKE_BROKER_TO_RESET_OFFSET,
        &ResetOffsetRequestHeader {
            topic: topic.into(),
            group: group.into(),
            timestamp,
            is_force: true,
            queue_id,
            offset: Some(offset.unwrap_or(-1)),
            broker_name: None,
        },
    )
}

/// A pull by the group at `offset`, carrying `commit` as its commit offset.
fn group_pull(queue_id: i32, offset: i64, commit: Option<i64>) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: GROUP.into(),
            topic: TOPIC.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: 32,
            sys_flag: if commit.is_some() {
                PULL_COMMIT_OFFSET
            } else {
                0
            },
            commit_offset: commit.unwrap_or(0),
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    )
}

async fn commit(b: &TestBroker, queue_id: i32, offset: i64) -> RemotingCommand {
    let answer = b
        .invoke(RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: GROUP.into(),
                topic: TOPIC.into(),
                queue_id,
                commit_offset: offset,
                ..UpdateConsumerOffsetRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    answer
}

async fn committed(b: &TestBroker, queue_id: i32) -> i64 {
    let answer = b
        .invoke(RemotingCommand::request_with_header(
            RequestCode::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: GROUP.into(),
                topic: TOPIC.into(),
                queue_id,
                ..QueryConsumerOffsetRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    answer
        .decode_header::<OffsetResponseHeader>()
        .unwrap()
        .offset
}

fn reset_table(answer: &RemotingCommand) -> BTreeMap<MessageQueueBody, i64> {
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    ResetOffsetBody::decode(&answer.body).unwrap().offset_table
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_by_time_moves_the_groups_next_pull_and_holds_off_commits() {
    let b = TestBroker::start(&[("brokerName", BROKER)]).await;
    b.create_topic(TOPIC, 2).await;
    create_group(&b, GROUP).await;
    let [q0, q1] = six_messages(&b).await;
    // Sent alternately: q0[0] < q1[0] < q0[1] < q1[1] < q0[2] < q1[2].
    assert!(q0[0] < q1[0] && q1[0] < q0[1], "{q0:?} {q1:?}");
    for queue_id in 0..2 {
        commit(&b, queue_id, 3).await;
    }

    // At the store time of queue 1's first message: queue 1 goes back to
    // its start, queue 0 to its second message.
    let answer = b.invoke(reset(GROUP, TOPIC, q1[0], None, None)).await;
    assert_eq!(
        reset_table(&answer),
        BTreeMap::from([(queue(0), 1), (queue(1), 0)])
    );
    assert!(
        answer
            .body
            .starts_with(br#"{"offsetTable":{{"brokerName":"broker-reset""#),
        "queue objects are the keys: {}",
        String::from_utf8_lossy(&answer.body)
    );
    assert_eq!(committed(&b, 0).await, 1, "the reset offset is committed");
    assert_eq!(committed(&b, 1).await, 0);

    // The consumer, unaware, commits its old position: ignored.
    let ignored = commit(&b, 0, 3).await;
    assert_eq!(
        ignored.remark.as_deref(),
        Some("Offset has been previously reset")
    );
    assert_eq!(committed(&b, 0).await, 1);

    // Its next pull is told where to go on; the offset it carries is not
    // committed either.
    let moved = b.invoke(group_pull(0, 3, Some(3))).await;
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let h: PullMessageResponseHeader = moved.decode_header().unwrap();
    assert_eq!((h.next_begin_offset, h.min_offset, h.max_offset), (1, 0, 3));
    assert!(moved.body.is_empty());
    assert_eq!(committed(&b, 0).await, 1);

    // From then on the queue is the group's again: commits count, pulls
    // read.
    let counted = commit(&b, 0, 2).await;
    assert_eq!(counted.remark, None);
    assert_eq!(committed(&b, 0).await, 2);
    let pulled = b.invoke(group_pull(0, 1, Some(2))).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    assert_eq!(store_times(&pulled), q0[1..]);
    let h: PullMessageResponseHeader = pulled.decode_header().unwrap();
    assert_eq!(h.next_begin_offset, 3);

    // Queue 1's reset still waits for its own pull.
    assert_eq!(
        commit(&b, 1, 3).await.remark.as_deref(),
        Some("Offset has been previously reset")
    );
    let moved = b.invoke(group_pull(1, 3, None)).await;
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let h: PullMessageResponseHeader = moved.decode_header().unwrap();
    assert_eq!(h.next_begin_offset, 0);
    let pulled = b.invoke(group_pull(1, 0, None)).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    assert_eq!(store_times(&pulled), q1);

    // A time after every message, and a negative one: the end of each queue.
    for timestamp in [q1[2] + 1, -1] {
        let answer = b.invoke(reset(GROUP, TOPIC, timestamp, None, None)).await;
        assert_eq!(
            reset_table(&answer),
            BTreeMap::from([(queue(0), 3), (queue(1), 3)]),
            "{timestamp}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_offsets_one_queue_and_refusals() {
    let b = TestBroker::start(&[("brokerName", BROKER)]).await;
    b.create_topic(TOPIC, 2).await;
    create_group(&b, GROUP).await;
    let [q0, _] = six_messages(&b).await;

    // One queue by time leaves the other alone.
    let answer = b.invoke(reset(GROUP, TOPIC, q0[2], Some(0), None)).await;
    assert_eq!(reset_table(&answer), BTreeMap::from([(queue(0), 2)]));
    assert_eq!(commit(&b, 1, 3).await.remark, None);

    // An explicit offset on one queue, within [min, max + 1].
    let answer = b.invoke(reset(GROUP, TOPIC, 0, Some(1), Some(1))).await;
    assert_eq!(reset_table(&answer), BTreeMap::from([(queue(1), 1)]));
    let moved = b.invoke(group_pull(1, 3, None)).await;
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let h: PullMessageResponseHeader = moved.decode_header().unwrap();
    assert_eq!(h.next_begin_offset, 1);

    let out_of_range = b.invoke(reset(GROUP, TOPIC, 0, Some(0), Some(10))).await;
    assert_eq!(out_of_range.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        out_of_range.remark.as_deref(),
        Some("Target offset 10 not in consume queue range [0-3]")
    );

    let unknown_topic = b.invoke(reset(GROUP, "NoSuchT", 0, None, None)).await;
    assert_eq!(unknown_topic.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(
        unknown_topic.remark.as_deref(),
        Some("Topic NoSuchT does not exist")
    );

    // Not created by the reset, although the broker creates groups on a
    // consumer's first use of them.
    let unknown_group = b.invoke(reset("NoSuchG", TOPIC, 0, None, None)).await;
    assert_eq!(
        unknown_group.response_code(),
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST
    );
    assert_eq!(
        unknown_group.remark.as_deref(),
        Some("Group NoSuchG does not exist")
    );

    let bad_queue = b.invoke(reset(GROUP, TOPIC, 0, Some(2), None)).await;
    assert_eq!(bad_queue.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(
        bad_queue
            .remark
            .as_deref()
            .is_some_and(|r| r.starts_with("queueId[2] is illegal")),
        "{:?}",
        bad_queue.remark
    );

    // Refusals reset nothing: queue 0 still waits at 2 from the first reset.
    let moved = b.invoke(group_pull(0, 3, None)).await;
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let h: PullMessageResponseHeader = moved.decode_header().unwrap();
    assert_eq!(h.next_begin_offset, 2);
}
