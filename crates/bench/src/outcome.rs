//! What became of one request: the response code, the busy reason named in
//! the remark's leading `[TAG]`, and the broker's reported period in queue.
//!
//! Busy remarks follow RocketMQ's text, for example
//! `[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period
//! in queue: 205ms, size of queue: 17`; only the tag and the period are read.

use remoting_net::ClientError;
use remoting_protocol::{RemotingCommand, ResponseCode};

/// Ext field in which Sluice suggests a back-off (ms) on busy responses.
pub const RETRY_AFTER_MS: &str = "retryAfterMs";

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
