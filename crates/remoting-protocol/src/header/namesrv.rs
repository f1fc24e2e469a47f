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
