//! Registration with the brokers: every producer sends `HEART_BEAT` with its
//! client id and producer group to the master of every broker in its cached
//! routes, so that brokers list it among the group's producers
//! (`GET_PRODUCER_CONNECTION_LIST`, `GET_ALL_PRODUCER_INFO`) and can send a
//! transactional producer `CHECK_TRANSACTION_STATE`.
//!
//! Heartbeats go out at start (to the brokers of the registration topics
//! and of routes already cached), every `heartbeatBrokerInterval`, and soon
//! after a send had to look a route up (to the brokers of the new route
//! that have not had one on their current connection). A send never waits
//! for a heartbeat: the lookup only wakes the heartbeat task.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex, PoisonError, Weak,
    },
};

use bytes::Bytes;
use client_core::{CallError, Deadline};
use remoting_net::{client::ClientConnection, CancellationToken};
use remoting_protocol::{
    body::{self, HeartbeatData, ProducerData},
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::{sync::Notify, time::Instant};

use crate::{send::Inner, ProducerError};

/// Numbers the producers of this process, for client ids.
static INSTANCE: AtomicU64 = AtomicU64::new(0);

/// A producer's registration with the brokers: its identity and which
/// connection each broker last had a heartbeat on.
#[derive(Debug)]
pub(crate) struct Registration {
    /// `ip@pid#n`, RocketMQ's form: unique per producer of this process.
    client_id: String,
    /// The `HEART_BEAT` body, the same on every heartbeat.
    body: Bytes,
    /// Topics whose brokers are registered with even before a send.
    topics: Vec<String>,
    /// Per broker address: the connection the last successful heartbeat
    /// went on.
    registered: Mutex<HashMap<String, Weak<ClientConnection>>>,
    /// Woken when a send looked a route up: its brokers may be new.
    route_fetched: Notify,
}

impl Registration {
    /// The registration of a producer of `group` on the host reached as
    /// `ip`, registering with the brokers of `topics` from the start.
    pub(crate) fn new(ip: IpAddr, group: &str, topics: Vec<String>) -> Self {
        let client_id = format!(
            "{ip}@{}#{}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed)
        );
        let data = HeartbeatData {
            client_id: client_id.clone(),
            producer_data_set: vec![ProducerData {
                group_name: group.to_owned(),
            }],
            ..HeartbeatData::default()
        };
        Self {
            body: Bytes::from(body::to_json(&data)),
            client_id,
            topics,
            registered: Mutex::default(),
            route_fetched: Notify::new(),
        }
    }

    /// The client id the producer registers under.
    pub(crate) fn client_id(&self) -> &str {
        &self.client_id
    }

    /// Tells the heartbeat task that a route was looked up. Called only
    /// after a lookup that went to the name servers, never on a cache hit.
    pub(crate) fn route_fetched(&self) {
        self.route_fetched.notify_one();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Weak<ClientConnection>>> {
        self.registered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl Inner {
    /// Looks up the registration topics' routes, then heartbeats every
    /// broker in a cached route.
    pub(crate) async fn heartbeat_all(&self) {
        for topic in &self.registration.topics {
            let budget = Deadline::new(self.config.mq_client_api_timeout);
            if let Err(e) = self.routes.get(&self.client, topic, &budget).await {
                tracing::debug!(%topic, cause = %e, "no route to register the producer group by");
            }
        }
        for addr in self.routes.master_addrs() {
            if let Err(e) = self.heartbeat(&addr).await {
                tracing::warn!(broker = %addr, cause = %e, "heartbeat failed");
            }
        }
    }

    /// Heartbeats every broker in a cached route whose current connection
    /// has not carried a heartbeat yet.
    async fn register_new(&self) {
        for addr in self.routes.master_addrs() {
            self.ensure_registered(&addr).await;
        }
    }

    /// Heartbeats the broker if its current connection has not carried a
    /// heartbeat yet, so that requests the broker sends back on it (checks
    /// of halves sent on it) can reach the producer.
    pub(crate) async fn ensure_registered(&self, addr: &str) {
        if self.check_open().is_err() {
            return;
        }
        let current = self.client.connection(addr).await.ok();
        let known = self.registration.lock().get(addr).and_then(Weak::upgrade);
        if let (Some(current), Some(known)) = (current, known) {
            if Arc::ptr_eq(&current, &known) {
                return;
            }
        }
        if let Err(e) = self.heartbeat(addr).await {
            tracing::warn!(broker = %addr, cause = %e, "heartbeat failed");
        }
    }

    /// Sends one `HEART_BEAT` and remembers the connection it went on.
    async fn heartbeat(&self, addr: &str) -> Result<(), ProducerError> {
        // A heartbeat after shutdown would open a connection nobody closes.
        self.check_open()?;
        let budget = Deadline::new(self.config.mq_client_api_timeout);
        let exchange = async {
            let conn = self
                .client
                .connection(addr)
                .await
                .map_err(|e| CallError::from_client(addr, e, budget.timeout_ms()))?;
            let request = RemotingCommand::request(RequestCode::HEART_BEAT)
                .with_body(self.registration.body.clone());
            let response = conn
                .invoke(request, budget.remaining())
                .await
                .map_err(|e| CallError::from_client(addr, e, budget.timeout_ms()))?;
            if response.response_code() != ResponseCode::SUCCESS {
                return Err(CallError::refused(addr, &response));
            }
            Ok(conn)
        };
        let conn = match tokio::time::timeout(budget.remaining(), exchange).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(budget.timed_out(Some(addr)).into()),
        };
        self.registration
            .lock()
            .insert(addr.to_owned(), Arc::downgrade(&conn));
        Ok(())
    }
}

/// Until stopped: heartbeats every broker every `heartbeatBrokerInterval`,
/// and the brokers not registered with yet whenever a send looked a route
/// up.
pub(crate) async fn heartbeat_loop(inner: Arc<Inner>, stop: CancellationToken) {
    let period = inner.config.heartbeat_broker_interval;
    let mut next = Instant::now() + period;
    loop {
        let due = tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(next) => true,
            () = inner.registration.route_fetched.notified() => false,
        };
        if due {
            next = Instant::now() + period;
        }
        let work = async {
            if due {
                inner.heartbeat_all().await;
            } else {
                inner.register_new().await;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = work => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn client_ids_are_rocketmq_shaped_and_unique_per_producer() {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
        let a = Registration::new(ip, "PG", Vec::new());
        let b = Registration::new(ip, "PG", Vec::new());
        let prefix = format!("10.0.0.7@{}#", std::process::id());
        for r in [&a, &b] {
            let n = r.client_id().strip_prefix(&prefix).unwrap_or_else(|| {
                panic!("{} does not start with {prefix}", r.client_id());
            });
            assert!(n.parse::<u64>().is_ok(), "{}", r.client_id());
        }
        assert_ne!(a.client_id(), b.client_id());
    }

    #[test]
    fn the_heartbeat_names_the_client_and_its_producer_group_only() {
        let r = Registration::new(IpAddr::V4(Ipv4Addr::LOCALHOST), "PG", Vec::new());
        let data: HeartbeatData = body::from_json(&r.body).unwrap();
        assert_eq!(data.client_id, r.client_id());
        assert_eq!(
            data.producer_data_set,
            [ProducerData {
                group_name: "PG".into()
            }]
        );
        assert!(data.consumer_data_set.is_empty());
    }
}
