//! The checkpoint file: how far the CommitLog and the ConsumeQueues are known
//! to be durable, as store timestamps.
//!
//! A 4 KiB file with big-endian i64 fields at offsets 0 (physicMsgTimestamp),
//! 8 (logicsMsgTimestamp), 16 (indexMsgTimestamp), 24 (masterFlushedOffset)
//! and 32 (confirmPhyOffset). It is rewritten in place (the fields share one
//! disk sector) and synced.

use std::{
    fs::{File, OpenOptions},
    io,
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::atomic::{AtomicI64, Ordering},
};

use crate::sync_log;

const FILE_SIZE: u64 = 4096;

/// The checkpoint values and the file they persist to.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    file: File,
    physic_msg_timestamp: AtomicI64,
    logics_msg_timestamp: AtomicI64,
    index_msg_timestamp: AtomicI64,
    master_flushed_offset: AtomicI64,
    confirm_phy_offset: AtomicI64,
}

impl Checkpoint {
    /// Opens (or creates) the checkpoint file and reads its values.
    ///
    /// # Errors
    /// The file cannot be opened, sized or read.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        if file.metadata()?.len() < FILE_SIZE {
            file.set_len(FILE_SIZE)?;
        }
        let mut raw = [0u8; 40];
        file.read_exact_at(&mut raw, 0)?;
        sync_log::snapshot(path, &raw);
        let field = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&raw[i * 8..i * 8 + 8]);
            AtomicI64::new(i64::from_be_bytes(b))
        };
        Ok(Self {
            physic_msg_timestamp: field(0),
            logics_msg_timestamp: field(1),
            index_msg_timestamp: field(2),
            master_flushed_offset: field(3),
            confirm_phy_offset: field(4),
            path: path.to_path_buf(),
            file,
        })
    }

    /// Store timestamp of the last CommitLog message known durable.
    pub fn physic_msg_timestamp(&self) -> i64 {
        self.physic_msg_timestamp.load(Ordering::Acquire)
    }

    /// Store timestamp of the last message whose ConsumeQueue entry is durable.
    pub fn logics_msg_timestamp(&self) -> i64 {
        self.logics_msg_timestamp.load(Ordering::Acquire)
    }

    /// Sets the CommitLog timestamp (it never moves backwards).
    pub fn set_physic_msg_timestamp(&self, ts: i64) {
        self.physic_msg_timestamp.fetch_max(ts, Ordering::AcqRel);
    }

    /// Sets the ConsumeQueue timestamp (it never moves backwards).
    pub fn set_logics_msg_timestamp(&self, ts: i64) {
        self.logics_msg_timestamp.fetch_max(ts, Ordering::AcqRel);
    }

    /// The replication confirm offset: every CommitLog byte below it is
    /// on all in-sync replicas (0 when never set).
    pub fn confirm_phy_offset(&self) -> i64 {
        self.confirm_phy_offset.load(Ordering::Acquire)
    }

    /// Sets the confirm offset for the next flush.
    pub fn set_confirm_phy_offset(&self, offset: i64) {
        self.confirm_phy_offset.store(offset, Ordering::Release);
    }

    /// Store timestamp of the newest message of the last IndexFile known
    /// durable (set when a full IndexFile has been flushed).
    pub fn index_msg_timestamp(&self) -> i64 {
        self.index_msg_timestamp.load(Ordering::Acquire)
    }

    /// Sets the IndexFile timestamp (it never moves backwards).
    pub fn set_index_msg_timestamp(&self, ts: i64) {
        self.index_msg_timestamp.fetch_max(ts, Ordering::AcqRel);
    }

    /// RocketMQ's recovery bound: the older of the two timestamps, less 3 s
    /// of margin, never below 0.
    pub fn min_timestamp(&self) -> i64 {
        (self.physic_msg_timestamp().min(self.logics_msg_timestamp()) - 3000).max(0)
    }

    /// Writes the values to the file and syncs it.
    ///
    /// # Errors
    /// The write or sync error.
    pub fn flush(&self) -> io::Result<()> {
        let mut raw = [0u8; 40];
        for (i, v) in [
            &self.physic_msg_timestamp,
            &self.logics_msg_timestamp,
            &self.index_msg_timestamp,
            &self.master_flushed_offset,
            &self.confirm_phy_offset,
        ]
        .iter()
        .enumerate()
        {
            raw[i * 8..i * 8 + 8].copy_from_slice(&v.load(Ordering::Acquire).to_be_bytes());
        }
        self.file.write_all_at(&raw, 0)?;
        self.file.sync_data()?;
        sync_log::snapshot(&self.path, &raw);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_persist_at_rocketmq_offsets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let cp = Checkpoint::open(&path).unwrap();
        cp.set_physic_msg_timestamp(10_000);
        cp.set_logics_msg_timestamp(9_000);
        cp.set_physic_msg_timestamp(5);
        cp.set_index_msg_timestamp(7_000);
        cp.flush().unwrap();
        let raw = std::fs::read(&path).unwrap();
        assert_eq!(raw.len(), 4096);
        assert_eq!(&raw[0..8], &10_000i64.to_be_bytes());
        assert_eq!(&raw[8..16], &9_000i64.to_be_bytes());
        assert_eq!(&raw[16..24], &7_000i64.to_be_bytes());
        let again = Checkpoint::open(&path).unwrap();
        assert_eq!(again.index_msg_timestamp(), 7_000);
        assert_eq!(again.min_timestamp(), 6_000);
    }
}
