//! A group of controllers on loopback, for tests: each with its own state
//! directory under one temporary root, short Raft timeouts, and a lease
//! the test chooses.

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use remoting_net::CancellationToken;
use tokio::net::TcpListener;

use crate::{Controller, ControllerConfig};

/// Controllers on loopback, some of them stopped.
#[derive(Debug)]
pub struct LocalGroup {
    root: PathBuf,
    peers: String,
    /// Each controller's address.
    pub addrs: Vec<String>,
    /// The running controllers by index (`None`: stopped).
    pub nodes: Vec<Option<Arc<Controller>>>,
    lease: Duration,
}

impl LocalGroup {
    /// Starts `n` controllers keeping their state under `root`, granting
    /// masters leases of `lease`.
    ///
    /// # Panics
    /// When a port cannot be bound or a controller does not start.
    pub async fn start(root: PathBuf, n: usize, lease: Duration) -> Self {
        let mut listeners = Vec::new();
        for _ in 0..n {
            listeners.push(TcpListener::bind("127.0.0.1:0").await.expect("bind"));
        }
        Self::start_on(root, listeners, lease).await
    }

    /// Starts one controller on each of `listeners` (bound beforehand, so
    /// that brokers can be told the addresses first).
    ///
    /// # Panics
    /// When a controller does not start.
    pub async fn start_on(root: PathBuf, listeners: Vec<TcpListener>, lease: Duration) -> Self {
        let n = listeners.len();
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().expect("local address").to_string())
            .collect();
        let peers = addrs
            .iter()
            .enumerate()
            .map(|(i, a)| format!("n{i}-{a}"))
            .collect::<Vec<_>>()
            .join(";");
        let mut group = Self {
            root,
            peers,
            addrs,
            nodes: vec![None; n],
            lease,
        };
        for (i, listener) in listeners.into_iter().enumerate() {
            group.nodes[i] = Some(group.start_node(i, listener).await);
        }
        group
    }

    /// The settings of controller `i`.
    ///
    /// # Panics
    /// Never for an index below the group's size.
    #[must_use]
    pub fn config(&self, i: usize) -> ControllerConfig {
        let mut c = ControllerConfig::new(
            "test",
            &self.peers,
            &format!("n{i}"),
            self.root.join(format!("n{i}")),
        )
        .expect("the group's peers parse");
        c.master_lease = self.lease;
        c.scan_not_active_broker_interval = Duration::from_millis(100);
        c.raft_election_timeout = Duration::from_millis(300);
        c.raft_heartbeat_interval = Duration::from_millis(50);
        c
    }

    async fn start_node(&self, i: usize, listener: TcpListener) -> Arc<Controller> {
        Controller::start(self.config(i), listener, CancellationToken::new())
            .await
            .expect("controller starts")
    }

    /// Every controller's address, `;`-separated (a broker's
    /// `controllerAddr`).
    #[must_use]
    pub fn controller_addr(&self) -> String {
        self.addrs.join(";")
    }

    /// Stops controller `i`.
    pub async fn stop(&mut self, i: usize) {
        if let Some(node) = self.nodes[i].take() {
            node.shutdown().await;
        }
    }

    /// Starts controller `i` again on its address, from its state.
    ///
    /// # Panics
    /// When its address cannot be bound again.
    pub async fn restart(&mut self, i: usize) {
        let listener = TcpListener::bind(&self.addrs[i]).await.expect("bind again");
        self.nodes[i] = Some(self.start_node(i, listener).await);
    }

    /// Stops every controller.
    pub async fn stop_all(&mut self) {
        for i in 0..self.nodes.len() {
            self.stop(i).await;
        }
    }

    /// The leader's index once every running controller agrees on it.
    ///
    /// # Panics
    /// When they do not agree within 30 s.
    pub async fn leader(&self) -> usize {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let leaders: Vec<Option<u64>> =
                self.nodes.iter().flatten().map(|n| n.leader()).collect();
            let agreed = leaders
                .first()
                .copied()
                .flatten()
                .filter(|l| leaders.iter().all(|x| *x == Some(*l)))
                .and_then(|l| usize::try_from(l).ok())
                .filter(|l| self.nodes.get(*l).is_some_and(Option::is_some));
            if let Some(leader) = agreed {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "the controllers did not agree on a leader within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
