//! The route registry: which brokers are alive, which clusters they form and
//! which topics they serve. RocketMQ's `RouteInfoManager`, for masters and
//! slaves (no acting-master or controller modes).
//!
//! # Invariants worth naming
//! - A broker name appears in a cluster's set, and topics hold queue data for
//!   it, only while it has at least one address.
//! - A topic is known only while at least one broker name holds queue data
//!   for it.
//! - One address has one broker id within its broker name: a slave promoted
//!   to master re-registers its address under id 0 and loses its old id.
//! - Only masters (broker id 0) create or change queue data; slaves add
//!   addresses only.
//! - A master's registration rewrites the queue data of a topic it lists
//!   only when its topic-config data version differs from the one its
//!   address registered last, when the topic has no queue data of that
//!   broker yet, or on the broker's first registration (RocketMQ's rule).
//!   So a write permission wiped or added by an admin tool holds until the
//!   broker's topic configuration changes.
//!
//! # Differences from RocketMQ
//! - Live brokers are keyed by address alone, not by cluster and address: one
//!   address is one broker process.
//! - A broker that is not registered yet may register with a single topic;
//!   RocketMQ refuses that ("register broker failed") to catch incremental
//!   registrations that arrive after the broker expired.
//! - A `heartbeatTimeoutMillis` of zero or less means the default expiry;
//!   RocketMQ would expire such a broker at the next scan.
//! - Zone names, acting masters, static-topic mappings and the min-broker-id
//!   notification are not supported.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::{PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard},
    time::{Duration, Instant},
};

use message_model::flags::{MASTER_ID, PERM_READ, PERM_WRITE};
use remoting_protocol::{
    body::{BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerBody, TopicRouteData},
    header::{RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader},
};

use crate::config::NamesrvConfig;

/// What a broker learns from registering: where its master is, for a slave.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegisterResult {
    /// Address of the master (broker id 0) of the same broker name, when the
    /// registering broker is a slave and the master is registered.
    pub master_addr: Option<String>,
    /// HA server address the master registered with, alongside `master_addr`.
    pub ha_server_addr: Option<String>,
}

/// The name server's route tables, shared by request handling and the
/// expiry scan. Every method takes `&self` and is safe to call from many
/// threads.
#[derive(Debug)]
pub struct RouteRegistry {
    tables: RwLock<Tables>,
    default_expiry: Duration,
    delete_unlisted_topics: bool,
}

#[derive(Debug, Default)]
struct Tables {
    /// Topic to broker name to that broker's queues of the topic.
    topics: HashMap<String, BTreeMap<String, QueueData>>,
    /// Broker name to its cluster and addresses.
    brokers: BTreeMap<String, BrokerData>,
    /// Cluster name to its broker names.
    clusters: BTreeMap<String, BTreeSet<String>>,
    /// Broker address to the state of its registration.
    live: HashMap<String, LiveBroker>,
}

/// One registered broker address.
#[derive(Debug)]
struct LiveBroker {
    cluster: String,
    broker_name: String,
    last_update: Instant,
    timeout: Duration,
    data_version: DataVersion,
    conn: Option<u64>,
    ha_server_addr: String,
    filter_servers: Vec<String>,
}

impl LiveBroker {
    fn expired(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_update) > self.timeout
    }
}

impl Default for RouteRegistry {
    fn default() -> Self {
        Self::from_config(&NamesrvConfig::default())
    }
}

impl RouteRegistry {
    /// An empty registry with RocketMQ's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty registry that takes its default broker expiry and its topic
    /// deletion rule from `config`.
    pub fn from_config(config: &NamesrvConfig) -> Self {
        Self {
            tables: RwLock::default(),
            default_expiry: config.broker_expiry(),
            delete_unlisted_topics: config.delete_topic_with_broker_registration,
        }
    }

    /// Registers or renews a broker address at `now`. `conn` identifies the
    /// connection the registration arrived on, so that closing it removes the
    /// broker (see [`RouteRegistry::connection_closed`]).
    ///
    /// A master's registration creates or replaces its queue data for every
    /// topic it lists, except, when its data version is the one this address
    /// registered last, for topics that already hold queue data of the
    /// broker (which keeps a wiped or added write permission). With
    /// `deleteTopicWithBrokerRegistration` it also drops its queue data from
    /// topics it no longer lists (RocketMQ's rule, off by default there and
    /// here). A slave's topics are ignored.
    ///
    /// When another address already holds the same broker id with a newer
    /// `stateVersion`, the registration is ignored and the result is empty,
    /// as in RocketMQ.
    pub fn register_broker(
        &self,
        header: &RegisterBrokerRequestHeader,
        body: &RegisterBrokerBody,
        now: Instant,
        conn: Option<u64>,
    ) -> RegisterResult {
        let cluster = &header.cluster_name;
        let name = &header.broker_name;
        let addr = &header.broker_addr;
        let id = header.broker_id;
        let wrapper = &body.topic_config_serialize_wrapper;

        let mut guard = self.write();
        let Tables {
            topics,
            brokers,
            clusters,
            live,
        } = &mut *guard;

        clusters
            .entry(cluster.clone())
            .or_default()
            .insert(name.clone());
        let new_name = !brokers.contains_key(name);
        let broker = brokers.entry(name.clone()).or_insert_with(|| BrokerData {
            cluster: cluster.clone(),
            broker_name: name.clone(),
            ..BrokerData::default()
        });
        broker.enable_acting_master = header.enable_acting_master.unwrap_or(false);
        broker
            .broker_addrs
            .retain(|&other_id, other_addr| other_id == id || other_addr != addr);

        if let Some(old_addr) = broker.broker_addrs.get(&id).filter(|a| *a != addr) {
            let old_version = live.get(old_addr).map(|l| l.data_version.state_version);
            if old_version > Some(wrapper.data_version.state_version) {
                tracing::warn!(
                    cluster = %cluster,
                    broker_name = %name,
                    broker_id = id,
                    old_addr = %old_addr,
                    new_addr = %addr,
                    "registration ignored: another address holds this broker id with a newer state version"
                );
                live.remove(addr);
                return RegisterResult::default();
            }
        }
        let id_was_free = broker
            .broker_addrs
            .insert(id, addr.clone())
            .is_none_or(|old| old.is_empty());
        let register_first = new_name || id_was_free;
        let version_changed = live.get(addr).map(|l| l.data_version) != Some(wrapper.data_version);

        if id == MASTER_ID {
            let listed = &wrapper.topic_config_table;
            if self.delete_unlisted_topics && wrapper.topic_queue_mapping_info_map.is_empty() {
                topics.retain(|topic, queues| {
                    if !listed.contains_key(topic) && queues.remove(name).is_some() {
                        tracing::info!(topic = %topic, broker_name = %name, "topic no longer on broker");
                    }
                    !queues.is_empty()
                });
            }
            for (topic, config) in listed {
                let has_queue_data = topics.get(topic).is_some_and(|q| q.contains_key(name));
                if !register_first && !version_changed && has_queue_data {
                    continue;
                }
                let queue = QueueData {
                    broker_name: name.clone(),
                    read_queue_nums: config.read_queue_nums,
                    write_queue_nums: config.write_queue_nums,
                    perm: config.perm,
                    topic_sys_flag: config.topic_sys_flag,
                };
                topics
                    .entry(topic.clone())
                    .or_default()
                    .insert(name.clone(), queue);
            }
        }

        let timeout = header
            .heartbeat_timeout_millis
            .and_then(|ms| u64::try_from(ms).ok())
            .filter(|&ms| ms > 0)
            .map_or(self.default_expiry, Duration::from_millis);
        let previous = live.insert(
            addr.clone(),
            LiveBroker {
                cluster: cluster.clone(),
                broker_name: name.clone(),
                last_update: now,
                timeout,
                data_version: wrapper.data_version,
                conn,
                ha_server_addr: header.ha_server_addr.clone(),
                filter_servers: body.filter_server_list.clone(),
            },
        );
        if previous.is_none() {
            tracing::info!(
                cluster = %cluster,
                broker_name = %name,
                broker_id = id,
                broker_addr = %addr,
                ha_server_addr = %header.ha_server_addr,
                "new broker registered"
            );
        }

        if id == MASTER_ID {
            return RegisterResult::default();
        }
        let Some(master_addr) = broker.broker_addrs.get(&MASTER_ID) else {
            return RegisterResult::default();
        };
        match live.get(master_addr) {
            Some(master) => RegisterResult {
                master_addr: Some(master_addr.clone()),
                ha_server_addr: Some(master.ha_server_addr.clone()),
            },
            None => RegisterResult::default(),
        }
    }

    /// Removes a broker address. When its broker name has no address left,
    /// the name leaves its cluster and its queue data leaves every topic;
    /// topics left without queue data are forgotten. Returns whether the
    /// address was registered.
    pub fn unregister_broker(&self, header: &UnregisterBrokerRequestHeader) -> bool {
        let mut tables = self.write();
        let was_live = tables.live.remove(&header.broker_addr).is_some();
        let was_listed = tables.remove_addr(&header.broker_name, &header.broker_addr);
        tracing::info!(
            cluster = %header.cluster_name,
            broker_name = %header.broker_name,
            broker_addr = %header.broker_addr,
            known = was_live || was_listed,
            "broker unregistered"
        );
        was_live || was_listed
    }

    /// The route of `topic`: its queue data per broker name and the
    /// addresses of those brokers, both sorted by broker name. `None` when no
    /// broker serves the topic.
    pub fn route(&self, topic: &str) -> Option<TopicRouteData> {
        let tables = self.read();
        let queues = tables.topics.get(topic)?;
        let broker_datas: Vec<BrokerData> = queues
            .keys()
            .filter_map(|name| tables.brokers.get(name).cloned())
            .collect();
        if broker_datas.is_empty() {
            return None;
        }
        let filter_server_table = broker_datas
            .iter()
            .flat_map(|broker| broker.broker_addrs.values())
            .filter_map(|addr| {
                let live = tables.live.get(addr)?;
                (!live.filter_servers.is_empty())
                    .then(|| (addr.clone(), live.filter_servers.clone()))
            })
            .collect();
        Some(TopicRouteData {
            queue_datas: queues.values().cloned().collect(),
            broker_datas,
            filter_server_table,
            ..TopicRouteData::default()
        })
    }

    /// Every broker name with its addresses, and every cluster with its
    /// broker names.
    pub fn cluster_info(&self) -> ClusterInfo {
        let tables = self.read();
        ClusterInfo {
            broker_addr_table: tables.brokers.clone(),
            cluster_addr_table: tables.clusters.clone(),
        }
    }

    /// Every known topic, sorted.
    pub fn topic_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.read().topics.keys().cloned().collect();
        names.sort_unstable();
        names
    }

    /// The topics that hold queue data of some broker name of `cluster`,
    /// sorted; empty for an unknown cluster.
    pub fn cluster_topic_names(&self, cluster: &str) -> Vec<String> {
        let tables = self.read();
        let Some(names) = tables.clusters.get(cluster) else {
            return Vec::new();
        };
        let mut topics: Vec<String> = tables
            .topics
            .iter()
            .filter(|(_, queues)| queues.keys().any(|name| names.contains(name)))
            .map(|(topic, _)| topic.clone())
            .collect();
        topics.sort_unstable();
        topics
    }

    /// Forgets `topic`: all its queue data, or with `cluster` only the queue
    /// data of that cluster's broker names (the topic is forgotten when none
    /// is left). Returns whether any queue data was removed. A broker that
    /// still has the topic brings it back with its next registration.
    pub fn delete_topic(&self, topic: &str, cluster: Option<&str>) -> bool {
        let mut guard = self.write();
        let Tables {
            topics, clusters, ..
        } = &mut *guard;
        let removed = match cluster {
            None => topics.remove(topic).is_some(),
            Some(cluster) => {
                let (Some(names), Some(queues)) = (clusters.get(cluster), topics.get_mut(topic))
                else {
                    return false;
                };
                let before = queues.len();
                queues.retain(|name, _| !names.contains(name));
                let removed = queues.len() != before;
                if queues.is_empty() {
                    topics.remove(topic);
                }
                removed
            }
        };
        tracing::info!(
            topic,
            cluster = cluster.unwrap_or(""),
            removed,
            "topic deleted"
        );
        removed
    }

    /// Clears the write bit of every queue data of broker `broker_name`, so
    /// that routes stop offering it for sending. Returns how many topics hold
    /// queue data of the broker. Lasts until the broker registers a changed
    /// topic configuration.
    pub fn wipe_write_perm(&self, broker_name: &str) -> i32 {
        let count = self.set_perm(broker_name, |perm| perm & !PERM_WRITE);
        tracing::info!(broker_name, topics = count, "write permission wiped");
        count
    }

    /// Gives every queue data of broker `broker_name` read and write
    /// permission (6). Returns how many topics hold queue data of the
    /// broker. Lasts until the broker registers a changed topic
    /// configuration.
    pub fn add_write_perm(&self, broker_name: &str) -> i32 {
        let count = self.set_perm(broker_name, |_| PERM_READ | PERM_WRITE);
        tracing::info!(broker_name, topics = count, "write permission added");
        count
    }

    fn set_perm(&self, broker_name: &str, change: impl Fn(i32) -> i32) -> i32 {
        let mut tables = self.write();
        let mut count = 0i32;
        for queue in tables
            .topics
            .values_mut()
            .filter_map(|queues| queues.get_mut(broker_name))
        {
            queue.perm = change(queue.perm);
            count = count.saturating_add(1);
        }
        count
    }

    /// Removes, as [`RouteRegistry::unregister_broker`] does, every broker
    /// whose last registration plus its timeout lies before `now`, and
    /// returns their addresses.
    pub fn scan_expired(&self, now: Instant) -> Vec<String> {
        if !self.read().live.values().any(|l| l.expired(now)) {
            return Vec::new();
        }
        let mut tables = self.write();
        let expired: Vec<String> = tables
            .live
            .iter()
            .filter(|(_, l)| l.expired(now))
            .map(|(addr, _)| addr.clone())
            .collect();
        for addr in &expired {
            if let Some(live) = tables.remove_live(addr) {
                tracing::warn!(
                    cluster = %live.cluster,
                    broker_name = %live.broker_name,
                    broker_addr = %addr,
                    timeout_ms = u64::try_from(live.timeout.as_millis()).unwrap_or(u64::MAX),
                    "broker registration expired"
                );
            }
        }
        expired
    }

    /// Removes, as [`RouteRegistry::unregister_broker`] does, every broker
    /// whose latest registration arrived over connection `conn`, and returns
    /// their addresses.
    pub fn connection_closed(&self, conn: u64) -> Vec<String> {
        let mut tables = self.write();
        let gone: Vec<String> = tables
            .live
            .iter()
            .filter(|(_, l)| l.conn == Some(conn))
            .map(|(addr, _)| addr.clone())
            .collect();
        for addr in &gone {
            if let Some(live) = tables.remove_live(addr) {
                tracing::info!(
                    cluster = %live.cluster,
                    broker_name = %live.broker_name,
                    broker_addr = %addr,
                    conn,
                    "broker connection closed"
                );
            }
        }
        gone
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        // No code panics while holding the lock; if some did, the tables are
        // still consistent between statements, so keep serving.
        self.tables.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables.write().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Tables {
    /// Removes a live address and the address from its broker name.
    fn remove_live(&mut self, addr: &str) -> Option<LiveBroker> {
        let live = self.live.remove(addr)?;
        self.remove_addr(&live.broker_name, addr);
        Some(live)
    }

    /// Removes `addr` from broker `name`; when the name has no address left,
    /// removes the name from every cluster and every topic. Returns whether
    /// the name listed the address.
    fn remove_addr(&mut self, name: &str, addr: &str) -> bool {
        let Some(broker) = self.brokers.get_mut(name) else {
            return false;
        };
        let before = broker.broker_addrs.len();
        broker.broker_addrs.retain(|_, a| a != addr);
        let listed = broker.broker_addrs.len() != before;
        if broker.broker_addrs.is_empty() {
            self.brokers.remove(name);
            self.clusters.retain(|_, names| {
                names.remove(name);
                !names.is_empty()
            });
            self.topics.retain(|_, queues| {
                queues.remove(name);
                !queues.is_empty()
            });
            tracing::info!(broker_name = %name, "broker name has no address left; its queues are gone");
        }
        listed
    }
}

#[cfg(test)]
mod tests;
