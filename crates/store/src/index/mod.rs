//! Query by key: RocketMQ's IndexFiles under `<storePathRootDir>/index`.
//!
//! - `file`: one IndexFile, its layout and the hash of `topic#key`.
//! - `service`: the files of a store; the dispatch indexes each message
//!   (`IndexService::build`), the housekeeping thread flushes full files
//!   for the checkpoint, retention deletes files whose messages are gone,
//!   recovery drops files that may be incomplete after a crash.
//!
//! Here: the store's query, which turns the offsets the files give into
//! the stored records.

mod file;
mod service;

pub(crate) use service::IndexService;

use bytes::Bytes;
use message_model::record::{self, Record};

use crate::state::Inner;

/// Messages found by key ([`MessageStore::query_message`]).
///
/// [`MessageStore::query_message`]: crate::MessageStore::query_message
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueryResult {
    /// Whole stored records, each once, in CommitLog order (zero-copy
    /// views of the files). Only the key's hash is compared: a record may
    /// hold another key with the same hash, and the asker checks its keys.
    pub messages: Vec<Bytes>,
    /// Store time of the newest indexed message (ms; 0 without IndexFiles).
    pub index_last_update_timestamp: i64,
    /// CommitLog offset of the newest indexed message (0 without IndexFiles).
    pub index_last_update_phyoffset: i64,
}

/// Attempts of a query that found offsets but could read no record, each
/// looking at earlier messages than the one before.
const QUERY_ATTEMPTS: usize = 3;

impl Inner {
    /// See [`MessageStore::query_message`](crate::MessageStore::query_message).
    pub(crate) fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> QueryResult {
        let max = max_num.min(self.config.max_msgs_num_batch);
        let mut result = QueryResult::default();
        let mut end = end;
        for _ in 0..QUERY_ATTEMPTS {
            let min = self.commit_log.files().min_offset();
            let (mut hits, last_ts, last_phy) =
                self.index.query(topic, key, max, (begin, end), min);
            result.index_last_update_timestamp = last_ts;
            result.index_last_update_phyoffset = last_phy;
            if hits.is_empty() {
                break;
            }
            hits.sort_unstable_by_key(|h| h.phy_offset);
            hits.dedup_by_key(|h| h.phy_offset);
            for hit in &hits {
                if let Some(r) = self.read_whole_record(hit.phy_offset) {
                    result.messages.push(r);
                }
            }
            if !result.messages.is_empty() {
                break;
            }
            // Nothing could be read: look again before the oldest hit.
            match hits.iter().map(|h| h.time).min() {
                Some(oldest) if oldest > begin => end = oldest - 1,
                _ => break,
            }
        }
        result
    }

    /// The record that starts at `offset`, if a valid one does (an index
    /// entry written before a crash may point at a record that was lost).
    fn read_whole_record(&self, offset: i64) -> Option<Bytes> {
        let record = self.commit_log.read_record(u64::try_from(offset).ok()?)?;
        match record::check(&record, false) {
            Record::Message(m) if m.physical_offset == offset => Some(record),
            _ => None,
        }
    }
}
