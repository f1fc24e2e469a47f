//! Helpers for the consumer tests: an in-process broker (with its embedded
//! name server) on free loopback ports, topics, producers and a recording
//! handler.
#![allow(dead_code, clippy::unwrap_used)]

use std::{
    future::Future,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use broker_server::{testing, Broker};
use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, MessageExt, MessageHandler, PullConsumer,
};
use producer_client::{Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{CreateTopicRequestHeader, TopicFilterType},
    RemotingCommand, RequestCode, ResponseCode,
};

/// A running broker.
pub struct TestBroker {
    pub broker: Broker,
    pub addr: String,
    pub namesrv: String,
}

impl TestBroker {
    /// Starts a broker storing under `dir`.
    pub async fn start(dir: &Path) -> Self {
        Self::start_with(dir, &[]).await
    }

    /// Starts a broker storing under `dir`, with `key=value` overrides.
    pub async fn start_with(dir: &Path, extra: &[(&str, &str)]) -> Self {
        let files = (64 * 1024 * 1024).to_string();
        let queue_files = (100_000 * 20).to_string();
        let mut overrides = vec![
            ("mappedFileSizeCommitLog", files.as_str()),
            ("mappedFileSizeConsumeQueue", queue_files.as_str()),
        ];
        overrides.extend_from_slice(extra);
        let broker = testing::start_broker(dir, &overrides).await.unwrap();
        Self {
            addr: testing::loopback(broker.remoting_addr()),
            namesrv: testing::loopback(broker.namesrv_addr().unwrap()),
            broker,
        }
    }

    /// Creates `topic` with `queues` read and write queues and waits until
    /// the name server routes all of them.
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        let client = RemotingClient::new(ClientOptions::default());
        let req = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: "TBW102".into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: 6,
                topic_filter_type: TopicFilterType::SingleTag,
                order: false,
                ..CreateTopicRequestHeader::default()
            },
        );
        let resp = client
            .invoke(&self.addr, req, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
        let pull = PullConsumer::start(ConsumerConfig::new(&self.namesrv, "route-probe"))
            .await
            .unwrap();
        wait_for(Duration::from_secs(10), || async {
            pull.fetch_queues(topic)
                .await
                .is_ok_and(|q| q.len() == usize::try_from(queues).unwrap())
        })
        .await;
    }

    pub async fn producer(&self) -> Producer {
        Producer::start(ProducerConfig::with_namesrv(&self.namesrv))
            .await
            .unwrap()
    }

    /// A push or pull consumer configuration for `group` that starts new
    /// queues at their first message and reacts quickly.
    pub fn consumer_config(&self, group: &str) -> ConsumerConfig {
        ConsumerConfig {
            consume_from_where: ConsumeFromWhere::FirstOffset,
            membership_check_interval: Duration::from_millis(200),
            persist_consumer_offset_interval: Duration::from_millis(500),
            pull_time_delay_when_exception: Duration::from_millis(200),
            retry_backoff: Duration::from_millis(100),
            ..ConsumerConfig::new(&self.namesrv, group)
        }
    }
}

/// Polls `check` every 50 ms until it holds; panics after `limit`.
pub async fn wait_for<F, Fut>(limit: Duration, check: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(
            start.elapsed() < limit,
            "condition not met within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A handler that records every message it accepts, optionally slowly.
#[derive(Clone, Default)]
pub struct Recorder {
    pub seen: Arc<Mutex<Vec<(MessageExt, Instant)>>>,
    pub delay: Duration,
}

impl Recorder {
    pub fn slow(delay: Duration) -> Self {
        Self {
            delay,
            ..Self::default()
        }
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    pub fn ids(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.msg_id.clone())
            .collect()
    }
}

impl MessageHandler for Recorder {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let seen = Arc::clone(&self.seen);
        let delay = self.delay;
        let batch = messages.to_vec();
        async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let now = Instant::now();
            seen.lock()
                .unwrap()
                .extend(batch.into_iter().map(|m| (m, now)));
            ConsumeStatus::Success
        }
    }
}
