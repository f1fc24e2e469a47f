//! The one error type of the consumers. The failures it shares with the
//! producer (configuration, timeout, connection, refusal, bad answer, no
//! route, unknown broker) carry the same names and fields there.

use client_core::{waiting_on, CallError};
use remoting_net::ClientError;
use remoting_protocol::ResponseCode;
use thiserror::Error;

/// Why a consumer operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// A configuration value was refused.
    #[error("invalid consumer configuration: {key} = {value:?}; allowed: {allowed}")]
    Config {
        /// The configuration key (RocketMQ's name).
        key: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// No answer came within the request's timeout.
    #[error("request timed out after {timeout_ms} ms{}", waiting_on(.addr))]
    Timeout {
        /// The timeout that ran out.
        timeout_ms: u64,
        /// The server the request waited on, if one was under way.
        addr: Option<String>,
    },
    /// The connection failed or closed before the answer came.
    #[error("connection to {addr} failed: {source}")]
    Connection {
        /// The server's address.
        addr: String,
        /// What the transport reported.
        #[source]
        source: ClientError,
    },
    /// A broker or name server answered with an error code.
    #[error("{addr} answered {code}: {remark}")]
    Broker {
        /// The server's address.
        addr: String,
        /// The response code.
        code: ResponseCode,
        /// The server's remark.
        remark: String,
        /// Sluice's suggested back-off (`retryAfterMs`) on a busy answer.
        retry_after_ms: Option<u64>,
    },
    /// An answer (header, body or pulled record) could not be read.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// The server's address.
        addr: String,
        /// What was wrong.
        reason: String,
    },
    /// No name server knows the topic, or no broker of it has a master.
    #[error("no route info of topic {topic}")]
    NoRoute {
        /// The topic.
        topic: String,
    },
    /// The broker name has no known master address.
    #[error("no master address known for broker {broker_name}")]
    NoBroker {
        /// The broker name.
        broker_name: String,
    },
}

impl ConsumerError {
    /// Reports whether this is a broker's `SYSTEM_BUSY` answer.
    pub fn is_busy(&self) -> bool {
        matches!(self, ConsumerError::Broker { code, .. } if *code == ResponseCode::SYSTEM_BUSY)
    }
}

impl From<CallError> for ConsumerError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Timeout { timeout_ms, addr } => ConsumerError::Timeout { timeout_ms, addr },
            CallError::Connection { addr, source } => ConsumerError::Connection { addr, source },
            CallError::Broker {
                addr,
                code,
                remark,
                retry_after_ms,
            } => ConsumerError::Broker {
                addr,
                code,
                remark,
                retry_after_ms,
            },
            CallError::Protocol { addr, reason } => ConsumerError::Protocol { addr, reason },
            CallError::NoRoute { topic } => ConsumerError::NoRoute { topic },
        }
    }
}
