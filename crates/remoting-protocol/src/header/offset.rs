//! Headers of the consumer-offset and queue-offset requests.

use super::{ext_enum, ext_header};

ext_header! {
    /// `QUERY_CONSUMER_OFFSET` (14) request header.
    pub struct QueryConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Answer 0 instead of QUERY_NOT_FOUND when no offset is stored.
        set_zero_if_not_found: Option<bool> = "setZeroIfNotFound",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `UPDATE_CONSUMER_OFFSET` (15) request header.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// Consumer group.
        consumer_group: String = "consumerGroup",
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Offset to store.
        commit_offset: i64 = "commitOffset",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_MAX_OFFSET` (30) request header.
    pub struct GetMaxOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Count only committed messages (default true).
        committed: Option<bool> = "committed",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `GET_MIN_OFFSET` (31) request header.
    pub struct GetMinOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_enum! {
    /// Which end of a run of equal timestamps a search answers.
    pub enum BoundaryType {
        /// The first matching offset.
        Lower = "LOWER",
        /// The last matching offset.
        Upper = "UPPER",
    }
}

ext_header! {
    /// `SEARCH_OFFSET_BY_TIMESTAMP` (29) request header.
    pub struct SearchOffsetRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Queue id.
        queue_id: i32 = "queueId",
        /// Store timestamp to look for (ms since the epoch).
        timestamp: i64 = "timestamp",
        /// Boundary (default lower).
        boundary_type: Option<BoundaryType> = "boundaryType",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// Response header of the offset requests: one `offset` field.
    pub struct OffsetResponseHeader {
        /// The offset.
        offset: i64 = "offset",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{command::ExtFields, header::CommandHeader};

    #[test]
    fn boundary_type_is_case_insensitive() {
        let mut ext = ExtFields::default();
        for (k, v) in [
            ("topic", "T"),
            ("queueId", "0"),
            ("timestamp", "5"),
            ("boundaryType", "upper"),
        ] {
            ext.insert(k.into(), v.into());
        }
        let h = SearchOffsetRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!(h.boundary_type, Some(BoundaryType::Upper));
        assert_eq!(h.to_ext_fields()["boundaryType"], "UPPER");
    }
}
