//! The pull consumer: the application chooses queues and offsets and pulls.

use std::time::Duration;

use remoting_net::ClientOptions;

use crate::{
    api::{Api, PullSpec},
    ConsumerConfig, ConsumerError, MessageExt, MessageQueue,
};

/// What a pull found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PullStatus {
    /// Messages were found (`SUCCESS`).
    Found,
    /// Nothing at or after the offset yet (`PULL_NOT_FOUND`).
    NoNewMsg,
    /// Messages exist but none matches the tag expression
    /// (`PULL_RETRY_IMMEDIATELY`); continue from `next_begin_offset`.
    NoMatchedMsg,
    /// The offset is outside the queue (`PULL_OFFSET_MOVED`); continue from
    /// `next_begin_offset`.
    OffsetIllegal,
}

/// The answer to a pull.
#[derive(Debug, Clone)]
pub struct PullResult {
    /// What was found.
    pub status: PullStatus,
    /// Where the next pull starts.
    pub next_begin_offset: u64,
    /// The queue's first offset.
    pub min_offset: u64,
    /// The queue's end offset (one past its last message).
    pub max_offset: u64,
    /// The messages, in queue order; empty unless `status` is `Found`.
    pub messages: Vec<MessageExt>,
}

/// Optional parts of a pull.
#[derive(Debug, Clone)]
pub struct PullOptions {
    /// Tag expression: `*` or `TagA || TagB`. Default `*`.
    pub expression: String,
    /// Long polling: let the broker hold a pull that finds nothing this long
    /// and answer as soon as a message arrives. Default none.
    pub suspend: Option<Duration>,
}

impl Default for PullOptions {
    fn default() -> Self {
        Self {
            expression: "*".to_owned(),
            suspend: None,
        }
    }
}

/// A pull consumer: route lookups, pulls and committed offsets of one group.
///
/// Keeps no state of its own beyond connections and broker addresses: the
/// application tracks offsets and commits them when it is done with them.
#[derive(Debug)]
pub struct PullConsumer {
    config: ConsumerConfig,
    api: Api,
}

impl PullConsumer {
    /// Checks the configuration and starts a consumer; connections are made
    /// on first use.
    ///
    /// # Errors
    /// [`ConsumerError::Config`].
    pub async fn start(config: ConsumerConfig) -> Result<Self, ConsumerError> {
        config.validate()?;
        let options = ClientOptions {
            credentials: config.credentials()?,
            tls: config.tls()?,
            ..ClientOptions::default()
        };
        let api = Api::with_options(
            config.namesrv_addr.clone(),
            config.mq_client_api_timeout,
            options,
        );
        Ok(Self { config, api })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    /// The topic's readable queues on brokers with a master, sorted; also
    /// learns the brokers' addresses, which every other call needs.
    ///
    /// # Errors
    /// [`ConsumerError::NoRoute`] when no name server knows the topic.
    pub async fn fetch_queues(&self, topic: &str) -> Result<Vec<MessageQueue>, ConsumerError> {
        self.api.topic_queues(topic).await
    }

    /// Pulls up to `max` messages of every tag from `offset`, without waiting.
    ///
    /// # Errors
    /// [`ConsumerError`] when the broker is unknown, unreachable or refuses.
    pub async fn pull(
        &self,
        queue: &MessageQueue,
        offset: u64,
        max: u32,
    ) -> Result<PullResult, ConsumerError> {
        self.pull_with(queue, offset, max, &PullOptions::default())
            .await
    }

    /// Pulls with a tag expression and, optionally, long polling.
    ///
    /// # Errors
    /// As [`PullConsumer::pull`].
    pub async fn pull_with(
        &self,
        queue: &MessageQueue,
        offset: u64,
        max: u32,
        options: &PullOptions,
    ) -> Result<PullResult, ConsumerError> {
        let timeout = match options.suspend {
            Some(s) => {
                s + self
                    .config
                    .mq_client_api_timeout
                    .max(Duration::from_secs(5))
            }
            None => self.config.mq_client_api_timeout,
        };
        let spec = PullSpec {
            group: &self.config.consumer_group,
            offset,
            max,
            expression: &options.expression,
            suspend: options.suspend,
            commit_offset: None,
            timeout,
        };
        self.api.pull(queue, &spec).await
    }

    /// The group's committed offset of the queue; `None` if it has none.
    ///
    /// # Errors
    /// [`ConsumerError`] when the broker is unknown or unreachable.
    pub async fn fetch_consume_offset(
        &self,
        queue: &MessageQueue,
    ) -> Result<Option<u64>, ConsumerError> {
        self.api
            .query_offset(&self.config.consumer_group, queue)
            .await
    }

    /// Commits the group's offset of the queue: the offset of the first
    /// message not yet consumed, and waits for the broker to take it.
    ///
    /// # Errors
    /// [`ConsumerError`] when the broker is unknown, unreachable or refuses.
    pub async fn commit_offset(
        &self,
        queue: &MessageQueue,
        offset: u64,
    ) -> Result<(), ConsumerError> {
        self.api
            .update_offset(&self.config.consumer_group, queue, offset, true)
            .await
    }

    /// The queue's end offset: one past its last message.
    ///
    /// # Errors
    /// [`ConsumerError`] when the broker is unknown or unreachable.
    pub async fn max_offset(&self, queue: &MessageQueue) -> Result<u64, ConsumerError> {
        self.api.queue_offset(queue, true).await
    }

    /// The queue's first offset.
    ///
    /// # Errors
    /// [`ConsumerError`] when the broker is unknown or unreachable.
    pub async fn min_offset(&self, queue: &MessageQueue) -> Result<u64, ConsumerError> {
        self.api.queue_offset(queue, false).await
    }

    /// Closes every connection.
    pub async fn shutdown(&self) {
        self.api.close().await;
    }
}
