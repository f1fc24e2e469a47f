//! A controller's settings, and the peers' list in RocketMQ's
//! `controllerDLegerPeers` form (`n0-127.0.0.1:9878;n1-127.0.0.1:9868`).

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use thiserror::Error;

/// A controller setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid value {value:?} for `{key}`: {allowed}")]
pub struct ControllerConfigError {
    /// The key, as written in a configuration file.
    pub key: &'static str,
    /// The offending value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

/// One controller among its peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddr {
    /// Its name, as the peers' list gives it (`n0`).
    pub name: String,
    /// Its controller port's address.
    pub addr: String,
}

/// Settings of one controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// The controllers' group name (`controllerDLegerGroup`).
    pub group: String,
    /// Every controller by node id (its position in the peers' list).
    pub peers: BTreeMap<u64, PeerAddr>,
    /// This controller's node id.
    pub self_id: u64,
    /// Where the Raft log, vote and snapshot are kept.
    pub store_path: PathBuf,
    /// How often brokers that stopped beating are looked for.
    pub scan_not_active_broker_interval: Duration,
    /// Elect among all members when no in-sync replica is alive
    /// (`enableElectUncleanMaster`): available, and may lose acknowledged
    /// messages.
    pub enable_elect_unclean_master: bool,
    /// Tell a group's brokers at once when its master changes.
    pub notify_broker_role_changed: bool,
    /// How long a master may acknowledge writes after its last heartbeat
    /// was granted; a new master is elected only after the old one's lease
    /// must have run out.
    pub master_lease: Duration,
    /// How often the leader beats to its peers.
    pub raft_heartbeat_interval: Duration,
    /// A follower that hears nothing from the leader for this long (plus up
    /// to the same again, at random) stands for election.
    pub raft_election_timeout: Duration,
}

impl ControllerConfig {
    /// Settings for the peers' list `peers` (`n0-host:port;n1-host:port`)
    /// with this controller named `self_name`, keeping its state in
    /// `store_path`; other settings at their defaults.
    ///
    /// # Errors
    /// When the list does not parse, names a controller twice, or does not
    /// name `self_name`.
    pub fn new(
        group: &str,
        peers: &str,
        self_name: &str,
        store_path: PathBuf,
    ) -> Result<Self, ControllerConfigError> {
        let peers = parse_peers(peers)?;
        let self_id = peers
            .iter()
            .find(|(_, p)| p.name == self_name)
            .map(|(id, _)| *id)
            .ok_or_else(|| ControllerConfigError {
                key: "controllerDLegerSelfId",
                value: self_name.to_owned(),
                allowed: format!(
                    "one of the names in controllerDLegerPeers ({})",
                    peers
                        .values()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        Ok(Self {
            group: if group.is_empty() {
                "sluice-controller".to_owned()
            } else {
                group.to_owned()
            },
            peers,
            self_id,
            store_path,
            scan_not_active_broker_interval: Duration::from_millis(1000),
            enable_elect_unclean_master: false,
            notify_broker_role_changed: true,
            master_lease: Duration::from_millis(3000),
            raft_heartbeat_interval: Duration::from_millis(100),
            raft_election_timeout: Duration::from_millis(500),
        })
    }

    /// This controller's own entry.
    #[must_use]
    pub fn me(&self) -> &PeerAddr {
        &self.peers[&self.self_id]
    }
}

/// Parses `n0-host:port;n1-host:port` into peers numbered by position.
///
/// # Errors
/// When an entry is not `name-host:port`, or a name or address repeats.
pub fn parse_peers(text: &str) -> Result<BTreeMap<u64, PeerAddr>, ControllerConfigError> {
    let error = |allowed: &str| ControllerConfigError {
        key: "controllerDLegerPeers",
        value: text.to_owned(),
        allowed: allowed.to_owned(),
    };
    let mut peers = BTreeMap::new();
    for (id, entry) in text
        .split(';')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
    {
        let (name, addr) = entry
            .split_once('-')
            .filter(|(n, a)| {
                !n.is_empty()
                    && a.rsplit_once(':')
                        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok())
            })
            .ok_or_else(|| {
                error("entries `name-host:port` separated by `;`, such as n0-127.0.0.1:9878")
            })?;
        if peers
            .values()
            .any(|p: &PeerAddr| p.name == name || p.addr == addr)
        {
            return Err(error("each controller's name and address once"));
        }
        peers.insert(
            id as u64,
            PeerAddr {
                name: name.to_owned(),
                addr: addr.to_owned(),
            },
        );
    }
    if peers.is_empty() {
        return Err(error("at least one controller, such as n0-127.0.0.1:9878"));
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_in_rocketmq_form_and_bad_lists_name_the_key() {
        let c = ControllerConfig::new(
            "",
            "n0-127.0.0.1:9878; n1-127.0.0.1:9868;n2-[::1]:9858;",
            "n1",
            PathBuf::from("/x"),
        )
        .unwrap();
        assert_eq!(c.self_id, 1);
        assert_eq!(c.me().addr, "127.0.0.1:9868");
        assert_eq!(c.peers[&2].addr, "[::1]:9858");
        assert_eq!(c.group, "sluice-controller");
        for bad in [
            "",
            "n0",
            "n0-host",
            "n0-host:99999",
            "-h:1",
            "n0-h:1;n0-g:2",
            "n0-h:1;n1-h:1",
        ] {
            let e = parse_peers(bad).unwrap_err();
            assert_eq!(e.key, "controllerDLegerPeers", "{bad}");
        }
        let e = ControllerConfig::new("g", "n0-h:1", "n5", PathBuf::new()).unwrap_err();
        assert_eq!(e.key, "controllerDLegerSelfId");
        assert!(e.to_string().contains("n0"), "{e}");
    }
}
