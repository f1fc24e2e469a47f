//! Request handling: turns name server requests into responses against a
//! [`RouteRegistry`].
//!
//! Handled codes: `REGISTER_BROKER` (103) and `UNREGISTER_BROKER` (104) from
//! brokers, `GET_ROUTEINFO_BY_TOPIC` (105) and `GET_BROKER_CLUSTER_INFO`
//! (106) from clients and tools, and the admin codes of `mqadmin`,
//! `rocketmq-dashboard` and `rocketmq-exporter`: the topic lists
//! `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206) and `GET_TOPICS_BY_CLUSTER`
//! (224), `DELETE_TOPIC_IN_NAMESRV` (216), `WIPE_WRITE_PERM_OF_BROKER` (205)
//! and `ADD_WRITE_PERM_OF_BROKER` (327), and the key-value configuration
//! codes `PUT_KV_CONFIG` (100), `GET_KV_CONFIG` (101), `DELETE_KV_CONFIG`
//! (102) and `GET_KVLIST_BY_NAMESPACE` (219). Any other code is answered
//! with `REQUEST_CODE_NOT_SUPPORTED` and RocketMQ's remark.
//!
//! A malformed header or body is answered with `SYSTEM_ERROR` and a remark
//! naming the problem, which is what a Java name server answers when
//! decoding throws.

use std::{sync::Arc, time::Instant};

use remoting_protocol::{
    acl::{self, Credentials},
    HeaderError, RemotingCommand, RequestCode, ResponseCode,
};

use crate::{kv_config::KvConfig, registry::RouteRegistry};

mod admin;
mod broker;
mod client;
mod kv;
#[cfg(test)]
mod tests;

/// The lowest request `version` (RocketMQ 4.9.4) that gets routes as
/// standard JSON without asking; older clients get fastjson's legacy output
/// unless they set `acceptStandardJsonOnly`.
pub const STANDARD_JSON_SINCE_VERSION: i32 = 401;

/// Answers name server requests from the routes in a shared registry and
/// from a key-value configuration.
#[derive(Debug, Clone)]
pub struct NameServerProcessor {
    registry: Arc<RouteRegistry>,
    kv_config: Arc<KvConfig>,
    guard: Option<Arc<Credentials>>,
}

/// The codes that change what the name server holds: with credentials
/// set, only requests signed with them are served.
const GUARDED: [RequestCode; 7] = [
    RequestCode::REGISTER_BROKER,
    RequestCode::UNREGISTER_BROKER,
    RequestCode::DELETE_TOPIC_IN_NAMESRV,
    RequestCode::WIPE_WRITE_PERM_OF_BROKER,
    RequestCode::ADD_WRITE_PERM_OF_BROKER,
    RequestCode::PUT_KV_CONFIG,
    RequestCode::DELETE_KV_CONFIG,
];

impl NameServerProcessor {
    /// A processor answering from `registry`, which the caller also hands to
    /// its expiry timer and connection bookkeeping, with an empty key-value
    /// configuration.
    pub fn new(registry: Arc<RouteRegistry>) -> Self {
        Self::with_kv_config(registry, Arc::new(KvConfig::new()))
    }

    /// A processor answering from `registry` and `kv_config`.
    pub fn with_kv_config(registry: Arc<RouteRegistry>, kv_config: Arc<KvConfig>) -> Self {
        Self {
            registry,
            kv_config,
            guard: None,
        }
    }

    /// This processor serving registrations and changes only when signed
    /// with `credentials` (`None`: anyone's).
    #[must_use]
    pub fn with_guard(mut self, credentials: Option<Credentials>) -> Self {
        self.guard = credentials.map(Arc::new);
        self
    }

    /// Why `req` may not change the name server, if it may not.
    fn refused(&self, req: &RemotingCommand) -> Option<RemotingCommand> {
        let guard = self.guard.as_ref()?;
        let code = req.request_code();
        if !GUARDED.contains(&code) {
            return None;
        }
        let name = code.name().unwrap_or("this request");
        let why = match acl::access_key(req) {
            None => "it is not signed".to_owned(),
            Some(key) if key != guard.access_key => {
                format!("it is signed by {key}, not the cluster's access key")
            }
            Some(_) if !acl::verify(req, guard.secret_key.as_bytes()) => {
                "its signature does not verify (wrong secret key)".to_owned()
            }
            Some(_) => return None,
        };
        tracing::warn!(code = req.code, reason = %why, "name server change refused");
        Some(req.response_to(
            ResponseCode::NO_PERMISSION,
            Some(format!(
                "{name} needs the cluster's credentials (innerClientAuthenticationCredentials): {why}"
            )),
        ))
    }

    /// The registry the processor answers from.
    pub fn registry(&self) -> &Arc<RouteRegistry> {
        &self.registry
    }

    /// The key-value configuration the processor answers from.
    pub fn kv_config(&self) -> &Arc<KvConfig> {
        &self.kv_config
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
        if let Some(refusal) = self.refused(req) {
            return (!req.is_oneway()).then_some(refusal);
        }
        let response = match req.request_code() {
            RequestCode::REGISTER_BROKER => {
                broker::register(&self.registry, &self.kv_config, req, now, conn)
            }
            RequestCode::UNREGISTER_BROKER => broker::unregister(&self.registry, req),
            RequestCode::GET_ROUTEINFO_BY_TOPIC => client::route_by_topic(&self.registry, req),
            RequestCode::GET_BROKER_CLUSTER_INFO => client::cluster_info(&self.registry, req),
            RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => {
                admin::all_topics(&self.registry, req)
            }
            RequestCode::GET_TOPICS_BY_CLUSTER => admin::cluster_topics(&self.registry, req),
            RequestCode::DELETE_TOPIC_IN_NAMESRV => admin::delete_topic(&self.registry, req),
            RequestCode::WIPE_WRITE_PERM_OF_BROKER => admin::wipe_write_perm(&self.registry, req),
            RequestCode::ADD_WRITE_PERM_OF_BROKER => admin::add_write_perm(&self.registry, req),
            RequestCode::PUT_KV_CONFIG => kv::put(&self.kv_config, req),
            RequestCode::GET_KV_CONFIG => kv::get(&self.kv_config, req),
            RequestCode::DELETE_KV_CONFIG => kv::delete(&self.kv_config, req),
            RequestCode::GET_KVLIST_BY_NAMESPACE => kv::namespace(&self.kv_config, req),
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
