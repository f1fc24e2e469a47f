//! Request handling: turns name server requests into responses against a
//! [`RouteRegistry`].
//!
//! Handled codes: `REGISTER_BROKER` (103) and `UNREGISTER_BROKER` (104) from
//! brokers, `GET_ROUTEINFO_BY_TOPIC` (105) and `GET_BROKER_CLUSTER_INFO`
//! (106) from clients and tools. Any other code is answered with
//! `REQUEST_CODE_NOT_SUPPORTED` and RocketMQ's remark.
//!
//! A malformed header or body is answered with `SYSTEM_ERROR` and a remark
//! naming the problem, which is what a Java name server answers when
//! decoding throws.

use std::{sync::Arc, time::Instant};

use remoting_protocol::{HeaderError, RemotingCommand, RequestCode, ResponseCode};

use crate::registry::RouteRegistry;

mod broker;
mod client;
#[cfg(test)]
mod tests;

/// The lowest request `version` (RocketMQ 4.9.4) that gets routes as
/// standard JSON without asking; older clients get fastjson's legacy output
/// unless they set `acceptStandardJsonOnly`.
pub const STANDARD_JSON_SINCE_VERSION: i32 = 401;

/// Answers name server requests from the routes in a shared registry.
#[derive(Debug, Clone)]
pub struct NameServerProcessor {
    registry: Arc<RouteRegistry>,
}

impl NameServerProcessor {
    /// A processor answering from `registry`, which the caller also hands to
    /// its expiry timer and connection bookkeeping.
    pub fn new(registry: Arc<RouteRegistry>) -> Self {
        Self { registry }
    }

    /// The registry the processor answers from.
    pub fn registry(&self) -> &Arc<RouteRegistry> {
        &self.registry
    }

    /// Handles one request received at `now` over connection `conn` and
    /// returns the response to send: `None` for a oneway request (which is
    /// still carried out) and for a command that is itself a response.
    pub fn handle(
        &self,
        req: &RemotingCommand,
        now: Instant,
        conn: Option<u64>,
    ) -> Option<RemotingCommand> {
        if req.is_response() {
            return None;
        }
        let response = match req.request_code() {
            RequestCode::REGISTER_BROKER => broker::register(&self.registry, req, now, conn),
            RequestCode::UNREGISTER_BROKER => broker::unregister(&self.registry, req),
            RequestCode::GET_ROUTEINFO_BY_TOPIC => client::route_by_topic(&self.registry, req),
            RequestCode::GET_BROKER_CLUSTER_INFO => client::cluster_info(&self.registry, req),
            other => req.response_to(
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!(" request type {} not supported", other.0)),
            ),
        };
        (!req.is_oneway()).then_some(response)
    }
}

/// The response to a request whose header did not decode.
fn bad_header(req: &RemotingCommand, request: &str, err: &HeaderError) -> RemotingCommand {
    req.response_to(
        ResponseCode::SYSTEM_ERROR,
        Some(format!("bad {request} request header: {err}")),
    )
}
