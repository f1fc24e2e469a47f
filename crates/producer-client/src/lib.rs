//! The producer: topic routes, queue selection, synchronous, asynchronous and
//! oneway sends, timeouts, retries, failover and client-side limits.
//!
//! This crate is a skeleton until the producer is built.
