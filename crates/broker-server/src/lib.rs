//! The Sluice broker: the remoting TCP server, request processors and their
//! executor pools, wiring the protocol, the store and flow control together.
//!
//! This crate is a skeleton until the broker is built; today it only exposes
//! the protocol it will speak.

pub use remoting_protocol as protocol;
