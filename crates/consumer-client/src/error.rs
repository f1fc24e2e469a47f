//! The one error type of the consumers.

use remoting_net::ClientError;
use remoting_protocol::{body::BodyError, HeaderError, ResponseCode};
use thiserror::Error;

/// Why a consumer operation failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// A configuration value is refused.
    #[error("invalid consumer config `{key}`: {reason}")]
    Config {
        /// The offending key.
        key: &'static str,
        /// What is allowed.
        reason: String,
    },
    /// A request got no response (connect failure, timeout, closed connection).
    #[error("request to {addr} failed: {source}")]
    Remoting {
        /// The server's address.
        addr: String,
        /// The transport error.
        #[source]
        source: ClientError,
    },
    /// A server answered with an error code.
    #[error("{addr} answered {code}: {remark}")]
    Broker {
        /// The server's address.
        addr: String,
        /// The response code.
        code: ResponseCode,
        /// The server's remark.
        remark: String,
    },
    /// A response header could not be read.
    #[error("bad response header from {addr}: {source}")]
    Header {
        /// The server's address.
        addr: String,
        /// The header error.
        #[source]
        source: HeaderError,
    },
    /// A response body could not be read.
    #[error("bad response body from {addr}: {source}")]
    Body {
        /// The server's address.
        addr: String,
        /// The body error.
        #[source]
        source: BodyError,
    },
    /// A pulled record could not be parsed.
    #[error("bad record at byte {position} of a pull from {addr}: {reason}")]
    Record {
        /// The server's address.
        addr: String,
        /// Where in the response body the record starts.
        position: usize,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// No name server knows the topic, or no broker of it has a master.
    #[error("no route for topic {topic}")]
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
    /// The operation needs a consumer in another state.
    #[error("consumer is {state}")]
    State {
        /// The state the consumer is in.
        state: &'static str,
    },
}
