//! The name server: brokers register their topics, clients ask which brokers
//! serve a topic. Usable as a library so that the broker can embed it.
//!
//! The core is synchronous and does no I/O: [`RouteRegistry`] holds the
//! routes, [`KvConfig`] the key-value configuration (kept in a file when
//! `kvConfigPath` names one),
//! [`NameServerProcessor`] turns requests into responses. [`run`]
//! serves them over TCP (the `namesrv` binary and the broker's embedded name
//! server use it). A transport
//! passes every request with the current `Instant` and an id of the
//! connection it came on, calls [`RouteRegistry::connection_closed`] when a
//! connection ends, and calls [`RouteRegistry::scan_expired`] every
//! [`NamesrvConfig::scan_interval`].
//!
//! # Invariants worth naming
//! - Handling a request never panics, whatever its header fields and body.
//! - A topic has a route exactly while some live broker name holds queue data
//!   for it.
#![deny(clippy::unwrap_used)]

pub mod config;
pub mod kv_config;
pub mod legacy_json;
pub mod processor;
pub mod registry;
pub mod server;

pub use config::{ConfigError, NamesrvConfig};
pub use kv_config::{KvConfig, KvConfigError};
pub use legacy_json::to_legacy_json;
pub use processor::NameServerProcessor;
pub use registry::{RegisterResult, RouteRegistry};
pub use server::{open_kv_config, run, run_with_controller};
