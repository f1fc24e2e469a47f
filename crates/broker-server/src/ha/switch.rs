//! Roles given by the controllers (controller mode): a broker starts as a
//! slave with no master, becomes master or the slave of another broker as
//! the controllers decide, and switches in place, its store open.
//!
//! A master takes local writes only while it holds a lease: the controller
//! leader grants one in its answer to a heartbeat, counted here from when the
//! heartbeat was sent; the watchdog refuses local appends the moment the
//! lease runs out (or while the broker is not master), and takes them again
//! when a lease for the current master epoch comes.

use std::{
    collections::BTreeSet,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, PoisonError, RwLock,
    },
    time::{Duration, Instant},
};

use replication::{master::Master, slave::Slave, sync_set::SyncSet, HaSettings};
use store::{Epoch, EpochHistory, MessageStore};
use tokio::{sync::Notify, task::JoinHandle};

use super::{bind_ha, io_error, Current, Ha};
use crate::{
    config::{BrokerConfig, BrokerRole},
    BrokerError,
};

/// Part of a granted lease given up against clock drift and the watchdog's
/// own lateness.
const LEASE_MARGIN: Duration = Duration::from_millis(200);

/// A master's lease: until when, and for which master epoch.
#[derive(Debug, Default)]
pub struct Lease {
    held: Mutex<Option<(Instant, i32)>>,
    changed: Notify,
}

impl Lease {
    /// Records a lease of `millis` for `epoch`, granted in answer to a
    /// heartbeat sent at `sent`.
    pub fn grant(&self, sent: Instant, millis: u64, epoch: i32) {
        let until = sent + Duration::from_millis(millis).saturating_sub(LEASE_MARGIN);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.is_none_or(|(u, e)| e < epoch || (e == epoch && u < until)) {
            *held = Some((until, epoch));
            drop(held);
            self.changed.notify_one();
        }
    }

    /// When the lease for `epoch` ends, if one is held.
    pub fn until(&self, epoch: i32) -> Option<Instant> {
        self.held
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .filter(|(_, e)| *e == epoch)
            .map(|(u, _)| u)
    }
}

/// What switching roles needs.
#[derive(Debug)]
pub(super) struct Switch {
    store: Arc<MessageStore>,
    epochs: Arc<Mutex<EpochHistory>>,
    settings: HaSettings,
    /// Where the HA port binds while master (its port fixed at start).
    ha_bind: SocketAddr,
    /// The master whose senders hear of local appends.
    appender: Arc<RwLock<Option<Arc<Master>>>>,
    pub(super) lease: Arc<Lease>,
    /// The master epoch while this broker is master.
    master_of: Arc<Mutex<Option<i32>>>,
    /// One switch at a time.
    serial: tokio::sync::Mutex<()>,
    /// Set at shutdown: no role is taken any more.
    stopped: AtomicBool,
    broker_name: String,
}

impl Switch {
    /// Prepares switching for `store`: local appends refused until a role
    /// and a lease come, the HA port's number fixed (bound once at `at`),
    /// and the watchdog started.
    pub(super) async fn start(
        config: &BrokerConfig,
        store: &Arc<MessageStore>,
        epochs: Arc<Mutex<EpochHistory>>,
        at: SocketAddr,
    ) -> Result<(Self, SocketAddr, JoinHandle<()>), BrokerError> {
        store.refuse_local_appends(Some(format!(
            "broker {} waits for the controllers to name its group's master",
            config.broker.broker_name
        )));
        // Bound once to fix the port's number, then let go until master.
        let (probe, local) = bind_ha(at).await?;
        drop(probe);
        let appender: Arc<RwLock<Option<Arc<Master>>>> = Arc::default();
        let forward = Arc::clone(&appender);
        store.set_append_listener(Arc::new(move |end| {
            let master = forward
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(master) = master {
                master.appended_to(end);
            }
        }));
        let lease = Arc::new(Lease::default());
        let master_of = Arc::new(Mutex::new(None));
        let switch = Self {
            store: Arc::clone(store),
            epochs,
            settings: config.ha.settings(0),
            ha_bind: SocketAddr::new(at.ip(), local.port()),
            appender,
            lease,
            master_of: Arc::clone(&master_of),
            serial: tokio::sync::Mutex::new(()),
            stopped: AtomicBool::new(false),
            broker_name: config.broker.broker_name.clone(),
        };
        let watchdog = tokio::spawn(watch_lease(
            Arc::clone(store),
            Arc::clone(&switch.lease),
            master_of,
            config.broker.broker_name.clone(),
        ));
        Ok((switch, local, watchdog))
    }
}

/// Refuses local appends whenever the broker is not a master with a lease,
/// and takes them again as soon as it is.
async fn watch_lease(
    store: Arc<MessageStore>,
    lease: Arc<Lease>,
    master_of: Arc<Mutex<Option<i32>>>,
    broker_name: String,
) {
    let mut taking = false;
    loop {
        let now = Instant::now();
        let epoch = *master_of.lock().unwrap_or_else(PoisonError::into_inner);
        let until = epoch.and_then(|e| lease.until(e)).filter(|u| *u > now);
        let take = until.is_some();
        // The lease's end is checked at each append, so a broker that was
        // frozen past it (SIGSTOP, a long pause) refuses the moment it
        // runs again, before this loop wakes. Applied every time: a switch
        // refuses appends itself while it runs, and this puts back what
        // the role and lease allow. The order leaves no moment in which
        // neither the refusal nor a deadline holds: the deadline is set
        // before the refusal is lifted, and the refusal is set while the
        // deadline (past, or of an older epoch) still stands.
        match (until, epoch) {
            (Some(until), _) => {
                store.set_local_append_deadline(Some(until));
                store.refuse_local_appends(None);
            }
            (None, Some(e)) => store.refuse_local_appends(Some(format!(
                "broker {broker_name} is master (epoch {e}) without a lease: it cannot reach \
                 the controller leader, which may elect another master"
            ))),
            (None, None) => store.refuse_local_appends(Some(format!(
                "broker {broker_name} is not its group's master: send to the master"
            ))),
        }
        if take != taking {
            if take {
                tracing::info!(broker = %broker_name, epoch, "master lease held: taking writes");
            } else if epoch.is_some() {
                tracing::warn!(broker = %broker_name, epoch, "master lease ran out: refusing writes");
            }
            taking = take;
        }
        let wake = until.map_or(Duration::from_secs(1), |u| u - now);
        let _ = tokio::time::timeout(wake, lease.changed.notified()).await;
    }
}

impl Ha {
    fn switch(&self) -> Option<&Switch> {
        self.switch.as_ref()
    }

    /// The lease of a master in controller mode.
    pub fn lease(&self) -> Option<&Arc<Lease>> {
        self.switch().map(|s| &s.lease)
    }

    /// The master epoch the controllers gave this broker's role.
    pub fn master_epoch(&self) -> i32 {
        self.current().master_epoch
    }

    /// Becomes (or stays) the master of epoch `epoch` with in-sync set
    /// `members`, as broker `broker_id` of its group.
    ///
    /// # Errors
    /// The epoch file cannot be written or the HA port cannot be bound.
    pub async fn become_master(
        &self,
        broker_id: i64,
        epoch: i32,
        members: &BTreeSet<i64>,
    ) -> Result<(), BrokerError> {
        let Some(switch) = self.switch() else {
            return Ok(());
        };
        let _serial = switch.serial.lock().await;
        if switch.stopped.load(Ordering::Acquire) {
            return Ok(());
        }
        {
            let current = self.current();
            // Already master of this epoch: whom it waits for is the in-sync
            // review's to say from here on.
            if current.role == BrokerRole::SyncMaster && current.master_epoch == epoch {
                return Ok(());
            }
        }
        switch.fence(&self.current);
        let old = self.take_current();
        stop(old).await;
        *self
            .master_remoting
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.master_address.send_replace(None);
        let store = Arc::clone(&switch.store);
        let end = tokio::task::spawn_blocking(move || store.resume_appends())
            .await
            .map_err(|e| io_error("take up appends", e.to_string()))?
            .map_err(|e| io_error("take up appends", e.to_string()))?;
        {
            let mut epochs = switch.epochs.lock().unwrap_or_else(PoisonError::into_inner);
            if epochs.last_epoch() < epoch {
                let start_offset = if epochs.last().is_none() {
                    switch.store.min_physical_offset()
                } else {
                    end
                };
                epochs
                    .append(Epoch {
                        epoch,
                        start_offset,
                    })
                    .map_err(|e| io_error("write the epoch file", e.to_string()))?;
            }
        }
        let sync = Arc::new(SyncSet::new(broker_id, end));
        sync.set_members(members.iter().copied());
        let master = Master::new(
            Arc::clone(&switch.store),
            Arc::clone(&switch.epochs),
            sync,
            HaSettings {
                broker_id,
                manage_in_sync_set: false,
                ..switch.settings.clone()
            },
        );
        let (listener, _) = bind_ha(switch.ha_bind).await?;
        *switch
            .appender
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(Arc::clone(&master));
        let task = self.runtime.spawn(Arc::clone(&master).serve(listener));
        tracing::info!(
            broker = %switch.broker_name,
            epoch,
            start_offset = end,
            in_sync = ?members,
            "became master"
        );
        *self.current_mut() = Current {
            role: BrokerRole::SyncMaster,
            master: Some(master),
            slave: None,
            master_epoch: epoch,
            tasks: vec![task],
        };
        *switch
            .master_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(epoch);
        switch.lease.changed.notify_one();
        Ok(())
    }

    /// Becomes (or stays) the slave of epoch `epoch`, following the master
    /// whose HA port is `master_ha` and whose remoting address is
    /// `master_remoting`, as broker `broker_id`.
    pub async fn become_slave(
        &self,
        broker_id: i64,
        epoch: i32,
        master_ha: &str,
        master_remoting: &str,
    ) {
        let Some(switch) = self.switch() else {
            return;
        };
        let _serial = switch.serial.lock().await;
        if switch.stopped.load(Ordering::Acquire) {
            return;
        }
        *self
            .master_remoting
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(master_remoting.to_owned());
        self.master_address.send_if_modified(|current| {
            let changed = current.as_deref() != Some(master_ha);
            *current = Some(master_ha.to_owned());
            changed
        });
        {
            let mut current = self.current_mut();
            if current.role == BrokerRole::Slave && current.slave.is_some() {
                current.master_epoch = current.master_epoch.max(epoch);
                return;
            }
        }
        switch.fence(&self.current);
        let old = self.take_current();
        *switch
            .appender
            .write()
            .unwrap_or_else(PoisonError::into_inner) = None;
        stop(old).await;
        let slave = Slave::new(
            Arc::clone(&switch.store),
            Arc::clone(&switch.epochs),
            HaSettings {
                broker_id,
                ..switch.settings.clone()
            },
        );
        let task = self
            .runtime
            .spawn(Arc::clone(&slave).run(self.master_address.subscribe()));
        tracing::info!(
            broker = %switch.broker_name,
            epoch,
            master = %master_remoting,
            "became slave"
        );
        *self.current_mut() = Current {
            role: BrokerRole::Slave,
            master: None,
            slave: Some(slave),
            master_epoch: epoch,
            tasks: vec![task],
        };
    }

    /// The current role's services, leaving a slave's role without them.
    fn take_current(&self) -> Current {
        std::mem::replace(
            &mut *self.current_mut(),
            Current {
                role: BrokerRole::Slave,
                ..Current::default()
            },
        )
    }

    /// Stops the current role's services for good (controller mode, at
    /// shutdown): a switch under way ends first and none starts after, so
    /// a master shutting down, still named master by the controllers until
    /// its beats stop, does not take the role again (with no slave
    /// connected yet, it would have the controllers drop them all from the
    /// in-sync set, leaving none to elect).
    pub async fn stop_role(&self) {
        let _serial = match self.switch() {
            Some(switch) => {
                let serial = switch.serial.lock().await;
                switch.stopped.store(true, Ordering::Release);
                Some(serial)
            }
            None => None,
        };
        let old = self.take_current();
        stop(old).await;
    }
}

impl Switch {
    /// Stops local writes at once, for a switch: no longer master for the
    /// watchdog, appends refused, and the role a slave's until the switch
    /// installs the new one.
    fn fence(&self, current: &RwLock<Current>) {
        *self
            .master_of
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        self.store.refuse_local_appends(Some(format!(
            "broker {} is switching roles",
            self.broker_name
        )));
        current.write().unwrap_or_else(PoisonError::into_inner).role = BrokerRole::Slave;
        self.lease.changed.notify_one();
    }
}

async fn stop(old: Current) {
    for task in &old.tasks {
        task.abort();
    }
    for task in old.tasks {
        let _ = task.await;
    }
}
