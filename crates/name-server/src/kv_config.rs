//! The name server's key-value configuration: string items grouped by
//! namespace, set and read by admin tools (`PUT_KV_CONFIG`, `GET_KV_CONFIG`,
//! `DELETE_KV_CONFIG`, `GET_KVLIST_BY_NAMESPACE`). RocketMQ's
//! `KVConfigManager`.
//!
//! With a file (`kvConfigPath`) the table is loaded at start and the whole
//! file is replaced after every change, in RocketMQ's `kvConfig.json`
//! format (`{"configTable":{"<namespace>":{"<key>":"<value>"}}}`), so a file
//! from a RocketMQ name server loads as it is. Without one the table lives
//! in memory and starts empty.

use std::{
    collections::BTreeMap,
    fs,
    io::Write,
    path::{Path, PathBuf},
    sync::{PoisonError, RwLock},
};

use remoting_protocol::body::KvTable;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Namespace of the order-topic configuration a broker receives in answer
/// to its registration (RocketMQ's `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

type Table = BTreeMap<String, BTreeMap<String, String>>;

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct FileBody {
    #[serde(default)]
    config_table: Table,
}

/// The key-value configuration file could not be read or written.
#[derive(Debug, Error)]
pub enum KvConfigError {
    /// The file exists but could not be read.
    #[error("cannot read the kv config file {path} (kvConfigPath): {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a kv config table.
    #[error(
        "the kv config file {path} (kvConfigPath) is not a kv config table \
         ({{\"configTable\":{{namespace:{{key:value}}}}}}): {source}"
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
    /// The file could not be replaced; the change was not made.
    #[error(
        "cannot write the kv config file {path} (kvConfigPath): {source}; the change was not made"
    )]
    Write {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// Key-value items per namespace. Every method takes `&self` and is safe to
/// call from many threads.
#[derive(Debug, Default)]
pub struct KvConfig {
    table: RwLock<Table>,
    /// Where the table is kept; `None` keeps it in memory only.
    path: Option<PathBuf>,
}

impl KvConfig {
    /// An empty configuration kept in memory only.
    pub fn new() -> Self {
        Self::default()
    }

    /// The configuration kept in `path`: loaded from it when it exists
    /// (a missing file is an empty table), written back after every change.
    ///
    /// # Errors
    /// [`KvConfigError`] when the file exists but cannot be read or parsed.
    pub fn open(path: PathBuf) -> Result<Self, KvConfigError> {
        let table = match fs::read(&path) {
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Table::new(),
            Ok(bytes) => {
                serde_json::from_slice::<FileBody>(&bytes)
                    .map_err(|source| KvConfigError::Parse {
                        path: path.clone(),
                        source,
                    })?
                    .config_table
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table::new(),
            Err(source) => return Err(KvConfigError::Read { path, source }),
        };
        let items: usize = table.values().map(BTreeMap::len).sum();
        tracing::info!(path = %path.display(), namespaces = table.len(), items, "kv config loaded");
        Ok(Self {
            table: RwLock::new(table),
            path: Some(path),
        })
    }

    /// Sets `key` in `namespace` to `value`, creating the namespace when
    /// needed; returns the value it replaces.
    ///
    /// # Errors
    /// [`KvConfigError::Write`] when the file cannot be replaced; the table
    /// is then left as it was.
    pub fn put(
        &self,
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<String>, KvConfigError> {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let created = !table.contains_key(namespace);
        let items = table.entry(namespace.to_owned()).or_default();
        let previous = items.insert(key.to_owned(), value.to_owned());
        if let Err(e) = self.save(&table) {
            let items = table.entry(namespace.to_owned()).or_default();
            match &previous {
                Some(old) => items.insert(key.to_owned(), old.clone()),
                None => items.remove(key),
            };
            if created {
                table.remove(namespace);
            }
            return Err(e);
        }
        tracing::info!(
            namespace,
            key,
            value,
            replaced = previous.is_some(),
            "kv config item set"
        );
        Ok(previous)
    }

    /// The value of `key` in `namespace`, if set.
    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace)?.get(key).cloned()
    }

    /// Removes `key` from `namespace` and returns its value. The namespace
    /// stays known, possibly empty, as in RocketMQ.
    ///
    /// # Errors
    /// [`KvConfigError::Write`] when the file cannot be replaced; the item
    /// is then kept.
    pub fn delete(&self, namespace: &str, key: &str) -> Result<Option<String>, KvConfigError> {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let Some(removed) = table.get_mut(namespace).and_then(|items| items.remove(key)) else {
            return Ok(None);
        };
        if let Err(e) = self.save(&table) {
            if let Some(items) = table.get_mut(namespace) {
                items.insert(key.to_owned(), removed);
            }
            return Err(e);
        }
        tracing::info!(namespace, key, "kv config item deleted");
        Ok(Some(removed))
    }

    /// Every item of `namespace`; `None` when the namespace was never set.
    pub fn namespace(&self, namespace: &str) -> Option<KvTable> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace).map(|items| KvTable {
            table: items.clone(),
        })
    }

    /// Replaces the file with `table` (called under the write lock, so one
    /// temporary name is enough).
    fn save(&self, table: &Table) -> Result<(), KvConfigError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Borrowed<'a> {
            config_table: &'a Table,
        }
        let bytes = serde_json::to_vec_pretty(&Borrowed {
            config_table: table,
        })
        .unwrap_or_default();
        replace(path, &bytes).map_err(|source| KvConfigError::Write {
            path: path.clone(),
            source,
        })
    }
}

/// Writes a temporary file next to `path`, syncs it and renames it over
/// `path`, so that a crash leaves the old or the new table, never half.
fn replace(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    fs::create_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fs::File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_set_read_replaced_and_deleted_per_namespace() {
        let kv = KvConfig::new();
        assert_eq!(kv.get("ns", "k"), None);
        assert_eq!(kv.namespace("ns"), None);
        assert_eq!(kv.put("ns", "k", "v1").unwrap(), None);
        assert_eq!(kv.put("ns", "k", "v2").unwrap().as_deref(), Some("v1"));
        kv.put("other", "k", "x").unwrap();
        assert_eq!(kv.get("ns", "k").as_deref(), Some("v2"));
        assert_eq!(kv.get("other", "k").as_deref(), Some("x"));
        assert_eq!(kv.get("ns", "missing"), None);

        assert_eq!(kv.delete("ns", "k").unwrap().as_deref(), Some("v2"));
        assert_eq!(kv.delete("ns", "k").unwrap(), None);
        assert_eq!(kv.delete("never", "k").unwrap(), None);
        assert_eq!(kv.get("ns", "k"), None);
        // An emptied namespace is still known.
        assert_eq!(kv.namespace("ns"), Some(KvTable::default()));
        assert_eq!(kv.namespace("never"), None);
    }

    #[test]
    fn a_file_keeps_the_items_across_a_restart_in_rocketmq_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("namesrv").join("kvConfig.json");
        let kv = KvConfig::open(path.clone()).unwrap();
        assert_eq!(kv.namespace("ORDER_TOPIC_CONFIG"), None);
        kv.put("ORDER_TOPIC_CONFIG", "Orders", "broker-a:8")
            .unwrap();
        kv.put("ns", "gone", "soon").unwrap();
        kv.delete("ns", "gone").unwrap();
        drop(kv);

        let written: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(
            written,
            serde_json::json!({"configTable": {"ORDER_TOPIC_CONFIG": {"Orders": "broker-a:8"}, "ns": {}}})
        );
        let again = KvConfig::open(path.clone()).unwrap();
        assert_eq!(
            again.get("ORDER_TOPIC_CONFIG", "Orders").as_deref(),
            Some("broker-a:8")
        );
        assert_eq!(again.namespace("ns"), Some(KvTable::default()));
        assert!(!path.with_extension("json.tmp").exists());
    }

    #[test]
    fn a_file_that_is_not_a_table_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kvConfig.json");
        fs::write(&path, b"{\"configTable\": [1, 2]}").unwrap();
        let err = KvConfig::open(path.clone()).unwrap_err();
        assert!(matches!(err, KvConfigError::Parse { .. }), "{err:?}");
        let text = err.to_string();
        assert!(
            text.contains("kvConfigPath") && text.contains(&path.display().to_string()),
            "{text}"
        );
        // An empty file (a crash before the first write) is an empty table.
        fs::write(&path, b"").unwrap();
        assert_eq!(KvConfig::open(path).unwrap().namespace("ns"), None);
    }

    #[test]
    fn a_failed_write_leaves_the_table_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        // The file's directory is a regular file: no write can succeed.
        let blocker = dir.path().join("not-a-dir");
        fs::write(&blocker, b"").unwrap();
        let kv = KvConfig {
            path: Some(blocker.join("kvConfig.json")),
            ..KvConfig::default()
        };
        let err = kv.put("ns", "k", "v").unwrap_err();
        assert!(matches!(err, KvConfigError::Write { .. }), "{err:?}");
        assert_eq!(kv.namespace("ns"), None);
        kv.table
            .write()
            .unwrap()
            .entry("ns".into())
            .or_default()
            .insert("k".into(), "v".into());
        assert!(kv.delete("ns", "k").is_err());
        assert_eq!(kv.get("ns", "k").as_deref(), Some("v"));
        assert!(kv.put("ns", "k", "w").is_err());
        assert_eq!(kv.get("ns", "k").as_deref(), Some("v"));
    }
}
