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
    /// Capacity of the end-transaction queue. Default 100000;
    /// 1..=2147483647.
    pub end_transaction_pool_queue_capacity: usize,
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
    /// Sluice: serve a send on the thread that read it (the connection's
    /// task) when the send queue is empty, a send worker is idle and the
    /// put lock is free, instead of handing it to that worker; its queue
    /// wait is zero. Default true.
    pub inline_serve_enable: bool,
    /// Sluice: sends are served on the reading thread only while the send
    /// queue's recent average service time is below this many microseconds
    /// (and once a worker has served one, so that it is known): a slower
    /// send would hold up that thread's other connections. Default 1000;
    /// 1..=1,000,000.
    pub inline_serve_max_micros: u64,
    /// Sluice: add a suggested back-off to busy answers, which RocketMQ
    /// clients ignore and Sluice's client honours. Default true.
    pub busy_retry_hint_enable: bool,
    /// Sluice: per-topic send quotas, `topic=limit[,limit]` entries
    /// separated by `;`, a limit being `N/s` (messages) or `N B/s`,
    /// `N KiB/s`, `N MiB/s` (bytes), as [`crate::parse_quotas`] reads them.
    /// A send over its topic's quota is refused at once `[QUOTA]` with
    /// when to come back. Default empty (no quotas).
    pub topic_quotas: String,
    /// Sluice: per-client send quotas, in the syntax of `topicQuotas`, keyed
    /// by client id (the id a client registered with on its connection;
    /// its address, `ip:port`, before it has). Checked after the topic's
    /// quota. Default empty (no quotas).
    pub client_quotas: String,
    /// Sluice: adaptive admission on the send queue ([`crate::sojourn`]):
    /// once requests have waited longer than `admissionTargetMills` for a
    /// whole `admissionIntervalMills`, a send that would wait longer than
    /// the target is refused at once, so the queue holds about the target's
    /// worth of work instead of the full wait limit. Off gives RocketMQ's
    /// behaviour. Default true.
    pub adaptive_admission_enable: bool,
    /// Sluice: the queue wait adaptive admission keeps the send queue near,
    /// in ms. Default 5; 1..=10000.
    pub admission_target_mills: u64,
    /// Sluice: how long waits must stay above the target before adaptive
    /// admission sheds, and how long shedding lasts after the last long
    /// wait, in ms. Default 50; 1..=60000.
    pub admission_interval_mills: u64,
    /// Sluice: what the send queue's fair shares are per: `topic`,
    /// `producerGroup`, `clientId`, or `none` (one FIFO, as RocketMQ).
    /// Default `topic`.
    pub send_share_key: ShareKey,
    /// Sluice: what the pull queue's fair shares (pulls and POP) are per:
    /// `consumerGroup`, `topic`, `clientId`, or `none`. Default
    /// `consumerGroup`.
    pub pull_share_key: ShareKey,
    /// Sluice: how many keys get a share of their own in each queue; the
    /// rest share one overflow share. Default 64; 1..=4096.
    pub max_shares_per_queue: usize,
    /// Sluice: share weights, `key=weight` entries separated by `;` (a
    /// weight is 1..=1000; keys not named weigh 1). A share of weight 3 is
    /// served three requests per round where one of weight 1 gets one.
    /// Default empty.
    pub share_weights: String,
}

/// What a queue's fair shares are per.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ShareKey {
    /// The request's topic.
    Topic,
    /// The sender's producer group.
    ProducerGroup,
    /// The consumer group of a pull or POP.
    ConsumerGroup,
    /// The client id the connection registered with (its address before).
    ClientId,
    /// No shares: one FIFO, as RocketMQ.
    None,
}

impl ShareKey {
    /// The name used in configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareKey::Topic => "topic",
            ShareKey::ProducerGroup => "producerGroup",
            ShareKey::ConsumerGroup => "consumerGroup",
            ShareKey::ClientId => "clientId",
            ShareKey::None => "none",
        }
    }
}

/// Reads `shareWeights`: `key=weight` entries separated by `;`.
///
/// # Errors
/// Why an entry is not one.
pub fn parse_share_weights(text: &str) -> Result<Vec<(String, u32)>, String> {
    let mut out = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (key, weight) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}` is not key=weight"))?;
        let weight: u32 = weight
            .trim()
            .parse()
            .ok()
            .filter(|w| (1..=1000).contains(w))
            .ok_or_else(|| format!("`{entry}`: the weight must be 1..=1000"))?;
        out.push((key.trim().to_owned(), weight));
    }
    Ok(out)
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
            end_transaction_pool_queue_capacity: 100_000,
            client_manager_thread_pool_queue_capacity: 1_000_000,
            consumer_manager_thread_pool_queue_capacity: 1_000_000,
            request_queue_capacity_bytes: 256 << 20,
            early_admission_enable: true,
            inline_serve_enable: true,
            inline_serve_max_micros: 1000,
            busy_retry_hint_enable: true,
            topic_quotas: String::new(),
            client_quotas: String::new(),
            adaptive_admission_enable: true,
            admission_target_mills: crate::sojourn::DEFAULT_TARGET.as_millis() as u64,
            admission_interval_mills: crate::sojourn::DEFAULT_INTERVAL.as_millis() as u64,
            send_share_key: ShareKey::Topic,
            pull_share_key: ShareKey::ConsumerGroup,
            max_shares_per_queue: crate::queue::DEFAULT_MAX_SHARES,
            share_weights: String::new(),
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
                "endTransactionPoolQueueCapacity",
                self.end_transaction_pool_queue_capacity,
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
        for (key, value) in [
            ("topicQuotas", &self.topic_quotas),
            ("clientQuotas", &self.client_quotas),
        ] {
            crate::parse_quotas(value).map_err(|why| ConfigError {
                key,
                value: value.clone(),
                allowed: format!(
                    "key=limit[,limit] entries separated by `;`, limits N/s, N B/s, N KiB/s or \
                     N MiB/s ({why})"
                ),
            })?;
        }
        range(
            "admissionTargetMills",
            self.admission_target_mills,
            1,
            10_000,
        )?;
        range(
            "admissionIntervalMills",
            self.admission_interval_mills,
            1,
            60_000,
        )?;
        range("maxSharesPerQueue", self.max_shares_per_queue, 1, 4096)?;
        range(
            "inlineServeMaxMicros",
            self.inline_serve_max_micros,
            1,
            1_000_000,
        )?;
        for (key, value, allowed) in [
            (
                "sendShareKey",
                self.send_share_key,
                [
                    ShareKey::Topic,
                    ShareKey::ProducerGroup,
                    ShareKey::ClientId,
                    ShareKey::None,
                ],
            ),
            (
                "pullShareKey",
                self.pull_share_key,
                [
                    ShareKey::ConsumerGroup,
                    ShareKey::Topic,
                    ShareKey::ClientId,
                    ShareKey::None,
                ],
            ),
        ] {
            if !allowed.contains(&value) {
                return Err(ConfigError {
                    key,
                    value: value.as_str().to_owned(),
                    allowed: allowed.map(ShareKey::as_str).join(", "),
                });
            }
        }
        parse_share_weights(&self.share_weights).map_err(|why| ConfigError {
            key: "shareWeights",
            value: self.share_weights.clone(),
            allowed: format!("key=weight entries separated by `;` ({why})"),
        })?;
        Ok(())
    }

    /// Adaptive admission's parameters, `None` when it is off.
    pub fn sojourn_control(&self) -> Option<crate::SojournControl> {
        self.adaptive_admission_enable
            .then(|| crate::SojournControl {
                target: std::time::Duration::from_millis(self.admission_target_mills),
                interval: std::time::Duration::from_millis(self.admission_interval_mills),
            })
    }

    /// The weights of `shareWeights` (valid once
    /// [`FlowControlConfig::validate`] passed; empty otherwise).
    pub fn share_weight_map(&self) -> std::collections::HashMap<std::sync::Arc<str>, u32> {
        parse_share_weights(&self.share_weights)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, w)| (std::sync::Arc::from(k.as_str()), w))
            .collect()
    }

    /// The per-topic quotas of `topicQuotas` (valid once
    /// [`FlowControlConfig::validate`] passed; empty otherwise).
    pub fn topic_quota_list(&self) -> Vec<(String, crate::Quota)> {
        crate::parse_quotas(&self.topic_quotas).unwrap_or_default()
    }

    /// The per-client quotas of `clientQuotas` (valid once
    /// [`FlowControlConfig::validate`] passed; empty otherwise).
    pub fn client_quota_list(&self) -> Vec<(String, crate::Quota)> {
        crate::parse_quotas(&self.client_quotas).unwrap_or_default()
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
        assert_eq!(c.end_transaction_pool_queue_capacity, 100_000);
        assert_eq!(c.client_manager_thread_pool_queue_capacity, 1_000_000);
        assert_eq!(c.consumer_manager_thread_pool_queue_capacity, 1_000_000);
        assert!(c.early_admission_enable);
        assert!(c.inline_serve_enable);
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
                "adaptiveAdmissionEnable",
                "adminBrokerThreadPoolQueueCapacity",
                "admissionIntervalMills",
                "admissionTargetMills",
                "brokerFastFailureEnable",
                "busyRetryHintEnable",
                "clientManagerThreadPoolQueueCapacity",
                "clientQuotas",
                "consumerManagerThreadPoolQueueCapacity",
                "earlyAdmissionEnable",
                "endTransactionPoolQueueCapacity",
                "heartbeatThreadPoolQueueCapacity",
                "inlineServeEnable",
                "inlineServeMaxMicros",
                "maxSharesPerQueue",
                "pullShareKey",
                "pullThreadPoolQueueCapacity",
                "requestQueueCapacityBytes",
                "sendShareKey",
                "sendThreadPoolQueueCapacity",
                "shareWeights",
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
        let c = FlowControlConfig {
            send_share_key: ShareKey::ConsumerGroup,
            ..FlowControlConfig::default()
        };
        assert_eq!(
            c.validate().unwrap_err().to_string(),
            "invalid value consumerGroup for `sendShareKey`: topic, producerGroup, clientId, none"
        );
        let c = FlowControlConfig {
            share_weights: "Orders=3; Logs=0".into(),
            ..FlowControlConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "shareWeights");
        assert!(
            err.to_string()
                .contains("`Logs=0`: the weight must be 1..=1000"),
            "{err}"
        );
        let c = FlowControlConfig {
            admission_target_mills: 0,
            ..FlowControlConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "admissionTargetMills");
    }

    #[test]
    fn share_settings_read_from_a_file() {
        let c: FlowControlConfig = serde_json::from_str(
            r#"{"sendShareKey":"producerGroup","pullShareKey":"none","shareWeights":"Orders=4;Logs=1","adaptiveAdmissionEnable":false}"#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.send_share_key, ShareKey::ProducerGroup);
        assert_eq!(c.pull_share_key, ShareKey::None);
        assert_eq!(c.share_weight_map().get("Orders"), Some(&4));
        assert_eq!(c.sojourn_control(), None);
        assert!(FlowControlConfig::default().sojourn_control().is_some());
    }
}
