//! `sluice-admin controller ...` against three controllers in-process: who
//! leads, a group's replicas, a designated election and cleaning a member.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use admin::Cli;
use clap::Parser;
use controller::testing::LocalGroup;
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{
        ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
        RegisterBrokerToControllerRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;

async fn admin_json(args: &[&str]) -> Result<Value, String> {
    let mut all = vec!["sluice-admin", "--json"];
    all.extend_from_slice(args);
    let cli = Cli::try_parse_from(all).unwrap();
    match admin::run(&cli).await {
        Ok(text) => Ok(serde_json::from_str(&text).unwrap()),
        Err(e) => Err(e.to_string()),
    }
}

/// Broker `id` of group `b` applies, registers at `addr` and beats.
async fn join(client: &RemotingClient, leader: &str, id: i64, addr: &str) {
    for request in [
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_APPLY_BROKER_ID,
            &ApplyBrokerIdRequestHeader {
                cluster_name: Some("c".into()),
                broker_name: "b".into(),
                applied_broker_id: id,
                register_check_code: format!("{addr};1"),
            },
        ),
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_REGISTER_BROKER,
            &RegisterBrokerToControllerRequestHeader {
                cluster_name: Some("c".into()),
                broker_name: "b".into(),
                broker_id: id,
                broker_address: addr.into(),
                invoke_time: None,
            },
        ),
        RemotingCommand::request_with_header(
            RequestCode::BROKER_HEARTBEAT,
            &BrokerHeartbeatRequestHeader {
                cluster_name: "c".into(),
                broker_addr: addr.into(),
                broker_name: "b".into(),
                broker_id: Some(id),
                heartbeat_timeout_mills: Some(600_000),
                ..BrokerHeartbeatRequestHeader::default()
            },
        ),
    ] {
        let answer = client
            .invoke(leader, request, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS, "{answer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_commands_read_and_change_the_controllers_record() {
    let dir = tempfile::tempdir().unwrap();
    let mut group = LocalGroup::start(dir.path().to_owned(), 3, Duration::from_secs(1)).await;
    let leader = group.addrs[group.leader().await].clone();
    let all = group.controller_addr();

    // Who leads, from any controller.
    let follower = group.addrs.iter().find(|a| **a != leader).unwrap().clone();
    let meta = admin_json(&["controller", "meta", "--controller", &follower])
        .await
        .unwrap();
    assert_eq!(meta["leaderAddress"], leader.as_str(), "{meta}");
    assert_eq!(meta["isLeader"], false);
    assert_eq!(meta["peers"].as_array().unwrap().len(), 3);

    let client = RemotingClient::new(ClientOptions::default());
    join(&client, &leader, 1, "10.0.0.1:10911").await;
    join(&client, &leader, 2, "10.0.0.2:10911").await;
    // A designated first election: broker 2.
    let elected = admin_json(&[
        "controller",
        "elect",
        "--controller",
        &all,
        "--broker-name",
        "b",
        "--broker-id",
        "2",
    ])
    .await
    .unwrap();
    assert_eq!(elected["masterBrokerId"], 2, "{elected}");
    assert_eq!(elected["masterAddress"], "10.0.0.2:10911");
    let state = admin_json(&[
        "controller",
        "sync-state",
        "--controller",
        &all,
        "--broker-name",
        "b",
    ])
    .await
    .unwrap();
    let b = &state["groups"][0];
    assert_eq!(b["brokerName"], "b", "{state}");
    assert_eq!(b["masterBrokerId"], 2);
    assert_eq!(b["masterEpoch"], 1);
    let replicas = b["replicas"].as_array().unwrap();
    assert_eq!(replicas.len(), 2);
    assert_eq!(replicas[0]["inSync"], false);
    assert_eq!(replicas[1]["inSync"], true);
    assert!(replicas.iter().all(|r| r["alive"] == true));

    // A live member is cleaned only when asked to clean living brokers.
    let refused = admin_json(&[
        "controller",
        "clean",
        "--controller",
        &all,
        "--broker-name",
        "b",
        "--broker-ids",
        "1",
    ])
    .await
    .unwrap_err();
    assert!(
        refused.contains("CONTROLLER_INVALID_CLEAN_BROKER_METADATA"),
        "{refused}"
    );
    admin_json(&[
        "controller",
        "clean",
        "--controller",
        &all,
        "--broker-name",
        "b",
        "--broker-ids",
        "1",
        "--clean-living",
    ])
    .await
    .unwrap();
    let state = admin_json(&[
        "controller",
        "sync-state",
        "--controller",
        &all,
        "--broker-name",
        "b",
    ])
    .await
    .unwrap();
    assert_eq!(state["groups"][0]["replicas"].as_array().unwrap().len(), 1);
    client.close_all().await;
    group.stop_all().await;
}
