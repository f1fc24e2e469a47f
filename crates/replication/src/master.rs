//! The master's side: serves slaves on the HA port.

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use bytes::BytesMut;
use replication_protocol::{
    auto_switch::{MasterCodec, MasterFrame, MasterHandshake, MasterTransfer, SlaveFrame},
    EpochEntry, FrameError,
};
use store::{EpochHistory, MessageStore};
use tokio::{
    io::AsyncWriteExt,
    net::{tcp::OwnedWriteHalf, TcpListener, TcpStream},
    sync::Notify,
    task::JoinSet,
};
use tokio_stream::StreamExt;
use tokio_util::codec::{Encoder, FramedRead};

use crate::{sync_set::SyncSet, HaSettings};

mod classic;

/// What the master knows of one connected slave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// The slave's broker id, from its handshake.
    pub broker_id: i64,
    /// Where it connects from.
    pub address: SocketAddr,
    /// The CommitLog offset it acknowledged last.
    pub acked: u64,
    /// Whether it only learns (never in sync).
    pub async_learner: bool,
}

/// Why a slave's connection was closed.
#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    /// The bytes were not frames.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The slave broke the order of the protocol.
    #[error("{0}")]
    Protocol(String),
    /// Nothing arrived for the housekeeping interval.
    #[error("nothing received for {0:?}")]
    Silent(std::time::Duration),
    /// The slave closed the connection.
    #[error("closed by the slave")]
    Closed,
}

/// A master's replication service.
#[derive(Debug)]
pub struct Master {
    store: Arc<MessageStore>,
    epochs: Arc<Mutex<EpochHistory>>,
    sync: Arc<SyncSet>,
    settings: HaSettings,
    appended: Notify,
    replicas: Mutex<HashMap<u64, ReplicaStatus>>,
    /// Replicas past their handshake.
    connected: AtomicUsize,
    next_connection: AtomicU64,
}

impl Master {
    /// A service streaming `store`'s CommitLog, whose epochs are `epochs`,
    /// and keeping acknowledgements in `sync`.
    pub fn new(
        store: Arc<MessageStore>,
        epochs: Arc<Mutex<EpochHistory>>,
        sync: Arc<SyncSet>,
        settings: HaSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            epochs,
            sync,
            settings,
            appended: Notify::new(),
            replicas: Mutex::new(HashMap::new()),
            connected: AtomicUsize::new(0),
            next_connection: AtomicU64::new(0),
        })
    }

    /// The in-sync set and confirm offset.
    pub fn sync_set(&self) -> &Arc<SyncSet> {
        &self.sync
    }

    /// Tells the senders that the CommitLog grew (call after appends that
    /// the store's append listener does not report).
    pub fn appended(&self) {
        self.appended_to(self.store.max_physical_offset());
    }

    /// Tells the senders that the CommitLog grew to `end`. Costs one atomic
    /// load while no replica is connected and consumers are not held at the
    /// confirm offset.
    pub fn appended_to(&self, end: u64) {
        if self.connected.load(Ordering::Acquire) == 0 && self.store.confirm_offset().is_none() {
            return;
        }
        self.sync.master_wrote(end);
        self.appended.notify_waiters();
    }

    /// Hears of every local append through the store's append listener;
    /// false when the store has another listener already.
    pub fn attach(self: &Arc<Self>) -> bool {
        let weak = Arc::downgrade(self);
        self.store.set_append_listener(Arc::new(move |end| {
            if let Some(master) = weak.upgrade() {
                master.appended_to(end);
            }
        }))
    }

    /// The connected slaves.
    pub fn replicas(&self) -> Vec<ReplicaStatus> {
        let mut all: Vec<_> = self.lock_replicas().values().cloned().collect();
        all.sort_by_key(|r| r.broker_id);
        all
    }

    /// Accepts slaves on `listener` until the returned future is dropped
    /// (which also closes every connection).
    pub async fn serve(self: Arc<Self>, listener: TcpListener) {
        let mut connections = JoinSet::new();
        let mut confirm = self.sync.watch();
        self.store.set_confirm_offset(*confirm.borrow_and_update());
        loop {
            tokio::select! {
                changed = confirm.changed() => {
                    if changed.is_ok() {
                        self.store.set_confirm_offset(*confirm.borrow_and_update());
                    }
                }
                accepted = listener.accept() => match accepted {
                    Ok((stream, peer)) => {
                        let master = Arc::clone(&self);
                        connections.spawn(async move {
                            let served = if master.settings.classic {
                                master.serve_classic_slave(stream, peer).await
                            } else {
                                master.serve_slave(stream, peer).await
                            };
                            match served {
                                Ok(()) | Err(ConnectionError::Closed) => {
                                    tracing::info!(%peer, "replica connection closed");
                                }
                                Err(e) => tracing::warn!(%peer, cause = %e, "replica connection dropped"),
                            }
                        });
                    }
                    Err(e) => {
                        tracing::warn!(cause = %e, "cannot accept a replica connection");
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                    }
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
    }

    async fn serve_slave(
        self: &Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), ConnectionError> {
        let _ = stream.set_nodelay(true);
        let (read, mut write) = stream.into_split();
        let mut frames = FramedRead::new(read, MasterCodec);
        let silent = self.settings.housekeeping_interval;
        let SlaveFrame::Handshake {
            sync_from_last_file,
            async_learner,
            broker_id,
        } = read_frame(&mut frames, silent).await?
        else {
            return Err(ConnectionError::Protocol(
                "an offset report before the handshake".into(),
            ));
        };
        tracing::info!(%peer, broker_id, async_learner, "replica handshake");
        let handshake = {
            let epochs = self.lock_epochs();
            MasterHandshake {
                max_offset: to_wire(self.store.max_physical_offset()),
                last_epoch: epochs.last_epoch(),
                epochs: epochs
                    .entries()
                    .iter()
                    .map(|e| EpochEntry {
                        epoch: e.epoch,
                        start_offset: to_wire(e.start_offset),
                    })
                    .collect(),
            }
        };
        send(&mut write, MasterFrame::Handshake(handshake)).await?;
        let SlaveFrame::Report { max_offset } = read_frame(&mut frames, silent).await? else {
            return Err(ConnectionError::Protocol(
                "a second handshake instead of the slave's offset".into(),
            ));
        };
        let reported = u64::try_from(max_offset)
            .map_err(|_| ConnectionError::Protocol(format!("negative offset {max_offset}")))?;
        let start = if reported > 0 {
            reported
        } else if sync_from_last_file {
            let end = self.store.max_physical_offset();
            end - end % self.store.config().mapped_file_size_commit_log as u64
        } else {
            self.store.min_physical_offset()
        };
        if start > self.store.max_physical_offset() {
            return Err(ConnectionError::Protocol(format!(
                "the slave's log ends at {start}, past this master's end {}",
                self.store.max_physical_offset()
            )));
        }
        // Appends are reported from now on; the end is current before the
        // first acknowledgement counts.
        self.connected.fetch_add(1, Ordering::AcqRel);
        self.sync.master_wrote(self.store.max_physical_offset());
        if !async_learner {
            self.sync.reset_ack(broker_id, reported);
            self.acknowledged(broker_id, reported);
        }
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        self.lock_replicas().insert(
            id,
            ReplicaStatus {
                broker_id,
                address: peer,
                acked: reported,
                async_learner,
            },
        );
        let _registered = Registered {
            master: self,
            id,
            leaves_set: (self.settings.manage_in_sync_set && !async_learner).then_some(broker_id),
        };
        let reader = async {
            loop {
                match read_frame(&mut frames, silent).await? {
                    SlaveFrame::Report { max_offset } => {
                        let acked = u64::try_from(max_offset).unwrap_or(0);
                        if let Some(r) = self.lock_replicas().get_mut(&id) {
                            r.acked = acked;
                        }
                        if !async_learner {
                            self.acknowledged(broker_id, acked);
                        }
                    }
                    SlaveFrame::Handshake { .. } => {
                        return Err(ConnectionError::Protocol("a second handshake".into()));
                    }
                }
            }
        };
        let writer = self.stream_to(&mut write, start);
        tokio::select! {
            r = reader => r,
            w = writer => w,
        }
    }

    /// Records a replica's acknowledgement; without a controller, a replica
    /// that reached the confirm offset joins the in-sync set.
    fn acknowledged(&self, broker_id: i64, acked: u64) {
        self.sync.acknowledge(broker_id, acked);
        if self.settings.manage_in_sync_set
            && !self.sync.is_member(broker_id)
            && acked >= self.sync.confirm_offset()
        {
            tracing::info!(
                broker_id,
                acked,
                "replica caught up; it joins the in-sync set"
            );
            self.sync.add_member(broker_id);
        }
    }

    /// Sends the log from `from` on, one epoch per transfer, and a heartbeat
    /// when the confirm offset moved or nothing was sent for a while.
    async fn stream_to(
        &self,
        write: &mut OwnedWriteHalf,
        from: u64,
    ) -> Result<(), ConnectionError> {
        let mut next = from;
        let mut confirm = self.sync.watch();
        let mut sent_confirm = u64::MAX;
        loop {
            let appended = self.appended.notified();
            let end = self.store.max_physical_offset();
            let confirmed = *confirm.borrow_and_update();
            if next < end {
                let oldest = self.store.min_physical_offset();
                if next < oldest {
                    return Err(ConnectionError::Protocol(format!(
                        "the slave needs the log from {next}, but retention deleted it up to {oldest}; empty the slave's store to copy from {oldest}"
                    )));
                }
                let (epoch, epoch_start, epoch_end) = self.epoch_of(next);
                let room = epoch_end.saturating_sub(next);
                let max = self
                    .settings
                    .transfer_batch_size
                    .min(usize::try_from(room).unwrap_or(usize::MAX));
                if let Some(body) = self.store.commit_log_bytes(next, max) {
                    let len = body.len() as u64;
                    send(
                        write,
                        MasterFrame::Transfer(MasterTransfer {
                            offset: to_wire(next),
                            epoch,
                            epoch_start_offset: to_wire(epoch_start),
                            confirm_offset: to_wire(confirmed),
                            body,
                        }),
                    )
                    .await?;
                    sent_confirm = confirmed;
                    next += len;
                    continue;
                }
            }
            if confirmed != sent_confirm {
                let (epoch, epoch_start, _) = self.epoch_of(next);
                send(write, heartbeat(next, epoch, epoch_start, confirmed)).await?;
                sent_confirm = confirmed;
                continue;
            }
            tokio::select! {
                () = appended => {}
                changed = confirm.changed() => if changed.is_err() { return Ok(()) },
                () = tokio::time::sleep(self.settings.heartbeat_interval) => {
                    let (epoch, epoch_start, _) = self.epoch_of(next);
                    send(write, heartbeat(next, epoch, epoch_start, confirmed)).await?;
                }
            }
        }
    }

    /// The epoch that wrote `offset`, where it starts, and where it ends
    /// (`u64::MAX` for the newest).
    fn epoch_of(&self, offset: u64) -> (i32, u64, u64) {
        let epochs = self.lock_epochs();
        match epochs
            .epoch_at(offset)
            .or_else(|| epochs.entries().first().copied())
        {
            Some(e) => (
                e.epoch,
                e.start_offset,
                epochs.end_of(e.epoch).unwrap_or(u64::MAX),
            ),
            None => (-1, 0, u64::MAX),
        }
    }

    fn lock_epochs(&self) -> std::sync::MutexGuard<'_, EpochHistory> {
        self.epochs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_replicas(&self) -> std::sync::MutexGuard<'_, HashMap<u64, ReplicaStatus>> {
        self.replicas.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes a connection's status when it ends.
struct Registered<'a> {
    master: &'a Master,
    id: u64,
    /// The replica to take out of the in-sync set when it disconnects.
    leaves_set: Option<i64>,
}

impl Drop for Registered<'_> {
    fn drop(&mut self) {
        self.master.lock_replicas().remove(&self.id);
        self.master.connected.fetch_sub(1, Ordering::AcqRel);
        if let Some(replica) = self.leaves_set {
            let still = self
                .master
                .lock_replicas()
                .values()
                .any(|r| r.broker_id == replica);
            if !still {
                tracing::warn!(
                    broker_id = replica,
                    "replica disconnected; it leaves the in-sync set"
                );
                self.master.sync.remove_member(replica);
            }
        }
    }
}

/// The next frame, within `silent`.
async fn read_frame(
    frames: &mut FramedRead<tokio::net::tcp::OwnedReadHalf, MasterCodec>,
    silent: std::time::Duration,
) -> Result<SlaveFrame, ConnectionError> {
    match tokio::time::timeout(silent, frames.next()).await {
        Err(_) => Err(ConnectionError::Silent(silent)),
        Ok(None) => Err(ConnectionError::Closed),
        Ok(Some(frame)) => Ok(frame?),
    }
}

fn heartbeat(next: u64, epoch: i32, epoch_start: u64, confirm: u64) -> MasterFrame {
    MasterFrame::Transfer(MasterTransfer {
        offset: to_wire(next),
        epoch,
        epoch_start_offset: to_wire(epoch_start),
        confirm_offset: to_wire(confirm),
        body: bytes::Bytes::new(),
    })
}

async fn send(write: &mut OwnedWriteHalf, frame: MasterFrame) -> Result<(), ConnectionError> {
    let mut buf = BytesMut::new();
    MasterCodec.encode(frame, &mut buf)?;
    write
        .write_all(&buf)
        .await
        .map_err(|e| ConnectionError::Frame(FrameError::Io(e)))
}

/// An offset as the wire's signed 64-bit field carries it.
pub(crate) fn to_wire(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}
