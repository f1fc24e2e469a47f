//! Sends ten messages one after another and prints where each landed.
//!
//! Start a broker (`cargo run --bin broker`, name server on 127.0.0.1:9876),
//! then:
//!
//! ```text
//! cargo run -p producer-client --example sync_producer [NAMESRV] [TOPIC]
//! ```
//!
//! `NAMESRV` defaults to `127.0.0.1:9876` and `TOPIC` to `SyncExample`; the
//! broker creates the topic on first use.

use anyhow::Context;
use producer_client::{Message, Producer, ProducerConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().unwrap_or_else(|| "127.0.0.1:9876".into());
    let topic = args.next().unwrap_or_else(|| "SyncExample".into());

    let producer = Producer::start(ProducerConfig::with_namesrv(&namesrv))
        .await
        .context("start producer")?;
    for i in 0..10 {
        let msg = Message::new(topic.as_str(), format!("hello {i}"))
            .with_tags("TagA")
            .with_key(format!("key-{i}"));
        let sent = producer
            .send(msg)
            .await
            .with_context(|| format!("send message {i}"))?;
        println!(
            "{i}: {:?} msg_id={} queue={}@{} offset={}",
            sent.status,
            sent.msg_id,
            sent.message_queue.queue_id,
            sent.message_queue.broker_name,
            sent.queue_offset
        );
    }
    println!("{:?}", producer.stats());
    producer.shutdown().await;
    Ok(())
}
