//! CommitLog replication between a master and its slaves, in RocketMQ's
//! controller-mode framing ([`replication_protocol::auto_switch`]).
//!
//! - [`master::Master`] serves slaves on the HA port: it answers a slave's
//!   handshake with its epoch history, streams CommitLog bytes one epoch at
//!   a time from where the slave's log ends, and keeps each identified
//!   slave's acknowledged offset. The [`sync_set::SyncSet`] turns those into
//!   the confirm offset: the lowest offset every in-sync replica holds.
//! - [`slave::Slave`] connects to its master, cuts its own log where it
//!   stops agreeing with the master's epoch history, appends what the master
//!   sends, follows the confirm offset and reports its end.
//!
//! # Invariants
//! - A slave's acknowledgements count only after its handshake named it.
//! - The confirm offset never passes what an in-sync replica acknowledged,
//!   also while that replica is disconnected.
//! - A transfer's bytes all belong to the epoch it names.

pub mod master;
pub mod slave;
pub mod sync_set;

use std::time::Duration;

/// Settings shared by both sides (RocketMQ's `ha*` keys).
#[derive(Debug, Clone)]
pub struct HaSettings {
    /// Most CommitLog bytes per transfer (`haTransferBatchSize`, 32 KiB).
    pub transfer_batch_size: usize,
    /// A side that sent nothing for this long sends a heartbeat
    /// (`haSendHeartbeatInterval`, 5 s).
    pub heartbeat_interval: Duration,
    /// A connection that received nothing for this long is closed
    /// (`haHousekeepingInterval`, 20 s).
    pub housekeeping_interval: Duration,
    /// The slave's broker id, sent in its handshake.
    pub broker_id: i64,
    /// A slave that only replicates and never joins the in-sync set
    /// (`asyncLearner`).
    pub async_learner: bool,
    /// An empty slave starts from the master's last file instead of its
    /// first (`syncFromLastFile`).
    pub sync_from_last_file: bool,
    /// The master keeps its in-sync set itself (no controller): a replica
    /// joins once it acknowledged the confirm offset and leaves when it
    /// disconnects.
    pub manage_in_sync_set: bool,
    /// Speak RocketMQ's classic framing (no handshake, no epochs, no
    /// confirm offset) instead of the controller-mode one.
    pub classic: bool,
}

impl Default for HaSettings {
    fn default() -> Self {
        Self {
            transfer_batch_size: 32 * 1024,
            heartbeat_interval: Duration::from_secs(5),
            housekeeping_interval: Duration::from_secs(20),
            broker_id: 1,
            async_learner: false,
            sync_from_last_file: false,
            manage_in_sync_set: false,
            classic: false,
        }
    }
}
