//! The flow-control configuration section.
//!
//! Keys keep RocketMQ's `broker.conf` names (including its `Mills`
//! spelling) so that an operator's existing file translates line by line;
//! Sluice's own keys follow the same style. Every field documents its default
//! and valid range; [`FlowControlConfig::validate`] checks them and names the
//! key.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// The longest queue wait limit accepted, in ms (one hour).
const MAX_WAIT_MILLS: u64 = 3_600_000;

/// The largest queue capacity accepted (Java's `int` bound).
const MAX_CAPACITY: usize = i32::MAX as usize;

/// A configuration value outside its valid range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid value {value} for `{key}`: {allowed}")]
pub struct ConfigError {
    /// The key, as written in a configuration file.
    pub key: &'static str,
    /// The offending value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

/// Configuration of admission, queue limits and the fast-failure sweeper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct FlowControlConfig {
    /// Run the fast-failure sweeper (page-cache-busy drain and queue expiry).
    /// Default true.
    pub broker_fast_failure_enable: bool,
    /// Longest wait of a send request in its queue, in ms. Default 200;
    /// 1..=3600000.
    pub wait_time_mills_in_send_queue: u64,
    /// Longest wait of a pull request in its queue, in ms. Default 5000;
    /// 1..=3600000.
    pub wait_time_mills_in_pull_queue: u64,
    /// Longest wait of a lite-pull request in its queue, in ms. Default 5000;
    /// 1..=3600000.
    pub wait_time_mills_in_lite_pull_queue: u64,
    /// Longest wait of a heartbeat in its queue, in ms. Default 31000;
    /// 1..=3600000.
    pub wait_time_mills_in_heartbeat_queue: u64,
    /// Longest wait of an end-transaction request in its queue, in ms.
    /// Default 3000; 1..=3600000.
    pub wait_time_mills_in_transaction_queue: u64,
    /// Longest wait of an ack request in its queue, in ms. Default 3000;
    /// 1..=3600000.
    pub wait_time_mills_in_ack_queue: u64,
    /// Longest wait of an admin request in its queue, in ms. Default 5000;
    /// 1..=3600000.
    pub wait_time_mills_in_admin_broker_queue: u64,
    /// Capacity of the send queue. Default 10000; 1..=2147483647.
    pub send_thread_pool_queue_capacity: usize,
    /// Capacity of the pull queue. Default 100000; 1..=2147483647.
    pub pull_thread_pool_queue_capacity: usize,
    /// Capacity of the heartbeat queue. Default 50000; 1..=2147483647.
    pub heartbeat_thread_pool_queue_capacity: usize,
    /// Capacity of the admin queue. Default 10000; 1..=2147483647.
    pub admin_broker_thread_pool_queue_capacity: usize,
    /// Capacity of the client-manage queue. Default 1000000; 1..=2147483647.
    pub client_manager_thread_pool_queue_capacity: usize,
    /// Capacity of the consumer-manage queue. Default 1000000;
    /// 1..=2147483647.
    pub consumer_manager_thread_pool_queue_capacity: usize,
    /// Sluice: most bytes (bodies and headers) of the requests waiting in
    /// each request queue; past it a request is refused `[OVERLOAD]` with
    /// the figures. A request alone in its queue is always taken. Default
    /// 268435456 (256 MiB); at least 1048576.
    pub request_queue_capacity_bytes: usize,
    /// Sluice: refuse a request at once when its predicted queue wait already
    /// exceeds the queue's limit, instead of letting it time out there.
    /// Default true.
    pub early_admission_enable: bool,
    /// Sluice: add a suggested back-off to busy answers, which RocketMQ
    /// clients ignore and Sluice's client honours. Default true.
    pub busy_retry_hint_enable: bool,
    /// Sluice: per-topic send quotas, `topic=limit[,limit]` entries
    /// separated by `;`, a limit being `N/s` (messages) or `N B/s`,
    /// `N KiB/s`, `N MiB/s` (bytes), as [`crate::parse_quotas`] reads them.
    /// A send over its topic's quota is refused at once `[QUOTA]` with
    /// when to come back. Default empty (no quotas).
    pub topic_quotas: String,
}

impl Default for FlowControlConfig {
    fn default() -> Self {
        Self {
            broker_fast_failure_enable: true,
            wait_time_mills_in_send_queue: 200,
            wait_time_mills_in_pull_queue: 5000,
            wait_time_mills_in_lite_pull_queue: 5000,
            wait_time_mills_in_heartbeat_queue: 31_000,
            wait_time_mills_in_transaction_queue: 3000,
            wait_time_mills_in_ack_queue: 3000,
            wait_time_mills_in_admin_broker_queue: 5000,
            send_thread_pool_queue_capacity: 10_000,
            pull_thread_pool_queue_capacity: 100_000,
            heartbeat_thread_pool_queue_capacity: 50_000,
            admin_broker_thread_pool_queue_capacity: 10_000,
            client_manager_thread_pool_queue_capacity: 1_000_000,
            consumer_manager_thread_pool_queue_capacity: 1_000_000,
            request_queue_capacity_bytes: 256 << 20,
            early_admission_enable: true,
            busy_retry_hint_enable: true,
            topic_quotas: String::new(),
        }
    }
}

impl FlowControlConfig {
    /// Checks every value.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first key whose value is not allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, value) in [
            (
                "waitTimeMillsInSendQueue",
                self.wait_time_mills_in_send_queue,
            ),
            (
                "waitTimeMillsInPullQueue",
                self.wait_time_mills_in_pull_queue,
            ),
            (
                "waitTimeMillsInLitePullQueue",
                self.wait_time_mills_in_lite_pull_queue,
            ),
            (
                "waitTimeMillsInHeartbeatQueue",
                self.wait_time_mills_in_heartbeat_queue,
            ),
            (
                "waitTimeMillsInTransactionQueue",
                self.wait_time_mills_in_transaction_queue,
            ),
            ("waitTimeMillsInAckQueue", self.wait_time_mills_in_ack_queue),
            (
                "waitTimeMillsInAdminBrokerQueue",
                self.wait_time_mills_in_admin_broker_queue,
            ),
        ] {
            range(key, value, 1, MAX_WAIT_MILLS)?;
        }
        for (key, value) in [
            (
                "sendThreadPoolQueueCapacity",
                self.send_thread_pool_queue_capacity,
            ),
            (
                "pullThreadPoolQueueCapacity",
                self.pull_thread_pool_queue_capacity,
            ),
            (
                "heartbeatThreadPoolQueueCapacity",
                self.heartbeat_thread_pool_queue_capacity,
            ),
            (
                "adminBrokerThreadPoolQueueCapacity",
                self.admin_broker_thread_pool_queue_capacity,
            ),
            (
                "clientManagerThreadPoolQueueCapacity",
                self.client_manager_thread_pool_queue_capacity,
            ),
            (
                "consumerManagerThreadPoolQueueCapacity",
                self.consumer_manager_thread_pool_queue_capacity,
            ),
        ] {
            range(key, value, 1, MAX_CAPACITY)?;
        }
        range(
            "requestQueueCapacityBytes",
            self.request_queue_capacity_bytes,
            1 << 20,
            usize::MAX,
        )?;
        crate::parse_quotas(&self.topic_quotas).map_err(|why| ConfigError {
            key: "topicQuotas",
            value: self.topic_quotas.clone(),
            allowed: format!(
                "topic=limit[,limit] entries separated by `;`, limits N/s, N B/s, N KiB/s or \
                 N MiB/s ({why})"
            ),
        })?;
        Ok(())
    }

    /// The per-topic quotas of `topicQuotas` (valid once
    /// [`FlowControlConfig::validate`] passed; empty otherwise).
    pub fn topic_quota_list(&self) -> Vec<(String, crate::Quota)> {
        crate::parse_quotas(&self.topic_quotas).unwrap_or_default()
    }
}

fn range<T>(key: &'static str, value: T, min: T, max: T) -> Result<(), ConfigError>
where
    T: PartialOrd + std::fmt::Display,
{
    if value < min || value > max {
        return Err(ConfigError {
            key,
            value: value.to_string(),
            allowed: format!("{min}..={max}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmq_defaults_and_valid() {
        let c = FlowControlConfig::default();
        assert!(c.broker_fast_failure_enable);
        assert_eq!(c.wait_time_mills_in_send_queue, 200);
        assert_eq!(c.wait_time_mills_in_pull_queue, 5000);
        assert_eq!(c.wait_time_mills_in_lite_pull_queue, 5000);
        assert_eq!(c.wait_time_mills_in_heartbeat_queue, 31_000);
        assert_eq!(c.wait_time_mills_in_transaction_queue, 3000);
        assert_eq!(c.wait_time_mills_in_ack_queue, 3000);
        assert_eq!(c.wait_time_mills_in_admin_broker_queue, 5000);
        assert_eq!(c.send_thread_pool_queue_capacity, 10_000);
        assert_eq!(c.pull_thread_pool_queue_capacity, 100_000);
        assert_eq!(c.heartbeat_thread_pool_queue_capacity, 50_000);
        assert_eq!(c.admin_broker_thread_pool_queue_capacity, 10_000);
        assert_eq!(c.client_manager_thread_pool_queue_capacity, 1_000_000);
        assert_eq!(c.consumer_manager_thread_pool_queue_capacity, 1_000_000);
        assert!(c.early_admission_enable);
        assert!(c.busy_retry_hint_enable);
        c.validate().unwrap();
    }

    #[test]
    fn keys_use_rocketmq_names() {
        let json = serde_json::to_value(FlowControlConfig::default()).unwrap();
        let mut keys: Vec<_> = json.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "adminBrokerThreadPoolQueueCapacity",
                "brokerFastFailureEnable",
                "busyRetryHintEnable",
                "clientManagerThreadPoolQueueCapacity",
                "consumerManagerThreadPoolQueueCapacity",
                "earlyAdmissionEnable",
                "heartbeatThreadPoolQueueCapacity",
                "pullThreadPoolQueueCapacity",
                "requestQueueCapacityBytes",
                "sendThreadPoolQueueCapacity",
                "topicQuotas",
                "waitTimeMillsInAckQueue",
                "waitTimeMillsInAdminBrokerQueue",
                "waitTimeMillsInHeartbeatQueue",
                "waitTimeMillsInLitePullQueue",
                "waitTimeMillsInPullQueue",
                "waitTimeMillsInSendQueue",
                "waitTimeMillsInTransactionQueue",
            ]
        );
    }

    #[test]
    fn a_partial_file_keeps_defaults_for_the_rest() {
        let c: FlowControlConfig = serde_json::from_str(
            r#"{"waitTimeMillsInSendQueue":500,"brokerFastFailureEnable":false,"earlyAdmissionEnable":false}"#,
        )
        .unwrap();
        assert_eq!(c.wait_time_mills_in_send_queue, 500);
        assert!(!c.broker_fast_failure_enable);
        assert!(!c.early_admission_enable);
        assert_eq!(c.send_thread_pool_queue_capacity, 10_000);
    }

    #[test]
    fn unknown_keys_are_refused() {
        let err = serde_json::from_str::<FlowControlConfig>(r#"{"waitTimeMillsInSendQueu":500}"#)
            .unwrap_err();
        assert!(err.to_string().contains("waitTimeMillsInSendQueu"), "{err}");
    }

    #[test]
    fn validation_names_the_key_the_value_and_the_range() {
        let c = FlowControlConfig {
            wait_time_mills_in_send_queue: 0,
            ..FlowControlConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "waitTimeMillsInSendQueue");
        assert_eq!(
            err.to_string(),
            "invalid value 0 for `waitTimeMillsInSendQueue`: 1..=3600000"
        );
        let c = FlowControlConfig {
            pull_thread_pool_queue_capacity: 0,
            ..FlowControlConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "pullThreadPoolQueueCapacity");
        assert!(err.to_string().contains("1..=2147483647"), "{err}");
        let c = FlowControlConfig {
            wait_time_mills_in_heartbeat_queue: 3_600_001,
            ..FlowControlConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err().key,
            "waitTimeMillsInHeartbeatQueue"
        );
        let c = FlowControlConfig {
            topic_quotas: "Orders=500/min".into(),
            ..FlowControlConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "topicQuotas");
        assert!(err.to_string().contains("the unit must be"), "{err}");
    }
}
