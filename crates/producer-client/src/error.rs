//! The producer's one error type. The failures it shares with the
//! consumer (configuration, timeout, connection, refusal, bad answer, no
//! route, unknown broker) carry the same names and fields there.

use client_core::{waiting_on, CallError};
use remoting_net::ClientError;
use remoting_protocol::ResponseCode;
use thiserror::Error;

/// Why a send (or the producer's start) failed.
///
/// After retries, a send reports the error of its last attempt: RocketMQ
/// wraps it in "Send \[n\] times, still failed"; here the last cause itself is
/// returned and [`crate::Producer::stats`] counts the attempts.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// A configuration value was refused.
    #[error("invalid producer configuration: {key} = {value:?}; allowed: {allowed}")]
    Config {
        /// The configuration key (RocketMQ's name).
        key: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// The send budget (`sendMsgTimeout`) ran out before an answer came.
    #[error("send timed out after {timeout_ms} ms{}", waiting_on(.addr))]
    Timeout {
        /// The budget that ran out.
        timeout_ms: u64,
        /// The server the last request waited on, if one was under way.
        addr: Option<String>,
    },
    /// No in-flight permit came within the send timeout: too many sends are
    /// already under way. This is RocketMQ's `RemotingTooMuchRequestException`
    /// ("invoke too fast" / "tryAcquire semaphore timeout"): a client-side
    /// limit (`clientAsyncSemaphoreValue`, `clientOnewaySemaphoreValue`), not
    /// a broker answer.
    #[error(
        "too many requests: {in_flight} sends in flight (limit {limit}), no permit within {waited_ms} ms"
    )]
    TooManyRequests {
        /// Permits held when the wait gave up, counted at that moment (while
        /// this send still waited for one), not read later.
        in_flight: usize,
        /// The in-flight limit the send was refused by.
        limit: usize,
        /// How long the send waited for a permit.
        waited_ms: u64,
    },
    /// The broker (or, for a route query, the name server) answered with an
    /// error code.
    ///
    /// `SYSTEM_BUSY` (code 2) arrives here when the busy policy forbids a
    /// retry, when the retry budget has no token left, when the back-off
    /// would outlast the send timeout, or when every attempt was busy; the
    /// retry budget's refusals are counted in
    /// [`crate::ProducerStats::budget_exhausted`] rather than given a variant
    /// of their own, so that callers match busy answers in one place.
    #[error("{addr} answered {code}: {remark}")]
    Broker {
        /// The server's address.
        addr: String,
        /// The response code.
        code: ResponseCode,
        /// The server's remark.
        remark: String,
        /// Sluice's suggested back-off (`retryAfterMs`), if the broker sent one.
        retry_after_ms: Option<u64>,
    },
    /// Neither the topic nor the auto-create topic (`TBW102`) has a route
    /// with a writable queue.
    #[error("no route info of topic {topic}")]
    NoRoute {
        /// The topic.
        topic: String,
    },
    /// The queue's broker has no known master address in the topic's route.
    #[error("no master address known for broker {broker_name}")]
    NoBroker {
        /// The broker name.
        broker_name: String,
    },
    /// The message was refused before sending.
    #[error("message illegal: {reason}")]
    MessageIllegal {
        /// What is wrong, naming the limit.
        reason: String,
    },
    /// The connection failed or closed before the answer came.
    #[error("connection to {addr} failed: {source}")]
    Connection {
        /// The peer's address.
        addr: String,
        /// What the transport reported.
        #[source]
        source: ClientError,
    },
    /// A peer's answer could not be read.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// The peer's address.
        addr: String,
        /// What was wrong.
        reason: String,
    },
    /// The producer has been shut down.
    #[error("producer is shut down")]
    Shutdown,
}

impl ProducerError {
    /// Reports whether this is a broker's `SYSTEM_BUSY` answer.
    pub fn is_busy(&self) -> bool {
        matches!(self, ProducerError::Broker { code, .. } if *code == ResponseCode::SYSTEM_BUSY)
    }
}

impl From<CallError> for ProducerError {
    fn from(e: CallError) -> Self {
        match e {
            CallError::Timeout { timeout_ms, addr } => ProducerError::Timeout { timeout_ms, addr },
            CallError::Connection { addr, source } => ProducerError::Connection { addr, source },
            CallError::Broker {
                addr,
                code,
                remark,
                retry_after_ms,
            } => ProducerError::Broker {
                addr,
                code,
                remark,
                retry_after_ms,
            },
            CallError::Protocol { addr, reason } => ProducerError::Protocol { addr, reason },
            CallError::NoRoute { topic } => ProducerError::NoRoute { topic },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_errors_name_the_code_and_busy_is_recognised() {
        let busy = ProducerError::Broker {
            addr: "127.0.0.1:10911".into(),
            code: ResponseCode::SYSTEM_BUSY,
            remark: "[OVERLOAD]system busy".into(),
            retry_after_ms: Some(500),
        };
        assert!(busy.is_busy());
        assert_eq!(
            busy.to_string(),
            "127.0.0.1:10911 answered SYSTEM_BUSY(2): [OVERLOAD]system busy"
        );
        let other = ProducerError::Broker {
            addr: "b".into(),
            code: ResponseCode(13),
            remark: String::new(),
            retry_after_ms: None,
        };
        assert!(!other.is_busy());
        let timeout = ProducerError::Timeout {
            timeout_ms: 3000,
            addr: None,
        };
        assert_eq!(timeout.to_string(), "send timed out after 3000 ms");
    }

    #[test]
    fn call_errors_keep_their_names() {
        let e: ProducerError = CallError::Timeout {
            timeout_ms: 5,
            addr: Some("ns:1".into()),
        }
        .into();
        assert!(
            matches!(e, ProducerError::Timeout { timeout_ms: 5, addr: Some(ref a) } if a == "ns:1")
        );
        let e: ProducerError = CallError::NoRoute { topic: "T".into() }.into();
        assert!(matches!(e, ProducerError::NoRoute { ref topic } if topic == "T"));
    }
}
