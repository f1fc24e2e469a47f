//! Busy answers from a real broker process: a put-lock delay fault and a
//! small `waitTimeMillsInSendQueue` make queued sends expire
//! (`[TIMEOUT_CLEAN_QUEUE]`, with a period at least the limit); raising the
//! limit with `UPDATE_BROKER_CONFIG` on the running process ends it; a
//! producer with the "never" busy policy sees the busy error itself.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{sync::Arc, time::Duration};

use e2e_tests::{burst, figure, unique, E2eEnv, OwnBroker, SLOW_SENDS};
use producer_client::{BusyPolicy, Message, Producer, ProducerConfig, ProducerError};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_sends_are_answered_busy_and_a_run_time_limit_change_ends_it() {
    let Some(env) = E2eEnv::from_env("busy paths") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "busy", &SLOW_SENDS).unwrap();
    let addr = broker.addr.clone();
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let topic = unique("Busy");
    assert_eq!(
        burst(&client, &addr, &topic, 1).await.unwrap()[0].0,
        ResponseCode::SUCCESS,
        "topic created"
    );

    let outcomes = burst(&client, &addr, &topic, 10).await.unwrap();
    let expired: Vec<&String> = outcomes
        .iter()
        .filter(|(c, r)| *c == ResponseCode::SYSTEM_BUSY && r.starts_with("[TIMEOUT_CLEAN_QUEUE]"))
        .map(|(_, r)| r)
        .collect();
    assert!(!expired.is_empty(), "{outcomes:?}");
    for remark in &expired {
        let period = figure(remark, "period in queue: ").expect("period in the remark");
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
        ..ProducerConfig::with_namesrv(&broker.namesrv)
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
            assert!(
                matches!(
                    e,
                    ProducerError::Broker {
                        code: ResponseCode::SYSTEM_BUSY,
                        ..
                    }
                ),
                "{e}"
            );
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
    let outcomes = burst(&client, &addr, &topic, 6).await.unwrap();
    assert!(
        outcomes.iter().all(|(c, _)| *c == ResponseCode::SUCCESS),
        "{outcomes:?}"
    );

    assert!(broker.is_running(), "the broker survived");
}
