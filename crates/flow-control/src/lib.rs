//! Flow control for the broker: bounded request queues that remember when
//! each request arrived, the fast-failure sweeper, admission decisions with
//! their reasons, and the metrics behind them.
//!
//! Pure policy without I/O: callers pass the current instant. This crate is a
//! skeleton until flow control is built.
