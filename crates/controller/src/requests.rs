//! The controller's requests: RocketMQ's controller codes (1001-1013) and
//! brokers' heartbeats (904), answered with RocketMQ's headers and bodies.
//!
//! Heartbeats and `CONTROLLER_GET_METADATA_INFO` are answered by every
//! controller; the others by the leader only (`CONTROLLER_NOT_LEADER`
//! elsewhere, naming the leader).

use std::{collections::BTreeSet, time::Instant};

use remoting_protocol::{
    body::{
        from_json, to_json, BrokerMemberGroup, BrokerReplicasInfo, ElectMasterResponseBody,
        ReplicaIdentity, ReplicasInfo, SyncStateSet,
    },
    header::{
        AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader,
        ApplyBrokerIdRequestHeader, ApplyBrokerIdResponseHeader, BrokerHeartbeatRequestHeader,
        CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
        ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
        GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
        RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader,
    },
    CommandHeader, RemotingCommand, RequestCode, ResponseCode,
};

use crate::{
    elect,
    liveness::Beat,
    model::{Command, Group, Outcome},
    node::{Controller, WriteError},
};

/// Ext field of a heartbeat's answer: how long the master may acknowledge
/// writes from when it sent the beat (Sluice's own; absent: no lease).
pub const LEASE_MILLIS: &str = "leaseMillis";
/// Ext field of a heartbeat's answer: the master epoch the lease is for.
pub const LEASE_EPOCH: &str = "leaseEpoch";

/// Whether the controller answers `code`.
#[must_use]
pub fn is_controller_code(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::BROKER_HEARTBEAT
            | RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET
            | RequestCode::CONTROLLER_ELECT_MASTER
            | RequestCode::CONTROLLER_REGISTER_BROKER
            | RequestCode::CONTROLLER_GET_REPLICA_INFO
            | RequestCode::CONTROLLER_GET_METADATA_INFO
            | RequestCode::CONTROLLER_GET_SYNC_STATE_DATA
            | RequestCode::CLEAN_BROKER_DATA
            | RequestCode::CONTROLLER_GET_NEXT_BROKER_ID
            | RequestCode::CONTROLLER_APPLY_BROKER_ID
    )
}

/// An answer: code, remark, header and body.
pub(crate) struct Answer {
    pub code: ResponseCode,
    pub remark: Option<String>,
    pub group: Option<Group>,
    response: RemotingCommand,
}

impl Answer {
    fn new(code: ResponseCode, remark: impl Into<Option<String>>) -> Self {
        Self {
            code,
            remark: remark.into(),
            group: None,
            response: RemotingCommand::response(code, None),
        }
    }

    fn ok() -> Self {
        Self::new(ResponseCode::SUCCESS, None)
    }

    fn header(mut self, header: &impl CommandHeader) -> Self {
        self.response = self.response.with_header(header);
        self
    }

    fn body(mut self, body: Vec<u8>) -> Self {
        self.response = self.response.with_body(body);
        self
    }

    fn refused(outcome: &Outcome) -> Option<Self> {
        match outcome {
            Outcome::Refused { code, remark } => {
                Some(Self::new(ResponseCode(*code), remark.clone()))
            }
            Outcome::Applied(_) => None,
        }
    }

    fn into_response(self, request: &RemotingCommand) -> RemotingCommand {
        let mut response = self.response;
        response.code = self.code.0;
        response.remark = self.remark;
        response.opaque = request.opaque;
        response.mark_response();
        response
    }
}

impl From<WriteError> for Answer {
    fn from(e: WriteError) -> Self {
        let code = match e {
            WriteError::NotLeader { .. } => ResponseCode::CONTROLLER_NOT_LEADER,
            WriteError::Failed(_) => ResponseCode::CONTROLLER_JRAFT_INTERNAL_ERROR,
        };
        Self::new(code, e.to_string())
    }
}

fn sync_state_set_body(group: &Group) -> Vec<u8> {
    to_json(&SyncStateSet {
        sync_state_set: ids(&group.sync_state_set),
        sync_state_set_epoch: group.sync_state_set_epoch,
    })
}

fn ids(set: &BTreeSet<u64>) -> Vec<i64> {
    set.iter()
        .filter_map(|id| i64::try_from(*id).ok())
        .collect()
}

fn id_of(id: i64) -> Option<u64> {
    u64::try_from(id).ok().filter(|id| *id > 0)
}

fn bad_header(e: impl std::fmt::Display) -> Answer {
    Answer::new(ResponseCode::CONTROLLER_INVALID_REQUEST, e.to_string())
}

impl Controller {
    /// Answers a controller request (`None` for a oneway one).
    pub async fn handle(
        &self,
        request: &RemotingCommand,
        conn: Option<u64>,
    ) -> Option<RemotingCommand> {
        let code = request.request_code();
        let answer = match code {
            RequestCode::BROKER_HEARTBEAT => self.heartbeat(request, conn).await,
            RequestCode::CONTROLLER_GET_METADATA_INFO => self.metadata(),
            _ if !is_controller_code(code) => Answer::new(
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                format!("request code {code} is not served on the controller port"),
            ),
            _ if !self.is_leader() => Answer::new(
                ResponseCode::CONTROLLER_NOT_LEADER,
                format!(
                    "this controller is not the leader; the leader is {}",
                    self.leader_addr().unwrap_or("unknown")
                ),
            ),
            RequestCode::CONTROLLER_GET_NEXT_BROKER_ID => self.next_broker_id(request),
            RequestCode::CONTROLLER_APPLY_BROKER_ID => self.apply_broker_id(request).await,
            RequestCode::CONTROLLER_REGISTER_BROKER => self.register_broker(request).await,
            RequestCode::CONTROLLER_GET_REPLICA_INFO => self.replica_info(request),
            RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET => {
                self.alter_sync_state_set(request).await
            }
            RequestCode::CONTROLLER_ELECT_MASTER => {
                match request.decode_header::<ElectMasterRequestHeader>() {
                    Ok(h) => {
                        let broker_id = h.broker_id.and_then(id_of);
                        let designate = h.designate_elect.unwrap_or(false);
                        self.elect(&h.broker_name, broker_id, designate, Instant::now())
                            .await
                    }
                    Err(e) => bad_header(e),
                }
            }
            RequestCode::CONTROLLER_GET_SYNC_STATE_DATA => self.sync_state_data(request),
            RequestCode::CLEAN_BROKER_DATA => self.clean_broker_data(request).await,
            _ => Answer::new(ResponseCode::REQUEST_CODE_NOT_SUPPORTED, None),
        };
        (!request.is_oneway()).then(|| answer.into_response(request))
    }

    async fn heartbeat(&self, request: &RemotingCommand, conn: Option<u64>) -> Answer {
        let h = match request.decode_header::<BrokerHeartbeatRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let Some(id) = h.broker_id.and_then(id_of) else {
            return Answer::new(
                ResponseCode::CONTROLLER_INVALID_REQUEST,
                "Heart beat with empty brokerId".to_owned(),
            );
        };
        let now = Instant::now();
        let key = (h.broker_name.clone(), id);
        let beat = Beat {
            addr: h.broker_addr,
            timeout: std::time::Duration::from_millis(
                h.heartbeat_timeout_mills
                    .and_then(|ms| u64::try_from(ms).ok())
                    .unwrap_or(10_000),
            ),
            epoch: h.epoch.unwrap_or(-1),
            max_offset: h.max_offset.unwrap_or(-1),
            confirm_offset: h.confirm_offset.unwrap_or(-1),
            priority: h.election_priority.unwrap_or(i32::MAX),
        };
        self.liveness().beat(key.clone(), beat, now, conn);
        let mut answer = Answer::new(ResponseCode::SUCCESS, "Heart beat success".to_owned());
        // A lease for the master, from a leader no other can have replaced.
        let master_epoch = self.view.read(|r| {
            r.group(&h.broker_name)
                .filter(|g| g.master == Some(id))
                .map(|g| g.master_epoch)
        });
        if let Some(epoch) = master_epoch {
            // Only a leader that a quorum still follows may grant: one cut
            // off from the others (who may have elected another) must not
            // keep its master writing. A quorum that acknowledged this
            // leader after `now` votes for no other leader for a leader
            // lease, and a new leader waits a master's lease before it
            // elects another master, so this lease ends first.
            if !self.confirm_leadership().await {
                return answer;
            }
            self.liveness().granted(key, now);
            let lease = self.config.master_lease.as_millis().to_string();
            answer.response.set_ext(LEASE_MILLIS, lease.as_str());
            answer
                .response
                .set_ext(LEASE_EPOCH, epoch.to_string().as_str());
        }
        answer
    }

    fn metadata(&self) -> Answer {
        let leader = self.leader().and_then(|id| self.config.peers.get(&id));
        let peers: String = self
            .config
            .peers
            .values()
            .map(|p| format!("{}:{};", p.name, p.addr))
            .collect();
        Answer::ok().header(&GetMetaDataResponseHeader {
            group: Some(self.config.group.clone()),
            controller_leader_id: Some(leader.map(|p| p.name.clone()).unwrap_or_default()),
            controller_leader_address: Some(leader.map(|p| p.addr.clone()).unwrap_or_default()),
            is_leader: Some(self.is_leader()),
            peers: Some(peers),
        })
    }

    fn next_broker_id(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<GetNextBrokerIdRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let next = self
            .view
            .read(|r| r.group(&h.broker_name).map_or(1, Group::offered_broker_id));
        Answer::ok().header(&GetNextBrokerIdResponseHeader {
            cluster_name: h.cluster_name,
            broker_name: Some(h.broker_name),
            next_broker_id: i64::try_from(next).unwrap_or(i64::MAX),
        })
    }

    async fn apply_broker_id(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<ApplyBrokerIdRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let Some(id) = id_of(h.applied_broker_id) else {
            return Answer::new(
                ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                format!("broker id {} cannot be applied for", h.applied_broker_id),
            );
        };
        let command = Command::ApplyBrokerId {
            cluster_name: h.cluster_name.clone().unwrap_or_default(),
            broker_name: h.broker_name.clone(),
            broker_id: id,
            register_check_code: h.register_check_code,
        };
        match self.write(command).await {
            Ok(outcome) => Answer::refused(&outcome).unwrap_or_else(|| {
                Answer::ok().header(&ApplyBrokerIdResponseHeader {
                    cluster_name: h.cluster_name,
                    broker_name: Some(h.broker_name),
                })
            }),
            Err(e) => e.into(),
        }
    }

    async fn register_broker(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<RegisterBrokerToControllerRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let id = id_of(h.broker_id).unwrap_or(0);
        let known = self.view.read(|r| {
            r.group(&h.broker_name)
                .and_then(|g| g.members.get(&id))
                .map(|m| m.address.clone())
        });
        let group = match known {
            None => {
                return Answer::new(
                    ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                    format!(
                        "broker {} has no member with id {}; apply for an id first",
                        h.broker_name, h.broker_id
                    ),
                )
            }
            Some(addr) if addr == h.broker_address => {
                self.view.read(|r| r.group(&h.broker_name).cloned())
            }
            Some(_) => {
                let command = Command::RegisterBroker {
                    broker_name: h.broker_name.clone(),
                    broker_id: id,
                    address: h.broker_address.clone(),
                };
                match self.write(command).await {
                    Ok(Outcome::Applied(group)) => group,
                    Ok(refused) => return Answer::refused(&refused).unwrap_or_else(Answer::ok),
                    Err(e) => return e.into(),
                }
            }
        };
        let Some(group) = group else {
            return Answer::new(ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED, None);
        };
        let now = Instant::now();
        let live_master = group.master.filter(|m| {
            self.liveness()
                .is_alive(&(group.broker_name.clone(), *m), now)
        });
        Answer::ok()
            .header(&RegisterBrokerToControllerResponseHeader {
                cluster_name: Some(group.cluster_name.clone()),
                broker_name: Some(group.broker_name.clone()),
                master_broker_id: live_master.and_then(|m| i64::try_from(m).ok()),
                master_address: live_master.and(group.master_address().map(str::to_owned)),
                master_epoch: live_master.map(|_| group.master_epoch),
                sync_state_set_epoch: live_master.map(|_| group.sync_state_set_epoch),
            })
            .body(sync_state_set_body(&group))
    }

    fn replica_info(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<GetReplicaInfoRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let Some(group) = self.view.read(|r| r.group(&h.broker_name).cloned()) else {
            return Answer::new(
                ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST,
                format!("no broker group named {}", h.broker_name),
            );
        };
        Answer::ok()
            .header(&GetReplicaInfoResponseHeader {
                master_broker_id: group.master.and_then(|m| i64::try_from(m).ok()),
                master_address: group.master_address().map(str::to_owned),
                master_epoch: Some(group.master_epoch),
            })
            .body(sync_state_set_body(&group))
    }

    async fn alter_sync_state_set(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<AlterSyncStateSetRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let body: SyncStateSet = match from_json(&request.body) {
            Ok(b) => b,
            Err(e) => return bad_header(format!("malformed SyncStateSet body: {e}")),
        };
        let new_set: BTreeSet<u64> = body
            .sync_state_set
            .iter()
            .filter_map(|id| id_of(*id))
            .collect();
        let now = Instant::now();
        // Every new member must be alive (the master counts as alive).
        if let Some(dead) = new_set.iter().find(|id| {
            Some(**id) != id_of(h.master_broker_id)
                && !self
                    .liveness()
                    .is_alive(&(h.broker_name.clone(), **id), now)
        }) {
            return Answer::new(
                ResponseCode::CONTROLLER_BROKER_NOT_ALIVE,
                format!("broker {} member {dead} is not alive", h.broker_name),
            );
        }
        let command = Command::AlterSyncStateSet {
            broker_name: h.broker_name,
            master_id: id_of(h.master_broker_id).unwrap_or(0),
            master_epoch: h.master_epoch,
            sync_state_set_epoch: body.sync_state_set_epoch,
            new_sync_state_set: new_set,
        };
        match self.write(command).await {
            Ok(Outcome::Applied(Some(group))) => Answer::ok()
                .header(&AlterSyncStateSetResponseHeader {
                    new_sync_state_set_epoch: group.sync_state_set_epoch,
                })
                .body(sync_state_set_body(&group)),
            Ok(outcome) => Answer::refused(&outcome).unwrap_or_else(Answer::ok),
            Err(e) => e.into(),
        }
    }

    /// Elects a master for `broker_name`: the asking broker on the group's
    /// first election, else by [`elect::choose`]; never a broker other than
    /// the old master while the old master's lease may still run.
    pub(crate) async fn elect(
        &self,
        broker_name: &str,
        broker_id: Option<u64>,
        designate: bool,
        now: Instant,
    ) -> Answer {
        let Some(group) = self.view.read(|r| r.group(broker_name).cloned()) else {
            return Answer::new(
                ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!("no broker group named {broker_name}; its brokers must register first"),
            );
        };
        let chosen = if group.master_epoch == 0 && broker_id.is_some() {
            broker_id
        } else {
            elect::choose(
                &group,
                &self.liveness(),
                now,
                self.config.enable_elect_unclean_master,
                broker_id.filter(|_| designate),
            )
        };
        let current = |code, remark: Option<String>| {
            let mut a = Answer::new(code, remark).header(&ElectMasterResponseHeader {
                master_broker_id: group.master.and_then(|m| i64::try_from(m).ok()),
                master_address: group.master_address().map(str::to_owned),
                master_epoch: Some(group.master_epoch),
                sync_state_set_epoch: Some(group.sync_state_set_epoch),
            });
            a = a.body(to_json(&ElectMasterResponseBody {
                broker_member_group: None,
                sync_state_set: ids(&group.sync_state_set),
            }));
            a.group = Some(group.clone());
            a
        };
        if chosen.is_some() && chosen == group.master {
            return current(
                ResponseCode::CONTROLLER_MASTER_STILL_EXIST,
                Some(format!("broker {broker_name}: the master is still alive")),
            );
        }
        if let (Some(old), Some(_)) = (group.master, chosen) {
            let key = (broker_name.to_owned(), old);
            let lease_end = self.liveness().lease_end(&key, self.config.master_lease);
            if let Some(wait) = lease_end.and_then(|end| end.checked_duration_since(now)) {
                return current(
                    ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
                    Some(format!(
                        "broker {broker_name}: master {old}'s lease may run {} ms more; no new \
                         master before it ends",
                        wait.as_millis()
                    )),
                );
            }
        }
        if chosen.is_none() && broker_id.is_some() {
            return current(
                ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
                Some(format!(
                    "broker {broker_name}: no in-sync replica can be elected"
                )),
            );
        }
        let old_master = group.master;
        let command = Command::ElectMaster {
            broker_name: broker_name.to_owned(),
            master_epoch: group.master_epoch,
            new_master: chosen,
        };
        let group = match self.write(command).await {
            Ok(Outcome::Applied(Some(group))) => group,
            Ok(outcome) => return Answer::refused(&outcome).unwrap_or_else(Answer::ok),
            Err(e) => return e.into(),
        };
        if let Some(old) = old_master.filter(|old| Some(*old) != group.master) {
            self.liveness().forget_lease(&(broker_name.to_owned(), old));
        }
        self.notify_role_changed(&group);
        let code = if group.master.is_some() {
            tracing::info!(
                broker = %broker_name,
                master = ?group.master,
                epoch = group.master_epoch,
                "master elected"
            );
            ResponseCode::SUCCESS
        } else {
            ResponseCode::CONTROLLER_MASTER_NOT_AVAILABLE
        };
        let members = BrokerMemberGroup {
            cluster: group.cluster_name.clone(),
            broker_name: group.broker_name.clone(),
            broker_addrs: group
                .members
                .iter()
                .filter_map(|(id, m)| Some((i64::try_from(*id).ok()?, m.address.clone())))
                .collect(),
        };
        let mut answer = Answer::new(code, None)
            .header(&ElectMasterResponseHeader {
                master_broker_id: group.master.and_then(|m| i64::try_from(m).ok()),
                master_address: group.master_address().map(str::to_owned),
                master_epoch: Some(group.master_epoch),
                sync_state_set_epoch: Some(group.sync_state_set_epoch),
            })
            .body(to_json(&ElectMasterResponseBody {
                broker_member_group: group.master.map(|_| members),
                sync_state_set: ids(&group.sync_state_set),
            }));
        answer.group = Some(group);
        answer
    }

    fn sync_state_data(&self, request: &RemotingCommand) -> Answer {
        let names: Vec<String> = match from_json(&request.body) {
            Ok(names) => names,
            Err(e) => return bad_header(format!("body must list broker names: {e}")),
        };
        let now = Instant::now();
        let mut table = BrokerReplicasInfo::default();
        for name in names {
            let Some(group) = self.view.read(|r| r.group(&name).cloned()) else {
                continue;
            };
            let mut info = ReplicasInfo {
                master_broker_id: group.master.and_then(|m| i64::try_from(m).ok()),
                master_address: group.master_address().map(str::to_owned),
                master_epoch: group.master_epoch,
                sync_state_set_epoch: group.sync_state_set_epoch,
                ..ReplicasInfo::default()
            };
            for (id, member) in &group.members {
                let replica = ReplicaIdentity {
                    broker_name: name.clone(),
                    broker_id: i64::try_from(*id).unwrap_or(i64::MAX),
                    broker_address: member.address.clone(),
                    alive: self.liveness().is_alive(&(name.clone(), *id), now),
                };
                if group.sync_state_set.contains(id) {
                    info.in_sync_replicas.push(replica);
                } else {
                    info.not_in_sync_replicas.push(replica);
                }
            }
            table.replicas_info_table.insert(name, info);
        }
        Answer::ok().body(to_json(&table))
    }

    async fn clean_broker_data(&self, request: &RemotingCommand) -> Answer {
        let h = match request.decode_header::<CleanControllerBrokerDataRequestHeader>() {
            Ok(h) => h,
            Err(e) => return bad_header(e),
        };
        let invalid = |remark: String| {
            Answer::new(
                ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                remark,
            )
        };
        let clean_living = h.is_clean_living_broker.unwrap_or(false);
        let broker_ids = match h.broker_controller_ids_to_clean.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(text) => {
                let parsed: Result<BTreeSet<u64>, _> = text
                    .split(';')
                    .filter(|s| !s.is_empty())
                    .map(str::parse)
                    .collect();
                match parsed {
                    Ok(ids) => Some(ids),
                    Err(_) => {
                        return invalid(format!(
                            "brokerControllerIdsToClean {text:?} is not ids like 1;2;3"
                        ))
                    }
                }
            }
        };
        if !clean_living {
            let now = Instant::now();
            let alive = self.view.read(|r| {
                r.group(&h.broker_name).and_then(|g| {
                    g.members.keys().copied().find(|id| {
                        broker_ids.as_ref().is_none_or(|ids| ids.contains(id))
                            && self.liveness().is_alive(&(h.broker_name.clone(), *id), now)
                    })
                })
            });
            if let Some(id) = alive {
                return invalid(format!(
                    "broker {} member {id} is alive; stop it first or clean living brokers",
                    h.broker_name
                ));
            }
        }
        let command = Command::CleanBrokerData {
            broker_name: h.broker_name,
            broker_ids,
            clean_living,
        };
        match self.write(command).await {
            Ok(outcome) => Answer::refused(&outcome).unwrap_or_else(Answer::ok),
            Err(e) => e.into(),
        }
    }
}
