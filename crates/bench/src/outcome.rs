//! What became of one request: the response code, the busy reason named in
//! the remark's leading `[TAG]`, and the broker's reported period in queue.
//!
//! Busy remarks follow RocketMQ's text, for example
//! `[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period
//! in queue: 205ms, size of queue: 17`; only the tag and the period are read.
//!
//! gRPC answers fall into the same kinds: `TOO_MANY_REQUESTS` carries the
//! remoting remark as its status message and is a [`Busy`] by the same tag,
//! `MASTER_PERSISTENCE_TIMEOUT` is the flush timeout, codes that stand for
//! exactly one remoting code count as that code, and the rest keep their gRPC
//! code ([`Outcome::GrpcCode`]).

use grpc_protocol::v2::Code;
use remoting_net::ClientError;
use remoting_protocol::{RemotingCommand, ResponseCode, RETRY_AFTER_MS};

/// gRPC response metadata in which Sluice suggests a back-off (ms) on
/// `TOO_MANY_REQUESTS` answers.
pub const RETRY_AFTER_METADATA: &str = "retry-after-ms";

/// Tag counted for a busy response whose remark has no leading `[TAG]`.
pub const UNTAGGED: &str = "UNTAGGED";

/// The outcome of one send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// `SUCCESS` (0).
    Ok,
    /// `FLUSH_DISK_TIMEOUT` (10): stored, but not flushed in time.
    FlushDiskTimeout,
    /// `SYSTEM_BUSY` (2): refused by flow control.
    Busy(Busy),
    /// Any other response code.
    OtherCode(i32),
    /// A gRPC business status code without a remoting counterpart
    /// (`apache.rocketmq.v2.Code`, e.g. 41302 `MESSAGE_BODY_EMPTY`).
    GrpcCode(i32),
    /// The gRPC call itself failed with this status code (other than
    /// deadline exceeded, unavailable or cancelled).
    RpcStatus(i32),
    /// No response within the request timeout.
    Timeout,
    /// The connection failed or closed before the response came.
    ConnectionError,
}

/// What a `SYSTEM_BUSY` response said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Busy {
    /// The remark's leading tag without brackets, or [`UNTAGGED`].
    pub tag: String,
    /// The `period in queue: Nms` the remark reports, if any.
    pub period_in_queue_ms: Option<u64>,
    /// The broker's suggested back-off from [`RETRY_AFTER_MS`], if any.
    pub retry_after_ms: Option<u64>,
}

impl Outcome {
    /// Classifies the result of an `invoke`.
    pub fn of(result: &Result<RemotingCommand, ClientError>) -> Self {
        match result {
            Ok(response) => Self::of_response(response),
            Err(ClientError::Timeout { .. }) => Self::Timeout,
            Err(_) => Self::ConnectionError,
        }
    }

    /// Classifies a response by its code and, when busy, its remark.
    pub fn of_response(response: &RemotingCommand) -> Self {
        match response.response_code() {
            ResponseCode::SUCCESS => Self::Ok,
            ResponseCode::FLUSH_DISK_TIMEOUT => Self::FlushDiskTimeout,
            ResponseCode::SYSTEM_BUSY => {
                let remark = response.remark.as_deref().unwrap_or("");
                Self::Busy(Busy {
                    tag: remark_tag(remark).unwrap_or(UNTAGGED).to_owned(),
                    period_in_queue_ms: period_in_queue_ms(remark),
                    retry_after_ms: response
                        .ext(RETRY_AFTER_MS)
                        .and_then(|v| v.trim().parse().ok()),
                })
            }
            other => Self::OtherCode(other.0),
        }
    }
}

impl Outcome {
    /// Classifies a gRPC `SendMessage` business status: its `code`, its
    /// `message` (the remoting remark for busy answers) and the
    /// [`RETRY_AFTER_METADATA`] value, if any.
    pub fn of_grpc_status(code: i32, message: &str, retry_after: Option<&str>) -> Self {
        let Ok(known) = Code::try_from(code) else {
            return Self::GrpcCode(code);
        };
        match known {
            Code::Ok => Self::Ok,
            Code::TooManyRequests => Self::Busy(Busy {
                tag: remark_tag(message).unwrap_or(UNTAGGED).to_owned(),
                period_in_queue_ms: period_in_queue_ms(message),
                retry_after_ms: retry_after.and_then(|v| v.trim().parse().ok()),
            }),
            Code::MasterPersistenceTimeout => Self::FlushDiskTimeout,
            Code::SlavePersistenceTimeout => Self::OtherCode(ResponseCode::FLUSH_SLAVE_TIMEOUT.0),
            Code::HaNotAvailable => Self::OtherCode(ResponseCode::SLAVE_NOT_AVAILABLE.0),
            Code::TopicNotFound => Self::OtherCode(ResponseCode::TOPIC_NOT_EXIST.0),
            Code::Forbidden => Self::OtherCode(ResponseCode::NO_PERMISSION.0),
            _ => Self::GrpcCode(code),
        }
    }

    /// Classifies a failed gRPC call (no business status came back): a
    /// transport failure (the status wraps a transport error, or is
    /// unavailable or cancelled) is a connection error.
    pub fn of_rpc_error(status: &tonic::Status) -> Self {
        let transport =
            std::error::Error::source(status).is_some_and(|e| e.is::<tonic::transport::Error>());
        match status.code() {
            tonic::Code::DeadlineExceeded => Self::Timeout,
            tonic::Code::Unavailable | tonic::Code::Cancelled => Self::ConnectionError,
            _ if transport => Self::ConnectionError,
            other => Self::RpcStatus(other as i32),
        }
    }
}

/// The name of a gRPC business status code (`TOO_MANY_REQUESTS`), if known.
pub fn grpc_code_name(code: i32) -> Option<&'static str> {
    Code::try_from(code).ok().map(|c| c.as_str_name())
}

/// The text inside a remark's leading `[...]`, if the remark starts with one
/// and it is not empty.
pub fn remark_tag(remark: &str) -> Option<&str> {
    let rest = remark.strip_prefix('[')?;
    let tag = &rest[..rest.find(']')?];
    (!tag.is_empty()).then_some(tag)
}

/// The `N` of `period in queue: Nms` in a busy remark.
pub fn period_in_queue_ms(remark: &str) -> Option<u64> {
    const KEY: &str = "period in queue: ";
    let rest = &remark[remark.find(KEY)? + KEY.len()..];
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    if !rest[digits..].starts_with("ms") {
        return None;
    }
    rest[..digits].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT_REMARK: &str = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a \
                                  while, period in queue: 205ms, size of queue: 17";

    #[test]
    fn remark_tag_is_the_text_in_the_leading_brackets() {
        assert_eq!(remark_tag(TIMEOUT_REMARK), Some("TIMEOUT_CLEAN_QUEUE"));
        assert_eq!(
            remark_tag("[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
            Some("PC_SYNCHRONIZED")
        );
        assert_eq!(
            remark_tag("[EARLY_REJECT]broker busy, predicted wait: 350ms, limit: 200ms"),
            Some("EARLY_REJECT")
        );
    }

    #[test]
    fn remark_without_a_leading_tag_has_none() {
        assert_eq!(remark_tag("system busy"), None);
        assert_eq!(remark_tag("busy [OVERLOAD]"), None);
        assert_eq!(remark_tag("[OVERLOAD"), None);
        assert_eq!(remark_tag("[]busy"), None);
        assert_eq!(remark_tag(""), None);
    }

    #[test]
    fn period_in_queue_is_read_in_milliseconds() {
        assert_eq!(period_in_queue_ms(TIMEOUT_REMARK), Some(205));
        assert_eq!(
            period_in_queue_ms(
                "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, \
                 period in queue: 1234ms, size of queue: 7"
            ),
            Some(1234)
        );
    }

    #[test]
    fn absent_or_malformed_period_in_queue_gives_none() {
        assert_eq!(
            period_in_queue_ms("[OVERLOAD]system busy, start flow control for a while"),
            None
        );
        assert_eq!(period_in_queue_ms("period in queue: ms"), None);
        assert_eq!(period_in_queue_ms("period in queue: 12s"), None);
        assert_eq!(period_in_queue_ms("period in queue: 12"), None);
    }

    #[test]
    fn busy_response_is_classified_by_tag_period_and_retry_hint() {
        let request = RemotingCommand::request(remoting_protocol::RequestCode::SEND_MESSAGE_V2);
        let mut busy = request.response_to(ResponseCode::SYSTEM_BUSY, Some(TIMEOUT_REMARK.into()));
        busy.set_ext(RETRY_AFTER_MS, "205");
        assert_eq!(
            Outcome::of_response(&busy),
            Outcome::Busy(Busy {
                tag: "TIMEOUT_CLEAN_QUEUE".into(),
                period_in_queue_ms: Some(205),
                retry_after_ms: Some(205),
            })
        );
        let bare = request.response_to(ResponseCode::SYSTEM_BUSY, None);
        assert_eq!(
            Outcome::of_response(&bare),
            Outcome::Busy(Busy {
                tag: UNTAGGED.into(),
                period_in_queue_ms: None,
                retry_after_ms: None,
            })
        );
    }

    #[test]
    fn response_codes_other_than_busy_map_to_their_kind() {
        let request = RemotingCommand::request(remoting_protocol::RequestCode::SEND_MESSAGE_V2);
        let of = |code| Outcome::of_response(&request.response_to(code, None));
        assert_eq!(of(ResponseCode::SUCCESS), Outcome::Ok);
        assert_eq!(
            of(ResponseCode::FLUSH_DISK_TIMEOUT),
            Outcome::FlushDiskTimeout
        );
        assert_eq!(
            of(ResponseCode::FLUSH_SLAVE_TIMEOUT),
            Outcome::OtherCode(12)
        );
    }

    #[test]
    fn grpc_statuses_map_to_the_remoting_kinds() {
        let busy = Outcome::of_grpc_status(42900, TIMEOUT_REMARK, Some("150"));
        assert_eq!(
            busy,
            Outcome::Busy(Busy {
                tag: "TIMEOUT_CLEAN_QUEUE".into(),
                period_in_queue_ms: Some(205),
                retry_after_ms: Some(150),
            })
        );
        let untagged = Outcome::of_grpc_status(42900, "too many", None);
        assert!(matches!(untagged, Outcome::Busy(b) if b.tag == UNTAGGED));
        assert_eq!(Outcome::of_grpc_status(20000, "OK", None), Outcome::Ok);
        assert_eq!(
            Outcome::of_grpc_status(50401, "", None),
            Outcome::FlushDiskTimeout
        );
        assert_eq!(
            Outcome::of_grpc_status(50402, "", None),
            Outcome::OtherCode(12)
        );
        assert_eq!(
            Outcome::of_grpc_status(40402, "", None),
            Outcome::OtherCode(17)
        );
        assert_eq!(
            Outcome::of_grpc_status(41302, "", None),
            Outcome::GrpcCode(41302)
        );
        assert_eq!(
            Outcome::of_grpc_status(12345, "", None),
            Outcome::GrpcCode(12345)
        );
        assert_eq!(grpc_code_name(41302), Some("MESSAGE_BODY_EMPTY"));
        assert_eq!(grpc_code_name(12345), None);
    }

    #[test]
    fn failed_grpc_calls_split_into_timeouts_connection_errors_and_statuses() {
        let of = |s: tonic::Status| Outcome::of_rpc_error(&s);
        assert_eq!(
            of(tonic::Status::deadline_exceeded("late")),
            Outcome::Timeout
        );
        assert_eq!(
            of(tonic::Status::unavailable("refused")),
            Outcome::ConnectionError
        );
        assert_eq!(
            of(tonic::Status::unimplemented("no such method")),
            Outcome::RpcStatus(12)
        );
    }

    #[tokio::test]
    async fn a_status_wrapping_a_transport_error_is_a_connection_error() {
        // Nothing listens on port 1: connecting fails with a transport error.
        let refused = tonic::transport::Endpoint::from_static("http://127.0.0.1:1")
            .connect()
            .await
            .err();
        let Some(refused) = refused else {
            // Something listens there after all; nothing to classify.
            return;
        };
        // As a call on a connection the server broke answers.
        let mut status = tonic::Status::unknown("transport error");
        status.set_source(std::sync::Arc::new(refused));
        assert_eq!(Outcome::of_rpc_error(&status), Outcome::ConnectionError);
        let plain = tonic::Status::unknown("something else");
        assert_eq!(Outcome::of_rpc_error(&plain), Outcome::RpcStatus(2));
    }

    #[test]
    fn client_errors_split_into_timeouts_and_connection_errors() {
        let timeout = Err(ClientError::Timeout {
            addr: "a".into(),
            timeout_ms: 1,
            opaque: 1,
        });
        assert_eq!(Outcome::of(&timeout), Outcome::Timeout);
        let closed = Err(ClientError::ConnectionClosed { addr: "a".into() });
        assert_eq!(Outcome::of(&closed), Outcome::ConnectionError);
    }
}
