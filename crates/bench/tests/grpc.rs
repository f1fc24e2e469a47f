//! The gRPC sender against a real broker in-process: a closed loop whose
//! every accepted send is stored (counts add up with what the broker holds),
//! an open loop against a broker whose send queue overflows (busy answers
//! counted by their `[OVERLOAD]` tag, with the retry hint from the
//! response metadata), message ids unique per send and per sender, and a
//! broker that went away counted as connection errors.

use std::{collections::BTreeSet, time::Duration};

use anyhow::{Context, Result};
use bench::{grpc::GrpcSender, report::Table, run, Config, Outcome, Protocol, Report};
use broker_server::{testing::start_broker, Broker};

fn grpc_config(broker: &Broker, topic: &str) -> Result<Config> {
    let port = broker.grpc_addr().context("the gRPC endpoint runs")?.port();
    let mut config = Config::new("unused:1");
    config.protocol = Protocol::Grpc;
    config.grpc = format!("127.0.0.1:{port}");
    config.topic = topic.into();
    config.queues = 4;
    config.connections = 2;
    config.body_bytes = 100;
    config.progress = false;
    Ok(config)
}

/// Every recorded send is either ok or a failure of some kind.
fn assert_counts_add_up(report: &Report) {
    assert_eq!(
        report.sent,
        report.ok + report.failed_total,
        "{}",
        Table(report)
    );
    let by_second: u64 = report
        .series
        .iter()
        .map(|s| s.ok + s.busy + s.other_failed)
        .sum();
    assert_eq!(by_second, report.sent, "{}", Table(report));
}

/// Messages the broker holds in the topic's queues, once the counts settle.
async fn stored(broker: &Broker, topic: &str, expected: i64) -> Result<i64> {
    let queues = broker
        .state()
        .topics
        .get(topic)
        .context("the route query created the topic")?
        .write_queue_nums;
    let count = || {
        (0..queues)
            .map(|q| broker.state().store.max_offset_in_queue(topic, q))
            .sum::<i64>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while count() != expected && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_over_grpc_stores_every_accepted_send() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[]).await?;
    let mut config = grpc_config(&broker, "BenchGrpcTopic")?;
    // No warm-up: every send is recorded, so the store must hold `ok`.
    config.warmup = Duration::ZERO;
    config.duration = Duration::from_millis(500);
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(report.ok > 0, "{}", Table(&report));
    assert_eq!(report.failed_total, 0, "{}", Table(&report));
    assert_counts_add_up(&report);
    assert_eq!(report.protocol, "grpc");
    assert_eq!(report.broker, config.grpc);
    assert_eq!(report.connections, 2);
    let ok = i64::try_from(report.ok)?;
    assert_eq!(
        stored(&broker, "BenchGrpcTopic", ok).await?,
        ok,
        "{}",
        Table(&report)
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_over_grpc_counts_busy_answers_by_tag() -> Result<()> {
    let dir = tempfile::tempdir()?;
    // One worker, two queue slots, 20 ms per append: far below 200/s.
    let broker = start_broker(
        dir.path(),
        &[
            ("sendMessageThreadPoolNums", "1"),
            ("sendThreadPoolQueueCapacity", "2"),
            ("faultPutLockDelayMills", "20"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ],
    )
    .await?;
    let mut config = grpc_config(&broker, "BenchGrpcBusy")?;
    config.warmup = Duration::ZERO;
    config.duration = Duration::from_secs(1);
    let report = tokio::time::timeout(
        Duration::from_secs(15),
        run::open_loop(&config, 200.0, 10_000),
    )
    .await
    .context("the open loop stops by itself")??;
    assert_counts_add_up(&report);
    assert!(report.ok > 0, "{}", Table(&report));
    let overload = report.failed.busy.get("OVERLOAD").copied().unwrap_or(0);
    assert!(overload > 0, "{}", Table(&report));
    assert_eq!(report.failed_total, overload, "{}", Table(&report));
    let hints = report.retry_after_ms.context("busy answers carry a hint")?;
    assert_eq!(hints.count, overload);
    let ok = i64::try_from(report.ok)?;
    assert_eq!(
        stored(&broker, "BenchGrpcBusy", ok).await?,
        ok,
        "{}",
        Table(&report)
    );
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ids_differ_per_send_and_per_sender() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[]).await?;
    let config = grpc_config(&broker, "BenchGrpcIds")?;
    let a = GrpcSender::connect(&config).await?;
    let b = GrpcSender::connect(&config).await?;
    let mut ids = BTreeSet::new();
    for seq in 0..8 {
        for sender in [&a, &b] {
            let m = sender.message(seq);
            let sys = m.system_properties.context("system properties")?;
            assert_eq!(sys.queue_id, i32::try_from(seq % 4)?);
            assert_eq!(m.body.len(), 100);
            assert_eq!(m.topic.map(|t| t.name).as_deref(), Some("BenchGrpcIds"));
            ids.insert(sys.message_id);
        }
    }
    assert_eq!(ids.len(), 16, "{ids:?}");
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_to_a_broker_that_went_away_are_connection_errors() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[]).await?;
    let config = grpc_config(&broker, "BenchGrpcGone")?;
    let sender = GrpcSender::connect(&config).await?;
    assert_eq!(sender.send(0, Duration::from_secs(3)).await, Outcome::Ok);
    broker.shutdown().await;
    for seq in 1..4 {
        let outcome = sender.send(seq, Duration::from_secs(3)).await;
        assert_eq!(outcome, Outcome::ConnectionError, "send {seq}");
    }
    Ok(())
}
