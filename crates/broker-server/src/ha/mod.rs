//! The broker's part in its group's replication: a master serves its
//! slaves on the HA port and, as `SYNC_MASTER`, answers a send once every
//! in-sync slave holds it; a slave follows its master, whose HA address it
//! takes from `haMasterAddress` or from its registration, and refuses sends
//! of its own.
//!
//! The role is fixed by `brokerRole`, or, in controller mode, given and
//! changed at run time by the controllers (see [`switch`]): then a master
//! also takes writes only while it holds a lease.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::Duration,
};

use replication::{master::Master, slave::Slave, sync_set::SyncSet};
use store::{Epoch, EpochHistory, MessageStore};
use tokio::{net::TcpListener, sync::watch, task::JoinHandle};

use crate::{
    config::{BrokerConfig, BrokerRole},
    BrokerError,
};

/// The epoch file's name under `storePathRootDir` (RocketMQ's).
pub const EPOCH_FILE: &str = "epochFileCheckpoint";

/// How a send fared with the replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicated {
    /// Every in-sync replica holds it.
    Yes,
    /// Not within `slaveTimeout`.
    TimedOut,
    /// No slave is in sync.
    NoReplica,
}

mod switch;

pub use switch::Lease;

/// The role in force and the replication services that go with it.
#[derive(Debug, Default)]
struct Current {
    role: BrokerRole,
    master: Option<Arc<Master>>,
    slave: Option<Arc<Slave>>,
    /// The master epoch the controller gave (controller mode).
    master_epoch: i32,
    /// The tasks of this role (controller mode; static roles hand theirs
    /// to the broker).
    tasks: Vec<JoinHandle<()>>,
}

/// The broker's replication.
#[derive(Debug)]
pub struct Ha {
    /// Roles come from the controllers.
    controlled: bool,
    current: RwLock<Current>,
    runtime: tokio::runtime::Handle,
    ha_address: Option<SocketAddr>,
    master_address: watch::Sender<Option<String>>,
    /// A slave's master's remoting address, from its registration.
    master_remoting: Mutex<Option<String>>,
    slave_timeout: Duration,
    /// What role switches need (controller mode).
    switch: Option<switch::Switch>,
    /// Set when the controllers announce a role change.
    poke: tokio::sync::Notify,
    /// Set when a heartbeat should go out at once (a new master wants its
    /// lease).
    beat: tokio::sync::Notify,
    epochs: Arc<Mutex<EpochHistory>>,
}

impl Ha {
    /// Starts the replication of `store` for the role the configuration
    /// names; the tasks stop when their handles are aborted. A master's HA
    /// port binds on `bind`'s address: `haListenPort`, else `bind`'s port
    /// (the configured `listenPort`) + 1, else (both 0) a free port. `announce` is the address slaves are
    /// told to reach it at (its port replaced by the HA port).
    ///
    /// # Errors
    /// The epoch file cannot be read or written, or the HA port cannot be
    /// bound.
    pub async fn start(
        config: &BrokerConfig,
        store: &Arc<MessageStore>,
        bind: SocketAddr,
        announce: SocketAddr,
    ) -> Result<(Self, Vec<JoinHandle<()>>), BrokerError> {
        let ha = &config.ha;
        let root = &config.store.store_path_root_dir;
        let epochs = Arc::new(Mutex::new(open_epochs(root)?));
        let settings = ha.settings(config.broker.broker_id);
        let (master_address, address) = watch::channel(ha.ha_master_address.clone());
        let mut tasks = Vec::new();
        let mut this = Self {
            controlled: ha.enable_controller_mode,
            current: RwLock::new(Current {
                role: ha.broker_role,
                ..Current::default()
            }),
            runtime: tokio::runtime::Handle::current(),
            ha_address: None,
            master_address,
            master_remoting: Mutex::new(None),
            slave_timeout: Duration::from_millis(ha.slave_timeout),
            switch: None,
            poke: tokio::sync::Notify::new(),
            beat: tokio::sync::Notify::new(),
            epochs: Arc::clone(&epochs),
        };
        if ha.enable_controller_mode {
            let port = ha_port(ha.ha_listen_port, bind.port());
            let (switch, local, watchdog) =
                switch::Switch::start(config, store, epochs, SocketAddr::new(bind.ip(), port))
                    .await?;
            this.ha_address = Some(SocketAddr::new(announce.ip(), local.port()));
            this.switch = Some(switch);
            this.current_mut().role = BrokerRole::Slave;
            tasks.push(watchdog);
            return Ok((this, tasks));
        }
        match ha.broker_role {
            BrokerRole::Slave => {
                store.refuse_local_appends(Some(format!(
                    "broker {} is a SLAVE (brokerId {}): send to its group's master",
                    config.broker.broker_name, config.broker.broker_id
                )));
                let slave = Slave::new(Arc::clone(store), epochs, settings);
                this.current_mut().slave = Some(Arc::clone(&slave));
                tasks.push(tokio::spawn(slave.run(address)));
            }
            BrokerRole::AsyncMaster | BrokerRole::SyncMaster => {
                let end = if ha.replicated_store() {
                    // Records past the confirm offset are in no
                    // ConsumeQueue yet; the queues' offsets must follow them.
                    let store = Arc::clone(store);
                    tokio::task::spawn_blocking(move || store.resume_appends())
                        .await
                        .map_err(|e| io_error("take up appends", e.to_string()))?
                        .map_err(|e| io_error("take up appends", e.to_string()))?
                } else {
                    store.max_physical_offset()
                };
                {
                    // Without a controller to grant epochs, each start as
                    // master opens a new one (the first covers the whole
                    // log), numbered from the clock so that two brokers
                    // that each started as master (one replacing the other
                    // by hand) do not share an epoch number for different
                    // bytes.
                    let mut epochs = epochs
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let start_offset = if epochs.last().is_none() {
                        store.min_physical_offset()
                    } else {
                        end
                    };
                    let epoch = next_static_epoch(epochs.last_epoch(), message_model::now_ms());
                    epochs
                        .append(Epoch {
                            epoch,
                            start_offset,
                        })
                        .map_err(|e| io_error("write the epoch file", e.to_string()))?;
                    tracing::info!(epoch, start_offset, "writing in a new master epoch");
                }
                // `bind` carries the configured listenPort (0: a free one).
                let port = ha_port(ha.ha_listen_port, bind.port());
                let (listener, local) = bind_ha(SocketAddr::new(bind.ip(), port)).await?;
                this.ha_address = Some(SocketAddr::new(announce.ip(), local.port()));
                let sync = Arc::new(SyncSet::new(config.broker.broker_id, end));
                let master = Master::new(
                    Arc::clone(store),
                    epochs,
                    sync,
                    replication::HaSettings {
                        manage_in_sync_set: true,
                        ..settings
                    },
                );
                master.attach();
                tracing::info!(ha = %local, role = ?ha.broker_role, "serving replicas");
                tasks.push(tokio::spawn(Arc::clone(&master).serve(listener)));
                this.current_mut().master = Some(master);
            }
        }
        Ok((this, tasks))
    }

    fn current(&self) -> std::sync::RwLockReadGuard<'_, Current> {
        self.current.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn current_mut(&self) -> std::sync::RwLockWriteGuard<'_, Current> {
        self.current.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// The broker's role now: in controller mode `SLAVE` until the
    /// controllers make it master, then `SYNC_MASTER`.
    pub fn role(&self) -> BrokerRole {
        self.current().role
    }

    /// Whether the controllers give this broker its role.
    pub fn controlled(&self) -> bool {
        self.controlled
    }

    /// The controllers announced a role change: look again at once.
    pub fn poke(&self) {
        self.poke.notify_one();
    }

    /// Resolves at the next [`Ha::poke`].
    pub async fn poked(&self) {
        self.poke.notified().await;
    }

    /// Asks for a heartbeat at once.
    pub fn beat_now(&self) {
        self.beat.notify_one();
    }

    /// Resolves at the next [`Ha::beat_now`].
    pub async fn beat_requested(&self) {
        self.beat.notified().await;
    }

    /// The last master epoch in the epoch file (-1 when empty).
    pub fn last_epoch(&self) -> i32 {
        self.epochs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_epoch()
    }

    /// The HA port, when one is bound or kept for becoming master.
    pub fn ha_port(&self) -> Option<u16> {
        self.ha_address.map(|a| a.port())
    }

    /// The HA address a master registers (`haServerAddr`), empty otherwise.
    pub fn ha_server_addr(&self) -> String {
        self.ha_address.map(|a| a.to_string()).unwrap_or_default()
    }

    /// A slave learns its master's addresses from its registration: the HA
    /// one (unless `haMasterAddress` set one) and the remoting one, where it
    /// copies the master's metadata from.
    pub fn master_hint(&self, config: &BrokerConfig, ha_server_addr: &str, master_addr: &str) {
        // In controller mode the controller names the master.
        if self.controlled || self.current().slave.is_none() {
            return;
        }
        if !master_addr.is_empty() {
            *self
                .master_remoting
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(master_addr.to_owned());
        }
        if config.ha.ha_master_address.is_some() || ha_server_addr.is_empty() {
            return;
        }
        self.master_address.send_if_modified(|current| {
            let changed = current.as_deref() != Some(ha_server_addr);
            if changed {
                tracing::info!(
                    master = ha_server_addr,
                    "following the master the name server named"
                );
                *current = Some(ha_server_addr.to_owned());
            }
            changed
        });
    }

    /// A slave's master's remoting address, once its registration named it.
    pub fn master_remoting_addr(&self) -> Option<String> {
        self.master_remoting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Publishes the replication gauges, `end` being the CommitLog's end:
    /// `sluice_commitlog_max_offset` on every broker;
    /// `sluice_replication_confirm_offset` on a master (what every in-sync
    /// replica holds) and on a slave (what its master said);
    /// `sluice_replica_lag_bytes{replica}` and
    /// `sluice_replica_in_sync{replica}` for each slave connected to a
    /// master.
    pub fn publish_gauges(&self, end: u64) {
        metrics::gauge!("sluice_commitlog_max_offset").set(end as f64);
        if let Some(master) = self.master() {
            let sync = master.sync_set();
            metrics::gauge!("sluice_replication_confirm_offset").set(sync.confirm_offset() as f64);
            for r in master.replicas() {
                let replica = r.broker_id.to_string();
                metrics::gauge!("sluice_replica_lag_bytes", "replica" => replica.clone())
                    .set(end.saturating_sub(r.acked) as f64);
                metrics::gauge!("sluice_replica_in_sync", "replica" => replica).set(
                    if sync.is_member(r.broker_id) {
                        1.0
                    } else {
                        0.0
                    },
                );
            }
        }
        if let Some(slave) = self.slave() {
            metrics::gauge!("sluice_replication_confirm_offset")
                .set(slave.status().master_confirm as f64);
        }
    }

    /// The master's replication, on a master.
    pub fn master(&self) -> Option<Arc<Master>> {
        self.current().master.clone()
    }

    /// The slave's replication, on a slave.
    pub fn slave(&self) -> Option<Arc<Slave>> {
        self.current().slave.clone()
    }

    /// What a `SYNC_MASTER` send waits with, `None` for other roles.
    pub fn waiter(&self) -> Option<ReplicaWaiter> {
        let current = self.current();
        if current.role != BrokerRole::SyncMaster {
            return None;
        }
        Some(ReplicaWaiter {
            sync: Arc::clone(current.master.as_ref()?.sync_set()),
            runtime: self.runtime.clone(),
            timeout: self.slave_timeout,
        })
    }
}

/// Binds the HA port at `at`; the listener and the address it got.
async fn bind_ha(at: SocketAddr) -> Result<(TcpListener, SocketAddr), BrokerError> {
    let listener = TcpListener::bind(at)
        .await
        .map_err(|source| BrokerError::Bind {
            addr: at.to_string(),
            key: "haListenPort",
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|e| io_error("read the HA address", e.to_string()))?;
    Ok((listener, local))
}

/// The HA port: `haListenPort`, else `listenPort` + 1, else (both 0) a
/// free one.
fn ha_port(ha_listen_port: u16, listen_port: u16) -> u16 {
    match (ha_listen_port, listen_port) {
        (0, 0) => 0,
        (0, listen) => listen.checked_add(1).unwrap_or(0),
        (ha_port, _) => ha_port,
    }
}

/// Waits for a send's replicas on a `SYNC_MASTER`; cheap to clone into a
/// callback.
#[derive(Debug, Clone)]
pub struct ReplicaWaiter {
    sync: Arc<SyncSet>,
    runtime: tokio::runtime::Handle,
    timeout: Duration,
}

impl ReplicaWaiter {
    /// Calls `done` once every in-sync replica holds the CommitLog up to
    /// `end`, or `slaveTimeout` passed, or at once when no slave is in sync.
    pub fn on_replicated(&self, end: u64, done: impl FnOnce(Replicated) + Send + 'static) {
        if !self.sync.has_replicas() {
            return done(Replicated::NoReplica);
        }
        if self.sync.confirm_offset() >= end {
            return done(Replicated::Yes);
        }
        let sync = Arc::clone(&self.sync);
        let timeout = self.timeout;
        self.runtime.spawn(async move {
            done(if sync.wait_confirmed(end, timeout).await {
                Replicated::Yes
            } else {
                Replicated::TimedOut
            });
        });
    }
}

/// The epoch a master without a controller opens: after `last`, and at
/// least the seconds since 2020-01-01 at `now_ms` (an `i32` until 2088).
fn next_static_epoch(last: i32, now_ms: i64) -> i32 {
    const EPOCH_2020_MS: i64 = 1_577_836_800_000;
    let from_clock = i32::try_from((now_ms - EPOCH_2020_MS).max(0) / 1000).unwrap_or(i32::MAX);
    last.saturating_add(1).max(from_clock)
}

fn open_epochs(root: &Path) -> Result<EpochHistory, BrokerError> {
    EpochHistory::open(&root.join(EPOCH_FILE))
        .map_err(|e| io_error("read the epoch file", e.to_string()))
}

fn io_error(what: &str, cause: String) -> BrokerError {
    BrokerError::Io {
        what: what.to_owned(),
        source: std::io::Error::other(cause),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiter(sync: &Arc<SyncSet>, timeout_ms: u64) -> ReplicaWaiter {
        ReplicaWaiter {
            sync: Arc::clone(sync),
            runtime: tokio::runtime::Handle::current(),
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    async fn outcome(w: &ReplicaWaiter, end: u64) -> Replicated {
        let (tx, rx) = tokio::sync::oneshot::channel();
        w.on_replicated(end, move |r| {
            let _ = tx.send(r);
        });
        rx.await.unwrap()
    }

    #[test]
    fn a_static_master_epoch_is_new_and_follows_the_clock() {
        // 2026-01-01 is 189,388,800 s after 2020-01-01.
        let jan_2026 = 1_767_225_600_000;
        assert_eq!(next_static_epoch(-1, jan_2026), 189_388_800);
        // Never older than the last one, even with a clock set back.
        assert_eq!(
            next_static_epoch(189_388_800, jan_2026 - 10_000),
            189_388_801
        );
        assert_eq!(next_static_epoch(5, 0), 6);
    }

    #[tokio::test]
    async fn a_send_hears_whether_its_replicas_hold_it() {
        let sync = Arc::new(SyncSet::new(0, 0));
        sync.master_wrote(100);
        // Alone: no slave in sync.
        assert_eq!(
            outcome(&waiter(&sync, 10_000), 100).await,
            Replicated::NoReplica
        );
        sync.add_member(1);
        // A slave that never acknowledges: the wait ends with the timeout.
        assert_eq!(outcome(&waiter(&sync, 20), 100).await, Replicated::TimedOut);
        // One that acknowledges while the send waits.
        let w = waiter(&sync, 10_000);
        let (tx, rx) = tokio::sync::oneshot::channel();
        w.on_replicated(100, move |r| {
            let _ = tx.send(r);
        });
        sync.acknowledge(1, 100);
        assert_eq!(rx.await.unwrap(), Replicated::Yes);
        // Already confirmed: at once.
        assert_eq!(outcome(&waiter(&sync, 1), 50).await, Replicated::Yes);
    }
}
