//! Sluice's message store, in RocketMQ's on-disk layout: memory-mapped
//! CommitLog files, the transient store pool, flush and commit services, the
//! ConsumeQueue index and crash recovery.
//!
//! The store is synchronous code run on the broker's worker and service
//! threads; it knows nothing of the network. This crate is a skeleton until
//! the store is built.
