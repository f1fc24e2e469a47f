//! Orderly consumers' queue locks on a real broker.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{pull_request, TestBroker};
use remoting_protocol::{
    body::{self, LockBatchRequestBody, LockBatchResponseBody, MessageQueueBody},
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};

fn queues(ids: &[i32]) -> Vec<MessageQueueBody> {
    ids.iter()
        .map(|&queue_id| MessageQueueBody {
            topic: "OT".into(),
            broker_name: "broker-a".into(),
            queue_id,
        })
        .collect()
}

fn lock_request(code: RequestCode, client: &str, ids: &[i32]) -> RemotingCommand {
    RemotingCommand::request(code).with_body(body::to_json(&LockBatchRequestBody {
        consumer_group: "OG".into(),
        client_id: client.into(),
        only_this_broker: false,
        mq_set: queues(ids),
    }))
}

async fn lock(b: &TestBroker, client: &str, ids: &[i32]) -> Vec<i32> {
    let answer = b
        .invoke(lock_request(RequestCode::LOCK_BATCH_MQ, client, ids))
        .await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let granted: LockBatchResponseBody = body::from_json(&answer.body).unwrap();
    let mut ids: Vec<i32> = granted.lock_ok_mq_set.iter().map(|q| q.queue_id).collect();
    ids.sort_unstable();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_lock_belongs_to_one_client_until_it_lets_go() {
    let b = TestBroker::start(&[]).await;
    assert_eq!(lock(&b, "a", &[0, 1]).await, [0, 1]);
    assert_eq!(lock(&b, "b", &[1, 2]).await, [2]);
    assert_eq!(lock(&b, "a", &[0, 1]).await, [0, 1], "renewed");
    let unlock = b
        .invoke(lock_request(RequestCode::UNLOCK_BATCH_MQ, "a", &[1]))
        .await;
    assert_eq!(unlock.response_code(), ResponseCode::SUCCESS);
    assert_eq!(lock(&b, "b", &[1]).await, [1]);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_send_of_a_group_holding_locks_goes_to_the_dead_letter_topic() {
    let b = TestBroker::start(&[]).await;
    assert_eq!(lock(&b, "a", &[0]).await, [0]);
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "CLIENT_INNER_PRODUCER".into(),
        topic: "%RETRY%OG".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1,
        properties: Some("RETRY_TOPIC\u{1}OT\u{2}DELAY\u{1}3\u{2}".into()),
        reconsume_times: Some(1),
        max_reconsume_times: Some(16),
        ..SendMessageRequestHeader::default()
    });
    let sent = b
        .invoke(
            RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
                .with_body(b"ordered".to_vec()),
        )
        .await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let pulled = b.invoke(pull_request("%DLQ%OG", 0, 0, 1)).await;
        if pulled.response_code() == ResponseCode::SUCCESS {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not in the dead-letter topic: {:?} {:?}",
            pulled.response_code(),
            pulled.remark
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.broker.shutdown().await;
}
