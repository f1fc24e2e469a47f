//! The RocketMQ 5 gRPC endpoint (`apache.rocketmq.v2.MessagingService`) on
//! `grpcListenPort`: HTTP/2, plain (h2c) or over TLS as `tlsServerMode`
//! allows, served next to the remoting port by the same broker and the
//! same request path.
//!
//! Every unary answer carries a business status; the gRPC status stays OK
//! for business outcomes. Only the `x-mq-client-id` header is required
//! (`CLIENT_ID_REQUIRED` without it). Sends enter the remoting path's send
//! queue (see [`send`]); busy answers become `TOO_MANY_REQUESTS` with the
//! remoting remark as message and the retry hint as `retry-after-ms`
//! response metadata (see [`status`]). Receives, acks and invisible-time
//! changes use the POP engine (see [`receive`]). Transactional messages,
//! their ends and their checks: see [`transaction`].

pub(crate) mod access;
pub mod limited;
pub mod message;
pub mod receive;
pub mod send;
pub mod service;
pub mod status;
pub mod telemetry;
pub mod transaction;

use std::{sync::Arc, time::Duration};

use grpc_protocol::MessagingServiceServer;
use remoting_net::{CancellationToken, ConnectionLimits, ServerTls};
use tokio::net::TcpListener;

use crate::state::BrokerState;

pub use service::GrpcService;

/// Bytes a request may hold on top of the largest body (properties, ids,
/// framing).
const DECODE_HEADROOM: usize = 1024 * 1024;

/// Calls one HTTP/2 connection may have open at once (each holds a task and
/// a bounded channel).
const MAX_STREAMS_PER_CONNECTION: u32 = 1024;

/// Puts a remoting `command` through the broker's request path (admission,
/// its family's queue, its processor) on behalf of the gRPC client at
/// `peer`, and waits for the answer; `None` when it was dropped unanswered.
pub(crate) async fn admit_and_wait(
    state: &BrokerState,
    peer: std::net::SocketAddr,
    command: remoting_protocol::RemotingCommand,
) -> Option<remoting_protocol::RemotingCommand> {
    let (reply, answered) = crate::request::Reply::channel(peer);
    crate::executor::admit(state, reply, command);
    answered.await.ok()
}

/// Serves the endpoint on `listener`, within `limits`, until `shutdown` is
/// cancelled.
pub async fn serve(
    listener: TcpListener,
    limits: ConnectionLimits,
    tls: Option<Arc<ServerTls>>,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    let max_decode = state.config().store.max_message_size + DECODE_HEADROOM;
    let service = GrpcService::new(state, port, shutdown.clone());
    let server = MessagingServiceServer::new(service)
        .max_decoding_message_size(max_decode)
        .max_encoding_message_size(usize::MAX);
    let incoming = limited::incoming(listener, limits, tls, shutdown.clone());
    let result = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .max_concurrent_streams(Some(MAX_STREAMS_PER_CONNECTION))
        .add_service(server)
        .serve_with_incoming_shutdown(incoming, shutdown.cancelled_owned())
        .await;
    if let Err(e) = result {
        tracing::error!(cause = %e, "gRPC endpoint stopped with an error");
    }
}
