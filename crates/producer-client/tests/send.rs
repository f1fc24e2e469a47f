//! Sends against a real broker in-process: what a send result holds, topic
//! auto-creation through `TBW102`, asynchronous, oneway, per-queue and batch
//! sends, the client-side in-flight limit, and refusals before sending.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{bounded, config, TestBroker};
use producer_client::{Message, MessageQueue, Producer, ProducerConfig, ProducerError, SendStatus};
use remoting_protocol::message::{MessageId, UniqueKey};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_result_names_ids_queue_offset_and_broker() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Orders").await;
        common::wait_for_route(b.namesrv(), "Orders", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let first = producer
            .send(Message::new("Orders", "one").with_tags("A").with_key("k1"))
            .await
            .unwrap();
        assert_eq!(first.status, SendStatus::SendOk);
        assert_eq!(first.broker_addr, b.addr);
        assert_eq!(first.message_queue.topic, "Orders");
        assert_eq!(first.message_queue.broker_name, "broker-a");
        assert!(first.message_queue.queue_id < 4);
        assert!(UniqueKey::decode(&first.msg_id).is_ok(), "{}", first.msg_id);
        let stored_at = MessageId::decode(&first.offset_msg_id).unwrap();
        assert_eq!(stored_at.store_host.to_string(), b.addr);
        assert_eq!(first.region_id.as_deref(), Some("DefaultRegion"));

        let again = producer
            .send_to_queue(Message::new("Orders", "two"), &first.message_queue)
            .await
            .unwrap();
        assert_eq!(again.message_queue, first.message_queue);
        assert_eq!(again.queue_offset, first.queue_offset + 1);
        assert_ne!(again.msg_id, first.msg_id);
        let later = MessageId::decode(&again.offset_msg_id).unwrap();
        assert!(later.commit_log_offset > stored_at.commit_log_offset);

        let stats = producer.stats();
        assert_eq!((stats.sends, stats.succeeded, stats.retries), (2, 2, 0));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_without_a_route_is_auto_created_through_tbw102() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let sent = producer.send(Message::new("Fresh", "hello")).await.unwrap();
        assert_eq!(sent.message_queue.topic, "Fresh");
        assert!(
            sent.message_queue.queue_id < 4,
            "defaultTopicQueueNums caps the borrowed route"
        );
        let created = b.broker.state().topics.get("Fresh").unwrap();
        assert_eq!(created.write_queue_nums, 4);
        // The broker registers the new topic, so it gets a route of its own.
        let route = common::wait_for_route(b.namesrv(), "Fresh", 1).await;
        assert_eq!(route.queue_datas[0].write_queue_nums, 4);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_and_oneway_sends_reach_the_broker() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Async").await;
        common::wait_for_route(b.namesrv(), "Async", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let mut handles = Vec::new();
        for i in 0..8 {
            handles.push(
                producer
                    .send_async(Message::new("Async", format!("m{i}")))
                    .await
                    .unwrap(),
            );
        }
        let mut offsets = Vec::new();
        for h in handles {
            let r = h.await.unwrap();
            assert_eq!(r.status, SendStatus::SendOk);
            offsets.push((r.message_queue.queue_id, r.queue_offset));
        }
        offsets.sort_unstable();
        offsets.dedup();
        assert_eq!(offsets.len(), 8, "every send has its own place");

        for i in 0..3 {
            producer
                .send_oneway(Message::new("Async", format!("o{i}")))
                .await
                .unwrap();
        }
        // Oneway sends get no answer: watch the store instead.
        let store = &b.broker.state().store;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let stored: i64 = (0..4).map(|q| store.max_offset_in_queue("Async", q)).sum();
            if stored == 11 {
                break;
            }
            assert!(Instant::now() < deadline, "stored {stored} of 11");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(producer.stats().succeeded, 11);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_lands_in_one_queue_with_consecutive_offsets() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        b.create_topic("Batch").await;
        common::wait_for_route(b.namesrv(), "Batch", 1).await;
        let producer = Producer::start(config(b.namesrv())).await.unwrap();
        let batch: Vec<Message> = (0..3)
            .map(|i| Message::new("Batch", format!("b{i}")).with_key(format!("k{i}")))
            .collect();
        let sent = producer.send_batch(batch).await.unwrap();
        assert_eq!(sent.msg_id.split(',').count(), 3);
        let ids: Vec<MessageId> = sent
            .offset_msg_id
            .split(',')
            .map(|id| MessageId::decode(id).unwrap())
            .collect();
        assert_eq!(ids.len(), 3);
        assert!(ids
            .windows(2)
            .all(|w| w[0].commit_log_offset < w[1].commit_log_offset));
        let next = producer
            .send_to_queue(Message::new("Batch", "after"), &sent.message_queue)
            .await
            .unwrap();
        assert_eq!(next.queue_offset, sent.queue_offset + 3);

        let mixed = vec![Message::new("Batch", "x"), Message::new("Other", "y")];
        assert!(matches!(
            producer.send_batch(mixed).await,
            Err(ProducerError::MessageIllegal { .. })
        ));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_in_flight_limit_fails_with_too_many_requests_after_the_send_timeout() {
    // The holder keeps the only permit at least this long (the broker sleeps
    // holding its put lock), far longer than the waiter's send timeout.
    const PUT_DELAY: Duration = Duration::from_millis(2000);
    const SEND_TIMEOUT: Duration = Duration::from_millis(200);
    const HEAD_START: Duration = Duration::from_millis(100);
    bounded(30, async {
        let b = TestBroker::start(&[("faultPutLockDelayMills", "2000")]).await;
        b.create_topic("Slow").await;
        common::wait_for_route(b.namesrv(), "Slow", 1).await;
        let producer = Producer::start(ProducerConfig {
            client_async_semaphore_value: 1,
            send_msg_timeout: SEND_TIMEOUT,
            ..config(b.namesrv())
        })
        .await
        .unwrap();
        // Warm the route cache so that the holder goes straight to the broker.
        producer.publish_queues("Slow").await.unwrap();
        // Polled first, the holder takes the permit before the waiter starts.
        let holder =
            producer.send_with_timeout(Message::new("Slow", "holder"), Duration::from_secs(10));
        let waiter = async {
            tokio::time::sleep(HEAD_START).await;
            let began = Instant::now();
            let r = producer.send(Message::new("Slow", "waiter")).await;
            (r, began.elapsed())
        };
        let (held, (waited, elapsed)) = tokio::join!(holder, waiter);
        assert!(held.is_ok(), "{held:?}");
        match waited {
            Err(ProducerError::TooManyRequests {
                in_flight,
                limit,
                waited_ms,
            }) => {
                assert_eq!((in_flight, limit), (1, 1), "the one permit, held");
                assert!(waited_ms >= 200, "{waited_ms}");
            }
            other => panic!("expected TooManyRequests, got {other:?}"),
        }
        // Gave up at the send timeout, well before the holder could have
        // released the permit.
        assert!(
            elapsed >= SEND_TIMEOUT && elapsed < PUT_DELAY - HEAD_START,
            "{elapsed:?}"
        );
        assert_eq!(producer.stats().failed_too_many_requests, 1);
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn illegal_messages_are_refused_before_sending_naming_the_limit() {
    bounded(30, async {
        let b = TestBroker::start(&[]).await;
        let producer = Producer::start(ProducerConfig {
            max_message_size: 16,
            ..config(b.namesrv())
        })
        .await
        .unwrap();
        let too_big = producer.send(Message::new("T", vec![0_u8; 17])).await;
        match too_big {
            Err(ProducerError::MessageIllegal { reason }) => {
                assert!(reason.contains("maxMessageSize is 16"), "{reason}");
            }
            other => panic!("expected MessageIllegal, got {other:?}"),
        }
        for bad in [
            Message::new("bad topic", "x"),
            Message::new("T", ""),
            Message::new("TBW102", "x"),
        ] {
            assert!(matches!(
                producer.send(bad).await,
                Err(ProducerError::MessageIllegal { .. })
            ));
        }
        let wrong_queue = MessageQueue {
            topic: "Other".into(),
            broker_name: "broker-a".into(),
            queue_id: 0,
        };
        assert!(matches!(
            producer
                .send_to_queue(Message::new("T", "x"), &wrong_queue)
                .await,
            Err(ProducerError::MessageIllegal { .. })
        ));
        let stats = producer.stats();
        assert_eq!((stats.failed_illegal, stats.attempts), (5, 0));

        producer.shutdown().await;
        assert!(matches!(
            producer.send(Message::new("T", "x")).await,
            Err(ProducerError::Shutdown)
        ));
    })
    .await;
}
