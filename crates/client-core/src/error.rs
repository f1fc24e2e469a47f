//! The failures every call of a client can end in. The producer's and the
//! consumer's error types carry each of them as a variant of the same name
//! and fields.

use remoting_net::ClientError;
use remoting_protocol::{RemotingCommand, ResponseCode};
use thiserror::Error;

/// Ext field of Sluice's busy answers with the suggested back-off in ms.
pub(crate) const RETRY_AFTER_MS: &str = remoting_protocol::RETRY_AFTER_MS;

/// Why a request to a broker or name server failed.
///
/// Not `non_exhaustive`: the clients convert every variant into one of
/// their own, and a new variant must make them say which.
#[derive(Debug, Error)]
pub enum CallError {
    /// The budget ran out before an answer came.
    #[error("timed out after {timeout_ms} ms{}", waiting_on(.addr))]
    Timeout {
        /// The budget that ran out.
        timeout_ms: u64,
        /// The server the last request waited on, if one was under way.
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
        /// Sluice's suggested back-off (`retryAfterMs`), if the server sent one.
        retry_after_ms: Option<u64>,
    },
    /// An answer could not be read.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// The server's address.
        addr: String,
        /// What was wrong.
        reason: String,
    },
    /// Neither the topic nor (where the caller falls back to it) the
    /// auto-create topic has a route with a usable queue.
    #[error("no route info of topic {topic}")]
    NoRoute {
        /// The topic.
        topic: String,
    },
}

impl CallError {
    /// The error of a transport failure talking to `addr`; a transport
    /// timeout reports the caller's whole budget, `timeout_ms`.
    pub fn from_client(addr: &str, source: ClientError, timeout_ms: u64) -> Self {
        match source {
            ClientError::Timeout { .. } => CallError::Timeout {
                timeout_ms,
                addr: Some(addr.to_owned()),
            },
            source => CallError::Connection {
                addr: addr.to_owned(),
                source,
            },
        }
    }

    /// The error of an answer with an error code from `addr`.
    pub fn refused(addr: &str, response: &RemotingCommand) -> Self {
        CallError::Broker {
            addr: addr.to_owned(),
            code: response.response_code(),
            remark: response.remark.clone().unwrap_or_default(),
            retry_after_ms: response.ext(RETRY_AFTER_MS).and_then(|v| v.parse().ok()),
        }
    }

    /// Reports whether this is a `SYSTEM_BUSY` answer.
    pub fn is_busy(&self) -> bool {
        matches!(self, CallError::Broker { code, .. } if *code == ResponseCode::SYSTEM_BUSY)
    }
}

/// The ` waiting on {addr}` end of a timeout's message; empty without an
/// address.
pub fn waiting_on(addr: &Option<String>) -> String {
    match addr {
        Some(a) => format!(" waiting on {a}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use remoting_protocol::RequestCode;

    use super::*;

    #[test]
    fn refusals_carry_code_remark_and_hint() {
        let req = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
        let mut busy = req.response_to(ResponseCode::SYSTEM_BUSY, Some("[OVERLOAD]busy".into()));
        busy.set_ext(RETRY_AFTER_MS, "250");
        let e = CallError::refused("h:1", &busy);
        assert!(e.is_busy());
        assert!(matches!(
            e,
            CallError::Broker { retry_after_ms: Some(250), ref remark, .. } if remark == "[OVERLOAD]busy"
        ));
        assert_eq!(e.to_string(), "h:1 answered SYSTEM_BUSY(2): [OVERLOAD]busy");
        let plain = req.response_to(ResponseCode::TOPIC_NOT_EXIST, None);
        assert!(!CallError::refused("h:1", &plain).is_busy());
    }

    #[test]
    fn transport_timeouts_report_the_whole_budget() {
        let e = CallError::from_client(
            "h:1",
            ClientError::Timeout {
                addr: "h:1".into(),
                timeout_ms: 7,
                opaque: 1,
            },
            3000,
        );
        assert_eq!(e.to_string(), "timed out after 3000 ms waiting on h:1");
        let closed = CallError::from_client(
            "h:1",
            ClientError::ConnectionClosed { addr: "h:1".into() },
            3000,
        );
        assert!(matches!(closed, CallError::Connection { .. }));
    }
}
