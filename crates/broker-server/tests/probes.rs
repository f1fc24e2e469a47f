//! The metrics port's probes: `/live` answers while the process serves,
//! `/ready` only once the broker has a role and registered. Its own test
//! binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::TestBroker;
use controller::testing::LocalGroup;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

async fn get(port: u16, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_is_live_at_once_and_ready_once_it_has_a_role_and_registered() {
    // The controllers' ports, bound before the broker is told them; the
    // controllers start later.
    let mut listeners = Vec::new();
    for _ in 0..3 {
        listeners.push(TcpListener::bind("127.0.0.1:0").await.unwrap());
    }
    let addrs: Vec<String> = listeners
        .iter()
        .map(|l| l.local_addr().unwrap().to_string())
        .collect();
    let controller_addr = addrs.join(";");
    let port = proc_harness::free_port().unwrap().to_string();
    let b = TestBroker::start(&[
        ("metricsListenPort", port.as_str()),
        ("metricsBindAddress", "127.0.0.1"),
        ("enableControllerMode", "true"),
        ("controllerAddr", controller_addr.as_str()),
        ("brokerHeartbeatInterval", "200"),
        ("syncBrokerMetadataPeriod", "300"),
    ])
    .await;
    let port: u16 = port.parse().unwrap();
    let live = get(port, "/live").await;
    assert!(live.starts_with("HTTP/1.1 200"), "{live}");
    let not_ready = get(port, "/ready").await;
    assert!(not_ready.starts_with("HTTP/1.1 503"), "{not_ready}");
    assert!(not_ready.contains("no role yet"), "{not_ready}");

    let dir = tempfile::tempdir().unwrap();
    let mut controllers =
        LocalGroup::start_on(dir.path().to_owned(), listeners, Duration::from_secs(1)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = get(port, "/ready").await;
        if ready.starts_with("HTTP/1.1 200") {
            assert!(ready.ends_with("ready\n"), "{ready}");
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {ready}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(b.broker.state().ha.master().is_some());
    b.broker.shutdown().await;
    controllers.stop_all().await;
}
