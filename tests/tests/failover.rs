//! Failover between real broker processes: a third broker, slowed by the
//! put-lock fault so that queued sends expire (`[TIMEOUT_CLEAN_QUEUE]`),
//! shares a topic with a healthy one. A producer with the retrying busy
//! policy lands every message (busy answers retried on the other broker);
//! with the "never" policy the busy answers reach the caller.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{sync::Arc, time::Duration};

use consumer_client::{ConsumerConfig, PullConsumer};
use e2e_tests::{unique, wait_for, E2eEnv, OwnBroker, SLOW_SENDS};
use producer_client::{BusyPolicy, Message, Producer, ProducerConfig, ProducerError};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{CreateTopicRequestHeader, TopicFilterType},
    RemotingCommand, RequestCode, ResponseCode,
};

async fn create_topic(addr: &str, topic: &str) {
    let client = RemotingClient::new(ClientOptions::default());
    let req = RemotingCommand::request_with_header(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &CreateTopicRequestHeader {
            topic: topic.into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 4,
            write_queue_nums: 4,
            perm: 6,
            topic_filter_type: TopicFilterType::SingleTag,
            order: false,
            ..CreateTopicRequestHeader::default()
        },
    );
    let r = client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    client.close_all().await;
}

/// Sends `n` messages at once; returns how many failed with a busy answer.
async fn burst(producer: &Arc<Producer>, topic: &str, n: usize) -> (usize, usize) {
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let (producer, topic) = (Arc::clone(producer), topic.to_owned());
            tokio::spawn(async move {
                producer
                    .send(Message::new(&topic, format!("f{i}").into_bytes()))
                    .await
            })
        })
        .collect();
    let (mut ok, mut busy) = (0, 0);
    for s in sends {
        match s.await.unwrap() {
            Ok(_) => ok += 1,
            Err(ProducerError::Broker {
                code: ResponseCode::SYSTEM_BUSY,
                ..
            }) => busy += 1,
            Err(e) => panic!("unexpected error {e}"),
        }
    }
    (ok, busy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_answers_are_retried_on_the_other_broker_or_surfaced_by_policy() {
    let Some(env) = E2eEnv::from_env("failover") else {
        return;
    };
    let mut sets: Vec<String> = vec![
        "embeddedNamesrv=false".into(),
        format!("namesrvAddr={}", env.namesrv),
        "brokerName=broker-slow".into(),
    ];
    sets.extend(SLOW_SENDS.iter().map(|s| (*s).to_owned()));
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let mut slow = OwnBroker::start(&env, "slow", &sets).unwrap();
    let topic = unique("Failover");
    create_topic(&env.brokers[0], &topic).await;
    create_topic(&slow.addr, &topic).await;
    let probe = PullConsumer::start(ConsumerConfig::new(&env.namesrv, unique("failover-probe-")))
        .await
        .unwrap();
    wait_for(Duration::from_secs(20), || async {
        probe.fetch_queues(&topic).await.is_ok_and(|q| q.len() == 8)
    })
    .await
    .expect("route over the healthy and the slow broker");

    let retrying = Arc::new(
        Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
            .await
            .unwrap(),
    );
    let (ok, busy) = burst(&retrying, &topic, 12).await;
    let stats = retrying.stats();
    println!("failover, retrying policy: {ok} ok, {busy} busy, stats {stats:?}");
    assert_eq!((ok, busy), (12, 0), "every message lands");
    retrying.shutdown().await;

    let never = Arc::new(
        Producer::start(ProducerConfig {
            busy_policy: BusyPolicy::Never,
            ..ProducerConfig::with_namesrv(&env.namesrv)
        })
        .await
        .unwrap(),
    );
    let (ok, busy) = burst(&never, &topic, 12).await;
    println!("failover, never policy: {ok} ok, {busy} busy");
    assert!(busy > 0, "busy answers reach the caller");
    assert_eq!(ok + busy, 12);
    never.shutdown().await;

    assert!(slow.is_running(), "the slow broker survived");
}
