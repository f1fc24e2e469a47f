//! `QUERY_MESSAGE` against a real broker: messages sent with `KEYS` and a
//! `UNIQ_KEY` are found by each key and by unique key, an unknown key gets
//! `QUERY_NOT_FOUND` with RocketMQ's remark, and a broker restarted on the
//! same store still answers.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{send_request, TestBroker};
use remoting_protocol::{
    header::{
        QueryMessageRequestHeader, QueryMessageResponseHeader, SendMessageResponseHeader,
        UNIQUE_KEY_QUERY,
    },
    message::record::{check, Record},
    RemotingCommand, RequestCode, ResponseCode,
};

const TOPIC: &str = "QueryT";

fn query_request(key: &str, max_num: i32, unique: bool) -> RemotingCommand {
    let mut req = RemotingCommand::request_with_header(
        RequestCode::QUERY_MESSAGE,
        &QueryMessageRequestHeader {
            topic: TOPIC.into(),
            key: key.into(),
            max_num,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            ..QueryMessageRequestHeader::default()
        },
    );
    req.set_ext(UNIQUE_KEY_QUERY, if unique { "true" } else { "false" });
    req
}

/// The bodies of the records of a response body, in order, each with its
/// CommitLog offset.
fn records(body: &[u8]) -> Vec<(i64, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        match check(&body[at..], true) {
            Record::Message(m) => {
                assert_eq!(m.topic, TOPIC);
                out.push((
                    m.physical_offset,
                    String::from_utf8(m.body.to_vec()).unwrap(),
                ));
                at += m.total_size;
            }
            other => panic!("not a record at {at}: {other:?}"),
        }
    }
    out
}

/// Queries until the answer holds `want` records (the index is built just
/// after the send is answered), or 10 s pass.
async fn query_until(
    b: &TestBroker,
    key: &str,
    max_num: i32,
    unique: bool,
    want: usize,
) -> (RemotingCommand, Vec<(i64, String)>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = b.invoke(query_request(key, max_num, unique)).await;
        let found = records(&answer.body);
        if found.len() == want || Instant::now() > deadline {
            return (answer, found);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Sends message `i` (body `m<i>`, `KEYS` `order-<i> shared`, `UNIQ_KEY`
/// `U<i>`); returns its CommitLog offset.
async fn send(b: &TestBroker, i: usize) -> i64 {
    let properties = format!("KEYS\u{1}order-{i} shared\u{2}UNIQ_KEY\u{1}U{i}\u{2}");
    let sent = b
        .invoke(send_request(
            TOPIC,
            (i % 2) as i32,
            format!("m{i}").as_bytes(),
            &properties,
        ))
        .await;
    assert_eq!(
        sent.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        sent.remark
    );
    let h: SendMessageResponseHeader = sent.decode_header().unwrap();
    let offset_id = h.msg_id;
    i64::from_str_radix(&offset_id[offset_id.len() - 16..], 16).unwrap()
}

async fn check_answers(b: &TestBroker, offsets: &[i64]) {
    // Every message indexed first: the answers name the last one indexed.
    // Message i went to queue i % 2.
    let n = offsets.len() as i64;
    b.until_dispatched(TOPIC, 0, (n + 1) / 2).await;
    b.until_dispatched(TOPIC, 1, n / 2).await;
    // By one key: the one message.
    let (answer, found) = query_until(b, "order-3", 64, false, 1).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    assert_eq!(found, [(offsets[3], "m3".to_owned())]);
    let h: QueryMessageResponseHeader = answer.decode_header().unwrap();
    assert_eq!(h.index_last_update_phyoffset, *offsets.last().unwrap());
    assert!(h.index_last_update_timestamp > 0);
    // By a key every message has: all of them, in CommitLog order, as many
    // as asked for.
    let (_, found) = query_until(b, "shared", 64, false, offsets.len()).await;
    let bodies: Vec<String> = found.iter().map(|(_, body)| body.clone()).collect();
    let sent: Vec<String> = (0..offsets.len()).map(|i| format!("m{i}")).collect();
    assert_eq!(bodies, sent);
    let (_, found) = query_until(b, "shared", 2, false, 2).await;
    assert_eq!(found.len(), 2);
    // By unique key: `maxNum` is replaced by `defaultQueryMaxNum`, so even
    // 0 finds it.
    let (answer, found) = query_until(b, "U5", 0, true, 1).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    assert_eq!(found, [(offsets[5], "m5".to_owned())]);
    // Nothing under an unknown key.
    let answer = b.invoke(query_request("no-such-key", 64, false)).await;
    assert_eq!(answer.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(
        answer.remark.as_deref(),
        Some("can not find message, maybe time range not correct")
    );
    let h: QueryMessageResponseHeader = answer.decode_header().unwrap();
    assert_eq!(h.index_last_update_phyoffset, *offsets.last().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_are_found_by_key_and_by_unique_key_also_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = TestBroker::start_in(dir.path(), &[]).await;
    b.create_topic(TOPIC, 2).await;
    let mut offsets = Vec::new();
    for i in 0..8 {
        offsets.push(send(&b, i).await);
    }
    check_answers(&b, &offsets).await;
    // A header without its key is refused by name.
    let mut bad = query_request("x", 1, false);
    bad.ext_fields.shift_remove("key");
    let answer = b.invoke(bad).await;
    assert_eq!(answer.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(answer.remark.unwrap().contains("`key`"));
    b.broker.shutdown().await;

    let b = TestBroker::start_in(dir.path(), &[]).await;
    check_answers(&b, &offsets).await;
    b.broker.shutdown().await;
}

/// Message traces (RocketMQ's clients send them to `RMQ_SYS_TRACE_TOPIC`
/// keyed by the traced message's id and keys) are found like any message:
/// `mqadmin queryMsgTraceById` asks `QUERY_MESSAGE` on the trace topic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_traces_are_found_by_the_traced_message_id() {
    const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
    let b = TestBroker::start(&[]).await;
    let traced = "7F000001000012B4AAC26E4BD5F80000";
    let trace =
        format!("Pub\u{1}1700000000000\u{1}DefaultRegion\u{1}PG\u{1}{TOPIC}\u{1}{traced}\u{1}");
    let sent = b
        .invoke(send_request(
            TRACE_TOPIC,
            0,
            trace.as_bytes(),
            &format!("KEYS\u{1}{traced} order-1\u{2}"),
        ))
        .await;
    assert_eq!(
        sent.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        sent.remark
    );
    let mut query = RemotingCommand::request_with_header(
        RequestCode::QUERY_MESSAGE,
        &QueryMessageRequestHeader {
            topic: TRACE_TOPIC.into(),
            key: traced.into(),
            max_num: 64,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            ..QueryMessageRequestHeader::default()
        },
    );
    query.set_ext(UNIQUE_KEY_QUERY, "false");
    let deadline = Instant::now() + Duration::from_secs(10);
    let answer = loop {
        let answer = b.invoke(query.clone()).await;
        if answer.response_code() == ResponseCode::SUCCESS || Instant::now() > deadline {
            break answer;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
    match check(&answer.body, true) {
        Record::Message(m) => {
            assert_eq!(m.topic, TRACE_TOPIC);
            assert_eq!(m.body, trace.as_bytes());
            assert_eq!(m.total_size, answer.body.len());
        }
        other => panic!("not a record: {other:?}"),
    }
}
