//! A broker for tests in other crates: in-process, on free loopback ports,
//! with its embedded name server and small files.

use std::{net::SocketAddr, path::Path};

use crate::{Broker, BrokerConfig, BrokerError};

/// Starts a broker storing under `dir`, with ports picked by the system
/// (the gRPC endpoint's too, unless `overrides` set `grpcListenPort`),
/// 4 MiB CommitLog files, 1 MiB message limit, IndexFiles of 10,000 slots
/// and 40,000 entries and metrics off; `overrides`
/// (`key=value`) apply on top.
///
/// # Errors
/// As [`Broker::start`], or a refused override.
pub async fn start_broker(dir: &Path, overrides: &[(&str, &str)]) -> Result<Broker, BrokerError> {
    let mut all: Vec<(String, String)> = [
        ("listenPort", "0".to_owned()),
        ("namesrvListenPort", "0".to_owned()),
        ("metricsListenPort", "0".to_owned()),
        ("storePathRootDir", dir.display().to_string()),
        ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
        ("mappedFileSizeConsumeQueue", (10_000 * 20).to_string()),
        ("maxMessageSize", (1024 * 1024).to_string()),
        ("maxHashSlotNum", 10_000.to_string()),
        ("maxIndexNum", 40_000.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    all.extend(
        overrides
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let config = BrokerConfig::load(None, std::iter::empty(), &all)?;
    let grpc = if overrides.iter().any(|(k, _)| *k == "grpcListenPort") {
        None
    } else {
        Some(
            tokio::net::TcpListener::bind("0.0.0.0:0")
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: "0.0.0.0:0".into(),
                    key: "grpcListenPort",
                    source,
                })?,
        )
    };
    Broker::start_with_grpc_listener(config, grpc).await
}

/// `127.0.0.1:port` for an address the broker bound on all interfaces.
pub fn loopback(addr: SocketAddr) -> String {
    SocketAddr::from(([127, 0, 0, 1], addr.port())).to_string()
}
