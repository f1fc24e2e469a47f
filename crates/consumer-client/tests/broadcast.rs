//! Broadcasting push consumers: every member gets every message, and each
//! keeps its own offsets in a local file.
#![allow(clippy::unwrap_used)]

mod common;

use std::{collections::BTreeSet, time::Duration};

use common::{wait_for, Recorder};
use consumer_client::{ConsumerConfig, MessageModel, PushConsumer};
use producer_client::Message;

fn broadcasting(b: &common::TestBroker, dir: &std::path::Path, instance: &str) -> ConsumerConfig {
    ConsumerConfig {
        message_model: MessageModel::Broadcasting,
        instance_name: Some(instance.to_owned()),
        local_offset_store_dir: Some(dir.to_path_buf()),
        ..b.consumer_config("CastG")
    }
    .subscribe("CastT", "*")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_member_gets_every_message_and_resumes_from_its_own_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let offsets = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("CastT", 4).await;
    let (ra, rb) = (Recorder::default(), Recorder::default());
    let a = PushConsumer::start(broadcasting(&b, offsets.path(), "a"), ra.clone())
        .await
        .unwrap();
    let c = PushConsumer::start(broadcasting(&b, offsets.path(), "b"), rb.clone())
        .await
        .unwrap();
    wait_for(Duration::from_secs(10), || async {
        a.owned_queues().len() == 4 && c.owned_queues().len() == 4
    })
    .await;
    let producer = b.producer().await;
    let mut sent = BTreeSet::new();
    for i in 0..40 {
        sent.insert(
            producer
                .send(Message::new("CastT", format!("cast-{i}")))
                .await
                .unwrap()
                .msg_id,
        );
    }
    for r in [&ra, &rb] {
        wait_for(Duration::from_secs(15), || async {
            sent.is_subset(&r.ids().into_iter().collect())
        })
        .await;
    }
    assert_eq!(ra.count(), 40, "each message once");
    assert_eq!(rb.count(), 40, "each message once");
    a.shutdown().await;

    // a restarts from its local offsets: only what was sent meanwhile.
    let mut later = BTreeSet::new();
    for i in 40..50 {
        later.insert(
            producer
                .send(Message::new("CastT", format!("cast-{i}")))
                .await
                .unwrap()
                .msg_id,
        );
    }
    let again = Recorder::default();
    let a = PushConsumer::start(broadcasting(&b, offsets.path(), "a"), again.clone())
        .await
        .unwrap();
    wait_for(Duration::from_secs(15), || async {
        later.is_subset(&again.ids().into_iter().collect())
    })
    .await;
    let seen: BTreeSet<String> = again.ids().into_iter().collect();
    assert!(seen.is_disjoint(&sent), "a handled old messages again");
    a.shutdown().await;
    c.shutdown().await;
    producer.shutdown().await;
    b.broker.shutdown().await;
}
