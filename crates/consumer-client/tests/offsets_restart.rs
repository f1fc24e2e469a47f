//! Committed offsets survive a broker restart: a new consumer of the group
//! resumes where the first one stopped.
#![allow(clippy::unwrap_used)]

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::{wait_for, Recorder};
use consumer_client::{PullConsumer, PushConsumer};
use producer_client::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn offsets_survive_a_broker_restart_and_the_group_resumes_where_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("RestartT", 4).await;
    let producer = b.producer().await;
    let mut first = BTreeSet::new();
    for i in 0..100 {
        let r = producer
            .send(Message::new("RestartT", format!("a{i}")))
            .await
            .unwrap();
        first.insert(r.msg_id);
    }
    let r1 = Recorder::default();
    let config = b.consumer_config("RestartG").subscribe("RestartT", "*");
    let c1 = PushConsumer::start(config, r1.clone()).await.unwrap();
    wait_for(Duration::from_secs(10), || async { r1.count() >= 100 }).await;
    c1.shutdown().await;
    producer.shutdown().await;

    let probe = PullConsumer::start(b.consumer_config("RestartG"))
        .await
        .unwrap();
    let queues = probe.fetch_queues("RestartT").await.unwrap();
    let mut committed = Vec::new();
    for q in &queues {
        committed.push(probe.fetch_consume_offset(q).await.unwrap().unwrap());
    }
    assert_eq!(committed.iter().sum::<u64>(), 100, "{committed:?}");
    probe.shutdown().await;
    b.broker.shutdown().await;

    // Same store directory, new ports.
    let b = common::TestBroker::start(dir.path()).await;
    let producer = b.producer().await;
    let mut second = BTreeSet::new();
    for i in 0..50 {
        let r = producer
            .send(Message::new("RestartT", format!("b{i}")))
            .await
            .unwrap();
        second.insert(r.msg_id);
    }
    let r2 = Recorder::default();
    let config = b.consumer_config("RestartG").subscribe("RestartT", "*");
    let c2 = PushConsumer::start(config, r2.clone()).await.unwrap();
    wait_for(Duration::from_secs(15), || async {
        let got: BTreeSet<String> = r2.ids().into_iter().collect();
        second.is_subset(&got)
    })
    .await;
    // Give a wrongly rewound queue time to show itself.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for (m, _) in r2.seen.lock().unwrap().iter() {
        let floor = committed[usize::try_from(m.queue_id).unwrap()];
        assert!(
            m.queue_offset >= floor,
            "offset {} of queue {} is below the committed {floor}",
            m.queue_offset,
            m.queue_id
        );
    }
    let redelivered = r2.ids().iter().filter(|id| first.contains(*id)).count();
    eprintln!(
        "after restart: {} messages, {redelivered} redelivered",
        r2.count()
    );
    assert_eq!(redelivered, 0);

    c2.shutdown().await;
    producer.shutdown().await;
    b.broker.shutdown().await;
}
