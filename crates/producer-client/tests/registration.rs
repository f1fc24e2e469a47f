//! Every producer registers its group with the brokers by `HEART_BEAT`: a
//! plain producer is listed by `GET_PRODUCER_CONNECTION_LIST` and
//! `GET_ALL_PRODUCER_INFO` once it has sent, soon after its first route
//! lookup without waiting for `heartbeatBrokerInterval`, keeps heartbeating
//! every interval, and is forgotten after shutdown.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{bounded, config, Behaviour, FakeBroker, TestBroker};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_protocol::{
    body::{self, ProducerConnection, ProducerTableInfo},
    header::GetProducerConnectionListRequestHeader,
    RemotingCommand, RequestCode, ResponseCode,
};

/// The client ids the broker lists for producer group `group`
/// (`GET_PRODUCER_CONNECTION_LIST`); `None` when it answers that the group
/// does not exist.
async fn listed(b: &TestBroker, group: &str) -> Option<Vec<String>> {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_PRODUCER_CONNECTION_LIST,
        &GetProducerConnectionListRequestHeader {
            producer_group: group.into(),
        },
    );
    let response = b
        .client
        .invoke(&b.addr, request, Duration::from_secs(3))
        .await
        .unwrap();
    if response.response_code() == ResponseCode::SYSTEM_ERROR {
        assert_eq!(
            response.remark.as_deref(),
            Some(format!("the producer group[{group}] not exist").as_str())
        );
        return None;
    }
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let connections: ProducerConnection = body::from_json(&response.body).unwrap();
    Some(
        connections
            .connection_set
            .into_iter()
            .map(|c| c.client_id)
            .collect(),
    )
}

/// Polls `listed` every 20 ms until it answers `expected`; fails naming
/// `what` after 10 s.
async fn wait_for_listing(b: &TestBroker, group: &str, expected: Option<&[&str]>, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = listed(b, group).await;
        let matches = match (&now, expected) {
            (Some(ids), Some(want)) => ids == want,
            (None, None) => true,
            _ => false,
        };
        if matches {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: listed {now:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_producer_is_listed_by_its_group_until_it_shuts_down() {
    bounded(60, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Listed").await;
        let producer = Producer::start(ProducerConfig {
            producer_group: "PlainPG".into(),
            heartbeat_broker_interval: Duration::from_millis(20),
            ..config(b.namesrv())
        })
        .await
        .unwrap();
        let id = producer.client_id().to_owned();
        assert!(
            id.contains(&format!("@{}#", std::process::id())),
            "ip@pid#n: {id}"
        );
        // No route is cached yet, so no broker has been told of the group.
        assert_eq!(listed(&b, "PlainPG").await, None);

        producer.send(Message::new("Listed", "x")).await.unwrap();
        wait_for_listing(&b, "PlainPG", Some(&[&id]), "the producer to be listed").await;

        let request = RemotingCommand::request(RequestCode::GET_ALL_PRODUCER_INFO);
        let all = b
            .client
            .invoke(&b.addr, request, Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(all.response_code(), ResponseCode::SUCCESS);
        let table = ProducerTableInfo::decode(&all.body).unwrap();
        let ids: Vec<&str> = table.data["PlainPG"]
            .iter()
            .map(|p| p.client_id.as_str())
            .collect();
        assert_eq!(ids, [id.as_str()]);

        producer.shutdown().await;
        wait_for_listing(&b, "PlainPG", None, "the group to be forgotten").await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_route_lookup_registers_without_waiting_for_the_interval() {
    bounded(60, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Early").await;
        // An interval no test outlasts: only the route lookup can register.
        let producer = Producer::start(ProducerConfig {
            producer_group: "EarlyPG".into(),
            heartbeat_broker_interval: Duration::from_secs(3600),
            ..config(b.namesrv())
        })
        .await
        .unwrap();
        producer.send(Message::new("Early", "x")).await.unwrap();
        let id = producer.client_id().to_owned();
        wait_for_listing(&b, "EarlyPG", Some(&[&id]), "the producer to be listed").await;
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeats_repeat_every_interval_to_the_brokers_of_cached_routes() {
    bounded(60, async {
        let ns = TestBroker::start(&[]).await;
        let fake =
            FakeBroker::start(Behaviour::Silent, ns.namesrv(), "broker-fake", &["Beats"]).await;
        let producer = Producer::start(ProducerConfig {
            heartbeat_broker_interval: Duration::from_millis(20),
            ..config(ns.namesrv())
        })
        .await
        .unwrap();
        // Caches the route without sending to the broker.
        producer.publish_queues("Beats").await.unwrap();
        // The route lookup registers once; only the interval repeats it.
        let deadline = Instant::now() + Duration::from_secs(10);
        while fake.heartbeats() < 3 {
            assert!(
                Instant::now() < deadline,
                "{} heartbeats reached the broker",
                fake.heartbeats()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(fake.requests(), 0, "nothing but heartbeats was sent");
        producer.shutdown().await;
    })
    .await;
}
