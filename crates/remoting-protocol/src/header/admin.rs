//! Headers of topic and broker administration requests.

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
