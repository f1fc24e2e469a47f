//! Sends many messages with `send_async` in back-pressure mode, at most
//! `IN_FLIGHT` at a time, and prints the throughput.
//!
//! Start a broker (`cargo run --release --bin broker`), then:
//!
//! ```text
//! cargo run --release -p producer-client --example async_producer [NAMESRV] [TOPIC] [MESSAGES] [IN_FLIGHT]
//! ```
//!
//! Defaults: `127.0.0.1:9876`, `AsyncExample`, 20000 messages of 256 bytes,
//! 64 in flight. With `enableBackpressureForAsyncMode` the loop below slows
//! to the pace the broker answers instead of failing with
//! `TooManyRequests` when all permits are taken.

use std::time::Instant;

use anyhow::Context;
use producer_client::{Message, Producer, ProducerConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().unwrap_or_else(|| "127.0.0.1:9876".into());
    let topic = args.next().unwrap_or_else(|| "AsyncExample".into());
    let messages: usize = match args.next() {
        Some(n) => n.parse().context("MESSAGES must be a number")?,
        None => 20_000,
    };
    let in_flight: usize = match args.next() {
        Some(n) => n.parse().context("IN_FLIGHT must be a number")?,
        None => 64,
    };

    let producer = Producer::start(ProducerConfig {
        client_async_semaphore_value: in_flight,
        enable_backpressure_for_async_mode: true,
        ..ProducerConfig::with_namesrv(&namesrv)
    })
    .await
    .context("start producer")?;
    // One synchronous send first, so the route lookup and the topic's
    // auto-creation are not in the measurement.
    producer
        .send(Message::new(topic.as_str(), "warm-up"))
        .await
        .context("warm-up send")?;

    let body = bytes::Bytes::from(vec![b'x'; 256]);
    let began = Instant::now();
    let mut handles = Vec::with_capacity(messages);
    for _ in 0..messages {
        let handle = producer
            .send_async(Message::new(topic.as_str(), body.clone()))
            .await
            .context("start async send")?;
        handles.push(handle);
    }
    let mut failed = 0_usize;
    for handle in handles {
        if let Err(e) = handle.await {
            failed += 1;
            eprintln!("send failed: {e}");
        }
    }
    let elapsed = began.elapsed();
    let rate = messages as f64 / elapsed.as_secs_f64();
    println!(
        "{messages} messages ({failed} failed), {in_flight} in flight, in {:.3} s: {rate:.0} msgs/s",
        elapsed.as_secs_f64()
    );
    println!("{:?}", producer.stats());
    producer.shutdown().await;
    Ok(())
}
