//! The controllers' consensus: openraft with a log, vote and snapshot kept
//! in small synced files, and messages carried over the controller port.

mod files;
mod log_store;
mod network;
mod state_machine;

pub use log_store::LogStore;
pub use network::{
    is_raft_code, serve_raft, Network, RAFT_APPEND_ENTRIES, RAFT_INSTALL_SNAPSHOT, RAFT_VOTE,
};
pub use state_machine::{RecordView, StateMachine};

use std::io::Cursor;

use crate::model::{Command, Outcome};

/// A controller's id among its peers.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// The controllers' Raft types: commands change the record, outcomes
    /// say what they did.
    pub TypeConfig:
        D = Command,
        R = Outcome,
);

/// A controller's Raft node.
pub type Raft = openraft::Raft<TypeConfig>;
