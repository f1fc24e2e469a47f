//! Measures a push consumer against an in-process broker on loopback:
//! send-to-handler latency (p50/p99) at a steady rate, and the rate at which
//! it drains a pre-filled topic of 1 KiB messages.
//!
//! `cargo run --release -p consumer-client --example consume_bench -- [rate] [seconds] [prefill]`
//! (defaults 1000 msgs/s, 3 s, 100000 messages).
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use broker_server::{Broker, BrokerConfig};
use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, FnHandler, MessageExt, PushConsumer,
};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{CreateTopicRequestHeader, TopicFilterType},
    RemotingCommand, RequestCode, AUTO_CREATE_TOPIC,
};

fn now_us() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1).map(|a| a.parse::<u64>().unwrap());
    let rate = args.next().unwrap_or(1000);
    let seconds = args.next().unwrap_or(3);
    let prefill = args.next().unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let all: Vec<(String, String)> = [
        ("listenPort", "0".to_owned()),
        ("namesrvListenPort", "0".to_owned()),
        ("metricsListenPort", "0".to_owned()),
        ("storePathRootDir", dir.path().display().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let broker = Broker::start(BrokerConfig::load(None, std::iter::empty(), &all).unwrap())
        .await
        .unwrap();
    let addr = broker
        .remoting_addr()
        .to_string()
        .replace("0.0.0.0", "127.0.0.1");
    let namesrv = broker
        .namesrv_addr()
        .unwrap()
        .to_string()
        .replace("0.0.0.0", "127.0.0.1");
    let client = RemotingClient::new(ClientOptions::default());
    for topic in ["LatencyT", "DrainT"] {
        let req = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: AUTO_CREATE_TOPIC.into(),
                read_queue_nums: 8,
                write_queue_nums: 8,
                perm: 6,
                topic_filter_type: TopicFilterType::SingleTag,
                ..CreateTopicRequestHeader::default()
            },
        );
        client
            .invoke(&addr, req, Duration::from_secs(5))
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let producer = Arc::new(
        Producer::start(ProducerConfig::with_namesrv(&namesrv))
            .await
            .unwrap(),
    );
    let config = |group: &str| ConsumerConfig {
        consume_from_where: ConsumeFromWhere::FirstOffset,
        ..ConsumerConfig::new(&namesrv, group)
    };

    // Latency: the send time travels in the body.
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let lat = Arc::clone(&latencies);
    let consumer = PushConsumer::start(
        config("LatencyG").subscribe("LatencyT", "*"),
        FnHandler(move |msgs: Vec<MessageExt>| {
            let lat = Arc::clone(&lat);
            async move {
                let now = now_us();
                for m in msgs {
                    let sent: u64 = String::from_utf8_lossy(&m.body).parse().unwrap_or(now);
                    lat.lock().unwrap().push(now.saturating_sub(sent));
                }
                ConsumeStatus::Success
            }
        }),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let total = rate * seconds;
    let mut tick = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    for _ in 0..total {
        tick.tick().await;
        let p = Arc::clone(&producer);
        tokio::spawn(async move {
            let _ = p.send(Message::new("LatencyT", now_us().to_string())).await;
        });
    }
    let start = Instant::now();
    while latencies.lock().unwrap().len() < usize::try_from(total).unwrap()
        && start.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    consumer.shutdown().await;
    let mut l = latencies.lock().unwrap().clone();
    l.sort_unstable();
    let pct = |p: f64| {
        l.get(((l.len() as f64 * p) as usize).min(l.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0)
    };
    println!(
        "latency at {rate} msgs/s for {seconds} s: {} received, p50 {} us, p99 {} us, max {} us",
        l.len(),
        pct(0.50),
        pct(0.99),
        l.last().copied().unwrap_or(0)
    );

    // Throughput: pre-fill, then drain.
    let body = bytes::Bytes::from(vec![b'x'; 1024]);
    let fill_start = Instant::now();
    let sent = Arc::new(AtomicUsize::new(0));
    let mut senders = Vec::new();
    for _ in 0..32 {
        let (p, body, sent) = (Arc::clone(&producer), body.clone(), Arc::clone(&sent));
        senders.push(tokio::spawn(async move {
            while sent.fetch_add(1, Ordering::Relaxed) < usize::try_from(prefill).unwrap() {
                p.send(Message::new("DrainT", body.clone())).await.unwrap();
            }
        }));
    }
    for s in senders {
        s.await.unwrap();
    }
    println!("pre-filled {prefill} x 1 KiB in {:?}", fill_start.elapsed());
    let consumed = Arc::new(AtomicUsize::new(0));
    let c2 = Arc::clone(&consumed);
    let start = Instant::now();
    let consumer = PushConsumer::start(
        config("DrainG").subscribe("DrainT", "*"),
        FnHandler(move |msgs: Vec<MessageExt>| {
            c2.fetch_add(msgs.len(), Ordering::Relaxed);
            async { ConsumeStatus::Success }
        }),
    )
    .await
    .unwrap();
    while consumed.load(Ordering::Relaxed) < usize::try_from(prefill).unwrap()
        && start.elapsed() < Duration::from_secs(60)
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = start.elapsed();
    let n = consumed.load(Ordering::Relaxed);
    println!(
        "drained {n} x 1 KiB in {took:?}: {:.0} msgs/s, {:.1} MiB/s",
        n as f64 / took.as_secs_f64(),
        n as f64 / 1024.0 / took.as_secs_f64()
    );
    consumer.shutdown().await;
    producer.shutdown().await;
    broker.shutdown().await;
}
