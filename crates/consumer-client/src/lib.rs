//! Pull and push consumers: offsets, long polling, rebalancing and
//! consumer-side flow control.
//!
//! This crate is a skeleton until the consumers are built.
