//! The load tool: drives a RocketMQ-protocol broker with `SEND_MESSAGE_V2`
//! requests at a fixed offered rate (open loop) or with a fixed number of
//! requests in flight (closed loop), and reports throughput, latency
//! percentiles and failures by reason.
//!
//! The `sluice-bench` binary is a thin shell over [`run::run`]:
//!
//! ```text
//! sluice-bench --broker 127.0.0.1:10911 --in-flight 64 --duration 10
//! sluice-bench --broker 127.0.0.1:10911 --rate 20000 --connections 4 --json
//! ```
//!
//! - [`config`]: what a run does ([`Config`], [`Mode`]).
//! - [`args`]: the command-line flags that build them.
//! - [`run`]: the closed and open loops.
//! - [`schedule`]: the open loop's fixed send times.
//! - [`outcome`]: response codes and busy remarks (`[TAG]`, period in queue).
//! - [`report`]: HDR histograms, counters, the table and the JSON.
//!
//! # Invariants worth naming
//! - A run stops by itself: nothing starts after warm-up plus duration, and
//!   every request waits at most the request timeout.
//! - Open-loop latency is measured from the intended send time, so it
//!   includes any time the request spent waiting to be sent (no coordinated
//!   omission).
//! - Busy responses never count toward the success latency; the time to hear
//!   "busy" has a histogram of its own.
#![deny(clippy::unwrap_used)]

pub mod args;
pub mod config;
pub mod outcome;
pub mod report;
pub mod run;
pub mod schedule;

pub use config::{Config, Mode};
pub use outcome::Outcome;
pub use report::{Recorder, Report};
