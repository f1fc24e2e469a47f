//! Registration with the name servers: at start, every
//! `registerNameServerPeriod`, and at once when topics or `brokerPermission`
//! change; removal at shutdown. A name server whose connection closed (it
//! restarted, or could not be reached) is registered with again within
//! [`RECONNECT_CHECK`], not a whole period later: a name server started
//! again knows nothing of the brokers, and routes it serves would leave
//! this broker out until then.
//!
//! As RocketMQ's broker does, a `brokerPermission` without read or write
//! masks the perm of every topic registered (a read-only broker registers
//! no writable queue, so producers route around it). A change of
//! `brokerPermission` also changes the data version registered, so the name
//! servers replace the queue data they hold at once.

use std::{sync::Arc, time::Duration};

use message_model::flags::{is_readable, is_writeable};
use remoting_net::{CancellationToken, RemotingClient};
use remoting_protocol::{
    body::{self, RegisterBrokerBody, TopicConfigSerializeWrapper},
    header::{
        RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

use crate::state::BrokerState;

const REGISTER_TIMEOUT: Duration = Duration::from_secs(24);

/// How often the connections to the name servers are checked.
pub const RECONNECT_CHECK: Duration = Duration::from_secs(1);

/// Registers until `shutdown` fires, then unregisters.
pub async fn run(
    state: Arc<BrokerState>,
    client: Arc<RemotingClient>,
    broker_addr: String,
    shutdown: CancellationToken,
) {
    let cfg = state.config();
    let period = Duration::from_millis(cfg.broker.register_name_server_period);
    let mut announced = Announced::default();
    loop {
        register(&state, &client, &broker_addr, &mut announced).await;
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = state.topics_changed.notified() => {}
            () = tokio::time::sleep(period) => {}
            () = disconnected(&state, &client) => {}
        }
    }
    unregister_all(&state, &client, &broker_addr).await;
}

/// Resolves once some name server has no open connection (checked every
/// [`RECONNECT_CHECK`]).
async fn disconnected(state: &BrokerState, client: &RemotingClient) {
    loop {
        tokio::time::sleep(RECONNECT_CHECK).await;
        for addr in state.config().namesrv_addrs() {
            if !client.is_connected(&addr).await {
                return;
            }
        }
    }
}

/// What the registrations of one broker run have announced so far.
#[derive(Debug, Default)]
struct Announced {
    /// The `brokerPermission` of the last registration.
    permission: Option<i32>,
    /// How many times `brokerPermission` differed from the one before.
    permission_changes: i64,
    /// The name servers the last registration failed with (warned once
    /// per outage).
    failing: std::collections::BTreeSet<String>,
}

/// The topic table to register under `permission` (`brokerPermission`):
/// when it lacks read or write, each topic's perm is masked with it, as
/// RocketMQ's `BrokerController.registerBrokerAll` does. Each change of
/// permission counts once more in the data version's counter, so that the
/// name servers see a new version and replace the queue data they hold.
fn announcement(
    mut wrapper: TopicConfigSerializeWrapper,
    permission: i32,
    announced: &mut Announced,
) -> TopicConfigSerializeWrapper {
    if announced.permission.is_some_and(|p| p != permission) {
        announced.permission_changes += 1;
    }
    announced.permission = Some(permission);
    if !is_readable(permission) || !is_writeable(permission) {
        for topic in wrapper.topic_config_table.values_mut() {
            topic.perm &= permission;
        }
    }
    wrapper.data_version.counter += announced.permission_changes;
    wrapper
}

/// Registers with every name server once.
pub async fn register_all(state: &BrokerState, client: &RemotingClient, broker_addr: &str) {
    register(state, client, broker_addr, &mut Announced::default()).await;
}

async fn register(
    state: &BrokerState,
    client: &RemotingClient,
    broker_addr: &str,
    announced: &mut Announced,
) {
    if state.ha.controlled() && state.ha.master_epoch() == 0 {
        // No role yet: a route to this broker would say nothing true.
        return;
    }
    let cfg = state.config();
    let mut wrapper = announcement(
        state.topics.wrapper(),
        cfg.broker.broker_permission,
        announced,
    );
    if state.ha.controlled() {
        // The master epoch, as RocketMQ's controller mode does: a name
        // server keeps the master of the newest epoch when an old master
        // of the group has not expired yet.
        wrapper.data_version.state_version = i64::from(state.ha.master_epoch());
    }
    let body = body::to_json(&RegisterBrokerBody {
        topic_config_serialize_wrapper: wrapper,
        filter_server_list: Vec::new(),
    });
    let crc = (crc32fast::hash(&body) & 0x7FFF_FFFF) as i32;
    let header = RegisterBrokerRequestHeader {
        broker_name: cfg.broker.broker_name.clone(),
        broker_addr: broker_addr.to_owned(),
        cluster_name: cfg.broker.broker_cluster_name.clone(),
        ha_server_addr: state.ha.ha_server_addr(),
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
                if announced.failing.remove(&addr) {
                    tracing::info!(namesrv = %addr, "registered with name server again");
                }
                tracing::debug!(namesrv = %addr, topics = state.topics.len(), "registered with name server");
                state
                    .registered
                    .store(true, std::sync::atomic::Ordering::Release);
                // A slave hears where its master's HA port is.
                if let Ok(answer) = r.decode_header::<RegisterBrokerResponseHeader>() {
                    state.ha.master_hint(
                        &cfg,
                        answer.ha_server_addr.as_deref().unwrap_or_default(),
                        answer.master_addr.as_deref().unwrap_or_default(),
                    );
                }
            }
            Ok(r) => {
                announced.failing.insert(addr.clone());
                tracing::warn!(namesrv = %addr, code = %r.response_code(), remark = ?r.remark, "name server refused registration")
            }
            Err(e) if announced.failing.insert(addr.clone()) => {
                tracing::warn!(namesrv = %addr, cause = %e, "cannot register with name server; trying again every second")
            }
            Err(e) => {
                tracing::debug!(namesrv = %addr, cause = %e, "cannot register with name server")
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

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{DataVersion, TopicConfig};

    use super::*;

    fn table(perms: &[(&str, i32)]) -> TopicConfigSerializeWrapper {
        TopicConfigSerializeWrapper {
            topic_config_table: perms
                .iter()
                .map(|(name, perm)| {
                    (
                        (*name).to_owned(),
                        TopicConfig {
                            topic_name: (*name).to_owned(),
                            read_queue_nums: 4,
                            write_queue_nums: 4,
                            perm: *perm,
                            ..TopicConfig::default()
                        },
                    )
                })
                .collect(),
            data_version: DataVersion {
                counter: 7,
                timestamp: 1,
                ..DataVersion::default()
            },
            ..TopicConfigSerializeWrapper::default()
        }
    }

    fn perms(w: &TopicConfigSerializeWrapper) -> Vec<(String, i32)> {
        let mut all: Vec<(String, i32)> = w
            .topic_config_table
            .iter()
            .map(|(k, t)| (k.clone(), t.perm))
            .collect();
        all.sort();
        all
    }

    #[test]
    fn a_read_only_broker_registers_no_writable_topic_under_a_new_version() {
        let mut announced = Announced::default();
        let topics = [("A", 6), ("B", 7), ("RO", 4)];
        let first = announcement(table(&topics), 6, &mut announced);
        assert_eq!(perms(&first), perms(&table(&topics)), "read-write: as is");
        assert_eq!(first.data_version.counter, 7);

        let drained = announcement(table(&topics), 4, &mut announced);
        assert_eq!(
            perms(&drained),
            vec![("A".into(), 4), ("B".into(), 4), ("RO".into(), 4)]
        );
        assert_ne!(drained.data_version, first.data_version);

        let again = announcement(table(&topics), 4, &mut announced);
        assert_eq!(
            again.data_version, drained.data_version,
            "no change, same version"
        );

        let restored = announcement(table(&topics), 6, &mut announced);
        assert_eq!(perms(&restored), perms(&table(&topics)));
        assert_ne!(restored.data_version, drained.data_version);
        assert_ne!(restored.data_version, first.data_version);
    }
}
