//! Replicated groups under network partitions: three controllers and two
//! groups of three brokers, every process in a network namespace of its
//! own on one bridge (see `netns`), the producer and the checks in the
//! host's namespace. The cuts hit the first group. Each case cuts links
//! cycle after cycle under the producer's load, heals, and waits until the
//! group is back in sync; at the end every acknowledged message must be on
//! the last master. A master cut off from the controllers loses its lease
//! and refuses sends before another is elected, so two masters never
//! accept writes together: each case checks that the old master, reached
//! directly, refuses a send.
//!
//! - the first group's master alone, cut off from everyone: the second
//!   group acknowledges every send meanwhile;
//! - the master and one slave cut off from the controllers (they still
//!   reach each other and the producer);
//! - one slave cut off from everyone;
//! - a one-way cut: the master hears nothing from the controllers, while
//!   what it sends them arrives.

use super::{
    netns::Net,
    replication::{conclude, replication_env, Cluster},
    *,
};

/// Seconds within which a new master takes sends after a partition (99th
/// percentile over a full run's cycles).
const FAILOVER_BOUND: f64 = 15.0;

/// A direct send to `addr` is refused: it is not a master holding a lease.
async fn assert_refuses_sends(addr: &str, topic: &str, what: &str) {
    let direct = RemotingClient::new(ClientOptions::default());
    let answer = direct
        .invoke(
            addr,
            e2e_tests::send_request(topic, 0),
            Duration::from_secs(10),
        )
        .await;
    direct.close_all().await;
    let answer = answer.unwrap();
    assert_ne!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{what}: the old master {addr} took a send while another is master: {answer:?}"
    );
}

/// The three controllers' addresses.
fn controller_ips(cluster: &Cluster) -> Vec<String> {
    (0..3).map(|i| cluster.controllers.ip(i)).collect()
}

/// Every address but node `me`'s, the test process's included.
fn everyone_but(net: &Net, me: usize) -> Vec<String> {
    (0..net.nodes())
        .filter(|i| *i != me)
        .map(|i| net.ip(i))
        .chain([net.root_ip()])
        .collect()
}

/// Starts the cluster in namespaces: controllers on nodes 0-2, the first
/// group's brokers on nodes 3-5, the second's on 6-8.
async fn start(case: &str, name: &str) -> Option<(E2eEnv, Cluster)> {
    let (env, ns_bin) = replication_env(case)?;
    let cluster = Cluster::start_in_namespaces(&env, &ns_bin, case, name).await?;
    Some((env, cluster))
}

/// Waits until the controllers name a master other than `old`, of a later
/// epoch than `epoch`; returns it.
async fn another_master(cluster: &Cluster, old: &str, epoch: i32, what: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((m, e)) = cluster.controllers.master(&cluster.client).await {
            if m != old && e > epoch {
                return m;
            }
        }
        assert!(Instant::now() < deadline, "{what}: no other master elected");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// After a cut at `cut`: waits for another master than `old` and 200
/// sends acknowledged since, and returns the longest pause between two
/// acknowledgements since the cut, in seconds. (The old master may go on
/// acknowledging until its lease ends, so the first acknowledgement after
/// the cut says nothing.)
async fn failover_pause(
    cluster: &Cluster,
    cut: Instant,
    old: &str,
    epoch: i32,
    what: &str,
) -> (String, f64) {
    let now = another_master(cluster, old, epoch, what).await;
    cluster.wait_acked(200, what).await;
    (now, cluster.longest_pause_since(cut).as_secs_f64())
}

/// The figure of most cases.
const LONGEST_PAUSE: &str = "longest pause between acknowledgements";

/// The first group's master, cut off from everyone: another is elected and
/// takes sends; healed, the old one refuses them and follows. The second
/// group, sent to directly every 50 ms all along, acknowledges every send
/// (a fault in one group stalls no other).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_partition_of_the_master_alone() {
    let case = "replication: partition, master alone";
    let Some((env, cluster)) = start(case, "part-master").await else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let other = cluster.groups[1].clone();
    let mut recovered = Vec::new();
    let mut probes = 0;
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, m) = cluster.settled_master(&what).await;
        let (other_master, _) = cluster
            .controllers
            .master_of(&cluster.client, &other)
            .await
            .unwrap();
        let net = cluster.net.as_ref().unwrap();
        net.isolate(3 + m, &everyone_but(net, 3 + m));
        let cut = Instant::now();
        let done = std::sync::atomic::AtomicBool::new(false);
        let failover = async {
            let pause = failover_pause(&cluster, cut, &master, epoch, &what).await;
            done.store(true, Ordering::Relaxed);
            pause
        };
        let probe = async {
            let mut codes = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let request = e2e_tests::send_request(&cluster.topic, codes.len());
                let answer = cluster
                    .client
                    .invoke(&other_master, request, Duration::from_secs(5))
                    .await;
                codes.push(answer.map(|a| a.response_code()).map_err(|e| e.to_string()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            codes
        };
        let ((_, pause), codes) = tokio::join!(failover, probe);
        recovered.push(pause);
        net.heal();
        assert_refuses_sends(&master, &cluster.topic, &what).await;
        let refused: Vec<_> = codes
            .iter()
            .filter(|c| **c != Ok(ResponseCode::SUCCESS))
            .collect();
        assert!(
            refused.is_empty(),
            "{what}: {other} did not acknowledge {} of {} sends during the failover: {refused:?}",
            refused.len(),
            codes.len()
        );
        probes += codes.len();
    }
    let label = format!(
        "{probes} direct sends to {other} during the failovers, all acknowledged; {LONGEST_PAUSE}"
    );
    conclude(
        case,
        &env,
        cluster,
        cycles,
        (&label, &recovered),
        Some(FAILOVER_BOUND),
    )
    .await;
}

/// The master and one slave, cut off from the controllers but not from
/// each other or the producer: the third broker is elected and stores
/// sends; the old master, still reachable, refuses them meanwhile. The
/// figure is the time from the cut until the new master stores a send.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_partition_of_the_master_and_a_slave_from_the_controllers() {
    let case = "replication: partition, master and a slave from the controllers";
    let Some((env, cluster)) = start(case, "part-pair").await else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let mut recovered = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, m) = cluster.settled_master(&what).await;
        let (slave, third) = ((m + 1) % 3, (m + 2) % 3);
        let net = cluster.net.as_ref().unwrap();
        let controllers = controller_ips(&cluster);
        net.isolate(3 + m, &controllers);
        net.isolate(3 + slave, &controllers);
        let cut = Instant::now();
        // The new master has no slave in sync until the partition heals:
        // it stores sends (`SLAVE_NOT_AVAILABLE`) without acknowledging
        // them `SEND_OK`.
        let now = cluster.new_master_storing(&master, epoch, &what).await;
        recovered.push(cut.elapsed().as_secs_f64());
        assert_eq!(now, cluster.brokers[third].addr, "{what}");
        assert_refuses_sends(&master, &cluster.topic, &what).await;
        net.heal();
    }
    conclude(
        case,
        &env,
        cluster,
        cycles,
        ("the new master storing sends after", &recovered),
        Some(FAILOVER_BOUND),
    )
    .await;
}

/// One slave, cut off from everyone: the master drops it from the in-sync
/// set and goes on; healed, it catches up and is in sync again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_partition_of_one_slave() {
    let case = "replication: partition, one slave";
    let Some((env, cluster)) = start(case, "part-slave").await else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let mut pauses = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, m) = cluster.settled_master(&what).await;
        let slave = 3 + (m + 1) % 3;
        let net = cluster.net.as_ref().unwrap();
        net.isolate(slave, &everyone_but(net, slave));
        let cut = Instant::now();
        cluster.wait_in_sync_count(2, &what).await;
        cluster.wait_acked(200, &what).await;
        pauses.push(cluster.longest_pause_since(cut).as_secs_f64());
        assert_eq!(
            cluster.controllers.master(&cluster.client).await,
            Some((master, epoch)),
            "{what}: the master changed"
        );
        net.heal();
    }
    // No new master here: the pause is the master's wait for the cut-off
    // slave (`haMaxTimeSlaveNotCatchup`) before the controllers drop it.
    conclude(case, &env, cluster, cycles, (LONGEST_PAUSE, &pauses), None).await;
}

/// A one-way cut: the master receives nothing from the controllers while
/// what it sends still reaches them. It hears no lease, so it stops taking
/// sends, and another is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_partition_one_way_from_the_controllers_to_the_master() {
    let case = "replication: one-way cut, controllers to master";
    let Some((env, cluster)) = start(case, "part-oneway").await else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let mut recovered = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, m) = cluster.settled_master(&what).await;
        let net = cluster.net.as_ref().unwrap();
        net.deafen(3 + m, &controller_ips(&cluster));
        let cut = Instant::now();
        let (_, pause) = failover_pause(&cluster, cut, &master, epoch, &what).await;
        recovered.push(pause);
        assert_refuses_sends(&master, &cluster.topic, &what).await;
        net.heal();
    }
    conclude(
        case,
        &env,
        cluster,
        cycles,
        (LONGEST_PAUSE, &recovered),
        Some(FAILOVER_BOUND),
    )
    .await;
}
