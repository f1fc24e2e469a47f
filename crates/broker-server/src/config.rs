//! The broker's configuration: its own section plus the store's and flow
//! control's, all flat, keyed by RocketMQ's `broker.conf` names.
//!
//! Layers, later ones winning: built-in defaults, a file (TOML of top-level
//! keys, or RocketMQ's own `broker.conf`), `SLUICE_`-prefixed environment
//! variables (`SLUICE_LISTEN_PORT` or `SLUICE_listenPort` both set
//! `listenPort`), then `key=value` overrides from the command line. A
//! RocketMQ setting Sluice does not implement is accepted with a warning
//! that names it; any other unknown key is refused by name, with the
//! nearest known key suggested; a bad value is refused with its key, the
//! value and what is allowed.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

use figment::{
    providers::{Format, Serialized, Toml},
    value::Value,
    Figment,
};
use flow_control::FlowControlConfig;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use store::StoreConfig;
use thiserror::Error;

use crate::broker_conf;

/// Why a configuration was refused.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// Keys that no section knows.
    #[error("unknown configuration key(s): {}", .keys.join(", "))]
    UnknownKeys {
        /// The keys.
        keys: Vec<String>,
    },
    /// A value of the wrong type or a file that does not parse.
    #[error("{0}")]
    Parse(String),
    /// A value outside what is allowed.
    #[error("invalid value {value} for `{key}`: {allowed}")]
    Invalid {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What is allowed.
        allowed: String,
    },
}

/// The broker's own settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct BrokerSection {
    /// Broker name. Default `broker-a`.
    pub broker_name: String,
    /// Cluster name. Default `DefaultCluster`.
    pub broker_cluster_name: String,
    /// Broker id; 0 is the master. Default 0.
    pub broker_id: i64,
    /// Address registered in routes and message ids. Default `127.0.0.1`.
    #[serde(rename = "brokerIP1")]
    pub broker_ip1: String,
    /// Remoting port; 0 picks a free one. Default 10911.
    pub listen_port: u16,
    /// Address every listener (remoting, embedded name server, gRPC,
    /// metrics) binds to; distinct from `brokerIP1`, the address clients
    /// are told. Default `0.0.0.0` (all interfaces).
    pub bind_address: String,
    /// Name servers, `host:port` separated by `;`. Default: the embedded one.
    pub namesrv_addr: Option<String>,
    /// Run a name server inside the broker. Default true.
    pub embedded_namesrv: bool,
    /// Port of the embedded name server; 0 picks a free one. Default 9876.
    pub namesrv_listen_port: u16,
    /// Prometheus `/metrics` port; 0 turns it off. Default 5557.
    pub metrics_listen_port: u16,
    /// Port of the RocketMQ 5 gRPC endpoint (plain HTTP/2); 0 turns it off. Default 8081.
    pub grpc_listen_port: u16,
    /// Create a topic on its first send. Default true.
    pub auto_create_topic_enable: bool,
    /// Create a consumer group's settings (subscription group) with
    /// RocketMQ's defaults the first time the group heartbeats, pulls or
    /// sends a message back. Default true.
    pub auto_create_subscription_group: bool,
    /// Tell a consumer group's members at once when its membership changes
    /// (`NOTIFY_CONSUMER_IDS_CHANGED`), so they rebalance without waiting
    /// for their periodic check. Default true.
    pub notify_consumer_ids_changed_enable: bool,
    /// Accept timer messages (`TIMER_DELIVER_MS`, `TIMER_DELAY_SEC`,
    /// `TIMER_DELAY_MS`, gRPC `delivery_timestamp`); when false they are
    /// refused. Default true.
    pub timer_wheel_enable: bool,
    /// Longest timer delay in seconds; longer ones are refused
    /// (`MESSAGE_ILLEGAL`). Default 259200 (3 days); 1..=31536000.
    pub timer_max_delay_sec: u64,
    /// Most timer messages waiting at once; beyond it timer sends are
    /// refused until some are delivered (each waiting timer takes about
    /// 100 bytes of memory). Sluice's. Default 10000000; at least 1.
    pub timer_max_pending: usize,
    /// Write the timer wheel's progress (`timerProgress.json`) this often
    /// (ms). Default 1000; 100..=60000.
    pub timer_flush_interval_ms: u64,
    /// Most topics on the broker (its system topics aside); creating one
    /// more is refused with `SYSTEM_ERROR` naming the limit. Sluice's.
    /// Default 100000; at least 1.
    pub topic_max_count: usize,
    /// Queues of an auto-created topic (capped by the request's). Default 8; 1..=1024.
    pub default_topic_queue_nums: i32,
    /// Permission of the broker (6 = read and write). Default 6.
    pub broker_permission: i32,
    /// Send worker threads. Default min(cpus, 4); 1..=256.
    pub send_message_thread_pool_nums: usize,
    /// Pull worker threads. Default 16 + 2 × cpus; 1..=256.
    pub pull_message_thread_pool_nums: usize,
    /// Admin worker threads. Default 16; 1..=256.
    pub admin_broker_thread_pool_nums: usize,
    /// Heartbeat worker threads. Default min(32, cpus); 1..=256.
    pub heartbeat_thread_pool_nums: usize,
    /// Consumer-management (offset) worker threads. Default 32; 1..=256.
    pub consumer_manage_thread_pool_nums: usize,
    /// Period of registration with the name servers (ms). Default 30000; 10000..=60000.
    pub register_name_server_period: u64,
    /// Close a connection idle this long (s); 0 never. Default 120.
    pub server_channel_max_idle_time_seconds: u64,
    /// Most client connections at once. Default 10000.
    pub max_connections: usize,
    /// Most client connections at once from one IP address; a further one
    /// is closed as soon as it is accepted. Sluice's. Default 1000; at
    /// least 1.
    pub max_connections_per_address: usize,
    /// Most bytes of answers queued for one connection and not yet written
    /// (RocketMQ's Netty `writeBufferHighWaterMark`); past it the broker
    /// reads no more of that connection's requests until the client has
    /// read enough. Default 67108864 (64 MiB); at least 65536.
    pub write_buffer_high_water_mark: usize,
    /// Close a connection when a write to it makes no progress for this
    /// long (ms): the client does not read its answers. Sluice's. Default
    /// 30000; 0 never.
    pub connection_write_timeout_millis: u64,
    /// Region reported in send responses. Default `DefaultRegion`.
    pub region_id: String,
    /// Trace switch reported in send responses. Default true.
    pub trace_on: bool,
    /// Flush consumer offsets to disk this often (ms). Default 5000.
    pub flush_consumer_offset_interval: u64,
    /// Fault injection: the housekeeping thread panics this long (ms) after
    /// start. For tests of the panic stop only. Default 0 (off).
    pub fault_panic_after_mills: u64,
    /// Write the delivery progress of delay levels (`delayOffset.json`)
    /// this often (ms). Default 10000; 100..=600000.
    pub flush_delay_offset_interval: u64,
    /// Hold a pull that finds nothing until messages arrive or its
    /// `suspendTimeoutMillis` (at most 60 s) passes. Default true.
    pub long_polling_enable: bool,
    /// Hold time of such a pull when long polling is off (ms). Default 1000.
    pub short_polling_time_mills: u64,
    /// Most messages one pull returns, whatever it asks for
    /// (`maxMsgNums` above it is cut). Default 32; 1..=1024.
    pub max_transfer_count_on_message_in_memory: usize,
    /// Most bytes of messages one pull returns, whatever it asks for (at
    /// least one message always). Default 262144 (256 KiB); 1024..=67108864.
    pub max_transfer_bytes_on_message_in_memory: usize,
    /// Most pulls held at once; further ones are answered at once. Default 100000.
    pub pull_hold_max_requests: usize,
    /// Most pulls of one connection held at once; further ones are answered
    /// at once. Sluice's. Default 10000; at least 1.
    pub pull_hold_max_requests_per_connection: usize,
}

impl Default for BrokerSection {
    fn default() -> Self {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Self {
            broker_name: "broker-a".into(),
            broker_cluster_name: "DefaultCluster".into(),
            broker_id: 0,
            broker_ip1: "127.0.0.1".into(),
            listen_port: 10911,
            bind_address: "0.0.0.0".into(),
            namesrv_addr: None,
            embedded_namesrv: true,
            namesrv_listen_port: 9876,
            metrics_listen_port: 5557,
            grpc_listen_port: 8081,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            notify_consumer_ids_changed_enable: true,
            topic_max_count: 100_000,
            timer_wheel_enable: true,
            timer_max_delay_sec: 259_200,
            timer_max_pending: 10_000_000,
            timer_flush_interval_ms: 1000,
            default_topic_queue_nums: 8,
            broker_permission: 6,
            send_message_thread_pool_nums: cpus.min(4),
            pull_message_thread_pool_nums: 16 + 2 * cpus,
            admin_broker_thread_pool_nums: 16,
            heartbeat_thread_pool_nums: cpus.min(32),
            consumer_manage_thread_pool_nums: 32,
            register_name_server_period: 30_000,
            server_channel_max_idle_time_seconds: 120,
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            write_buffer_high_water_mark: 64 * 1024 * 1024,
            connection_write_timeout_millis: 30_000,
            region_id: "DefaultRegion".into(),
            trace_on: true,
            flush_consumer_offset_interval: 5000,
            fault_panic_after_mills: 0,
            flush_delay_offset_interval: 10_000,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            pull_hold_max_requests: 100_000,
            pull_hold_max_requests_per_connection: 10_000,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerConfig {
    /// The broker's own settings.
    pub broker: BrokerSection,
    /// The message store.
    pub store: StoreConfig,
    /// Flow control.
    pub flow: FlowControlConfig,
}

impl BrokerConfig {
    /// Loads the layers: defaults, `file` (TOML when its name ends in
    /// `.toml`, else a RocketMQ `broker.conf`: Java properties), the `SLUICE_` variables
    /// among `env`, then `overrides` (`key=value`).
    ///
    /// # Errors
    /// [`ConfigError`] naming every unknown key, or the first bad value.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        Self::default().layered(file, env, overrides)
    }

    /// This configuration with `overrides` (`key=value`) applied on top.
    ///
    /// # Errors
    /// As [`BrokerConfig::load`].
    pub fn with_overrides(&self, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        self.layered(None, std::iter::empty(), overrides)
    }

    fn layered(
        &self,
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        let defaults = self;
        let known: BTreeSet<String> = [
            json_keys(&defaults.broker)?,
            json_keys(&defaults.store)?,
            json_keys(&defaults.flow)?,
        ]
        .into_iter()
        .flatten()
        .collect();
        let defaults = defaults.to_map()?;
        let mut figment = Figment::from(Serialized::defaults(&defaults));
        let mut unknown = Vec::new();
        if let Some(path) = file {
            if !path.exists() {
                return Err(ConfigError::Parse(format!(
                    "configuration file {} does not exist",
                    path.display()
                )));
            }
            if path.extension().is_some_and(|e| e == "toml") {
                figment = figment.merge(Toml::file(path));
            } else {
                // RocketMQ's broker.conf: Java properties.
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError::Parse(format!("cannot read {}: {e}", path.display()))
                })?;
                let pairs = broker_conf::parse_properties(&text)
                    .map_err(|e| ConfigError::Parse(format!("{}: {e}", path.display())))?;
                let mut from_file: BTreeMap<String, Value> = BTreeMap::new();
                for (key, value) in pairs {
                    match canonical_key(&known, &key) {
                        Some(k) => {
                            from_file.insert(k, parse_value(&value));
                        }
                        None => unknown.push(key),
                    }
                }
                figment = figment.merge(Serialized::defaults(&from_file));
            }
        }
        let mut layered: BTreeMap<String, Value> = BTreeMap::new();
        for (name, value) in env {
            if let Some(key) = name.strip_prefix("SLUICE_") {
                match canonical_key(&known, key) {
                    Some(k) => {
                        layered.insert(k, parse_value(&value));
                    }
                    None => unknown.push(name.clone()),
                }
            }
        }
        for (key, value) in overrides {
            match canonical_key(&known, key) {
                Some(k) => {
                    layered.insert(k, parse_value(value));
                }
                None => unknown.push(key.clone()),
            }
        }
        figment = figment.merge(Serialized::defaults(&layered));
        let merged: BTreeMap<String, Value> = figment
            .extract()
            .map_err(|e| ConfigError::Parse(e.to_string()))?;
        unknown.extend(merged.keys().filter(|k| !known.contains(*k)).cloned());
        unknown.sort();
        unknown.dedup();
        let mut refused = Vec::new();
        for key in unknown {
            let bare = key.strip_prefix("SLUICE_").unwrap_or(&key);
            match broker_conf::classify(bare, &known) {
                broker_conf::Unknown::RocketMq => tracing::warn!(
                    key = bare,
                    "RocketMQ setting that Sluice does not implement: accepted, has no effect"
                ),
                broker_conf::Unknown::Typo(Some(near)) => {
                    refused.push(format!("{key} (did you mean `{near}`?)"));
                }
                broker_conf::Unknown::Typo(None) => refused.push(key),
            }
        }
        if !refused.is_empty() {
            return Err(ConfigError::UnknownKeys { keys: refused });
        }
        let config = Self {
            broker: section(&merged)?,
            store: section(&merged)?,
            flow: section(&merged)?,
        };
        config.validate()?;
        Ok(config)
    }

    /// Every key and value, flat, as the configuration file takes them.
    ///
    /// # Errors
    /// Never in practice; the sections are plain data.
    pub fn to_map(&self) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut map = BTreeMap::new();
        for part in [
            to_value_map(&self.broker)?,
            to_value_map(&self.store)?,
            to_value_map(&self.flow)?,
        ] {
            map.extend(part);
        }
        Ok(map)
    }

    /// The effective configuration as TOML (`broker --print-config`).
    ///
    /// # Errors
    /// Never in practice.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        let map = self.to_map()?;
        toml::to_string(&map).map_err(|e| ConfigError::Parse(e.to_string()))
    }

    /// The name servers to register with and route through.
    pub fn namesrv_addrs(&self) -> Vec<String> {
        match &self.broker.namesrv_addr {
            Some(list) => list
                .split(';')
                .map(str::trim)
                .filter(|a| !a.is_empty())
                .map(str::to_owned)
                .collect(),
            None if self.broker.embedded_namesrv => {
                vec![format!("127.0.0.1:{}", self.broker.namesrv_listen_port)]
            }
            None => Vec::new(),
        }
    }

    /// The address this broker registers (`brokerIP1:listenPort`).
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker.broker_ip1, self.broker.listen_port)
    }

    /// Checks every section and the rules between them.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.store
            .validate()
            .map_err(|e| invalid(e.key, e.value, e.allowed))?;
        self.flow
            .validate()
            .map_err(|e| invalid(e.key, e.value, e.allowed))?;
        let b = &self.broker;
        for (key, v) in [
            ("sendMessageThreadPoolNums", b.send_message_thread_pool_nums),
            ("pullMessageThreadPoolNums", b.pull_message_thread_pool_nums),
            ("adminBrokerThreadPoolNums", b.admin_broker_thread_pool_nums),
            ("heartbeatThreadPoolNums", b.heartbeat_thread_pool_nums),
            (
                "consumerManageThreadPoolNums",
                b.consumer_manage_thread_pool_nums,
            ),
        ] {
            if !(1..=256).contains(&v) {
                return Err(invalid(key, v.to_string(), "1..=256".into()));
            }
        }
        if !(1..=1024).contains(&b.default_topic_queue_nums) {
            return Err(invalid(
                "defaultTopicQueueNums",
                b.default_topic_queue_nums.to_string(),
                "1..=1024".into(),
            ));
        }
        if !(10_000..=60_000).contains(&b.register_name_server_period) {
            return Err(invalid(
                "registerNameServerPeriod",
                b.register_name_server_period.to_string(),
                "10000..=60000 (ms)".into(),
            ));
        }
        if b.bind_address.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(
                "bindAddress",
                b.bind_address.clone(),
                "an IP address, such as 0.0.0.0 or 127.0.0.1".into(),
            ));
        }
        if b.max_connections_per_address == 0 {
            return Err(invalid(
                "maxConnectionsPerAddress",
                "0".into(),
                "at least 1".into(),
            ));
        }
        if !(1..=1024).contains(&b.max_transfer_count_on_message_in_memory) {
            return Err(invalid(
                "maxTransferCountOnMessageInMemory",
                b.max_transfer_count_on_message_in_memory.to_string(),
                "1..=1024".into(),
            ));
        }
        if !(1024..=64 * 1024 * 1024).contains(&b.max_transfer_bytes_on_message_in_memory) {
            return Err(invalid(
                "maxTransferBytesOnMessageInMemory",
                b.max_transfer_bytes_on_message_in_memory.to_string(),
                "1024..=67108864 (bytes)".into(),
            ));
        }
        if b.topic_max_count == 0 {
            return Err(invalid("topicMaxCount", "0".into(), "at least 1".into()));
        }
        if b.pull_hold_max_requests_per_connection == 0 {
            return Err(invalid(
                "pullHoldMaxRequestsPerConnection",
                "0".into(),
                "at least 1".into(),
            ));
        }
        if b.write_buffer_high_water_mark < 65_536 {
            return Err(invalid(
                "writeBufferHighWaterMark",
                b.write_buffer_high_water_mark.to_string(),
                "at least 65536 (bytes)".into(),
            ));
        }
        if !(1..=31_536_000).contains(&b.timer_max_delay_sec) {
            return Err(invalid(
                "timerMaxDelaySec",
                b.timer_max_delay_sec.to_string(),
                "1..=31536000 (s)".into(),
            ));
        }
        if b.timer_max_pending == 0 {
            return Err(invalid("timerMaxPending", "0".into(), "at least 1".into()));
        }
        if !(100..=60_000).contains(&b.timer_flush_interval_ms) {
            return Err(invalid(
                "timerFlushIntervalMs",
                b.timer_flush_interval_ms.to_string(),
                "100..=60000 (ms)".into(),
            ));
        }
        if !(100..=600_000).contains(&b.flush_delay_offset_interval) {
            return Err(invalid(
                "flushDelayOffsetInterval",
                b.flush_delay_offset_interval.to_string(),
                "100..=600000 (ms)".into(),
            ));
        }
        if b.embedded_namesrv && b.listen_port != 0 && b.namesrv_listen_port == b.listen_port {
            return Err(invalid(
                "namesrvListenPort",
                b.namesrv_listen_port.to_string(),
                "a port other than listenPort".into(),
            ));
        }
        if b.grpc_listen_port != 0 {
            let taken = [
                ("listenPort", b.listen_port),
                ("metricsListenPort", b.metrics_listen_port),
                (
                    "namesrvListenPort",
                    if b.embedded_namesrv {
                        b.namesrv_listen_port
                    } else {
                        0
                    },
                ),
            ];
            if let Some((other, _)) = taken.iter().find(|(_, p)| *p == b.grpc_listen_port) {
                return Err(invalid(
                    "grpcListenPort",
                    b.grpc_listen_port.to_string(),
                    format!("0 (off) or a port other than {other}"),
                ));
            }
        }
        if b.broker_ip1.parse::<std::net::IpAddr>().is_err() {
            return Err(invalid(
                "brokerIP1",
                b.broker_ip1.clone(),
                "an IP address".into(),
            ));
        }
        if b.max_connections == 0 {
            return Err(invalid("maxConnections", "0".into(), "at least 1".into()));
        }
        Ok(())
    }
}

fn invalid(key: impl Into<String>, value: String, allowed: String) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value,
        allowed,
    }
}

/// Extracts one section from the merged flat map (only its own keys).
fn section<T: DeserializeOwned + Serialize + Default>(
    merged: &BTreeMap<String, Value>,
) -> Result<T, ConfigError> {
    let own = json_keys(&T::default())?;
    let sub: BTreeMap<&String, &Value> = merged.iter().filter(|(k, _)| own.contains(*k)).collect();
    Figment::from(Serialized::defaults(sub))
        .extract()
        .map_err(|e| ConfigError::Parse(describe(&e)))
}

fn describe(e: &figment::Error) -> String {
    let key = e.path.join(".");
    if key.is_empty() {
        e.to_string()
    } else {
        format!("invalid value for `{key}`: {}", e.kind)
    }
}

/// Every key of a section, unset optional ones included.
fn json_keys<T: Serialize>(section: &T) -> Result<BTreeSet<String>, ConfigError> {
    match serde_json::to_value(section).map_err(|e| ConfigError::Parse(e.to_string()))? {
        serde_json::Value::Object(obj) => Ok(obj.into_iter().map(|(k, _)| k).collect()),
        _ => Err(ConfigError::Parse(
            "a configuration section is not a map".into(),
        )),
    }
}

/// A section's set keys and values (unset optional keys are left out).
fn to_value_map<T: Serialize>(section: &T) -> Result<BTreeMap<String, Value>, ConfigError> {
    let json = serde_json::to_value(section).map_err(|e| ConfigError::Parse(e.to_string()))?;
    let serde_json::Value::Object(obj) = json else {
        return Err(ConfigError::Parse(
            "a configuration section is not a map".into(),
        ));
    };
    let mut out = BTreeMap::new();
    for (k, v) in obj.into_iter().filter(|(_, v)| !v.is_null()) {
        let value: Value =
            serde_json::from_value(v).map_err(|e| ConfigError::Parse(e.to_string()))?;
        out.insert(k, value);
    }
    Ok(out)
}

/// Matches a key case-insensitively and ignoring `_` (so that environment
/// variables may be written `LISTEN_PORT`).
fn canonical_key(known: &BTreeSet<String>, key: &str) -> Option<String> {
    let squash = |s: &str| {
        s.chars()
            .filter(|c| *c != '_')
            .collect::<String>()
            .to_ascii_lowercase()
    };
    let wanted = squash(key);
    known.iter().find(|k| squash(k) == wanted).cloned()
}

fn parse_value(text: &str) -> Value {
    text.parse()
        .unwrap_or_else(|never: std::convert::Infallible| match never {})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_rocketmq_broker_conf_loads_with_its_unimplemented_keys_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(
            &path,
            "brokerClusterName = DefaultCluster\nbrokerName = broker-b\nbrokerId = 0\n\
             deleteWhen = 04\nfileReservedTime = 48\nbrokerRole = ASYNC_MASTER\n\
             flushDiskType = SYNC_FLUSH\naclEnable = false\nlistenPort = 10921\n",
        )
        .unwrap();
        let c = BrokerConfig::load(Some(&path), std::iter::empty(), &[]).unwrap();
        assert_eq!(c.broker.broker_name, "broker-b");
        assert_eq!(c.broker.listen_port, 10921);
        assert_eq!(c.store.flush_disk_type, store::FlushDiskType::SyncFlush);
    }

    #[test]
    fn a_key_of_neither_broker_is_refused_with_the_nearest_suggested() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "flushDiskTyp = SYNC_FLUSH\nbrokerRoel = SLAVE\n").unwrap();
        let err = BrokerConfig::load(Some(&path), std::iter::empty(), &[])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("flushDiskTyp (did you mean `flushDiskType`?)"),
            "{err}"
        );
        assert!(
            err.contains("brokerRoel (did you mean `brokerRole`?)"),
            "{err}"
        );
        let err = BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[("sendThreadPoolQueueCapasity", "1")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("did you mean `sendThreadPoolQueueCapacity`?"),
            "{err}"
        );
        // A RocketMQ key on the command line is accepted too.
        BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[("brokerRole", "ASYNC_MASTER")]),
        )
        .unwrap();
    }

    #[test]
    fn defaults_are_rocketmq_defaults() {
        let c = BrokerConfig::load(None, std::iter::empty(), &[]).unwrap();
        assert_eq!(c.broker.listen_port, 10911);
        assert_eq!(c.flow.wait_time_mills_in_send_queue, 200);
        assert_eq!(c.flow.send_thread_pool_queue_capacity, 10_000);
        assert_eq!(c.store.os_page_cache_busy_time_out_mills, 1000);
        assert_eq!(c.namesrv_addrs(), ["127.0.0.1:9876"]);
    }

    #[test]
    fn layers_apply_in_order_file_env_flags() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broker.toml");
        std::fs::write(
            &file,
            "listenPort = 20911\nbrokerName = \"from-file\"\nwaitTimeMillsInSendQueue = 300\nflushDiskType = \"SYNC_FLUSH\"\n",
        )
        .unwrap();
        let env = vec![
            ("SLUICE_BROKER_NAME".to_string(), "from-env".to_string()),
            (
                "SLUICE_waitTimeMillsInSendQueue".to_string(),
                "400".to_string(),
            ),
            ("PATH".to_string(), "/bin".to_string()),
        ];
        let c = BrokerConfig::load(
            Some(&file),
            env,
            &set(&[("waitTimeMillsInSendQueue", "500")]),
        )
        .unwrap();
        assert_eq!(c.broker.listen_port, 20911);
        assert_eq!(c.broker.broker_name, "from-env");
        assert_eq!(c.flow.wait_time_mills_in_send_queue, 500);
        assert_eq!(c.store.flush_disk_type, store::FlushDiskType::SyncFlush);
    }

    #[test]
    fn unknown_keys_are_named_wherever_they_come_from() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("broker.toml");
        std::fs::write(&file, "listenPortt = 1\n").unwrap();
        let env = vec![("SLUICE_NO_SUCH_KEY".to_string(), "1".to_string())];
        let err = BrokerConfig::load(Some(&file), env, &set(&[("bogus", "1")])).unwrap_err();
        let text = err.to_string();
        for key in ["listenPortt", "SLUICE_NO_SUCH_KEY", "bogus"] {
            assert!(text.contains(key), "{text}");
        }
    }

    #[test]
    fn bad_values_name_the_key_and_what_is_allowed() {
        let err = BrokerConfig::load(None, std::iter::empty(), &set(&[("listenPort", "abc")]))
            .unwrap_err();
        assert!(err.to_string().contains("listenPort"), "{err}");
        let err = BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[("sendMessageThreadPoolNums", "0")]),
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value 0 for `sendMessageThreadPoolNums`: 1..=256"
        );
        let err = BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[("waitTimeMillsInSendQueue", "0")]),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("waitTimeMillsInSendQueue"),
            "{err}"
        );
        for (key, value, allowed) in [
            ("writeBufferHighWaterMark", "1000", "at least 65536"),
            ("timerMaxDelaySec", "0", "1..=31536000"),
            ("timerMaxPending", "0", "at least 1"),
            ("flushDelayOffsetInterval", "5", "100..=600000"),
        ] {
            let err = BrokerConfig::load(None, std::iter::empty(), &set(&[(key, value)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains(key) && err.contains(allowed), "{err}");
        }
        let missing = BrokerConfig::load(
            Some(Path::new("/no/such/file.toml")),
            std::iter::empty(),
            &[],
        )
        .unwrap_err();
        assert!(missing.to_string().contains("/no/such/file.toml"));
    }

    #[test]
    fn print_config_round_trips_through_a_file() {
        let c = BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[
                ("brokerName", "b1"),
                ("namesrvAddr", "10.0.0.1:9876;10.0.0.2:9876"),
            ]),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("printed.toml");
        std::fs::write(&file, c.to_toml().unwrap()).unwrap();
        let again = BrokerConfig::load(Some(&file), std::iter::empty(), &[]).unwrap();
        assert_eq!(again, c);
        assert_eq!(again.namesrv_addrs(), ["10.0.0.1:9876", "10.0.0.2:9876"]);
    }

    #[test]
    fn grpc_port_defaults_to_8081_and_must_not_clash() {
        let c = BrokerConfig::load(None, std::iter::empty(), &[]).unwrap();
        assert_eq!(c.broker.grpc_listen_port, 8081);
        let off = BrokerConfig::load(None, std::iter::empty(), &set(&[("grpcListenPort", "0")]));
        assert_eq!(off.unwrap().broker.grpc_listen_port, 0);
        let clash = BrokerConfig::load(
            None,
            std::iter::empty(),
            &set(&[("grpcListenPort", "10911")]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            clash.contains("grpcListenPort") && clash.contains("listenPort"),
            "{clash}"
        );
    }
}
