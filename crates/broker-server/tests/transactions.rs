//! Transactional messages through a real broker: a half message is stored
//! out of consumers' sight; `END_TRANSACTION` commits it into its real topic
//! once (a second end changes nothing, also after a restart) or rolls it
//! back; ends that do not match the half are refused with RocketMQ's
//! remarks; `rejectTransactionMessage` refuses halves; halves nobody ends
//! are checked with their producer group, then moved aside.
#![allow(clippy::unwrap_used)]

mod common;

use broker_server::transaction::{
    op_record, undo_record, Checkpoint, CHECKPOINT_FILE, COMMIT, HALF_TOPIC, OP_TOPIC,
};
use common::{send_request, TestBroker};
use message_model::{
    flags::{transaction_type, TRANSACTION_COMMIT_TYPE},
    properties::{keys, Properties},
    record::{self, Record},
    MessageId,
};
use remoting_protocol::{
    header::{
        CheckTransactionStateRequestHeader, EndTransactionRequestHeader, SendMessageResponseHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

const PROPS: &str = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}TxGroup\u{2}KEYS\u{1}order-1\u{2}";

/// Where a half message landed: its queue offset and CommitLog offset.
struct Half {
    queue_offset: i64,
    commit_log_offset: i64,
    unique_key: String,
}

async fn send_half(b: &TestBroker, topic: &str, body: &[u8]) -> Half {
    half_of(&b.invoke(send_request(topic, 1, body, PROPS)).await)
}

/// Where the send that `answer` answers landed.
fn half_of(answer: &RemotingCommand) -> Half {
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    let h: SendMessageResponseHeader = answer.decode_header().unwrap();
    Half {
        queue_offset: h.queue_offset,
        commit_log_offset: MessageId::decode(&h.msg_id).unwrap().commit_log_offset,
        unique_key: h.transaction_id.unwrap_or_default(),
    }
}

fn end_request(half: &Half, group: &str, outcome: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::END_TRANSACTION,
        &EndTransactionRequestHeader {
            producer_group: group.into(),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.commit_log_offset,
            commit_or_rollback: outcome,
            from_transaction_check: Some(false),
            msg_id: half.unique_key.clone(),
            ..EndTransactionRequestHeader::default()
        },
    )
}

async fn end(b: &TestBroker, half: &Half, group: &str, outcome: i32) -> RemotingCommand {
    b.invoke(end_request(half, group, outcome)).await
}

/// Waits until a topic's queue holds at least `n` messages: indexing runs
/// behind the appends. Queues are indexed in the CommitLog's order, so
/// whatever was stored before their `n`th message is indexed too.
async fn indexed(b: &TestBroker, topic: &str, queue_id: i32, n: i64) {
    let store = &b.broker.state().store;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.max_offset_in_queue(topic, queue_id) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "{topic} queue {queue_id} never held {n} messages"
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

/// The stored messages of a topic's queue: (sys flag, properties, body).
fn stored(b: &TestBroker, topic: &str, queue_id: i32) -> Vec<(i32, String, Vec<u8>)> {
    let got = b
        .broker
        .state()
        .store
        .get_messages(topic, queue_id, 0, 100, usize::MAX, None);
    got.messages
        .iter()
        .map(|m| match record::check(m, false) {
            Record::Message(m) => (m.sys_flag, m.properties.to_owned(), m.body.to_vec()),
            other => panic!("not a message: {other:?}"),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_delivers_the_half_once_and_a_rollback_never() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start_in(dir.path(), &[]).await;
    let first = send_half(&b, "TxOrders", b"debit 10").await;
    let second = send_half(&b, "TxOrders", b"debit 20").await;
    indexed(&b, HALF_TOPIC, 0, 2).await;
    assert!(
        stored(&b, "TxOrders", 1).is_empty(),
        "a half is not delivered"
    );
    assert_eq!(stored(&b, HALF_TOPIC, 0).len(), 2);

    let r = end(&b, &first, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let r = end(&b, &second, "TxGroup", 12).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    // A second end, of either outcome, changes nothing.
    assert_eq!(
        end(&b, &first, "TxGroup", 8).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(
        end(&b, &second, "TxGroup", 8).await.response_code(),
        ResponseCode::SUCCESS
    );

    // The second end's op record follows the first commit in the CommitLog.
    indexed(&b, OP_TOPIC, 0, 2).await;
    let delivered = stored(&b, "TxOrders", 1);
    assert_eq!(delivered.len(), 1, "one commit, one message");
    let (sys_flag, props, body) = &delivered[0];
    assert_eq!(body, b"debit 10");
    assert_eq!(transaction_type(*sys_flag), TRANSACTION_COMMIT_TYPE);
    let props = Properties::decode(props);
    assert_eq!(
        props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        Some(first.unique_key.as_str())
    );
    assert_eq!(props.get(keys::KEYS), Some("order-1"));
    assert_eq!(props.get(keys::REAL_TOPIC), None);
    assert_eq!(props.get(keys::PRODUCER_GROUP), Some("TxGroup"));
    assert_eq!(stored(&b, OP_TOPIC, 0).len(), 2, "one op record per end");
    let state = b.broker.state();
    assert_eq!(state.transactions.pending(0, 2), 0);

    // After a restart the ends are read back: the first half still
    // delivers nothing more.
    let (broker, _client, _addr, _dir) = b.into_parts();
    broker.shutdown().await;
    let b = TestBroker::start_in(dir.path(), &[]).await;
    assert_eq!(b.broker.state().transactions.pending(0, 2), 0);
    assert_eq!(
        end(&b, &first, "TxGroup", 8).await.response_code(),
        ResponseCode::SUCCESS
    );
    let third = send_half(&b, "TxOrders", b"debit 30").await;
    indexed(&b, HALF_TOPIC, 0, 3).await;
    assert_eq!(stored(&b, "TxOrders", 1).len(), 1);
    assert_eq!(stored(&b, OP_TOPIC, 0).len(), 2);
    assert_eq!(third.queue_offset, 2);
    assert_eq!(b.broker.state().transactions.pending(0, 3), 1);
    b.broker.shutdown().await;
}

/// Restarts the broker on the same files.
async fn restart(b: TestBroker, dir: &std::path::Path) -> TestBroker {
    let (broker, _client, _addr, _dir) = b.into_parts();
    broker.shutdown().await;
    TestBroker::start_in(dir, &[]).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_recorded_but_not_stored_is_stored_when_the_broker_starts() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start_in(dir.path(), &[]).await;
    let first = send_half(&b, "TxRepair", b"first").await;
    let second = send_half(&b, "TxRepair", b"second").await;
    let r = end(&b, &first, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    // The broker stops after recording the second half's commit and
    // before storing its message: only the op record is there.
    let state = b.broker.state();
    state
        .store
        .put_message(&op_record(second.queue_offset, COMMIT, state.store_host))
        .unwrap();
    indexed(&b, OP_TOPIC, 0, 2).await;
    assert_eq!(stored(&b, "TxRepair", 1).len(), 1);

    let b = restart(b, dir.path()).await;
    indexed(&b, "TxRepair", 1, 2).await;
    let bodies: Vec<Vec<u8>> = stored(&b, "TxRepair", 1)
        .into_iter()
        .map(|(flag, _, body)| {
            assert_eq!(transaction_type(flag), TRANSACTION_COMMIT_TYPE);
            body
        })
        .collect();
    assert_eq!(bodies, [b"first".to_vec(), b"second".to_vec()]);
    assert_eq!(b.broker.state().transactions.pending(0, 2), 0);

    // Found the next time: stored once.
    let b = restart(b, dir.path()).await;
    let third = send_half(&b, "TxRepair", b"third").await;
    indexed(&b, HALF_TOPIC, 0, third.queue_offset + 1).await;
    assert_eq!(stored(&b, "TxRepair", 1).len(), 2);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undone_end_leaves_the_half_pending_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start_in(dir.path(), &[]).await;
    let half = send_half(&b, "TxUndo", b"undone").await;
    let state = b.broker.state();
    for op in [
        op_record(half.queue_offset, COMMIT, state.store_host),
        undo_record(half.queue_offset, state.store_host),
    ] {
        state.store.put_message(&op).unwrap();
    }
    indexed(&b, OP_TOPIC, 0, 2).await;

    let b = restart(b, dir.path()).await;
    assert_eq!(b.broker.state().transactions.pending(0, 1), 1);
    assert!(stored(&b, "TxUndo", 1).is_empty());
    // The producer's end still commits it, once.
    let r = end(&b, &half, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    indexed(&b, "TxUndo", 1, 1).await;
    assert_eq!(stored(&b, "TxUndo", 1).len(), 1);
    b.broker.shutdown().await;
}

/// The checkpoint file, once it says `half_offset` and `op_offset`.
async fn checkpoint_reaches(dir: &std::path::Path, half_offset: i64, op_offset: i64) {
    let path = dir.join("config").join(CHECKPOINT_FILE);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let saved = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Checkpoint>(&b).ok());
        if saved
            == Some(Checkpoint {
                half_offset,
                op_offset,
            })
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "checkpoint never reached ({half_offset}, {op_offset}): {saved:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reads_only_the_ends_after_the_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let fast = [("transactionCheckInterval", "100")];
    let b = TestBroker::start_in(dir.path(), &fast).await;
    let open = send_half(&b, "TxMark", b"pending").await;
    let later = send_half(&b, "TxMark", b"ended").await;
    let r = end(&b, &later, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    // The first half is pending (younger than transactionTimeOut): nothing
    // passes it, and the op record naming the second stays to be read.
    checkpoint_reaches(dir.path(), 0, 0).await;
    let (broker, _client, _addr, _dir) = b.into_parts();
    broker.shutdown().await;
    let b = TestBroker::start_in(dir.path(), &fast).await;
    let t = &b.broker.state().transactions;
    assert_eq!(t.pending(0, 2), 1);
    assert_eq!((t.lock().named(), t.op_records_read_at_start()), (1, 1));

    let r = end(&b, &open, "TxGroup", 12).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    // Both ended: every half below 2, every op record below 2.
    checkpoint_reaches(dir.path(), 2, 2).await;
    assert_eq!(b.broker.state().transactions.lock().named(), 0);
    let (broker, _client, _addr, _dir) = b.into_parts();
    broker.shutdown().await;
    let b = TestBroker::start_in(dir.path(), &fast).await;
    let state = b.broker.state();
    assert_eq!(state.transactions.pending(0, 2), 0);
    assert_eq!(state.transactions.lock().named(), 0);
    assert_eq!(
        state.transactions.op_records_read_at_start(),
        0,
        "the checkpoint is past both op records"
    );
    // Still ended: a second commit stores nothing.
    let r = end(&b, &later, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    let marker = send_half(&b, "TxMark", b"marker").await;
    assert_eq!(
        marker.queue_offset, 2,
        "halves after the checkpoint count on"
    );
    indexed(&b, HALF_TOPIC, 0, 3).await;
    assert_eq!(stored(&b, "TxMark", 1).len(), 1, "the one commit");
    assert_eq!(state.transactions.pending(0, 3), 1);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_that_do_not_match_the_half_are_refused() {
    let b = TestBroker::start(&[]).await;
    let half = send_half(&b, "TxWrong", b"x").await;
    let r = end(&b, &half, "OtherGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r.remark.unwrap().contains("The producer group wrong"));

    let shifted = Half {
        queue_offset: half.queue_offset + 1,
        commit_log_offset: half.commit_log_offset,
        unique_key: half.unique_key.clone(),
    };
    let r = end(&b, &shifted, "TxGroup", 8).await;
    assert!(r
        .remark
        .unwrap()
        .contains("The transaction state table offset wrong"));

    let nowhere = Half {
        queue_offset: 0,
        commit_log_offset: half.commit_log_offset + 1,
        unique_key: half.unique_key.clone(),
    };
    let r = end(&b, &nowhere, "TxGroup", 8).await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(r
        .remark
        .unwrap()
        .contains("Find prepared transaction message failed"));

    let r = end(&b, &half, "TxGroup", 5).await;
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_ERROR);
    // An unknown outcome leaves the half pending; a plain message is no half.
    assert_eq!(
        end(&b, &half, "TxGroup", 0).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(b.broker.state().transactions.pending(0, 1), 1);
    let not_half = half_of(&b.invoke(send_request("TxWrong", 1, b"plain", "")).await);
    indexed(&b, "TxWrong", 1, 1).await;
    assert_eq!(stored(&b, "TxWrong", 1).len(), 1, "only the plain message");
    let r = end(&b, &not_half, "TxGroup", 8).await;
    assert!(r
        .remark
        .unwrap()
        .contains("Find prepared transaction message failed"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_are_refused_when_transactions_are_turned_off() {
    let b = TestBroker::start(&[("rejectTransactionMessage", "true")]).await;
    let r = b.invoke(send_request("TxOff", 0, b"x", PROPS)).await;
    assert_eq!(r.response_code(), ResponseCode::NO_PERMISSION);
    assert!(r.remark.unwrap().contains("rejectTransactionMessage"));
    b.broker.shutdown().await;
}

/// A producer connection of group `TxGroup`, client id `client_id`, that
/// records the checks the broker sends it.
async fn checked_producer(
    b: &TestBroker,
    client_id: &str,
) -> (
    remoting_net::RemotingClient,
    tokio::sync::mpsc::UnboundedReceiver<RemotingCommand>,
) {
    let (tx, checks) = tokio::sync::mpsc::unbounded_channel();
    let options = remoting_net::ClientOptions {
        on_request: Some(remoting_net::ServerRequests(std::sync::Arc::new(
            move |_from: &str, request: &RemotingCommand| {
                if request.request_code() == RequestCode::CHECK_TRANSACTION_STATE {
                    let _ = tx.send(request.clone());
                }
                None
            },
        ))),
        ..remoting_net::ClientOptions::default()
    };
    let client = remoting_net::RemotingClient::new(options);
    let beat = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(
        format!(
            r#"{{"clientID":"{client_id}","producerDataSet":[{{"groupName":"TxGroup"}}],"consumerDataSet":[]}}"#
        )
        .into_bytes(),
    );
    let answer = client
        .invoke(&b.addr, beat, std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    (client, checks)
}

async fn next_check(
    checks: &mut tokio::sync::mpsc::UnboundedReceiver<RemotingCommand>,
) -> RemotingCommand {
    tokio::time::timeout(std::time::Duration::from_secs(20), checks.recv())
        .await
        .expect("a check within 20 s")
        .expect("the check channel stays open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_nobody_ends_are_checked_then_discarded() {
    let b = TestBroker::start(&[
        ("transactionTimeOut", "0"),
        ("transactionCheckInterval", "100"),
        ("transactionCheckMax", "2"),
    ])
    .await;
    let (client, mut checks) = checked_producer(&b, "tx-producer@1").await;
    let send = |body: &'static [u8]| {
        let client = &client;
        let addr = b.addr.clone();
        async move {
            let r = client
                .invoke(
                    &addr,
                    send_request("TxChecked", 0, body, PROPS),
                    std::time::Duration::from_secs(10),
                )
                .await
                .unwrap();
            half_of(&r)
        }
    };
    let answered = send(b"answered").await;

    // The check names the half's own offsets and carries the message in its
    // real topic.
    let check = next_check(&mut checks).await;
    let h: CheckTransactionStateRequestHeader = check.decode_header().unwrap();
    assert_eq!(
        (h.tran_state_table_offset, h.commit_log_offset),
        (answered.queue_offset, answered.commit_log_offset)
    );
    assert_eq!(h.msg_id.as_deref(), Some(answered.unique_key.as_str()));
    let Record::Message(m) = record::check(&check.body, false) else {
        panic!("the check's body is not a record");
    };
    assert_eq!(
        (m.topic, m.queue_id, m.body),
        ("TxChecked", 0, &b"answered"[..])
    );
    assert_eq!(m.queue_offset, answered.queue_offset);

    // The producer answers the check: the message is committed.
    let mut end = end_request(&answered, "TxGroup", 8);
    end.set_ext("fromTransactionCheck", "true");
    let r = client
        .invoke(&b.addr, end, std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    indexed(&b, "TxChecked", 0, 1).await;

    // A half nobody answers is checked transactionCheckMax times, then
    // moved aside and never delivered.
    let ignored = send(b"ignored").await;
    let mut seen = 0;
    while seen < 2 {
        let c = next_check(&mut checks).await;
        let h: CheckTransactionStateRequestHeader = c.decode_header().unwrap();
        if h.tran_state_table_offset == ignored.queue_offset {
            seen += 1;
        }
    }
    indexed(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0, 1).await;
    let moved = stored(&b, "TRANS_CHECK_MAX_TIME_TOPIC", 0);
    assert_eq!(moved[0].2, b"ignored");
    indexed(&b, OP_TOPIC, 0, 2).await;
    assert_eq!(stored(&b, "TxChecked", 0).len(), 1, "only the answered one");
    assert_eq!(b.broker.state().transactions.pending(0, 2), 0);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_whose_producer_left_is_checked_through_another_of_its_group() {
    let b = TestBroker::start(&[
        ("transactionTimeOut", "0"),
        ("transactionCheckInterval", "100"),
        ("transactionCheckMax", "1000"),
    ])
    .await;
    let (first, _first_checks) = checked_producer(&b, "tx-producer@first").await;
    let (second, mut second_checks) = checked_producer(&b, "tx-producer@second").await;
    let r = first
        .invoke(
            &b.addr,
            send_request("TxOrphan", 0, b"orphan", PROPS),
            std::time::Duration::from_secs(10),
        )
        .await
        .unwrap();
    let half = half_of(&r);
    // The producer that sent it goes away before it ends it.
    first.close_all().await;
    loop {
        let c = next_check(&mut second_checks).await;
        let h: CheckTransactionStateRequestHeader = c.decode_header().unwrap();
        if h.tran_state_table_offset == half.queue_offset {
            break;
        }
    }
    let mut end = end_request(&half, "TxGroup", 8);
    end.set_ext("fromTransactionCheck", "true");
    let r = second
        .invoke(&b.addr, end, std::time::Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    indexed(&b, "TxOrphan", 0, 1).await;
    assert_eq!(stored(&b, "TxOrphan", 0)[0].2, b"orphan");
    assert_eq!(b.broker.state().half_pending(), 0);
    b.broker.shutdown().await;
}
