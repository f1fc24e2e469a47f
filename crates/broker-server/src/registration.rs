//! Registration with the name servers: at start, every
//! `registerNameServerPeriod`, and at once when topics change; removal at
//! shutdown.

use std::{sync::Arc, time::Duration};

use remoting_net::{CancellationToken, RemotingClient};
use remoting_protocol::{
    body::{self, RegisterBrokerBody},
    header::{RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader},
    RemotingCommand, RequestCode, ResponseCode,
};

use crate::state::BrokerState;

const REGISTER_TIMEOUT: Duration = Duration::from_secs(24);

/// Registers until `shutdown` fires, then unregisters.
pub async fn run(
    state: Arc<BrokerState>,
    client: Arc<RemotingClient>,
    broker_addr: String,
    shutdown: CancellationToken,
) {
    let cfg = state.config();
    let period = Duration::from_millis(cfg.broker.register_name_server_period);
    loop {
        register_all(&state, &client, &broker_addr).await;
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = state.topics_changed.notified() => {}
            () = tokio::time::sleep(period) => {}
        }
    }
    unregister_all(&state, &client, &broker_addr).await;
}

/// Registers with every name server once.
pub async fn register_all(state: &BrokerState, client: &RemotingClient, broker_addr: &str) {
    let cfg = state.config();
    let body = body::to_json(&RegisterBrokerBody {
        topic_config_serialize_wrapper: state.topics.wrapper(),
        filter_server_list: Vec::new(),
    });
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
    let header = RegisterBrokerRequestHeader {
        broker_name: cfg.broker.broker_name.clone(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: cfg.broker.broker_cluster_name.clone(),
        ha_server_addr: String::new(),
        broker_id: cfg.broker.broker_id,
        compressed: Some(false),
        body_crc32: Some(crc),
        ..RegisterBrokerRequestHeader::default()
    };
    for addr in cfg.namesrv_addrs() {
        let request = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header)
            .with_body(body.clone());
        match client.invoke(&addr, request, REGISTER_TIMEOUT).await {
            Ok(r) if r.response_code() == ResponseCode::SUCCESS => {
                tracing::debug!(namesrv = %addr, topics = state.topics.len(), "registered with name server");
            }
            Ok(r) => {
                tracing::warn!(namesrv = %addr, code = %r.response_code(), remark = ?r.remark, "name server refused registration")
            }
            Err(e) => {
                tracing::warn!(namesrv = %addr, cause = %e, "cannot register with name server")
            }
        }
    }
}

async fn unregister_all(state: &BrokerState, client: &RemotingClient, broker_addr: &str) {
    let cfg = state.config();
    let header = UnregisterBrokerRequestHeader {
        broker_name: cfg.broker.broker_name.clone(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: cfg.broker.broker_cluster_name.clone(),
        broker_id: cfg.broker.broker_id,
    };
    for addr in cfg.namesrv_addrs() {
        let request = RemotingCommand::request_with_header(RequestCode::UNREGISTER_BROKER, &header);
        if let Err(e) = client.invoke(&addr, request, Duration::from_secs(3)).await {
            tracing::debug!(namesrv = %addr, cause = %e, "cannot unregister from name server");
        }
    }
}
