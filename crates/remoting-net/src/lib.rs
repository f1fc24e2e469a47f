//! Async transport for the RocketMQ remoting protocol over TCP, plain or
//! TLS.
//!
//! - [`server::serve`] accepts connections (up to a limit), runs one reader
//!   task and one writer task per connection, and hands every request to a
//!   [`server::Handler`]; responses go back through [`server::Connection::send`],
//!   callable from any thread.
//! - [`client::RemotingClient`] keeps one multiplexed connection per address
//!   and matches responses to requests by `opaque`; given credentials, it
//!   signs every request it sends as RocketMQ's access control expects.
//! - [`tls`]: a server port's TLS mode (disabled, permissive or enforcing,
//!   told apart by each connection's first byte) and certificate, and a
//!   client's trust.
//!
//! # Invariants worth naming
//! - A malformed frame closes that connection only, with a log line naming
//!   the peer and the fault.
//! - A writer coalesces every response that is ready into one write.
//! - A pending client request is failed promptly when its connection closes
//!   and removed when it times out: nothing waits forever, nothing leaks.
#![deny(clippy::unwrap_used)]

pub mod client;
mod io;
pub mod server;
pub mod tls;

pub use client::{ClientError, ClientOptions, RemotingClient, ServeServerRequest, ServerRequests};
pub use server::{serve, Connection, ConnectionLimits, ConnectionPermit, Handler, ServerOptions};
pub use tls::{
    negotiate, sniff, Accepted, ClientAuth, ClientTls, Refused, ServerTls, Sniffed, TlsError,
    TlsMode, TlsServerStream,
};
pub use tokio_util::sync::CancellationToken;
