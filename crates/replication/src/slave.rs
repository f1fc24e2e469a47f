//! The slave's side: follows a master's CommitLog.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use bytes::BytesMut;
use replication_protocol::{
    auto_switch::{MasterFrame, SlaveCodec, SlaveFrame},
    FrameError,
};
use store::{Epoch, EpochError, EpochHistory, MessageStore, PutError, ReplicaAppendError};
use tokio::{
    io::AsyncWriteExt,
    net::{tcp::OwnedWriteHalf, TcpStream},
    sync::watch,
};
use tokio_stream::StreamExt;
use tokio_util::codec::{Encoder, FramedRead};

use crate::{master::to_wire, HaSettings};

mod classic;

/// Why a slave's connection to its master ended.
#[derive(Debug, thiserror::Error)]
pub enum SlaveError {
    /// The master cannot be reached.
    #[error("cannot connect to master {address}: {source}")]
    Connect {
        /// The master's HA address.
        address: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The bytes were not frames.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The master broke the order of the protocol.
    #[error("{0}")]
    Protocol(String),
    /// The logs share no epoch, so no point where they agree is known.
    #[error("this replica's log shares no epoch with the master's (replica {local:?}, master {master:?}); it must be emptied to follow this master")]
    NoCommonEpoch {
        /// This replica's epochs.
        local: Vec<Epoch>,
        /// The master's.
        master: Vec<Epoch>,
    },
    /// The local store refused the master's bytes or the cut.
    #[error("local store: {0}")]
    Store(String),
    /// The epoch file could not be changed.
    #[error(transparent)]
    Epochs(#[from] EpochError),
    /// Nothing arrived for the housekeeping interval.
    #[error("nothing received from the master for {0:?}")]
    Silent(Duration),
    /// The master closed the connection.
    #[error("closed by the master")]
    Closed,
}

impl From<ReplicaAppendError> for SlaveError {
    fn from(e: ReplicaAppendError) -> Self {
        SlaveError::Store(e.to_string())
    }
}

impl From<PutError> for SlaveError {
    fn from(e: PutError) -> Self {
        SlaveError::Store(e.to_string())
    }
}

/// What a slave knows of its replication.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlaveStatus {
    /// The master's HA address while connected.
    pub master: Option<String>,
    /// The master's confirm offset, as last received.
    pub master_confirm: u64,
    /// Where the log was cut at the last handshake, if it was.
    pub truncated_to: Option<u64>,
    /// Why the last connection ended.
    pub last_error: Option<String>,
}

/// A slave's replication service.
#[derive(Debug)]
pub struct Slave {
    store: Arc<MessageStore>,
    epochs: Arc<Mutex<EpochHistory>>,
    settings: HaSettings,
    status: Mutex<SlaveStatus>,
}

impl Slave {
    /// A service appending to `store`, whose epochs are `epochs`.
    pub fn new(
        store: Arc<MessageStore>,
        epochs: Arc<Mutex<EpochHistory>>,
        settings: HaSettings,
    ) -> Arc<Self> {
        Arc::new(Self {
            store,
            epochs,
            settings,
            status: Mutex::new(SlaveStatus::default()),
        })
    }

    /// The replication status.
    pub fn status(&self) -> SlaveStatus {
        self.lock_status().clone()
    }

    /// Follows the master whose HA address `address` holds, until the
    /// returned future is dropped: connects again a second after each
    /// failure, and at once to a new address when it changes; waits while
    /// there is none.
    pub async fn run(self: Arc<Self>, mut address: watch::Receiver<Option<String>>) {
        loop {
            let Some(addr) = address.borrow_and_update().clone() else {
                if address.changed().await.is_err() {
                    return;
                }
                continue;
            };
            let followed = tokio::select! {
                r = self.follow(&addr) => r,
                Ok(()) = address.changed() => continue,
            };
            let cause = match followed {
                Ok(()) | Err(SlaveError::Closed) => "closed by the master".to_owned(),
                Err(e) => e.to_string(),
            };
            tracing::warn!(master = %addr, %cause, "replication from the master stopped; connecting again in 1 s");
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// One connection to the master at `address`, until it fails; the
    /// failure is kept in the status.
    ///
    /// # Errors
    /// Why the connection ended.
    pub async fn follow(&self, address: &str) -> Result<(), SlaveError> {
        let result = if self.settings.classic {
            self.follow_classic_once(address).await
        } else {
            self.follow_once(address).await
        };
        let mut status = self.lock_status();
        status.master = None;
        status.last_error = Some(match &result {
            Ok(()) | Err(SlaveError::Closed) => "closed by the master".to_owned(),
            Err(e) => e.to_string(),
        });
        result
    }

    async fn follow_once(&self, address: &str) -> Result<(), SlaveError> {
        let stream = connect(address).await?;
        let (read, mut write) = stream.into_split();
        let mut frames = FramedRead::new(read, SlaveCodec::default());
        let silent = self.settings.housekeeping_interval;
        send(
            &mut write,
            SlaveFrame::Handshake {
                sync_from_last_file: self.settings.sync_from_last_file,
                async_learner: self.settings.async_learner,
                broker_id: self.settings.broker_id,
            },
        )
        .await?;
        let MasterFrame::Handshake(handshake) = read_frame(&mut frames, silent).await? else {
            return Err(SlaveError::Protocol(
                "a transfer before the master's handshake".into(),
            ));
        };
        let master_epochs: Vec<Epoch> = handshake
            .epochs
            .iter()
            .map(|e| Epoch {
                epoch: e.epoch,
                start_offset: u64::try_from(e.start_offset).unwrap_or(0),
            })
            .collect();
        let master_end = u64::try_from(handshake.max_offset).unwrap_or(0);
        let truncated_to = self.cut_to_agree(&master_epochs, master_end).await?;
        {
            let mut status = self.lock_status();
            status.master = Some(address.to_owned());
            status.truncated_to = truncated_to;
        }
        tracing::info!(master = %address, end = self.store.max_physical_offset(), ?truncated_to, "replicating from the master");
        let mut reported = self.store.max_physical_offset();
        send(
            &mut write,
            SlaveFrame::Report {
                max_offset: to_wire(reported),
            },
        )
        .await?;
        let mut last_sent = Instant::now();
        loop {
            let frame = tokio::select! {
                frame = read_frame(&mut frames, silent) => frame?,
                () = tokio::time::sleep(self.settings.heartbeat_interval.saturating_sub(last_sent.elapsed())) => {
                    send(&mut write, SlaveFrame::Report { max_offset: to_wire(reported) }).await?;
                    last_sent = Instant::now();
                    continue;
                }
            };
            let MasterFrame::Transfer(t) = frame else {
                return Err(SlaveError::Protocol("a second handshake".into()));
            };
            if !t.body.is_empty() {
                let offset = u64::try_from(t.offset)
                    .map_err(|_| SlaveError::Protocol(format!("negative offset {}", t.offset)))?;
                // Contiguous with this log's end, or, in an empty log, at
                // a file's start (a slave copying from the master's newest
                // file): the store checks.
                self.enter_epoch(t.epoch, t.epoch_start_offset)?;
                self.store.append_replicated(offset, &t.body)?;
            }
            let confirm = u64::try_from(t.confirm_offset).unwrap_or(0);
            self.store.set_confirm_offset(confirm);
            self.lock_status().master_confirm = confirm;
            let end = self.store.max_physical_offset();
            if end != reported {
                reported = end;
                send(
                    &mut write,
                    SlaveFrame::Report {
                        max_offset: to_wire(reported),
                    },
                )
                .await?;
                last_sent = Instant::now();
            }
        }
    }

    /// Cuts this log where it stops agreeing with the master's epochs;
    /// returns the cut, if one was made.
    async fn cut_to_agree(
        &self,
        master: &[Epoch],
        master_end: u64,
    ) -> Result<Option<u64>, SlaveError> {
        let local_end = self.store.max_physical_offset();
        let (local, point) = {
            let epochs = self.lock_epochs();
            (
                epochs.entries().to_vec(),
                epochs.consistent_point(local_end, master, master_end),
            )
        };
        if local.is_empty() {
            if local_end > 0 {
                return Err(SlaveError::NoCommonEpoch {
                    local,
                    master: master.to_vec(),
                });
            }
            return Ok(None);
        }
        let Some(point) = point else {
            return Err(SlaveError::NoCommonEpoch {
                local,
                master: master.to_vec(),
            });
        };
        if point >= local_end {
            return Ok(None);
        }
        tracing::warn!(
            from = point,
            to = local_end,
            "cutting this replica's log where it stops agreeing with the master's"
        );
        let store = Arc::clone(&self.store);
        let cut = tokio::task::spawn_blocking(move || store.truncate_replicated(point))
            .await
            .map_err(|e| SlaveError::Store(format!("the cut did not finish: {e}")))??;
        self.lock_epochs().truncate_from(cut)?;
        Ok(Some(cut))
    }

    /// Records that bytes of `epoch` (starting at `start`) arrive, if it is
    /// newer than this log's newest.
    fn enter_epoch(&self, epoch: i32, start: i64) -> Result<(), SlaveError> {
        let mut epochs = self.lock_epochs();
        if epoch > epochs.last_epoch() {
            let start_offset = u64::try_from(start)
                .map_err(|_| SlaveError::Protocol(format!("negative epoch start {start}")))?;
            epochs.append(Epoch {
                epoch,
                start_offset,
            })?;
            tracing::info!(epoch, start_offset, "replicating a new master epoch");
        }
        Ok(())
    }

    fn lock_epochs(&self) -> std::sync::MutexGuard<'_, EpochHistory> {
        self.epochs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, SlaveStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

async fn read_frame(
    frames: &mut FramedRead<tokio::net::tcp::OwnedReadHalf, SlaveCodec>,
    silent: Duration,
) -> Result<MasterFrame, SlaveError> {
    match tokio::time::timeout(silent, frames.next()).await {
        Err(_) => Err(SlaveError::Silent(silent)),
        Ok(None) => Err(SlaveError::Closed),
        Ok(Some(frame)) => Ok(frame?),
    }
}

async fn send(write: &mut OwnedWriteHalf, frame: SlaveFrame) -> Result<(), SlaveError> {
    let mut buf = BytesMut::new();
    SlaveCodec::default().encode(frame, &mut buf)?;
    write
        .write_all(&buf)
        .await
        .map_err(|e| SlaveError::Frame(FrameError::Io(e)))
}

/// A connection to the master's HA port at `address` (3 s to connect),
/// with Nagle's delay off.
async fn connect(address: &str) -> Result<TcpStream, SlaveError> {
    let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(address))
        .await
        .map_err(|_| SlaveError::Connect {
            address: address.to_owned(),
            source: std::io::ErrorKind::TimedOut.into(),
        })?
        .map_err(|source| SlaveError::Connect {
            address: address.to_owned(),
            source,
        })?;
    let _ = stream.set_nodelay(true);
    Ok(stream)
}
