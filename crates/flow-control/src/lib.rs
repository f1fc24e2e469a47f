//! Flow control for the broker: bounded request queues that remember when
//! each request arrived, the fast-failure sweeper, admission decisions with
//! their reasons, quotas (token buckets per topic or client), and the
//! counters behind them.
//!
//! Pure policy without I/O: callers pass the current instant wherever time
//! matters, so every decision can be tested with made-up instants. The broker
//! wires it up like this:
//!
//! ```
//! use std::{sync::Arc, time::{Duration, Instant}};
//! use flow_control::{FastFailure, Reason, RequestQueue};
//!
//! let send = Arc::new(RequestQueue::new("send", 10_000));
//! let sweeper = FastFailure::new(Arc::clone(&send), Duration::from_millis(200));
//!
//! let t0 = Instant::now();
//! send.try_push("SEND_MESSAGE_V2 #1", t0).expect("queue has room");
//!
//! // 250 ms later nobody has served it: the sweeper answers it busy.
//! let swept = sweeper.sweep(t0 + Duration::from_millis(250), || false);
//! assert_eq!(swept[0].0.payload, "SEND_MESSAGE_V2 #1");
//! assert_eq!(
//!     swept[0].1.remark(),
//!     "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
//!      period in queue: 250ms, size of queue: 0"
//! );
//! assert!(matches!(swept[0].1, Reason::TimeoutCleanQueue { .. }));
//! ```
//!
//! # Invariants worth naming
//! - A queued task leaves its queue exactly once: to a worker, to the
//!   sweeper, or to a drain. A task answered busy is never served.
//! - Admission and expiry keep RocketMQ's order and remarks: the processor's
//!   `rejectRequest` check, then the bounded queue (`[OVERLOAD]`), then the
//!   sweeper's page-cache-busy drain and per-queue head expiry.
//! - Early rejection never happens without a measured service time.
//! - Nothing here blocks except [`RequestQueue::pop`], which only workers call.
#![deny(clippy::unwrap_used)]

pub mod config;
pub mod counters;
pub mod estimator;
pub mod queue;
pub mod quota;
pub mod reason;
pub mod share;
pub mod sojourn;
pub mod sweeper;

pub use config::{parse_share_weights, ConfigError, FlowControlConfig, ShareKey};
pub use counters::{Counters, CountersSnapshot};
pub use estimator::ServiceTimeEstimator;
pub use queue::{Admission, Expired, IdleTurn, RequestQueue, Task, DEFAULT_MAX_SHARES};
pub use quota::{parse_quotas, OverQuota, Quota, QuotaScope, QuotaUnit, Quotas, TokenBucket};
pub use reason::{Reason, Rejected};
pub use share::{ShareFigures, OVERFLOW_SHARE};
pub use sojourn::{Sojourn, SojournControl};
pub use sweeper::FastFailure;
