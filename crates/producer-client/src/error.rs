//! The producer's one error type.

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
    #[error("send timed out after {timeout_ms} ms{}", at_broker(.broker_addr))]
    Timeout {
        /// The budget that ran out.
        timeout_ms: u64,
        /// The broker the last attempt waited on, if an attempt was under way.
        broker_addr: Option<String>,
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
    #[error("broker {broker_addr} answered {}: {remark}", ResponseCode(*.code))]
    Broker {
        /// The response code.
        code: i32,
        /// The broker's remark.
        remark: String,
        /// The broker's address.
        broker_addr: String,
        /// Sluice's suggested back-off (`retryAfterMs`), if the broker sent one.
        retry_after_ms: Option<u64>,
    },
    /// Neither the topic nor the auto-create topic (`TBW102`) has a route, or
    /// a queue's broker is not in the topic's route.
    #[error("no route info of topic {topic}")]
    NoRoute {
        /// The topic.
        topic: String,
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
        matches!(self, ProducerError::Broker { code, .. } if ResponseCode(*code) == ResponseCode::SYSTEM_BUSY)
    }

    /// The error of a transport failure talking to `addr`.
    pub(crate) fn from_client(addr: &str, source: ClientError, timeout_ms: u64) -> Self {
        match source {
            ClientError::Timeout { .. } => ProducerError::Timeout {
                timeout_ms,
                broker_addr: Some(addr.to_owned()),
            },
            source => ProducerError::Connection {
                addr: addr.to_owned(),
                source,
            },
        }
    }
}

fn at_broker(addr: &Option<String>) -> String {
    match addr {
        Some(a) => format!(" waiting on {a}"),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_errors_name_the_code_and_busy_is_recognised() {
        let busy = ProducerError::Broker {
            code: 2,
            remark: "[OVERLOAD]system busy".into(),
            broker_addr: "127.0.0.1:10911".into(),
            retry_after_ms: Some(500),
        };
        assert!(busy.is_busy());
        assert_eq!(
            busy.to_string(),
            "broker 127.0.0.1:10911 answered SYSTEM_BUSY(2): [OVERLOAD]system busy"
        );
        let other = ProducerError::Broker {
            code: 13,
            remark: String::new(),
            broker_addr: "b".into(),
            retry_after_ms: None,
        };
        assert!(!other.is_busy());
        let timeout = ProducerError::Timeout {
            timeout_ms: 3000,
            broker_addr: None,
        };
        assert_eq!(timeout.to_string(), "send timed out after 3000 ms");
    }
}
