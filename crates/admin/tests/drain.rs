//! `sluice-admin broker drain` / `undrain` against two real brokers
//! in-process registering with one name server: a drained broker leaves the
//! send routes (its queues lose write permission, sends go to the other
//! broker, a direct send is refused) while its messages can still be pulled,
//! and undraining brings it back.
#![allow(clippy::unwrap_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use admin::AdminError;
use broker_server::{testing, Broker};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2},
    message::record::{check, Record},
    RemotingCommand, RequestCode, ResponseCode,
};

mod common;
use common::{admin, bounded_by, json, poll};

const TOPIC: &str = "DrainT";

/// Brokers `broker-a` (with the embedded name server) and `broker-b`
/// (registering with it).
struct Pair {
    a: Broker,
    b: Broker,
    namesrv: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Pair {
    async fn start() -> Self {
        let dir_a = tempfile::tempdir().unwrap();
        let a = testing::start_broker(dir_a.path(), &[("brokerName", "broker-a")])
            .await
            .unwrap();
        let namesrv = testing::loopback(a.namesrv_addr().expect("embedded name server"));
        let dir_b = tempfile::tempdir().unwrap();
        let b = testing::start_broker(
            dir_b.path(),
            &[
                ("brokerName", "broker-b"),
                ("embeddedNamesrv", "false"),
                ("namesrvAddr", &namesrv),
            ],
        )
        .await
        .unwrap();
        Self {
            a,
            b,
            namesrv,
            _dirs: (dir_a, dir_b),
        }
    }

    async fn shutdown(self) {
        self.b.shutdown().await;
        self.a.shutdown().await;
    }
}

/// Broker name to master address, once `names` have all registered.
async fn masters(namesrv: &str, names: &[&str]) -> BTreeMap<String, String> {
    poll("every broker registers", || async {
        let c = json(namesrv, &["cluster"]).await.ok()?;
        let found: BTreeMap<String, String> = c["brokers"]
            .as_array()?
            .iter()
            .filter(|b| b["brokerId"] == 0)
            .map(|b| {
                (
                    b["brokerName"].as_str().unwrap().to_owned(),
                    b["addr"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        names
            .iter()
            .all(|n| found.contains_key(*n))
            .then_some(found)
    })
    .await
}

/// Broker name to the perm of its queue data in `topic`'s route.
async fn route_perms(namesrv: &str, topic: &str) -> BTreeMap<String, i64> {
    let Ok(route) = json(namesrv, &["topic", "route", "--topic", topic]).await else {
        return BTreeMap::new();
    };
    route["route"]["queueDatas"]
        .as_array()
        .map(|qs| {
            qs.iter()
                .map(|q| {
                    (
                        q["brokerName"].as_str().unwrap().to_owned(),
                        q["perm"].as_i64().unwrap(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Polls until `topic`'s route gives each broker of `want` that perm.
async fn wait_for_perms(namesrv: &str, topic: &str, want: &[(&str, i64)]) {
    let want: BTreeMap<String, i64> = want.iter().map(|(n, p)| ((*n).to_owned(), *p)).collect();
    let what = format!("the route of {topic} is {want:?}");
    poll(&what, || async {
        let perms = route_perms(namesrv, topic).await;
        want.iter()
            .all(|(n, p)| perms.get(n) == Some(p))
            .then_some(())
    })
    .await;
}

/// Polls until the producer's publish queues of `topic` are on exactly the
/// brokers `names`.
async fn wait_for_publish_brokers(producer: &Producer, topic: &str, names: &[&str]) {
    let want: BTreeSet<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let what = format!("the producer publishes {topic} to {want:?}");
    poll(&what, || async {
        let queues = producer.publish_queues(topic).await.ok()?;
        let on: BTreeSet<String> = queues.into_iter().map(|q| q.broker_name).collect();
        (on == want).then_some(())
    })
    .await;
}

/// A producer that refreshes its routes every 50 ms.
async fn producer(namesrv: &str) -> Producer {
    Producer::start(ProducerConfig {
        poll_name_server_interval: Duration::from_millis(50),
        ..ProducerConfig::with_namesrv(namesrv)
    })
    .await
    .unwrap()
}

/// Sends `n` messages `{prefix}{i}`; returns broker name to the bodies it
/// stored.
async fn send_n(producer: &Producer, prefix: &str, n: usize) -> BTreeMap<String, BTreeSet<String>> {
    let mut on: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for i in 0..n {
        let body = format!("{prefix}{i}");
        let sent = producer
            .send(Message::new(TOPIC, body.clone()))
            .await
            .unwrap_or_else(|e| panic!("send {body}: {e}"));
        on.entry(sent.message_queue.broker_name)
            .or_default()
            .insert(body);
    }
    on
}

/// Every body in queues `0..queues` of `topic` on the broker at `addr`,
/// pulled from offset 0 (one non-suspended pull per queue).
async fn pull_all(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    queues: i32,
) -> BTreeSet<String> {
    let mut bodies = BTreeSet::new();
    for queue_id in 0..queues {
        let request = RemotingCommand::request_with_header(
            RequestCode::PULL_MESSAGE,
            &PullMessageRequestHeader {
                consumer_group: "DrainReader".into(),
                topic: topic.into(),
                queue_id,
                queue_offset: 0,
                max_msg_nums: 64,
                sys_flag: 0,
                commit_offset: 0,
                suspend_timeout_millis: 0,
                subscription: Some("*".into()),
                ..PullMessageRequestHeader::default()
            },
        );
        let answer = client
            .invoke(addr, request, Duration::from_secs(3))
            .await
            .unwrap();
        if answer.response_code() != ResponseCode::SUCCESS {
            continue;
        }
        let mut rest = &answer.body[..];
        while !rest.is_empty() {
            let Record::Message(m) = check(rest, false) else {
                panic!("the pull body holds a bad record");
            };
            bodies.insert(String::from_utf8_lossy(m.body).into_owned());
            rest = &rest[m.total_size..];
        }
    }
    bodies
}

/// A `SEND_MESSAGE_V2` straight to the broker at `addr`.
async fn send_direct(client: &RemotingClient, addr: &str, topic: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "DirectPG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1_700_000_000_000,
        properties: Some(String::new()),
        ..SendMessageRequestHeader::default()
    });
    let request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(b"direct".to_vec());
    client
        .invoke(addr, request, Duration::from_secs(3))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drained_broker_takes_no_sends_but_serves_pulls_until_undrained() {
    bounded_by(Duration::from_secs(90), async {
        let pair = Pair::start().await;
        let ns = pair.namesrv.clone();
        let addrs = masters(&ns, &["broker-a", "broker-b"]).await;
        let (addr_a, addr_b) = (addrs["broker-a"].clone(), addrs["broker-b"].clone());
        json(&ns, &["topic", "create", "--topic", TOPIC, "--queues", "4"])
            .await
            .unwrap();
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 6)]).await;

        let producer = producer(&ns).await;
        wait_for_publish_brokers(&producer, TOPIC, &["broker-a", "broker-b"]).await;
        let before = send_n(&producer, "before-", 16).await;
        let on_a_before = before.get("broker-a").cloned().unwrap_or_default();
        assert!(
            !on_a_before.is_empty(),
            "round robin reached broker-a: {before:?}"
        );
        assert!(before.contains_key("broker-b"), "{before:?}");

        // Drain broker-a.
        let drained = json(&ns, &["broker", "drain", "--broker-name", "broker-a"])
            .await
            .unwrap();
        assert_eq!(drained["action"], "drain", "{drained}");
        assert_eq!(drained["brokerName"], "broker-a");
        assert_eq!(drained["brokerPermission"], 4);
        assert_eq!(drained["brokers"][0]["addr"], addr_a.as_str(), "{drained}");
        assert_eq!(drained["brokers"].as_array().unwrap().len(), 1);
        let servers = drained["nameServers"].as_array().unwrap();
        assert_eq!(servers.len(), 1, "{drained}");
        assert_eq!(servers[0]["namesrv"], ns.as_str());
        assert_eq!(servers[0]["request"], "WIPE_WRITE_PERM_OF_BROKER");
        assert!(
            servers[0]["topics"].as_i64().unwrap() >= 1,
            "the wipe touched the topic: {drained}"
        );
        let config = json(
            &ns,
            &[
                "broker",
                "config",
                "get",
                "--broker",
                &addr_a,
                "--key",
                "brokerPermission",
            ],
        )
        .await
        .unwrap();
        assert_eq!(config["config"]["brokerPermission"], "4", "{config}");

        // The route shows broker-a read only, broker-b untouched.
        let perms = route_perms(&ns, TOPIC).await;
        assert_eq!(perms.get("broker-a"), Some(&4), "{perms:?}");
        assert_eq!(perms.get("broker-b"), Some(&6), "{perms:?}");

        // A topic created on broker-a after the wipe is registered read only
        // by the broker itself, and that registration (a new data version)
        // keeps the drained topic read only too.
        json(
            &ns,
            &[
                "topic",
                "create",
                "--topic",
                "DrainLater",
                "--queues",
                "2",
                "--broker",
                &addr_a,
            ],
        )
        .await
        .unwrap();
        wait_for_perms(&ns, "DrainLater", &[("broker-a", 4)]).await;
        assert_eq!(route_perms(&ns, TOPIC).await.get("broker-a"), Some(&4));

        // Sends go to broker-b only.
        wait_for_publish_brokers(&producer, TOPIC, &["broker-b"]).await;
        let during = send_n(&producer, "during-", 20).await;
        assert_eq!(
            during.keys().collect::<Vec<_>>(),
            vec!["broker-b"],
            "every send lands on broker-b: {during:?}"
        );
        assert_eq!(during["broker-b"].len(), 20);

        let client = RemotingClient::new(ClientOptions::default());
        poll(
            "broker-b holds every message sent while broker-a drains",
            || async {
                let got = pull_all(&client, &addr_b, TOPIC, 4).await;
                during["broker-b"].is_subset(&got).then_some(())
            },
        )
        .await;

        // A direct send to broker-a is refused as RocketMQ's broker does.
        let refused = send_direct(&client, &addr_a, TOPIC).await;
        assert_eq!(refused.response_code(), ResponseCode::NO_PERMISSION);
        let remark = refused.remark.clone().unwrap_or_default();
        assert!(
            remark.starts_with("the broker[") && remark.ends_with("] sending message is forbidden"),
            "{remark}"
        );

        // broker-a's earlier messages can still be pulled.
        let pulled = poll("broker-a's messages are pulled", || async {
            let got = pull_all(&client, &addr_a, TOPIC, 4).await;
            (got == on_a_before).then_some(got)
        })
        .await;
        assert!(pulled.iter().all(|b| b.starts_with("before-")));

        // Undrain: the route and the sends come back to broker-a.
        let undrained = json(&ns, &["broker", "undrain", "--broker-name", "broker-a"])
            .await
            .unwrap();
        assert_eq!(undrained["action"], "undrain", "{undrained}");
        assert_eq!(undrained["brokerPermission"], 6);
        assert_eq!(
            undrained["nameServers"][0]["request"],
            "ADD_WRITE_PERM_OF_BROKER"
        );
        assert!(undrained["nameServers"][0]["topics"].as_i64().unwrap() >= 2);
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 6)]).await;
        wait_for_publish_brokers(&producer, TOPIC, &["broker-a", "broker-b"]).await;
        let after = send_n(&producer, "after-", 16).await;
        assert!(
            after.contains_key("broker-a") && after.contains_key("broker-b"),
            "sends reach both brokers again: {after:?}"
        );
        assert_eq!(
            send_direct(&client, &addr_a, TOPIC).await.response_code(),
            ResponseCode::SUCCESS
        );

        producer.shutdown().await;
        client.close_all().await;
        pair.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_prints_tables_broker_permission_alone_reroutes_and_unknown_names_are_named() {
    bounded_by(Duration::from_secs(90), async {
        let pair = Pair::start().await;
        let ns = pair.namesrv.clone();
        let addrs = masters(&ns, &["broker-a", "broker-b"]).await;
        json(&ns, &["topic", "create", "--topic", TOPIC, "--queues", "2"])
            .await
            .unwrap();
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 6)]).await;

        let text = admin(&ns, &["broker", "drain", "--broker-name", "broker-b"])
            .await
            .unwrap();
        assert!(text.starts_with("drained broker-b: "), "{text}");
        assert!(text.contains(&addrs["broker-b"]), "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with(&ns) && l.contains("WIPE_WRITE_PERM_OF_BROKER")),
            "{text}"
        );
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 4)]).await;
        let text = admin(&ns, &["broker", "undrain", "--broker-name", "broker-b"])
            .await
            .unwrap();
        assert!(text.starts_with("undrained broker-b: "), "{text}");
        assert!(text.contains("ADD_WRITE_PERM_OF_BROKER"), "{text}");
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 6)]).await;

        // brokerPermission alone, changed at run time, changes the route at
        // once (the broker registers again under a new data version) and
        // makes the broker refuse sends; restoring it restores both.
        let addr_b = addrs["broker-b"].as_str();
        let set = |value: &'static str| {
            let ns = ns.clone();
            async move {
                admin(
                    &ns,
                    &[
                        "broker",
                        "config",
                        "set",
                        "--broker",
                        addr_b,
                        "--key",
                        "brokerPermission",
                        "--value",
                        value,
                    ],
                )
                .await
                .unwrap()
            }
        };
        let client = RemotingClient::new(ClientOptions::default());
        set("4").await;
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 4)]).await;
        let refused = send_direct(&client, addr_b, TOPIC).await;
        assert_eq!(
            refused.response_code(),
            ResponseCode::NO_PERMISSION,
            "{:?}",
            refused.remark
        );
        set("6").await;
        wait_for_perms(&ns, TOPIC, &[("broker-a", 6), ("broker-b", 6)]).await;
        let accepted = send_direct(&client, addr_b, TOPIC).await;
        assert_eq!(
            accepted.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            accepted.remark
        );
        client.close_all().await;

        match admin(&ns, &["broker", "drain", "--broker-name", "broker-x"]).await {
            Err(e @ AdminError::NoSuchBroker { .. }) => {
                let message = e.to_string();
                assert!(message.contains("broker-x"), "{message}");
                assert!(message.contains("broker-a, broker-b"), "{message}");
            }
            other => panic!("expected an unknown broker name, got {other:?}"),
        }
        pair.shutdown().await;
    })
    .await;
}
