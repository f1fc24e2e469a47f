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
use serde::{de::DeserializeOwned, Serialize};
use store::StoreConfig;
use thiserror::Error;

mod auth_section;
mod broker_conf;
mod ha_section;
mod section;

pub use auth_section::AuthSection;
pub use ha_section::{BrokerRole, HaSection};
pub use section::BrokerSection;

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

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BrokerConfig {
    /// The broker's own settings.
    pub broker: BrokerSection,
    /// The message store.
    pub store: StoreConfig,
    /// Flow control.
    pub flow: FlowControlConfig,
    /// Authentication and authorization.
    pub auth: AuthSection,
    /// Replication.
    pub ha: HaSection,
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
            json_keys(&defaults.auth)?,
            json_keys(&defaults.ha)?,
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
            auth: section(&merged)?,
            ha: section(&merged)?,
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
            to_value_map(&self.auth)?,
            to_value_map(&self.ha)?,
        ] {
            map.extend(part);
        }
        Ok(map)
    }

    /// [`BrokerConfig::to_map`] with the values of secret keys (the auth
    /// section's user and credentials) masked: what may be shown.
    ///
    /// # Errors
    /// As [`BrokerConfig::to_map`].
    pub fn to_public_map(&self) -> Result<BTreeMap<String, Value>, ConfigError> {
        let mut map = self.to_map()?;
        for key in auth_section::SECRET_KEYS {
            if let Some(value) = map.get_mut(*key) {
                if value.as_str().is_some_and(|v| !v.is_empty()) {
                    *value = Value::from("******");
                }
            }
        }
        Ok(map)
    }

    /// The effective configuration as TOML (`broker --print-config`),
    /// secrets masked.
    ///
    /// # Errors
    /// Never in practice.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        let map = self.to_public_map()?;
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
        self.auth.validate()?;
        self.ha.validate(self.broker.broker_id)?;
        if (self.ha.broker_role == BrokerRole::Slave || self.ha.enable_controller_mode)
            && self.store.transient_store_pool_enable
        {
            return Err(invalid(
                "transientStorePoolEnable",
                "true".into(),
                "false on a SLAVE or in controller mode (a slave's CommitLog is cut where it \
                 stops agreeing with its master's)"
                    .into(),
            ));
        }
        self.broker.validate()
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

    #[test]
    fn a_slave_refuses_the_transient_store_pool() {
        let err = BrokerConfig::load(
            None,
            std::iter::empty(),
            &[
                ("brokerRole".into(), "SLAVE".into()),
                ("brokerId".into(), "1".into()),
                ("transientStorePoolEnable".into(), "true".into()),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("transientStorePoolEnable"), "{err}");
        let ok = BrokerConfig::load(
            None,
            std::iter::empty(),
            &[
                ("brokerRole".into(), "SLAVE".into()),
                ("brokerId".into(), "1".into()),
            ],
        )
        .unwrap();
        assert_eq!(ok.ha.broker_role, BrokerRole::Slave);
    }

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
        assert_eq!(c.store.file_reserved_time, 48);
        assert_eq!(c.store.delete_hours().unwrap(), [4]);
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
