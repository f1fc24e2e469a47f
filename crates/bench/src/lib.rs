//! The load tool: drives a RocketMQ-protocol broker with `SEND_MESSAGE_V2`
//! requests (or RocketMQ 5 gRPC `SendMessage` calls) at a fixed offered rate (open loop) or with a fixed number of
//! requests in flight (closed loop), and reports throughput, latency
//! percentiles and failures by reason; pulls a topic (or receives it over
//! gRPC) and reports throughput and end-to-end latency.
//!
//! The `sluice-bench` binary is a thin shell over [`run::run`]:
//!
//! ```text
//! sluice-bench --broker 127.0.0.1:10911 --in-flight 64 --duration 10
//! sluice-bench --broker 127.0.0.1:10911 --rate 20000 --connections 4 --json
//! sluice-bench --namesrv 127.0.0.1:9876 --topic Orders --in-flight 16
//! sluice-bench --protocol grpc --grpc 127.0.0.1:8081 --in-flight 64 --connections 4
//! sluice-bench consume --namesrv 127.0.0.1:9876 --topic Orders --duration 10
//! sluice-bench consume --protocol grpc --grpc 127.0.0.1:8081 --topic Orders --receivers 8
//! sluice-bench nats-publish --server 127.0.0.1:4222 --in-flight 16 --duration 5
//! ```
//!
//! - [`config`]: what a run does ([`Config`], [`Mode`]).
//! - [`args`]: the command-line flags that build them.
//! - [`route`]: where sends go: one broker's queues, or a topic's route from
//!   a name server (`--namesrv`).
//! - [`run`]: the closed and open loops.
//! - [`sender`]: what the loops send through, by protocol: remoting
//!   connections, or gRPC channels ([`grpc`]).
//! - [`consume`]: the consumer benchmark (`sluice-bench consume`), and
//!   [`grpc_consume`], its gRPC receive loops.
//! - [`overload`], [`chart`]: the overload experiment's table, JSON and
//!   chart (`sluice-bench overload-report`, run by `cargo xtask bench`).
//! - [`nats`]: JetStream publishes to a NATS server (`sluice-bench
//!   nats-publish`), for the comparison with NATS (`cargo xtask bench peers`).
//! - [`drain`]: how fast a backlog filled beforehand drains (`sluice-bench
//!   drain`), for Sluice's push consumer and, in [`drain_nats`], a NATS
//!   JetStream pull consumer; [`drain_args`] holds its flags.
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
pub mod chart;
pub mod config;
pub mod consume;
pub mod controller_commit;
pub mod drain;
pub mod drain_args;
pub mod drain_nats;
pub mod grpc;
pub mod grpc_consume;
pub mod nats;
pub mod outcome;
pub mod overload;
pub mod report;
pub mod route;
pub mod run;
pub mod schedule;
pub mod sender;
mod window;

pub use config::{Config, Mode, Protocol};
pub use outcome::Outcome;
pub use report::{Recorder, Report};
