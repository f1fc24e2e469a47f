//! Topic configurations: kept in a concurrent map, persisted to
//! `<storePathRootDir>/config/topics.json` in RocketMQ's layout.

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicI64, Ordering},
        Mutex, PoisonError,
    },
};

use dashmap::DashMap;
use message_model::flags::{PERM_INHERIT, PERM_READ, PERM_WRITE, SCHEDULE_TOPIC, TIMER_TOPIC};
use remoting_protocol::{
    body::{self, DataVersion, TopicConfig, TopicConfigSerializeWrapper},
    AUTO_CREATE_TOPIC,
};

use crate::persist;

/// Longest topic name, except retry and dead-letter topics.
pub const MAX_TOPIC_LEN: usize = 127;
/// Longest retry or dead-letter topic name.
pub const MAX_SYSTEM_TOPIC_LEN: usize = 255;

/// Why a topic name is refused.
pub fn validate_topic_name(topic: &str) -> Result<(), String> {
    if topic.is_empty() {
        return Err("the topic name is empty".into());
    }
    let system = topic.starts_with("%RETRY%") || topic.starts_with("%DLQ%");
    let max = if system {
        MAX_SYSTEM_TOPIC_LEN
    } else {
        MAX_TOPIC_LEN
    };
    if topic.len() > max {
        return Err(format!(
            "the topic name is {} bytes long; the limit is {max}",
            topic.len()
        ));
    }
    if let Some(c) = topic
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-')))
    {
        return Err(format!(
            "the topic name {topic:?} contains {c:?}; allowed are letters, digits and % | _ -"
        ));
    }
    Ok(())
}

/// RocketMQ's system topics (`TopicValidator.isSystemTopic`): the
/// auto-create template, the delay-level and transaction topics, the trace,
/// benchmark, self-test, offset-moved and checkpoint topics, and every
/// topic named `rmq_sys_…`. An operator's request may not delete them.
pub fn is_rocketmq_system_topic(topic: &str) -> bool {
    const SYSTEM_TOPICS: &[&str] = &[
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "CHECKPOINT_TOPIC",
    ];
    SYSTEM_TOPICS.contains(&topic) || topic.starts_with("rmq_sys_")
}

/// Topics the broker makes itself, never refused by the topic limit.
fn is_system_topic(topic: &str) -> bool {
    topic == AUTO_CREATE_TOPIC || topic == SCHEDULE_TOPIC || topic == TIMER_TOPIC
}

/// The broker's topics.
#[derive(Debug)]
pub struct TopicManager {
    topics: DashMap<String, TopicConfig>,
    version: Mutex<DataVersion>,
    /// Serialises writes of the file, so the last change is what is on disk.
    write: Mutex<()>,
    /// The change counter of the newest table written to the file.
    persisted: AtomicI64,
    /// Serialises the limit check and insert of a new topic.
    admit: Mutex<()>,
    /// Most topics, system topics aside.
    max_topics: usize,
    path: PathBuf,
}

impl TopicManager {
    /// Loads `topics.json` from `config_dir` (missing is fine) and makes sure
    /// the auto-create template topic exists when auto-creation is on.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(
        config_dir: &Path,
        auto_create: bool,
        default_queue_nums: i32,
    ) -> std::io::Result<Self> {
        let path = config_dir.join("topics.json");
        let wrapper: TopicConfigSerializeWrapper = persist::read_json(&path)?;
        let manager = Self {
            topics: wrapper.topic_config_table.into_iter().collect(),
            persisted: AtomicI64::new(wrapper.data_version.counter),
            version: Mutex::new(wrapper.data_version),
            write: Mutex::new(()),
            admit: Mutex::new(()),
            max_topics: usize::MAX,
            path,
        };
        if auto_create && !manager.topics.contains_key(AUTO_CREATE_TOPIC) {
            manager.topics.insert(
                AUTO_CREATE_TOPIC.to_owned(),
                TopicConfig {
                    topic_name: AUTO_CREATE_TOPIC.to_owned(),
                    read_queue_nums: default_queue_nums,
                    write_queue_nums: default_queue_nums,
                    perm: PERM_INHERIT | PERM_READ | PERM_WRITE,
                    ..TopicConfig::default()
                },
            );
        }
        Ok(manager)
    }

    /// Sets the most topics the broker keeps (its system topics aside):
    /// beyond it, creating one fails.
    #[must_use]
    pub fn with_limit(mut self, max_topics: usize) -> Self {
        self.max_topics = max_topics;
        self
    }

    /// A topic's configuration.
    pub fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.topics.get(topic).map(|t| t.clone())
    }

    /// Creates or replaces a topic and persists the table. Returns whether
    /// anything changed.
    ///
    /// # Errors
    /// The table cannot be written, or a new topic would pass the limit
    /// (`QuotaExceeded`, naming it).
    pub fn put(&self, config: TopicConfig) -> std::io::Result<bool> {
        {
            // One check and insert at a time, so that concurrent creations
            // cannot pass the limit together.
            let _admit = self.admit.lock().unwrap_or_else(PoisonError::into_inner);
            let existing = self.get(&config.topic_name);
            if existing.as_ref() == Some(&config) {
                return Ok(false);
            }
            if existing.is_none() && !is_system_topic(&config.topic_name) {
                let user_topics = self
                    .topics
                    .iter()
                    .filter(|e| !is_system_topic(e.key()))
                    .count();
                if user_topics >= self.max_topics {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::QuotaExceeded,
                        format!(
                            "the broker has {user_topics} topics; topicMaxCount is {}: delete unused topics or raise the limit",
                            self.max_topics
                        ),
                    ));
                }
            }
            tracing::info!(topic = %config.topic_name, read = config.read_queue_nums, write = config.write_queue_nums, perm = config.perm, "topic created or updated");
            self.topics.insert(config.topic_name.clone(), config);
        }
        self.bump_and_persist()?;
        Ok(true)
    }

    /// Deletes a topic and persists the table (its data version changes,
    /// so the next registration drops it). Returns whether it existed.
    ///
    /// # Errors
    /// The table cannot be written; the topic is deleted all the same.
    pub fn delete(&self, topic: &str) -> std::io::Result<bool> {
        {
            let _admit = self.admit.lock().unwrap_or_else(PoisonError::into_inner);
            if self.topics.remove(topic).is_none() {
                return Ok(false);
            }
        }
        tracing::info!(%topic, "topic deleted");
        self.bump_and_persist()?;
        Ok(true)
    }

    /// Creates `SCHEDULE_TOPIC_XXXX`, one queue per delay level, or gives
    /// it more queues when there are more levels than it has.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn ensure_schedule_topic(&self, levels: i32) -> std::io::Result<()> {
        let queues = self
            .get(SCHEDULE_TOPIC)
            .map_or(0, |t| t.read_queue_nums.max(t.write_queue_nums));
        if queues >= levels {
            return Ok(());
        }
        self.put(TopicConfig {
            topic_name: SCHEDULE_TOPIC.to_owned(),
            read_queue_nums: levels,
            write_queue_nums: levels,
            perm: PERM_READ | PERM_WRITE,
            ..TopicConfig::default()
        })
        .map(|_| ())
    }

    /// Creates or updates a retry or dead-letter topic as a consumer's
    /// send-back (or heartbeat) needs it: `queues` queues, read and write.
    /// An existing topic is left as it is, except that a retry topic gets
    /// more queues when the group asks for more. Returns the topic and
    /// whether the table changed.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn ensure_group_topic(
        &self,
        topic: &str,
        queues: i32,
    ) -> std::io::Result<(TopicConfig, bool)> {
        if let Some(existing) = self.get(topic) {
            if existing.read_queue_nums >= queues && existing.write_queue_nums >= queues {
                return Ok((existing, false));
            }
        }
        let config = TopicConfig {
            topic_name: topic.to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: PERM_READ | PERM_WRITE,
            ..TopicConfig::default()
        };
        let changed = self.put(config.clone())?;
        Ok((config, changed))
    }

    /// Makes every queue of `topics` (name and how many queues the store
    /// holds messages in) readable: a topic this broker has no
    /// configuration for is created read-write with that many queues, and
    /// one with fewer readable queues gets that many (its writable queues
    /// and permission stay). A slave elected master before it copied a new
    /// topic's configuration, or a change of its queue count, still holds
    /// the messages. Returns the topics created or changed.
    ///
    /// # Errors
    /// The topic table cannot be written.
    pub fn adopt_queues(
        &self,
        topics: impl IntoIterator<Item = (String, i32)>,
    ) -> std::io::Result<Vec<String>> {
        let mut adopted = Vec::new();
        for (topic, queues) in topics {
            let config = match self.get(&topic) {
                Some(known) if known.read_queue_nums >= queues => continue,
                Some(known) => TopicConfig {
                    read_queue_nums: queues,
                    ..known
                },
                None => TopicConfig {
                    topic_name: topic.clone(),
                    read_queue_nums: queues,
                    write_queue_nums: queues,
                    perm: PERM_READ | PERM_WRITE,
                    ..TopicConfig::default()
                },
            };
            self.put(config)?;
            adopted.push(topic);
        }
        Ok(adopted)
    }

    /// The topic for a send, creating it from the template topic when it is
    /// missing and auto-creation allows it. Returns the config and whether it
    /// was just created.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn get_or_create_for_send(
        &self,
        topic: &str,
        default_topic: &str,
        requested_queues: i32,
        auto_create: bool,
    ) -> std::io::Result<Option<(TopicConfig, bool)>> {
        if let Some(existing) = self.get(topic) {
            return Ok(Some((existing, false)));
        }
        if !auto_create {
            return Ok(None);
        }
        let Some(template) = self.get(default_topic) else {
            return Ok(None);
        };
        if template.perm & PERM_INHERIT == 0 {
            return Ok(None);
        }
        let queues = requested_queues.clamp(1, template.write_queue_nums.max(1));
        let config = TopicConfig {
            topic_name: topic.to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: template.perm & !PERM_INHERIT,
            topic_sys_flag: template.topic_sys_flag,
            ..TopicConfig::default()
        };
        self.put(config.clone())?;
        Ok(Some((config, true)))
    }

    /// The table as registered with the name servers.
    pub fn wrapper(&self) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            topic_config_table: self
                .topics
                .iter()
                .map(|e| (e.key().clone(), e.value().clone()))
                .collect(),
            data_version: *self.version.lock().unwrap_or_else(PoisonError::into_inner),
            ..TopicConfigSerializeWrapper::default()
        }
    }

    /// Number of topics.
    pub fn len(&self) -> usize {
        self.topics.len()
    }

    /// Reports whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.topics.is_empty()
    }

    /// Counts a change already made to the table and returns once a file
    /// holding it is on disk. Changes made while one write runs share the
    /// next: each caller waits for the write lock, and returns at once when
    /// a write that started after its change already covered it.
    fn bump_and_persist(&self) -> std::io::Result<()> {
        let mine = {
            let mut v = self.version.lock().unwrap_or_else(PoisonError::into_inner);
            v.counter += 1;
            v.timestamp = message_model::now_ms();
            v.counter
        };
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        if self.persisted.load(Ordering::Acquire) >= mine {
            return Ok(());
        }
        // Every change counted up to `covers` was made to the table before
        // it was counted, so the table read after this holds it.
        let covers = self
            .version
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .counter;
        persist::write_atomically(&self.path, &body::to_json(&self.wrapper()))?;
        self.persisted.fetch_max(covers, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_queue_found_in_the_store_becomes_readable() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicManager::load(dir.path(), true, 8).unwrap();
        for (name, queues) in [("Known", 4), ("Grown", 2)] {
            topics
                .put(TopicConfig {
                    topic_name: name.into(),
                    read_queue_nums: queues,
                    write_queue_nums: queues,
                    perm: PERM_READ,
                    ..TopicConfig::default()
                })
                .unwrap();
        }
        let adopted = topics
            .adopt_queues([
                ("Known".to_owned(), 4),
                ("Grown".to_owned(), 4),
                ("Lost".to_owned(), 3),
            ])
            .unwrap();
        assert_eq!(adopted, ["Grown", "Lost"]);
        let known = topics.get("Known").unwrap();
        assert_eq!((known.read_queue_nums, known.perm), (4, PERM_READ));
        let grown = topics.get("Grown").unwrap();
        assert_eq!(
            (grown.read_queue_nums, grown.write_queue_nums, grown.perm),
            (4, 2, PERM_READ),
            "only its readable queues grow"
        );
        let lost = topics.get("Lost").unwrap();
        assert_eq!((lost.read_queue_nums, lost.write_queue_nums), (3, 3));
        assert_eq!(lost.perm, PERM_READ | PERM_WRITE);
        // Kept on disk like any other.
        let reloaded = TopicManager::load(dir.path(), true, 8).unwrap();
        assert!(reloaded.get("Lost").is_some());
    }

    #[test]
    fn topic_names_follow_rocketmq_rules() {
        assert!(validate_topic_name("Topic_A-1|%x").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("has space")
            .unwrap_err()
            .contains("' '"));
        assert!(validate_topic_name(&"t".repeat(128)).is_err());
        assert!(validate_topic_name(&format!("%RETRY%{}", "g".repeat(200))).is_ok());
    }

    #[test]
    fn auto_create_copies_the_template_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicManager::load(dir.path(), true, 8).unwrap();
        let (created, fresh) = topics
            .get_or_create_for_send("New", AUTO_CREATE_TOPIC, 4, true)
            .unwrap()
            .unwrap();
        assert!(fresh);
        assert_eq!(
            (
                created.read_queue_nums,
                created.write_queue_nums,
                created.perm
            ),
            (4, 4, 6)
        );
        let capped = topics
            .get_or_create_for_send("Big", AUTO_CREATE_TOPIC, 64, true)
            .unwrap()
            .unwrap();
        assert_eq!(capped.0.write_queue_nums, 8, "capped by the template");
        assert!(topics
            .get_or_create_for_send("Off", AUTO_CREATE_TOPIC, 4, false)
            .unwrap()
            .is_none());
        let reloaded = TopicManager::load(dir.path(), true, 8).unwrap();
        assert_eq!(reloaded.get("New").unwrap().write_queue_nums, 4);
        assert!(reloaded.wrapper().data_version.counter >= 2);
    }

    #[test]
    fn a_deleted_topic_leaves_the_file_and_the_version_changes() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicManager::load(dir.path(), true, 8).unwrap();
        topics
            .get_or_create_for_send("Gone", AUTO_CREATE_TOPIC, 4, true)
            .unwrap();
        let before = topics.wrapper().data_version;
        assert!(topics.delete("Gone").unwrap());
        assert!(!topics.delete("Gone").unwrap(), "already gone");
        let after = topics.wrapper().data_version;
        assert!(after.counter > before.counter);
        assert!(topics.get("Gone").is_none());
        let reloaded = TopicManager::load(dir.path(), true, 8).unwrap();
        assert!(reloaded.get("Gone").is_none());
        assert_eq!(reloaded.wrapper().data_version.counter, after.counter);
    }

    #[test]
    fn system_topics_are_rocketmqs() {
        for topic in [
            "TBW102",
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "rmq_sys_wheel_timer",
            "rmq_sys_anything",
            "OFFSET_MOVED_EVENT",
        ] {
            assert!(is_rocketmq_system_topic(topic), "{topic}");
        }
        for topic in ["T", "%RETRY%G", "%DLQ%G", "RMQ_SYS_OTHER", "tbw102"] {
            assert!(!is_rocketmq_system_topic(topic), "{topic}");
        }
    }

    #[test]
    fn topics_past_the_limit_are_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let topics = TopicManager::load(dir.path(), true, 8)
            .unwrap()
            .with_limit(2);
        // TBW102 does not count: two topics of the broker's users fit.
        topics.ensure_schedule_topic(18).unwrap();
        for topic in ["A", "B"] {
            assert!(topics
                .get_or_create_for_send(topic, AUTO_CREATE_TOPIC, 4, true)
                .is_ok());
        }
        let err = topics
            .get_or_create_for_send("C", AUTO_CREATE_TOPIC, 4, true)
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::QuotaExceeded);
        assert!(
            err.to_string()
                .contains("the broker has 2 topics; topicMaxCount is 2"),
            "{err}"
        );
        // System topics and updates of existing ones still go through.
        topics.ensure_schedule_topic(18).unwrap();
        assert!(topics.ensure_group_topic("A", 8).is_ok());
    }

    #[test]
    fn concurrent_creations_stop_exactly_at_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let topics = std::sync::Arc::new(
            TopicManager::load(dir.path(), true, 8)
                .unwrap()
                .with_limit(20),
        );
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let topics = std::sync::Arc::clone(&topics);
                std::thread::spawn(move || {
                    (0..15)
                        .filter(|i| {
                            topics
                                .get_or_create_for_send(
                                    &format!("T{t}-{i}"),
                                    AUTO_CREATE_TOPIC,
                                    1,
                                    true,
                                )
                                .is_ok()
                        })
                        .count()
                })
            })
            .collect();
        let created: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(created, 20);
        let reloaded = TopicManager::load(dir.path(), true, 8).unwrap();
        assert_eq!(
            reloaded.wrapper().topic_config_table.len(),
            21,
            "20 and TBW102"
        );
    }
}
