//! A broker in controller mode (`enableControllerMode`): it takes an id in
//! its group from the controllers (kept in `<storePathRootDir>/brokerIdentity`),
//! registers its address, beats to every controller (the leader's answer
//! carries a master's lease), asks who its group's master is every
//! `syncBrokerMetadataPeriod` and at once when told of a change
//! (`NOTIFY_BROKER_ROLE_CHANGED`), asks for an election when the group has
//! no master, switches roles in place, and, as master, keeps the
//! controllers' in-sync replica set up to date.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use controller::{LEASE_EPOCH, LEASE_MILLIS};
use remoting_net::{CancellationToken, RemotingClient};
use remoting_protocol::{
    body::{decode_config_text, from_json, to_json, SyncStateSet},
    header::{
        AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader,
        ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
        ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
        GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
        RegisterBrokerToControllerRequestHeader,
    },
    CommandHeader, RemotingCommand, RequestCode, ResponseCode,
};
use serde::{Deserialize, Serialize};

use crate::{config::BrokerConfig, state::BrokerState};

mod review;
use review::Review;

/// The identity file's name under `storePathRootDir`.
pub const IDENTITY_FILE: &str = "brokerIdentity";

const CALL_TIMEOUT: Duration = Duration::from_secs(3);

/// The id a broker took in its group, kept across restarts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Identity {
    cluster_name: String,
    broker_name: String,
    broker_id: i64,
    register_check_code: String,
}

/// Who the group's master is, as the controllers said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Replicas {
    master: Option<i64>,
    master_address: Option<String>,
    master_epoch: i32,
    sync_state_set: BTreeSet<i64>,
    sync_state_set_epoch: i32,
}

/// Talks to the controllers: finds the leader and sends to it.
struct Controllers {
    client: Arc<RemotingClient>,
    addrs: Vec<String>,
    leader: Option<String>,
}

impl Controllers {
    async fn find_leader(&mut self) -> Result<String, String> {
        if let Some(leader) = &self.leader {
            return Ok(leader.clone());
        }
        for addr in &self.addrs {
            let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
            let Ok(answer) = self.client.invoke(addr, request, CALL_TIMEOUT).await else {
                continue;
            };
            let leader = answer
                .decode_header::<GetMetaDataResponseHeader>()
                .ok()
                .and_then(|h| h.controller_leader_address)
                .filter(|a| !a.is_empty());
            if let Some(leader) = leader {
                self.leader = Some(leader.clone());
                return Ok(leader);
            }
        }
        Err(format!(
            "no controller of {} names a leader",
            self.addrs.join(";")
        ))
    }

    /// Sends `request` to the leader, finding it again once if the one it
    /// knew is no longer.
    async fn call(&mut self, request: RemotingCommand) -> Result<RemotingCommand, String> {
        for _ in 0..2 {
            let leader = self.find_leader().await?;
            match self
                .client
                .invoke(&leader, request.clone(), CALL_TIMEOUT)
                .await
            {
                Ok(answer) if answer.response_code() == ResponseCode::CONTROLLER_NOT_LEADER => {
                    self.leader = None;
                }
                Ok(answer) => return Ok(answer),
                Err(e) => {
                    self.leader = None;
                    return Err(format!("controller {leader}: {e}"));
                }
            }
        }
        Err("the controllers' leader changed twice during one request".to_owned())
    }
}

fn request(code: RequestCode, header: &impl CommandHeader) -> RemotingCommand {
    RemotingCommand::request_with_header(code, header)
}

fn refused(what: &str, answer: &RemotingCommand) -> String {
    format!(
        "{what}: {} {}",
        answer.response_code(),
        answer.remark.as_deref().unwrap_or("")
    )
}

/// Runs the broker's side of controller mode until `shutdown` fires.
pub async fn run(
    state: Arc<BrokerState>,
    client: Arc<RemotingClient>,
    broker_addr: String,
    shutdown: CancellationToken,
) {
    let cfg = state.config();
    let mut controllers = Controllers {
        client: Arc::clone(&client),
        addrs: cfg.ha.controller_addrs(),
        leader: None,
    };
    // An id first: nothing else can be asked without one.
    let id = loop {
        match identity(&cfg, &mut controllers, &broker_addr).await {
            Ok(id) => break id,
            Err(e) => {
                tracing::warn!(cause = %e, "cannot take an id from the controllers; trying again in 1 s");
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    };
    tracing::info!(broker = %cfg.broker.broker_name, id, "broker id in its group");
    tokio::spawn(beat(
        Arc::clone(&state),
        Arc::clone(&client),
        broker_addr.clone(),
        id,
        shutdown.clone(),
    ));
    let period = Duration::from_millis(cfg.ha.sync_broker_metadata_period);
    let review_every = Duration::from_millis(cfg.ha.check_sync_state_set_period.min(500));
    let mut registered = false;
    let mut known: Option<Replicas> = None;
    let mut review = Review::default();
    let mut next_sync = Instant::now();
    loop {
        if Instant::now() >= next_sync {
            match sync_role(&state, &mut controllers, &broker_addr, id, &mut registered).await {
                Ok(replicas) => {
                    if known.as_ref().map(|k| k.master_epoch) != Some(replicas.master_epoch) {
                        review = Review::default();
                    }
                    known = Some(replicas);
                }
                Err(e) => {
                    tracing::warn!(cause = %e, "cannot learn the group's master from the controllers");
                    registered = false;
                }
            }
            next_sync = Instant::now() + period;
        }
        if let Some(k) = known.as_mut().filter(|k| k.master == Some(id)) {
            if let Err(e) = review_in_sync_set(&state, &mut controllers, id, k, &mut review).await {
                tracing::warn!(cause = %e, "cannot change the in-sync replica set");
                next_sync = Instant::now();
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = state.ha.poked() => next_sync = Instant::now(),
            () = tokio::time::sleep(review_every) => {}
        }
    }
}

/// The broker's id in its group: from the identity file, else applied for.
async fn identity(
    cfg: &BrokerConfig,
    controllers: &mut Controllers,
    broker_addr: &str,
) -> Result<i64, String> {
    let path = cfg.store.store_path_root_dir.join(IDENTITY_FILE);
    let kept = read_identity(&path)?;
    let b = &cfg.broker;
    if let Some(kept) = &kept {
        if kept.cluster_name != b.broker_cluster_name || kept.broker_name != b.broker_name {
            return Err(format!(
                "{} belongs to broker {} of cluster {}, not {} of {}",
                path.display(),
                kept.broker_name,
                kept.cluster_name,
                b.broker_name,
                b.broker_cluster_name
            ));
        }
    }
    let identity = match kept {
        Some(kept) => kept,
        None => {
            let answer = controllers
                .call(request(
                    RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
                    &GetNextBrokerIdRequestHeader {
                        cluster_name: Some(b.broker_cluster_name.clone()),
                        broker_name: b.broker_name.clone(),
                    },
                ))
                .await?;
            let next = answer
                .decode_header::<GetNextBrokerIdResponseHeader>()
                .map_err(|e| refused(&format!("next broker id ({e})"), &answer))?
                .next_broker_id;
            Identity {
                cluster_name: b.broker_cluster_name.clone(),
                broker_name: b.broker_name.clone(),
                broker_id: next,
                register_check_code: format!("{broker_addr};{}", message_model::now_ms()),
            }
        }
    };
    let answer = controllers
        .call(request(
            RequestCode::CONTROLLER_APPLY_BROKER_ID,
            &ApplyBrokerIdRequestHeader {
                cluster_name: Some(identity.cluster_name.clone()),
                broker_name: identity.broker_name.clone(),
                applied_broker_id: identity.broker_id,
                register_check_code: identity.register_check_code.clone(),
            },
        ))
        .await?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return Err(refused(
            &format!("apply for id {}", identity.broker_id),
            &answer,
        ));
    }
    let bytes = serde_json::to_vec_pretty(&identity).map_err(|e| e.to_string())?;
    write_atomically(&path, &bytes).map_err(|e| format!("write {}: {e}", path.display()))?;
    Ok(identity.broker_id)
}

fn read_identity(path: &Path) -> Result<Option<Identity>, String> {
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| format!("{} is not a broker identity: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("read {}: {e}", path.display())),
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Registers (once per leader), learns the master, asks for an election
/// when there is none, and takes the role it names.
async fn sync_role(
    state: &Arc<BrokerState>,
    controllers: &mut Controllers,
    broker_addr: &str,
    id: i64,
    registered: &mut bool,
) -> Result<Replicas, String> {
    let cfg = state.config();
    let b = &cfg.broker;
    if !*registered {
        let answer = controllers
            .call(request(
                RequestCode::CONTROLLER_REGISTER_BROKER,
                &RegisterBrokerToControllerRequestHeader {
                    cluster_name: Some(b.broker_cluster_name.clone()),
                    broker_name: b.broker_name.clone(),
                    broker_id: id,
                    broker_address: broker_addr.to_owned(),
                    invoke_time: Some(message_model::now_ms()),
                },
            ))
            .await?;
        if answer.response_code() != ResponseCode::SUCCESS {
            return Err(refused("register", &answer));
        }
        *registered = true;
    }
    let answer = controllers
        .call(request(
            RequestCode::CONTROLLER_GET_REPLICA_INFO,
            &GetReplicaInfoRequestHeader {
                broker_name: b.broker_name.clone(),
            },
        ))
        .await?;
    if answer.response_code() != ResponseCode::SUCCESS {
        *registered = false;
        return Err(refused("replica info", &answer));
    }
    let h = answer
        .decode_header::<GetReplicaInfoResponseHeader>()
        .map_err(|e| e.to_string())?;
    let set: SyncStateSet = from_json(&answer.body).map_err(|e| e.to_string())?;
    let mut replicas = Replicas {
        master: h.master_broker_id,
        master_address: h.master_address,
        master_epoch: h.master_epoch.unwrap_or(0),
        sync_state_set: set.sync_state_set.into_iter().collect(),
        sync_state_set_epoch: set.sync_state_set_epoch,
    };
    if replicas.master.is_none() {
        replicas = elect(controllers, &cfg, id, replicas).await?;
    }
    apply_role(state, &controllers.client, id, &replicas).await?;
    Ok(replicas)
}

async fn elect(
    controllers: &mut Controllers,
    cfg: &BrokerConfig,
    id: i64,
    mut replicas: Replicas,
) -> Result<Replicas, String> {
    let b = &cfg.broker;
    let answer = controllers
        .call(request(
            RequestCode::CONTROLLER_ELECT_MASTER,
            &ElectMasterRequestHeader {
                cluster_name: Some(b.broker_cluster_name.clone()),
                broker_name: b.broker_name.clone(),
                broker_id: Some(id),
                designate_elect: Some(false),
                invoke_time: Some(message_model::now_ms()),
            },
        ))
        .await?;
    let code = answer.response_code();
    if code != ResponseCode::SUCCESS && code != ResponseCode::CONTROLLER_MASTER_STILL_EXIST {
        return Err(refused("elect", &answer));
    }
    let h = answer
        .decode_header::<ElectMasterResponseHeader>()
        .map_err(|e| e.to_string())?;
    let body: remoting_protocol::body::ElectMasterResponseBody =
        from_json(&answer.body).map_err(|e| e.to_string())?;
    replicas.master = h.master_broker_id;
    replicas.master_address = h.master_address;
    replicas.master_epoch = h.master_epoch.unwrap_or(replicas.master_epoch);
    replicas.sync_state_set = body.sync_state_set.into_iter().collect();
    replicas.sync_state_set_epoch = h
        .sync_state_set_epoch
        .unwrap_or(replicas.sync_state_set_epoch);
    Ok(replicas)
}

/// Takes the role the controllers named.
async fn apply_role(
    state: &Arc<BrokerState>,
    client: &RemotingClient,
    id: i64,
    replicas: &Replicas,
) -> Result<(), String> {
    let Some(master) = replicas.master else {
        return Ok(());
    };
    let was = (state.ha.role(), state.ha.master_epoch());
    if master == id {
        state
            .ha
            .become_master(id, replicas.master_epoch, &replicas.sync_state_set)
            .await
            .map_err(|e| e.to_string())?;
        // A lease for the new epoch comes with the next beat: send it now.
        state.ha.beat_now();
        crate::start_writer_threads(state);
        if was != (state.ha.role(), state.ha.master_epoch()) {
            // It writes the topic table: off the runtime's threads.
            let s = Arc::clone(state);
            if let Err(e) = tokio::task::spawn_blocking(move || adopt_topics(&s)).await {
                tracing::error!(cause = %e, "the topic adoption stopped");
            }
            // Timers from the progress copied from the old master.
            state.timers.resume();
        }
    } else {
        let Some(master_addr) = replicas.master_address.clone() else {
            return Ok(());
        };
        let ha = master_ha_address(client, &master_addr).await?;
        // A slave delivers no timers; it copies its master's progress.
        state.timers.pause();
        state
            .ha
            .become_slave(id, replicas.master_epoch, &ha, &master_addr)
            .await;
    }
    if was != (state.ha.role(), state.ha.master_epoch()) {
        // Registered again with the name servers under the new role's id:
        // 0 for the master, its own for a slave.
        state.set_registered_broker_id(if master == id { 0 } else { id });
        state.topics_changed.notify_one();
    }
    Ok(())
}

/// Makes every queue this new master holds messages in readable: a slave
/// copies its master's topics periodically, and a topic created (or given
/// more queues) just before the switch would otherwise be refused to its
/// consumers (`TOPIC_NOT_EXIST`), or its new queues left out of its route,
/// though the messages are here.
fn adopt_topics(state: &BrokerState) {
    let mut queues: BTreeMap<String, i32> = BTreeMap::new();
    for (topic, queue_id, _) in state.store.queues() {
        let n = queues.entry(topic).or_insert(0);
        *n = (*n).max(queue_id + 1);
    }
    match state.topics.adopt_queues(queues) {
        Ok(adopted) if !adopted.is_empty() => {
            tracing::warn!(topics = ?adopted, "topics created or given more readable queues from the queues in the store: the old master's configuration had not been copied yet");
            state.topics_changed.notify_one();
        }
        Ok(_) => {}
        Err(e) => tracing::error!(cause = %e, "cannot make every queue in the store readable"),
    }
}

/// The master's HA address: its host, and the HA port its configuration
/// reports (`GET_BROKER_CONFIG`).
async fn master_ha_address(client: &RemotingClient, master_addr: &str) -> Result<String, String> {
    let answer = client
        .invoke(
            master_addr,
            RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
            CALL_TIMEOUT,
        )
        .await
        .map_err(|e| format!("ask master {master_addr} for its HA port: {e}"))?;
    let port = decode_config_text(&answer.body)
        .map_err(|e| format!("master {master_addr}'s configuration: {e}"))?
        .get("haListenPort")
        .and_then(|v| v.trim().parse::<u16>().ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| format!("master {master_addr} reports no HA port"))?;
    let host = master_addr.rsplit_once(':').map_or(master_addr, |(h, _)| h);
    Ok(format!("{host}:{port}"))
}

/// As master: brings the controllers' in-sync set in line with the
/// replicas that hold what the master acknowledged (see [`review`]); the
/// master stops waiting for a member only once the controllers agreed.
async fn review_in_sync_set(
    state: &BrokerState,
    controllers: &mut Controllers,
    id: i64,
    known: &mut Replicas,
    review: &mut Review,
) -> Result<(), String> {
    let Some(master) = state.ha.master() else {
        return Ok(());
    };
    let cfg = state.config();
    let sync = master.sync_set();
    let end = state.store.max_physical_offset();
    let grace = Duration::from_millis(cfg.ha.ha_max_time_slave_not_catchup);
    let acked: Vec<(i64, u64)> = master
        .replicas()
        .into_iter()
        .filter(|r| !r.async_learner)
        .map(|r| (r.broker_id, r.acked))
        .collect();
    let desired = review.desired(
        id,
        &acked,
        end,
        &known.sync_state_set,
        Instant::now(),
        grace,
    );
    sync.set_members(review.waiting(&known.sync_state_set));
    if desired == known.sync_state_set {
        return Ok(());
    }
    let answer = controllers
        .call(
            request(
                RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
                &AlterSyncStateSetRequestHeader {
                    broker_name: cfg.broker.broker_name.clone(),
                    master_broker_id: id,
                    master_epoch: known.master_epoch,
                    invoke_time: Some(message_model::now_ms()),
                },
            )
            .with_body(to_json(&SyncStateSet {
                sync_state_set: desired.iter().copied().collect(),
                sync_state_set_epoch: known.sync_state_set_epoch,
            })),
        )
        .await?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return Err(refused("alter the in-sync set", &answer));
    }
    let epoch = answer
        .decode_header::<AlterSyncStateSetResponseHeader>()
        .map_err(|e| e.to_string())?
        .new_sync_state_set_epoch;
    review.joined(&desired);
    sync.set_members(review.waiting(&desired));
    tracing::info!(in_sync = ?desired, epoch, "in-sync replica set changed");
    known.sync_state_set = desired;
    known.sync_state_set_epoch = epoch;
    Ok(())
}

/// Beats to every controller every `brokerHeartbeatInterval`; a lease in
/// the leader's answer is the master's to write with.
async fn beat(
    state: Arc<BrokerState>,
    client: Arc<RemotingClient>,
    broker_addr: String,
    id: i64,
    shutdown: CancellationToken,
) {
    let cfg = state.config();
    let every = Duration::from_millis(cfg.ha.broker_heartbeat_interval);
    let addrs = cfg.ha.controller_addrs();
    loop {
        let header = BrokerHeartbeatRequestHeader {
            cluster_name: cfg.broker.broker_cluster_name.clone(),
            broker_addr: broker_addr.clone(),
            broker_name: cfg.broker.broker_name.clone(),
            broker_id: Some(id),
            epoch: Some(state.ha.last_epoch()),
            max_offset: i64::try_from(state.store.max_physical_offset()).ok(),
            confirm_offset: state
                .store
                .confirm_offset()
                .and_then(|c| i64::try_from(c).ok()),
            heartbeat_timeout_mills: i64::try_from(cfg.ha.controller_heart_beat_timeout_mills).ok(),
            election_priority: Some(cfg.ha.broker_election_priority),
        };
        for addr in &addrs {
            let client = Arc::clone(&client);
            let state = Arc::clone(&state);
            let addr = addr.clone();
            let request = request(RequestCode::BROKER_HEARTBEAT, &header);
            tokio::spawn(async move {
                let sent = Instant::now();
                let Ok(answer) = client.invoke(&addr, request, every).await else {
                    return;
                };
                let lease = answer
                    .ext(LEASE_MILLIS)
                    .and_then(|ms| ms.parse::<u64>().ok())
                    .zip(answer.ext(LEASE_EPOCH).and_then(|e| e.parse::<i32>().ok()));
                if let (Some((millis, epoch)), Some(held)) = (lease, state.ha.lease()) {
                    held.grant(sent, millis, epoch);
                }
            });
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = state.ha.beat_requested() => {}
            () = tokio::time::sleep(every) => {}
        }
    }
}
