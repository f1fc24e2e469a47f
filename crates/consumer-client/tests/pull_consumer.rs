//! The pull consumer against an in-process broker: reading back, tag
//! filtering and committed offsets.
#![allow(clippy::unwrap_used)]

mod common;

use std::{collections::BTreeSet, time::Duration};

use consumer_client::{PullConsumer, PullOptions, PullStatus};
use producer_client::Message;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pull_consumer_reads_back_everything_filters_tags_and_round_trips_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start(dir.path()).await;
    b.create_topic("PullT", 4).await;
    let producer = b.producer().await;
    let mut sent = BTreeSet::new();
    let mut sent_a = BTreeSet::new();
    for i in 0..60 {
        let tag = ["TagA", "TagB", "TagC"][i % 3];
        let r = producer
            .send(Message::new("PullT", format!("m{i}")).with_tags(tag))
            .await
            .unwrap();
        sent.insert(r.msg_id.clone());
        if tag == "TagA" {
            sent_a.insert(r.msg_id);
        }
    }

    let consumer = PullConsumer::start(b.consumer_config("PullG"))
        .await
        .unwrap();
    let queues = consumer.fetch_queues("PullT").await.unwrap();
    assert_eq!(queues.len(), 4);

    let mut got = BTreeSet::new();
    let mut got_a = BTreeSet::new();
    let only_a = PullOptions {
        expression: "TagA".into(),
        suspend: None,
    };
    for q in &queues {
        let mut offset = consumer.min_offset(q).await.unwrap();
        loop {
            let r = consumer.pull(q, offset, 7).await.unwrap();
            if r.status != PullStatus::Found {
                assert_eq!(r.status, PullStatus::NoNewMsg);
                break;
            }
            for m in &r.messages {
                assert_eq!(m.queue_id, q.queue_id);
                assert!(got.insert(m.msg_id.clone()), "duplicate {}", m.msg_id);
            }
            offset = r.next_begin_offset;
        }
        assert_eq!(offset, consumer.max_offset(q).await.unwrap());

        let mut offset = 0;
        loop {
            let r = consumer.pull_with(q, offset, 32, &only_a).await.unwrap();
            match r.status {
                PullStatus::Found => {
                    for m in &r.messages {
                        assert_eq!(m.tags.as_deref(), Some("TagA"));
                        got_a.insert(m.msg_id.clone());
                    }
                }
                PullStatus::NoMatchedMsg => {}
                _ => break,
            }
            offset = r.next_begin_offset;
        }
    }
    assert_eq!(got, sent);
    assert_eq!(got_a, sent_a);

    let q = &queues[1];
    assert_eq!(consumer.fetch_consume_offset(q).await.unwrap(), None);
    consumer.commit_offset(q, 5).await.unwrap();
    assert_eq!(consumer.fetch_consume_offset(q).await.unwrap(), Some(5));
    consumer.commit_offset(q, 9).await.unwrap();
    assert_eq!(consumer.fetch_consume_offset(q).await.unwrap(), Some(9));

    // A long poll on an empty queue position answers when the time is up.
    let end = consumer.max_offset(q).await.unwrap();
    let parked = PullOptions {
        expression: "*".into(),
        suspend: Some(Duration::from_millis(300)),
    };
    let r = consumer.pull_with(q, end, 1, &parked).await.unwrap();
    assert_eq!(r.status, PullStatus::NoNewMsg);

    consumer.shutdown().await;
    producer.shutdown().await;
    b.broker.shutdown().await;
}
