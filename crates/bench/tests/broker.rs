//! Against a real broker in-process (with its embedded name server): the
//! producer benchmark finds the topic's queues through the name server
//! (`--namesrv`), and the consumer benchmark pulls back at least what was
//! sent, with end-to-end latencies, by pulls and by gRPC receives.

use std::time::Duration;

use anyhow::{Context, Result};
use bench::{
    config::Protocol,
    consume::{consume, ConsumeConfig, StartFrom, CONSUMER_GROUP},
    report::Table,
    run, Config,
};
use broker_server::testing::{loopback, start_broker};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_through_the_route_and_consumes_them_back() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[("brokerName", "bench-broker")]).await?;
    let namesrv = loopback(broker.namesrv_addr().context("embedded name server")?);

    let mut config = Config::new("unused:1");
    config.namesrv = Some(namesrv.clone());
    config.topic = "BenchRouteTopic".into();
    config.queues = 4;
    config.warmup = Duration::from_millis(100);
    config.duration = Duration::from_millis(500);
    config.body_bytes = 100;
    config.progress = false;
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(report.ok > 0, "{}", Table(&report));
    assert_eq!(report.failed_total, 0, "{}", Table(&report));
    assert_eq!(report.namesrv.as_deref(), Some(namesrv.as_str()));
    assert!(
        report.broker.starts_with("bench-broker="),
        "{}",
        Table(&report)
    );

    let consumed = tokio::time::timeout(
        Duration::from_secs(20),
        consume(&ConsumeConfig {
            namesrv,
            topic: "BenchRouteTopic".into(),
            group: CONSUMER_GROUP.into(),
            protocol: Protocol::Remoting,
            grpc: String::new(),
            receivers: 1,
            from: StartFrom::First,
            batch: 32,
            duration: Duration::from_secs(2),
            timeout: Duration::from_secs(3),
            progress: false,
            tls: false,
            tls_trust: None,
            credentials: None,
        }),
    )
    .await
    .context("the consumer stops by itself")??;
    assert_eq!(consumed.queues, 4, "{consumed}");
    // Warm-up sends are stored too, so at least the recorded ones come back.
    assert!(
        consumed.messages >= report.ok,
        "{consumed}\n{}",
        Table(&report)
    );
    assert_eq!(consumed.bytes, consumed.messages * 100);
    assert_eq!(consumed.pull_errors, 0, "{consumed}");
    let born = consumed.e2e_from_born_ms.context("no end-to-end latency")?;
    assert_eq!(born.count, consumed.messages);
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_receives_get_what_was_sent_after_the_group_first_read() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[]).await?;
    let grpc = loopback(broker.grpc_addr().context("gRPC endpoint")?);
    let receive = |duration: Duration| ConsumeConfig {
        namesrv: "unused:1".into(),
        topic: "BenchGrpcTopic".into(),
        group: "bench-grpc-group".into(),
        protocol: Protocol::Grpc,
        grpc: grpc.clone(),
        receivers: 2,
        from: StartFrom::Last,
        batch: 32,
        duration,
        timeout: Duration::from_secs(3),
        progress: false,
        tls: false,
        tls_trust: None,
        credentials: None,
    };
    let within = |c: ConsumeConfig| async move {
        tokio::time::timeout(Duration::from_secs(20), consume(&c))
            .await
            .context("the receivers stop by themselves")?
    };
    // The group's first read sets its place at the queues' end.
    let first = within(receive(Duration::from_millis(300))).await?;
    assert_eq!((first.messages, first.pull_errors), (0, 0), "{first}");

    let mut config = Config::new(loopback(broker.remoting_addr()));
    config.topic = "BenchGrpcTopic".into();
    config.queues = 4;
    config.warmup = Duration::ZERO;
    config.duration = Duration::from_millis(500);
    config.body_bytes = 64;
    config.progress = false;
    let sent = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(sent.ok > 0, "{}", Table(&sent));

    let got = within(receive(Duration::from_secs(2))).await?;
    // Sends still in flight at the end (at most 4) are stored, not counted.
    assert!(
        (sent.ok..=sent.ok + 4).contains(&got.messages),
        "{got}\n{}",
        Table(&sent)
    );
    assert_eq!(got.bytes, got.messages * 64);
    assert_eq!(got.pull_errors, 0, "{got}");
    assert_eq!(got.protocol, "grpc");
    let stored = got.e2e_from_store_ms.context("no end-to-end latency")?;
    assert_eq!(stored.count, got.messages);
    broker.shutdown().await;
    Ok(())
}

/// `--honour-retry-after`: a closed-loop sender that waits each `[QUOTA]`
/// answer's hint is never refused again right after its wait (the hint is
/// never shorter than the refill), and sends no faster than the quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_honouring_quota_hints_is_paced_without_refusals_after_a_wait() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[("topicQuotas", "Paced=20/s")]).await?;
    let mut config = Config::new(loopback(broker.remoting_addr()));
    config.topic = "Paced".into();
    config.queues = 1;
    config.warmup = Duration::ZERO;
    config.duration = Duration::from_secs(2);
    config.body_bytes = 10;
    config.progress = false;
    config.honour_retry_after = true;
    let report = tokio::time::timeout(Duration::from_secs(20), run::closed_loop(&config, 1))
        .await
        .context("the closed loop stops by itself")??;
    assert!(report.hint_waits > 0, "{}", Table(&report));
    assert_eq!(report.refused_after_hint, 0, "{}", Table(&report));
    assert_eq!(report.failed_total, report.hint_waits, "{}", Table(&report));
    // The one-second burst, then 20 a second.
    assert!(report.ok <= 20 + 2 * 20 + 1, "{}", Table(&report));
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_both_benchmarks_reach_a_broker_that_enforces_it() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])?;
    let (crt, key) = (dir.path().join("broker.crt"), dir.path().join("broker.key"));
    std::fs::write(&crt, cert.cert.pem())?;
    std::fs::write(&key, cert.key_pair.serialize_pem())?;
    let (crt_text, key_text) = (crt.display().to_string(), key.display().to_string());
    let broker = start_broker(
        &dir.path().join("store"),
        &[
            ("tlsServerMode", "enforcing"),
            ("tlsServerCertPath", crt_text.as_str()),
            ("tlsServerKeyPath", key_text.as_str()),
        ],
    )
    .await?;
    let namesrv = loopback(broker.namesrv_addr().context("embedded name server")?);

    let mut config = Config::new(loopback(broker.remoting_addr()));
    config.topic = "BenchTlsTopic".into();
    config.queues = 4;
    config.warmup = Duration::from_millis(100);
    config.duration = Duration::from_millis(300);
    config.body_bytes = 100;
    config.progress = false;
    config.tls = true;
    config.tls_trust = Some(crt.clone());
    let report = tokio::time::timeout(Duration::from_secs(10), run::closed_loop(&config, 4))
        .await
        .context("the closed loop stops by itself")??;
    assert!(report.ok > 0, "{}", Table(&report));
    assert_eq!(report.failed_total, 0, "{}", Table(&report));

    let consume_with = |tls: bool| ConsumeConfig {
        namesrv: namesrv.clone(),
        topic: "BenchTlsTopic".into(),
        group: CONSUMER_GROUP.into(),
        protocol: Protocol::Remoting,
        grpc: String::new(),
        receivers: 1,
        from: StartFrom::First,
        batch: 32,
        duration: Duration::from_secs(1),
        timeout: Duration::from_secs(3),
        progress: false,
        tls,
        tls_trust: tls.then(|| crt.clone()),
        credentials: None,
    };
    let consumed = tokio::time::timeout(Duration::from_secs(20), consume(&consume_with(true)))
        .await
        .context("the consumer stops by itself")??;
    assert!(consumed.messages >= report.ok, "{consumed}");
    // Without TLS the enforcing name server closes the connection.
    let plain = tokio::time::timeout(Duration::from_secs(20), consume(&consume_with(false)))
        .await
        .context("the consumer stops by itself")?;
    assert!(
        plain.is_err(),
        "a plain consumer read from an enforcing broker"
    );
    broker.shutdown().await;
    Ok(())
}
