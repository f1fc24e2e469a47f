//! How remoting outcomes become gRPC business statuses: the send processor's
//! and the flow control's answers mapped to `apache.rocketmq.v2.Code`, with
//! the remark kept as the status message and the retry hint carried over.

use grpc_protocol::v2::{Code, Status};
use remoting_protocol::{RemotingCommand, ResponseCode, RETRY_AFTER_MS};

/// Response metadata key carrying the suggested back-off (ms) of a busy
/// answer, taken from the remoting answer's `retryAfterMs` field.
pub const RETRY_AFTER_METADATA: &str = "retry-after-ms";

/// A business status.
pub fn status(code: Code, message: impl Into<String>) -> Status {
    Status {
        code: code as i32,
        message: message.into(),
    }
}

/// The OK status.
pub fn ok() -> Status {
    status(Code::Ok, "OK")
}

/// The gRPC code for a remoting response code.
///
/// Every busy outcome of the flow control (`[REJECTREQUEST]`, `[OVERLOAD]`,
/// `[PCBUSY_CLEAN_QUEUE]`, `[TIMEOUT_CLEAN_QUEUE]`, `[PC_SYNCHRONIZED]`,
/// `[EARLY_REJECT]`, `[SHUTDOWN]`) is `SYSTEM_BUSY` on the remoting side and
/// becomes `TOO_MANY_REQUESTS`; persistence and replication outcomes become
/// their gRPC counterparts; what has no counterpart is
/// `INTERNAL_SERVER_ERROR`.
pub fn code_for(code: ResponseCode) -> Code {
    match code {
        ResponseCode::SUCCESS => Code::Ok,
        ResponseCode::SYSTEM_BUSY => Code::TooManyRequests,
        ResponseCode::FLUSH_DISK_TIMEOUT => Code::MasterPersistenceTimeout,
        ResponseCode::FLUSH_SLAVE_TIMEOUT => Code::SlavePersistenceTimeout,
        ResponseCode::SLAVE_NOT_AVAILABLE => Code::HaNotAvailable,
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED => Code::NotImplemented,
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
        ResponseCode::TOPIC_NOT_EXIST => Code::TopicNotFound,
        ResponseCode::NO_PERMISSION => Code::Forbidden,
        ResponseCode::MESSAGE_ILLEGAL => Code::BadRequest,
        _ => Code::InternalServerError,
    }
}

/// The status of a remoting answer (to a send, or the refusal of a queued
/// receive), and the retry hint (ms) when the answer is busy and carries
/// one.
pub fn remoting_status(response: &RemotingCommand) -> (Status, Option<u64>) {
    let code = code_for(response.response_code());
    let message = match (&response.remark, code) {
        (Some(remark), _) if !remark.is_empty() => remark.clone(),
        (_, Code::Ok) => "OK".to_owned(),
        _ => format!("remoting answer {}", response.response_code()),
    };
    let hint = (code == Code::TooManyRequests)
        .then(|| response.ext(RETRY_AFTER_MS).and_then(|v| v.parse().ok()))
        .flatten();
    (status(code, message), hint)
}

/// The top-level code of a response with several entries: their common
/// code, or `MULTIPLE_RESULTS` when they differ.
pub fn combined(codes: impl IntoIterator<Item = i32>) -> i32 {
    let mut codes = codes.into_iter();
    let Some(first) = codes.next() else {
        return Code::Ok as i32;
    };
    if codes.all(|c| c == first) {
        first
    } else {
        Code::MultipleResults as i32
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use flow_control::Reason;
    use remoting_protocol::RequestCode;

    use super::*;

    fn answer(code: ResponseCode, remark: Option<String>) -> RemotingCommand {
        RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).response_to(code, remark)
    }

    #[test]
    fn every_busy_reason_becomes_too_many_requests_with_its_remark() {
        let reasons = [
            Reason::RejectRequest,
            Reason::Overload {
                queue_len: 2,
                capacity: 2,
            },
            Reason::PcBusyCleanQueue {
                waited: Duration::from_millis(120),
                queue_len: 3,
            },
            Reason::TimeoutCleanQueue {
                waited: Duration::from_millis(230),
                queue_len: 4,
            },
            Reason::PcSynchronized,
            Reason::EarlyReject {
                predicted_wait: Duration::from_millis(400),
                limit: Duration::from_millis(200),
                queue_len: 9,
            },
            Reason::ShuttingDown,
        ];
        for reason in reasons {
            let mut busy = answer(ResponseCode::SYSTEM_BUSY, Some(reason.remark()));
            busy.set_ext(RETRY_AFTER_MS, reason.retry_after().as_millis().to_string());
            let (st, hint) = remoting_status(&busy);
            assert_eq!(st.code, Code::TooManyRequests as i32, "{reason:?}");
            assert_eq!(st.message, reason.remark());
            assert_eq!(hint, Some(reason.retry_after().as_millis() as u64));
        }
        let (_, hint) = remoting_status(&answer(ResponseCode::SYSTEM_BUSY, Some("x".into())));
        assert_eq!(hint, None, "no hint when the answer carries none");
    }

    #[test]
    fn persistence_and_other_outcomes_map_like_the_proxy() {
        let cases = [
            (ResponseCode::SUCCESS, Code::Ok),
            (
                ResponseCode::FLUSH_DISK_TIMEOUT,
                Code::MasterPersistenceTimeout,
            ),
            (
                ResponseCode::FLUSH_SLAVE_TIMEOUT,
                Code::SlavePersistenceTimeout,
            ),
            (ResponseCode::SLAVE_NOT_AVAILABLE, Code::HaNotAvailable),
            (
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                Code::NotImplemented,
            ),
            (
                ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
                Code::ConsumerGroupNotFound,
            ),
            (ResponseCode::TOPIC_NOT_EXIST, Code::TopicNotFound),
            (ResponseCode::SYSTEM_ERROR, Code::InternalServerError),
            (
                ResponseCode::SERVICE_NOT_AVAILABLE,
                Code::InternalServerError,
            ),
        ];
        for (remoting, grpc) in cases {
            let (st, hint) = remoting_status(&answer(remoting, Some("why".into())));
            assert_eq!(st.code, grpc as i32, "{remoting}");
            assert_eq!(st.message, "why");
            assert_eq!(hint, None);
        }
        let (st, _) = remoting_status(&answer(ResponseCode::SUCCESS, None));
        assert_eq!(st.message, "OK");
    }

    #[test]
    fn top_level_code_is_common_or_multiple() {
        let ok = Code::Ok as i32;
        let busy = Code::TooManyRequests as i32;
        assert_eq!(combined([ok, ok]), ok);
        assert_eq!(combined([busy, busy]), busy);
        assert_eq!(combined([ok, busy]), Code::MultipleResults as i32);
    }
}
