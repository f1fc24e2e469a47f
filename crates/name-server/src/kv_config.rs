//! The name server's key-value configuration: string items grouped by
//! namespace, set and read by admin tools (`PUT_KV_CONFIG`, `GET_KV_CONFIG`,
//! `DELETE_KV_CONFIG`, `GET_KVLIST_BY_NAMESPACE`). RocketMQ's
//! `KVConfigManager`.
//!
//! # Differences from RocketMQ
//! - The table lives in memory only and starts empty: the name server has
//!   no data directory, so there is no `kvConfig.json` to load or persist,
//!   and items are lost when the process stops.

use std::{
    collections::BTreeMap,
    sync::{PoisonError, RwLock},
};

use remoting_protocol::body::KvTable;

/// Namespace of the order-topic configuration a broker receives in answer
/// to its registration (RocketMQ's `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// Key-value items per namespace. Every method takes `&self` and is safe to
/// call from many threads.
#[derive(Debug, Default)]
pub struct KvConfig {
    table: RwLock<BTreeMap<String, BTreeMap<String, String>>>,
}

impl KvConfig {
    /// An empty configuration.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `key` in `namespace` to `value`, creating the namespace when
    /// needed; returns the value it replaces.
    pub fn put(&self, namespace: &str, key: &str, value: &str) -> Option<String> {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let previous = table
            .entry(namespace.to_owned())
            .or_default()
            .insert(key.to_owned(), value.to_owned());
        tracing::info!(
            namespace,
            key,
            value,
            replaced = previous.is_some(),
            "kv config item set"
        );
        previous
    }

    /// The value of `key` in `namespace`, if set.
    pub fn get(&self, namespace: &str, key: &str) -> Option<String> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace)?.get(key).cloned()
    }

    /// Removes `key` from `namespace` and returns its value. The namespace
    /// stays known, possibly empty, as in RocketMQ.
    pub fn delete(&self, namespace: &str, key: &str) -> Option<String> {
        let mut table = self.table.write().unwrap_or_else(PoisonError::into_inner);
        let removed = table.get_mut(namespace)?.remove(key);
        tracing::info!(
            namespace,
            key,
            existed = removed.is_some(),
            "kv config item deleted"
        );
        removed
    }

    /// Every item of `namespace`; `None` when the namespace was never set.
    pub fn namespace(&self, namespace: &str) -> Option<KvTable> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table.get(namespace).map(|items| KvTable {
            table: items.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_set_read_replaced_and_deleted_per_namespace() {
        let kv = KvConfig::new();
        assert_eq!(kv.get("ns", "k"), None);
        assert_eq!(kv.namespace("ns"), None);
        assert_eq!(kv.put("ns", "k", "v1"), None);
        assert_eq!(kv.put("ns", "k", "v2").as_deref(), Some("v1"));
        kv.put("other", "k", "x");
        assert_eq!(kv.get("ns", "k").as_deref(), Some("v2"));
        assert_eq!(kv.get("other", "k").as_deref(), Some("x"));
        assert_eq!(kv.get("ns", "missing"), None);

        assert_eq!(kv.delete("ns", "k").as_deref(), Some("v2"));
        assert_eq!(kv.delete("ns", "k"), None);
        assert_eq!(kv.delete("never", "k"), None);
        assert_eq!(kv.get("ns", "k"), None);
        // An emptied namespace is still known.
        assert_eq!(kv.namespace("ns"), Some(KvTable::default()));
        assert_eq!(kv.namespace("never"), None);
    }
}
