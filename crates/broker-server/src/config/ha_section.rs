//! Replication settings (`HaSection`), with RocketMQ's key names: the
//! broker's role in its group and how it replicates its CommitLog.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{invalid, ConfigError};

/// A broker's role in its group (`brokerRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum BrokerRole {
    /// A master that acknowledges sends without waiting for its slaves.
    #[default]
    AsyncMaster,
    /// A master that acknowledges a send only once every in-sync slave
    /// holds it, and shows consumers only what every in-sync slave holds.
    SyncMaster,
    /// A read-only copy of its group's master.
    Slave,
}

/// Replication settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct HaSection {
    /// `ASYNC_MASTER` (default), `SYNC_MASTER` or `SLAVE`. A master has
    /// `brokerId` 0, a slave a positive one.
    pub broker_role: BrokerRole,
    /// Port a master serves its slaves on; 0 means `listenPort` + 1.
    /// Default 0.
    pub ha_listen_port: u16,
    /// A slave's master, `host:port` of its HA port. Default: what the
    /// name server answers to the slave's registration.
    pub ha_master_address: Option<String>,
    /// A side that sent nothing for this long sends a heartbeat (ms).
    /// Default 5000; 100..=60000.
    pub ha_send_heartbeat_interval: u64,
    /// A replication connection silent this long is closed (ms). Default
    /// 20000; more than `haSendHeartbeatInterval`, at most 600000.
    pub ha_housekeeping_interval: u64,
    /// Most CommitLog bytes per transfer. Default 32768; 1024..=4194304.
    pub ha_transfer_batch_size: usize,
    /// How long a `SYNC_MASTER` send waits for its in-sync slaves before it
    /// answers `FLUSH_SLAVE_TIMEOUT` (ms). Default 3000; 1..=60000.
    pub slave_timeout: u64,
    /// A slave that replicates but never joins the in-sync set (its
    /// acknowledgements hold nothing back). Default false.
    pub async_learner: bool,
    /// An empty slave starts from its master's newest CommitLog file
    /// instead of its oldest. Default false.
    pub sync_from_last_file: bool,
    /// The replication framing of a group without a controller:
    /// `autoSwitch` (RocketMQ's controller-mode frames: handshake, epochs,
    /// confirm offset; a returning old master cuts what it alone wrote) or
    /// `classic` (RocketMQ's `DefaultHAService` frames, which RocketMQ's
    /// classic brokers speak: no epochs, so nothing is cut, and a slave
    /// shows its consumers all it received). Master and slaves must agree.
    /// Default `autoSwitch`.
    pub ha_framing: String,
    /// The group's master is elected by the replication controllers
    /// (`controllerAddr`), not set by `brokerRole` and `brokerId`. Default
    /// false.
    pub enable_controller_mode: bool,
    /// The controllers, `host:port` separated by `;`: their controller
    /// ports, or the ports of the name servers that host them. Needed with
    /// `enableControllerMode`.
    pub controller_addr: String,
    /// How often a broker in controller mode asks the controller who its
    /// master is (ms); it also asks at once when told of a change. Default
    /// 5000; 100..=60000.
    pub sync_broker_metadata_period: u64,
    /// How often a master in controller mode reviews its in-sync replica
    /// set (ms). Default 5000; 100..=60000.
    pub check_sync_state_set_period: u64,
    /// How often a broker in controller mode beats to every controller
    /// (ms). Default 1000; 100..=10000.
    pub broker_heartbeat_interval: u64,
    /// How long the controllers count a broker alive without a beat (ms).
    /// Default 10000; more than `brokerHeartbeatInterval`, at most 600000.
    pub controller_heart_beat_timeout_mills: u64,
    /// Lower is preferred when the controller elects among equally
    /// advanced replicas. Default 2147483647.
    pub broker_election_priority: i32,
    /// A slave that has not caught up with the master for this long leaves
    /// the in-sync set (ms); a slave that disconnects leaves at once.
    /// Default 15000; 1000..=600000.
    pub ha_max_time_slave_not_catchup: u64,
}

impl Default for HaSection {
    fn default() -> Self {
        Self {
            broker_role: BrokerRole::AsyncMaster,
            ha_listen_port: 0,
            ha_master_address: None,
            ha_send_heartbeat_interval: 5000,
            ha_housekeeping_interval: 20_000,
            ha_transfer_batch_size: 32 * 1024,
            slave_timeout: 3000,
            async_learner: false,
            sync_from_last_file: false,
            ha_framing: "autoSwitch".into(),
            enable_controller_mode: false,
            controller_addr: String::new(),
            sync_broker_metadata_period: 5000,
            check_sync_state_set_period: 5000,
            broker_heartbeat_interval: 1000,
            controller_heart_beat_timeout_mills: 10_000,
            broker_election_priority: i32::MAX,
            ha_max_time_slave_not_catchup: 15_000,
        }
    }
}

impl HaSection {
    /// Checks every value, naming the first bad key.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`].
    pub fn validate(&self, broker_id: i64) -> Result<(), ConfigError> {
        match self.ha_framing.as_str() {
            "autoSwitch" => {}
            "classic" if !self.enable_controller_mode => {}
            "classic" => {
                return Err(invalid(
                    "haFraming",
                    self.ha_framing.clone(),
                    "autoSwitch in controller mode (elections need the epochs)".into(),
                ))
            }
            other => {
                return Err(invalid(
                    "haFraming",
                    other.to_owned(),
                    "autoSwitch or classic".into(),
                ))
            }
        }
        if self.enable_controller_mode {
            self.validate_controller_mode()?;
        }
        match self.broker_role {
            // The controller assigns ids and roles.
            _ if self.enable_controller_mode => {}
            BrokerRole::Slave if broker_id <= 0 => {
                return Err(invalid(
                    "brokerId",
                    broker_id.to_string(),
                    "a positive id for a SLAVE (0 is the master's)".into(),
                ))
            }
            BrokerRole::AsyncMaster | BrokerRole::SyncMaster if broker_id != 0 => {
                return Err(invalid(
                    "brokerId",
                    broker_id.to_string(),
                    "0 for a master (brokerRole ASYNC_MASTER or SYNC_MASTER)".into(),
                ))
            }
            _ => {}
        }
        if !(100..=60_000).contains(&self.ha_send_heartbeat_interval) {
            return Err(invalid(
                "haSendHeartbeatInterval",
                self.ha_send_heartbeat_interval.to_string(),
                "100..=60000 ms".into(),
            ));
        }
        if self.ha_housekeeping_interval <= self.ha_send_heartbeat_interval
            || self.ha_housekeeping_interval > 600_000
        {
            return Err(invalid(
                "haHousekeepingInterval",
                self.ha_housekeeping_interval.to_string(),
                format!(
                    "more than haSendHeartbeatInterval ({}) and at most 600000 ms",
                    self.ha_send_heartbeat_interval
                ),
            ));
        }
        if !(1024..=4 * 1024 * 1024).contains(&self.ha_transfer_batch_size) {
            return Err(invalid(
                "haTransferBatchSize",
                self.ha_transfer_batch_size.to_string(),
                "1024..=4194304 bytes".into(),
            ));
        }
        if !(1..=60_000).contains(&self.slave_timeout) {
            return Err(invalid(
                "slaveTimeout",
                self.slave_timeout.to_string(),
                "1..=60000 ms".into(),
            ));
        }
        if let Some(addr) = &self.ha_master_address {
            if addr
                .rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err())
            {
                return Err(invalid("haMasterAddress", addr.clone(), "host:port".into()));
            }
        }
        Ok(())
    }

    fn validate_controller_mode(&self) -> Result<(), ConfigError> {
        if self.controller_addrs().is_empty() {
            return Err(invalid(
                "controllerAddr",
                self.controller_addr.clone(),
                "the controllers' host:port, separated by `;`, needed with enableControllerMode"
                    .into(),
            ));
        }
        if let Some(bad) = self.controller_addrs().into_iter().find(|a| {
            a.rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        }) {
            return Err(invalid(
                "controllerAddr",
                bad,
                "host:port entries separated by `;`".into(),
            ));
        }
        for (key, value, min, max) in [
            (
                "syncBrokerMetadataPeriod",
                self.sync_broker_metadata_period,
                100,
                60_000,
            ),
            (
                "checkSyncStateSetPeriod",
                self.check_sync_state_set_period,
                100,
                60_000,
            ),
            (
                "brokerHeartbeatInterval",
                self.broker_heartbeat_interval,
                100,
                10_000,
            ),
            (
                "haMaxTimeSlaveNotCatchup",
                self.ha_max_time_slave_not_catchup,
                1000,
                600_000,
            ),
        ] {
            if !(min..=max).contains(&value) {
                return Err(invalid(key, value.to_string(), format!("{min}..={max} ms")));
            }
        }
        if self.controller_heart_beat_timeout_mills <= self.broker_heartbeat_interval
            || self.controller_heart_beat_timeout_mills > 600_000
        {
            return Err(invalid(
                "controllerHeartBeatTimeoutMills",
                self.controller_heart_beat_timeout_mills.to_string(),
                format!(
                    "more than brokerHeartbeatInterval ({}) and at most 600000 ms",
                    self.broker_heartbeat_interval
                ),
            ));
        }
        Ok(())
    }

    /// The controllers' addresses (`controllerAddr`).
    pub fn controller_addrs(&self) -> Vec<String> {
        self.controller_addr
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Whether the CommitLog is replicated with consumers held at the
    /// confirm offset (a SYNC master, every slave, and every broker in
    /// controller mode).
    pub fn replicated_store(&self) -> bool {
        self.enable_controller_mode || self.broker_role != BrokerRole::AsyncMaster
    }

    /// The replication service's settings for broker `broker_id`.
    pub fn settings(&self, broker_id: i64) -> replication::HaSettings {
        replication::HaSettings {
            transfer_batch_size: self.ha_transfer_batch_size,
            heartbeat_interval: Duration::from_millis(self.ha_send_heartbeat_interval),
            housekeeping_interval: Duration::from_millis(self.ha_housekeeping_interval),
            broker_id,
            async_learner: self.async_learner,
            sync_from_last_file: self.sync_from_last_file,
            manage_in_sync_set: false,
            classic: self.ha_framing == "classic",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_and_ids_must_agree() {
        let slave = HaSection {
            broker_role: BrokerRole::Slave,
            ..HaSection::default()
        };
        assert!(slave.validate(1).is_ok());
        let err = slave.validate(0).unwrap_err().to_string();
        assert!(err.contains("brokerId") && err.contains("SLAVE"), "{err}");
        let err = HaSection::default().validate(2).unwrap_err().to_string();
        assert!(err.contains("brokerId"), "{err}");
    }

    #[test]
    fn bad_values_name_their_key() {
        for (section, key) in [
            (
                HaSection {
                    ha_housekeeping_interval: 5000,
                    ..HaSection::default()
                },
                "haHousekeepingInterval",
            ),
            (
                HaSection {
                    ha_transfer_batch_size: 10,
                    ..HaSection::default()
                },
                "haTransferBatchSize",
            ),
            (
                HaSection {
                    slave_timeout: 0,
                    ..HaSection::default()
                },
                "slaveTimeout",
            ),
            (
                HaSection {
                    ha_master_address: Some("nohost".into()),
                    ..HaSection::default()
                },
                "haMasterAddress",
            ),
            (
                HaSection {
                    ha_send_heartbeat_interval: 10,
                    ..HaSection::default()
                },
                "haSendHeartbeatInterval",
            ),
            (
                HaSection {
                    enable_controller_mode: true,
                    ..HaSection::default()
                },
                "controllerAddr",
            ),
            (
                HaSection {
                    ha_framing: "dledger".into(),
                    ..HaSection::default()
                },
                "haFraming",
            ),
            (
                HaSection {
                    ha_framing: "classic".into(),
                    enable_controller_mode: true,
                    controller_addr: "h:1".into(),
                    ..HaSection::default()
                },
                "haFraming",
            ),
            (
                HaSection {
                    enable_controller_mode: true,
                    controller_addr: "h:1;nohost".into(),
                    ..HaSection::default()
                },
                "controllerAddr",
            ),
            (
                HaSection {
                    enable_controller_mode: true,
                    controller_addr: "h:1".into(),
                    controller_heart_beat_timeout_mills: 500,
                    ..HaSection::default()
                },
                "controllerHeartBeatTimeoutMills",
            ),
        ] {
            let err = section.validate(0).unwrap_err().to_string();
            assert!(err.contains(key), "{err}");
        }
    }
}
