//! Clients known from their heartbeats: producer and consumer groups, with
//! the connection each client uses and when it was last heard from.

use std::time::{Duration, Instant};

use dashmap::DashMap;
use remoting_protocol::body::HeartbeatData;

/// One client's registration.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Client id.
    pub client_id: String,
    /// Connection the client uses.
    pub conn_id: u64,
    /// Producer groups.
    pub producer_groups: Vec<String>,
    /// Consumer groups.
    pub consumer_groups: Vec<String>,
    /// Last heartbeat.
    pub last_seen: Instant,
}

/// Clients by id.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    clients: DashMap<String, ClientInfo>,
}

impl ClientRegistry {
    /// Records a heartbeat.
    pub fn heartbeat(&self, data: &HeartbeatData, conn_id: u64, now: Instant) {
        let info = ClientInfo {
            client_id: data.client_id.clone(),
            conn_id,
            producer_groups: data
                .producer_data_set
                .iter()
                .map(|p| p.group_name.clone())
                .collect(),
            consumer_groups: data
                .consumer_data_set
                .iter()
                .map(|c| c.group_name.clone())
                .collect(),
            last_seen: now,
        };
        if self.clients.insert(data.client_id.clone(), info).is_none() {
            tracing::info!(client = %data.client_id, conn = conn_id, "client registered");
        }
    }

    /// Forgets a client (all groups, or the named ones). An empty group
    /// name counts as none: the C++ client names both groups and leaves the
    /// one it does not mean empty.
    pub fn unregister(
        &self,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) {
        let producer_group = producer_group.filter(|g| !g.is_empty());
        let consumer_group = consumer_group.filter(|g| !g.is_empty());
        if producer_group.is_none() && consumer_group.is_none() {
            self.clients.remove(client_id);
            return;
        }
        if let Some(mut c) = self.clients.get_mut(client_id) {
            if let Some(g) = producer_group {
                c.producer_groups.retain(|p| p != g);
            }
            if let Some(g) = consumer_group {
                c.consumer_groups.retain(|p| p != g);
            }
        }
    }

    /// Ids of the clients in a consumer group, sorted.
    pub fn consumers_of(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .clients
            .iter()
            .filter(|c| c.consumer_groups.iter().any(|g| g == group))
            .map(|c| c.client_id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Forgets the clients of a closed connection.
    pub fn connection_closed(&self, conn_id: u64) {
        self.clients.retain(|_, c| c.conn_id != conn_id);
    }

    /// Forgets clients silent for longer than `max_idle`; returns their ids.
    pub fn expire(&self, now: Instant, max_idle: Duration) -> Vec<String> {
        let mut gone = Vec::new();
        self.clients.retain(|id, c| {
            let keep = now.saturating_duration_since(c.last_seen) <= max_idle;
            if !keep {
                gone.push(id.clone());
            }
            keep
        });
        gone
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Reports whether no client is known.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{ConsumerData, ProducerData};

    use super::*;

    fn heartbeat(registry: &ClientRegistry) {
        let data = HeartbeatData {
            client_id: "c1".into(),
            producer_data_set: vec![ProducerData {
                group_name: "PG".into(),
            }],
            consumer_data_set: vec![ConsumerData {
                group_name: "G".into(),
                ..ConsumerData::default()
            }],
            ..HeartbeatData::default()
        };
        registry.heartbeat(&data, 1, Instant::now());
    }

    #[test]
    fn an_empty_group_name_in_an_unregistration_means_none() {
        let registry = ClientRegistry::default();
        heartbeat(&registry);
        // The C++ client's "unregister consumer G".
        registry.unregister("c1", Some(""), Some("G"));
        assert!(registry.consumers_of("G").is_empty());
        let c = registry
            .clients
            .get("c1")
            .map(|c| c.producer_groups.clone());
        assert_eq!(c, Some(vec!["PG".to_owned()]), "the producer group stays");
        registry.unregister("c1", None, None);
        assert!(registry.clients.get("c1").is_none());
    }
}
