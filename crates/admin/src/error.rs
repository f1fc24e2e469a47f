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
    /// A replication controller.
    Controller,
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Peer::Broker => "broker",
            Peer::NameServer => "name server",
            Peer::Controller => "controller",
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
    /// The controllers know no leader.
    #[error("controller {controller} knows no leader now (are a majority of the controllers up?)")]
    NoLeader {
        /// The controller asked.
        controller: String,
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
    /// The name servers know no such cluster.
    #[error("the name server(s) {namesrv} know no cluster named {cluster} (known: {})", known_names(.known))]
    NoSuchCluster {
        /// The name servers asked.
        namesrv: String,
        /// The cluster asked for.
        cluster: String,
        /// The clusters they know.
        known: Vec<String>,
    },
    /// A message id could not be read.
    #[error("{id:?} is not a message id: {reason}")]
    BadMessageId {
        /// The id given.
        id: String,
        /// Why it cannot be read.
        reason: String,
    },
    /// The message found belongs to another topic than the one asked for.
    #[error("broker {addr} stores the message at CommitLog offset {offset} under topic {found}, not {topic}")]
    OtherTopic {
        /// The broker asked.
        addr: String,
        /// The CommitLog offset.
        offset: i64,
        /// The topic asked for.
        topic: String,
        /// The message's topic.
        found: String,
    },
    /// The name server list is empty.
    #[error("no name server address given (--namesrv)")]
    NoNameServer,
    /// Only one of the access key and the secret key was given.
    #[error("--access-key and --secret-key (SLUICE_ACCESS_KEY and SLUICE_SECRET_KEY) are given together or not at all; a blank one counts as not given")]
    Credentials,
    /// The TLS flags do not go together, or a file one names cannot be
    /// used.
    #[error("{flag} {value:?}: allowed: {allowed}")]
    Tls {
        /// The flag at fault (`--tls`, `--tls-trust`, `--tls-cert` or
        /// `--tls-key`).
        flag: &'static str,
        /// Its value: the file, for a file that cannot be used.
        value: String,
        /// What is allowed, and for a file what is wrong with it.
        allowed: String,
    },
    /// No broker of the topic holds a message under the key (`QUERY_MESSAGE`
    /// found none, or only messages of other keys with the same hash).
    #[error("{0}")]
    NoMessage(Box<NoMessage>),
    /// A message id given without `--topic` that is not an offset message
    /// id, or names no message as one; a unique key needs the topic.
    #[error("{id:?} {reason}; a unique key (a send result's msgId) is looked up with QUERY_MESSAGE, which needs --topic")]
    NeedsTopic {
        /// The id given.
        id: String,
        /// Why it was not found as an offset message id.
        reason: String,
    },
}

/// What a query by key or unique key asked and what each broker answered,
/// when no message was left.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "query message by {kind} finished, but no message: topic {topic} has no message under {kind} {key:?} stored {} (QUERY_MESSAGE answers: {}){}",
    window_text(*.begin_ms, *.end_ms),
    .answers.join("; "),
    tried_suffix(.tried.as_deref())
)]
pub struct NoMessage {
    /// The topic.
    pub topic: String,
    /// `key` or `unique key`.
    pub kind: &'static str,
    /// The key asked for.
    pub key: String,
    /// Earliest store time asked for, ms since the epoch.
    pub begin_ms: i64,
    /// Latest store time asked for, ms since the epoch.
    pub end_ms: i64,
    /// What each broker answered, `address: answer`.
    pub answers: Vec<String>,
    /// Why the id did not name a message as an offset message id, when that
    /// was tried first.
    pub tried: Option<String>,
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

/// A store-time window as text: `at any time`, or its bounds (UTC).
fn window_text(begin_ms: i64, end_ms: i64) -> String {
    let bound = |ms: i64| match chrono::DateTime::from_timestamp_millis(ms) {
        Some(t) => format!("{} ({ms})", t.format("%Y-%m-%d %H:%M:%S%.3f UTC")),
        None => ms.to_string(),
    };
    match (begin_ms <= 0, end_ms == i64::MAX) {
        (true, true) => "at any time".to_owned(),
        (false, true) => format!("since {}", bound(begin_ms)),
        (true, false) => format!("until {}", bound(end_ms)),
        (false, false) => format!("between {} and {}", bound(begin_ms), bound(end_ms)),
    }
}

fn tried_suffix(tried: Option<&str>) -> String {
    tried.map_or_else(String::new, |t| {
        format!("; as an offset message id first: {t}")
    })
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
