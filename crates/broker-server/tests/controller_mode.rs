//! Brokers in controller mode, in-process with three controllers: the first
//! broker of a group is elected master, the second follows it and joins the
//! in-sync set, and when the master dies the slave is elected and takes
//! writes with every acknowledged message in its log.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{send_request, TestBroker};
use controller::testing::LocalGroup;
use remoting_protocol::ResponseCode;

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn settings<'a>(controllers: &'a str, namesrv: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut s = vec![
        ("enableControllerMode", "true"),
        ("controllerAddr", controllers),
        ("brokerHeartbeatInterval", "200"),
        ("controllerHeartBeatTimeoutMills", "3000"),
        ("syncBrokerMetadataPeriod", "500"),
        ("checkSyncStateSetPeriod", "500"),
    ];
    if let Some(namesrv) = namesrv {
        s.push(("embeddedNamesrv", "false"));
        s.push(("namesrvAddr", namesrv));
    }
    s
}

/// Waits until the controllers count `n` replicas of the group in sync
/// (a slave the master waits for already may not be counted yet; only a
/// counted one can be elected).
async fn counted_in_sync(controllers: &LocalGroup, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let leader = controllers.leader().await;
        let counted = controllers.nodes[leader].as_ref().map_or(0, |node| {
            node.record().read(|r| {
                r.groups
                    .values()
                    .next()
                    .map_or(0, |g| g.sync_state_set.len())
            })
        });
        if counted == n {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the controllers count {counted} in sync, not {n}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn in_sync(b: &TestBroker) -> usize {
    b.broker
        .state()
        .ha
        .master()
        .map_or(0, |m| m.sync_set().members().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_slave_takes_over_a_dead_master_with_every_acknowledged_message() {
    let dir = tempfile::tempdir().unwrap();
    let mut controllers =
        LocalGroup::start(dir.path().join("controllers"), 3, Duration::from_secs(1)).await;
    let addr = controllers.controller_addr();

    // The first broker of the group becomes its master.
    let a = TestBroker::start(&settings(&addr, None)).await;
    wait_until("the first broker becomes master", || {
        a.broker.state().ha.master().is_some()
    })
    .await;
    let b = TestBroker::start(&settings(&addr, Some(&a.namesrv))).await;
    wait_until("the second broker joins the in-sync set", || {
        in_sync(&a) == 2
    })
    .await;
    counted_in_sync(&controllers, 2).await;
    a.create_topic("Failover", 1).await;

    // The slave refuses sends; the master answers once the slave holds
    // each message.
    let refused = b.invoke(send_request("Failover", 0, b"to b", "")).await;
    assert_eq!(
        refused.response_code(),
        ResponseCode::SERVICE_NOT_AVAILABLE,
        "{refused:?}"
    );
    let mut acknowledged = 0;
    for i in 0..50 {
        let r = a
            .invoke(send_request("Failover", 0, format!("m{i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
        acknowledged += 1;
    }
    let acked_end = a.broker.state().store.max_physical_offset();
    assert!(b.broker.state().store.max_physical_offset() >= acked_end);

    // The master dies; the slave is elected once its lease is over, and
    // takes writes.
    let (a_broker, a_client, _, _a_dir) = a.into_parts();
    a_client.close_all().await;
    a_broker.shutdown().await;
    wait_until("the slave becomes master", || {
        b.broker.state().ha.master().is_some()
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let taken = loop {
        let r = b.invoke(send_request("Failover", 0, b"after", "")).await;
        // Stored on a master alone in its in-sync set: answered as such.
        if r.response_code() != ResponseCode::SERVICE_NOT_AVAILABLE {
            break r;
        }
        assert!(
            Instant::now() < deadline,
            "the new master never took a send: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        [ResponseCode::SUCCESS, ResponseCode::SLAVE_NOT_AVAILABLE].contains(&taken.response_code()),
        "{taken:?}"
    );
    // Every acknowledged message is readable on the new master.
    b.until_dispatched("Failover", 0, acknowledged + 1).await;
    let leader = controllers.leader().await;
    let group = controllers.nodes[leader]
        .as_ref()
        .unwrap()
        .record()
        .read(|r| r.groups.values().next().cloned().unwrap());
    assert_eq!(group.master, Some(2));
    assert_eq!(group.master_epoch, 2);
    b.broker.shutdown().await;
    controllers.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_cut_off_from_the_controllers_stops_taking_writes_when_its_lease_ends() {
    let dir = tempfile::tempdir().unwrap();
    let mut controllers =
        LocalGroup::start(dir.path().join("controllers"), 3, Duration::from_secs(1)).await;
    let addr = controllers.controller_addr();
    let store = tempfile::tempdir().unwrap();
    let a = TestBroker::start_in(store.path(), &settings(&addr, None)).await;
    wait_until("the broker becomes master", || {
        a.broker.state().ha.master().is_some()
    })
    .await;
    a.create_topic("Leased", 1).await;
    // Writable once the leader's answer brought a lease (alone in its
    // in-sync set, a send is answered SLAVE_NOT_AVAILABLE: stored).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = a.invoke(send_request("Leased", 0, b"m", "")).await;
        if r.response_code() == ResponseCode::SLAVE_NOT_AVAILABLE {
            break;
        }
        assert_eq!(
            r.response_code(),
            ResponseCode::SERVICE_NOT_AVAILABLE,
            "{r:?}"
        );
        assert!(Instant::now() < deadline, "never writable: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let id = std::fs::read_to_string(store.path().join("brokerIdentity")).unwrap();
    assert!(id.contains("\"brokerId\": 1"), "{id}");

    // No controller answers: the lease runs out and sends are refused,
    // naming why.
    controllers.stop_all().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let r = a.invoke(send_request("Leased", 0, b"late", "")).await;
        if r.response_code() == ResponseCode::SERVICE_NOT_AVAILABLE {
            break r;
        }
        assert!(Instant::now() < deadline, "still writable: {r:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        refused
            .remark
            .as_deref()
            .unwrap_or("")
            .contains("without a lease"),
        "{refused:?}"
    );
    a.broker.shutdown().await;
}

/// The bodies in `topic`'s queue 0 on `b`.
fn bodies(b: &TestBroker, topic: &str) -> Vec<Vec<u8>> {
    let store = &b.broker.state().store;
    (0..store.max_offset_in_queue(topic, 0))
        .filter_map(|i| store.queue_entry(topic, 0, i))
        .filter_map(|e| store.lookup_message(e.commit_log_offset as u64))
        .map(|r| match message_model::record::check(&r, false) {
            message_model::record::Record::Message(m) => m.body.to_vec(),
            _ => Vec::new(),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_master_does_not_deliver_again_the_timers_its_master_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let mut controllers =
        LocalGroup::start(dir.path().join("controllers"), 3, Duration::from_secs(1)).await;
    let addr = controllers.controller_addr();
    let a = TestBroker::start(&settings(&addr, None)).await;
    wait_until("the first broker becomes master", || {
        a.broker.state().ha.master().is_some()
    })
    .await;
    let b = TestBroker::start(&settings(&addr, Some(&a.namesrv))).await;
    wait_until("the second broker joins the in-sync set", || {
        in_sync(&a) == 2
    })
    .await;
    counted_in_sync(&controllers, 2).await;
    a.create_topic("Timed", 1).await;

    // A timer the master delivers, and whose delivery the slave learns.
    let r = a
        .invoke(send_request(
            "Timed",
            0,
            b"early",
            "TIMER_DELAY_MS\u{1}100\u{2}",
        ))
        .await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
    a.until_dispatched("Timed", 0, 1).await;
    let delivered = a.broker.state().timers.checkpoint();
    assert_eq!(delivered.master_timer_queue_offset, 1);
    wait_until("the slave copies the timer progress", || {
        let copied = b.broker.state().timers.checkpoint();
        copied.master_timer_queue_offset == 1
            && copied.last_read_time_ms >= delivered.last_read_time_ms
    })
    .await;

    // The master dies; the slave, elected, takes a new timer. Had it read
    // the timer queue from its start, "early" would go out again before
    // "late" (it is overdue, and due first).
    let (a_broker, a_client, _, _a_dir) = a.into_parts();
    a_client.close_all().await;
    a_broker.shutdown().await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = b
            .invoke(send_request(
                "Timed",
                0,
                b"late",
                "TIMER_DELAY_MS\u{1}500\u{2}",
            ))
            .await;
        if r.response_code() != ResponseCode::SERVICE_NOT_AVAILABLE {
            assert!(
                [ResponseCode::SUCCESS, ResponseCode::SLAVE_NOT_AVAILABLE]
                    .contains(&r.response_code()),
                "{r:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new master never took a send: {r:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_until("the new master delivers the late timer", || {
        bodies(&b, "Timed").contains(&b"late".to_vec())
    })
    .await;
    assert_eq!(
        bodies(&b, "Timed"),
        [b"early".to_vec(), b"late".to_vec()],
        "each timer delivered once"
    );
    b.broker.shutdown().await;
    controllers.stop_all().await;
}
