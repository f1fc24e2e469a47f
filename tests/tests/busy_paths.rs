//! Busy answers from a real broker process: a put-lock delay fault and a
//! small `waitTimeMillsInSendQueue` make queued sends expire
//! (`[TIMEOUT_CLEAN_QUEUE]`, with a period at least the limit); raising the
//! limit with `UPDATE_BROKER_CONFIG` on the running process ends it; a
//! producer with the "never" busy policy sees the busy error itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{sync::Arc, time::Duration};

use e2e_tests::{free_port, spawn_broker, unique, E2eEnv, SLOW_SENDS};
use producer_client::{BusyPolicy, Message, Producer, ProducerConfig, ProducerError};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};

fn send_request(topic: &str, i: usize) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "e2e-busy".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1_700_000_000_000,
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(format!("busy {i}").into_bytes())
}

/// Sends `n` requests at once; returns (code, remark) of each answer.
async fn burst(
    client: &Arc<RemotingClient>,
    addr: &str,
    topic: &str,
    n: usize,
) -> Vec<(ResponseCode, String)> {
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let (client, addr, topic) = (Arc::clone(client), addr.to_owned(), topic.to_owned());
            tokio::spawn(async move {
                let r = client
                    .invoke(&addr, send_request(&topic, i), Duration::from_secs(10))
                    .await
                    .unwrap();
                (r.response_code(), r.remark.unwrap_or_default())
            })
        })
        .collect();
    let mut out = Vec::new();
    for c in calls {
        out.push(c.await.unwrap());
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_sends_are_answered_busy_and_a_run_time_limit_change_ends_it() {
    let Some(env) = E2eEnv::from_env("busy paths") else {
        return;
    };
    let bin = env.broker_bin.clone().expect("SLUICE_E2E_BROKER_A_BIN");
    let dir = env
        .dir
        .clone()
        .expect("SLUICE_E2E_DIR")
        .join(unique("busy-"));
    let (port, ns_port) = (free_port().unwrap(), free_port().unwrap());
    let sets: Vec<String> = SLOW_SENDS.iter().map(|s| (*s).to_owned()).collect();
    let mut child = spawn_broker(&bin, &dir, port, ns_port, &sets).unwrap();
    let addr = format!("127.0.0.1:{port}");
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let topic = unique("Busy");
    assert_eq!(
        burst(&client, &addr, &topic, 1).await[0].0,
        ResponseCode::SUCCESS,
        "topic created"
    );

    let outcomes = burst(&client, &addr, &topic, 10).await;
    let expired: Vec<&String> = outcomes
        .iter()
        .filter(|(c, r)| *c == ResponseCode::SYSTEM_BUSY && r.starts_with("[TIMEOUT_CLEAN_QUEUE]"))
        .map(|(_, r)| r)
        .collect();
    assert!(!expired.is_empty(), "{outcomes:?}");
    for remark in &expired {
        let period: u64 = remark
            .split("period in queue: ")
            .nth(1)
            .and_then(|r| r.split("ms").next())
            .and_then(|n| n.parse().ok())
            .expect("period in the remark");
        assert!(period >= 50, "{remark}");
        assert!(remark.contains("size of queue: "), "{remark}");
    }
    println!(
        "busy paths: {} of 10 sends expired: {:?}",
        expired.len(),
        expired.first()
    );

    // The "never" busy policy hands the busy answer to the caller.
    let producer = Producer::start(ProducerConfig {
        busy_policy: BusyPolicy::Never,
        ..ProducerConfig::with_namesrv(&format!("127.0.0.1:{ns_port}"))
    })
    .await
    .unwrap();
    let producer = Arc::new(producer);
    let sends: Vec<_> = (0..10)
        .map(|i| {
            let (producer, topic) = (Arc::clone(&producer), topic.clone());
            tokio::spawn(async move {
                producer
                    .send(Message::new(&topic, format!("p{i}").into_bytes()))
                    .await
            })
        })
        .collect();
    let mut busy = 0;
    for s in sends {
        if let Err(e) = s.await.unwrap() {
            assert!(matches!(e, ProducerError::Broker { code: 2, .. }), "{e}");
            busy += 1;
        }
    }
    assert!(busy > 0, "some sends were refused busy and not retried");
    producer.shutdown().await;

    // Raising the limit on the running process ends the rejections.
    let update = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"waitTimeMillsInSendQueue=60000".to_vec());
    let r = client
        .invoke(&addr, update, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let outcomes = burst(&client, &addr, &topic, 6).await;
    assert!(
        outcomes.iter().all(|(c, _)| *c == ResponseCode::SUCCESS),
        "{outcomes:?}"
    );

    child.kill().unwrap();
    child.wait().unwrap();
}
