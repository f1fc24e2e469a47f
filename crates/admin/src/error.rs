//! Why an admin command failed: each failure names the server (broker or
//! name server, with its address), the request and, for a refusal, the
//! response code and remark.

use std::fmt;

use remoting_protocol::{RequestCode, ResponseCode};
use thiserror::Error;

/// The kind of server a request went to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A broker.
    Broker,
    /// A name server.
    NameServer,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Peer::Broker => "broker",
            Peer::NameServer => "name server",
        })
    }
}

/// Why an admin command failed.
#[derive(Debug, Error)]
pub enum AdminError {
    /// The server answered with an error code.
    #[error("{peer} {addr} refused {}: {}{}", request_name(*.request), response_name(*.code), remark_suffix(.remark))]
    Refused {
        /// Broker or name server.
        peer: Peer,
        /// Its address.
        addr: String,
        /// The request refused.
        request: RequestCode,
        /// The response code.
        code: ResponseCode,
        /// The server's remark.
        remark: String,
    },
    /// No answer came within the timeout.
    #[error("{peer} {addr} did not answer {} within {timeout_ms} ms", request_name(*.request))]
    Timeout {
        /// Broker or name server.
        peer: Peer,
        /// Its address.
        addr: String,
        /// The request.
        request: RequestCode,
        /// The timeout.
        timeout_ms: u64,
    },
    /// The server could not be reached, or the connection closed.
    #[error("{peer} {addr} could not be asked {}: {reason}", request_name(*.request))]
    Connection {
        /// Broker or name server.
        peer: Peer,
        /// Its address.
        addr: String,
        /// The request.
        request: RequestCode,
        /// What the transport reported.
        reason: String,
    },
    /// The answer could not be read.
    #[error("{peer} {addr} answered {} with a body that cannot be read: {reason}", request_name(*.request))]
    BadAnswer {
        /// Broker or name server.
        peer: Peer,
        /// Its address.
        addr: String,
        /// The request.
        request: RequestCode,
        /// What was wrong.
        reason: String,
    },
    /// The name servers know no broker to ask.
    #[error("the name server(s) {namesrv} know no master broker")]
    NoBrokers {
        /// The name servers asked.
        namesrv: String,
    },
    /// The name servers know no route of the topic.
    #[error("the name server(s) {namesrv} know no route of topic {topic}")]
    NoRoute {
        /// The name servers asked.
        namesrv: String,
        /// The topic.
        topic: String,
    },
    /// The name servers know no address of the broker name.
    #[error("the name server(s) {namesrv} know no broker named {broker_name} (known: {})", known_names(.known))]
    NoSuchBroker {
        /// The name servers asked.
        namesrv: String,
        /// The broker name asked for.
        broker_name: String,
        /// The broker names they know.
        known: Vec<String>,
    },
    /// The broker's configuration has no such key.
    #[error("broker {addr} has no configuration key {key}")]
    NoSuchKey {
        /// The broker's address.
        addr: String,
        /// The key.
        key: String,
    },
    /// The name server list is empty.
    #[error("no name server address given (--namesrv)")]
    NoNameServer,
}

/// A request code's name, or `request code N` for one without a name.
pub fn request_name(code: RequestCode) -> String {
    match code.name() {
        Some(name) => name.to_owned(),
        None => format!("request code {}", code.0),
    }
}

/// A response code as `NAME (N)`, or `code N` for one without a name.
pub fn response_name(code: ResponseCode) -> String {
    match code.name() {
        Some(name) => format!("{name} ({})", code.0),
        None => format!("code {}", code.0),
    }
}

fn known_names(known: &[String]) -> String {
    if known.is_empty() {
        "none".to_owned()
    } else {
        known.join(", ")
    }
}

fn remark_suffix(remark: &str) -> String {
    if remark.is_empty() {
        String::new()
    } else {
        format!(": {remark}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_name_the_server_request_code_and_remark() {
        let e = AdminError::Refused {
            peer: Peer::Broker,
            addr: "127.0.0.1:10911".into(),
            request: RequestCode::GET_TOPIC_STATS_INFO,
            code: ResponseCode::TOPIC_NOT_EXIST,
            remark: "topic[X] not exist".into(),
        };
        assert_eq!(
            e.to_string(),
            "broker 127.0.0.1:10911 refused GET_TOPIC_STATS_INFO: TOPIC_NOT_EXIST (17): topic[X] not exist"
        );
        let bare = AdminError::Refused {
            peer: Peer::NameServer,
            addr: "n:1".into(),
            request: RequestCode(9999),
            code: ResponseCode(4242),
            remark: String::new(),
        };
        assert_eq!(
            bare.to_string(),
            "name server n:1 refused request code 9999: code 4242"
        );
    }

    #[test]
    fn timeouts_name_the_request_and_budget() {
        let e = AdminError::Timeout {
            peer: Peer::NameServer,
            addr: "n:1".into(),
            request: RequestCode::GET_BROKER_CLUSTER_INFO,
            timeout_ms: 50,
        };
        assert_eq!(
            e.to_string(),
            "name server n:1 did not answer GET_BROKER_CLUSTER_INFO within 50 ms"
        );
    }
}
