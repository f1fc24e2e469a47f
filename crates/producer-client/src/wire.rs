//! The send request on the wire and the reading of its answer
//! (`sendKernelImpl` and `processSendResponse`).

use client_core::CallError;
use message_model::now_ms;
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader},
    RemotingCommand, RequestCode,
};

use crate::{
    message::Prepared, MessageQueue, ProducerConfig, ProducerError, SendResult, SendStatus,
};

/// The `SEND_MESSAGE_V2` (or, for a batch, `SEND_BATCH_MESSAGE`) request of
/// one attempt, with the single-letter V2 header and a fresh opaque.
pub(crate) fn send_request(
    config: &ProducerConfig,
    prep: &Prepared,
    mq: &MessageQueue,
) -> RemotingCommand {
    let header = SendMessageRequestHeader {
        producer_group: config.producer_group.clone(),
        topic: prep.topic.clone(),
        default_topic: config.create_topic_key.clone(),
        default_topic_queue_nums: config.default_topic_queue_nums,
        queue_id: mq.wire_queue_id(),
        sys_flag: prep.sys_flag,
        born_timestamp: now_ms(),
        flag: prep.flag,
        properties: (!prep.properties.is_empty()).then(|| prep.properties.clone()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(prep.batch),
        broker_name: Some(mq.broker_name.clone()),
        ..SendMessageRequestHeader::default()
    };
    let code = if prep.batch {
        RequestCode::SEND_BATCH_MESSAGE
    } else {
        RequestCode::SEND_MESSAGE_V2
    };
    RemotingCommand::request_with_header(code, &SendMessageRequestHeaderV2::from(header))
        .with_body(prep.body.clone())
}

/// Reads a send answer: a "sent" code gives a [`SendResult`], any other
/// code a [`ProducerError::Broker`] carrying the broker's hint, if any.
pub(crate) fn parse_response(
    response: RemotingCommand,
    prep: &Prepared,
    mq: &MessageQueue,
    addr: &str,
) -> Result<SendResult, ProducerError> {
    let Some(status) = SendStatus::from_code(response.response_code()) else {
        return Err(CallError::refused(addr, &response).into());
    };
    let bad = |reason: String| ProducerError::Protocol {
        addr: addr.to_owned(),
        reason,
    };
    let header: SendMessageResponseHeader = response
        .decode_header()
        .map_err(|e| bad(format!("send response header: {e}")))?;
    let queue_offset = u64::try_from(header.queue_offset)
        .map_err(|_| bad(format!("negative queue offset {}", header.queue_offset)))?;
    let queue_id = u32::try_from(header.queue_id)
        .map_err(|_| bad(format!("negative queue id {}", header.queue_id)))?;
    Ok(SendResult {
        status,
        msg_id: prep.msg_id.clone(),
        offset_msg_id: header.msg_id,
        message_queue: MessageQueue {
            topic: prep.topic.clone(),
            broker_name: mq.broker_name.clone(),
            queue_id,
        },
        queue_offset,
        broker_addr: addr.to_owned(),
        region_id: header.msg_region,
        transaction_id: header.transaction_id,
    })
}

#[cfg(test)]
mod tests {
    use remoting_protocol::{ResponseCode, RETRY_AFTER_MS};

    use super::*;

    fn prep(batch: bool) -> Prepared {
        Prepared {
            topic: "T".into(),
            body: bytes::Bytes::from_static(b"x"),
            flag: 7,
            sys_flag: 0,
            properties: if batch {
                String::new()
            } else {
                "UNIQ_KEY\u{1}K\u{2}".into()
            },
            msg_id: "K".into(),
            batch,
        }
    }

    fn queue() -> MessageQueue {
        MessageQueue {
            topic: "T".into(),
            broker_name: "a".into(),
            queue_id: 3,
        }
    }

    #[test]
    fn requests_use_the_v2_header_and_the_batch_code_for_batches() {
        let config = ProducerConfig::with_namesrv("n:1");
        let single = send_request(&config, &prep(false), &queue());
        assert_eq!(single.request_code(), RequestCode::SEND_MESSAGE_V2);
        let header = SendMessageRequestHeader::from_command(&single).unwrap();
        assert_eq!(header.producer_group, "DEFAULT_PRODUCER");
        assert_eq!((header.topic.as_str(), header.queue_id), ("T", 3));
        assert_eq!(
            (
                header.default_topic.as_str(),
                header.default_topic_queue_nums
            ),
            ("TBW102", 4)
        );
        assert_eq!(header.properties.as_deref(), Some("UNIQ_KEY\u{1}K\u{2}"));
        assert_eq!((header.flag, header.batch), (7, Some(false)));
        assert!(single.ext_fields.contains_key("a"), "single-letter keys");

        let batch = send_request(&config, &prep(true), &queue());
        assert_eq!(batch.request_code(), RequestCode::SEND_BATCH_MESSAGE);
        let header = SendMessageRequestHeader::from_command(&batch).unwrap();
        assert!(header.is_batch());
        assert_eq!(header.properties, None);
        let again = send_request(&config, &prep(false), &queue());
        assert_ne!(
            again.opaque, single.opaque,
            "every attempt has its own opaque"
        );
    }

    #[test]
    fn a_busy_answer_carries_the_brokers_hint() {
        let mut busy =
            RemotingCommand::response(ResponseCode::SYSTEM_BUSY, Some("[OVERLOAD]".into()));
        busy.set_ext(RETRY_AFTER_MS, "250");
        let err = parse_response(busy, &prep(false), &queue(), "a:1").unwrap_err();
        assert!(matches!(
            err,
            ProducerError::Broker {
                code: ResponseCode::SYSTEM_BUSY,
                retry_after_ms: Some(250),
                ..
            }
        ));
        let headerless = RemotingCommand::response(ResponseCode::SUCCESS, None);
        assert!(matches!(
            parse_response(headerless, &prep(false), &queue(), "a:1"),
            Err(ProducerError::Protocol { .. })
        ));
    }

    #[test]
    fn a_sent_answer_gives_the_queue_offset_and_both_ids() {
        let answer = RemotingCommand::response(ResponseCode::FLUSH_DISK_TIMEOUT, None).with_header(
            &SendMessageResponseHeader {
                msg_id: "OFFSETID".into(),
                queue_id: 3,
                queue_offset: 42,
                msg_region: Some("DefaultRegion".into()),
                ..SendMessageResponseHeader::default()
            },
        );
        let r = parse_response(answer, &prep(false), &queue(), "a:1").unwrap();
        assert_eq!(r.status, SendStatus::FlushDiskTimeout);
        assert_eq!(
            (r.msg_id.as_str(), r.offset_msg_id.as_str()),
            ("K", "OFFSETID")
        );
        assert_eq!((r.message_queue, r.queue_offset), (queue(), 42));
        assert_eq!(r.broker_addr, "a:1");
    }
}
