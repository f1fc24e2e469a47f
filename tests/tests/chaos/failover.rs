//! More failovers of the first of two replicated groups, each under the
//! producer's load and checked like the other replication cases (every
//! acknowledged message on its group's last master at the end):
//!
//! - kill -9 of the master and of the controller leader at once;
//! - two slaves lost at once (kill -9), the master going on alone;
//! - a topic created, and written to, just before its master is killed;
//! - kill -9 of the master in a group of two replicas;
//! - the milestones of a failover after kill -9 of the master.

use consumer_client::{ConsumerConfig, PullConsumer, PullStatus};
use remoting_protocol::{
    body::{from_json, TopicRouteData},
    header::GetRouteInfoRequestHeader,
};

use super::{
    replication::{conclude, e2e_stores, percentile, replication_env, summary, Cluster, LEASE_MS},
    *,
};

/// SIGKILL of the master and of the controller leader together: a new
/// controller leader is elected, then, once the old master's lease must
/// have ended (the new leader waits a whole lease), a new master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_kill_9_of_the_master_and_the_controller_leader_at_once() {
    let case = "replication: kill -9 master and controller leader";
    let Some((env, ns_bin)) = replication_env(case) else {
        return;
    };
    let cycles = if env.quick { 1 } else { 10 };
    let mut cluster = Cluster::start(&env, &ns_bin, case, "repl-both", 3).await;
    let (mut led, mut writable, mut recovered) = (Vec::new(), Vec::new(), Vec::new());
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, victim) = cluster.settled_master(&what).await;
        let leader = cluster.controllers.leader(&cluster.client).await.unwrap();
        cluster.brokers[victim].kill().unwrap();
        cluster.controllers.kill(leader);
        let killed = Instant::now();
        // A follower that has not noticed yet still names the old leader.
        while cluster
            .controllers
            .leader(&cluster.client)
            .await
            .is_none_or(|now| now == leader)
        {
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "{what}: no new controller leader"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        led.push(killed.elapsed().as_secs_f64());
        // The bound is on the new master taking sends; the producer
        // has one acknowledged a little later (its next route read).
        cluster.new_master_storing(&master, epoch, &what).await;
        writable.push(killed.elapsed().as_secs_f64());
        recovered.push(
            cluster
                .recovered_after(killed, &master, &what)
                .await
                .as_secs_f64(),
        );
        cluster.controllers.spawn(leader);
        cluster.brokers[victim].restart().unwrap();
    }
    let mut sorted = writable.clone();
    sorted.sort_by(f64::total_cmp);
    let p99 = percentile(&sorted, 0.99);
    let quick = env.quick;
    let label = format!(
        "a new controller leader after {}; a new master storing sends after {}; a send \
         acknowledged again after",
        summary(&led),
        summary(&writable)
    );
    conclude(case, &env, cluster, cycles, (&label, &recovered), None).await;
    // Judged on the full run's cycles only, like the master's kill alone.
    assert!(quick || p99 <= 5.0, "{case}: writable after p99 {p99:.2} s");
}

/// Both slaves killed at once: the master, alone in sync, goes on storing
/// sends (answered `SLAVE_NOT_AVAILABLE`: on the master only); the slaves,
/// started again, catch up, and sends are acknowledged `SEND_OK` again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_two_slaves_lost_at_once_leave_a_writable_master() {
    let case = "replication: two slaves lost at once";
    let Some((env, ns_bin)) = replication_env(case) else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let mut cluster = Cluster::start(&env, &ns_bin, case, "repl-slaves", 3).await;
    let mut alone = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, m) = cluster.settled_master(&what).await;
        let slaves = [(m + 1) % 3, (m + 2) % 3];
        for s in slaves {
            cluster.brokers[s].kill().unwrap();
        }
        let killed = Instant::now();
        cluster.wait_in_sync_count(1, &what).await;
        let deadline = Instant::now() + Duration::from_secs(60);
        while !cluster.stores_sends(&master).await {
            assert!(
                Instant::now() < deadline,
                "{what}: the master stores nothing"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        alone.push(killed.elapsed().as_secs_f64());
        assert_eq!(
            cluster.controllers.master(&cluster.client).await,
            Some((master, epoch)),
            "{what}: the master changed"
        );
        for s in slaves {
            cluster.brokers[s].restart().unwrap();
        }
        cluster.wait_in_sync(&what).await;
        cluster.wait_acked(200, &what).await;
    }
    conclude(
        case,
        &env,
        cluster,
        cycles,
        ("the master storing sends alone after", &alone),
        None,
    )
    .await;
}

/// A topic created on the master and written to (each send acknowledged by
/// every replica), then the master killed before its slaves copied the
/// topic's configuration: the new master serves the topic, with every
/// acknowledged message, and takes sends to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_a_topic_created_just_before_a_switch_survives_it() {
    let case = "replication: topic created just before a switch";
    let Some((env, ns_bin)) = replication_env(case) else {
        return;
    };
    let cycles = if env.quick { 1 } else { 5 };
    let mut cluster = Cluster::start(&env, &ns_bin, case, "repl-topic", 3).await;
    let direct = RemotingClient::new(ClientOptions::default());
    let mut served = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        cluster.wait_in_sync(&what).await;
        let (master, epoch) = cluster.controllers.master(&cluster.client).await.unwrap();
        let victim = cluster.master_index(&master);
        let topic = unique("Fresh");
        let created = direct
            .invoke(
                &master,
                e2e_tests::create_topic_request(&topic, 4),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(created.response_code(), ResponseCode::SUCCESS, "{what}");
        let mut acked = Vec::new();
        for i in 0..20 {
            let answer = direct
                .invoke(
                    &master,
                    e2e_tests::send_request(&topic, i),
                    Duration::from_secs(5),
                )
                .await
                .unwrap();
            if answer.response_code() == ResponseCode::SUCCESS {
                acked.push(format!("busy {i}"));
            }
        }
        assert!(!acked.is_empty(), "{what}: no send to the new topic taken");
        cluster.brokers[victim].kill().unwrap();
        let killed = Instant::now();
        let now = loop {
            if let Some((m, e)) = cluster.controllers.master(&cluster.client).await {
                if m != master && e > epoch {
                    break m;
                }
            }
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "{what}: no new master"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // Every acknowledged message is on the new master, readable, and
        // the topic takes sends there.
        let consumer = PullConsumer::start(ConsumerConfig::new(
            &cluster.controllers_namesrv(),
            unique("chaos-fresh-"),
        ))
        .await
        .unwrap();
        let queue = loop {
            let found = consumer.fetch_queues(&topic).await.ok().and_then(|qs| {
                qs.into_iter()
                    .find(|q| q.queue_id == 0 && q.broker_name == cluster.group())
            });
            if let Some(q) = found {
                break q;
            }
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "{what}: no route"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let mut bodies = Vec::new();
        let mut offset = 0;
        loop {
            let r = consumer.pull(&queue, offset, 32).await.unwrap();
            if r.status != PullStatus::Found {
                break;
            }
            bodies.extend(
                r.messages
                    .iter()
                    .map(|m| String::from_utf8_lossy(&m.body).into_owned()),
            );
            offset = r.next_begin_offset;
        }
        consumer.shutdown().await;
        for body in &acked {
            assert!(bodies.contains(body), "{what}: {body} lost ({bodies:?})");
        }
        assert!(
            e2e_stores(&direct, &now, &topic).await,
            "{what}: the new master does not store sends to {topic}"
        );
        served.push(killed.elapsed().as_secs_f64());
        cluster.brokers[victim].restart().unwrap();
    }
    direct.close_all().await;
    conclude(
        case,
        &env,
        cluster,
        cycles,
        (
            "the new topic read and written on the new master after",
            &served,
        ),
        None,
    )
    .await;
}

/// SIGKILL of the master of a group of two: the one slave takes over and
/// stores sends alone (`SLAVE_NOT_AVAILABLE`) until the old master is back
/// as its slave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_kill_9_of_the_master_of_two_replicas() {
    let case = "replication: kill -9 master, two replicas";
    let Some((env, ns_bin)) = replication_env(case) else {
        return;
    };
    let cycles = if env.quick { 1 } else { 10 };
    let mut cluster = Cluster::start(&env, &ns_bin, case, "repl-two", 2).await;
    let mut recovered = Vec::new();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, victim) = cluster.settled_master(&what).await;
        cluster.brokers[victim].kill().unwrap();
        let killed = Instant::now();
        cluster.new_master_storing(&master, epoch, &what).await;
        recovered.push(killed.elapsed().as_secs_f64());
        cluster.brokers[victim].restart().unwrap();
    }
    conclude(
        case,
        &env,
        cluster,
        cycles,
        ("the new master storing sends after", &recovered),
        Some(5.0),
    )
    .await;
}

/// Whether every name server routes the group's master id to `master`.
async fn routes_to(cluster: &Cluster, master: &str) -> bool {
    for namesrv in cluster.controllers_namesrv().split(';') {
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &GetRouteInfoRequestHeader {
                topic: cluster.topic.clone(),
                accept_standard_json_only: None,
            },
        );
        let Ok(answer) = cluster
            .client
            .invoke(namesrv, request, Duration::from_secs(2))
            .await
        else {
            return false;
        };
        let route: Option<TopicRouteData> = from_json(&answer.body).ok();
        let routed = route.is_some_and(|r| {
            r.broker_datas.iter().any(|b| {
                b.broker_name == cluster.group()
                    && b.broker_addrs.get(&0) == Some(&master.to_owned())
            })
        });
        if !routed {
            return false;
        }
    }
    true
}

/// The milestones of a failover after kill -9 of the master, each from the
/// kill: the controllers name a new master (election), it stores a send
/// (writable), every name server routes to it (routes converged), and the
/// producer has a send acknowledged (producer recovered).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_failover_milestones_after_kill_9_of_the_master() {
    let case = "replication: failover milestones";
    let Some((env, ns_bin)) = replication_env(case) else {
        return;
    };
    let cycles = if env.quick { 2 } else { 10 };
    let mut cluster = Cluster::start(&env, &ns_bin, case, "repl-miles", 3).await;
    const NAMES: [&str; 4] = [
        "election",
        "writable",
        "routes converged",
        "producer recovered",
    ];
    let mut times: [Vec<f64>; 4] = Default::default();
    for cycle in 0..cycles {
        let what = format!("cycle {cycle}");
        let (master, epoch, victim) = cluster.settled_master(&what).await;
        cluster.brokers[victim].kill().unwrap();
        let killed = Instant::now();
        let mut at: [Option<f64>; 4] = [None; 4];
        let mut elected: Option<String> = None;
        while at.iter().any(Option::is_none) {
            assert!(
                killed.elapsed() < Duration::from_secs(60),
                "{what}: milestones {at:?} within 60 s"
            );
            let since = || Some(killed.elapsed().as_secs_f64());
            if elected.is_none() {
                if let Some((m, e)) = cluster.controllers.master(&cluster.client).await {
                    if m != master && e > epoch {
                        at[0] = since();
                        elected = Some(m);
                    }
                }
            }
            if let Some(m) = &elected {
                if at[1].is_none() && cluster.stores_sends(m).await {
                    at[1] = since();
                }
                if at[2].is_none() && routes_to(&cluster, m).await {
                    at[2] = since();
                }
            }
            if at[3].is_none() {
                at[3] = cluster
                    .acked_after(killed, &master)
                    .map(|d| d.as_secs_f64());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for (all, t) in times.iter_mut().zip(at) {
            all.push(t.unwrap_or(f64::NAN));
        }
        cluster.brokers[victim].restart().unwrap();
    }
    let milestones = NAMES
        .iter()
        .zip(&times)
        .map(|(name, t)| format!("{name} {}", summary(t)))
        .collect::<Vec<_>>()
        .join("; ");
    let (acked, lost, duplicates, others) = cluster.finish().await;
    let figure = format!(
        "{cycles} kills; {acked} acknowledged, {lost} lost, {duplicates} duplicates, {others} \
         not SEND_OK; from the kill: {milestones} (lease {LEASE_MS} ms)"
    );
    assert_eq!(lost, 0, "{figure}");
    println!("chaos: {case} | {figure} | PASS");
}
