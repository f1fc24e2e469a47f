//! `sluice-bench drain` against a real broker in-process (with its embedded
//! name server): a fill creates the topic and stores exactly the messages
//! asked for, and a read of a fresh group drains exactly those; a read asked
//! for more than the topic holds fails, saying how many came.

use std::time::Duration;

use anyhow::{Context, Result};
use bench::drain::{
    drain, read, DrainConfig, Phase, SluiceTarget, System, Target, DEFAULT_FILL_BATCH,
};
use broker_server::testing::{loopback, start_broker};

fn config(namesrv: &str, phase: Phase, messages: u64, timeout: Duration) -> DrainConfig {
    DrainConfig {
        target: Target::Sluice(SluiceTarget {
            namesrv: namesrv.to_owned(),
            broker: None,
            topic: "DrainTestTopic".into(),
            queues: 4,
            fill_batch: DEFAULT_FILL_BATCH,
            pull_batch: None,
            consume_threads: None,
            consume_batch: None,
            credentials: None,
        }),
        phase,
        messages,
        body_bytes: 100,
        in_flight: 16,
        timeout,
        progress: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filled_topic_drains_exactly_what_was_put_in() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let broker = start_broker(dir.path(), &[]).await?;
    let namesrv = loopback(broker.namesrv_addr().context("embedded name server")?);

    let both = config(&namesrv, Phase::Both, 2_000, Duration::from_secs(60));
    let reports = tokio::time::timeout(Duration::from_secs(120), drain(&both))
        .await
        .context("the drain stops by itself")??;
    assert_eq!(reports.len(), 2, "{reports:?}");
    let (fill, read_report) = (&reports[0], &reports[1]);
    assert_eq!((fill.system, fill.phase), (System::Sluice, Phase::Fill));
    assert_eq!((fill.messages, fill.bytes), (2_000, 200_000), "{fill}");
    assert_eq!(read_report.phase, Phase::Read);
    assert_eq!(
        (read_report.messages, read_report.bytes),
        (2_000, 200_000),
        "{read_report}"
    );
    assert!(read_report.first_message_seconds.is_some());

    // A second read, of another fresh group, sees the same backlog, and
    // nothing more: asking for one message more runs out of time.
    let more = config(&namesrv, Phase::Read, 2_001, Duration::from_secs(3));
    let outcome = tokio::time::timeout(Duration::from_secs(60), read(&more))
        .await
        .context("the read stops by itself")?;
    let error = format!("{:#}", outcome.err().context("a read of 2001 succeeded")?);
    assert!(error.contains("of 2001 messages arrived"), "{error}");
    broker.shutdown().await;
    Ok(())
}
