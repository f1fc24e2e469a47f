//! The consumers' settings, with RocketMQ's names and defaults
//! (`DefaultMQPushConsumer`, `DefaultMQPullConsumer`, `ClientConfig`), plus
//! the few Sluice adds.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use client_core::{addr_list, millis, split_addrs, Secret, TlsSettings};
use remoting_net::ClientTls;
use remoting_protocol::acl::Credentials;
use serde::{Deserialize, Serialize};

use crate::ConsumerError;

/// Where a group with no committed offset for a queue starts reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum ConsumeFromWhere {
    /// The queue's end: only messages sent from now on
    /// (`CONSUME_FROM_LAST_OFFSET`, RocketMQ's default).
    #[default]
    #[serde(rename = "CONSUME_FROM_LAST_OFFSET")]
    LastOffset,
    /// The queue's first stored message (`CONSUME_FROM_FIRST_OFFSET`).
    #[serde(rename = "CONSUME_FROM_FIRST_OFFSET")]
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

/// How a push consumer group shares its topics' messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[non_exhaustive]
pub enum MessageModel {
    /// The members split the queues; each message goes to one member, and
    /// offsets are kept on the brokers (RocketMQ's default).
    #[default]
    Clustering,
    /// Every member gets every message; each member keeps its offsets in a
    /// local file.
    Broadcasting,
}

impl MessageModel {
    /// RocketMQ's name, as sent in heartbeats.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clustering => "CLUSTERING",
            Self::Broadcasting => "BROADCASTING",
        }
    }
}

/// Settings of a pull or push consumer. Keys deserialize in RocketMQ's
/// camelCase (`consumerGroup`, `pullBatchSize`, ...); durations are in
/// milliseconds; unknown keys are refused. The defaults are RocketMQ's
/// unless a field says otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ConsumerConfig {
    /// Name servers, `host:port`. Deserializes from a list or from one
    /// `;`-separated string as RocketMQ's `namesrvAddr`. Default: none; at
    /// least one is required.
    #[serde(deserialize_with = "addr_list")]
    pub namesrv_addr: Vec<String>,
    /// Consumer group; required.
    pub consumer_group: String,
    /// Instance name, part of the client id (`ip@instance`). Default: the
    /// process id and a per-process counter, so two consumers of one process
    /// get distinct ids.
    pub instance_name: Option<String>,
    /// A push consumer's subscriptions: topic to tag expression (`*` or
    /// `TagA || TagB`). At least one for a push consumer; a pull consumer
    /// ignores them.
    pub subscription: BTreeMap<String, String>,
    /// Messages asked for per pull. Default 32, range 1..=1024.
    pub pull_batch_size: u32,
    /// Messages handed to the handler per call. Default 1, range 1..=1024.
    pub consume_message_batch_max_size: usize,
    /// Cached messages per queue above which pulling pauses. Default 1000;
    /// at least 1.
    pub pull_threshold_for_queue: usize,
    /// Cached body MiB per queue above which pulling pauses. Default 100;
    /// at least 1.
    pub pull_threshold_size_for_queue: u64,
    /// Handler calls running at once. Default 20; at least 1.
    pub consume_thread_max: usize,
    /// How long the broker may hold a pull that finds nothing
    /// (`brokerSuspendMaxTimeMillis`). Default 15000 ms.
    #[serde(rename = "brokerSuspendMaxTimeMillis", with = "millis")]
    pub broker_suspend_max_time: Duration,
    /// Timeout of a long-polling pull (`consumerTimeoutMillisWhenSuspend`);
    /// must exceed `brokerSuspendMaxTimeMillis`. Default 30000 ms.
    #[serde(rename = "consumerTimeoutMillisWhenSuspend", with = "millis")]
    pub consumer_timeout_when_suspend: Duration,
    /// Timeout of every other request and of route queries. Default 3000 ms;
    /// more than 0.
    #[serde(with = "millis")]
    pub mq_client_api_timeout: Duration,
    /// How often consumed offsets are sent to the brokers. Default 5000 ms.
    #[serde(with = "millis")]
    pub persist_consumer_offset_interval: Duration,
    /// How often queues are reassigned unconditionally. Default 20000 ms
    /// (RocketMQ's rebalance wait).
    #[serde(with = "millis")]
    pub rebalance_interval: Duration,
    /// How often the group's member list is checked; a change triggers a
    /// rebalance at once. Default 1000 ms. Sluice's: a RocketMQ broker tells
    /// its clients with `NOTIFY_CONSUMER_IDS_CHANGED`, which this client
    /// does not serve, so it polls.
    #[serde(with = "millis")]
    pub membership_check_interval: Duration,
    /// How often heartbeats are sent. Default 30000 ms.
    #[serde(with = "millis")]
    pub heartbeat_broker_interval: Duration,
    /// Where a queue with no committed offset starts. Default last offset.
    pub consume_from_where: ConsumeFromWhere,
    /// `CLUSTERING` (default) or `BROADCASTING`.
    pub message_model: MessageModel,
    /// Where broadcasting consumers keep their offsets:
    /// `<dir>/<clientId>/<group>/offsets.json` (RocketMQ's
    /// `rocketmq.client.localOffsetStoreDir`). Default `~/.rocketmq_offsets`.
    pub local_offset_store_dir: Option<std::path::PathBuf>,
    /// Deliveries of a failed message before the broker moves it to the
    /// group's dead-letter topic (`%DLQ%<group>`); -1 means 16, or no limit
    /// when consuming in order. Default -1.
    pub max_reconsume_times: i32,
    /// Consume in order: each queue is locked on its broker and handed to
    /// one handler call at a time, in offset order; a failed batch is
    /// retried on the spot after `suspendCurrentQueueTimeMillis`. Sluice's
    /// key: RocketMQ's Java client chooses this by the listener's type.
    /// Default false.
    pub consume_orderly: bool,
    /// Pause of an orderly queue after its handler failed
    /// (`suspendCurrentQueueTimeMillis`). Default 1000 ms.
    #[serde(rename = "suspendCurrentQueueTimeMillis", with = "millis")]
    pub suspend_current_queue_time: Duration,
    /// How often an orderly consumer renews its queue locks (RocketMQ's
    /// `rocketmq.client.rebalance.lockInterval`). Default 20000 ms; the
    /// broker drops a lock not renewed for 60 s.
    #[serde(with = "millis")]
    pub rebalance_lock_interval: Duration,
    /// Wait before a batch the handler asked to retry is handed to it again
    /// in this process, when it could not be sent back to the broker.
    /// Default 1000 ms.
    #[serde(with = "millis")]
    pub retry_backoff: Duration,
    /// Pause of a queue's pulling while its cache is over a threshold
    /// (`pullTimeDelayMillsWhenFlowControl`). Default 50 ms.
    #[serde(rename = "pullTimeDelayMillsWhenFlowControl", with = "millis")]
    pub pull_time_delay_when_flow_control: Duration,
    /// Wait after a failed pull (`pullTimeDelayMillsWhenException`).
    /// Default 3000 ms.
    #[serde(rename = "pullTimeDelayMillsWhenException", with = "millis")]
    pub pull_time_delay_when_exception: Duration,
    /// How long `shutdown` waits for running handlers
    /// (`awaitTerminationMillisWhenShutdown`). Default 10000 ms (RocketMQ:
    /// 0, no wait).
    #[serde(rename = "awaitTerminationMillisWhenShutdown", with = "millis")]
    pub await_termination_when_shutdown: Duration,
    /// Access key (the user name) that signs every request the consumer
    /// sends, to brokers and name servers alike (RocketMQ's session
    /// credentials). Given together with `secretKey`; default none, and
    /// requests go unsigned.
    pub access_key: Option<String>,
    /// Secret key (the user's password) of `accessKey`, which the requests'
    /// signatures are made with. Given together with `accessKey`; default
    /// none. `Debug` shows it as `<hidden>`.
    pub secret_key: Option<Secret>,
    /// Session token sent along with every signed request
    /// (`SecurityToken`). Only with `accessKey` and `secretKey`; default
    /// none.
    pub security_token: Option<Secret>,
    /// Start every connection, to brokers and name servers alike, with a
    /// TLS handshake (RocketMQ's `useTLS`). Default false: plain
    /// connections, which a server whose TLS mode is `enforcing` closes.
    #[serde(rename = "useTLS")]
    pub use_tls: bool,
    /// PEM file of the certificates the consumer trusts: a server's
    /// certificate must be one of them or signed by one. Only with
    /// `useTLS`; default none, and any server certificate is taken (the
    /// connection is encrypted but the server not authenticated, as
    /// RocketMQ's clients do by default).
    pub tls_client_trust_cert_path: Option<PathBuf>,
    /// PEM file of the certificate chain the consumer shows servers that
    /// ask for one (a server requiring client certificates). Only with
    /// `useTLS`, given together with `tlsClientKeyPath`; default none.
    pub tls_client_cert_path: Option<PathBuf>,
    /// PEM file of the private key of `tlsClientCertPath`. Only with
    /// `useTLS`, given together with `tlsClientCertPath`; default none.
    pub tls_client_key_path: Option<PathBuf>,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        Self {
            namesrv_addr: Vec::new(),
            consumer_group: String::new(),
            instance_name: None,
            subscription: BTreeMap::new(),
            pull_batch_size: 32,
            consume_message_batch_max_size: 1,
            pull_threshold_for_queue: 1000,
            pull_threshold_size_for_queue: 100,
            consume_thread_max: 20,
            broker_suspend_max_time: Duration::from_secs(15),
            consumer_timeout_when_suspend: Duration::from_secs(30),
            mq_client_api_timeout: Duration::from_secs(3),
            persist_consumer_offset_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            membership_check_interval: Duration::from_secs(1),
            heartbeat_broker_interval: Duration::from_secs(30),
            consume_from_where: ConsumeFromWhere::LastOffset,
            message_model: MessageModel::Clustering,
            local_offset_store_dir: None,
            max_reconsume_times: -1,
            consume_orderly: false,
            suspend_current_queue_time: Duration::from_secs(1),
            rebalance_lock_interval: Duration::from_secs(20),
            retry_backoff: Duration::from_secs(1),
            pull_time_delay_when_flow_control: Duration::from_millis(50),
            pull_time_delay_when_exception: Duration::from_secs(3),
            await_termination_when_shutdown: Duration::from_secs(10),
            access_key: None,
            secret_key: None,
            security_token: None,
            use_tls: false,
            tls_client_trust_cert_path: None,
            tls_client_cert_path: None,
            tls_client_key_path: None,
        }
    }
}

impl ConsumerConfig {
    /// A default configuration for `group` using the given name servers
    /// (`;`-separated as RocketMQ's `namesrvAddr`).
    pub fn new(namesrv_addrs: &str, group: impl Into<String>) -> Self {
        Self {
            namesrv_addr: split_addrs(namesrv_addrs),
            consumer_group: group.into(),
            ..Self::default()
        }
    }

    /// Adds a subscription: `topic` with a tag expression (`*` or
    /// `TagA || TagB`).
    #[must_use]
    pub fn subscribe(mut self, topic: &str, expression: &str) -> Self {
        self.subscription
            .insert(topic.to_owned(), expression.trim().to_owned());
        self
    }

    /// Deliveries of a failed message before its dead-letter topic: -1 is
    /// 16, or no limit when consuming in order.
    pub fn effective_max_reconsume_times(&self) -> i32 {
        match self.max_reconsume_times {
            -1 if self.consume_orderly => i32::MAX,
            -1 => 16,
            n => n,
        }
    }

    /// Whether every member gets every message.
    pub fn is_broadcasting(&self) -> bool {
        self.message_model == MessageModel::Broadcasting
    }

    /// The directory of a broadcasting consumer's offsets file.
    pub fn local_offsets_dir(&self) -> std::path::PathBuf {
        self.local_offset_store_dir.clone().unwrap_or_else(|| {
            std::env::var_os("HOME")
                .map_or_else(|| std::path::PathBuf::from("."), std::path::PathBuf::from)
                .join(".rocketmq_offsets")
        })
    }

    /// The cached body bytes per queue above which pulling pauses.
    pub fn pull_threshold_size_for_queue_bytes(&self) -> u64 {
        self.pull_threshold_size_for_queue
            .saturating_mul(1024 * 1024)
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ConsumerError::Config`] naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), ConsumerError> {
        let invalid = |key: &'static str, value: String, allowed: &str| {
            Err(ConsumerError::Config {
                key,
                value,
                allowed: allowed.to_owned(),
            })
        };
        if self.namesrv_addr.is_empty() || self.namesrv_addr.iter().any(|a| a.trim().is_empty()) {
            return invalid(
                "namesrvAddr",
                self.namesrv_addr.join(";"),
                "one or more host:port addresses",
            );
        }
        if self.consumer_group.trim().is_empty() {
            return invalid(
                "consumerGroup",
                self.consumer_group.clone(),
                "a non-empty name",
            );
        }
        for (key, value) in [
            ("pullBatchSize", self.pull_batch_size as usize),
            (
                "consumeMessageBatchMaxSize",
                self.consume_message_batch_max_size,
            ),
        ] {
            if !(1..=1024).contains(&value) {
                return invalid(key, value.to_string(), "1..=1024");
            }
        }
        for (key, value) in [
            (
                "pullThresholdForQueue",
                self.pull_threshold_for_queue as u64,
            ),
            (
                "pullThresholdSizeForQueue",
                self.pull_threshold_size_for_queue,
            ),
            ("consumeThreadMax", self.consume_thread_max as u64),
        ] {
            if value == 0 {
                return invalid(key, value.to_string(), "at least 1");
            }
        }
        if self.consume_orderly && self.message_model == MessageModel::Broadcasting {
            return invalid(
                "consumeOrderly",
                "true".to_owned(),
                "false with messageModel=BROADCASTING (orderly consumption locks queues to one member)",
            );
        }
        if !(-1..=16_384).contains(&self.max_reconsume_times) {
            return invalid(
                "maxReconsumeTimes",
                self.max_reconsume_times.to_string(),
                "-1 (16) or 0..=16384",
            );
        }
        if self.rebalance_lock_interval >= Duration::from_secs(30) {
            return invalid(
                "rebalanceLockInterval",
                self.rebalance_lock_interval.as_millis().to_string(),
                "less than 30000 ms (a lock is held for 30 s on the client, 60 s on the broker)",
            );
        }
        if self.consumer_timeout_when_suspend <= self.broker_suspend_max_time {
            return invalid(
                "consumerTimeoutMillisWhenSuspend",
                self.consumer_timeout_when_suspend.as_millis().to_string(),
                "more than brokerSuspendMaxTimeMillis",
            );
        }
        for (key, d) in [
            ("mqClientApiTimeout", self.mq_client_api_timeout),
            (
                "persistConsumerOffsetInterval",
                self.persist_consumer_offset_interval,
            ),
            ("rebalanceInterval", self.rebalance_interval),
            ("membershipCheckInterval", self.membership_check_interval),
            ("heartbeatBrokerInterval", self.heartbeat_broker_interval),
            ("rebalanceLockInterval", self.rebalance_lock_interval),
        ] {
            if d.is_zero() {
                return invalid(key, "0".to_owned(), "more than 0 ms");
            }
        }
        self.credentials()?;
        self.tls()?;
        Ok(())
    }

    /// The credentials of `accessKey`, `secretKey` and `securityToken` that
    /// sign every request; `None` when neither key is given.
    ///
    /// # Errors
    /// [`ConsumerError::Config`] when only one of `accessKey` and
    /// `secretKey` is given (the error names both), or `securityToken`
    /// comes without them.
    pub fn credentials(&self) -> Result<Option<Credentials>, ConsumerError> {
        client_core::credentials(
            self.access_key.as_deref(),
            self.secret_key.as_ref(),
            self.security_token.as_ref(),
        )
        .map_err(|e| ConsumerError::Config {
            key: e.key,
            value: e.value,
            allowed: e.allowed,
        })
    }

    /// The TLS of `useTLS`, `tlsClientTrustCertPath`, `tlsClientCertPath`
    /// and `tlsClientKeyPath` that every connection starts with; `None`
    /// when `useTLS` is false. The files are read now.
    ///
    /// # Errors
    /// [`ConsumerError::Config`] when only one of `tlsClientCertPath` and
    /// `tlsClientKeyPath` is given (the error names both), a path comes
    /// without `useTLS` (naming `useTLS`), or a file cannot be read or
    /// holds nothing usable (naming its key and the file).
    pub fn tls(&self) -> Result<Option<ClientTls>, ConsumerError> {
        client_core::client_tls(TlsSettings {
            use_tls: self.use_tls,
            trust_cert_path: self.tls_client_trust_cert_path.as_deref(),
            cert_path: self.tls_client_cert_path.as_deref(),
            key_path: self.tls_client_key_path.as_deref(),
        })
        .map_err(|e| ConsumerError::Config {
            key: e.key,
            value: e.value,
            allowed: e.allowed,
        })
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
        assert_eq!(c.pull_threshold_size_for_queue_bytes(), 100 * 1024 * 1024);
        assert_eq!(c.broker_suspend_max_time, Duration::from_secs(15));
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
            consumer_timeout_when_suspend: Duration::from_secs(1),
            ..ConsumerConfig::new("a:1", "G")
        };
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("consumerTimeoutMillisWhenSuspend = \"1000\""),
            "{err}"
        );
    }

    #[test]
    fn keys_deserialize_with_rocketmq_names_and_unknown_ones_are_refused() {
        let c: ConsumerConfig = serde_json::from_str(
            r#"{"namesrvAddr": "a:1;b:2", "consumerGroup": "G",
                "brokerSuspendMaxTimeMillis": 2000, "consumerTimeoutMillisWhenSuspend": 5000,
                "pullThresholdSizeForQueue": 8, "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscription": {"T": "A || B"}}"#,
        )
        .unwrap();
        assert_eq!(c.namesrv_addr, ["a:1", "b:2"]);
        assert_eq!(c.broker_suspend_max_time, Duration::from_secs(2));
        assert_eq!(c.pull_threshold_size_for_queue_bytes(), 8 << 20);
        assert_eq!(c.consume_from_where, ConsumeFromWhere::FirstOffset);
        assert_eq!(c.subscription["T"], "A || B");
        assert_eq!(c.pull_batch_size, 32, "absent keys keep their defaults");
        assert!(c.validate().is_ok());
        let unknown = serde_json::from_str::<ConsumerConfig>(r#"{"suspendTimeout": 1}"#);
        assert!(unknown.unwrap_err().to_string().contains("suspendTimeout"));
    }
    #[test]
    fn access_keys_deserialize_with_rocketmq_names_and_sign_together() {
        let c: ConsumerConfig = serde_json::from_str(
            r#"{"namesrvAddr": "a:1", "consumerGroup": "G",
                "accessKey": "alice", "secretKey": "pw", "securityToken": "t0k3n"}"#,
        )
        .unwrap();
        assert!(c.validate().is_ok());
        let credentials = c.credentials().unwrap().unwrap();
        assert_eq!(credentials.access_key, "alice");
        assert_eq!(credentials.secret_key, "pw");
        assert_eq!(credentials.security_token.as_deref(), Some("t0k3n"));
        let shown = format!("{c:?}");
        assert!(
            !shown.contains("\"pw\"") && !shown.contains("t0k3n"),
            "{shown}"
        );
        assert_eq!(ConsumerConfig::new("a:1", "G").credentials().unwrap(), None);
    }

    #[test]
    fn an_access_key_without_its_secret_or_the_reverse_is_refused_naming_both() {
        for keys in [
            r#"{"namesrvAddr": "a:1", "consumerGroup": "G", "accessKey": "alice"}"#,
            r#"{"namesrvAddr": "a:1", "consumerGroup": "G", "secretKey": "pw"}"#,
        ] {
            let c: ConsumerConfig = serde_json::from_str(keys).unwrap();
            let err = c.validate().unwrap_err();
            assert!(matches!(err, ConsumerError::Config { .. }), "{err}");
            let text = err.to_string();
            assert!(
                text.contains("accessKey") && text.contains("secretKey"),
                "{text}"
            );
            assert!(!text.contains("pw"), "{text}");
        }
    }

    #[test]
    fn tls_keys_deserialize_with_rocketmq_names_and_default_to_plain() {
        let plain = ConsumerConfig::new("a:1", "G");
        assert!(!plain.use_tls);
        assert!(plain.tls().unwrap().is_none());
        let c: ConsumerConfig =
            serde_json::from_str(r#"{"namesrvAddr": "a:1", "consumerGroup": "G", "useTLS": true}"#)
                .unwrap();
        assert!(c.use_tls);
        assert!(c.validate().is_ok());
        assert!(c.tls().unwrap().is_some(), "useTLS alone trusts any server");
        let c: ConsumerConfig = serde_json::from_str(
            r#"{"namesrvAddr": "a:1", "consumerGroup": "G", "useTLS": true,
                "tlsClientTrustCertPath": "/ca.pem",
                "tlsClientCertPath": "/c.pem", "tlsClientKeyPath": "/k.pem"}"#,
        )
        .unwrap();
        assert_eq!(c.tls_client_trust_cert_path, Some("/ca.pem".into()));
        assert_eq!(c.tls_client_cert_path, Some("/c.pem".into()));
        assert_eq!(c.tls_client_key_path, Some("/k.pem".into()));
        let other_case = serde_json::from_str::<ConsumerConfig>(r#"{"useTls": true}"#);
        assert!(other_case.unwrap_err().to_string().contains("useTls"));
    }

    #[test]
    fn tls_paths_are_checked_with_the_other_settings_naming_the_key_at_fault() {
        let key_of = |c: ConsumerConfig| match c.validate() {
            Err(ConsumerError::Config {
                key,
                value,
                allowed,
            }) => (key, value, allowed),
            other => panic!("{other:?}"),
        };
        let (key, _, allowed) = key_of(ConsumerConfig {
            tls_client_trust_cert_path: Some("/ca.pem".into()),
            ..ConsumerConfig::new("a:1", "G")
        });
        assert_eq!(key, "useTLS");
        assert!(allowed.contains("tlsClientTrustCertPath"), "{allowed}");
        let (key, _, allowed) = key_of(ConsumerConfig {
            use_tls: true,
            tls_client_cert_path: Some("/c.pem".into()),
            ..ConsumerConfig::new("a:1", "G")
        });
        assert_eq!(key, "tlsClientKeyPath");
        assert!(allowed.contains("tlsClientCertPath"), "{allowed}");
        let missing = std::env::temp_dir().join("sluice-no-such-dir/ca.pem");
        let (key, value, _) = key_of(ConsumerConfig {
            use_tls: true,
            tls_client_trust_cert_path: Some(missing.clone()),
            ..ConsumerConfig::new("a:1", "G")
        });
        assert_eq!(key, "tlsClientTrustCertPath");
        assert_eq!(value, missing.display().to_string());
    }
}
