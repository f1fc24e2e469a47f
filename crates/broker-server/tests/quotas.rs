//! Per-topic send quotas (`topicQuotas`): a send over its topic's quota is
//! answered at once `SYSTEM_BUSY` `[QUOTA]` with when its tokens are back,
//! other topics are untouched, and the quotas change at run time.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{batch_request, send_request, TestBroker};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode, RETRY_AFTER_MS};

/// Sends `n` messages to `topic` one after another; the answers and how
/// long the sends took.
async fn sends(b: &TestBroker, topic: &str, n: usize) -> (Vec<RemotingCommand>, Duration) {
    let started = Instant::now();
    let mut answers = Vec::new();
    for i in 0..n {
        answers.push(
            b.invoke(send_request(topic, 0, format!("q{i}").as_bytes(), ""))
                .await,
        );
    }
    (answers, started.elapsed())
}

fn ok_count(answers: &[RemotingCommand]) -> usize {
    answers
        .iter()
        .filter(|a| a.response_code() == ResponseCode::SUCCESS)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_over_its_quota_is_told_when_to_come_back() {
    let b = TestBroker::start(&[("topicQuotas", "Limited=5/s")]).await;
    let (answers, took) = sends(&b, "Limited", 20).await;
    let ok = ok_count(&answers);
    // The burst (one second's worth), plus what refilled while sending.
    let most = 5 + (took.as_secs_f64() * 5.0).ceil() as usize;
    assert!((5..=most).contains(&ok), "{ok} admitted in {took:?}");
    let refused: Vec<&RemotingCommand> = answers
        .iter()
        .filter(|a| a.response_code() != ResponseCode::SUCCESS)
        .collect();
    assert_eq!(refused.len(), 20 - ok);
    let mut hint = Duration::ZERO;
    for r in &refused {
        assert_eq!(r.response_code(), ResponseCode::SYSTEM_BUSY);
        let remark = r.remark.as_deref().unwrap();
        assert!(
            remark.starts_with(
                "[QUOTA]broker busy, over the topic quota of 5 messages/s, retry after "
            ),
            "{remark}"
        );
        let ms: u64 = r.ext_fields[RETRY_AFTER_MS].parse().unwrap();
        assert!(
            (1..=200).contains(&ms),
            "one token of 5/s is at most 200 ms away: {ms}"
        );
        hint = Duration::from_millis(ms);
    }
    // After the hinted wait the next send is let through.
    tokio::time::sleep(hint).await;
    let again = b.invoke(send_request("Limited", 0, b"again", "")).await;
    assert_eq!(
        again.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        again.remark
    );
    // Another topic has no quota.
    let (free, _) = sends(&b, "Free", 20).await;
    assert_eq!(ok_count(&free), 20);
    assert!(b.broker.state().counters.rejected("over_quota") >= refused.len() as u64);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_byte_quota_counts_bodies_and_a_batch_counts_its_entries() {
    let b = TestBroker::start(&[("topicQuotas", "Bytes=1KiB/s; Batched=3/s")]).await;
    let big = b.invoke(send_request("Bytes", 0, &[b'x'; 800], "")).await;
    assert_eq!(big.response_code(), ResponseCode::SUCCESS);
    let over = b.invoke(send_request("Bytes", 0, &[b'x'; 800], "")).await;
    assert_eq!(over.response_code(), ResponseCode::SYSTEM_BUSY);
    assert!(
        over.remark
            .as_deref()
            .unwrap()
            .contains("over the topic quota of 1024 bytes/s"),
        "{:?}",
        over.remark
    );
    // A batch of 4 entries needs more than the 3 tokens there are: it waits
    // for a full bucket, then goes through and leaves the bucket in debt.
    let entries: Vec<remoting_protocol::body::BatchEntry> = (0..4)
        .map(|_| remoting_protocol::body::BatchEntry {
            body: bytes::Bytes::from_static(b"e"),
            flag: 0,
            properties: String::new(),
        })
        .collect();
    let batch = || batch_request("Batched", &entries);
    let first = b.invoke(batch()).await;
    assert_eq!(
        first.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        first.remark
    );
    let second = b.invoke(batch()).await;
    assert_eq!(second.response_code(), ResponseCode::SYSTEM_BUSY);
    assert!(second
        .remark
        .as_deref()
        .unwrap()
        .contains("quota of 3 messages/s"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotas_change_at_run_time_and_bad_ones_are_refused_naming_the_key() {
    let b = TestBroker::start(&[]).await;
    let update = |text: &str| {
        RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
            .with_body(format!("topicQuotas={text}\n").into_bytes())
    };
    let set = b.invoke(update("Runtime=2/s")).await;
    assert_eq!(
        set.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        set.remark
    );
    let (answers, took) = sends(&b, "Runtime", 10).await;
    let most = 2 + (took.as_secs_f64() * 2.0).ceil() as usize;
    assert!(
        (2..=most).contains(&ok_count(&answers)),
        "{} in {took:?}",
        ok_count(&answers)
    );
    let bad = b.invoke(update("Runtime=2/min")).await;
    assert_eq!(bad.response_code(), ResponseCode::INVALID_PARAMETER);
    assert!(
        bad.remark.as_deref().unwrap().contains("topicQuotas"),
        "{:?}",
        bad.remark
    );
    let cleared = b.invoke(update("")).await;
    assert_eq!(
        cleared.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        cleared.remark
    );
    let (answers, _) = sends(&b, "Runtime", 10).await;
    assert_eq!(ok_count(&answers), 10, "no quota any more");
    b.broker.shutdown().await;
}

/// `clientQuotas`: a client registered under its id is held to its own
/// quota on every topic. (That a topic gets back the tokens of a send the
/// client's quota refused is tested on `Quotas::give_back`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_over_its_quota_is_refused_on_every_topic() {
    let b = TestBroker::start(&[
        ("clientQuotas", "quota-client=3/s"),
        ("topicQuotas", "Shared=4/s"),
    ])
    .await;
    // Before it registers, the client is known by its address only.
    let (answers, _) = sends(&b, "Shared", 4).await;
    assert_eq!(ok_count(&answers), 4);
    let body = "{\"clientID\":\"quota-client\",\"producerDataSet\":[{\"groupName\":\"PG\"}],\
                \"consumerDataSet\":[]}";
    let beat = b
        .invoke(
            RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.as_bytes().to_vec()),
        )
        .await;
    assert_eq!(beat.response_code(), ResponseCode::SUCCESS);
    let (answers, took) = sends(&b, "Other", 6).await;
    let ok = ok_count(&answers);
    let most = 3 + (took.as_secs_f64() * 3.0).ceil() as usize;
    assert!((3..=most).contains(&ok), "{ok} admitted in {took:?}");
    let remark = answers
        .iter()
        .find(|a| a.response_code() == ResponseCode::SYSTEM_BUSY)
        .and_then(|a| a.remark.clone())
        .unwrap();
    assert!(
        remark
            .starts_with("[QUOTA]broker busy, over the client quota of 3 messages/s, retry after "),
        "{remark}"
    );
    assert!(b.broker.state().counters.rejected("over_quota") >= (6 - ok) as u64);
    let info = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_BROKER_RUNTIME_INFO,
        ))
        .await;
    let info = String::from_utf8(info.body.to_vec()).unwrap();
    assert!(
        info.contains("\"clientQuotas\":\"quota-client=3/s\""),
        "{info}"
    );
    b.broker.shutdown().await;
}
