//! Every listener (remoting, gRPC, metrics) keeps its own connection limits:
//! with `maxConnectionsPerAddress=2`, a third connection from the same
//! address is closed as soon as it is accepted, while the first two stay
//! usable; once one of them closes, a new one is served. Its own test
//! binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{scrape, TestBroker};
use tokio::{io::AsyncReadExt, net::TcpStream};

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
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
    // The places came back: the metrics page is served again.
    let mut served = false;
    for _ in 0..50 {
        if scrape(metrics.parse().unwrap())
            .await
            .starts_with("HTTP/1.1 200")
        {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "metrics served after the held connections closed");
    b.broker.shutdown().await;
}
