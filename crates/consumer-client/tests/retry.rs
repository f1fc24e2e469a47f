//! A push consumer's failed messages go back to the broker: they come back
//! later through the group's retry topic and, after `maxReconsumeTimes`,
//! land in its dead-letter topic, while the rest of their queue is consumed.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use common::wait_for;
use consumer_client::{
    ConsumeStatus, ConsumerConfig, MessageExt, MessageHandler, PullConsumer, PullStatus,
    PushConsumer,
};
use producer_client::Message;

/// Fails every delivery of the message whose body is `poison`.
#[derive(Clone, Default)]
struct FailsPoison {
    /// Every delivery: body, topic and reconsume times.
    deliveries: Arc<Mutex<Vec<(String, String, i32)>>>,
}

impl FailsPoison {
    fn of(&self, body: &str) -> Vec<(String, i32)> {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _, _)| b == body)
            .map(|(_, topic, times)| (topic.clone(), *times))
            .collect()
    }

    fn succeeded(&self) -> usize {
        self.deliveries
            .lock()
            .unwrap()
            .iter()
            .filter(|(b, _, _)| b != "poison")
            .count()
    }
}

impl MessageHandler for FailsPoison {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let mut failed = false;
        {
            let mut seen = self.deliveries.lock().unwrap();
            for m in messages {
                let body = String::from_utf8_lossy(&m.body).into_owned();
                failed |= body == "poison";
                seen.push((body, m.topic.clone(), m.reconsume_times));
            }
        }
        async move {
            if failed {
                ConsumeStatus::RetryLater
            } else {
                ConsumeStatus::Success
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_poison_message_reaches_the_dead_letter_topic_while_its_queue_moves_on() {
    let dir = tempfile::tempdir().unwrap();
    let b = common::TestBroker::start_with(dir.path(), &[("messageDelayLevel", "1s 1s 1s")]).await;
    b.create_topic("PoisonT", 1).await;
    let producer = b.producer().await;
    for i in 0..20 {
        let body = if i == 5 {
            "poison".to_owned()
        } else {
            format!("ok-{i}")
        };
        producer.send(Message::new("PoisonT", body)).await.unwrap();
    }
    let handler = FailsPoison::default();
    let config = ConsumerConfig {
        max_reconsume_times: 2,
        ..b.consumer_config("PoisonG")
    }
    .subscribe("PoisonT", "*");
    let consumer = PushConsumer::start(config, handler.clone()).await.unwrap();

    // The other 19 are consumed without waiting for the poison message.
    wait_for(Duration::from_secs(20), || async {
        handler.succeeded() >= 19
    })
    .await;
    // Three deliveries of the poison message (the first and two retries),
    // each under its own topic, then the dead-letter topic.
    wait_for(Duration::from_secs(30), || async {
        handler.of("poison").len() >= 3 && consumer.stats().sent_back >= 3
    })
    .await;
    assert_eq!(
        handler.of("poison"),
        [
            ("PoisonT".to_owned(), 0),
            ("PoisonT".to_owned(), 1),
            ("PoisonT".to_owned(), 2)
        ]
    );

    let probe = PullConsumer::start(ConsumerConfig::new(&b.namesrv, "PoisonG"))
        .await
        .unwrap();
    // The queue's offset moved past the poison message.
    let queue = probe.fetch_queues("PoisonT").await.unwrap().remove(0);
    wait_for(Duration::from_secs(10), || async {
        probe.fetch_consume_offset(&queue).await.unwrap() == Some(20)
    })
    .await;
    // The dead-letter topic holds it, with the count and the first topic.
    let mut dlq = Vec::new();
    wait_for(Duration::from_secs(10), || async {
        !probe
            .fetch_queues("%DLQ%PoisonG")
            .await
            .unwrap_or_default()
            .is_empty()
    })
    .await;
    let dlq_queue = probe.fetch_queues("%DLQ%PoisonG").await.unwrap().remove(0);
    let pulled = probe.pull(&dlq_queue, 0, 32).await.unwrap();
    assert_eq!(pulled.status, PullStatus::Found);
    dlq.extend(pulled.messages);
    assert_eq!(dlq.len(), 1);
    assert_eq!(&dlq[0].body[..], b"poison");
    assert_eq!(dlq[0].reconsume_times, 3);
    assert_eq!(
        dlq[0].properties.get("RETRY_TOPIC").map(String::as_str),
        Some("PoisonT")
    );
    // Nothing was delivered after it went to the dead-letter topic.
    assert_eq!(handler.of("poison").len(), 3);

    consumer.shutdown().await;
    probe.shutdown().await;
    producer.shutdown().await;
    b.broker.shutdown().await;
}
