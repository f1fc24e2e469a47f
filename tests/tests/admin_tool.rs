//! `sluice-admin` against the real name server and brokers: it creates a
//! topic on every master, lists it, shows each queue's offsets once
//! messages are sent, and shows a group's lag after a partial consume,
//! as tables and as JSON; refusals name the broker, request and code.
//!
//! Mechanism: `UPDATE_AND_CREATE_TOPIC` on each master of the cluster,
//! `GET_ALL_TOPIC_CONFIG`, the name server's route, `GET_TOPIC_STATS_INFO`
//! and `GET_CONSUME_STATS` on each broker of the routes, merged.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{collections::BTreeMap, time::Duration};

use admin::{run, Cli};
use clap::Parser;
use consumer_client::{ConsumerConfig, PullConsumer};
use e2e_tests::{unique, wait_for, E2eEnv};
use producer_client::{Message, Producer, ProducerConfig};
use serde_json::Value;

/// Runs `sluice-admin --json` with `args` against the suite's name server.
async fn admin_json(env: &E2eEnv, args: &[&str]) -> Value {
    let mut all = vec!["sluice-admin", "--namesrv", env.namesrv.as_str(), "--json"];
    all.extend_from_slice(args);
    let out = run(&Cli::parse_from(all))
        .await
        .unwrap_or_else(|e| panic!("sluice-admin {args:?}: {e}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Messages stored in the topic by queue, as `topic status` reports them.
async fn stored(env: &E2eEnv, topic: &str) -> BTreeMap<(String, i64), i64> {
    let status = admin_json(env, &["topic", "status", "--topic", topic]).await;
    status["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| {
            (
                (
                    q["brokerName"].as_str().unwrap().to_owned(),
                    q["queueId"].as_i64().unwrap(),
                ),
                q["maxOffset"].as_i64().unwrap() - q["minOffset"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sluice_admin_creates_lists_and_reports_status_and_lag() {
    let Some(env) = E2eEnv::from_env("sluice-admin") else {
        return;
    };
    let topic = unique("AdminTool");
    let group = unique("admin-tool-");
    let created = admin_json(
        &env,
        &["topic", "create", "--topic", &topic, "--queues", "2"],
    )
    .await;
    assert_eq!(
        created["brokers"].as_array().map(Vec::len),
        Some(2),
        "created on both masters: {created}"
    );
    let listed = admin_json(&env, &["topic", "list"]).await;
    let entry = listed["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["topic"] == topic.as_str())
        .unwrap_or_else(|| panic!("{topic} listed: {listed}"))
        .clone();
    assert_eq!(
        entry["brokers"].as_array().map(Vec::len),
        Some(2),
        "{entry}"
    );
    // The name server learns the topic at the brokers' next registration.
    wait_for(Duration::from_secs(60), || async {
        let route = run(&Cli::parse_from([
            "sluice-admin",
            "--namesrv",
            env.namesrv.as_str(),
            "topic",
            "route",
            "--topic",
            topic.as_str(),
        ]))
        .await;
        route.is_ok_and(|r| r.contains("broker-a") && r.contains("broker-b"))
    })
    .await
    .unwrap();

    let n = 40;
    let producer = Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
        .await
        .unwrap();
    for i in 0..n {
        producer
            .send(Message::new(&topic, format!("admin-{i}")))
            .await
            .unwrap();
    }
    producer.shutdown().await;
    // Indexing runs behind the appends.
    wait_for(Duration::from_secs(20), || async {
        stored(&env, &topic).await.values().sum::<i64>() == n
    })
    .await
    .unwrap();
    let per_queue = stored(&env, &topic).await;
    assert_eq!(per_queue.len(), 4, "2 queues on each broker: {per_queue:?}");

    // The group consumes half of each queue (rounded down) and commits.
    let consumer = PullConsumer::start(ConsumerConfig::new(&env.namesrv, group.clone()))
        .await
        .unwrap();
    let mut committed = 0;
    for q in consumer.fetch_queues(&topic).await.unwrap() {
        let end = consumer.max_offset(&q).await.unwrap();
        consumer.commit_offset(&q, end / 2).await.unwrap();
        committed += i64::try_from(end / 2).unwrap();
    }
    consumer.shutdown().await;
    let lag = admin_json(
        &env,
        &["group", "lag", "--group", &group, "--topic", &topic],
    )
    .await;
    assert_eq!(lag["totalBrokerOffset"].as_i64(), Some(n), "{lag}");
    assert_eq!(
        lag["totalConsumerOffset"].as_i64(),
        Some(committed),
        "{lag}"
    );
    assert_eq!(lag["totalLag"].as_i64(), Some(n - committed), "{lag}");
    assert_eq!(lag["queues"].as_array().map(Vec::len), Some(4), "{lag}");
    let table = run(&Cli::parse_from([
        "sluice-admin",
        "--namesrv",
        env.namesrv.as_str(),
        "group",
        "lag",
        "--group",
        group.as_str(),
        "--topic",
        topic.as_str(),
    ]))
    .await
    .unwrap();
    assert!(
        table.contains(&format!("lag {}", n - committed)),
        "the table's summary: {table}"
    );

    // A refusal names the broker, the request and the code.
    let err = run(&Cli::parse_from([
        "sluice-admin",
        "--namesrv",
        env.namesrv.as_str(),
        "topic",
        "status",
        "--topic",
        "NoSuchAdminTopic",
        "--broker",
        env.brokers[0].as_str(),
    ]))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        err.contains(&env.brokers[0])
            && err.contains("GET_TOPIC_STATS_INFO")
            && err.contains("TOPIC_NOT_EXIST (17)"),
        "{err}"
    );
    println!(
        "sluice-admin: topic on 2 brokers, {n} messages in 4 queues, group lag {} after committing {committed}",
        n - committed
    );
}
