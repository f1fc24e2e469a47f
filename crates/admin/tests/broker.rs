//! `sluice-admin` against a real broker in-process with its embedded name
//! server: topics created, listed and inspected, a group's lag after a
//! commit, groups, connections, broker configuration, and failures that
//! name the broker, the request and the code.
#![allow(clippy::unwrap_used)]

use std::{collections::BTreeMap, time::Duration};

use admin::{AdminError, Cli};
use clap::Parser;
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    body::{self, HeartbeatData, ProducerData},
    header::UpdateConsumerOffsetRequestHeader,
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;

mod common;
use common::{bounded, poll, TestBroker};

/// What these tests ask of a test broker besides running the tool.
trait Master {
    async fn master(&self) -> String;
}

impl Master for TestBroker {
    /// The master's address as the name server reports it, once the broker
    /// has registered.
    async fn master(&self) -> String {
        let cluster = poll("the broker registers", || async {
            let c = self.json(&["cluster"]).await.ok()?;
            let brokers = c["brokers"].as_array()?;
            (!brokers.is_empty()).then(|| c.clone())
        })
        .await;
        let b = &cluster["brokers"][0];
        assert_eq!(b["brokerName"], "admin-broker");
        assert_eq!(b["brokerId"], 0);
        assert!(
            b["version"].as_str().unwrap().starts_with("Sluice "),
            "{cluster}"
        );
        assert!(b["error"].is_null(), "{cluster}");
        b["addr"].as_str().unwrap().to_owned()
    }
}

async fn commit(
    client: &RemotingClient,
    broker: &str,
    group: &str,
    topic: &str,
    queue: i32,
    offset: i64,
) {
    let request = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id: queue,
            commit_offset: offset,
            broker_name: None,
        },
    );
    let answer = client
        .invoke(broker, request, Duration::from_secs(3))
        .await
        .unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS, "{answer:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_status_and_group_lag_follow_sends_and_commits() {
    bounded(async {
        let b = TestBroker::start(&[("brokerName", "admin-broker")]).await;
        let master = b.master().await;

        let created = b
            .admin(&["topic", "create", "--topic", "AdminTopic", "--queues", "4"])
            .await
            .unwrap();
        assert_eq!(
            created,
            format!("created topic AdminTopic with 4 queues on {master}\n")
        );

        let list = b.json(&["topic", "list"]).await.unwrap();
        let topic = list["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == "AdminTopic")
            .unwrap_or_else(|| panic!("AdminTopic not listed: {list}"));
        assert_eq!(
            (topic["readQueues"].as_i64(), topic["writeQueues"].as_i64()),
            (Some(4), Some(4))
        );
        assert_eq!(topic["brokers"][0], master.as_str());
        assert!(b
            .admin(&["topic", "list"])
            .await
            .unwrap()
            .contains("\nAdminTopic "));

        let route = poll("the topic has a route", || async {
            b.json(&["topic", "route", "--topic", "AdminTopic"])
                .await
                .ok()
        })
        .await;
        assert_eq!(route["route"]["queueDatas"][0]["writeQueueNums"], 4);
        assert_eq!(
            route["route"]["brokerDatas"][0]["brokerAddrs"]["0"],
            master.as_str()
        );

        // Send through the route; count what each queue got.
        let producer = Producer::start(ProducerConfig::with_namesrv(&b.namesrv))
            .await
            .unwrap();
        let mut per_queue: BTreeMap<u32, i64> = BTreeMap::new();
        let sent = 11;
        for i in 0..sent {
            let r = producer
                .send(Message::new("AdminTopic", format!("m{i}")))
                .await
                .unwrap();
            *per_queue.entry(r.message_queue.queue_id).or_default() += 1;
        }
        producer.shutdown().await;
        assert!(
            per_queue.len() > 1,
            "round robin over the queues: {per_queue:?}"
        );

        // The ConsumeQueue is built asynchronously: poll until it holds all.
        let status = poll("every message is indexed", || async {
            let s = b
                .json(&["topic", "status", "--topic", "AdminTopic"])
                .await
                .ok()?;
            let total: i64 = s["queues"]
                .as_array()?
                .iter()
                .map(|q| q["maxOffset"].as_i64().unwrap())
                .sum();
            (total == sent).then_some(s)
        })
        .await;
        let queues = status["queues"].as_array().unwrap();
        assert_eq!(queues.len(), 4);
        for q in queues {
            let id = u32::try_from(q["queueId"].as_i64().unwrap()).unwrap();
            let got = per_queue.get(&id).copied().unwrap_or(0);
            assert_eq!(q["maxOffset"].as_i64(), Some(got), "{status}");
            assert_eq!(q["minOffset"].as_i64(), Some(0), "{status}");
            assert_eq!(q["brokerName"], "admin-broker");
            assert_eq!(
                q["lastUpdateTimestamp"].as_i64().unwrap() > 0,
                got > 0,
                "{status}"
            );
        }
        let text = b
            .admin(&["topic", "status", "--topic", "AdminTopic"])
            .await
            .unwrap();
        assert!(
            text.ends_with(&format!(
                "topic AdminTopic: 4 queues, {sent} messages stored\n"
            )),
            "{text}"
        );

        // Commit half of each queue for the group.
        let client = RemotingClient::new(ClientOptions::default());
        let mut committed = 0;
        for (queue, count) in &per_queue {
            let offset = count / 2;
            commit(
                &client,
                &master,
                "AdminGroup",
                "AdminTopic",
                i32::try_from(*queue).unwrap(),
                offset,
            )
            .await;
            committed += offset;
        }
        client.close_all().await;
        assert!(committed > 0);

        // With the topic: its route; without: no %RETRY% route, so every
        // master broker is asked.
        for args in [
            &[
                "group",
                "lag",
                "--group",
                "AdminGroup",
                "--topic",
                "AdminTopic",
            ][..],
            &["group", "lag", "--group", "AdminGroup"][..],
        ] {
            let lag = b.json(args).await.unwrap();
            assert_eq!(lag["totalBrokerOffset"].as_i64(), Some(sent), "{lag}");
            assert_eq!(
                lag["totalConsumerOffset"].as_i64(),
                Some(committed),
                "{lag}"
            );
            assert_eq!(lag["totalLag"].as_i64(), Some(sent - committed), "{lag}");
            for q in lag["queues"].as_array().unwrap() {
                assert_eq!(q["topic"], "AdminTopic");
                let id = u32::try_from(q["queueId"].as_i64().unwrap()).unwrap();
                let got = per_queue.get(&id).copied().unwrap_or(0);
                assert_eq!(q["brokerOffset"].as_i64(), Some(got), "{lag}");
                assert_eq!(q["lag"].as_i64(), Some(got - got / 2), "{lag}");
                assert_eq!(
                    q["lastTimestamp"].as_i64().unwrap() > 0,
                    got / 2 > 0,
                    "{lag}"
                );
            }
        }
        let text = b
            .admin(&["group", "lag", "--group", "AdminGroup"])
            .await
            .unwrap();
        assert!(
            text.contains(&format!(
                "group AdminGroup: 4 queues, lag {}",
                sent - committed
            )),
            "{text}"
        );
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_connections_and_broker_config() {
    bounded(async {
        let b = TestBroker::start(&[("brokerName", "admin-broker")]).await;
        let master = b.master().await;

        b.admin(&["group", "create", "--group", "AdminGroupA"])
            .await
            .unwrap();
        let names = |list: &Value| -> Vec<String> {
            list["groups"]
                .as_array()
                .unwrap()
                .iter()
                .map(|g| g["group"].as_str().unwrap().to_owned())
                .collect()
        };
        let list = b.json(&["group", "list"]).await.unwrap();
        assert!(names(&list).contains(&"AdminGroupA".to_owned()), "{list}");
        let deleted = b
            .admin(&[
                "group",
                "delete",
                "--group",
                "AdminGroupA",
                "--broker",
                &master,
            ])
            .await
            .unwrap();
        assert_eq!(deleted, format!("deleted group AdminGroupA on {master}\n"));
        let list = b.json(&["group", "list"]).await.unwrap();
        assert!(!names(&list).contains(&"AdminGroupA".to_owned()), "{list}");

        // A producer group is known once a client sends its heartbeat.
        let client = RemotingClient::new(ClientOptions::default());
        let heartbeat = HeartbeatData {
            client_id: "admin-test@1".into(),
            producer_data_set: vec![ProducerData {
                group_name: "AdminProducers".into(),
            }],
            ..HeartbeatData::default()
        };
        let request =
            RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body::to_json(&heartbeat));
        let answer = client
            .invoke(&master, request, Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
        let conns = b
            .json(&["connections", "--producer-group", "AdminProducers"])
            .await
            .unwrap();
        assert_eq!(conns["kind"], "producer");
        assert_eq!(
            conns["connections"].as_array().map(Vec::len),
            Some(1),
            "{conns}"
        );
        assert_eq!(conns["connections"][0]["clientId"], "admin-test@1");
        client.close_all().await;

        let offline = b
            .admin(&["connections", "--group", "NobodyHome"])
            .await
            .unwrap_err();
        assert_eq!(
            offline.to_string(),
            format!(
                "broker {master} refused GET_CONSUMER_CONNECTION_LIST: CONSUMER_NOT_ONLINE (206): \
                 the consumer group[NobodyHome] not online"
            )
        );

        let name = b
            .json(&[
                "broker",
                "config",
                "get",
                "--key",
                "brokerName",
                "--broker",
                &master,
            ])
            .await
            .unwrap();
        assert_eq!(
            name["config"],
            serde_json::json!({"brokerName": "admin-broker"})
        );
        let all = b
            .json(&["broker", "config", "get", "--broker", &master])
            .await
            .unwrap();
        assert!(all["config"].as_object().unwrap().len() > 10, "{all}");

        let set = b
            .admin(&[
                "broker",
                "config",
                "set",
                "--key",
                "waitTimeMillsInSendQueue",
                "--value",
                "321",
                "--broker",
                &master,
            ])
            .await
            .unwrap();
        assert_eq!(
            set,
            format!("set waitTimeMillsInSendQueue=321 on {master}\n")
        );
        let got = b
            .admin(&[
                "broker",
                "config",
                "get",
                "--key",
                "waitTimeMillsInSendQueue",
                "--broker",
                &master,
            ])
            .await
            .unwrap();
        assert_eq!(
            got,
            "Key                       Value\nwaitTimeMillsInSendQueue  321\n"
        );

        let refused = b
            .admin(&[
                "broker",
                "config",
                "set",
                "--key",
                "brokerName",
                "--value",
                "x",
                "--broker",
                &master,
            ])
            .await
            .unwrap_err();
        assert!(
            refused.to_string().starts_with(&format!(
                "broker {master} refused UPDATE_BROKER_CONFIG: INVALID_PARAMETER (29): "
            )),
            "{refused}"
        );
        let missing = b
            .admin(&[
                "broker",
                "config",
                "get",
                "--key",
                "noSuchKey",
                "--broker",
                &master,
            ])
            .await
            .unwrap_err();
        assert_eq!(
            missing.to_string(),
            format!("broker {master} has no configuration key noSuchKey")
        );
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_name_the_server_request_and_code_and_exit_non_zero() {
    bounded(async {
        let b = TestBroker::start(&[("brokerName", "admin-broker")]).await;
        let master = b.master().await;

        let unknown = b.admin(&["topic", "status", "--topic", "NoSuchTopic"]).await.unwrap_err();
        assert_eq!(
            unknown.to_string(),
            format!("broker {master} refused GET_TOPIC_STATS_INFO: TOPIC_NOT_EXIST (17): topic[NoSuchTopic] not exist")
        );
        let no_route = b.admin(&["topic", "route", "--topic", "NoSuchTopic"]).await.unwrap_err();
        assert!(matches!(no_route, AdminError::NoRoute { .. }), "{no_route}");

        // The binary prints the failure to stderr and exits non-zero.
        let namesrv = b.namesrv.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice-admin"))
                .args(["--namesrv", &namesrv, "topic", "status", "--topic", "NoSuchTopic"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("broker {master} refused GET_TOPIC_STATS_INFO: TOPIC_NOT_EXIST (17)")),
            "{stderr}"
        );

        // Nothing listens there: the name server is named in the failure.
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().to_string()
        };
        let cli = Cli::try_parse_from(["sluice-admin", "--namesrv", &closed, "--timeout-ms", "500", "cluster"]).unwrap();
        let down = admin::run(&cli).await.unwrap_err();
        assert!(
            down.to_string().starts_with(&format!("name server {closed} could not be asked GET_BROKER_CLUSTER_INFO")),
            "{down}"
        );
        b.broker.shutdown().await;
    })
    .await;
}
