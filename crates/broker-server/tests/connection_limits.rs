//! Every listener (remoting, gRPC, metrics) keeps its own connection limits:
//! with `maxConnectionsPerAddress=2`, a third connection from the same
//! address is closed as soon as it is accepted, while the first two stay
//! usable; once one of them closes, a new one is served. Its own test
//! binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::TestBroker;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

fn free_port() -> u16 {
    proc_harness::free_port().unwrap()
}

/// The metrics page, or `None` when the connection is refused or reset.
async fn try_scrape(port: u16) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .ok()?
        .ok()?;
    Some(out)
}

/// Whether the server closes a fresh connection within 5 s without being
/// sent anything.
async fn closed_at_once(port: u16) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_listener_closes_a_connection_past_the_per_address_share() {
    let metrics = free_port().to_string();
    let b = TestBroker::start(&[
        ("metricsListenPort", metrics.as_str()),
        ("maxConnectionsPerAddress", "2"),
    ])
    .await;
    let ports = [
        ("remoting", b.broker.remoting_addr().port()),
        ("gRPC", b.broker.grpc_addr().unwrap().port()),
        ("metrics", metrics.parse().unwrap()),
    ];
    for (name, port) in ports {
        let held = [
            TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
            TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
        ];
        assert!(closed_at_once(port).await, "{name}: third connection");
        drop(held);
    }
    // The places come back once the server has seen the held connections
    // close: the metrics page is served again (a reset before that only
    // means "not yet").
    let mut served = false;
    for _ in 0..50 {
        if try_scrape(metrics.parse().unwrap())
            .await
            .is_some_and(|page| page.starts_with("HTTP/1.1 200"))
        {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "metrics served after the held connections closed");
    b.broker.shutdown().await;
}
