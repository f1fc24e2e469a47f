//! What the `sluice-admin` integration tests share: a broker in-process
//! with its embedded name server, running the tool against a name server
//! (text or JSON), and bounded waiting.
#![allow(dead_code, clippy::unwrap_used)]

use std::{
    future::Future,
    time::{Duration, Instant},
};

use admin::{AdminError, Cli};
use broker_server::{testing, Broker};
use clap::Parser;
use serde_json::Value;

/// A running broker with its embedded name server.
pub struct TestBroker {
    pub broker: Broker,
    /// The embedded name server, `127.0.0.1:port`.
    pub namesrv: String,
    /// The remoting address, `127.0.0.1:port`.
    pub addr: String,
    _dir: tempfile::TempDir,
}

impl TestBroker {
    /// Starts a broker with `key=value` overrides.
    pub async fn start(overrides: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let broker = testing::start_broker(dir.path(), overrides).await.unwrap();
        let namesrv = testing::loopback(broker.namesrv_addr().expect("embedded name server"));
        let addr = testing::loopback(broker.remoting_addr());
        Self {
            broker,
            namesrv,
            addr,
            _dir: dir,
        }
    }

    /// Runs `sluice-admin <args>` against this broker's name server.
    pub async fn admin(&self, args: &[&str]) -> Result<String, AdminError> {
        admin(&self.namesrv, args).await
    }

    /// Runs `sluice-admin --json <args>` against this broker's name server.
    pub async fn json(&self, args: &[&str]) -> Result<Value, AdminError> {
        json(&self.namesrv, args).await
    }
}

/// Runs `sluice-admin <args>` against `namesrv`.
pub async fn admin(namesrv: &str, args: &[&str]) -> Result<String, AdminError> {
    let argv = ["sluice-admin", "--namesrv", namesrv, "--timeout-ms", "3000"]
        .into_iter()
        .chain(args.iter().copied());
    let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    admin::run(&cli).await
}

/// Runs `sluice-admin --json <args>` against `namesrv` and parses its output.
pub async fn json(namesrv: &str, args: &[&str]) -> Result<Value, AdminError> {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = admin(namesrv, &all).await?;
    Ok(serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}")))
}

/// Calls `probe` every `every` until it gives a value, for at most `limit`.
pub async fn poll_within<T, F: Future<Output = Option<T>>>(
    limit: Duration,
    every: Duration,
    what: &str,
    mut probe: impl FnMut() -> F,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(every).await;
    }
}

/// Calls `probe` until it gives a value, for at most 10 s.
pub async fn poll<T, F: Future<Output = Option<T>>>(what: &str, probe: impl FnMut() -> F) -> T {
    poll_within(
        Duration::from_secs(10),
        Duration::from_millis(20),
        what,
        probe,
    )
    .await
}

/// Fails the test if `fut` takes longer than `limit`.
pub async fn bounded_by<T>(limit: Duration, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(limit, fut)
        .await
        .expect("test took too long")
}

/// Fails the test if `fut` takes longer than 60 s.
pub async fn bounded<T>(fut: impl Future<Output = T>) -> T {
    bounded_by(Duration::from_secs(60), fut).await
}
