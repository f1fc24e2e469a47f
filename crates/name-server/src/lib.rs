//! The name server: brokers register their topics, clients ask which brokers
//! serve a topic. Usable as a library so that the broker can embed it.
//!
//! This crate is a skeleton until the name server is built.
