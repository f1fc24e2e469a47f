//! The load tool: drives RocketMQ-protocol brokers at a fixed offered rate or
//! a fixed number of requests in flight, and reports throughput, latency
//! percentiles and rejections by reason.
//!
//! This crate is a skeleton until the load tool is built.
