//! A master's side of RocketMQ's classic framing (`DefaultHAConnection`):
//! no handshake and no epochs. The slave's first report is where its log
//! ends; an empty slave (0) gets the log from the start of the master's
//! newest file, as RocketMQ's classic master sends it. Transfers carry an
//! offset and bytes, heartbeats an offset and no bytes; there is no confirm
//! offset, so a classic slave shows its consumers what it received.

use std::{net::SocketAddr, sync::atomic::Ordering, sync::Arc};

use bytes::{Bytes, BytesMut};
use replication_protocol::{
    classic::{MasterCodec, Transfer},
    FrameError,
};
use tokio::{io::AsyncWriteExt, net::TcpStream};
use tokio_stream::StreamExt;
use tokio_util::codec::{Encoder, FramedRead};

use super::{to_wire, ConnectionError, Master, Registered, ReplicaStatus};

impl Master {
    /// Serves one classic slave until its connection ends.
    pub(super) async fn serve_classic_slave(
        self: &Arc<Self>,
        stream: TcpStream,
        peer: SocketAddr,
    ) -> Result<(), ConnectionError> {
        let _ = stream.set_nodelay(true);
        let (read, mut write) = stream.into_split();
        let mut reports = FramedRead::new(read, MasterCodec);
        let silent = self.settings.housekeeping_interval;
        let first = next_report(&mut reports, silent).await?;
        let reported = u64::try_from(first)
            .map_err(|_| ConnectionError::Protocol(format!("negative offset {first}")))?;
        let end = self.store.max_physical_offset();
        let start = if reported > 0 {
            reported
        } else {
            end - end % self.store.config().mapped_file_size_commit_log as u64
        };
        if start > end {
            return Err(ConnectionError::Protocol(format!(
                "the slave's log ends at {start}, past this master's end {end}"
            )));
        }
        let id = self.next_connection.fetch_add(1, Ordering::Relaxed);
        // A classic slave names no broker id: it is known by its connection.
        let broker_id = -1 - i64::try_from(id).unwrap_or(i64::MAX - 1);
        tracing::info!(%peer, broker_id, start, "classic replica connected");
        self.connected.fetch_add(1, Ordering::AcqRel);
        self.sync.master_wrote(self.store.max_physical_offset());
        self.sync.reset_ack(broker_id, reported);
        self.acknowledged(broker_id, reported);
        self.lock_replicas().insert(
            id,
            ReplicaStatus {
                broker_id,
                address: peer,
                acked: reported,
                async_learner: false,
            },
        );
        let _registered = Registered {
            master: self,
            id,
            leaves_set: self.settings.manage_in_sync_set.then_some(broker_id),
        };
        let reader = async {
            loop {
                let offset = next_report(&mut reports, silent).await?;
                let acked = u64::try_from(offset).unwrap_or(0);
                if let Some(r) = self.lock_replicas().get_mut(&id) {
                    r.acked = acked;
                }
                self.acknowledged(broker_id, acked);
            }
        };
        let writer = async {
            let mut next = start;
            loop {
                let appended = self.appended.notified();
                let end = self.store.max_physical_offset();
                if next < end {
                    let oldest = self.store.min_physical_offset();
                    if next < oldest {
                        return Err(ConnectionError::Protocol(format!(
                            "the slave needs the log from {next}, but retention deleted it up to {oldest}"
                        )));
                    }
                    if let Some(body) = self
                        .store
                        .commit_log_bytes(next, self.settings.transfer_batch_size)
                    {
                        let len = body.len() as u64;
                        send(&mut write, next, body).await?;
                        next += len;
                        continue;
                    }
                }
                tokio::select! {
                    () = appended => {}
                    () = tokio::time::sleep(self.settings.heartbeat_interval) => {
                        send(&mut write, next, Bytes::new()).await?;
                    }
                }
            }
        };
        tokio::select! {
            r = reader => r,
            w = writer => w,
        }
    }
}

async fn next_report(
    reports: &mut FramedRead<tokio::net::tcp::OwnedReadHalf, MasterCodec>,
    silent: std::time::Duration,
) -> Result<i64, ConnectionError> {
    match tokio::time::timeout(silent, reports.next()).await {
        Err(_) => Err(ConnectionError::Silent(silent)),
        Ok(None) => Err(ConnectionError::Closed),
        Ok(Some(offset)) => Ok(offset?),
    }
}

async fn send(
    write: &mut tokio::net::tcp::OwnedWriteHalf,
    offset: u64,
    body: Bytes,
) -> Result<(), ConnectionError> {
    let mut buf = BytesMut::new();
    MasterCodec.encode(
        Transfer {
            offset: to_wire(offset),
            body,
        },
        &mut buf,
    )?;
    write
        .write_all(&buf)
        .await
        .map_err(|e| ConnectionError::Frame(FrameError::Io(e)))
}
