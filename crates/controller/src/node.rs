//! A running controller: its Raft node, its port (Raft messages and the
//! controller's requests), the liveness of brokers, and the leader's scan
//! that elects a new master when a master dies and its lease has run out.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use openraft::{BasicNode, SnapshotPolicy};
use remoting_net::{
    serve, CancellationToken, ClientOptions, Connection, Handler, RemotingClient, ServerOptions,
};
use remoting_protocol::{
    body::{to_json, SyncStateSet},
    header::NotifyBrokerRoleChangedRequestHeader,
    RemotingCommand, RequestCode,
};
use thiserror::Error;
use tokio::{net::TcpListener, sync::Notify, task::JoinHandle};

use crate::{
    config::ControllerConfig,
    liveness::Liveness,
    model::{Command, Group, Outcome},
    raft::{is_raft_code, serve_raft, LogStore, Network, Raft, RecordView, StateMachine},
};

/// Why a controller did not start.
#[derive(Debug, Error)]
pub enum StartError {
    /// Its state directory could not be opened or read.
    #[error("cannot open the controller's state in {path}: {source}")]
    Store {
        /// The directory.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The Raft node did not start.
    #[error("the controller's Raft node did not start: {0}")]
    Raft(String),
}

/// A write through Raft that did not happen.
#[derive(Debug, Error)]
pub enum WriteError {
    /// This controller is not the leader.
    #[error("this controller is not the leader; the leader is {leader}")]
    NotLeader {
        /// The leader's address, or `unknown`.
        leader: String,
    },
    /// The write did not commit in time or Raft failed.
    #[error("the controllers did not commit the change: {0}")]
    Failed(String),
}

/// One controller.
pub struct Controller {
    pub(crate) config: ControllerConfig,
    pub(crate) raft: Raft,
    pub(crate) view: RecordView,
    pub(crate) liveness: Mutex<Liveness>,
    pub(crate) client: Arc<RemotingClient>,
    pub(crate) wake_scan: Notify,
    local_addr: SocketAddr,
    shutdown: CancellationToken,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Controller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("self", self.config.me())
            .finish_non_exhaustive()
    }
}

struct PortHandler(Arc<Controller>);

impl Handler for PortHandler {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let controller = Arc::clone(&self.0);
        let conn = Arc::clone(conn);
        tokio::spawn(async move {
            let response = if is_raft_code(request.request_code()) {
                Some(serve_raft(&controller.raft, &request).await)
            } else {
                controller.handle(&request, Some(conn.id())).await
            };
            if let Some(response) = response {
                conn.send(response);
            }
        });
    }

    fn on_close(&self, conn: &Arc<Connection>) {
        self.0.connection_closed(conn.id());
    }
}

impl Controller {
    /// Starts the controller `config` describes, serving its port on
    /// `listener`, until `shutdown` fires. A controller that finds no state
    /// of its own forms the group with its peers.
    ///
    /// # Errors
    /// [`StartError`] when its state cannot be read or Raft does not start.
    pub async fn start(
        config: ControllerConfig,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<Arc<Self>, StartError> {
        let store = |source| StartError::Store {
            path: config.store_path.display().to_string(),
            source,
        };
        let log = LogStore::open(&config.store_path).map_err(store)?;
        let state_machine = StateMachine::open(&config.store_path).map_err(store)?;
        let view = state_machine.view();
        let election = u64::try_from(config.raft_election_timeout.as_millis()).unwrap_or(1000);
        let raft_config = openraft::Config {
            cluster_name: config.group.clone(),
            heartbeat_interval: u64::try_from(config.raft_heartbeat_interval.as_millis())
                .unwrap_or(150),
            election_timeout_min: election,
            election_timeout_max: election * 2,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(500),
            max_in_snapshot_log_to_keep: 100,
            ..openraft::Config::default()
        }
        .validate()
        .map_err(|e| StartError::Raft(e.to_string()))?;
        let client = Arc::new(RemotingClient::new(ClientOptions {
            connect_timeout: Duration::from_millis(500),
            // A peer that comes back hears from the leader within a
            // heartbeat or two, before it would stand for election and
            // disturb the group.
            max_reconnect_backoff: config.raft_heartbeat_interval,
            ..ClientOptions::default()
        }));
        let raft = Raft::new(
            config.self_id,
            Arc::new(raft_config),
            Network::new(Arc::clone(&client)),
            log,
            state_machine,
        )
        .await
        .map_err(|e| StartError::Raft(e.to_string()))?;
        if !raft
            .is_initialized()
            .await
            .map_err(|e| StartError::Raft(e.to_string()))?
        {
            let members: BTreeMap<u64, BasicNode> = config
                .peers
                .iter()
                .map(|(id, p)| (*id, BasicNode::new(&p.addr)))
                .collect();
            // Every peer does this on its first start with the same list;
            // the first to win an election commits it, the others' attempts
            // are refused and harmless.
            if let Err(e) = raft.initialize(members).await {
                tracing::debug!(cause = %e, "controller group already formed");
            }
        }
        let local_addr = listener
            .local_addr()
            .map_err(|e| StartError::Raft(e.to_string()))?;
        let controller = Arc::new(Self {
            config,
            raft,
            view,
            liveness: Mutex::default(),
            client,
            wake_scan: Notify::new(),
            local_addr,
            shutdown: shutdown.clone(),
            tasks: Mutex::default(),
        });
        tracing::info!(
            id = %controller.config.me().name,
            addr = %controller.config.me().addr,
            peers = controller.config.peers.len(),
            "controller started"
        );
        let server = tokio::spawn(serve(
            listener,
            Arc::new(PortHandler(Arc::clone(&controller))),
            ServerOptions {
                idle_timeout: Some(Duration::from_secs(120)),
                ..ServerOptions::default()
            },
            shutdown,
        ));
        let watcher = tokio::spawn(Arc::clone(&controller).watch_leadership());
        let scanner = tokio::spawn(Arc::clone(&controller).scan_masters());
        controller
            .tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend([server, watcher, scanner]);
        Ok(controller)
    }

    /// The address the controller's port is bound to.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The settings it runs with.
    #[must_use]
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The record as this controller has applied it.
    #[must_use]
    pub fn record(&self) -> RecordView {
        self.view.clone()
    }

    /// The Raft node (for metrics).
    #[must_use]
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// The current leader's node id, as this controller knows it.
    #[must_use]
    pub fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }

    /// Whether this controller is the leader.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.leader() == Some(self.config.self_id)
    }

    /// Whether this controller is the leader, confirmed by a quorum now
    /// (a round of Raft heartbeats), within half an election timeout.
    pub(crate) async fn confirm_leadership(&self) -> bool {
        if !self.is_leader() {
            return false;
        }
        let limit = self.config.raft_election_timeout / 2;
        matches!(
            tokio::time::timeout(limit, self.raft.ensure_linearizable()).await,
            Ok(Ok(_))
        )
    }

    /// The leader's address, or `unknown`.
    pub(crate) fn leader_addr(&self) -> Option<&str> {
        self.leader()
            .and_then(|id| self.config.peers.get(&id))
            .map(|p| p.addr.as_str())
    }

    pub(crate) fn liveness(&self) -> std::sync::MutexGuard<'_, Liveness> {
        self.liveness.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Commits `command` through Raft (leader only) and returns what it did.
    ///
    /// # Errors
    /// [`WriteError`] when this is not the leader or the write failed.
    pub async fn write(&self, command: Command) -> Result<Outcome, WriteError> {
        if !self.is_leader() {
            return Err(WriteError::NotLeader {
                leader: self.leader_addr().unwrap_or("unknown").to_owned(),
            });
        }
        match tokio::time::timeout(Duration::from_secs(5), self.raft.client_write(command)).await {
            Ok(Ok(response)) => Ok(response.data),
            Ok(Err(e)) => match e.forward_to_leader() {
                Some(forward) => Err(WriteError::NotLeader {
                    leader: forward
                        .leader_node
                        .as_ref()
                        .map_or_else(|| "unknown".to_owned(), |n| n.addr.clone()),
                }),
                None => Err(WriteError::Failed(e.to_string())),
            },
            Err(_) => Err(WriteError::Failed(
                "no commit within 5000 ms (are a majority of the controllers up?)".to_owned(),
            )),
        }
    }

    fn connection_closed(&self, conn: u64) {
        let gone = self.liveness().connection_closed(conn);
        if !gone.is_empty() {
            for (name, id) in &gone {
                tracing::info!(broker = %name, id, "broker's heartbeat connection closed");
            }
            self.wake_scan.notify_one();
        }
    }

    /// Follows this node's leadership: a new leader counts every master's
    /// lease as running from now.
    async fn watch_leadership(self: Arc<Self>) {
        let mut metrics = self.raft.metrics();
        let mut was_leader = false;
        loop {
            let leader = metrics.borrow_and_update().current_leader == Some(self.config.self_id);
            if leader && !was_leader {
                tracing::info!(id = %self.config.me().name, "controller became leader");
                self.liveness().became_leader(Instant::now());
                self.wake_scan.notify_one();
            }
            was_leader = leader;
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                changed = metrics.changed() => if changed.is_err() { return },
            }
        }
    }

    /// The leader's scan: forgets silent brokers, and elects a new master
    /// for every group whose master is dead once its lease has run out.
    async fn scan_masters(self: Arc<Self>) {
        let interval = self.config.scan_not_active_broker_interval;
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
                () = self.wake_scan.notified() => {}
            }
            let now = Instant::now();
            for (name, id) in self.liveness().expire(now) {
                tracing::info!(broker = %name, id, "broker silent past its heartbeat timeout");
            }
            if !self.is_leader() {
                continue;
            }
            let groups: Vec<Group> = self.view.read(|r| r.groups.values().cloned().collect());
            for group in groups {
                let Some(master) = group.master else { continue };
                let key = (group.broker_name.clone(), master);
                if self.liveness().is_alive(&key, now) {
                    continue;
                }
                let lease_end = self
                    .liveness()
                    .lease_end(&key, self.config.master_lease)
                    .unwrap_or(now);
                if lease_end > now {
                    // Look again when the lease has run out.
                    let controller = Arc::clone(&self);
                    tokio::spawn(async move {
                        tokio::time::sleep(lease_end - now).await;
                        controller.wake_scan.notify_one();
                    });
                    continue;
                }
                tracing::warn!(
                    broker = %group.broker_name,
                    master,
                    epoch = group.master_epoch,
                    "master dead and its lease over: electing a new one"
                );
                let answer = self
                    .elect(&group.broker_name, None, false, Instant::now())
                    .await;
                tracing::info!(
                    broker = %group.broker_name,
                    code = %answer.code,
                    remark = answer.remark.as_deref().unwrap_or(""),
                    "election after master loss"
                );
            }
        }
    }

    /// Tells the live members of `group` its master changed (oneway
    /// `NOTIFY_BROKER_ROLE_CHANGED`).
    pub(crate) fn notify_role_changed(&self, group: &Group) {
        if !self.config.notify_broker_role_changed {
            return;
        }
        let now = Instant::now();
        let header = NotifyBrokerRoleChangedRequestHeader {
            master_address: group.master_address().map(str::to_owned),
            master_epoch: Some(group.master_epoch),
            sync_state_set_epoch: Some(group.sync_state_set_epoch),
            master_broker_id: group.master.and_then(|m| i64::try_from(m).ok()),
        };
        let body = to_json(&SyncStateSet {
            sync_state_set: group
                .sync_state_set
                .iter()
                .filter_map(|id| i64::try_from(*id).ok())
                .collect(),
            sync_state_set_epoch: group.sync_state_set_epoch,
        });
        for (id, member) in &group.members {
            let key = (group.broker_name.clone(), *id);
            if member.address.is_empty() || !self.liveness().is_alive(&key, now) {
                continue;
            }
            let request = RemotingCommand::request_with_header(
                RequestCode::NOTIFY_BROKER_ROLE_CHANGED,
                &header,
            )
            .with_body(body.clone());
            let client = Arc::clone(&self.client);
            let addr = member.address.clone();
            tokio::spawn(async move {
                if let Err(e) = client.invoke_oneway(&addr, request).await {
                    tracing::debug!(broker = %addr, cause = %e, "role change not delivered");
                }
            });
        }
    }

    /// Stops serving and stops the Raft node.
    pub async fn shutdown(&self) {
        self.shutdown.cancel();
        if let Err(e) = self.raft.shutdown().await {
            tracing::debug!(cause = %e, "controller Raft node stopped with an error");
        }
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
        self.client.close_all().await;
    }
}
