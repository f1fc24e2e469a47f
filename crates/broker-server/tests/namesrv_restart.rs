//! A name server that restarts knows no broker until they register again:
//! the broker notices its connection closed and registers with it again
//! within seconds, not a whole `registerNameServerPeriod` later.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TestBroker;
use name_server::{config::NamesrvConfig, server};
use remoting_net::{CancellationToken, ClientOptions, RemotingClient};
use remoting_protocol::{
    body::{from_json, ClusterInfo},
    RemotingCommand, RequestCode,
};

/// A name server on `port` (0: a free one) until the token fires; its
/// address and the task serving it.
async fn start_namesrv(port: u16) -> (String, CancellationToken, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let config = NamesrvConfig::default();
    let kv = server::open_kv_config(&config).unwrap();
    let stop = CancellationToken::new();
    let task = tokio::spawn(server::run(listener, config, kv, None, stop.clone()));
    (addr, stop, task)
}

/// Waits (at most 20 s) until the name server at `namesrv` lists `broker`.
async fn wait_listed(client: &RemotingClient, namesrv: &str, broker: &str, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
        if let Ok(answer) = client
            .invoke(namesrv, request, Duration::from_secs(2))
            .await
        {
            let info: Option<ClusterInfo> = from_json(&answer.body).ok();
            if info.is_some_and(|i| i.broker_addr_table.contains_key(broker)) {
                return;
            }
        }
        assert!(Instant::now() < deadline, "{what}: {broker} not listed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_name_server_hears_from_the_broker_again_within_seconds() {
    let (namesrv, stop, task) = start_namesrv(0).await;
    let broker = TestBroker::start(&[
        ("brokerName", "restart-a"),
        ("embeddedNamesrv", "false"),
        ("namesrvAddr", &namesrv),
        // Longer than the wait below (20 s): only the reconnect check
        // can make it.
        ("registerNameServerPeriod", "60000"),
    ])
    .await;
    let client = RemotingClient::new(ClientOptions::default());
    wait_listed(&client, &namesrv, "restart-a", "first start").await;

    stop.cancel();
    task.await.unwrap();
    client.close_all().await;
    let port = namesrv.rsplit(':').next().unwrap().parse().unwrap();
    let (again, stop, task) = start_namesrv(port).await;
    wait_listed(&client, &again, "restart-a", "after the restart").await;

    stop.cancel();
    task.await.unwrap();
    drop(broker);
}
