//! Three controllers on loopback: leader election, RocketMQ's controller
//! requests, a master replaced only after its lease, and state kept across
//! restarts.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use controller::{testing::LocalGroup, LEASE_EPOCH, LEASE_MILLIS};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    body::{from_json, to_json, BrokerReplicasInfo, ElectMasterResponseBody, SyncStateSet},
    header::{
        AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader,
        ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
        ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
        GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
        RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader,
    },
    CommandHeader, RemotingCommand, RequestCode, ResponseCode,
};

const T: Duration = Duration::from_secs(5);

async fn wait_until<F: std::future::Future<Output = bool>>(
    what: &str,
    mut done: impl FnMut() -> F,
) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done().await {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Group {
    _dir: tempfile::TempDir,
    inner: LocalGroup,
}

impl std::ops::Deref for Group {
    type Target = LocalGroup;
    fn deref(&self) -> &LocalGroup {
        &self.inner
    }
}

impl std::ops::DerefMut for Group {
    fn deref_mut(&mut self) -> &mut LocalGroup {
        &mut self.inner
    }
}

impl Group {
    async fn start(lease: Duration) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let inner = LocalGroup::start(dir.path().to_owned(), 3, lease).await;
        Self { _dir: dir, inner }
    }
}

async fn call(
    client: &RemotingClient,
    addr: &str,
    code: RequestCode,
    header: Option<&dyn Fn(&mut RemotingCommand)>,
    body: Option<Vec<u8>>,
) -> RemotingCommand {
    let mut request = RemotingCommand::request(code);
    if let Some(set) = header {
        set(&mut request);
    }
    if let Some(body) = body {
        request = request.with_body(body);
    }
    client.invoke(addr, request, T).await.unwrap()
}

fn with<H: CommandHeader + 'static>(h: H) -> impl Fn(&mut RemotingCommand) {
    move |r: &mut RemotingCommand| {
        for (k, v) in h.to_ext_fields() {
            r.set_ext(k, v);
        }
    }
}

fn beat(name: &str, id: i64, addr: &str) -> BrokerHeartbeatRequestHeader {
    BrokerHeartbeatRequestHeader {
        cluster_name: "c".into(),
        broker_addr: addr.into(),
        broker_name: name.into(),
        broker_id: Some(id),
        epoch: Some(0),
        max_offset: Some(0),
        confirm_offset: Some(0),
        heartbeat_timeout_mills: Some(60_000),
        election_priority: None,
    }
}

/// Applies for an id, registers and beats once; returns the broker's id.
async fn join(client: &RemotingClient, leader: &str, name: &str, addr: &str) -> i64 {
    let next = call(
        client,
        leader,
        RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
        Some(&with(GetNextBrokerIdRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: name.into(),
        })),
        None,
    )
    .await;
    assert_eq!(next.response_code(), ResponseCode::SUCCESS, "{next:?}");
    let id = next
        .decode_header::<GetNextBrokerIdResponseHeader>()
        .unwrap()
        .next_broker_id;
    let applied = call(
        client,
        leader,
        RequestCode::CONTROLLER_APPLY_BROKER_ID,
        Some(&with(ApplyBrokerIdRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: name.into(),
            applied_broker_id: id,
            register_check_code: format!("{addr};1"),
        })),
        None,
    )
    .await;
    assert_eq!(
        applied.response_code(),
        ResponseCode::SUCCESS,
        "{applied:?}"
    );
    let registered = call(
        client,
        leader,
        RequestCode::CONTROLLER_REGISTER_BROKER,
        Some(&with(RegisterBrokerToControllerRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: name.into(),
            broker_id: id,
            broker_address: addr.into(),
            invoke_time: None,
        })),
        None,
    )
    .await;
    assert_eq!(
        registered.response_code(),
        ResponseCode::SUCCESS,
        "{registered:?}"
    );
    let beat = call(
        client,
        leader,
        RequestCode::BROKER_HEARTBEAT,
        Some(&with(beat(name, id, addr))),
        None,
    )
    .await;
    assert_eq!(beat.response_code(), ResponseCode::SUCCESS);
    id
}

async fn elect(
    client: &RemotingClient,
    leader: &str,
    name: &str,
    id: i64,
    designate: bool,
) -> RemotingCommand {
    call(
        client,
        leader,
        RequestCode::CONTROLLER_ELECT_MASTER,
        Some(&with(ElectMasterRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: name.into(),
            broker_id: Some(id),
            designate_elect: Some(designate),
            invoke_time: None,
        })),
        None,
    )
    .await
}

async fn replica_info(client: &RemotingClient, addr: &str, name: &str) -> RemotingCommand {
    call(
        client,
        addr,
        RequestCode::CONTROLLER_GET_REPLICA_INFO,
        Some(&with(GetReplicaInfoRequestHeader {
            broker_name: name.into(),
        })),
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_controllers_serve_rocketmq_controller_requests_and_agree() {
    let group = Group::start(Duration::from_secs(5)).await;
    let leader = group.leader().await;
    let leader_addr = group.addrs[leader].clone();
    let client = RemotingClient::new(ClientOptions::default());
    // Every controller names the leader.
    for addr in &group.addrs {
        let meta = call(
            &client,
            addr,
            RequestCode::CONTROLLER_GET_METADATA_INFO,
            None,
            None,
        )
        .await;
        let h = meta.decode_header::<GetMetaDataResponseHeader>().unwrap();
        assert_eq!(
            h.controller_leader_address.as_deref(),
            Some(leader_addr.as_str())
        );
        assert_eq!(h.controller_leader_id, Some(format!("n{leader}")));
        assert_eq!(h.is_leader, Some(addr == &leader_addr));
        assert_eq!(
            h.peers
                .unwrap()
                .split(';')
                .filter(|p| !p.is_empty())
                .count(),
            3
        );
    }
    // A follower refuses what only the leader answers, and names it.
    let follower = &group.addrs[(leader + 1) % 3];
    let refused = replica_info(&client, follower, "b").await;
    assert_eq!(refused.response_code(), ResponseCode::CONTROLLER_NOT_LEADER);
    assert!(refused.remark.unwrap().contains(&leader_addr));

    // Two brokers join; the first to ask is the first master.
    let one = join(&client, &leader_addr, "b", "10.0.0.1:10911").await;
    let two = join(&client, &leader_addr, "b", "10.0.0.2:10911").await;
    assert_eq!((one, two), (1, 2));
    let elected = elect(&client, &leader_addr, "b", one, false).await;
    assert_eq!(
        elected.response_code(),
        ResponseCode::SUCCESS,
        "{elected:?}"
    );
    let h = elected
        .decode_header::<ElectMasterResponseHeader>()
        .unwrap();
    assert_eq!(h.master_broker_id, Some(1));
    assert_eq!(h.master_address.as_deref(), Some("10.0.0.1:10911"));
    assert_eq!((h.master_epoch, h.sync_state_set_epoch), (Some(1), Some(1)));
    let body: ElectMasterResponseBody = from_json(&elected.body).unwrap();
    assert_eq!(body.sync_state_set, [1]);
    assert_eq!(body.broker_member_group.unwrap().broker_addrs.len(), 2);
    // Asking again: the master is still alive.
    let again = elect(&client, &leader_addr, "b", two, false).await;
    assert_eq!(
        again.response_code(),
        ResponseCode::CONTROLLER_MASTER_STILL_EXIST
    );

    // The master adds the slave to the in-sync set; a stale epoch is fenced.
    let alter = |set_epoch: i32| {
        let header = AlterSyncStateSetRequestHeader {
            broker_name: "b".into(),
            master_broker_id: 1,
            master_epoch: 1,
            invoke_time: None,
        };
        let body = to_json(&SyncStateSet {
            sync_state_set: vec![1, 2],
            sync_state_set_epoch: set_epoch,
        });
        (header, body)
    };
    let (header, body) = alter(0);
    let fenced = call(
        &client,
        &leader_addr,
        RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
        Some(&with(header)),
        Some(body),
    )
    .await;
    assert_eq!(
        fenced.response_code(),
        ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    );
    let (header, body) = alter(1);
    let altered = call(
        &client,
        &leader_addr,
        RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
        Some(&with(header)),
        Some(body),
    )
    .await;
    assert_eq!(
        altered.response_code(),
        ResponseCode::SUCCESS,
        "{altered:?}"
    );
    let h = altered
        .decode_header::<AlterSyncStateSetResponseHeader>()
        .unwrap();
    assert_eq!(h.new_sync_state_set_epoch, 2);

    // What a broker and an operator read back.
    let info = replica_info(&client, &leader_addr, "b").await;
    let h = info
        .decode_header::<GetReplicaInfoResponseHeader>()
        .unwrap();
    assert_eq!((h.master_broker_id, h.master_epoch), (Some(1), Some(1)));
    let set: SyncStateSet = from_json(&info.body).unwrap();
    assert_eq!(
        (set.sync_state_set, set.sync_state_set_epoch),
        (vec![1, 2], 2)
    );
    let data = call(
        &client,
        &leader_addr,
        RequestCode::CONTROLLER_GET_SYNC_STATE_DATA,
        None,
        Some(br#"["b","nope"]"#.to_vec()),
    )
    .await;
    let table: BrokerReplicasInfo = from_json(&data.body).unwrap();
    assert_eq!(table.replicas_info_table.len(), 1);
    let b = &table.replicas_info_table["b"];
    assert_eq!(b.in_sync_replicas.len(), 2);
    assert!(b.in_sync_replicas.iter().all(|r| r.alive));
    // A re-registration reports the live master.
    let again = call(
        &client,
        &leader_addr,
        RequestCode::CONTROLLER_REGISTER_BROKER,
        Some(&with(RegisterBrokerToControllerRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            broker_id: 2,
            broker_address: "10.0.0.2:10911".into(),
            invoke_time: None,
        })),
        None,
    )
    .await;
    let h = again
        .decode_header::<RegisterBrokerToControllerResponseHeader>()
        .unwrap();
    assert_eq!(h.master_address.as_deref(), Some("10.0.0.1:10911"));

    // Every controller applied the same record.
    let expected = group.nodes[leader]
        .as_ref()
        .unwrap()
        .record()
        .read(Clone::clone);
    wait_until("every controller holds the leader's record", || {
        std::future::ready(
            group
                .nodes
                .iter()
                .flatten()
                .all(|n| n.record().read(|r| *r == expected)),
        )
    })
    .await;
    client.close_all().await;
    for node in group.nodes.iter().flatten() {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_master_is_replaced_only_after_its_lease_has_run_out() {
    let lease = Duration::from_secs(5);
    let group = Group::start(lease).await;
    let leader_addr = group.addrs[group.leader().await].clone();
    let admin = RemotingClient::new(ClientOptions::default());
    let master_conn = RemotingClient::new(ClientOptions::default());
    let slave_conn = RemotingClient::new(ClientOptions::default());
    join(&master_conn, &leader_addr, "b", "10.0.0.1:10911").await;
    join(&slave_conn, &leader_addr, "b", "10.0.0.2:10911").await;
    assert_eq!(
        elect(&admin, &leader_addr, "b", 1, false)
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let header = AlterSyncStateSetRequestHeader {
        broker_name: "b".into(),
        master_broker_id: 1,
        master_epoch: 1,
        invoke_time: None,
    };
    let body = to_json(&SyncStateSet {
        sync_state_set: vec![1, 2],
        sync_state_set_epoch: 1,
    });
    let altered = call(
        &admin,
        &leader_addr,
        RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
        Some(&with(header)),
        Some(body),
    )
    .await;
    assert_eq!(altered.response_code(), ResponseCode::SUCCESS);

    // The master's beat is answered with a lease for its epoch; the slave's
    // is not.
    let sent = Instant::now();
    let granted = call(
        &master_conn,
        &leader_addr,
        RequestCode::BROKER_HEARTBEAT,
        Some(&with(beat("b", 1, "10.0.0.1:10911"))),
        None,
    )
    .await;
    assert_eq!(granted.ext(LEASE_MILLIS), Some("5000"));
    assert_eq!(granted.ext(LEASE_EPOCH), Some("1"));
    let slave_beat = call(
        &slave_conn,
        &leader_addr,
        RequestCode::BROKER_HEARTBEAT,
        Some(&with(beat("b", 2, "10.0.0.2:10911"))),
        None,
    )
    .await;
    assert_eq!(slave_beat.ext(LEASE_MILLIS), None);

    // While the lease may run, an operator cannot move the master.
    let moved = elect(&admin, &leader_addr, "b", 2, true).await;
    assert_eq!(
        moved.response_code(),
        ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
        "{moved:?}"
    );
    assert!(moved.remark.unwrap().contains("lease"));

    // The master's connection drops (it died): the slave takes over, but not
    // before the lease the master was granted has run out.
    master_conn.close_all().await;
    wait_until("the slave is elected", || async {
        let info = replica_info(&admin, &leader_addr, "b").await;
        let h = info
            .decode_header::<GetReplicaInfoResponseHeader>()
            .unwrap();
        h.master_broker_id == Some(2)
    })
    .await;
    assert!(
        sent.elapsed() >= lease,
        "elected {:?} after the lease was granted",
        sent.elapsed()
    );
    let info = replica_info(&admin, &leader_addr, "b").await;
    let h = info
        .decode_header::<GetReplicaInfoResponseHeader>()
        .unwrap();
    assert_eq!(h.master_epoch, Some(2));
    assert_eq!(h.master_address.as_deref(), Some("10.0.0.2:10911"));
    let set: SyncStateSet = from_json(&info.body).unwrap();
    assert_eq!(set.sync_state_set, [2]);
    for c in [&admin, &slave_conn] {
        c.close_all().await;
    }
    for node in group.nodes.iter().flatten() {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_record_survives_losing_the_leader_and_restarting_every_controller() {
    let mut group = Group::start(Duration::from_secs(5)).await;
    let leader = group.leader().await;
    let client = RemotingClient::new(ClientOptions::default());
    join(&client, &group.addrs[leader].clone(), "b", "10.0.0.1:10911").await;
    let expected = group.nodes[leader]
        .as_ref()
        .unwrap()
        .record()
        .read(Clone::clone);
    assert_eq!(expected.groups["b"].members.len(), 1);

    // The leader stops: the two others elect one of them and still answer.
    group.stop(leader).await;
    let second = group.leader().await;
    assert_ne!(second, leader);
    client.close_all().await;
    let joined = join(&client, &group.addrs[second].clone(), "b", "10.0.0.2:10911").await;
    assert_eq!(joined, 2);
    // The old leader comes back and catches up.
    group.restart(leader).await;
    let expected = group.nodes[second]
        .as_ref()
        .unwrap()
        .record()
        .read(Clone::clone);
    let back = group.nodes[leader].clone().unwrap();
    wait_until("the restarted controller catches up", || {
        std::future::ready(back.record().read(|r| *r == expected))
    })
    .await;

    // Every controller stops; from their files they come back with the record.
    for i in 0..3 {
        group.stop(i).await;
    }
    for i in 0..3 {
        group.restart(i).await;
    }
    let leader = group.leader().await;
    client.close_all().await;
    let info = replica_info(&client, &group.addrs[leader].clone(), "b").await;
    assert_eq!(info.response_code(), ResponseCode::SUCCESS, "{info:?}");
    wait_until("every restarted controller holds the record", || {
        std::future::ready(
            group
                .nodes
                .iter()
                .flatten()
                .all(|n| n.record().read(|r| *r == expected)),
        )
    })
    .await;
    client.close_all().await;
    for i in 0..3 {
        group.stop(i).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_cut_off_from_its_followers_grants_no_lease() {
    let mut group = Group::start(Duration::from_secs(5)).await;
    let leader = group.leader().await;
    let leader_addr = group.addrs[leader].clone();
    let client = RemotingClient::new(ClientOptions::default());
    join(&client, &leader_addr, "b", "10.0.0.1:10911").await;
    assert_eq!(
        elect(&client, &leader_addr, "b", 1, false)
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let set_beat = with(beat("b", 1, "10.0.0.1:10911"));
    let beat_once = || {
        call(
            &client,
            &leader_addr,
            RequestCode::BROKER_HEARTBEAT,
            Some(&set_beat),
            None,
        )
    };
    assert_eq!(beat_once().await.ext(LEASE_MILLIS), Some("5000"));
    // Both followers go: the leader may still think it leads, but it
    // cannot have a quorum confirm it, so it grants no lease.
    for i in 0..3 {
        if i != leader {
            group.stop(i).await;
        }
    }
    let answer = beat_once().await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    assert_eq!(answer.ext(LEASE_MILLIS), None, "{answer:?}");
    client.close_all().await;
    group.stop(leader).await;
}
