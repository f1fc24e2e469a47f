//! The controller's bodies: the in-sync replica set, an election's result,
//! a group's members, the replica table of `CONTROLLER_GET_SYNC_STATE_DATA`
//! and a broker's epoch history (`GET_BROKER_EPOCH_CACHE`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lenient::{boolean, int, list, string};

/// `SyncStateSet`: the in-sync replicas' ids and the set's epoch.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SyncStateSet {
    /// Broker ids.
    #[serde(deserialize_with = "list")]
    pub sync_state_set: Vec<i64>,
    /// The set's epoch.
    #[serde(deserialize_with = "int")]
    pub sync_state_set_epoch: i32,
}

/// `BrokerMemberGroup`: a group's members by broker id.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerMemberGroup {
    /// Cluster name (the key is `cluster`).
    #[serde(deserialize_with = "string")]
    pub cluster: String,
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// Addresses by broker id.
    pub broker_addrs: BTreeMap<i64, String>,
}

/// `ElectMasterResponseBody`: the members (on success) and the new set.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ElectMasterResponseBody {
    /// The group's members; absent when the master stayed.
    pub broker_member_group: Option<BrokerMemberGroup>,
    /// The in-sync replicas' ids.
    #[serde(deserialize_with = "list")]
    pub sync_state_set: Vec<i64>,
}

/// `ReplicaIdentity`: one replica in the replica table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplicaIdentity {
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// Broker id.
    #[serde(deserialize_with = "int")]
    pub broker_id: i64,
    /// Remoting address.
    #[serde(deserialize_with = "string")]
    pub broker_address: String,
    /// Whether the controller counts it alive.
    #[serde(deserialize_with = "boolean")]
    pub alive: bool,
}

/// `ReplicasInfo`: one group in the replica table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplicasInfo {
    /// The master's broker id, if any.
    pub master_broker_id: Option<i64>,
    /// The master's address, if any.
    pub master_address: Option<String>,
    /// The master epoch.
    #[serde(deserialize_with = "int")]
    pub master_epoch: i32,
    /// The in-sync set's epoch.
    #[serde(deserialize_with = "int")]
    pub sync_state_set_epoch: i32,
    /// Members in the in-sync set.
    #[serde(deserialize_with = "list")]
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    /// Members outside it.
    #[serde(deserialize_with = "list")]
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

/// `BrokerReplicasInfo`: the replica table by broker name.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct BrokerReplicasInfo {
    /// Groups by broker name.
    pub replicas_info_table: BTreeMap<String, ReplicasInfo>,
}

/// `EpochEntry`: a master epoch and the CommitLog range it wrote.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EpochEntryBody {
    /// The epoch.
    #[serde(deserialize_with = "int")]
    pub epoch: i32,
    /// Where it starts.
    #[serde(deserialize_with = "int")]
    pub start_offset: i64,
    /// Where it ends (`Long.MAX_VALUE` for the open last epoch).
    #[serde(deserialize_with = "int")]
    pub end_offset: i64,
}

/// `EpochEntryCache`: a broker's epoch history (`GET_BROKER_EPOCH_CACHE`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct EpochEntryCache {
    /// Cluster name.
    #[serde(deserialize_with = "string")]
    pub cluster_name: String,
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// The broker's id in its current role (0 on the master).
    #[serde(deserialize_with = "int")]
    pub broker_id: i64,
    /// Its epochs, oldest first.
    #[serde(deserialize_with = "list")]
    pub epoch_list: Vec<EpochEntryBody>,
    /// Its CommitLog's end.
    #[serde(deserialize_with = "int")]
    pub max_offset: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_fastjson};

    #[test]
    fn controller_bodies_read_fastjson_and_write_rocketmq_names() {
        let set: SyncStateSet =
            from_json(br#"{"syncStateSet":[1,2],"syncStateSetEpoch":"3"}"#).unwrap();
        assert_eq!(set.sync_state_set, [1, 2]);
        assert_eq!(set.sync_state_set_epoch, 3);
        let body = ElectMasterResponseBody {
            broker_member_group: Some(BrokerMemberGroup {
                cluster: "c".into(),
                broker_name: "b".into(),
                broker_addrs: BTreeMap::from([(1, "10.0.0.1:10911".into())]),
            }),
            sync_state_set: vec![1],
        };
        assert_eq!(
            String::from_utf8(to_fastjson(&body)).unwrap(),
            r#"{"brokerMemberGroup":{"brokerAddrs":{"1":"10.0.0.1:10911"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}"#
        );
        // fastjson's unquoted numeric keys read back.
        let group: BrokerMemberGroup =
            from_json(br#"{"cluster":"c","brokerName":"b","brokerAddrs":{1:"a",2:"b"}}"#).unwrap();
        assert_eq!(group.broker_addrs.len(), 2);
        let cache: EpochEntryCache = from_json(
            br#"{"brokerId":0,"brokerName":"b","clusterName":"c","epochList":[{"endOffset":9223372036854775807,"epoch":1,"startOffset":0}],"maxOffset":42}"#,
        )
        .unwrap();
        assert_eq!(cache.epoch_list[0].end_offset, i64::MAX);
        assert_eq!(cache.max_offset, 42);
        let table: BrokerReplicasInfo = from_json(
            br#"{"replicasInfoTable":{"b":{"masterBrokerId":1,"masterAddress":"a","masterEpoch":2,"syncStateSetEpoch":3,"inSyncReplicas":[{"brokerName":"b","brokerId":1,"brokerAddress":"a","alive":true}],"notInSyncReplicas":[]}}}"#,
        )
        .unwrap();
        let info = &table.replicas_info_table["b"];
        assert_eq!(info.master_broker_id, Some(1));
        assert!(info.in_sync_replicas[0].alive);
    }
}
