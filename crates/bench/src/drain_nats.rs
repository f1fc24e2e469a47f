//! The NATS JetStream side of `sluice-bench drain` ([`crate::drain`]).
//!
//! - Fill: the stream (file storage, the subject only) is deleted if it
//!   exists and created again, so that it holds exactly this fill. Publishes
//!   go out back to back with up to `in_flight` acknowledgements (`PubAck`)
//!   not yet awaited, which are awaited oldest first; a failed or missing
//!   acknowledgement ends the fill with an error. At the end the stream must
//!   hold exactly the messages published.
//! - Read: an ephemeral pull consumer with `DeliverPolicy::All` and
//!   `AckPolicy::None`. Messages are not acknowledged one by one, as the
//!   push consumer commits its offsets only periodically. It reads through
//!   the client's pull stream (`Consumer::stream`), which keeps pull
//!   requests of `pull_batch` messages going ahead of the reader.

use std::{
    collections::VecDeque,
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use anyhow::{bail, ensure, Context as _, Result};
use async_nats::{
    jetstream::{
        self,
        consumer::{pull, AckPolicy, DeliverPolicy},
        context::DeleteStreamErrorKind,
        stream::StorageType,
        ErrorCode,
    },
    Subject,
};
use bytes::Bytes;
use tokio::time::Instant;
use tokio_stream::StreamExt as _;

use crate::drain::{fill_timeout, Counter, DrainConfig, Measured};

/// Messages per pull request of a NATS read unless set.
pub const DEFAULT_NATS_PULL_BATCH: u32 = 1000;

/// Timeout of JetStream API requests and of each publish acknowledgement.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long the server keeps the ephemeral consumer once nobody reads.
const CONSUMER_INACTIVE: Duration = Duration::from_secs(30);

/// Where a NATS drain run goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NatsTarget {
    /// Server address (`host:port`).
    pub server: String,
    /// JetStream stream filled (made afresh) and read.
    pub stream: String,
    /// Subject published to and read.
    pub subject: String,
    /// Messages per pull request of a read. At least 1.
    pub pull_batch: u32,
}

impl NatsTarget {
    /// Checks the settings.
    ///
    /// # Errors
    /// A message naming the first setting out of range.
    pub fn validate(&self) -> Result<()> {
        ensure!(!self.server.is_empty(), "server must not be empty");
        ensure!(
            is_stream_name(&self.stream),
            "stream must be a name without spaces, '.', '*', '>', '/' or '\\', got {:?}",
            self.stream
        );
        ensure!(!self.subject.is_empty(), "subject must not be empty");
        ensure!(self.pull_batch >= 1, "pull-batch must be at least 1");
        Ok(())
    }
}

/// Whether JetStream accepts `name` as a stream name.
pub fn is_stream_name(name: &str) -> bool {
    !name.is_empty()
        && !name
            .chars()
            .any(|c| c.is_whitespace() || matches!(c, '.' | '*' | '>' | '/' | '\\'))
}

async fn connect(t: &NatsTarget, max_ack_inflight: usize) -> Result<jetstream::Context> {
    let url = format!("nats://{}", t.server);
    let client = async_nats::connect(&url)
        .await
        .with_context(|| format!("connect to {url}"))?;
    Ok(jetstream::ContextBuilder::new()
        .timeout(REQUEST_TIMEOUT)
        // Above what the fill leaves unawaited, so a publish never waits for
        // a permit that only an unawaited acknowledgement would give back.
        .max_ack_inflight(max_ack_inflight)
        .build(client))
}

/// Deletes the stream if it exists and creates it again, empty.
async fn recreate_stream(js: &jetstream::Context, t: &NatsTarget) -> Result<()> {
    match js.delete_stream(&t.stream).await {
        Ok(_) => {}
        Err(e) if matches!(e.kind(), DeleteStreamErrorKind::JetStream(ref j) if j.error_code() == ErrorCode::STREAM_NOT_FOUND) =>
            {}
        Err(e) => return Err(e).with_context(|| format!("delete the stream {}", t.stream)),
    }
    js.create_stream(jetstream::stream::Config {
        name: t.stream.clone(),
        subjects: vec![t.subject.clone()],
        storage: StorageType::File,
        ..Default::default()
    })
    .await
    .with_context(|| format!("create the stream {} on {}", t.stream, t.subject))?;
    Ok(())
}

/// The NATS fill: see the module docs.
pub(crate) async fn fill(
    t: &NatsTarget,
    config: &DrainConfig,
    stored: &AtomicU64,
    deadline: Instant,
) -> Result<Measured> {
    let in_flight = usize::try_from(config.in_flight).unwrap_or(usize::MAX);
    let js = connect(t, in_flight.saturating_add(1)).await?;
    recreate_stream(&js, t).await?;
    let subject = Subject::from(t.subject.as_str());
    let payload = Bytes::from(vec![b'x'; config.body_bytes]);
    let started = Instant::now();
    let publish_all = async {
        let mut pending = VecDeque::with_capacity(in_flight);
        for _ in 0..config.messages {
            if pending.len() >= in_flight {
                await_oldest(&mut pending, t, stored).await?;
            }
            let ack = js
                .publish(subject.clone(), payload.clone())
                .await
                .with_context(|| format!("publish to {}", t.subject))?;
            pending.push_back(ack);
        }
        while !pending.is_empty() {
            await_oldest(&mut pending, t, stored).await?;
        }
        Ok::<_, anyhow::Error>(())
    };
    let published = tokio::time::timeout_at(deadline, publish_all).await;
    let elapsed = started.elapsed();
    match published {
        Ok(published) => published?,
        Err(_) => return Err(fill_timeout(config, stored)),
    }
    let mut stream = js
        .get_stream(&t.stream)
        .await
        .with_context(|| format!("find the stream {}", t.stream))?;
    let held = stream
        .info()
        .await
        .with_context(|| format!("ask for the state of the stream {}", t.stream))?
        .state
        .messages;
    ensure!(
        held == config.messages,
        "the stream {} holds {held} messages after a fill of {}",
        t.stream,
        config.messages
    );
    let messages = stored.load(Ordering::Relaxed);
    Ok(Measured {
        messages,
        bytes: messages.saturating_mul(config.body_bytes as u64),
        elapsed,
        first_message: None,
        busy_answers: 0,
    })
}

/// Awaits the oldest unawaited acknowledgement and counts its message.
async fn await_oldest(
    pending: &mut VecDeque<jetstream::context::PublishAckFuture>,
    t: &NatsTarget,
    stored: &AtomicU64,
) -> Result<()> {
    if let Some(ack) = pending.pop_front() {
        ack.await.with_context(|| {
            format!(
                "the acknowledgement of a publish to {} (stream {}) after {} stored",
                t.subject,
                t.stream,
                stored.load(Ordering::Relaxed)
            )
        })?;
        stored.fetch_add(1, Ordering::Relaxed);
    }
    Ok(())
}

/// The NATS read: see the module docs.
pub(crate) async fn read(
    t: &NatsTarget,
    config: &DrainConfig,
    counter: &Counter,
    deadline: Instant,
) -> Result<()> {
    let js = connect(t, 1).await?;
    let stream = js
        .get_stream(&t.stream)
        .await
        .with_context(|| format!("find the stream {} (fill it first)", t.stream))?;
    let consumer = stream
        .create_consumer(pull::Config {
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::None,
            filter_subject: t.subject.clone(),
            inactive_threshold: CONSUMER_INACTIVE,
            ..Default::default()
        })
        .await
        .with_context(|| format!("create a pull consumer on the stream {}", t.stream))?;
    let outcome = async {
        let batch = usize::try_from(t.pull_batch).unwrap_or(usize::MAX);
        let mut messages = consumer
            .stream()
            .max_messages_per_batch(batch)
            .messages()
            .await
            .with_context(|| format!("start pulling from the stream {}", t.stream))?;
        let mut received = 0u64;
        while received < config.messages {
            let message = match tokio::time::timeout_at(deadline, messages.next()).await {
                Err(_) => {
                    let what = format!("stream {}, subject {}", t.stream, t.subject);
                    return Err(counter.shortfall(config, &what));
                }
                Ok(None) => bail!(
                    "the pull from the stream {} ended after {received} messages",
                    t.stream
                ),
                Ok(Some(message)) => {
                    message.with_context(|| format!("pull from the stream {}", t.stream))?
                }
            };
            received += 1;
            counter.add(1, message.payload.len() as u64);
        }
        Ok(())
    }
    .await;
    // Best effort: the server drops it anyway once it is inactive.
    let name = consumer.cached_info().name.clone();
    let _ = stream.delete_consumer(&name).await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> NatsTarget {
        NatsTarget {
            server: "127.0.0.1:4222".into(),
            stream: "DRAIN".into(),
            subject: "drain".into(),
            pull_batch: DEFAULT_NATS_PULL_BATCH,
        }
    }

    #[test]
    fn stream_names_without_separators_or_wildcards_are_taken() {
        assert!(is_stream_name("DRAIN"));
        assert!(is_stream_name("drain-1_x"));
        for bad in ["", "a.b", "a b", "a*", "a>", "a/b", "a\\b"] {
            assert!(!is_stream_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn settings_out_of_range_are_refused() {
        assert!(target().validate().is_ok());
        let mut t = target();
        t.pull_batch = 0;
        assert!(t.validate().is_err());
        let mut t = target();
        t.subject.clear();
        assert!(t.validate().is_err());
        let mut t = target();
        t.stream = "A.B".into();
        assert!(t.validate().is_err());
    }
}
