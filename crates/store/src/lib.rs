//! Sluice's message store, in RocketMQ's on-disk layout: memory-mapped
//! CommitLog files, the transient store pool, flush and commit services, the
//! ConsumeQueue index and crash recovery.
//!
//! The store is synchronous code run on the broker's worker and service
//! threads; it knows nothing of the network.
//!
//! # Invariants worth naming
//! - Appends serialise on one put lock, held for the copy only; the instant
//!   it was taken is published so that "page cache busy" can be read from
//!   any thread.
//! - Readers only ever see committed bytes.
//! - An appended message is acknowledged under ASYNC_FLUSH once it is in the
//!   page cache, under SYNC_FLUSH once a flush covers it. The append itself
//!   never waits for the flush: it returns a [`FlushTicket`] whose completion
//!   the flush thread runs (or the caller waits on it).
//!
//! # Layout
//! - `store`: the facade, [`MessageStore`]; `state`: what it shares with its
//!   threads.
//! - `dispatch`: the reput thread that builds the ConsumeQueues from the
//!   CommitLog and announces arrivals; `retention`: the cleaning thread that
//!   deletes expired files and guards the disk; `services`: the commit, flush, flush
//!   timer and housekeeping threads; `group_commit`: SYNC_FLUSH
//!   acknowledgements and the [`FlushTicket`].
//! - `commit_log`, `consume_queue`, `file_queue`, `mmap` (the only `unsafe`
//!   code), `pool`, `checkpoint`, `recovery`: the files and what is in them.
//!   `warm`: the thread that faults in the CommitLog pages just ahead of the
//!   appends.
//! - `index`: the IndexFiles and queries by key (`UNIQ_KEY` and `KEYS`).
//!   The record layout itself is `message_model::record`.
//! - `sync_log`: power-loss testing, a record of what each sync made
//!   durable and [`cut_power`], which drops everything else.
#![deny(clippy::unwrap_used)]

mod checkpoint;
mod commit_log;
mod config;
mod consume_queue;
mod dispatch;
mod epoch;
mod error;
mod file_queue;
mod group_commit;
mod index;
mod mmap;
mod pool;
mod recovery;
mod retention;
mod services;
mod state;
mod store;
mod sync_log;
mod topic_delete;
mod warm;

pub use commit_log::AppendResult;
pub use config::{ConfigError, FlushDiskType, StoreConfig, DEFAULT_MESSAGE_DELAY_LEVEL};
pub use consume_queue::CqEntry;
pub use dispatch::{ArrivalListener, ArrivalWatch};
pub use epoch::{Epoch, EpochError, EpochHistory};
pub use error::{PutError, ReplicaAppendError, StoreError};
pub use group_commit::{FlushTicket, GroupCommitStats};
pub use index::QueryResult;
pub use message_model::MessageToStore;
pub use mmap::flush_calls;
pub use retention::{Expiring, RetentionListener, RetentionStats};
pub use state::AppendListener;
pub use store::{
    GetResult, GetStatus, MessageStore, PutOutcome, PutStatus, ReadCaps, MAX_FILTER_SCAN_BYTES,
};
pub use sync_log::{cut_power, PowerCut, SYNC_LOG_ENV};
