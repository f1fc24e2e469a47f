//! End-to-end scenarios run by `cargo xtask e2e` against real name server and
//! broker processes on loopback.
//!
//! This crate is a skeleton until the end-to-end suite is built.
