//! Ordered sends through a selector: one key, one queue, offsets in send
//! order; a batch keeps its order in its queue; and a failed ordered send is
//! not moved to another broker.
#![allow(clippy::unwrap_used)]

mod common;

use common::{bounded, config, Behaviour, FakeBroker, TestBroker};
use producer_client::{select_by_key, Message, MessageQueue, Producer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_with_one_key_land_in_one_queue_in_send_order() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Orders").await;
        common::wait_for_route(b.namesrv(), "Orders", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let queues = producer.publish_queues("Orders").await.unwrap();
        let mut sent = Vec::new();
        for step in ["created", "paid", "shipped", "delivered"] {
            for order in ["order-1", "order-2"] {
                let body = format!("{order}:{step}");
                let r = producer
                    .send_with_selector(Message::new("Orders", body.clone()), select_by_key, order)
                    .await
                    .unwrap();
                sent.push((order, body, r));
            }
        }
        for order in ["order-1", "order-2"] {
            let mine: Vec<_> = sent.iter().filter(|(o, _, _)| *o == order).collect();
            let expected_queue = &queues[select_by_key(&queues, &Message::default(), order)];
            assert!(mine
                .iter()
                .all(|(_, _, r)| &r.message_queue == expected_queue));
            assert!(mine
                .windows(2)
                .all(|w| w[0].2.queue_offset < w[1].2.queue_offset));
            // Read the queue back: this order's bodies appear in send order.
            let qid = i32::try_from(expected_queue.queue_id).unwrap();
            let first = i64::try_from(mine[0].2.queue_offset).unwrap();
            let last = i64::try_from(mine[3].2.queue_offset).unwrap();
            let count = usize::try_from(last - first + 1).unwrap();
            let pulled = b.pull("Orders", qid, first, count).await;
            let bodies: Vec<String> = pulled
                .iter()
                .map(|m| String::from_utf8(m.body.clone()).unwrap())
                .filter(|body| body.starts_with(order))
                .collect();
            let expected: Vec<&String> = mine.iter().map(|(_, body, _)| body).collect();
            assert_eq!(bodies.iter().collect::<Vec<_>>(), expected);
        }
        assert_eq!(producer.stats().retries, 0);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_sent_through_a_selector_keeps_its_order_in_its_queue() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Steps").await;
        common::wait_for_route(b.namesrv(), "Steps", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let batch: Vec<Message> = (0..10)
            .map(|i| Message::new("Steps", format!("step-{i:02}")))
            .collect();
        let sent = producer
            .send_batch_with_selector(batch, select_by_key, "order-7")
            .await
            .unwrap();
        let queues = producer.publish_queues("Steps").await.unwrap();
        let expected = &queues[select_by_key(&queues, &Message::default(), "order-7")];
        assert_eq!(&sent.message_queue, expected);
        let qid = i32::try_from(expected.queue_id).unwrap();
        let first = i64::try_from(sent.queue_offset).unwrap();
        let pulled = b.pull("Steps", qid, first, 10).await;
        let bodies: Vec<String> = pulled
            .iter()
            .take(10)
            .map(|m| String::from_utf8(m.body.clone()).unwrap())
            .collect();
        let wanted: Vec<String> = (0..10).map(|i| format!("step-{i:02}")).collect();
        assert_eq!(bodies, wanted);
        let offsets: Vec<i64> = pulled.iter().take(10).map(|m| m.queue_offset).collect();
        assert_eq!(offsets, (first..first + 10).collect::<Vec<_>>());
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_ordered_send_surfaces_instead_of_moving_to_another_broker() {
    bounded(30, async {
        let healthy = TestBroker::start(&[]).await;
        let busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: Some(1),
            },
            healthy.namesrv(),
            "broker-z",
            &["Pinned"],
        )
        .await;
        healthy.create_topic("Pinned").await;
        common::wait_for_route(healthy.namesrv(), "Pinned", 2).await;
        let producer = Producer::start(config(healthy.namesrv())).await.unwrap();
        let on_busy = |qs: &[MessageQueue], _: &Message, _: &()| {
            qs.iter().position(|q| q.broker_name == "broker-z").unwrap()
        };
        let r = producer
            .send_with_selector(Message::new("Pinned", "x"), on_busy, &())
            .await;
        assert!(matches!(r, Err(ref e) if e.is_busy()), "{r:?}");
        assert_eq!(busy.requests(), 1);
        let stats = producer.stats();
        assert_eq!(
            (stats.retries, stats.busy_retries, stats.failed_busy),
            (0, 0, 1)
        );

        let out_of_range = |qs: &[MessageQueue], _: &Message, _: &()| qs.len();
        let r = producer
            .send_with_selector(Message::new("Pinned", "x"), out_of_range, &())
            .await;
        assert!(
            matches!(
                r,
                Err(producer_client::ProducerError::MessageIllegal { .. })
            ),
            "{r:?}"
        );
        producer.shutdown().await;
    })
    .await;
}
