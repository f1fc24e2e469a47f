//! Headers of name server requests.

use super::ext_header;

ext_header! {
    /// `REGISTER_BROKER` (103) request header.
    pub struct RegisterBrokerRequestHeader {
        /// Broker name.
        broker_name: String = "brokerName",
        /// Broker address (`ip:port`).
        broker_addr: String = "brokerAddr",
        /// Cluster name.
        cluster_name: String = "clusterName",
        /// HA server address.
        ha_server_addr: String = "haServerAddr",
        /// Broker id (0 = master).
        broker_id: i64 = "brokerId",
        /// Expiry of this registration (ms).
        heartbeat_timeout_millis: Option<i64> = "heartbeatTimeoutMillis",
        /// Acting-master mode.
        enable_acting_master: Option<bool> = "enableActingMaster",
        /// Whether the body is compressed.
        compressed: Option<bool> = "compressed",
        /// Masked CRC32 of the body; 0 skips the check.
        body_crc32: Option<i32> = "bodyCrc32",
    }
}

ext_header! {
    /// `REGISTER_BROKER` response header.
    pub struct RegisterBrokerResponseHeader {
        /// HA server address of the master.
        ha_server_addr: Option<String> = "haServerAddr",
        /// Master address.
        master_addr: Option<String> = "masterAddr",
    }
}

ext_header! {
    /// `UNREGISTER_BROKER` (104) request header.
    pub struct UnregisterBrokerRequestHeader {
        /// Broker name.
        broker_name: String = "brokerName",
        /// Broker address.
        broker_addr: String = "brokerAddr",
        /// Cluster name.
        cluster_name: String = "clusterName",
        /// Broker id.
        broker_id: i64 = "brokerId",
    }
}

ext_header! {
    /// `GET_ROUTEINFO_BY_TOPIC` (105) request header.
    pub struct GetRouteInfoRequestHeader {
        /// Topic.
        topic: String = "topic",
        /// Ask for standard JSON even from an old version.
        accept_standard_json_only: Option<bool> = "acceptStandardJsonOnly",
    }
}

ext_header! {
    /// `PUT_KV_CONFIG` (100) request header.
    pub struct PutKvConfigRequestHeader {
        /// Namespace of the item.
        namespace: String = "namespace",
        /// Key within the namespace.
        key: String = "key",
        /// Value to store.
        value: String = "value",
    }
}

ext_header! {
    /// `GET_KV_CONFIG` (101) request header.
    pub struct GetKvConfigRequestHeader {
        /// Namespace of the item.
        namespace: String = "namespace",
        /// Key within the namespace.
        key: String = "key",
    }
}

ext_header! {
    /// `GET_KV_CONFIG` response header.
    pub struct GetKvConfigResponseHeader {
        /// The stored value; absent when the item does not exist.
        value: Option<String> = "value",
    }
}

ext_header! {
    /// `DELETE_KV_CONFIG` (102) request header.
    pub struct DeleteKvConfigRequestHeader {
        /// Namespace of the item.
        namespace: String = "namespace",
        /// Key within the namespace.
        key: String = "key",
    }
}

ext_header! {
    /// `GET_KVLIST_BY_NAMESPACE` (219) request header.
    pub struct GetKvListByNamespaceRequestHeader {
        /// Namespace whose items are asked for.
        namespace: String = "namespace",
    }
}

ext_header! {
    /// `WIPE_WRITE_PERM_OF_BROKER` (205) request header.
    pub struct WipeWritePermOfBrokerRequestHeader {
        /// Broker name whose queues lose write permission.
        broker_name: String = "brokerName",
    }
}

ext_header! {
    /// `WIPE_WRITE_PERM_OF_BROKER` response header.
    pub struct WipeWritePermOfBrokerResponseHeader {
        /// How many topics had queue data of the broker.
        wipe_topic_count: i32 = "wipeTopicCount",
    }
}

ext_header! {
    /// `ADD_WRITE_PERM_OF_BROKER` (327) request header.
    pub struct AddWritePermOfBrokerRequestHeader {
        /// Broker name whose queues get read and write permission.
        broker_name: String = "brokerName",
    }
}

ext_header! {
    /// `ADD_WRITE_PERM_OF_BROKER` response header.
    pub struct AddWritePermOfBrokerResponseHeader {
        /// How many topics had queue data of the broker.
        add_topic_count: i32 = "addTopicCount",
    }
}

ext_header! {
    /// `DELETE_TOPIC_IN_NAMESRV` (216) request header.
    pub struct DeleteTopicFromNamesrvRequestHeader {
        /// Topic to forget.
        topic: String = "topic",
        /// When present and not empty, only this cluster's brokers lose
        /// the topic.
        cluster_name: Option<String> = "clusterName",
    }
}

ext_header! {
    /// `GET_TOPICS_BY_CLUSTER` (224) request header.
    pub struct GetTopicsByClusterRequestHeader {
        /// Cluster name.
        cluster: String = "cluster",
    }
}
