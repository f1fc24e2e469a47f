//! Headers of client management requests.

use super::ext_header;

ext_header! {
    /// `HEART_BEAT` (34) request header; the heartbeat itself is the body.
    pub struct HeartbeatRequestHeader {
        /// Namespace.
        namespace: Option<String> = "ns",
        /// Whether names are already namespaced.
        namespaced: Option<bool> = "nsd",
        /// Target broker name.
        broker_name: Option<String> = "bname",
        /// Oneway marker.
        oneway: Option<bool> = "oway",
    }
}

ext_header! {
    /// `UNREGISTER_CLIENT` (35) request header.
    pub struct UnregisterClientRequestHeader {
        /// Client id.
        client_id: String = "clientID",
        /// Producer group the client leaves.
        producer_group: Option<String> = "producerGroup",
        /// Consumer group the client leaves.
        consumer_group: Option<String> = "consumerGroup",
    }
}
