//! Headers of `QUERY_MESSAGE`, the query of messages by key.

use super::ext_header;

ext_header! {
    /// `QUERY_MESSAGE` (12) request header.
    pub struct QueryMessageRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// A key of the message's `KEYS`, or its `UNIQ_KEY`.
        key: String = "key",
        /// Most messages wanted (the broker caps it at `maxMsgsNumBatch`).
        max_num: i32 = "maxNum",
        /// Earliest store time (ms since the epoch).
        begin_timestamp: i64 = "beginTimestamp",
        /// Latest store time (ms since the epoch).
        end_timestamp: i64 = "endTimestamp",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `QUERY_MESSAGE` response header: how far the broker's index goes.
    pub struct QueryMessageResponseHeader {
        /// Store time of the newest indexed message (ms; 0 without index).
        index_last_update_timestamp: i64 = "indexLastUpdateTimestamp",
        /// CommitLog offset of the newest indexed message (0 without index).
        index_last_update_phyoffset: i64 = "indexLastUpdatePhyoffset",
    }
}

/// The ext field that makes a `QUERY_MESSAGE` a query by unique key
/// (`"true"`): the broker then asks for `defaultQueryMaxNum` messages.
pub const UNIQUE_KEY_QUERY: &str = "_UNIQUE_KEY_QUERY";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{command::ExtFields, header::CommandHeader};

    #[test]
    fn fields_use_rocketmq_names_and_bname_is_optional() {
        let mut ext = ExtFields::default();
        for (k, v) in [
            ("topic", "T"),
            ("key", "k1"),
            ("maxNum", "64"),
            ("beginTimestamp", "0"),
            ("endTimestamp", "9223372036854775807"),
        ] {
            ext.insert(k.into(), v.into());
        }
        let h = QueryMessageRequestHeader::from_ext_fields(&ext).unwrap();
        assert_eq!((h.max_num, h.end_timestamp), (64, i64::MAX));
        assert_eq!(h.broker_name, None);
        ext.shift_remove("key");
        assert!(QueryMessageRequestHeader::from_ext_fields(&ext).is_err());
        let r = QueryMessageResponseHeader {
            index_last_update_timestamp: 5,
            index_last_update_phyoffset: 7,
        };
        let fields = r.to_ext_fields();
        assert_eq!(fields["indexLastUpdateTimestamp"], "5");
        assert_eq!(fields["indexLastUpdatePhyoffset"], "7");
    }
}
