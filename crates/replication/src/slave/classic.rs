//! A slave's side of RocketMQ's classic framing (`DefaultHAClient`): it
//! reports where its log ends, appends what the master sends from there,
//! and reports again after each append and every heartbeat interval. No
//! epochs travel, so nothing is cut: a classic slave whose log went further
//! than its master's is refused. Without a confirm offset, what it appended
//! is what its consumers see.

use std::time::Instant;

use bytes::BytesMut;
use replication_protocol::{classic::SlaveCodec, FrameError};
use tokio::io::AsyncWriteExt;
use tokio_stream::StreamExt;
use tokio_util::codec::{Encoder, FramedRead};

use super::{Slave, SlaveError};
use crate::master::to_wire;

impl Slave {
    /// One classic connection to the master at `address`, until it fails.
    pub(super) async fn follow_classic_once(&self, address: &str) -> Result<(), SlaveError> {
        let stream = super::connect(address).await?;
        let (read, mut write) = stream.into_split();
        let mut transfers = FramedRead::new(read, SlaveCodec::default());
        let silent = self.settings.housekeeping_interval;
        let mut reported = self.store.max_physical_offset();
        report(&mut write, reported).await?;
        self.lock_status().master = Some(address.to_owned());
        tracing::info!(master = %address, end = reported, "replicating from the master (classic)");
        let mut last_sent = Instant::now();
        loop {
            let wait = self
                .settings
                .heartbeat_interval
                .saturating_sub(last_sent.elapsed());
            let transfer = tokio::select! {
                t = tokio::time::timeout(silent, transfers.next()) => match t {
                    Err(_) => return Err(SlaveError::Silent(silent)),
                    Ok(None) => return Err(SlaveError::Closed),
                    Ok(Some(t)) => t?,
                },
                () = tokio::time::sleep(wait) => {
                    report(&mut write, reported).await?;
                    last_sent = Instant::now();
                    continue;
                }
            };
            if !transfer.body.is_empty() {
                let offset = u64::try_from(transfer.offset).map_err(|_| {
                    SlaveError::Protocol(format!("negative offset {}", transfer.offset))
                })?;
                // Contiguous with this log's end, or, in an empty log, at
                // a file's start (a slave copying from the master's newest
                // file): the store checks.
                self.store.append_replicated(offset, &transfer.body)?;
            }
            let end = self.store.max_physical_offset();
            // No confirm offset in this framing: what arrived is shown.
            self.store.set_confirm_offset(end);
            self.lock_status().master_confirm = end;
            if end != reported {
                reported = end;
                report(&mut write, reported).await?;
                last_sent = Instant::now();
            }
        }
    }
}

async fn report(
    write: &mut tokio::net::tcp::OwnedWriteHalf,
    offset: u64,
) -> Result<(), SlaveError> {
    let mut buf = BytesMut::new();
    SlaveCodec::default().encode(to_wire(offset), &mut buf)?;
    write
        .write_all(&buf)
        .await
        .map_err(|e| SlaveError::Frame(FrameError::Io(e)))
}
