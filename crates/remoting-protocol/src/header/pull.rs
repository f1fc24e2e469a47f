//! Headers of `PULL_MESSAGE` (11) and `LITE_PULL_MESSAGE` (361).

use super::ext_header;

ext_header! {
    /// Pull request header.
    pub struct PullMessageRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// First queue offset wanted.
        queue_offset: i64 = "queueOffset",
        /// Most messages wanted.
        max_msg_nums: i32 = "maxMsgNums",
        /// Pull flags (commit offset, suspend, subscription, class filter, lite).
        sys_flag: i32 = "sysFlag",
        /// Consumer offset to commit.
        commit_offset: i64 = "commitOffset",
        /// How long the broker may hold the request (ms).
        suspend_timeout_millis: i64 = "suspendTimeoutMillis",
        /// Subscription expression.
        subscription: Option<String> = "subscription",
        /// Subscription version.
        sub_version: i64 = "subVersion",
        /// Expression type (`TAG` or `SQL92`).
        expression_type: Option<String> = "expressionType",
        /// Most bytes wanted.
        max_msg_bytes: Option<i32> = "maxMsgBytes",
        /// Request source.
        request_source: Option<i32> = "requestSource",
        /// Client id forwarded by a proxy (RocketMQ's spelling).
        proxy_forward_client_id: Option<String> = "proxyFrowardClientId",
        /// Namespace.
        namespace: Option<String> = "ns",
        /// Whether names are already namespaced.
        namespaced: Option<bool> = "nsd",
        /// Target broker name.
        broker_name: Option<String> = "bname",
        /// Logical queue marker.
        logical: Option<bool> = "lo",
    }
}

ext_header! {
    /// Pull response header.
    pub struct PullMessageResponseHeader {
        /// Broker to pull from next time (0 = master).
        suggest_which_broker_id: i64 = "suggestWhichBrokerId",
        /// Queue offset to pull from next.
        next_begin_offset: i64 = "nextBeginOffset",
        /// Smallest offset in the queue.
        min_offset: i64 = "minOffset",
        /// Offset after the last message in the queue.
        max_offset: i64 = "maxOffset",
        /// Offset delta.
        offset_delta: Option<i64> = "offsetDelta",
        /// Topic system flag.
        topic_sys_flag: Option<i32> = "topicSysFlag",
        /// Group system flag.
        group_sys_flag: Option<i32> = "groupSysFlag",
        /// Forbidden type.
        forbidden_type: Option<i32> = "forbiddenType",
    }
}
/// Whether a subscription's expression type selects by tag, as RocketMQ's
/// `ExpressionType.isTagType` decides: absent, empty or exactly `TAG`.
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    matches!(expression_type, None | Some("" | "TAG"))
}
