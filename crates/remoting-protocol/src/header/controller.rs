//! Headers of the controller's requests (`CONTROLLER_*`, 1001-1013) and of
//! `BROKER_HEARTBEAT` (904) and `NOTIFY_BROKER_ROLE_CHANGED` (1008).

use super::ext_header;

ext_header! {
    /// `CONTROLLER_ALTER_SYNC_STATE_SET` (1001) request header; the body is
    /// the proposed `SyncStateSet` with the set epoch the master holds.
    pub struct AlterSyncStateSetRequestHeader {
        /// Broker name.
        broker_name: String = "brokerName",
        /// The master's broker id.
        master_broker_id: i64 = "masterBrokerId",
        /// The master epoch it holds.
        master_epoch: i32 = "masterEpoch",
        /// When the request was made (ms since the epoch).
        invoke_time: Option<i64> = "invokeTime",
    }
}

ext_header! {
    /// `CONTROLLER_ALTER_SYNC_STATE_SET` response header.
    pub struct AlterSyncStateSetResponseHeader {
        /// The set's epoch after the change.
        new_sync_state_set_epoch: i32 = "newSyncStateSetEpoch",
    }
}

ext_header! {
    /// `CONTROLLER_ELECT_MASTER` (1002) request header.
    pub struct ElectMasterRequestHeader {
        /// Cluster name (empty when the controller triggers the election).
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: String = "brokerName",
        /// The broker asking, or the one an operator designates; -1: none.
        broker_id: Option<i64> = "brokerId",
        /// Whether `brokerId` is designated by an operator.
        designate_elect: Option<bool> = "designateElect",
        /// When the request was made (ms since the epoch).
        invoke_time: Option<i64> = "invokeTime",
    }
}

ext_header! {
    /// `CONTROLLER_ELECT_MASTER` response header.
    pub struct ElectMasterResponseHeader {
        /// The master's broker id.
        master_broker_id: Option<i64> = "masterBrokerId",
        /// The master's address.
        master_address: Option<String> = "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> = "masterEpoch",
        /// The in-sync set's epoch.
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
    }
}

ext_header! {
    /// `CONTROLLER_REGISTER_BROKER` (1003) request header.
    pub struct RegisterBrokerToControllerRequestHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: String = "brokerName",
        /// The id the broker was given.
        broker_id: i64 = "brokerId",
        /// Its remoting address.
        broker_address: String = "brokerAddress",
        /// When the request was made (ms since the epoch).
        invoke_time: Option<i64> = "invokeTime",
    }
}

ext_header! {
    /// `CONTROLLER_REGISTER_BROKER` response header; the master fields are
    /// present while the group has a live master.
    pub struct RegisterBrokerToControllerResponseHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: Option<String> = "brokerName",
        /// The master's broker id.
        master_broker_id: Option<i64> = "masterBrokerId",
        /// The master's address.
        master_address: Option<String> = "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> = "masterEpoch",
        /// The in-sync set's epoch.
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
    }
}

ext_header! {
    /// `CONTROLLER_GET_REPLICA_INFO` (1004) request header.
    pub struct GetReplicaInfoRequestHeader {
        /// Broker name.
        broker_name: String = "brokerName",
    }
}

ext_header! {
    /// `CONTROLLER_GET_REPLICA_INFO` response header; the body is the
    /// `SyncStateSet`.
    pub struct GetReplicaInfoResponseHeader {
        /// The master's broker id.
        master_broker_id: Option<i64> = "masterBrokerId",
        /// The master's address.
        master_address: Option<String> = "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> = "masterEpoch",
    }
}

ext_header! {
    /// `CONTROLLER_GET_METADATA_INFO` (1005) response header.
    pub struct GetMetaDataResponseHeader {
        /// The controllers' group name.
        group: Option<String> = "group",
        /// The leader's id (`n0`), empty while there is none.
        controller_leader_id: Option<String> = "controllerLeaderId",
        /// The leader's address, empty while there is none.
        controller_leader_address: Option<String> = "controllerLeaderAddress",
        /// Whether the answering controller is the leader.
        is_leader: Option<bool> = "isLeader",
        /// Every controller, `id:address;` each.
        peers: Option<String> = "peers",
    }
}

ext_header! {
    /// `CLEAN_BROKER_DATA` (1011) request header.
    pub struct CleanControllerBrokerDataRequestHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: String = "brokerName",
        /// The ids to forget, `1;2;3`; absent: the whole group.
        broker_controller_ids_to_clean: Option<String> = "brokerControllerIdsToClean",
        /// Forget brokers that are still alive too.
        is_clean_living_broker: Option<bool> = "isCleanLivingBroker",
        /// When the request was made (ms since the epoch).
        invoke_time: Option<i64> = "invokeTime",
    }
}

ext_header! {
    /// `CONTROLLER_GET_NEXT_BROKER_ID` (1012) request header.
    pub struct GetNextBrokerIdRequestHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: String = "brokerName",
    }
}

ext_header! {
    /// `CONTROLLER_GET_NEXT_BROKER_ID` response header.
    pub struct GetNextBrokerIdResponseHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: Option<String> = "brokerName",
        /// The id to apply for.
        next_broker_id: i64 = "nextBrokerId",
    }
}

ext_header! {
    /// `CONTROLLER_APPLY_BROKER_ID` (1013) request header.
    pub struct ApplyBrokerIdRequestHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: String = "brokerName",
        /// The id asked for.
        applied_broker_id: i64 = "appliedBrokerId",
        /// The broker's own code, `address;timestamp`.
        register_check_code: String = "registerCheckCode",
    }
}

ext_header! {
    /// `CONTROLLER_APPLY_BROKER_ID` response header.
    pub struct ApplyBrokerIdResponseHeader {
        /// Cluster name.
        cluster_name: Option<String> = "clusterName",
        /// Broker name.
        broker_name: Option<String> = "brokerName",
    }
}

ext_header! {
    /// `BROKER_HEARTBEAT` (904) request header, as a broker in controller
    /// mode sends it.
    pub struct BrokerHeartbeatRequestHeader {
        /// Cluster name.
        cluster_name: String = "clusterName",
        /// The broker's remoting address.
        broker_addr: String = "brokerAddr",
        /// Broker name.
        broker_name: String = "brokerName",
        /// The broker's id in its group.
        broker_id: Option<i64> = "brokerId",
        /// The last master epoch its log holds.
        epoch: Option<i32> = "epoch",
        /// Its CommitLog's end.
        max_offset: Option<i64> = "maxOffset",
        /// Its confirm offset.
        confirm_offset: Option<i64> = "confirmOffset",
        /// How long the controller may count it alive without another beat.
        heartbeat_timeout_mills: Option<i64> = "heartbeatTimeoutMills",
        /// Lower is preferred in elections.
        election_priority: Option<i32> = "electionPriority",
    }
}

ext_header! {
    /// `NOTIFY_BROKER_ROLE_CHANGED` (1008) request header, from the
    /// controller to a broker; the body is the `SyncStateSet`.
    pub struct NotifyBrokerRoleChangedRequestHeader {
        /// The master's address.
        master_address: Option<String> = "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> = "masterEpoch",
        /// The in-sync set's epoch.
        sync_state_set_epoch: Option<i32> = "syncStateSetEpoch",
        /// The master's broker id.
        master_broker_id: Option<i64> = "masterBrokerId",
    }
}
