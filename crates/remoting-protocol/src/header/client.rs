//! Headers of client management requests.

use super::ext_header;

ext_header! {
    /// `HEART_BEAT` (34) request header; the heartbeat itself is the body.
    pub struct HeartbeatRequestHeader {
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
    /// `UNREGISTER_CLIENT` (35) request header.
    pub struct UnregisterClientRequestHeader {
        /// Client id.
        client_id: String = "clientID",
        /// Producer group the client leaves.
        producer_group: Option<String> = "producerGroup",
        /// Consumer group the client leaves.
        consumer_group: Option<String> = "consumerGroup",
    }
}

ext_header! {
    /// `CONSUMER_SEND_MSG_BACK` (36) request header: a consumer hands a
    /// message it failed to consume back to the broker, to be redelivered
    /// later through the group's retry topic or parked in its dead-letter
    /// topic.
    pub struct ConsumerSendMsgBackRequestHeader {
        /// CommitLog offset of the consumed message.
        offset: i64 = "offset",
        /// Consumer group.
        group: String = "group",
        /// `-1`: to the dead-letter topic now; `0`: the broker picks
        /// `3 + reconsumeTimes`; above 0: that delay level.
        delay_level: i32 = "delayLevel",
        /// The client's message id (statistics only).
        origin_msg_id: Option<String> = "originMsgId",
        /// The topic the message was consumed from.
        origin_topic: Option<String> = "originTopic",
        /// Unit mode.
        unit_mode: Option<bool> = "unitMode",
        /// Overrides the group's `retryMaxTimes`.
        max_reconsume_times: Option<i32> = "maxReconsumeTimes",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `DELETE_SUBSCRIPTIONGROUP` (207) request header.
    pub struct DeleteSubscriptionGroupRequestHeader {
        /// The group to delete.
        group_name: String = "groupName",
        /// Also delete the group's committed offsets.
        clean_offset: Option<bool> = "cleanOffset",
    }
}

ext_header! {
    /// `NOTIFY_CONSUMER_IDS_CHANGED` (40) request header, broker to client:
    /// the group's members changed; rebalance now.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
    }
}
