//! `controller` commands: ask the replication controllers who leads, what
//! each broker group's in-sync replicas are, elect a named broker master,
//! and forget brokers of a group. Each finds the leader first
//! (`CONTROLLER_GET_METADATA_INFO` on the addresses given) and asks it.

use client_core::split_addrs;
use remoting_protocol::{
    body::{self, BrokerReplicasInfo, ReplicaIdentity},
    header::{
        CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
        ElectMasterResponseHeader, GetMetaDataResponseHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, Align, Report, Table},
};

/// Milliseconds since the Unix epoch (a request's `invokeTime`).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `controller meta`: the controllers' group and leader.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerMetaReport {
    /// The controller asked.
    pub controller: String,
    /// The controllers' group name.
    pub group: String,
    /// The leader's id (`n0`), empty while there is none.
    pub leader_id: String,
    /// The leader's address, empty while there is none.
    pub leader_address: String,
    /// Whether the controller asked is the leader.
    pub is_leader: bool,
    /// Every controller, `id:address`.
    pub peers: Vec<String>,
}

impl Report for ControllerMetaReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[("Key", Align::Left), ("Value", Align::Left)]);
        for (k, v) in [
            ("controller", self.controller.clone()),
            ("group", self.group.clone()),
            ("leaderId", self.leader_id.clone()),
            ("leaderAddress", self.leader_address.clone()),
            ("isLeader", self.is_leader.to_string()),
            ("peers", self.peers.join(" ")),
        ] {
            t.row(vec![k.to_owned(), v]);
        }
        t.to_string()
    }
}

/// `controller sync-state`: each group's master and replicas.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncStateReport {
    /// The leader asked.
    pub leader: String,
    /// The groups the leader knows, by broker name.
    pub groups: Vec<GroupReplicas>,
}

/// One broker group as the controllers hold it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupReplicas {
    /// Broker name.
    pub broker_name: String,
    /// The master's id, if any.
    pub master_broker_id: Option<i64>,
    /// The master's address, if any.
    pub master_address: Option<String>,
    /// The master epoch.
    pub master_epoch: i32,
    /// The in-sync set's epoch.
    pub sync_state_set_epoch: i32,
    /// Every member.
    pub replicas: Vec<ReplicaRow>,
}

/// One member of a group.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaRow {
    /// Its id in the group.
    pub broker_id: i64,
    /// Its address.
    pub address: String,
    /// Whether it is in the in-sync set.
    pub in_sync: bool,
    /// Whether the leader counts it alive.
    pub alive: bool,
}

impl Report for SyncStateReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Broker Name", Align::Left),
            ("BID", Align::Right),
            ("Addr", Align::Left),
            ("Role", Align::Left),
            ("In Sync", Align::Left),
            ("Alive", Align::Left),
            ("Master Epoch", Align::Right),
            ("Sync Epoch", Align::Right),
        ]);
        for g in &self.groups {
            for r in &g.replicas {
                let master = g.master_broker_id == Some(r.broker_id);
                t.row(vec![
                    g.broker_name.clone(),
                    r.broker_id.to_string(),
                    r.address.clone(),
                    if master { "master" } else { "slave" }.to_owned(),
                    r.in_sync.to_string(),
                    r.alive.to_string(),
                    g.master_epoch.to_string(),
                    g.sync_state_set_epoch.to_string(),
                ]);
            }
        }
        let mut out = String::new();
        section(
            &mut out,
            &format!("controller leader {}", self.leader),
            &t.to_string(),
        );
        out
    }
}

/// `controller elect` and `controller clean`: what the leader answered.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ControllerChangeReport {
    /// `elect` or `clean`.
    pub action: String,
    /// Broker name.
    pub broker_name: String,
    /// The leader's answer code.
    pub code: String,
    /// Its remark.
    pub remark: String,
    /// The master's id after an election.
    pub master_broker_id: Option<i64>,
    /// The master's address after an election.
    pub master_address: Option<String>,
    /// The master epoch after an election.
    pub master_epoch: Option<i32>,
}

impl Report for ControllerChangeReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[("Key", Align::Left), ("Value", Align::Left)]);
        let opt = |v: Option<String>| v.unwrap_or_else(|| "-".to_owned());
        for (k, v) in [
            ("action", self.action.clone()),
            ("brokerName", self.broker_name.clone()),
            ("code", self.code.clone()),
            ("remark", self.remark.clone()),
            (
                "masterBrokerId",
                opt(self.master_broker_id.map(|v| v.to_string())),
            ),
            ("masterAddress", opt(self.master_address.clone())),
            ("masterEpoch", opt(self.master_epoch.map(|v| v.to_string()))),
        ] {
            t.row(vec![k.to_owned(), v]);
        }
        t.to_string()
    }
}

/// What the first controller of `controllers` that answers says.
///
/// # Errors
/// No controller answers.
pub async fn controller_meta(
    admin: &Admin,
    controllers: &str,
) -> Result<ControllerMetaReport, AdminError> {
    let mut last = None;
    for addr in split_addrs(controllers) {
        let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
        match admin.call(Peer::Controller, &addr, request).await {
            Ok(answer) => {
                let h: GetMetaDataResponseHeader =
                    answer.decode_header().map_err(|e| AdminError::BadAnswer {
                        peer: Peer::Controller,
                        addr: addr.clone(),
                        request: RequestCode::CONTROLLER_GET_METADATA_INFO,
                        reason: e.to_string(),
                    })?;
                return Ok(ControllerMetaReport {
                    controller: addr,
                    group: h.group.unwrap_or_default(),
                    leader_id: h.controller_leader_id.unwrap_or_default(),
                    leader_address: h.controller_leader_address.unwrap_or_default(),
                    is_leader: h.is_leader.unwrap_or(false),
                    peers: h
                        .peers
                        .unwrap_or_default()
                        .split(';')
                        .filter(|p| !p.is_empty())
                        .map(str::to_owned)
                        .collect(),
                });
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or(AdminError::NoLeader {
        controller: controllers.to_owned(),
    }))
}

async fn leader(admin: &Admin, controllers: &str) -> Result<String, AdminError> {
    let meta = controller_meta(admin, controllers).await?;
    if meta.leader_address.is_empty() {
        return Err(AdminError::NoLeader {
            controller: meta.controller,
        });
    }
    Ok(meta.leader_address)
}

/// Each of `broker_names`' master, epochs and replicas, from the leader.
///
/// # Errors
/// No leader, or it refuses.
pub async fn sync_state(
    admin: &Admin,
    controllers: &str,
    broker_names: &[String],
) -> Result<SyncStateReport, AdminError> {
    let leader = leader(admin, controllers).await?;
    let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_SYNC_STATE_DATA)
        .with_body(body::to_json(&broker_names));
    let answer = admin.call(Peer::Controller, &leader, request).await?;
    let table: BrokerReplicasInfo =
        body::from_json(&answer.body).map_err(|e| AdminError::BadAnswer {
            peer: Peer::Controller,
            addr: leader.clone(),
            request: RequestCode::CONTROLLER_GET_SYNC_STATE_DATA,
            reason: e.to_string(),
        })?;
    let row = |r: &ReplicaIdentity, in_sync| ReplicaRow {
        broker_id: r.broker_id,
        address: r.broker_address.clone(),
        in_sync,
        alive: r.alive,
    };
    let groups = table
        .replicas_info_table
        .into_iter()
        .map(|(name, info)| {
            let mut replicas: Vec<ReplicaRow> = info
                .in_sync_replicas
                .iter()
                .map(|r| row(r, true))
                .chain(info.not_in_sync_replicas.iter().map(|r| row(r, false)))
                .collect();
            replicas.sort_by_key(|r| r.broker_id);
            GroupReplicas {
                broker_name: name,
                master_broker_id: info.master_broker_id,
                master_address: info.master_address,
                master_epoch: info.master_epoch,
                sync_state_set_epoch: info.sync_state_set_epoch,
                replicas,
            }
        })
        .collect();
    Ok(SyncStateReport { leader, groups })
}

/// Asks the leader to make broker `broker_id` master of `broker_name`
/// (an operator's designated election).
///
/// # Errors
/// No leader, or no answer.
pub async fn elect_master(
    admin: &Admin,
    controllers: &str,
    cluster: Option<&str>,
    broker_name: &str,
    broker_id: i64,
) -> Result<ControllerChangeReport, AdminError> {
    let leader = leader(admin, controllers).await?;
    let request = RemotingCommand::request_with_header(
        RequestCode::CONTROLLER_ELECT_MASTER,
        &ElectMasterRequestHeader {
            cluster_name: cluster.map(str::to_owned),
            broker_name: broker_name.to_owned(),
            broker_id: Some(broker_id),
            designate_elect: Some(true),
            invoke_time: Some(now_ms()),
        },
    );
    let answer = admin
        .call_accepting(
            Peer::Controller,
            &leader,
            request,
            &[ResponseCode::CONTROLLER_MASTER_STILL_EXIST],
        )
        .await?;
    let h: ElectMasterResponseHeader = answer.decode_header().unwrap_or_default();
    Ok(ControllerChangeReport {
        action: "elect".to_owned(),
        broker_name: broker_name.to_owned(),
        code: answer.response_code().to_string(),
        remark: answer.remark.clone().unwrap_or_default(),
        master_broker_id: h.master_broker_id,
        master_address: h.master_address,
        master_epoch: h.master_epoch,
    })
}

/// Asks the leader to forget `broker_ids` (`1;2`) of `broker_name`, or the
/// whole group.
///
/// # Errors
/// No leader, or it refuses.
pub async fn clean_broker_metadata(
    admin: &Admin,
    controllers: &str,
    cluster: Option<&str>,
    broker_name: &str,
    broker_ids: Option<&str>,
    clean_living: bool,
) -> Result<ControllerChangeReport, AdminError> {
    let leader = leader(admin, controllers).await?;
    let request = RemotingCommand::request_with_header(
        RequestCode::CLEAN_BROKER_DATA,
        &CleanControllerBrokerDataRequestHeader {
            cluster_name: cluster.map(str::to_owned),
            broker_name: broker_name.to_owned(),
            broker_controller_ids_to_clean: broker_ids.map(str::to_owned),
            is_clean_living_broker: Some(clean_living),
            invoke_time: Some(now_ms()),
        },
    );
    let answer = admin.call(Peer::Controller, &leader, request).await?;
    Ok(ControllerChangeReport {
        action: "clean".to_owned(),
        broker_name: broker_name.to_owned(),
        code: answer.response_code().to_string(),
        remark: answer.remark.clone().unwrap_or_default(),
        ..ControllerChangeReport::default()
    })
}
