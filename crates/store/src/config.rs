//! The store's configuration section.
//!
//! Keys keep RocketMQ's `broker.conf` names so that an operator's existing
//! file translates line by line. Every field documents its default and its
//! valid range; [`StoreConfig::validate`] checks them and names the key.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// When an appended message counts as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum FlushDiskType {
    /// Acknowledge once the bytes are in the page cache; a flush thread makes
    /// them durable every `flushIntervalCommitLog` ms.
    #[default]
    AsyncFlush,
    /// Acknowledge only after a group commit has made the bytes durable.
    SyncFlush,
}

/// A configuration value outside its valid range.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid value {value} for `{key}`: {allowed}")]
pub struct ConfigError {
    /// The key, as written in a configuration file.
    pub key: &'static str,
    /// The offending value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

/// Configuration of the message store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct StoreConfig {
    /// Root directory of the store. Default `~/store` (the broker expands `~`).
    pub store_path_root_dir: PathBuf,
    /// CommitLog directory. Default: `<storePathRootDir>/commitlog`.
    pub store_path_commit_log: Option<PathBuf>,
    /// Size of one CommitLog file in bytes. Default 1 GiB; at least 64 KiB
    /// and at least `maxMessageSize` + 64 KiB.
    pub mapped_file_size_commit_log: usize,
    /// Size of one ConsumeQueue file in bytes. Default 6,000,000 (300,000
    /// entries); a positive multiple of 20.
    pub mapped_file_size_consume_queue: usize,
    /// `ASYNC_FLUSH` (default) or `SYNC_FLUSH`.
    pub flush_disk_type: FlushDiskType,
    /// Async flush period in ms. Default 500; 1..=60000.
    pub flush_interval_commit_log: u64,
    /// Dirty 4 KiB pages needed before an async flush. Default 4; 0 flushes any.
    pub flush_commit_log_least_pages: usize,
    /// A flush ignoring the page minimum happens at least this often (ms).
    /// Default 10000.
    pub flush_commit_log_thorough_interval: u64,
    /// Group-commit wait of a SYNC_FLUSH append in ms. Default 5000; 1..=60000.
    pub sync_flush_timeout: u64,
    /// Commit period of the transient store pool in ms. Default 200; 1..=60000.
    pub commit_interval_commit_log: u64,
    /// Uncommitted 4 KiB pages needed before a commit. Default 4.
    pub commit_commit_log_least_pages: usize,
    /// A commit ignoring the page minimum happens at least this often (ms). Default 200.
    pub commit_commit_log_thorough_interval: u64,
    /// ConsumeQueue flush period in ms. Default 1000.
    pub flush_interval_consume_queue: u64,
    /// Dirty pages needed before a ConsumeQueue flush. Default 2.
    pub flush_consume_queue_least_pages: usize,
    /// A ConsumeQueue flush ignoring the page minimum happens at least this
    /// often (ms). Default 60000.
    pub flush_consume_queue_thorough_interval: u64,
    /// Write through reusable off-heap buffers committed to the files by a
    /// commit thread. Default false.
    pub transient_store_pool_enable: bool,
    /// Number of transient store pool buffers, each one CommitLog file in
    /// size. Default 5; 1..=64.
    pub transient_store_pool_size: usize,
    /// Fail appends that need a new file when no pool buffer is free, instead
    /// of writing that file without one. Default false.
    pub fast_fail_if_no_buffer_in_store_pool: bool,
    /// Largest message body in bytes. Default 4 MiB; 1..=1 GiB.
    pub max_message_size: usize,
    /// Put lock: a blocking mutex (true, default) or a spin lock (false).
    pub use_reentrant_lock_when_put_message: bool,
    /// The put lock held longer than this (ms) means the page cache is busy.
    /// Default 1000; 1..=10,000,000.
    pub os_page_cache_busy_time_out_mills: u64,
    /// Verify body CRCs during recovery. Default true.
    #[serde(rename = "checkCRCOnRecover")]
    pub check_crc_on_recover: bool,
    /// Fault each new CommitLog file's pages in when it is made (in the
    /// background), so that appends do not pay for page allocation and
    /// zeroing. Default false.
    pub warm_maped_file_enable: bool,
    /// Bytes just ahead of the CommitLog's write position that a background
    /// thread keeps faulted in, so that appends under the put lock do not
    /// wait for the kernel to allocate and zero pages; 0 turns it off. Not
    /// used with `warmMapedFileEnable` (whole files are faulted in then) or
    /// the transient store pool (appends touch only its buffers). Default
    /// 16 MiB; 0..=1 GiB.
    pub warm_ahead_bytes_commit_log: usize,
    /// The delay of each delay level, level 1 first: numbers with a unit
    /// (`s`, `m`, `h`, `d`) separated by spaces. Default RocketMQ's 18
    /// levels, `1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`.
    pub message_delay_level: String,
    /// Hours a CommitLog file is kept after it was last written (its
    /// modification time). Default 72; 0..=87600.
    pub file_reserved_time: u64,
    /// Hours of the day (local time, `;`-separated, such as `04` or
    /// `01;13`) in which expired files are deleted even with room on the
    /// disk. Default `04`.
    #[serde(deserialize_with = "hours_of_day")]
    pub delete_when: String,
    /// Milliseconds between two cleaning passes. Default 10000; 10..=3,600,000.
    pub clean_resource_interval: u64,
    /// Milliseconds between two CommitLog file deletions in one pass.
    /// Default 100; 0..=60000.
    pub delete_commit_log_files_interval: u64,
    /// Milliseconds after each ConsumeQueue that lost files in a pass.
    /// Default 100; 0..=60000.
    pub delete_consume_queue_files_interval: u64,
    /// A deleted file that a reader still maps is reported once this many ms
    /// have passed; its disk blocks return when the last reader lets go.
    /// Default 120000; 1000..=86,400,000.
    pub destroy_maped_file_interval_forcibly: u64,
    /// Most CommitLog files deleted in one pass. Default 10; 1..=1000.
    pub delete_file_batch_max: usize,
    /// Disk use (percent) above which expired files are deleted at any hour.
    /// Default 75; 10..=95.
    pub disk_max_used_space_ratio: u32,
    /// Disk use (percent) above which writes are refused until cleaning
    /// brings it down to `diskSpaceCleanForciblyRatio`. Default 90; 35..=90.
    pub disk_space_warning_level_ratio: u32,
    /// Disk use (percent) above which the oldest files are deleted whatever
    /// their age (with `cleanFileForciblyEnable`). Default 85; 30..=85.
    pub disk_space_clean_forcibly_ratio: u32,
    /// Allow deleting files that have not expired when the disk is above
    /// `diskSpaceCleanForciblyRatio`. Default true.
    pub clean_file_forcibly_enable: bool,
    /// Index every message by its `UNIQ_KEY` and `KEYS` in the IndexFiles
    /// under `<storePathRootDir>/index`, for queries by key. Default true.
    pub message_index_enable: bool,
    /// Hash slots of one IndexFile (4 bytes each). Default 5,000,000;
    /// 1..=100,000,000.
    pub max_hash_slot_num: usize,
    /// Entries of one IndexFile (20 bytes each; entry 0 is never used).
    /// Default 20,000,000; 2..=100,000,000.
    pub max_index_num: usize,
    /// Most messages one query by key returns, whatever it asks for.
    /// Default 64; 1..=10000.
    pub max_msgs_num_batch: usize,
    /// Messages a query by unique key (message id) asks for. Default 32;
    /// 1..=10000.
    pub default_query_max_num: usize,
    /// Fault injection: sleep this long (ms) inside the put lock on every
    /// append. For tests and demonstrations only. Default 0 (off).
    pub fault_put_lock_delay_mills: u64,
    /// Fault injection: sleep this long (ms) before every CommitLog flush.
    /// For tests and demonstrations only. Default 0 (off).
    pub fault_flush_delay_mills: u64,
    /// Whether the CommitLog is replicated: consumers then see only what
    /// is below the confirm offset (on every in-sync replica), and
    /// [`crate::MessageStore::append_replicated`] takes a master's bytes.
    /// Set by the broker from its replication settings, never read from a
    /// file. Default false.
    #[serde(skip)]
    pub replicated: bool,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            store_path_root_dir: PathBuf::from("~/store"),
            store_path_commit_log: None,
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            mapped_file_size_consume_queue: 300_000 * 20,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log: 500,
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval: 10_000,
            sync_flush_timeout: 5000,
            commit_interval_commit_log: 200,
            commit_commit_log_least_pages: 4,
            commit_commit_log_thorough_interval: 200,
            flush_interval_consume_queue: 1000,
            flush_consume_queue_least_pages: 2,
            flush_consume_queue_thorough_interval: 60_000,
            transient_store_pool_enable: false,
            transient_store_pool_size: 5,
            fast_fail_if_no_buffer_in_store_pool: false,
            max_message_size: 4 * 1024 * 1024,
            use_reentrant_lock_when_put_message: true,
            os_page_cache_busy_time_out_mills: 1000,
            check_crc_on_recover: true,
            warm_maped_file_enable: false,
            warm_ahead_bytes_commit_log: 16 << 20,
            message_delay_level: DEFAULT_MESSAGE_DELAY_LEVEL.to_owned(),
            file_reserved_time: 72,
            delete_when: "04".to_owned(),
            clean_resource_interval: 10_000,
            delete_commit_log_files_interval: 100,
            delete_consume_queue_files_interval: 100,
            destroy_maped_file_interval_forcibly: 120_000,
            delete_file_batch_max: 10,
            disk_max_used_space_ratio: 75,
            disk_space_warning_level_ratio: 90,
            disk_space_clean_forcibly_ratio: 85,
            clean_file_forcibly_enable: true,
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            max_msgs_num_batch: 64,
            default_query_max_num: 32,
            fault_put_lock_delay_mills: 0,
            fault_flush_delay_mills: 0,
            replicated: false,
        }
    }
}

/// RocketMQ's delay levels.
pub const DEFAULT_MESSAGE_DELAY_LEVEL: &str =
    "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

impl StoreConfig {
    /// The delay of each level in ms, level 1 first.
    ///
    /// # Errors
    /// `messageDelayLevel` is empty or an entry is not a number followed
    /// by `s`, `m`, `h` or `d`.
    pub fn delay_levels_ms(&self) -> Result<Vec<u64>, ConfigError> {
        let bad = |why: String| ConfigError {
            key: "messageDelayLevel",
            value: format!("{:?}", self.message_delay_level),
            allowed: why,
        };
        let levels = self
            .message_delay_level
            .split_whitespace()
            .map(|entry| {
                let (number, unit) =
                    entry.split_at(entry.len() - entry.chars().last().map_or(0, char::len_utf8));
                let scale = match unit {
                    "s" => 1_000,
                    "m" => 60_000,
                    "h" => 3_600_000,
                    "d" => 86_400_000,
                    _ => return Err(bad(format!("{entry:?} does not end in s, m, h or d"))),
                };
                number
                    .parse::<u64>()
                    .ok()
                    .and_then(|n| n.checked_mul(scale))
                    .ok_or_else(|| bad(format!("{entry:?} is not a whole number of its unit")))
            })
            .collect::<Result<Vec<u64>, ConfigError>>()?;
        if levels.is_empty() || levels.len() > 64 {
            return Err(bad("1 to 64 delays such as \"1s 5s 10s 1m 2h\"".into()));
        }
        Ok(levels)
    }

    /// The hours of the day named by `deleteWhen`.
    ///
    /// # Errors
    /// A part is not a whole number from 0 to 23.
    pub fn delete_hours(&self) -> Result<Vec<u32>, ConfigError> {
        self.delete_when
            .split(';')
            .map(|part| {
                part.trim()
                    .parse::<u32>()
                    .ok()
                    .filter(|h| *h < 24)
                    .ok_or_else(|| ConfigError {
                        key: "deleteWhen",
                        value: format!("{:?}", self.delete_when),
                        allowed:
                            "hours of the day 0 to 23 separated by `;`, such as \"04\" or \"01;13\""
                                .into(),
                    })
            })
            .collect()
    }

    /// A configuration rooted at `dir` with every other value at its default.
    pub fn with_root(dir: impl Into<PathBuf>) -> Self {
        Self {
            store_path_root_dir: dir.into(),
            ..Self::default()
        }
    }

    /// The CommitLog directory.
    pub fn commit_log_dir(&self) -> PathBuf {
        self.store_path_commit_log
            .clone()
            .unwrap_or_else(|| self.store_path_root_dir.join("commitlog"))
    }

    /// The ConsumeQueue root directory.
    pub fn consume_queue_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("consumequeue")
    }

    /// The IndexFile directory.
    pub fn index_dir(&self) -> PathBuf {
        self.store_path_root_dir.join("index")
    }

    /// Checks every value and the rules between them.
    ///
    /// # Errors
    /// [`ConfigError`] naming the first key whose value is not allowed.
    pub fn validate(&self) -> Result<(), ConfigError> {
        range("maxMessageSize", self.max_message_size, 1, 1 << 30)?;
        let min_file = (64 * 1024).max(self.max_message_size + 64 * 1024);
        range(
            "mappedFileSizeCommitLog",
            self.mapped_file_size_commit_log,
            min_file,
            i32::MAX as usize,
        )?;
        if self.mapped_file_size_consume_queue == 0
            || !self.mapped_file_size_consume_queue.is_multiple_of(20)
        {
            return Err(ConfigError {
                key: "mappedFileSizeConsumeQueue",
                value: self.mapped_file_size_consume_queue.to_string(),
                allowed: "a positive multiple of 20 (one entry is 20 bytes)".into(),
            });
        }
        range(
            "flushIntervalCommitLog",
            self.flush_interval_commit_log,
            1,
            60_000,
        )?;
        range("syncFlushTimeout", self.sync_flush_timeout, 1, 60_000)?;
        range(
            "warmAheadBytesCommitLog",
            self.warm_ahead_bytes_commit_log,
            0,
            1 << 30,
        )?;
        range(
            "commitIntervalCommitLog",
            self.commit_interval_commit_log,
            1,
            60_000,
        )?;
        range(
            "flushIntervalConsumeQueue",
            self.flush_interval_consume_queue,
            1,
            60_000,
        )?;
        range(
            "transientStorePoolSize",
            self.transient_store_pool_size,
            1,
            64,
        )?;
        range(
            "osPageCacheBusyTimeOutMills",
            self.os_page_cache_busy_time_out_mills,
            1,
            10_000_000,
        )?;
        self.delay_levels_ms()?;
        self.delete_hours()?;
        range("fileReservedTime", self.file_reserved_time, 0, 87_600)?;
        range(
            "cleanResourceInterval",
            self.clean_resource_interval,
            10,
            3_600_000,
        )?;
        range(
            "deleteCommitLogFilesInterval",
            self.delete_commit_log_files_interval,
            0,
            60_000,
        )?;
        range(
            "deleteConsumeQueueFilesInterval",
            self.delete_consume_queue_files_interval,
            0,
            60_000,
        )?;
        range(
            "destroyMapedFileIntervalForcibly",
            self.destroy_maped_file_interval_forcibly,
            1000,
            86_400_000,
        )?;
        range("deleteFileBatchMax", self.delete_file_batch_max, 1, 1000)?;
        range(
            "diskMaxUsedSpaceRatio",
            self.disk_max_used_space_ratio,
            10,
            95,
        )?;
        range(
            "diskSpaceWarningLevelRatio",
            self.disk_space_warning_level_ratio,
            35,
            90,
        )?;
        range(
            "diskSpaceCleanForciblyRatio",
            self.disk_space_clean_forcibly_ratio,
            30,
            85,
        )?;
        range("maxHashSlotNum", self.max_hash_slot_num, 1, 100_000_000)?;
        range("maxIndexNum", self.max_index_num, 2, 100_000_000)?;
        range("maxMsgsNumBatch", self.max_msgs_num_batch, 1, 10_000)?;
        range("defaultQueryMaxNum", self.default_query_max_num, 1, 10_000)?;
        range(
            "faultPutLockDelayMills",
            self.fault_put_lock_delay_mills,
            0,
            600_000,
        )?;
        range(
            "faultFlushDelayMills",
            self.fault_flush_delay_mills,
            0,
            600_000,
        )?;
        Ok(())
    }
}

/// Reads `deleteWhen` as written, a string, or as a bare number (a
/// `broker.conf` line `deleteWhen=04` reaches here as the number 4).
fn hours_of_day<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Hours {
        Text(String),
        Number(u64),
    }
    Ok(match Hours::deserialize(d)? {
        Hours::Text(s) => s,
        Hours::Number(n) => n.to_string(),
    })
}

fn range<T>(key: &'static str, value: T, min: T, max: T) -> Result<(), ConfigError>
where
    T: PartialOrd + std::fmt::Display,
{
    if value < min || value > max {
        return Err(ConfigError {
            key,
            value: value.to_string(),
            allowed: format!("{min}..={max}"),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmq_defaults_and_valid() {
        let c = StoreConfig::default();
        assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
        assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(c.os_page_cache_busy_time_out_mills, 1000);
        assert!(c.message_index_enable);
        assert_eq!(
            (
                c.max_hash_slot_num,
                c.max_index_num,
                c.max_msgs_num_batch,
                c.default_query_max_num
            ),
            (5_000_000, 20_000_000, 64, 32)
        );
        c.validate().unwrap();
    }

    #[test]
    fn keys_use_rocketmq_names_and_unknown_keys_are_refused() {
        let c: StoreConfig = serde_json::from_str(
            r#"{"flushDiskType":"SYNC_FLUSH","transientStorePoolEnable":true,"mappedFileSizeCommitLog":1048576}"#,
        )
        .unwrap();
        assert_eq!(c.flush_disk_type, FlushDiskType::SyncFlush);
        assert!(c.transient_store_pool_enable);
        let err =
            serde_json::from_str::<StoreConfig>(r#"{"flushDiskTyp":"SYNC_FLUSH"}"#).unwrap_err();
        assert!(err.to_string().contains("flushDiskTyp"), "{err}");
    }

    #[test]
    fn delay_levels_parse_as_rocketmq_parses_them() {
        let c = StoreConfig::default();
        let levels = c.delay_levels_ms().unwrap();
        assert_eq!(levels.len(), 18);
        assert_eq!(
            (levels[0], levels[2], levels[17]),
            (1_000, 10_000, 7_200_000)
        );
        let c = StoreConfig {
            message_delay_level: "1s 2d".into(),
            ..StoreConfig::default()
        };
        assert_eq!(c.delay_levels_ms().unwrap(), [1_000, 172_800_000]);
        for bad in ["", "1s 5x", "s", "1.5s"] {
            let c = StoreConfig {
                message_delay_level: bad.into(),
                ..StoreConfig::default()
            };
            assert_eq!(
                c.validate().unwrap_err().key,
                "messageDelayLevel",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn retention_keys_read_as_rocketmq_writes_them() {
        let c: StoreConfig =
            serde_json::from_str(r#"{"deleteWhen":4,"fileReservedTime":48}"#).unwrap();
        assert_eq!(c.delete_hours().unwrap(), [4]);
        let c: StoreConfig = serde_json::from_str(r#"{"deleteWhen":"01; 13"}"#).unwrap();
        assert_eq!(c.delete_hours().unwrap(), [1, 13]);
        for bad in ["24", "", "4am", "1;;2"] {
            let c = StoreConfig {
                delete_when: bad.into(),
                ..StoreConfig::default()
            };
            assert_eq!(c.validate().unwrap_err().key, "deleteWhen", "{bad:?}");
        }
        let c = StoreConfig {
            disk_space_warning_level_ratio: 95,
            ..StoreConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "diskSpaceWarningLevelRatio");
        assert!(err.to_string().contains("35..=90"), "{err}");
    }

    #[test]
    fn validation_names_the_key_and_the_range() {
        let c = StoreConfig {
            mapped_file_size_consume_queue: 30,
            ..StoreConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().key, "mappedFileSizeConsumeQueue");
        let c = StoreConfig {
            mapped_file_size_commit_log: 4096,
            ..StoreConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "mappedFileSizeCommitLog");
        assert!(err.to_string().contains("4096"), "{err}");
        let c = StoreConfig {
            max_index_num: 1,
            ..StoreConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.key, "maxIndexNum");
        assert!(err.to_string().contains("2..=100000000"), "{err}");
        for (c, key) in [
            (
                StoreConfig {
                    max_hash_slot_num: 0,
                    ..StoreConfig::default()
                },
                "maxHashSlotNum",
            ),
            (
                StoreConfig {
                    max_msgs_num_batch: 0,
                    ..StoreConfig::default()
                },
                "maxMsgsNumBatch",
            ),
            (
                StoreConfig {
                    default_query_max_num: 10_001,
                    ..StoreConfig::default()
                },
                "defaultQueryMaxNum",
            ),
        ] {
            assert_eq!(c.validate().unwrap_err().key, key);
        }
    }
}
