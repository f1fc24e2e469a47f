//! Subscription groups: each consumer group's broker-side settings (retry
//! queues, redeliveries before the dead-letter topic, whether it may
//! consume), persisted to `<storePathRootDir>/config/subscriptionGroup.json`
//! in RocketMQ's layout.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    sync::{Mutex, PoisonError},
};

use dashmap::DashMap;
use remoting_protocol::body::{
    self, DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper,
};

use crate::persist;

/// Longest group name.
pub const MAX_GROUP_LEN: usize = 120;

/// Groups every RocketMQ broker has (its tools and system consumers).
pub const SYSTEM_GROUPS: &[&str] = &[
    "TOOLS_CONSUMER",
    "FILTERSRV_CONSUMER",
    "SELF_TEST_C_GROUP",
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_RMQ_SYS_TRANS",
];

/// Why a group name is refused, in RocketMQ's words.
pub fn validate_group_name(group: &str) -> Result<(), String> {
    if group.trim().is_empty() {
        return Err("The specified group is blank.".into());
    }
    if !group
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '%' | '|' | '_' | '-'))
    {
        return Err(format!(
            "The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if group.len() > MAX_GROUP_LEN {
        return Err(format!(
            "The specified group: {group}, is longer than group max length: {MAX_GROUP_LEN}"
        ));
    }
    Ok(())
}

/// The broker's subscription groups.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    groups: DashMap<String, SubscriptionGroupConfig>,
    /// Kept as loaded and written back: RocketMQ's per-group topic bans.
    forbidden: Mutex<BTreeMap<String, BTreeMap<String, i32>>>,
    version: Mutex<DataVersion>,
    /// Serialises writes of the file, so the last change is what is on disk.
    write: Mutex<()>,
    path: PathBuf,
}

impl SubscriptionGroupManager {
    /// Loads `subscriptionGroup.json` from `config_dir` (missing is fine) and
    /// adds RocketMQ's system groups.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(config_dir: &Path) -> std::io::Result<Self> {
        let path = config_dir.join("subscriptionGroup.json");
        let wrapper: SubscriptionGroupWrapper = persist::read_json(&path)?;
        let groups: DashMap<String, SubscriptionGroupConfig> =
            wrapper.subscription_group_table.into_iter().collect();
        for name in SYSTEM_GROUPS {
            groups
                .entry((*name).to_owned())
                .or_insert_with(|| SubscriptionGroupConfig::named(name));
        }
        Ok(Self {
            groups,
            forbidden: Mutex::new(wrapper.forbidden_table),
            version: Mutex::new(wrapper.data_version),
            write: Mutex::new(()),
            path,
        })
    }

    /// A group's settings.
    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.groups.get(group).map(|g| g.clone())
    }

    /// A group's settings, created with RocketMQ's defaults when it is
    /// missing and `auto_create` allows it (system groups always). `None`
    /// when it is missing and may not be created, or its name is invalid.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn find_or_create(
        &self,
        group: &str,
        auto_create: bool,
    ) -> std::io::Result<Option<SubscriptionGroupConfig>> {
        if let Some(existing) = self.get(group) {
            return Ok(Some(existing));
        }
        if !(auto_create || SYSTEM_GROUPS.contains(&group)) || validate_group_name(group).is_err() {
            return Ok(None);
        }
        let created = self
            .groups
            .entry(group.to_owned())
            .or_insert_with(|| SubscriptionGroupConfig::named(group))
            .clone();
        tracing::info!(group, "subscription group created with default settings");
        self.bump_and_persist()?;
        Ok(Some(created))
    }

    /// Whether a group may consume (`consumeEnable`) and consume by
    /// broadcast (`consumeBroadcastEnable`), creating the group as
    /// [`SubscriptionGroupManager::find_or_create`] does; `None` when it
    /// does not exist and may not be created.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn consume_permissions(
        &self,
        group: &str,
        auto_create: bool,
    ) -> std::io::Result<Option<ConsumePermissions>> {
        let of = |g: &SubscriptionGroupConfig| ConsumePermissions {
            consume: g.consume_enable,
            broadcast: g.consume_broadcast_enable,
        };
        if let Some(g) = self.groups.get(group) {
            return Ok(Some(of(&g)));
        }
        Ok(self.find_or_create(group, auto_create)?.as_ref().map(of))
    }

    /// Creates or replaces a group's settings (its attributes are merged
    /// into the old ones) and persists the table.
    ///
    /// # Errors
    /// The name is invalid (RocketMQ's remark), or the table cannot be written.
    pub fn put(&self, mut config: SubscriptionGroupConfig) -> Result<(), PutGroupError> {
        validate_group_name(&config.group_name).map_err(PutGroupError::Invalid)?;
        if let Some(old) = self.get(&config.group_name) {
            let mut attributes = old.attributes;
            attributes.append(&mut config.attributes);
            config.attributes = attributes;
        }
        tracing::info!(group = %config.group_name, retry_max_times = config.retry_max_times, retry_queue_nums = config.retry_queue_nums, consume_enable = config.consume_enable, "subscription group created or updated");
        self.groups.insert(config.group_name.clone(), config);
        self.bump_and_persist().map_err(PutGroupError::Io)
    }

    /// Removes a group's settings; returns whether it existed.
    ///
    /// # Errors
    /// The table cannot be written.
    pub fn delete(&self, group: &str) -> std::io::Result<bool> {
        let removed = self.groups.remove(group).is_some();
        let unbanned = self
            .forbidden
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(group)
            .is_some();
        if removed || unbanned {
            tracing::info!(group, "subscription group deleted");
            self.bump_and_persist()?;
        }
        Ok(removed)
    }

    /// The table, as `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` answers it.
    pub fn wrapper(&self) -> SubscriptionGroupWrapper {
        SubscriptionGroupWrapper {
            data_version: *self.version.lock().unwrap_or_else(PoisonError::into_inner),
            forbidden_table: self
                .forbidden
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone(),
            subscription_group_table: self
                .groups
                .iter()
                .map(|e| (e.key().clone(), e.value().clone()))
                .collect(),
        }
    }

    fn bump_and_persist(&self) -> std::io::Result<()> {
        let _write = self.write.lock().unwrap_or_else(PoisonError::into_inner);
        {
            let mut v = self.version.lock().unwrap_or_else(PoisonError::into_inner);
            v.counter += 1;
            v.timestamp = message_model::now_ms();
        }
        persist::write_atomically(&self.path, &body::to_json(&self.wrapper()))
    }
}

/// What a group may do when it pulls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumePermissions {
    /// `consumeEnable`.
    pub consume: bool,
    /// `consumeBroadcastEnable`.
    pub broadcast: bool,
}

/// Why a group's settings were not stored.
#[derive(Debug, thiserror::Error)]
pub enum PutGroupError {
    /// The group name is not valid.
    #[error("{0}")]
    Invalid(String),
    /// The table could not be written.
    #[error("cannot save subscription groups: {0}")]
    Io(std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_follow_rocketmq_rules() {
        assert!(validate_group_name("CID_a-b|%c").is_ok());
        assert_eq!(
            validate_group_name(" ").unwrap_err(),
            "The specified group is blank."
        );
        assert!(validate_group_name("a b")
            .unwrap_err()
            .contains("illegal characters"));
        assert!(validate_group_name(&"g".repeat(121))
            .unwrap_err()
            .contains("max length: 120"));
    }

    #[test]
    fn groups_are_created_when_allowed_and_persist() {
        let dir = tempfile::tempdir().unwrap();
        let groups = SubscriptionGroupManager::load(dir.path()).unwrap();
        assert!(
            groups.get("TOOLS_CONSUMER").is_some(),
            "system groups exist"
        );
        assert_eq!(groups.find_or_create("G", false).unwrap(), None);
        assert_eq!(groups.find_or_create("bad name", true).unwrap(), None);
        assert_eq!(
            groups
                .find_or_create("G", true)
                .unwrap()
                .unwrap()
                .retry_max_times,
            16
        );
        groups
            .put(SubscriptionGroupConfig {
                retry_max_times: 2,
                attributes: [("a".to_owned(), "1".to_owned())].into(),
                ..SubscriptionGroupConfig::named("H")
            })
            .unwrap();
        groups
            .put(SubscriptionGroupConfig {
                retry_max_times: 3,
                attributes: [("b".to_owned(), "2".to_owned())].into(),
                ..SubscriptionGroupConfig::named("H")
            })
            .unwrap();
        assert!(matches!(
            groups.put(SubscriptionGroupConfig::named("")),
            Err(PutGroupError::Invalid(_))
        ));
        let again = SubscriptionGroupManager::load(dir.path()).unwrap();
        let h = again.get("H").unwrap();
        assert_eq!(h.retry_max_times, 3);
        assert_eq!(h.attributes.len(), 2, "attributes are merged");
        assert!(again.get("G").is_some());
        assert!(again.wrapper().data_version.counter >= 3);
        assert!(again.delete("H").unwrap());
        assert!(!again.delete("H").unwrap());
        assert!(SubscriptionGroupManager::load(dir.path())
            .unwrap()
            .get("H")
            .is_none());
    }
}
