//! A master and a slave in one group, in-process: the slave finds its
//! master through its registration, a SYNC_MASTER answers a send once the
//! slave holds it and `SLAVE_NOT_AVAILABLE` once no slave is in sync, a
//! slave refuses sends, copies its master's topics and offsets and serves
//! pulls.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{grpc_message, pull_request, send_request, TestBroker};
use remoting_protocol::{
    header::UpdateConsumerOffsetRequestHeader, RemotingCommand, RequestCode, ResponseCode,
};

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "not within 20 s: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn start_slave(master: &TestBroker) -> TestBroker {
    TestBroker::start(&[
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("embeddedNamesrv", "false"),
        ("namesrvAddr", &master.namesrv),
    ])
    .await
}

fn in_sync(master: &TestBroker) -> usize {
    master
        .broker
        .state()
        .ha
        .master()
        .unwrap()
        .sync_set()
        .members()
        .len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_master_answers_once_its_slave_holds_the_message() {
    let master = TestBroker::start(&[("brokerRole", "SYNC_MASTER")]).await;
    master.create_topic("Replicated", 1).await;
    // No slave yet: stored, but said to be on the master only.
    let alone = master
        .invoke(send_request("Replicated", 0, b"alone", ""))
        .await;
    assert_eq!(
        alone.response_code(),
        ResponseCode::SLAVE_NOT_AVAILABLE,
        "{alone:?}"
    );

    let slave = start_slave(&master).await;
    wait_until("the slave joins the in-sync set", || in_sync(&master) == 2).await;
    for i in 0..20 {
        let r = master
            .invoke(send_request(
                "Replicated",
                0,
                format!("m{i}").as_bytes(),
                "",
            ))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
        // Answered: the slave acknowledged it.
        assert!(
            slave.broker.state().store.max_physical_offset()
                >= master.broker.state().store.max_physical_offset()
        );
    }
    // The master's consumers see what the slave holds; so do the slave's.
    master.until_dispatched("Replicated", 0, 21).await;
    slave.until_dispatched("Replicated", 0, 21).await;

    // A slave takes no sends of its own.
    let refused = slave
        .invoke(send_request("Replicated", 0, b"to the slave", ""))
        .await;
    assert_eq!(
        refused.response_code(),
        ResponseCode::SERVICE_NOT_AVAILABLE,
        "{refused:?}"
    );
    assert!(
        refused.remark.as_deref().unwrap_or("").contains("SLAVE"),
        "{refused:?}"
    );

    // The slave copies the master's topics and offsets, and serves
    // consumers from its own copy.
    let commit = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "CG".into(),
            topic: "Replicated".into(),
            queue_id: 0,
            commit_offset: 7,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        master.invoke(commit).await.response_code(),
        ResponseCode::SUCCESS
    );
    wait_until("the slave copies the topic and the offset", || {
        let s = slave.broker.state();
        s.topics.get("Replicated").is_some() && s.offsets.query("CG", "Replicated", 0) == Some(7)
    })
    .await;
    let pulled = slave.invoke(pull_request("Replicated", 0, 0, 32)).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS, "{pulled:?}");
    assert!(!pulled.body.is_empty());

    // The slave goes: it leaves the in-sync set, and sends say so.
    slave.broker.shutdown().await;
    wait_until("the slave leaves the in-sync set", || in_sync(&master) == 1).await;
    let after = master
        .invoke(send_request("Replicated", 0, b"after", ""))
        .await;
    assert_eq!(after.response_code(), ResponseCode::SLAVE_NOT_AVAILABLE);
    master.until_dispatched("Replicated", 0, 22).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_async_master_answers_at_once_and_its_slave_catches_up() {
    let master = TestBroker::start(&[]).await;
    master.create_topic("Copied", 2).await;
    for i in 0..50 {
        let r = master
            .invoke(send_request(
                "Copied",
                i % 2,
                format!("m{i}").as_bytes(),
                "",
            ))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
    }
    let slave = start_slave(&master).await;
    let end = master.broker.state().store.max_physical_offset();
    wait_until("the slave holds the master's log", || {
        slave.broker.state().store.max_physical_offset() == end
    })
    .await;
    slave.until_dispatched("Copied", 0, 25).await;
    slave.until_dispatched("Copied", 1, 25).await;
}

/// Bodies of every message in queue 0 of `topic`, read from the store.
fn bodies(b: &TestBroker, topic: &str) -> Vec<Vec<u8>> {
    let got = b
        .broker
        .state()
        .store
        .get_messages(topic, 0, 0, 10_000, usize::MAX, None);
    got.messages
        .iter()
        .map(|r| match message_model::record::check(r, false) {
            message_model::record::Record::Message(m) => m.body.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect()
}

/// A master A with a slave B that holds everything A holds; B is shut
/// down, then A after it took `alone` more messages by itself.
async fn group_then_both_stop(
    dir_a: &std::path::Path,
    dir_b: &std::path::Path,
    alone: usize,
) -> u64 {
    let a = TestBroker::start_in(dir_a, &[]).await;
    a.create_topic("Moved", 1).await;
    let b = TestBroker::start_in(
        dir_b,
        &[
            ("brokerRole", "SLAVE"),
            ("brokerId", "1"),
            ("embeddedNamesrv", "false"),
            ("namesrvAddr", &a.namesrv),
        ],
    )
    .await;
    for i in 0..10 {
        let r = a
            .invoke(send_request("Moved", 0, format!("both {i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    }
    let shared = a.broker.state().store.max_physical_offset();
    wait_until("B holds A's messages", || {
        b.broker.state().store.max_physical_offset() == shared
    })
    .await;
    b.broker.shutdown().await;
    for i in 0..alone {
        let r = a
            .invoke(send_request(
                "Moved",
                0,
                format!("A only {i}").as_bytes(),
                "",
            ))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    }
    a.broker.shutdown().await;
    shared
}

/// B started again as the master, with five new messages, and A as its
/// slave.
async fn swap_roles(dir_a: &std::path::Path, dir_b: &std::path::Path) -> (TestBroker, TestBroker) {
    let b = TestBroker::start_in(dir_b, &[]).await;
    for i in 0..5 {
        let r = b
            .invoke(send_request("Moved", 0, format!("B {i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
    }
    let a = TestBroker::start_in(
        dir_a,
        &[
            ("brokerRole", "SLAVE"),
            ("brokerId", "1"),
            ("embeddedNamesrv", "false"),
            ("namesrvAddr", &b.namesrv),
        ],
    )
    .await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_master_returns_as_the_slave_of_the_broker_that_replaced_it() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    group_then_both_stop(dir_a.path(), dir_b.path(), 0).await;
    let (a, b) = swap_roles(dir_a.path(), dir_b.path()).await;
    let end = b.broker.state().store.max_physical_offset();
    wait_until("A follows B", || {
        a.broker.state().store.max_physical_offset() == end
    })
    .await;
    // Both logs agreed up to where B took over: nothing was cut.
    assert_eq!(
        a.broker.state().ha.slave().unwrap().status().truncated_to,
        None
    );
    b.until_dispatched("Moved", 0, 15).await;
    a.until_dispatched("Moved", 0, 15).await;
    let on_b = bodies(&b, "Moved");
    assert_eq!(on_b.len(), 15);
    assert_eq!(on_b[10], b"B 0".to_vec());
    assert_eq!(bodies(&a, "Moved"), on_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_master_whose_consumers_saw_what_the_new_one_lacks_cuts_it_from_its_queues() {
    let (dir_a, dir_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let shared = group_then_both_stop(dir_a.path(), dir_b.path(), 3).await;
    let (a, b) = swap_roles(dir_a.path(), dir_b.path()).await;
    let end = b.broker.state().store.max_physical_offset();
    wait_until("A cuts its lone messages and follows B", || {
        a.broker.state().store.max_physical_offset() == end
    })
    .await;
    assert_eq!(
        a.broker.state().ha.slave().unwrap().status().truncated_to,
        Some(shared)
    );
    // A's consumers now see B's history: its three lone messages left its
    // queue, and B's took their queue offsets.
    b.until_dispatched("Moved", 0, 15).await;
    a.until_dispatched("Moved", 0, 15).await;
    let on_b = bodies(&b, "Moved");
    assert_eq!(on_b.len(), 15);
    assert_eq!(bodies(&a, "Moved"), on_b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_send_to_a_sync_master_without_slaves_says_where_it_was_stored() {
    use grpc_protocol::{
        v2::{Code, SendMessageRequest},
        MessagingServiceClient,
    };
    let master = TestBroker::start(&[("brokerRole", "SYNC_MASTER")]).await;
    master.create_topic("GrpcAlone", 1).await;
    let port = master
        .broker
        .grpc_addr()
        .expect("gRPC endpoint runs")
        .port();
    let mut client = MessagingServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap();
    let mut request = tonic::Request::new(SendMessageRequest {
        messages: vec![
            grpc_message("GrpcAlone", "0102ALONE-ONE"),
            grpc_message("GrpcAlone", "0102ALONE-TWO"),
        ],
    });
    request
        .metadata_mut()
        .insert("x-mq-client-id", "alone-host@1#1".parse().unwrap());
    let sent = tokio::time::timeout(Duration::from_secs(10), client.send_message(request))
        .await
        .unwrap()
        .unwrap()
        .into_inner();
    let codes: Vec<i32> = sent
        .entries
        .iter()
        .map(|e| e.status.as_ref().map_or(0, |s| s.code))
        .collect();
    assert_eq!(codes, [Code::HaNotAvailable as i32; 2], "{sent:?}");
    let offsets: Vec<i64> = sent.entries.iter().map(|e| e.offset).collect();
    assert_eq!(offsets, [0, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_on_classic_frames_replicates_and_answers_once_the_slave_holds_it() {
    let master =
        TestBroker::start(&[("brokerRole", "SYNC_MASTER"), ("haFraming", "classic")]).await;
    master.create_topic("Classic", 1).await;
    let slave = TestBroker::start(&[
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("embeddedNamesrv", "false"),
        ("namesrvAddr", &master.namesrv),
        ("haFraming", "classic"),
    ])
    .await;
    wait_until("the classic slave joins the in-sync set", || {
        in_sync(&master) == 2
    })
    .await;
    for i in 0..10 {
        let r = master
            .invoke(send_request("Classic", 0, format!("c{i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{r:?}");
    }
    assert!(
        slave.broker.state().store.max_physical_offset()
            >= master.broker.state().store.max_physical_offset()
    );
    // The slave shows its consumers what it received.
    slave.until_dispatched("Classic", 0, 10).await;
}
