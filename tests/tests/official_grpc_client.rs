//! Apache's official RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0)
//! against broker-a's gRPC endpoint, with no proxy: its producer sends and
//! its `SimpleConsumer` receives and acknowledges every message; a delay
//! message (delivery timestamp) arrives no earlier than its instant; the
//! messages of a FIFO group arrive in order; its transaction producer
//! commits, rolls back and answers the broker's checks.
//!
//! Mechanism: Telemetry settings exchange, QueryRoute with endpoints derived
//! from the access point, SendMessage entering the broker's send queue, and
//! POP consumption (ReceiveMessage across the broker's queues, AckMessage).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use e2e_tests::{unique, E2eEnv};
use rocketmq::{
    conf::{ClientOption, ProducerOption, SimpleConsumerOption},
    model::{
        common::{FilterExpression, FilterType},
        message::{MessageBuilder, MessageView},
        transaction::{Transaction, TransactionResolution},
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

/// Mechanism: TRANSACTION sends are half messages of the topic's group;
/// `commit`/`rollback` are EndTransaction calls; the halves left open are
/// checked after `transactionTimeOut` (1 s on the e2e brokers) with a
/// RecoverOrphanedTransactionCommand on the producer's telemetry stream,
/// which the client answers with EndTransaction from SOURCE_SERVER_CHECK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_rust_client_transactions_commit_roll_back_and_answer_checks() {
    let Some(env) = E2eEnv::from_env("official RocketMQ 5 Rust client") else {
        return;
    };
    let endpoint = env
        .grpc
        .clone()
        .expect("SLUICE_E2E_GRPC_A: broker-a's gRPC endpoint");
    let topic = unique("OfficialTx");
    env.create_topic(&topic, QUEUES).await.unwrap();
    let mut consumer = consumer_for(&endpoint, &topic, &unique("official-tx-"));
    consumer.start().await.unwrap();
    let all = FilterExpression::new(FilterType::Tag, "*");
    let first = consumer
        .receive_with(&topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_empty(), "nothing sent yet: {}", first.len());

    // What the broker asked about, by body.
    let checked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&checked);
    let checker = Box::new(move |_transaction_id: String, view: MessageView| {
        let body = String::from_utf8_lossy(view.body()).into_owned();
        let resolution = if body.starts_with("check-commit") {
            TransactionResolution::COMMIT
        } else if body.starts_with("check-rollback") {
            TransactionResolution::ROLLBACK
        } else {
            TransactionResolution::UNKNOWN
        };
        seen.lock().unwrap().push(body);
        resolution
    });
    let mut option = ProducerOption::default();
    option.set_topics(vec![topic.clone()]);
    let mut producer =
        Producer::new_transaction_producer(option, client_option(&endpoint), checker).unwrap();
    producer.start().await.unwrap();
    let half = |body: &str| {
        MessageBuilder::transaction_message_builder(topic.as_str(), body.as_bytes().to_vec())
            .set_tag("tx")
            .build()
            .unwrap()
    };
    let committed = producer
        .send_transaction_message(half("commit"))
        .await
        .unwrap();
    let committed_id = committed.message_id().to_owned();
    committed.commit().await.unwrap();
    let rolled_back = producer
        .send_transaction_message(half("rollback"))
        .await
        .unwrap();
    rolled_back.rollback().await.unwrap();
    // Left open: the broker asks.
    let open_commit = producer
        .send_transaction_message(half("check-commit"))
        .await
        .unwrap();
    let open_commit_id = open_commit.message_id().to_owned();
    let open_rollback = producer
        .send_transaction_message(half("check-rollback"))
        .await
        .unwrap();
    drop((open_commit, open_rollback));

    let started = Instant::now();
    let deadline = started + Duration::from_secs(60);
    let mut received: HashMap<String, (String, usize)> = HashMap::new();
    while !(received.contains_key(&committed_id) && received.contains_key(&open_commit_id)) {
        assert!(
            Instant::now() < deadline,
            "within 60 s received only {received:?}; checks asked about {:?}",
            checked.lock().unwrap()
        );
        receive_round(&consumer, &topic, &mut received).await;
    }
    let checks_done = |c: &Vec<String>| c.iter().any(|b| b == "check-rollback");
    while !checks_done(&checked.lock().unwrap()) {
        assert!(Instant::now() < deadline, "check-rollback never checked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Everything stored before the marker is received before it.
    let marker = producer
        .send(
            MessageBuilder::builder()
                .set_topic(topic.as_str())
                .set_tag("tx")
                .set_body(b"marker".to_vec())
                .build()
                .unwrap(),
        )
        .await
        .unwrap();
    while !received.contains_key(marker.message_id()) {
        assert!(Instant::now() < deadline, "the marker never arrived");
        receive_round(&consumer, &topic, &mut received).await;
    }
    let mut bodies: Vec<(String, usize)> = received.into_values().collect();
    bodies.sort();
    println!(
        "official client transactions: received {bodies:?} in {:.1} s; checks asked about {:?}",
        started.elapsed().as_secs_f64(),
        checked.lock().unwrap()
    );
    assert_eq!(
        bodies,
        [
            ("check-commit".to_owned(), 1),
            ("commit".to_owned(), 1),
            ("marker".to_owned(), 1)
        ],
        "commits once each, rollbacks never"
    );
    producer.shutdown().await.unwrap();
    consumer.shutdown().await.unwrap();
}

/// Receives once, acknowledges what came and counts it by message id (with
/// its body).
async fn receive_round(
    consumer: &SimpleConsumer,
    topic: &str,
    received: &mut HashMap<String, (String, usize)>,
) {
    let all = FilterExpression::new(FilterType::Tag, "*");
    let messages = consumer
        .receive_with(topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    for m in messages {
        consumer.ack(&m).await.unwrap();
        let body = String::from_utf8_lossy(m.body()).into_owned();
        received
            .entry(m.message_id().to_owned())
            .or_insert((body, 0))
            .1 += 1;
    }
}
