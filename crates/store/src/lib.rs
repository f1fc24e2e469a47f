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
#![deny(clippy::unwrap_used)]

pub mod checkpoint;
pub mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod error;
pub mod file_queue;
pub mod mmap;
pub mod pool;
mod recovery;
mod service;
mod store;

pub use config::{ConfigError, FlushDiskType, StoreConfig};
pub use error::{PutError, StoreError};
pub use message_model::MessageToStore;
pub use mmap::{MappedFile, OS_PAGE_SIZE};
pub use pool::TransientStorePool;
pub use service::GroupCommitStats;
pub use store::{
    ArrivalListener, FlushTicket, GetResult, GetStatus, MessageStore, PutOutcome, PutStatus,
};
