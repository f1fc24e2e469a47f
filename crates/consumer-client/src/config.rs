//! Consumer settings, with RocketMQ's defaults.

use std::time::Duration;

use crate::ConsumerError;

/// Where a group with no committed offset for a queue starts reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ConsumeFromWhere {
    /// The queue's end: only messages sent from now on
    /// (`CONSUME_FROM_LAST_OFFSET`, RocketMQ's default).
    #[default]
    LastOffset,
    /// The queue's first stored message (`CONSUME_FROM_FIRST_OFFSET`).
    FirstOffset,
}

impl ConsumeFromWhere {
    /// RocketMQ's name, as sent in heartbeats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LastOffset => "CONSUME_FROM_LAST_OFFSET",
            Self::FirstOffset => "CONSUME_FROM_FIRST_OFFSET",
        }
    }
}

/// Settings of a pull or push consumer.
///
/// Durations are named after RocketMQ's `DefaultMQPushConsumer` fields; the
/// defaults are RocketMQ's unless a field says otherwise.
#[derive(Debug, Clone)]
pub struct ConsumerConfig {
    /// Name server addresses (`host:port`); at least one.
    pub namesrv_addr: Vec<String>,
    /// Consumer group; required.
    pub consumer_group: String,
    /// Instance name, part of the client id (`ip@instance`). Default: the
    /// process id and a per-process counter, so two consumers of one process
    /// get distinct ids.
    pub instance_name: Option<String>,
    /// Messages asked for per pull. Default 32, range 1..=1024.
    pub pull_batch_size: u32,
    /// Messages handed to the handler per call. Default 1 (RocketMQ's
    /// `consumeMessageBatchMaxSize`), range 1..=1024.
    pub consume_batch_max_size: usize,
    /// Cached messages per queue above which pulling pauses. Default 1000.
    pub pull_threshold_for_queue: usize,
    /// Cached body bytes per queue above which pulling pauses. Default 100 MiB.
    pub pull_threshold_size_for_queue_bytes: u64,
    /// Handler calls running at once (`consumeThreadMax`). Default 20.
    pub consume_thread_max: usize,
    /// How long the broker may hold a pull that finds nothing. Default 15 s.
    pub suspend_timeout: Duration,
    /// RPC timeout of a long-polling pull; must exceed `suspend_timeout`.
    /// Default 30 s.
    pub pull_timeout: Duration,
    /// RPC timeout of every other request. Default 3 s.
    pub api_timeout: Duration,
    /// How often consumed offsets are sent to the brokers. Default 5 s.
    pub persist_offset_interval: Duration,
    /// How often queues are reassigned unconditionally. Default 20 s.
    pub rebalance_interval: Duration,
    /// How often the group's member list is checked; a change triggers a
    /// rebalance at once. Default 1 s (RocketMQ is told by the broker with
    /// `NOTIFY_CONSUMER_IDS_CHANGED` instead; this client ignores server
    /// requests, so it polls).
    pub membership_check_interval: Duration,
    /// How often heartbeats are sent. Default 30 s.
    pub heartbeat_interval: Duration,
    /// Where a queue with no committed offset starts. Default last offset.
    pub consume_from_where: ConsumeFromWhere,
    /// Wait before a batch the handler asked to retry is handed to it again.
    /// Default 1 s (RocketMQ's first retry delay level is 10 s, via the
    /// broker; see the crate docs).
    pub retry_backoff: Duration,
    /// Pause of a queue's pulling while its cache is over a threshold.
    /// Default 50 ms.
    pub flow_control_pause: Duration,
    /// Wait after a failed pull. Default 3 s.
    pub pull_error_delay: Duration,
    /// How long `shutdown` waits for running handlers. Default 10 s.
    pub shutdown_timeout: Duration,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            namesrv_addr: vec!["127.0.0.1:9876".to_owned()],
            consumer_group: String::new(),
            instance_name: None,
            pull_batch_size: 32,
            consume_batch_max_size: 1,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue_bytes: 100 * 1024 * 1024,
            consume_thread_max: 20,
            suspend_timeout: Duration::from_secs(15),
            pull_timeout: Duration::from_secs(30),
            api_timeout: Duration::from_secs(3),
            persist_offset_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            membership_check_interval: Duration::from_secs(1),
            heartbeat_interval: Duration::from_secs(30),
            consume_from_where: ConsumeFromWhere::LastOffset,
            retry_backoff: Duration::from_secs(1),
            flow_control_pause: Duration::from_millis(50),
            pull_error_delay: Duration::from_secs(3),
            shutdown_timeout: Duration::from_secs(10),
        }
    }
}

impl ConsumerConfig {
    /// A default configuration for `group` using the given name servers
    /// (`;`- or `,`-separated).
    pub fn new(namesrv_addrs: &str, group: impl Into<String>) -> Self {
        Self {
            namesrv_addr: namesrv_addrs
                .split([';', ','])
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            consumer_group: group.into(),
            ..Self::default()
        }
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ConsumerError::Config`] naming the key.
    pub fn validate(&self) -> Result<(), ConsumerError> {
        let fail = |key, reason: &str| {
            Err(ConsumerError::Config {
                key,
                reason: reason.to_owned(),
            })
        };
        if self.namesrv_addr.is_empty() {
            return fail("namesrvAddr", "at least one name server is needed");
        }
        if self.consumer_group.trim().is_empty() {
            return fail("consumerGroup", "must not be empty");
        }
        if !(1..=1024).contains(&self.pull_batch_size) {
            return fail("pullBatchSize", "must be in 1..=1024");
        }
        if !(1..=1024).contains(&self.consume_batch_max_size) {
            return fail("consumeMessageBatchMaxSize", "must be in 1..=1024");
        }
        if self.pull_threshold_for_queue == 0 {
            return fail("pullThresholdForQueue", "must be at least 1");
        }
        if self.pull_threshold_size_for_queue_bytes == 0 {
            return fail("pullThresholdSizeForQueue", "must be at least 1 byte");
        }
        if self.consume_thread_max == 0 {
            return fail("consumeThreadMax", "must be at least 1");
        }
        if self.pull_timeout <= self.suspend_timeout {
            return fail(
                "consumerPullTimeoutMillis",
                "must exceed brokerSuspendMaxTimeMillis",
            );
        }
        let intervals = [
            (
                "persistConsumerOffsetInterval",
                self.persist_offset_interval,
            ),
            ("rebalanceInterval", self.rebalance_interval),
            ("membershipCheckInterval", self.membership_check_interval),
            ("heartbeatBrokerInterval", self.heartbeat_interval),
        ];
        for (key, d) in intervals {
            if d.is_zero() {
                return fail(key, "must be positive");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_rocketmq() {
        let c = ConsumerConfig::new("a:1;b:2", "G");
        assert_eq!(c.namesrv_addr, ["a:1", "b:2"]);
        assert!(c.validate().is_ok());
        assert_eq!(c.pull_batch_size, 32);
        assert_eq!(c.pull_threshold_for_queue, 1000);
        assert_eq!(c.suspend_timeout, Duration::from_secs(15));
    }

    #[test]
    fn an_empty_group_is_refused_by_key() {
        let err = ConsumerConfig::new("a:1", " ").validate();
        assert!(matches!(
            err,
            Err(ConsumerError::Config {
                key: "consumerGroup",
                ..
            })
        ));
    }

    #[test]
    fn a_pull_timeout_below_the_suspend_timeout_is_refused() {
        let c = ConsumerConfig {
            pull_timeout: Duration::from_secs(1),
            ..ConsumerConfig::new("a:1", "G")
        };
        assert!(c.validate().is_err());
    }
}
