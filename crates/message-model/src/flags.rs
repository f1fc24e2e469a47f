//! Message system flags, permission bits and reserved topic names.

/// Message `sysFlag` bit: the body is compressed.
pub const COMPRESSED: i32 = 0x1;
/// Message `sysFlag` bit: the `TAGS` property holds several tags.
pub const MULTI_TAGS: i32 = 0x2;
/// Mask of the two transaction bits in `sysFlag`.
pub const TRANSACTION_TYPE_MASK: i32 = 0xC;
/// Transaction state: not a transactional message.
pub const TRANSACTION_NOT_TYPE: i32 = 0x0;
/// Transaction state: half (prepared) message.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x4;
/// Transaction state: committed.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x8;
/// Transaction state: rolled back.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0xC;
/// Message `sysFlag` bit: the born host is an IPv6 address.
pub const BORNHOST_V6: i32 = 0x10;
/// Message `sysFlag` bit: the store host is an IPv6 address.
pub const STOREHOST_V6: i32 = 0x20;
/// Message `sysFlag` bit: the body is a batch that needs unwrapping.
pub const NEED_UNWRAP: i32 = 0x40;
/// Message `sysFlag` bit: an inner batch stored as one record.
pub const INNER_BATCH: i32 = 0x80;
/// Mask of the compression type bits (8..=10) in `sysFlag`.
pub const COMPRESSION_TYPE_MASK: i32 = 0x700;
/// Compression type: LZ4.
pub const COMPRESSION_LZ4: i32 = 0x100;
/// Compression type: Zstandard.
pub const COMPRESSION_ZSTD: i32 = 0x200;
/// Compression type: zlib (the Java client's default).
pub const COMPRESSION_ZLIB: i32 = 0x300;

/// Pull `sysFlag` bit: the request carries an offset to commit.
pub const PULL_COMMIT_OFFSET: i32 = 0x1;
/// Pull `sysFlag` bit: the broker may hold the request (long polling).
pub const PULL_SUSPEND: i32 = 0x2;
/// Pull `sysFlag` bit: the request carries a subscription expression.
pub const PULL_SUBSCRIPTION: i32 = 0x4;
/// Pull `sysFlag` bit: class filter mode.
pub const PULL_CLASS_FILTER: i32 = 0x8;
/// Pull `sysFlag` bit: lite pull consumer.
pub const PULL_LITE_PULL: i32 = 0x10;

/// Permission bit: ordered (priority) topic.
pub const PERM_PRIORITY: i32 = 8;
/// Permission bit: readable.
pub const PERM_READ: i32 = 4;
/// Permission bit: writable.
pub const PERM_WRITE: i32 = 2;
/// Permission bit: inheritable (template topics such as `TBW102`).
pub const PERM_INHERIT: i32 = 1;

/// Prefix of per-group retry topics.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of per-group dead-letter topics.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// The system topic that holds delay-level messages until they are due,
/// one queue per level (queue id = level - 1).
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// The system topic that holds timer messages until they are due (one
/// queue; the consume queue's tags code is the due time).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// Number of queues of a dead-letter topic.
pub const DLQ_QUEUE_NUMS: i32 = 1;

/// The retry topic of a consumer group: `%RETRY%<group>`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of a consumer group: `%DLQ%<group>`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// The id of a master broker within its broker name.
pub const MASTER_ID: i64 = 0;

/// Returns the transaction state bits of a message `sysFlag`.
pub fn transaction_type(sys_flag: i32) -> i32 {
    sys_flag & TRANSACTION_TYPE_MASK
}

/// Reports whether a permission value allows reads.
pub fn is_readable(perm: i32) -> bool {
    perm & PERM_READ == PERM_READ
}

/// Reports whether a permission value allows writes.
pub fn is_writeable(perm: i32) -> bool {
    perm & PERM_WRITE == PERM_WRITE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transaction_bits_are_extracted_from_sys_flag() {
        assert_eq!(
            transaction_type(COMPRESSED | TRANSACTION_PREPARED_TYPE),
            TRANSACTION_PREPARED_TYPE
        );
        assert_eq!(transaction_type(MULTI_TAGS), TRANSACTION_NOT_TYPE);
    }

    #[test]
    fn default_topic_permission_is_read_write() {
        assert!(is_readable(6) && is_writeable(6));
        assert!(!is_writeable(PERM_READ));
        assert!(!is_readable(PERM_WRITE | PERM_INHERIT));
    }
}
