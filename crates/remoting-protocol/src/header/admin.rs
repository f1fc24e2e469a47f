//! Headers of topic, consumer and broker administration requests.

use super::{ext_enum, ext_header};

ext_enum! {
    /// How a topic's tags are filtered.
    #[derive(Default)]
    pub enum TopicFilterType {
        /// One tag per message.
        #[default]
        SingleTag = "SINGLE_TAG",
        /// Several tags per message.
        MultiTag = "MULTI_TAG",
    }
}

ext_header! {
    /// `UPDATE_AND_CREATE_TOPIC` (17) request header.
    pub struct CreateTopicRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Template topic.
        default_topic: String = "defaultTopic",
        /// Readable queue count.
        read_queue_nums: i32 = "readQueueNums",
        /// Writable queue count.
        write_queue_nums: i32 = "writeQueueNums",
        /// Permission bits.
        perm: i32 = "perm",
        /// Tag filter type.
        topic_filter_type: TopicFilterType = "topicFilterType",
        /// Topic system flag.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// Ordered topic.
        order: bool = "order",
        /// Topic attributes.
        attributes: Option<String> = "attributes",
        /// Overwrite an existing topic.
        force: Option<bool> = "force",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_BROKER_CONFIG` (26) response header; the configuration is the body.
    pub struct GetBrokerConfigResponseHeader {
        /// Data version of the configuration, as JSON.
        version: String = "version",
    }
}

ext_header! {
    /// `GET_TOPIC_CONFIG` (351) request header.
    pub struct GetTopicConfigRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Also answer the static-topic mapping, if any.
        lo: Option<bool> = "lo",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `DELETE_TOPIC_IN_BROKER` (215) request header.
    pub struct DeleteTopicRequestHeader {
        /// Topic.
        topic: String = "topic",
    }
}

ext_header! {
    /// `GET_TOPIC_STATS_INFO` (202) request header.
    pub struct GetTopicStatsInfoRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_CONSUME_STATS` (208) request header.
    pub struct GetConsumeStatsRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// One topic; absent or blank for every topic the group has offsets on.
        topic: Option<String> = "topic",
        /// Topics separated by `;`; when given, it replaces `topic`.
        topic_list: Option<String> = "topicList",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

impl GetConsumeStatsRequestHeader {
    /// The topics of `topicList`, without empty names (Java's
    /// `fetchTopicList`); empty when the field is absent or blank.
    pub fn fetch_topic_list(&self) -> Vec<String> {
        self.topic_list
            .as_deref()
            .unwrap_or_default()
            .split(';')
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

ext_header! {
    /// `QUERY_TOPIC_CONSUME_BY_WHO` (300) request header.
    pub struct QueryTopicConsumeByWhoRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_CONSUMER_CONNECTION_LIST` (203) request header.
    pub struct GetConsumerConnectionListRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
    }
}

ext_header! {
    /// `GET_PRODUCER_CONNECTION_LIST` (204) request header.
    pub struct GetProducerConnectionListRequestHeader {
        /// Producer group.
        producer_group: String = "producerGroup",
    }
}

ext_header! {
    /// `GET_EARLIEST_MSG_STORETIME` (32) request header.
    pub struct GetEarliestMsgStoretimeRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_EARLIEST_MSG_STORETIME` (32) response header.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// Store time of the queue's first message (ms since the epoch);
        /// -1 when the queue has none.
        timestamp: i64 = "timestamp",
    }
}

ext_header! {
    /// `INVOKE_BROKER_TO_RESET_OFFSET` (222) request header: move a group's
    /// offsets on a topic to the first message stored at or after a time,
    /// or (one queue) to an explicit offset.
    pub struct ResetOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Consumer group.
        group: String = "group",
        /// Store time to reset to (ms since the epoch); below 0 for the end
        /// of each queue.
        timestamp: i64 = "timestamp",
        /// RocketMQ's force flag (the key is literally `isForce`); a broker
        /// resetting on its own side ignores it.
        is_force: bool = "isForce",
        /// One queue; absent or -1 for every read queue.
        queue_id: Option<i32> = "queueId",
        /// An explicit offset for the one queue; absent or -1 to reset by
        /// time.
        offset: Option<i64> = "offset",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

impl ResetOffsetRequestHeader {
    /// The queue asked for; `None` for every read queue (absent or below 0).
    pub fn single_queue(&self) -> Option<i32> {
        self.queue_id.filter(|q| *q >= 0)
    }

    /// The explicit target offset; `None` to reset by time (absent or -1).
    pub fn explicit_offset(&self) -> Option<i64> {
        self.offset.filter(|o| *o != -1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{command::ExtFields, header::CommandHeader};

    #[test]
    fn the_reset_offset_header_reads_rocketmq_keys_and_defaults() {
        let h = ResetOffsetRequestHeader::from_ext_fields(&ext(&[
            ("topic", "T"),
            ("group", "G"),
            ("timestamp", "1700000000000"),
            ("isForce", "true"),
            ("offset", "-1"),
        ]))
        .unwrap();
        assert_eq!((h.topic.as_str(), h.group.as_str()), ("T", "G"));
        assert_eq!((h.timestamp, h.is_force), (1_700_000_000_000, true));
        assert_eq!((h.single_queue(), h.explicit_offset()), (None, None));
        let one = ResetOffsetRequestHeader {
            queue_id: Some(3),
            offset: Some(42),
            ..h
        };
        let fields = one.to_ext_fields();
        assert_eq!(
            (
                fields["isForce"].as_str(),
                fields["queueId"].as_str(),
                fields["offset"].as_str()
            ),
            ("true", "3", "42")
        );
        let back = ResetOffsetRequestHeader::from_ext_fields(&fields).unwrap();
        assert_eq!(
            (back.single_queue(), back.explicit_offset()),
            (Some(3), Some(42))
        );
        assert_eq!(
            ResetOffsetRequestHeader::from_ext_fields(&ext(&[
                ("topic", "T"),
                ("group", "G"),
                ("timestamp", "0"),
            ])),
            Err(crate::header::HeaderError::Missing { key: "isForce" })
        );
    }

    fn ext(pairs: &[(&str, &str)]) -> ExtFields {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn the_topic_list_splits_on_semicolons_and_drops_empty_names() {
        let h = GetConsumeStatsRequestHeader::from_ext_fields(&ext(&[
            ("consumerGroup", "G"),
            ("topicList", ";A;;B;"),
        ]))
        .unwrap();
        assert_eq!(h.fetch_topic_list(), ["A", "B"]);
        let none =
            GetConsumeStatsRequestHeader::from_ext_fields(&ext(&[("consumerGroup", "G")])).unwrap();
        assert!(none.fetch_topic_list().is_empty());
        assert_eq!(
            GetConsumeStatsRequestHeader::from_ext_fields(&ext(&[("topic", "T")])),
            Err(crate::header::HeaderError::Missing {
                key: "consumerGroup"
            })
        );
    }

    #[test]
    fn the_earliest_store_time_headers_carry_rocketmq_keys() {
        let h = GetEarliestMsgStoretimeRequestHeader::from_ext_fields(&ext(&[
            ("topic", "T"),
            ("queueId", "+3"),
            ("lo", "true"),
        ]))
        .unwrap();
        assert_eq!((h.topic.as_str(), h.queue_id), ("T", 3));
        let answer = GetEarliestMsgStoretimeResponseHeader { timestamp: -1 }.to_ext_fields();
        assert_eq!(answer["timestamp"], "-1");
    }
}
