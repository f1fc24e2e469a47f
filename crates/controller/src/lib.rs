//! The replication controller: a small group of controllers (three, as a
//! rule) that agree through Raft on each broker group's members, master,
//! master epoch and in-sync replica set, and elect a new master when one
//! dies.
//!
//! - [`model`] is the replicated record and the commands that change it,
//!   deterministic and free of I/O.
//! - [`raft`] keeps the Raft log, vote and snapshot in small synced files and
//!   carries Raft's messages over the controller port.
//! - [`liveness`] tracks brokers' heartbeats and masters' leases;
//!   [`elect`] chooses whom to elect.
//! - [`Controller`] runs one controller: it serves RocketMQ's controller
//!   requests on its port, and its leader elects new masters.
//!
//! # Invariants worth naming
//! - Every controller that applied the same commands holds the same record.
//! - A master other than the old one is elected only after the old master's
//!   lease must have run out, counted from when the leader that granted it
//!   received the beat it answered, or from when the current leader took
//!   over; a lease is granted only by a leader that a quorum confirmed after
//!   the beat arrived (a round of Raft heartbeats).
//! - Only the leader changes the record; a command decided on a stale view
//!   is refused when applied (the epochs it carries no longer match).

pub mod config;
pub mod elect;
pub mod liveness;
pub mod model;
mod node;
pub mod raft;
mod requests;
pub mod testing;

pub use config::{parse_peers, ControllerConfig, ControllerConfigError, PeerAddr};
pub use node::{Controller, StartError, WriteError};
pub use requests::{is_controller_code, LEASE_EPOCH, LEASE_MILLIS};
