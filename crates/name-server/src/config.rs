//! The name server's configuration section.
//!
//! Keys keep RocketMQ's names where RocketMQ has one, so that an operator's
//! `namesrv.conf` translates line by line. Every field documents its default
//! and its valid range; [`NamesrvConfig::validate`] checks them and names the
//! key.

use std::{path::PathBuf, time::Duration};

use controller::ControllerConfig;
use remoting_net::{ClientAuth, ServerTls, TlsMode};
use remoting_protocol::acl::Credentials;
use serde::{Deserialize, Serialize};
use thiserror::Error;

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

/// Configuration of the name server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct NamesrvConfig {
    /// TCP port to listen on. Default 9876; any port, 0 lets the operating
    /// system choose one (for tests).
    pub listen_port: u16,
    /// How often brokers whose registration expired are removed, in ms.
    /// Default 5000; 1..=3,600,000.
    pub scan_not_active_broker_interval: u64,
    /// How long a broker registration lasts without being renewed, in ms,
    /// when the broker does not send its own `heartbeatTimeoutMillis`.
    /// RocketMQ hard-codes this as `DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`.
    /// Default 120000; 1..=86,400,000.
    pub broker_channel_expired_time: u64,
    /// Whether a master's registration removes its queues from topics it no
    /// longer lists. Default false, as in RocketMQ: Java brokers announce a
    /// newly created topic with a registration that lists only that topic, so
    /// with this on such a registration hides the broker's other topics until
    /// its next full registration (at most 30 s by default). Turn it on only
    /// when every broker always registers its whole topic table.
    pub delete_topic_with_broker_registration: bool,
    /// Most client connections open at once; further peers wait in the
    /// listen backlog. Default 10000; at least 1.
    pub max_connections: usize,
    /// Most connections open at once from one IP address; a further one is
    /// closed as soon as it is accepted. Default 1000; at least 1.
    pub max_connections_per_address: usize,
    /// The file that keeps the key-value configuration (`PUT_KV_CONFIG` and
    /// friends) across restarts, in RocketMQ's `kvConfig.json` format.
    /// Default: none, items live in memory only. The `namesrv` binary sets
    /// `~/namesrv/kvConfig.json` as RocketMQ does; the broker's embedded
    /// name server uses `<storePathRootDir>/namesrv/kvConfig.json`.
    pub kv_config_path: Option<PathBuf>,
    /// Registrations and changes (`REGISTER_BROKER`, `UNREGISTER_BROKER`,
    /// `DELETE_TOPIC_IN_NAMESRV`, `WIPE_WRITE_PERM_OF_BROKER`,
    /// `ADD_WRITE_PERM_OF_BROKER`, `PUT_KV_CONFIG`, `DELETE_KV_CONFIG`)
    /// must be signed with `innerClientAuthenticationCredentials`; others
    /// are refused with `NO_PERMISSION`. Route and list reads stay open.
    /// Default false.
    pub authentication_enabled: bool,
    /// The cluster's credentials, JSON `{"accessKey":"...","secretKey":"..."}`:
    /// the brokers' `innerClientAuthenticationCredentials`. Needed with
    /// `authenticationEnabled`. Default none.
    pub inner_client_authentication_credentials: String,
    /// TLS on the port (RocketMQ's `tls.server.mode`): `disabled`,
    /// `permissive` (TLS and plain on one port, told apart by each
    /// connection's first byte) or `enforcing`. Default `disabled`.
    pub tls_server_mode: String,
    /// PEM file of the certificate chain; needed unless `tlsServerMode` is
    /// `disabled`. Read again on SIGHUP.
    pub tls_server_cert_path: Option<PathBuf>,
    /// PEM file of its private key; needed unless `tlsServerMode` is
    /// `disabled`. Read again on SIGHUP.
    pub tls_server_key_path: Option<PathBuf>,
    /// Client certificates: `none`, `optional` or `require` (RocketMQ's
    /// `tls.server.need.client.auth`). Default `none`.
    pub tls_server_need_client_auth: String,
    /// PEM file of the roots that sign client certificates; needed with
    /// `optional` and `require`.
    pub tls_server_trust_cert_path: Option<PathBuf>,
    /// Run a replication controller in this name server (RocketMQ's
    /// `enableControllerInNamesrv`; the `namesrv --controller` flag sets
    /// it). Default false.
    pub enable_controller_in_namesrv: bool,
    /// The controllers' group name. Default `sluice-controller`.
    pub controller_d_leger_group: String,
    /// Every controller as `name-host:port`, separated by `;`
    /// (`n0-10.0.0.1:9878;n1-10.0.0.2:9878;n2-10.0.0.3:9878`): the address
    /// of each one's controller port, which carries the controllers' Raft
    /// messages and brokers' controller requests. Needed with a controller;
    /// three (or five) controllers survive losing one (or two).
    pub controller_d_leger_peers: String,
    /// This controller's name in `controllerDLegerPeers`. Needed with a
    /// controller.
    pub controller_d_leger_self_id: String,
    /// The directory of the controller's Raft log, vote and snapshot.
    /// Default: `~/controller` (the `namesrv` binary).
    pub controller_store_path: Option<PathBuf>,
    /// When no in-sync replica of a group is alive, elect any live member
    /// (RocketMQ's `enableElectUncleanMaster`): the group stays writable but
    /// may lose acknowledged messages. Default false.
    pub enable_elect_unclean_master: bool,
    /// Tell a group's brokers at once when the controller elects a master
    /// (`NOTIFY_BROKER_ROLE_CHANGED`); they also poll. Default true.
    pub notify_broker_role_changed: bool,
    /// How often the controller leader looks for dead masters and silent
    /// brokers, in ms (a broker whose heartbeat connection closes is looked
    /// at at once). Default 1000 (RocketMQ: 5000); 10..=60,000.
    pub scan_inactive_master_interval: u64,
    /// How long a master may acknowledge writes after sending a heartbeat
    /// the controller leader answered with a lease, in ms; the controller
    /// elects another master only after the old one's lease must have run
    /// out (Sluice's own). Default 3000; 500..=60,000.
    pub master_lease_millis: u64,
}

impl Default for NamesrvConfig {
    fn default() -> Self {
        Self {
            listen_port: 9876,
            scan_not_active_broker_interval: 5000,
            broker_channel_expired_time: 120_000,
            delete_topic_with_broker_registration: false,
            max_connections: 10_000,
            max_connections_per_address: 1_000,
            kv_config_path: None,
            authentication_enabled: false,
            inner_client_authentication_credentials: String::new(),
            tls_server_mode: "disabled".into(),
            tls_server_cert_path: None,
            tls_server_key_path: None,
            tls_server_need_client_auth: "none".into(),
            tls_server_trust_cert_path: None,
            enable_controller_in_namesrv: false,
            controller_d_leger_group: "sluice-controller".into(),
            controller_d_leger_peers: String::new(),
            controller_d_leger_self_id: String::new(),
            controller_store_path: None,
            enable_elect_unclean_master: false,
            notify_broker_role_changed: true,
            scan_inactive_master_interval: 1000,
            master_lease_millis: 3000,
        }
    }
}

impl NamesrvConfig {
    /// The interval between two scans for expired brokers.
    pub fn scan_interval(&self) -> Duration {
        Duration::from_millis(self.scan_not_active_broker_interval)
    }

    /// How long a registration lasts when the broker names no timeout.
    pub fn broker_expiry(&self) -> Duration {
        Duration::from_millis(self.broker_channel_expired_time)
    }

    /// The credentials registrations and changes must be signed with;
    /// `None` when authentication is off.
    ///
    /// # Errors
    /// [`ConfigError`] when authentication is on and the credentials are
    /// missing or not the JSON expected (the value is not echoed).
    pub fn cluster_credentials(&self) -> Result<Option<Credentials>, ConfigError> {
        if !self.authentication_enabled {
            return Ok(None);
        }
        Credentials::from_json(&self.inner_client_authentication_credentials)
            .map(Some)
            .ok_or_else(|| ConfigError {
                key: "innerClientAuthenticationCredentials",
                value: "(hidden)".into(),
                allowed: r#"JSON {"accessKey":"...","secretKey":"..."} with both set, needed with authenticationEnabled=true"#.into(),
            })
    }

    /// The port's TLS, its files read now; `None` when `tlsServerMode` is
    /// `disabled`.
    ///
    /// # Errors
    /// [`ConfigError`] naming the key whose value or file is at fault.
    pub fn server_tls(&self) -> Result<Option<ServerTls>, ConfigError> {
        let mode: TlsMode = self.tls_server_mode.parse().map_err(|_| ConfigError {
            key: "tlsServerMode",
            value: self.tls_server_mode.clone(),
            allowed: "disabled, permissive or enforcing".into(),
        })?;
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        let file = |key: &'static str, path: &Option<PathBuf>| {
            path.clone().ok_or_else(|| ConfigError {
                key,
                value: String::new(),
                allowed: format!("a PEM file, needed with tlsServerMode={mode}"),
            })
        };
        let cert = file("tlsServerCertPath", &self.tls_server_cert_path)?;
        let key = file("tlsServerKeyPath", &self.tls_server_key_path)?;
        let auth = ClientAuth::from_settings(
            &self.tls_server_need_client_auth,
            self.tls_server_trust_cert_path.as_deref(),
        )
        .map_err(|allowed| ConfigError {
            key: "tlsServerNeedClientAuth",
            value: self.tls_server_need_client_auth.clone(),
            allowed: format!("{allowed} (tlsServerTrustCertPath)"),
        })?;
        let unreadable = |e: remoting_net::TlsError| ConfigError {
            key: "tlsServerCertPath",
            value: cert.display().to_string(),
            allowed: format!("readable PEM files for TLS: {e}"),
        };
        let tls = ServerTls::from_pem_files(mode, &cert, &key)
            .and_then(|tls| tls.with_client_auth(auth))
            .map_err(unreadable)?;
        Ok(Some(tls))
    }

    /// The controller's settings when `enableControllerInNamesrv` is on,
    /// its state in `controllerStorePath` (or `default_store` when unset).
    ///
    /// # Errors
    /// [`ConfigError`] naming the controller key that is missing or wrong.
    pub fn controller_config(
        &self,
        default_store: &std::path::Path,
    ) -> Result<Option<ControllerConfig>, ConfigError> {
        if !self.enable_controller_in_namesrv {
            return Ok(None);
        }
        let mut config = ControllerConfig::new(
            &self.controller_d_leger_group,
            &self.controller_d_leger_peers,
            &self.controller_d_leger_self_id,
            self.controller_store_path
                .clone()
                .unwrap_or_else(|| default_store.to_owned()),
        )
        .map_err(|e| ConfigError {
            key: e.key,
            value: e.value,
            allowed: e.allowed,
        })?;
        range(
            "scanInactiveMasterInterval",
            self.scan_inactive_master_interval,
            10,
            60_000,
        )?;
        range("masterLeaseMillis", self.master_lease_millis, 500, 60_000)?;
        config.enable_elect_unclean_master = self.enable_elect_unclean_master;
        config.notify_broker_role_changed = self.notify_broker_role_changed;
        config.scan_not_active_broker_interval =
            Duration::from_millis(self.scan_inactive_master_interval);
        config.master_lease = Duration::from_millis(self.master_lease_millis);
        Ok(Some(config))
    }

    /// Checks every value (TLS files are read by
    /// [`NamesrvConfig::server_tls`]).
    ///
    /// # Errors
    /// [`ConfigError`] naming the first key whose value is not allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.cluster_credentials()?;
        self.controller_config(std::path::Path::new("."))?;
        if !self.tls_server_mode.trim().eq_ignore_ascii_case("disabled") {
            self.server_tls()?;
        }
        range(
            "scanNotActiveBrokerInterval",
            self.scan_not_active_broker_interval,
            1,
            3_600_000,
        )?;
        range(
            "brokerChannelExpiredTime",
            self.broker_channel_expired_time,
            1,
            86_400_000,
        )?;
        for (key, value) in [
            ("maxConnections", self.max_connections),
            ("maxConnectionsPerAddress", self.max_connections_per_address),
        ] {
            if value == 0 {
                return Err(ConfigError {
                    key,
                    value: value.to_string(),
                    allowed: "at least 1 (connections)".into(),
                });
            }
        }
        Ok(())
    }
}

fn range(key: &'static str, value: u64, min: u64, max: u64) -> Result<(), ConfigError> {
    if value < min || value > max {
        return Err(ConfigError {
            key,
            value: value.to_string(),
            allowed: format!("{min}..={max} (milliseconds)"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_that_cannot_work_are_refused_naming_the_key() {
        let with = |mode: &str, cert: Option<&str>, need: &str| NamesrvConfig {
            tls_server_mode: mode.into(),
            tls_server_cert_path: cert.map(PathBuf::from),
            tls_server_key_path: cert.map(PathBuf::from),
            tls_server_need_client_auth: need.into(),
            ..NamesrvConfig::default()
        };
        assert!(with("disabled", None, "none")
            .server_tls()
            .unwrap()
            .is_none());
        for (config, key) in [
            (with("sometimes", None, "none"), "tlsServerMode"),
            (with("enforcing", None, "none"), "tlsServerCertPath"),
            (
                with("enforcing", Some("/x.pem"), "require"),
                "tlsServerNeedClientAuth",
            ),
            (
                with("enforcing", Some("/no/such.pem"), "none"),
                "tlsServerCertPath",
            ),
        ] {
            let err = config.validate().unwrap_err();
            assert_eq!(err.key, key, "{err}");
        }
    }

    #[test]
    fn authentication_needs_the_cluster_credentials_and_does_not_echo_them() {
        let on = |credentials: &str| NamesrvConfig {
            authentication_enabled: true,
            inner_client_authentication_credentials: credentials.into(),
            ..NamesrvConfig::default()
        };
        let c = on(r#"{"accessKey":"cluster","secretKey":"s3cret"}"#);
        c.validate().unwrap();
        assert_eq!(
            c.cluster_credentials().unwrap().unwrap().access_key,
            "cluster"
        );
        for bad in ["", "s3cret", r#"{"accessKey":"cluster"}"#] {
            let err = on(bad).validate().unwrap_err();
            assert_eq!(err.key, "innerClientAuthenticationCredentials");
            assert!(!err.to_string().contains("s3cret"), "{err}");
        }
        let off = NamesrvConfig {
            inner_client_authentication_credentials: "anything".into(),
            ..NamesrvConfig::default()
        };
        assert_eq!(off.cluster_credentials().unwrap(), None);
    }

    #[test]
    fn defaults_are_rocketmq_defaults_and_valid() {
        let c = NamesrvConfig::default();
        assert_eq!(c.listen_port, 9876);
        assert_eq!(c.scan_interval(), Duration::from_secs(5));
        assert_eq!(c.broker_expiry(), Duration::from_secs(120));
        assert!(!c.delete_topic_with_broker_registration);
        assert_eq!(
            (c.max_connections, c.max_connections_per_address),
            (10_000, 1_000)
        );
        c.validate().unwrap();
        let none = NamesrvConfig {
            max_connections_per_address: 0,
            ..NamesrvConfig::default()
        };
        assert_eq!(none.validate().unwrap_err().key, "maxConnectionsPerAddress");
    }

    #[test]
    fn keys_are_camel_case_and_unknown_keys_are_refused() {
        let c: NamesrvConfig = serde_json::from_str(
            r#"{"listenPort":19876,"scanNotActiveBrokerInterval":1000,"brokerChannelExpiredTime":3000,"deleteTopicWithBrokerRegistration":true}"#,
        )
        .unwrap();
        assert_eq!(c.listen_port, 19876);
        assert_eq!(c.scan_not_active_broker_interval, 1000);
        assert_eq!(c.broker_channel_expired_time, 3000);
        assert!(c.delete_topic_with_broker_registration);
        let partial: NamesrvConfig = serde_json::from_str(r#"{"listenPort":0}"#).unwrap();
        assert_eq!(partial.broker_channel_expired_time, 120_000);
        let err = serde_json::from_str::<NamesrvConfig>(r#"{"listenPrt":1}"#).unwrap_err();
        assert!(err.to_string().contains("listenPrt"), "{err}");
    }

    #[test]
    fn validation_names_the_key_the_value_and_the_range() {
        let c = NamesrvConfig {
            scan_not_active_broker_interval: 0,
            ..NamesrvConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "scanNotActiveBrokerInterval");
        let c = NamesrvConfig {
            broker_channel_expired_time: 100_000_000,
            ..NamesrvConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "brokerChannelExpiredTime");
        assert_eq!(
            err.to_string(),
            "invalid value 100000000 for `brokerChannelExpiredTime`: 1..=86400000 (milliseconds)"
        );
    }
}
