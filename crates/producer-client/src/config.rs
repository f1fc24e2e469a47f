//! The producer's settings, with RocketMQ's names and defaults
//! (`DefaultMQProducer`, `ClientConfig`, `NettyClientConfig`), plus Sluice's
//! busy policy.

use std::{path::PathBuf, time::Duration};

use client_core::{addr_list, millis, split_addrs, Secret, TlsSettings};
use remoting_net::ClientTls;
use remoting_protocol::{acl::Credentials, AUTO_CREATE_TOPIC};
use serde::{Deserialize, Serialize};

use crate::ProducerError;

/// The producer's settings. Keys deserialize in RocketMQ's camelCase
/// (`sendMsgTimeout`, `retryTimesWhenSendFailed`, ...); durations are in
/// milliseconds; unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ProducerConfig {
    /// Name servers, `host:port`. Deserializes from a list or from one
    /// `;`-separated string as RocketMQ's `namesrvAddr`. Default: none; at
    /// least one is required.
    #[serde(deserialize_with = "addr_list")]
    pub namesrv_addr: Vec<String>,
    /// Producer group. Default `DEFAULT_PRODUCER`; must not be empty.
    pub producer_group: String,
    /// Budget of one send across all its attempts, including the wait for an
    /// in-flight permit. Default 3000 ms; more than 0.
    #[serde(with = "millis")]
    pub send_msg_timeout: Duration,
    /// Extra attempts of a synchronous send on a retryable failure. Default 2
    /// (three attempts in all); 0..=16.
    pub retry_times_when_send_failed: u32,
    /// Extra attempts of an asynchronous send. Default 2; 0..=16.
    pub retry_times_when_send_async_failed: u32,
    /// Retry on another broker when the broker stored the message but
    /// reported a flush or replication shortfall. Default false.
    #[serde(rename = "retryAnotherBrokerWhenNotStoreOK")]
    pub retry_another_broker_when_not_store_ok: bool,
    /// Largest message body (or encoded batch) in bytes. Default 4 MiB;
    /// 1..=16 MiB.
    pub max_message_size: usize,
    /// Synchronous and asynchronous sends in flight at once. Default 65535;
    /// 1..=65535.
    pub client_async_semaphore_value: usize,
    /// Oneway sends being handed to connections at once. Default 65535;
    /// 1..=65535.
    pub client_oneway_semaphore_value: usize,
    /// Skip brokers that answered slowly or failed, for a while that grows
    /// with the latency (RocketMQ's `sendLatencyFaultEnable`). Default false.
    pub send_latency_fault_enable: bool,
    /// How often cached routes are refreshed from the name servers. Default
    /// 30000 ms; at least 10 ms.
    #[serde(with = "millis")]
    pub poll_name_server_interval: Duration,
    /// How often the producer sends `HEART_BEAT` with its client id and
    /// group to the master of every broker in its cached routes, which
    /// lists it among the group's producers there (and lets a
    /// transactional producer be asked about its halves). A broker new to
    /// the producer's routes gets one soon after the route is looked up,
    /// without waiting for this. Default 30000 ms; at least 10 ms.
    #[serde(with = "millis")]
    pub heartbeat_broker_interval: Duration,
    /// Timeout of a route query (RocketMQ's `mqClientApiTimeout`). Default
    /// 3000 ms; more than 0. A send also never waits past its own budget.
    #[serde(with = "millis")]
    pub mq_client_api_timeout: Duration,
    /// Template topic for auto-creation. Default `TBW102`.
    pub create_topic_key: String,
    /// Queues per broker of an auto-created topic. Default 4; 1..=1024.
    pub default_topic_queue_nums: i32,
    /// Bodies of single messages longer than this many bytes are
    /// zlib-compressed (level 5) before sending; batches never are. Default
    /// 4096; any value (`usize::MAX` turns compression off).
    pub compress_msg_body_over_howmuch: usize,
    /// When true, [`crate::Producer::send_async`] waits for an in-flight
    /// permit (`clientAsyncSemaphoreValue`) as long as it takes, and the
    /// send's `sendMsgTimeout` starts once it has one; when false, a send
    /// that gets no permit within `sendMsgTimeout` fails with
    /// [`ProducerError::TooManyRequests`]. Default false.
    pub enable_backpressure_for_async_mode: bool,
    /// What to do when a broker answers `SYSTEM_BUSY`. Default
    /// [`BusyPolicy::default`].
    pub busy_policy: BusyPolicy,
    /// Access key (the user name) that signs every request the producer
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
    /// PEM file of the certificates the producer trusts: a server's
    /// certificate must be one of them or signed by one. Only with
    /// `useTLS`; default none, and any server certificate is taken (the
    /// connection is encrypted but the server not authenticated, as
    /// RocketMQ's clients do by default).
    pub tls_client_trust_cert_path: Option<PathBuf>,
    /// PEM file of the certificate chain the producer shows servers that
    /// ask for one (a server requiring client certificates). Only with
    /// `useTLS`, given together with `tlsClientKeyPath`; default none.
    pub tls_client_cert_path: Option<PathBuf>,
    /// PEM file of the private key of `tlsClientCertPath`. Only with
    /// `useTLS`, given together with `tlsClientCertPath`; default none.
    pub tls_client_key_path: Option<PathBuf>,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            namesrv_addr: Vec::new(),
            producer_group: "DEFAULT_PRODUCER".into(),
            send_msg_timeout: Duration::from_millis(3000),
            retry_times_when_send_failed: 2,
            retry_times_when_send_async_failed: 2,
            retry_another_broker_when_not_store_ok: false,
            max_message_size: 4 * 1024 * 1024,
            client_async_semaphore_value: 65535,
            client_oneway_semaphore_value: 65535,
            send_latency_fault_enable: false,
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_broker_interval: Duration::from_secs(30),
            mq_client_api_timeout: Duration::from_millis(3000),
            create_topic_key: AUTO_CREATE_TOPIC.into(),
            default_topic_queue_nums: 4,
            compress_msg_body_over_howmuch: 4096,
            enable_backpressure_for_async_mode: false,
            busy_policy: BusyPolicy::default(),
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

impl ProducerConfig {
    /// A default configuration that uses the given name servers.
    pub fn with_namesrv(addrs: &str) -> Self {
        Self {
            namesrv_addr: split_addrs(addrs),
            ..Self::default()
        }
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ProducerError::Config`] naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), ProducerError> {
        let invalid = |key: &'static str, value: String, allowed: &str| {
            Err(ProducerError::Config {
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
        if self.producer_group.trim().is_empty() {
            return invalid(
                "producerGroup",
                self.producer_group.clone(),
                "a non-empty name",
            );
        }
        for (key, d, min) in [
            ("sendMsgTimeout", self.send_msg_timeout, 1),
            ("mqClientApiTimeout", self.mq_client_api_timeout, 1),
            ("pollNameServerInterval", self.poll_name_server_interval, 10),
            (
                "heartbeatBrokerInterval",
                self.heartbeat_broker_interval,
                10,
            ),
        ] {
            if d < Duration::from_millis(min) {
                return invalid(key, ms(d).to_string(), &format!("at least {min} ms"));
            }
        }
        for (key, v) in [
            (
                "retryTimesWhenSendFailed",
                self.retry_times_when_send_failed,
            ),
            (
                "retryTimesWhenSendAsyncFailed",
                self.retry_times_when_send_async_failed,
            ),
        ] {
            if v > 16 {
                return invalid(key, v.to_string(), "0..=16");
            }
        }
        if !(1..=16 * 1024 * 1024).contains(&self.max_message_size) {
            return invalid(
                "maxMessageSize",
                self.max_message_size.to_string(),
                "1..=16777216 (bytes)",
            );
        }
        for (key, v) in [
            (
                "clientAsyncSemaphoreValue",
                self.client_async_semaphore_value,
            ),
            (
                "clientOnewaySemaphoreValue",
                self.client_oneway_semaphore_value,
            ),
        ] {
            if !(1..=65535).contains(&v) {
                return invalid(key, v.to_string(), "1..=65535");
            }
        }
        if !(1..=1024).contains(&self.default_topic_queue_nums) {
            return invalid(
                "defaultTopicQueueNums",
                self.default_topic_queue_nums.to_string(),
                "1..=1024",
            );
        }
        if self.create_topic_key.is_empty() {
            return invalid("createTopicKey", String::new(), "a topic name");
        }
        self.credentials()?;
        self.tls()?;
        self.busy_policy.validate()
    }

    /// The credentials of `accessKey`, `secretKey` and `securityToken` that
    /// sign every request; `None` when neither key is given.
    ///
    /// # Errors
    /// [`ProducerError::Config`] when only one of `accessKey` and
    /// `secretKey` is given (the error names both), or `securityToken`
    /// comes without them.
    pub fn credentials(&self) -> Result<Option<Credentials>, ProducerError> {
        client_core::credentials(
            self.access_key.as_deref(),
            self.secret_key.as_ref(),
            self.security_token.as_ref(),
        )
        .map_err(|e| ProducerError::Config {
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
    /// [`ProducerError::Config`] when only one of `tlsClientCertPath` and
    /// `tlsClientKeyPath` is given (the error names both), a path comes
    /// without `useTLS` (naming `useTLS`), or a file cannot be read or
    /// holds nothing usable (naming its key and the file).
    pub fn tls(&self) -> Result<Option<ClientTls>, ProducerError> {
        client_core::client_tls(TlsSettings {
            use_tls: self.use_tls,
            trust_cert_path: self.tls_client_trust_cert_path.as_deref(),
            cert_path: self.tls_client_cert_path.as_deref(),
            key_path: self.tls_client_key_path.as_deref(),
        })
        .map_err(|e| ProducerError::Config {
            key: e.key,
            value: e.value,
            allowed: e.allowed,
        })
    }
}

/// What the producer does when a broker answers `SYSTEM_BUSY`.
///
/// A busy broker is a hot spot, not a dead cluster: another broker usually
/// has room, so moving the send there turns a failure into a success. But
/// retries are extra load, and when every broker is busy, retrying blindly
/// multiplies the overload that caused the refusals (a retry storm). So
/// [`BusyPolicy::RetryWithBackoff`] retries only on another broker when one
/// exists, waits an exponentially growing, fully jittered pause first (at
/// least the broker's `retryAfterMs` hint), and spends a token from a retry
/// budget on every busy retry. Each send deposits `budget_ratio` tokens, so
/// busy retries can add at most that share of extra load on top of a small
/// burst allowance (10 tokens); with no token left the busy answer is
/// returned at once. That is the default; [`BusyPolicy::Never`] is RocketMQ
/// before 5.3, which never retried `SYSTEM_BUSY`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
pub enum BusyPolicy {
    /// Return `SYSTEM_BUSY` to the caller at once.
    Never,
    /// Retry on another broker after a jittered exponential back-off, within
    /// a retry budget.
    #[serde(rename_all = "camelCase")]
    RetryWithBackoff {
        /// Back-off before the first busy retry: the pause is drawn uniformly
        /// from `[0, min(max, base * 2^n)]` for the n-th busy retry (from 0).
        /// Default 50 ms.
        #[serde(with = "millis")]
        base: Duration,
        /// Cap of the back-off ceiling. Default 2000 ms; at least `base`.
        #[serde(with = "millis")]
        max: Duration,
        /// Busy-retry tokens each send deposits: the largest steady share of
        /// extra load that busy retries may add. Default 0.1 (10 %); 0..=1.
        budget_ratio: f64,
    },
}

impl Default for BusyPolicy {
    fn default() -> Self {
        BusyPolicy::RetryWithBackoff {
            base: Duration::from_millis(50),
            max: Duration::from_secs(2),
            budget_ratio: 0.1,
        }
    }
}

impl BusyPolicy {
    fn validate(&self) -> Result<(), ProducerError> {
        if let BusyPolicy::RetryWithBackoff {
            base,
            max,
            budget_ratio,
        } = *self
        {
            if max < base {
                return Err(ProducerError::Config {
                    key: "busyPolicy.max",
                    value: ms(max).to_string(),
                    allowed: format!("at least busyPolicy.base ({} ms)", ms(base)),
                });
            }
            if !(0.0..=1.0).contains(&budget_ratio) {
                return Err(ProducerError::Config {
                    key: "busyPolicy.budgetRatio",
                    value: budget_ratio.to_string(),
                    allowed: "0.0..=1.0".into(),
                });
            }
        }
        Ok(())
    }
}

fn ms(d: Duration) -> u128 {
    d.as_millis()
}

#[cfg(test)]
mod tests {
    use serde::de::value::MapDeserializer;

    use super::*;

    #[test]
    fn defaults_are_rocketmq_defaults_with_the_retrying_busy_policy() {
        let c = ProducerConfig::with_namesrv("127.0.0.1:9876; 10.0.0.2:9876");
        assert_eq!(c.namesrv_addr, ["127.0.0.1:9876", "10.0.0.2:9876"]);
        assert_eq!(c.send_msg_timeout, Duration::from_millis(3000));
        assert_eq!(c.retry_times_when_send_failed, 2);
        assert_eq!(c.max_message_size, 4 * 1024 * 1024);
        assert_eq!(c.client_async_semaphore_value, 65535);
        assert_eq!(c.poll_name_server_interval, Duration::from_secs(30));
        assert_eq!(c.heartbeat_broker_interval, Duration::from_secs(30));
        assert!(!c.send_latency_fault_enable);
        assert_eq!(c.compress_msg_body_over_howmuch, 4096);
        assert!(!c.enable_backpressure_for_async_mode);
        assert!(matches!(
            c.busy_policy,
            BusyPolicy::RetryWithBackoff { budget_ratio, .. } if (budget_ratio - 0.1).abs() < 1e-9
        ));
        assert!(c.validate().is_ok());
    }

    #[test]
    fn validation_names_the_key() {
        let err = ProducerConfig::default().validate().unwrap_err();
        assert!(matches!(
            err,
            ProducerError::Config {
                key: "namesrvAddr",
                ..
            }
        ));
        let c = ProducerConfig {
            client_async_semaphore_value: 0,
            ..ProducerConfig::with_namesrv("a:1")
        };
        assert!(matches!(
            c.validate(),
            Err(ProducerError::Config {
                key: "clientAsyncSemaphoreValue",
                ..
            })
        ));
        let c = ProducerConfig {
            heartbeat_broker_interval: Duration::from_millis(9),
            ..ProducerConfig::with_namesrv("a:1")
        };
        assert!(matches!(
            c.validate(),
            Err(ProducerError::Config {
                key: "heartbeatBrokerInterval",
                ..
            })
        ));
        let c = ProducerConfig {
            heartbeat_broker_interval: Duration::from_millis(10),
            ..ProducerConfig::with_namesrv("a:1")
        };
        assert!(c.validate().is_ok());
        let c = ProducerConfig {
            busy_policy: BusyPolicy::RetryWithBackoff {
                base: Duration::from_millis(10),
                max: Duration::from_millis(5),
                budget_ratio: 0.1,
            },
            ..ProducerConfig::with_namesrv("a:1")
        };
        assert!(matches!(
            c.validate(),
            Err(ProducerError::Config {
                key: "busyPolicy.max",
                ..
            })
        ));
    }

    #[test]
    fn keys_deserialize_in_rocketmq_camel_case() {
        let text: MapDeserializer<'_, _, serde::de::value::Error> =
            MapDeserializer::new([("namesrvAddr", "a:1;b:2"), ("producerGroup", "PG")].into_iter());
        let c = ProducerConfig::deserialize(text).unwrap();
        assert_eq!(c.namesrv_addr, ["a:1", "b:2"]);
        assert_eq!(c.producer_group, "PG");

        let numbers: MapDeserializer<'_, _, serde::de::value::Error> = MapDeserializer::new(
            [
                ("sendMsgTimeout", 1500_u64),
                ("retryTimesWhenSendFailed", 5),
            ]
            .into_iter(),
        );
        let c = ProducerConfig::deserialize(numbers).unwrap();
        assert_eq!(c.send_msg_timeout, Duration::from_millis(1500));
        assert_eq!(c.retry_times_when_send_failed, 5);
        let heartbeats: MapDeserializer<'_, _, serde::de::value::Error> =
            MapDeserializer::new([("heartbeatBrokerInterval", 500_u64)].into_iter());
        let c = ProducerConfig::deserialize(heartbeats).unwrap();
        assert_eq!(c.heartbeat_broker_interval, Duration::from_millis(500));

        let compression: MapDeserializer<'_, _, serde::de::value::Error> =
            MapDeserializer::new([("compressMsgBodyOverHowmuch", 1024_u64)].into_iter());
        let c = ProducerConfig::deserialize(compression).unwrap();
        assert_eq!(c.compress_msg_body_over_howmuch, 1024);
        let backpressure: MapDeserializer<'_, _, serde::de::value::Error> =
            MapDeserializer::new([("enableBackpressureForAsyncMode", true)].into_iter());
        let c = ProducerConfig::deserialize(backpressure).unwrap();
        assert!(c.enable_backpressure_for_async_mode);

        let unknown: MapDeserializer<'_, _, serde::de::value::Error> =
            MapDeserializer::new([("sendMsgTimeoutMs", 1_u64)].into_iter());
        let err = ProducerConfig::deserialize(unknown).unwrap_err();
        assert!(err.to_string().contains("sendMsgTimeoutMs"), "{err}");
    }

    #[test]
    fn access_keys_deserialize_with_rocketmq_names_and_sign_together() {
        let c: ProducerConfig = serde_json::from_str(
            r#"{"namesrvAddr": "a:1", "accessKey": "alice", "secretKey": "pw",
                "securityToken": "t0k3n"}"#,
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
        assert_eq!(
            ProducerConfig::with_namesrv("a:1").credentials().unwrap(),
            None
        );
    }

    #[test]
    fn an_access_key_without_its_secret_or_the_reverse_is_refused_naming_both() {
        let only_access = ProducerConfig {
            access_key: Some("alice".into()),
            ..ProducerConfig::with_namesrv("a:1")
        };
        let only_secret = ProducerConfig {
            secret_key: Some("pw".into()),
            ..ProducerConfig::with_namesrv("a:1")
        };
        for c in [only_access, only_secret] {
            let err = c.validate().unwrap_err();
            assert!(matches!(err, ProducerError::Config { .. }), "{err}");
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
        let plain = ProducerConfig::with_namesrv("a:1");
        assert!(!plain.use_tls);
        assert!(plain.tls().unwrap().is_none());
        let c: ProducerConfig =
            serde_json::from_str(r#"{"namesrvAddr": "a:1", "useTLS": true}"#).unwrap();
        assert!(c.use_tls);
        assert!(c.validate().is_ok());
        assert!(c.tls().unwrap().is_some(), "useTLS alone trusts any server");
        let c: ProducerConfig = serde_json::from_str(
            r#"{"namesrvAddr": "a:1", "useTLS": true, "tlsClientTrustCertPath": "/ca.pem",
                "tlsClientCertPath": "/c.pem", "tlsClientKeyPath": "/k.pem"}"#,
        )
        .unwrap();
        assert_eq!(c.tls_client_trust_cert_path, Some("/ca.pem".into()));
        assert_eq!(c.tls_client_cert_path, Some("/c.pem".into()));
        assert_eq!(c.tls_client_key_path, Some("/k.pem".into()));
        let other_case = serde_json::from_str::<ProducerConfig>(r#"{"useTls": true}"#);
        assert!(other_case.unwrap_err().to_string().contains("useTls"));
    }

    #[test]
    fn tls_paths_are_checked_with_the_other_settings_naming_the_key_at_fault() {
        let key_of = |c: ProducerConfig| match c.validate() {
            Err(ProducerError::Config {
                key,
                value,
                allowed,
            }) => (key, value, allowed),
            other => panic!("{other:?}"),
        };
        let (key, _, allowed) = key_of(ProducerConfig {
            tls_client_trust_cert_path: Some("/ca.pem".into()),
            ..ProducerConfig::with_namesrv("a:1")
        });
        assert_eq!(key, "useTLS");
        assert!(allowed.contains("tlsClientTrustCertPath"), "{allowed}");
        let (key, _, allowed) = key_of(ProducerConfig {
            use_tls: true,
            tls_client_cert_path: Some("/c.pem".into()),
            ..ProducerConfig::with_namesrv("a:1")
        });
        assert_eq!(key, "tlsClientKeyPath");
        assert!(allowed.contains("tlsClientCertPath"), "{allowed}");
        let missing = std::env::temp_dir().join("sluice-no-such-dir/ca.pem");
        let (key, value, _) = key_of(ProducerConfig {
            use_tls: true,
            tls_client_trust_cert_path: Some(missing.clone()),
            ..ProducerConfig::with_namesrv("a:1")
        });
        assert_eq!(key, "tlsClientTrustCertPath");
        assert_eq!(value, missing.display().to_string());
    }
}
