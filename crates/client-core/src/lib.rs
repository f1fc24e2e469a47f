//! What Sluice's clients share: the producer, the consumer and the
//! `sluice-bench` load tool all name queues, talk to name servers, look up
//! topic routes and fail in the same ways.
//!
//! - [`MessageQueue`]: one queue of a topic on one broker.
//! - [`NameServers`]: the name-server list (`namesrvAddr`), asked in turn.
//! - [`route`]: `GET_ROUTEINFO_BY_TOPIC` and the queues and master addresses
//!   a route gives; [`RouteCache`]: the producer's cache of publish routes,
//!   with the auto-create (`TBW102`) fallback.
//! - [`credentials()`] and [`Secret`]: the access-key settings
//!   (`accessKey`, `secretKey`, `securityToken`) that sign every request.
//! - [`client_tls()`] and [`TlsSettings`]: the TLS settings (`useTLS`,
//!   `tlsClientTrustCertPath`, `tlsClientCertPath`, `tlsClientKeyPath`)
//!   that every connection starts with.
//! - [`Deadline`] and [`CallError`]: a call's time budget, and the failures
//!   every call can end in, which the clients' own error types carry under
//!   the same names.
//!
//! # Invariants worth naming
//! - A route lookup never outlives its deadline, however many name servers
//!   it asks.
//! - Queues derived from a route are sorted by broker name, then queue id,
//!   and only name brokers that have a master.
#![deny(clippy::unwrap_used)]

mod cache;
mod credentials;
mod deadline;
mod error;
pub mod millis;
mod namesrv;
mod queue;
pub mod route;
#[cfg(feature = "testing")]
pub mod testing;
mod tls;

pub use cache::{PublishRoute, RouteCache};
pub use credentials::{credentials, CredentialsError, Secret};
pub use deadline::Deadline;
pub use error::{waiting_on, CallError};
pub use namesrv::{addr_list, split_addrs, NameServers};
pub use queue::MessageQueue;
pub use tls::{
    client_tls, TlsSettings, TlsSettingsError, TLS_CLIENT_CERT_PATH, TLS_CLIENT_KEY_PATH,
    TLS_CLIENT_TRUST_CERT_PATH, USE_TLS,
};
