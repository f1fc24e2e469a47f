//! Consumer offsets: `topic@group` to queue id to offset, persisted to
//! `<storePathRootDir>/config/consumerOffset.json` in RocketMQ's layout
//! (with its unquoted integer keys).
//!
//! An operator's reset (`INVOKE_BROKER_TO_RESET_OFFSET`) writes the new
//! offset into the table and also remembers it per queue until the group's
//! next pull of that queue takes it ([`OffsetManager::take_reset`]); until
//! then the group's commits for that queue are ignored
//! ([`OffsetManager::has_reset`]). Pending resets live in memory only.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use dashmap::DashMap;
use serde::Deserialize;

use crate::persist;

/// Committed consumer offsets.
#[derive(Debug)]
pub struct OffsetManager {
    table: DashMap<String, BTreeMap<i32, i64>>,
    path: PathBuf,
    dirty: AtomicBool,
    /// When each group last queried or committed an offset (or was seen
    /// online); groups not in it count from `loaded`.
    last_seen: DashMap<String, Instant>,
    loaded: Instant,
    /// Resets not yet taken by a pull: `topic@group` to queue id to offset.
    resets: DashMap<String, BTreeMap<i32, i64>>,
    /// How many queues `resets` holds, changed under the lock of the
    /// entry it counts: a pull or a commit looks at it before any lookup.
    pending_resets: AtomicUsize,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct OffsetFile {
    offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl OffsetManager {
    /// Loads the offsets from `config_dir` (missing is fine).
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed.
    pub fn load(config_dir: &Path) -> std::io::Result<Self> {
        let path = config_dir.join("consumerOffset.json");
        let file: OffsetFile = persist::read_json(&path)?;
        Ok(Self {
            table: file.offset_table.into_iter().collect(),
            path,
            dirty: AtomicBool::new(false),
            last_seen: DashMap::new(),
            loaded: Instant::now(),
            resets: DashMap::new(),
            pending_resets: AtomicUsize::new(0),
        })
    }

    /// The committed offset of a group on a queue.
    pub fn query(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.touch(group, Instant::now());
        self.table.get(&key(topic, group))?.get(&queue_id).copied()
    }

    /// The committed offset of a group on a queue, without counting it as
    /// the group being seen (an operator's look).
    pub fn peek(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.table.get(&key(topic, group))?.get(&queue_id).copied()
    }

    /// The topics a group has committed offsets on.
    pub fn topics_of(&self, group: &str) -> BTreeSet<String> {
        self.table
            .iter()
            .filter_map(|e| match e.key().split_once('@') {
                Some((topic, g)) if g == group => Some(topic.to_owned()),
                _ => None,
            })
            .collect()
    }

    /// The groups with committed offsets on a topic.
    pub fn groups_of(&self, topic: &str) -> BTreeSet<String> {
        self.table
            .iter()
            .filter_map(|e| match e.key().split_once('@') {
                Some((t, group)) if t == topic => Some(group.to_owned()),
                _ => None,
            })
            .collect()
    }

    /// Forgets every group's offsets on a topic; returns how many groups
    /// had some.
    pub fn remove_topic(&self, topic: &str) -> usize {
        let before = self.table.len();
        let of_topic = |k: &str| k.split_once('@').is_some_and(|(t, _)| t == topic);
        self.table.retain(|k, _| !of_topic(k));
        self.drop_resets(of_topic);
        let removed = before - self.table.len();
        if removed > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        removed
    }

    /// The table as `consumerOffset.json` holds it.
    pub fn encode(&self) -> String {
        self.to_json()
    }

    /// Notes that `group` was seen at `now` (a heartbeat, a pull, a query).
    pub fn touch(&self, group: &str, now: Instant) {
        match self.last_seen.get_mut(group) {
            Some(mut seen) => *seen = now,
            None => {
                self.last_seen.insert(group.to_owned(), now);
            }
        }
    }

    /// Forgets the offsets of every group not seen for `ttl` at `now` and
    /// not `online`; returns each forgotten group with its topic count.
    pub fn expire(
        &self,
        now: Instant,
        ttl: Duration,
        online: impl Fn(&str) -> bool,
    ) -> Vec<(String, usize)> {
        let mut forgotten: BTreeMap<String, usize> = BTreeMap::new();
        self.table.retain(|k, _| {
            let Some((_, group)) = k.split_once('@') else {
                return true;
            };
            if online(group) {
                return true;
            }
            let seen = self.last_seen.get(group).map_or(self.loaded, |t| *t);
            if now.saturating_duration_since(seen) < ttl {
                return true;
            }
            *forgotten.entry(group.to_owned()).or_default() += 1;
            false
        });
        for group in forgotten.keys() {
            self.last_seen.remove(group);
        }
        self.drop_resets(|k| {
            k.split_once('@')
                .is_some_and(|(_, g)| forgotten.contains_key(g))
        });
        if !forgotten.is_empty() {
            self.dirty.store(true, Ordering::Release);
        }
        forgotten.into_iter().collect()
    }

    /// Resets a group's offset on a queue: writes it to the table and keeps
    /// it until the group's next pull of the queue takes it.
    pub fn assign_reset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        let key = key(topic, group);
        {
            let mut pending = self.resets.entry(key.clone()).or_default();
            if pending.insert(queue_id, offset).is_none() {
                self.pending_resets.fetch_add(1, Ordering::AcqRel);
            }
        }
        self.table.entry(key).or_default().insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// Reports whether a reset of the group's offset on the queue waits for
    /// its next pull (commits of the queue are ignored meanwhile).
    pub fn has_reset(&self, group: &str, topic: &str, queue_id: i32) -> bool {
        if self.pending_resets.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.resets
            .get(&key(topic, group))
            .is_some_and(|q| q.contains_key(&queue_id))
    }

    /// Takes the reset offset of the group on the queue, if one waits. With
    /// none pending anywhere this is one atomic load.
    #[inline]
    pub fn take_reset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        if self.pending_resets.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.take_reset_slow(group, topic, queue_id)
    }

    #[cold]
    fn take_reset_slow(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        let key = key(topic, group);
        let mut pending = self.resets.get_mut(&key)?;
        let offset = pending.remove(&queue_id)?;
        self.pending_resets.fetch_sub(1, Ordering::AcqRel);
        let empty = pending.is_empty();
        drop(pending);
        if empty {
            self.resets.remove_if(&key, |_, q| q.is_empty());
        }
        Some(offset)
    }

    /// How many queues have a reset waiting for their next pull.
    pub fn pending_resets(&self) -> usize {
        self.pending_resets.load(Ordering::Acquire)
    }

    /// Forgets the pending resets whose `topic@group` key `drop` selects.
    fn drop_resets(&self, drop: impl Fn(&str) -> bool) {
        if self.pending_resets.load(Ordering::Acquire) == 0 {
            return;
        }
        self.resets.retain(|k, queues| {
            if drop(k) {
                self.pending_resets
                    .fetch_sub(queues.len(), Ordering::AcqRel);
                false
            } else {
                true
            }
        });
    }

    /// Commits an offset.
    pub fn commit(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.touch(group, Instant::now());
        self.table
            .entry(key(topic, group))
            .or_default()
            .insert(queue_id, offset);
        self.dirty.store(true, Ordering::Release);
    }

    /// Takes every offset of a `consumerOffset.json` body (a slave copying
    /// its master's); returns how many queue offsets changed.
    ///
    /// # Errors
    /// The body does not parse.
    pub fn copy_from(&self, body: &[u8]) -> Result<usize, String> {
        // fastjson's form, with bare integer keys, as `encode` writes it.
        let file: OffsetFile = remoting_protocol::body::from_json(body)
            .map_err(|e| format!("the master's consumer offsets do not parse: {e}"))?;
        let mut changed = 0;
        for (key, queues) in file.offset_table {
            let mut entry = self.table.entry(key).or_default();
            for (queue_id, offset) in queues {
                if entry.insert(queue_id, offset) != Some(offset) {
                    changed += 1;
                }
            }
        }
        if changed > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        Ok(changed)
    }

    /// Every committed offset, as `(topic, group, queue id, offset)`.
    pub fn entries(&self) -> Vec<(String, String, i32, i64)> {
        let mut out = Vec::new();
        for e in &self.table {
            let Some((topic, group)) = e.key().split_once('@') else {
                continue;
            };
            for (&queue_id, &offset) in e.value() {
                out.push((topic.to_owned(), group.to_owned(), queue_id, offset));
            }
        }
        out
    }

    /// Forgets every offset of a group; returns how many topics it had.
    pub fn remove_group(&self, group: &str) -> usize {
        let suffix = format!("@{group}");
        let before = self.table.len();
        self.table.retain(|k, _| !k.ends_with(&suffix));
        self.drop_resets(|k| k.ends_with(&suffix));
        let removed = before - self.table.len();
        if removed > 0 {
            self.dirty.store(true, Ordering::Release);
        }
        removed
    }

    /// Writes the table if it changed since the last write.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn persist(&self) -> std::io::Result<()> {
        if !self.dirty.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        let result = persist::write_atomically(&self.path, self.to_json().as_bytes());
        if result.is_err() {
            self.dirty.store(true, Ordering::Release);
        }
        result
    }

    /// RocketMQ's file content: `{"offsetTable":{"T@G":{0:12,1:40}}}`.
    fn to_json(&self) -> String {
        let mut entries: Vec<(String, BTreeMap<i32, i64>)> = self
            .table
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect();
        entries.sort();
        let tables: Vec<String> = entries
            .iter()
            .map(|(k, queues)| {
                let inner: Vec<String> = queues.iter().map(|(q, o)| format!("{q}:{o}")).collect();
                format!(
                    "{}:{{{}}}",
                    serde_json::Value::String(k.clone()),
                    inner.join(",")
                )
            })
            .collect();
        format!("{{\"offsetTable\":{{{}}}}}", tables.join(","))
    }
}

fn key(topic: &str, group: &str) -> String {
    format!("{topic}@{group}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_persist_in_rocketmq_layout_and_reload() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = OffsetManager::load(dir.path()).unwrap();
        assert_eq!(offsets.query("G", "T", 0), None);
        assert_eq!(offsets.encode(), r#"{"offsetTable":{}}"#);
        offsets.commit("G", "T", 0, 12);
        offsets.commit("G", "T", 1, 40);
        offsets.commit("H", "U", 0, 1);
        assert_eq!(offsets.peek("G", "T", 1), Some(40));
        assert_eq!(
            offsets.topics_of("G").into_iter().collect::<Vec<_>>(),
            ["T"]
        );
        assert_eq!(
            offsets.groups_of("U").into_iter().collect::<Vec<_>>(),
            ["H"]
        );
        assert_eq!(offsets.remove_group("H"), 1);
        offsets.persist().unwrap();
        let text = std::fs::read_to_string(dir.path().join("consumerOffset.json")).unwrap();
        assert_eq!(text, r#"{"offsetTable":{"T@G":{0:12,1:40}}}"#);
        let again = OffsetManager::load(dir.path()).unwrap();
        assert_eq!(again.query("G", "T", 1), Some(40));
        again.commit("GG", "T", 0, 1);
        assert_eq!(again.remove_group("G"), 1);
        assert_eq!(again.query("G", "T", 1), None);
        assert_eq!(
            again.query("GG", "T", 0),
            Some(1),
            "a group whose name ends alike stays"
        );
    }

    #[test]
    fn a_reset_is_written_and_waits_for_one_pull() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = OffsetManager::load(dir.path()).unwrap();
        offsets.commit("G", "T", 0, 90);
        assert_eq!(offsets.take_reset("G", "T", 0), None);
        offsets.assign_reset("G", "T", 0, 40);
        offsets.assign_reset("G", "T", 0, 41);
        offsets.assign_reset("G", "T", 1, 5);
        assert_eq!(
            offsets.pending_resets(),
            2,
            "a second reset replaces the first"
        );
        assert_eq!(offsets.peek("G", "T", 0), Some(41));
        assert!(offsets.has_reset("G", "T", 0));
        assert!(!offsets.has_reset("G", "T", 2));
        assert!(!offsets.has_reset("H", "T", 0));
        assert_eq!(offsets.take_reset("H", "T", 0), None);
        assert_eq!(offsets.take_reset("G", "T", 0), Some(41));
        assert_eq!(offsets.take_reset("G", "T", 0), None, "taken once");
        assert!(!offsets.has_reset("G", "T", 0));
        assert_eq!(offsets.pending_resets(), 1);
        offsets.assign_reset("G", "U", 0, 1);
        offsets.assign_reset("GG", "T", 0, 1);
        assert_eq!(offsets.remove_topic("U"), 1);
        assert_eq!(offsets.pending_resets(), 2);
        assert_eq!(offsets.remove_group("G"), 1);
        assert_eq!(offsets.pending_resets(), 1, "GG's reset stays");
        assert!(offsets.has_reset("GG", "T", 0));
        offsets.persist().unwrap();
        let text = std::fs::read_to_string(dir.path().join("consumerOffset.json")).unwrap();
        assert_eq!(text, r#"{"offsetTable":{"T@GG":{0:1}}}"#);
    }

    #[test]
    fn offsets_of_groups_not_seen_for_the_ttl_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        let offsets = OffsetManager::load(dir.path()).unwrap();
        offsets.commit("Old", "T", 0, 1);
        offsets.commit("Old", "U", 0, 1);
        offsets.commit("Online", "T", 0, 2);
        offsets.commit("Recent", "T", 0, 3);
        let ttl = Duration::from_secs(3600);
        let later = Instant::now() + ttl + Duration::from_secs(1);
        offsets.touch("Recent", later - Duration::from_secs(10));
        let forgotten = offsets.expire(later, ttl, |g| g == "Online");
        assert_eq!(forgotten, [("Old".to_owned(), 2)]);
        assert_eq!(offsets.query("Old", "T", 0), None);
        assert_eq!(offsets.query("Online", "T", 0), Some(2));
        assert_eq!(offsets.query("Recent", "T", 0), Some(3));
        offsets.persist().unwrap();
        let reloaded = OffsetManager::load(dir.path()).unwrap();
        assert_eq!(reloaded.entries().len(), 2);
        // Nothing is forgotten within the ttl of a load.
        assert!(reloaded.expire(Instant::now(), ttl, |_| false).is_empty());
    }
}
