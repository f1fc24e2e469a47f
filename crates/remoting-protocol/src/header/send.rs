//! Headers of `SEND_MESSAGE` (10), `SEND_MESSAGE_V2` (310),
//! `SEND_BATCH_MESSAGE` (320) and their responses.

use super::{ext_header, CommandHeader, HeaderError};
use crate::{code::RequestCode, command::RemotingCommand};

ext_header! {
    /// Send request header with RocketMQ's full field names (`SEND_MESSAGE`).
    pub struct SendMessageRequestHeader {
        /// Producer group.
        producer_group: String = "producerGroup",
        /// Topic to send to.
        topic: String = "topic",
        /// Template topic for auto-creation, normally `TBW102`.
        default_topic: String = "defaultTopic",
        /// Queue count for an auto-created topic.
        default_topic_queue_nums: i32 = "defaultTopicQueueNums",
        /// Target queue; negative lets the broker choose.
        queue_id: i32 = "queueId",
        /// Message system flags.
        sys_flag: i32 = "sysFlag",
        /// When the producer made the message (ms since the epoch).
        born_timestamp: i64 = "bornTimestamp",
        /// User flag.
        flag: i32 = "flag",
        /// Encoded message properties.
        properties: Option<String> = "properties",
        /// Redeliveries so far.
        reconsume_times: Option<i32> = "reconsumeTimes",
        /// Unit mode.
        unit_mode: Option<bool> = "unitMode",
        /// The body is a batch of messages.
        batch: Option<bool> = "batch",
        /// Maximum redeliveries.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// Namespace.
        namespace: Option<String> = "ns",
        /// Whether names are already namespaced.
        namespaced: Option<bool> = "nsd",
        /// Target broker name.
        broker_name: Option<String> = "bname",
        /// Oneway marker.
        oneway: Option<bool> = "oway",
    }
}

ext_header! {
    /// Send request header with single-letter keys (`SEND_MESSAGE_V2`,
    /// `SEND_BATCH_MESSAGE`); the same fields as [`SendMessageRequestHeader`].
    pub struct SendMessageRequestHeaderV2 {
        /// Producer group.
        a: String = "a",
        /// Topic.
        b: String = "b",
        /// Default topic.
        c: String = "c",
        /// Default topic queue count.
        d: i32 = "d",
        /// Queue id.
        e: i32 = "e",
        /// System flags.
        f: i32 = "f",
        /// Born timestamp.
        g: i64 = "g",
        /// User flag.
        h: i32 = "h",
        /// Properties.
        i: Option<String> = "i",
        /// Reconsume times.
        j: Option<i32> = "j",
        /// Unit mode.
        k: Option<bool> = "k",
        /// Maximum reconsume times.
        l: Option<i32> = "l",
        /// Batch.
        m: Option<bool> = "m",
        /// Broker name.
        n: Option<String> = "n",
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            max_reconsume_times: v2.l,
            batch: v2.m,
            broker_name: v2.n,
            ..Self::default()
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    fn from(v1: SendMessageRequestHeader) -> Self {
        Self {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: v1.unit_mode,
            l: v1.max_reconsume_times,
            m: v1.batch,
            n: v1.broker_name,
        }
    }
}

impl SendMessageRequestHeader {
    /// Reads the send header of a request in whichever form its code uses:
    /// full names for `SEND_MESSAGE`, single letters for `SEND_MESSAGE_V2`,
    /// `SEND_BATCH_MESSAGE` and `SEND_REPLY_MESSAGE_V2`.
    ///
    /// # Errors
    /// [`HeaderError`] for a missing or malformed field, or a code that is not a send.
    pub fn from_command(cmd: &RemotingCommand) -> Result<Self, HeaderError> {
        match cmd.request_code() {
            RequestCode::SEND_MESSAGE | RequestCode::SEND_REPLY_MESSAGE => {
                Self::from_ext_fields(&cmd.ext_fields)
            }
            RequestCode::SEND_MESSAGE_V2
            | RequestCode::SEND_BATCH_MESSAGE
            | RequestCode::SEND_REPLY_MESSAGE_V2 => {
                SendMessageRequestHeaderV2::from_ext_fields(&cmd.ext_fields).map(Self::from)
            }
            other => Err(HeaderError::WrongCode {
                code: other.0,
                header: "send message",
            }),
        }
    }

    /// Reports whether the request's body is a batch.
    pub fn is_batch(&self) -> bool {
        self.batch == Some(true)
    }
}

ext_header! {
    /// Send response header.
    pub struct SendMessageResponseHeader {
        /// Offset message id; a comma-separated list for a batch.
        msg_id: String = "msgId",
        /// Queue the message went to.
        queue_id: i32 = "queueId",
        /// Queue offset of the (first) message.
        queue_offset: i64 = "queueOffset",
        /// Transaction id (the message's unique key).
        transaction_id: Option<String> = "transactionId",
        /// Unique id of a batch.
        batch_uniq_id: Option<String> = "batchUniqId",
        /// Handle to recall a delayed message.
        recall_handle: Option<String> = "recallHandle",
        /// Broker region (`MSG_REGION`).
        msg_region: Option<String> = "MSG_REGION",
        /// Whether tracing is on (`TRACE_ON`).
        trace_on: Option<String> = "TRACE_ON",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ExtString;

    fn v1() -> SendMessageRequestHeader {
        SendMessageRequestHeader {
            producer_group: "PG".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 1,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            flag: 0,
            properties: Some("TAGS\u{1}a\u{2}".into()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            max_reconsume_times: None,
            broker_name: Some("broker-a".into()),
            ..SendMessageRequestHeader::default()
        }
    }

    #[test]
    fn v2_uses_single_letter_keys() {
        let v2 = SendMessageRequestHeaderV2::from(v1());
        let ext = v2.to_ext_fields();
        let keys: Vec<&str> = ext.keys().map(ExtString::as_str).collect();
        assert_eq!(
            keys,
            ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m", "n"]
        );
        assert_eq!(ext["g"], "1700000000000");
        assert_eq!(ext["k"], "false");
    }

    #[test]
    fn from_command_reads_each_form_by_code() {
        let v2 = RemotingCommand::request_with_header(
            RequestCode::SEND_MESSAGE_V2,
            &SendMessageRequestHeaderV2::from(v1()),
        );
        assert_eq!(SendMessageRequestHeader::from_command(&v2).unwrap(), v1());
        let plain = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE, &v1());
        assert_eq!(
            SendMessageRequestHeader::from_command(&plain).unwrap(),
            v1()
        );
        // A V1 header under a V2 code misses the single-letter keys.
        let mismatched = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &v1());
        assert_eq!(
            SendMessageRequestHeader::from_command(&mismatched),
            Err(HeaderError::Missing { key: "a" })
        );
        let pull = RemotingCommand::request(RequestCode::PULL_MESSAGE);
        assert!(matches!(
            SendMessageRequestHeader::from_command(&pull),
            Err(HeaderError::WrongCode { code: 11, .. })
        ));
    }
}
