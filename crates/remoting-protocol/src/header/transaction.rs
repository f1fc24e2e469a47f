//! Headers of transactional messages: the producer's end of a transaction
//! and the broker's check of one.

use super::ext_header;

ext_header! {
    /// `END_TRANSACTION` (37) request header, sent oneway by the producer
    /// once its local transaction has an outcome (or when it answers a
    /// check).
    pub struct EndTransactionRequestHeader {
        /// Producer group; must be the half message's `PGROUP`.
        producer_group: String = "producerGroup",
        /// The half message's offset in its queue (the send answer's
        /// `queueOffset`).
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// The half message's CommitLog offset (from the send answer's
        /// offset message id).
        commit_log_offset: i64 = "commitLogOffset",
        /// `0` unknown, `8` commit, `12` rollback.
        commit_or_rollback: i32 = "commitOrRollback",
        /// The end answers a check from the broker.
        from_transaction_check: Option<bool> = "fromTransactionCheck",
        /// The message's unique key (`UNIQ_KEY`).
        msg_id: String = "msgId",
        /// Transaction id.
        transaction_id: Option<String> = "transactionId",
        /// The message's topic.
        topic: Option<String> = "topic",
        /// Target broker name.
        broker_name: Option<String> = "bname",
    }
}

ext_header! {
    /// `CHECK_TRANSACTION_STATE` (39) request header, broker to producer:
    /// what became of this half message's local transaction?
    pub struct CheckTransactionStateRequestHeader {
        /// The half message's offset in its queue.
        tran_state_table_offset: i64 = "tranStateTableOffset",
        /// The half message's CommitLog offset.
        commit_log_offset: i64 = "commitLogOffset",
        /// Its offset message id.
        offset_msg_id: Option<String> = "offsetMsgId",
        /// Its unique key.
        msg_id: Option<String> = "msgId",
        /// Transaction id.
        transaction_id: Option<String> = "transactionId",
        /// The half topic.
        topic: Option<String> = "topic",
        /// Broker name.
        broker_name: Option<String> = "bname",
    }
}
