//! `sluice-bench controller-commit`: how long the replication controllers
//! take to commit one change. Each request re-applies the same broker id
//! (`CONTROLLER_APPLY_BROKER_ID` with the same check code): a change that
//! leaves the record as it is, but is still appended to the Raft log,
//! replicated to a majority with each append synced, and applied, before
//! the leader answers. One request at a time.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{ApplyBrokerIdRequestHeader, GetMetaDataResponseHeader},
    RemotingCommand, RequestCode, ResponseCode,
};

/// What a run measured.
#[derive(Debug, Clone)]
pub struct CommitReport {
    /// Commits made.
    pub commits: u64,
    /// Commits per second, one at a time.
    pub per_second: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Slowest, ms.
    pub max_ms: f64,
}

impl std::fmt::Display for CommitReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} commits, one at a time: {:.0}/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            self.commits, self.per_second, self.p50_ms, self.p99_ms, self.max_ms
        )
    }
}

/// Commits `count` changes through the controllers at `controllers`
/// (`;`-separated; the leader is found first).
///
/// # Errors
/// No leader, or a commit refused or not answered.
pub async fn run(controllers: &str, count: u64) -> Result<CommitReport> {
    let client = RemotingClient::new(ClientOptions::default());
    let timeout = Duration::from_secs(5);
    let mut leader = None;
    for addr in controllers.split([';', ',']).filter(|a| !a.is_empty()) {
        let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
        let Ok(answer) = client.invoke(addr, request, timeout).await else {
            continue;
        };
        leader = answer
            .decode_header::<GetMetaDataResponseHeader>()
            .ok()
            .and_then(|h| h.controller_leader_address)
            .filter(|a| !a.is_empty());
        if leader.is_some() {
            break;
        }
    }
    let leader = leader.context("no controller names a leader")?;
    let apply = || {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_APPLY_BROKER_ID,
            &ApplyBrokerIdRequestHeader {
                cluster_name: Some("bench".into()),
                broker_name: "bench-controller-commit".into(),
                applied_broker_id: 1,
                register_check_code: "bench;0".into(),
            },
        )
    };
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let started = Instant::now();
    for _ in 0..count {
        let sent = Instant::now();
        let answer = client.invoke(&leader, apply(), timeout).await?;
        if answer.response_code() != ResponseCode::SUCCESS {
            bail!(
                "controller {leader} refused: {} {}",
                answer.response_code(),
                answer.remark.unwrap_or_default()
            );
        }
        let us = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
        histogram.record(us.max(1))?;
    }
    let took = started.elapsed().as_secs_f64();
    client.close_all().await;
    let ms = |us: u64| us as f64 / 1000.0;
    Ok(CommitReport {
        commits: count,
        per_second: count as f64 / took,
        p50_ms: ms(histogram.value_at_quantile(0.5)),
        p99_ms: ms(histogram.value_at_quantile(0.99)),
        max_ms: ms(histogram.max()),
    })
}
