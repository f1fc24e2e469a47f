//! Apache's official RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0)
//! against broker-a's gRPC endpoint, with no proxy: its producer sends and
//! its `SimpleConsumer` receives and acknowledges every message; a delay
//! message (delivery timestamp) arrives no earlier than its instant; the
//! messages of a FIFO group arrive in order.
//!
//! Mechanism: Telemetry settings exchange, QueryRoute with endpoints derived
//! from the access point, SendMessage entering the broker's send queue, and
//! POP consumption (ReceiveMessage across the broker's queues, AckMessage).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use e2e_tests::{unique, E2eEnv};
use rocketmq::{
    conf::{ClientOption, ProducerOption, SimpleConsumerOption},
    model::{
        common::{FilterExpression, FilterType},
        message::MessageBuilder,
    },
    Producer, SimpleConsumer,
};

/// Queues of the test topic.
const QUEUES: i32 = 4;

fn body(i: usize) -> Vec<u8> {
    format!("official-{i:08}-").repeat(8).into_bytes()
}

fn client_option(endpoint: &str) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(endpoint);
    option.set_enable_tls(false);
    // The client's gRPC deadline of a receive equals this; the broker
    // answers "no message" before it.
    option.set_long_polling_timeout(Duration::from_secs(5));
    option
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_client_sends_receives_and_acks_every_message() {
    let Some(env) = E2eEnv::from_env("official RocketMQ 5 Rust client") else {
        return;
    };
    let endpoint = env
        .grpc
        .clone()
        .expect("SLUICE_E2E_GRPC_A: broker-a's gRPC endpoint");
    let n = if env.quick { 200 } else { 5000 };
    let topic = unique("Official");
    env.create_topic(&topic, QUEUES).await.unwrap();

    // The consumer's group starts at the queues' end at its first receive,
    // so it receives once (nothing) before anything is sent.
    let mut consumer_option = SimpleConsumerOption::default();
    consumer_option.set_topics(vec![topic.clone()]);
    consumer_option.set_consumer_group(unique("official-"));
    let mut consumer = SimpleConsumer::new(consumer_option, client_option(&endpoint)).unwrap();
    consumer.start().await.unwrap();
    let all = FilterExpression::new(FilterType::Tag, "*");
    let first = consumer
        .receive_with(&topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_empty(), "nothing sent yet: {}", first.len());

    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec![topic.clone()]);
    let mut producer = Producer::new(producer_option, client_option(&endpoint)).unwrap();
    producer.start().await.unwrap();
    let started = Instant::now();
    let mut sent: HashMap<String, usize> = HashMap::with_capacity(n);
    for i in 0..n {
        let message = MessageBuilder::builder()
            .set_topic(topic.as_str())
            .set_tag("e2e")
            .set_keys(vec![format!("k{i}")])
            .set_body(body(i))
            .build()
            .unwrap();
        let receipt = producer
            .send(message)
            .await
            .unwrap_or_else(|e| panic!("send {i}: {e:?}"));
        assert!(
            sent.insert(receipt.message_id().to_owned(), i).is_none(),
            "message id {} reused",
            receipt.message_id()
        );
    }
    println!(
        "official client: sent {n} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    producer.shutdown().await.unwrap();

    let started = Instant::now();
    let deadline = started + Duration::from_secs(120);
    let mut acked: HashMap<String, usize> = HashMap::with_capacity(n);
    let mut redelivered = 0;
    while acked.len() < n {
        assert!(
            Instant::now() < deadline,
            "received {} of {n} within 120 s",
            acked.len()
        );
        let messages = consumer
            .receive_with(&topic, &all, 32, Duration::from_secs(30))
            .await
            .unwrap();
        for m in messages {
            let i = *sent
                .get(m.message_id())
                .unwrap_or_else(|| panic!("unknown message id {}", m.message_id()));
            assert_eq!(m.body(), body(i).as_slice(), "body of message {i}");
            assert_eq!(m.tag(), Some("e2e"));
            assert_eq!(m.keys(), [format!("k{i}")]);
            assert!(m.delivery_attempt() >= 1, "delivery attempt of {i}");
            if m.delivery_attempt() > 1 {
                redelivered += 1;
            }
            consumer
                .ack(&m)
                .await
                .unwrap_or_else(|e| panic!("ack {i}: {e:?}"));
            *acked.entry(m.message_id().to_owned()).or_default() += 1;
        }
    }
    let twice = acked.values().filter(|&&c| c > 1).count();
    println!(
        "official client: received and acked {} in {:.1} s; {twice} received twice, \
         {redelivered} redeliveries",
        acked.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(twice, 0, "an acknowledged message came back");
    consumer.shutdown().await.unwrap();
}

fn consumer_for(endpoint: &str, topic: &str, group: &str) -> SimpleConsumer {
    let mut option = SimpleConsumerOption::default();
    option.set_topics(vec![topic.to_owned()]);
    option.set_consumer_group(group);
    SimpleConsumer::new(option, client_option(endpoint)).unwrap()
}

fn producer_for(endpoint: &str, topic: &str) -> Producer {
    let mut option = ProducerOption::default();
    option.set_topics(vec![topic.to_owned()]);
    Producer::new(option, client_option(endpoint)).unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Mechanism: the client sends a DELAY message with a delivery timestamp;
/// the broker keeps it on its timer topic and delivers it to the topic at
/// that instant, where the consumer's receive finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_client_delay_message_arrives_at_its_delivery_time() {
    let Some(env) = E2eEnv::from_env("official RocketMQ 5 Rust client, delay message") else {
        return;
    };
    let endpoint = env.grpc.clone().expect("SLUICE_E2E_GRPC_A");
    let topic = unique("OfficialDelay");
    env.create_topic(&topic, QUEUES).await.unwrap();
    let mut consumer = consumer_for(&endpoint, &topic, &unique("official-delay-"));
    consumer.start().await.unwrap();
    let all = FilterExpression::new(FilterType::Tag, "*");
    let first = consumer
        .receive_with(&topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_empty(), "nothing sent yet");
    let mut producer = producer_for(&endpoint, &topic);
    producer.start().await.unwrap();
    // This client takes (and reports) the delivery time in whole seconds.
    let due_s = now_ms() / 1000 + 3;
    let due = due_s * 1000;
    let message = MessageBuilder::delay_message_builder(topic.as_str(), b"at-due".to_vec(), due_s)
        .set_tag("delay")
        .build()
        .unwrap();
    let receipt = producer.send(message).await.unwrap();
    producer.shutdown().await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "the delay message did not arrive in 60 s"
        );
        let got = consumer
            .receive_with(&topic, &all, 32, Duration::from_secs(30))
            .await
            .unwrap();
        if let Some(m) = got.into_iter().next() {
            let received = now_ms();
            assert_eq!(m.message_id(), receipt.message_id());
            assert_eq!(m.body(), b"at-due");
            assert!(
                received >= due,
                "received {} ms before its delivery time",
                due - received
            );
            assert_eq!(m.delivery_timestamp(), Some(due_s));
            consumer.ack(&m).await.unwrap();
            println!(
                "official client: delay message received {} ms after its delivery time",
                received - due
            );
            break;
        }
    }
    consumer.shutdown().await.unwrap();
}

/// Mechanism: the producer hashes each message group to one queue; the
/// group is a FIFO group (`consumeMessageOrderly`), so the broker gives a
/// queue's next messages only after the previous ones were acknowledged,
/// and each group's messages arrive in the order they were sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_client_receives_each_fifo_group_in_order() {
    let Some(env) = E2eEnv::from_env("official RocketMQ 5 Rust client, FIFO") else {
        return;
    };
    let endpoint = env.grpc.clone().expect("SLUICE_E2E_GRPC_A");
    let topic = unique("OfficialFifo");
    env.create_topic(&topic, QUEUES).await.unwrap();
    let group = unique("official-fifo-");
    env.create_orderly_group(&group).await.unwrap();
    let mut consumer = consumer_for(&endpoint, &topic, &group);
    consumer.start().await.unwrap();
    let all = FilterExpression::new(FilterType::Tag, "*");
    let first = consumer
        .receive_with(&topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_empty(), "nothing sent yet");
    let mut producer = producer_for(&endpoint, &topic);
    producer.start().await.unwrap();
    let (groups, per_group) = (4, if env.quick { 25 } else { 250 });
    for seq in 0..per_group {
        for g in 0..groups {
            let message = MessageBuilder::fifo_message_builder(
                topic.as_str(),
                format!("{g}:{seq}").into_bytes(),
                format!("order-{g}"),
            )
            .build()
            .unwrap();
            producer.send(message).await.unwrap();
        }
    }
    producer.shutdown().await.unwrap();
    let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while seen.values().map(Vec::len).sum::<usize>() < groups * per_group {
        assert!(
            Instant::now() < deadline,
            "FIFO messages missing after 120 s: {seen:?}"
        );
        let got = consumer
            .receive_with(&topic, &all, 32, Duration::from_secs(30))
            .await
            .unwrap();
        for m in got {
            let text = String::from_utf8(m.body().to_vec()).unwrap();
            let (g, seq) = text.split_once(':').unwrap();
            assert_eq!(m.message_group(), Some(format!("order-{g}").as_str()));
            seen.entry(g.to_owned())
                .or_default()
                .push(seq.parse().unwrap());
            consumer.ack(&m).await.unwrap();
        }
    }
    for (g, seqs) in &seen {
        let expected: Vec<usize> = (0..per_group).collect();
        assert_eq!(seqs, &expected, "group {g} out of order or repeated");
    }
    consumer.shutdown().await.unwrap();
}
