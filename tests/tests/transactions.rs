//! Transactional messages across `kill -9` of a real broker: halves sent
//! before a crash are committed or rolled back after it; ends answered just
//! before a crash (before or while their messages are indexed) hold after
//! it; a commit is stored once, a rollback never, and ends repeated after
//! the restarts change nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e_tests::{unique, E2eEnv, OwnBroker};
use message_model::MessageId;
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{
        EndTransactionRequestHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
        SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
    },
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};

const GROUP: &str = "e2e-tx";
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where a half message landed.
struct Half {
    queue_offset: i64,
    commit_log_offset: i64,
    unique_key: String,
}

async fn send(client: &RemotingClient, addr: &str, topic: &str, body: &str, half: bool) -> Half {
    let properties = if half {
        format!("TRAN_MSG\u{1}true\u{2}PGROUP\u{1}{GROUP}\u{2}")
    } else {
        String::new()
    };
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: GROUP.into(),
        topic: topic.into(),
        default_topic: AUTO_CREATE_TOPIC.into(),
        default_topic_queue_nums: 1,
        queue_id: 0,
        born_timestamp: message_model::now_ms(),
        properties: Some(properties),
        ..SendMessageRequestHeader::default()
    });
    let request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(body.as_bytes().to_vec());
    let r = client.invoke(addr, request, TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let h: SendMessageResponseHeader = r.decode_header().unwrap();
    Half {
        queue_offset: h.queue_offset,
        commit_log_offset: MessageId::decode(&h.msg_id).unwrap().commit_log_offset,
        unique_key: h.transaction_id.unwrap_or_default(),
    }
}

async fn end(client: &RemotingClient, addr: &str, half: &Half, outcome: i32) {
    let request = RemotingCommand::request_with_header(
        RequestCode::END_TRANSACTION,
        &EndTransactionRequestHeader {
            producer_group: GROUP.into(),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.commit_log_offset,
            commit_or_rollback: outcome,
            from_transaction_check: Some(false),
            msg_id: half.unique_key.clone(),
            ..EndTransactionRequestHeader::default()
        },
    );
    let r = client.invoke(addr, request, TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
}

async fn max_offset(client: &RemotingClient, addr: &str, topic: &str) -> i64 {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_MAX_OFFSET,
        &GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id: 0,
            ..GetMaxOffsetRequestHeader::default()
        },
    );
    let r = client.invoke(addr, request, TIMEOUT).await.unwrap();
    r.decode_header::<OffsetResponseHeader>().unwrap().offset
}

const COMMIT: i32 = 8;
const ROLLBACK: i32 = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_hold_across_kill_9_at_each_step() {
    let Some(env) = E2eEnv::from_env("transactions across kill -9") else {
        return;
    };
    // No checks during the scenario: every outcome comes from its end.
    let mut broker =
        OwnBroker::start(&env, "transactions", &["transactionTimeOut=3600000"]).unwrap();
    let client = RemotingClient::new(ClientOptions::default());
    let topic = unique("TxCrash");
    let addr = broker.addr.clone();

    // Killed between the half and its end.
    let a = send(&client, &addr, &topic, "a: committed after a restart", true).await;
    let b = send(
        &client,
        &addr,
        &topic,
        "b: rolled back after a restart",
        true,
    )
    .await;
    broker.kill_and_restart().unwrap();
    end(&client, &addr, &a, COMMIT).await;
    end(&client, &addr, &b, ROLLBACK).await;

    // Killed right after the end was answered: its message may not be
    // indexed yet.
    let c = send(&client, &addr, &topic, "c: committed before a kill", true).await;
    end(&client, &addr, &c, COMMIT).await;
    broker.kill_and_restart().unwrap();
    let d = send(&client, &addr, &topic, "d: rolled back before a kill", true).await;
    end(&client, &addr, &d, ROLLBACK).await;
    broker.kill_and_restart().unwrap();

    // Every end again, after the restarts: nothing changes.
    for (half, outcome) in [(&a, COMMIT), (&b, ROLLBACK), (&c, COMMIT), (&d, ROLLBACK)] {
        end(&client, &addr, half, outcome).await;
        end(&client, &addr, half, COMMIT).await;
    }
    // A plain message after all that: its queue offset counts what was
    // stored before it, and once it is indexed, so is every op record.
    let marker = send(&client, &addr, &topic, "marker", false).await;
    assert_eq!(
        marker.queue_offset, 2,
        "a and c committed once each before the marker; b and d never"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while max_offset(&client, &addr, &topic).await < 3 {
        assert!(
            Instant::now() < deadline,
            "the marker was not indexed in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ops = max_offset(&client, &addr, "RMQ_SYS_TRANS_OP_HALF_TOPIC").await;
    assert_eq!(ops, 4, "one op record per half");
    println!(
        "transactions across kill -9: 2 commits stored once, 2 rollbacks never, {ops} op records"
    );
}
