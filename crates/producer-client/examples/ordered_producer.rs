//! Sends the steps of a few orders with `send_with_selector`, keyed by order
//! id, so that each order's steps are stored in one queue in order.
//!
//! Start a broker (`cargo run --bin broker`), then:
//!
//! ```text
//! cargo run -p producer-client --example ordered_producer [NAMESRV] [TOPIC]
//! ```
//!
//! `NAMESRV` defaults to `127.0.0.1:9876` and `TOPIC` to `OrderedExample`.

use anyhow::Context;
use producer_client::{select_by_key, Message, Producer, ProducerConfig};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().unwrap_or_else(|| "127.0.0.1:9876".into());
    let topic = args.next().unwrap_or_else(|| "OrderedExample".into());

    let producer = Producer::start(ProducerConfig::with_namesrv(&namesrv))
        .await
        .context("start producer")?;
    let orders = ["order-1001", "order-1002", "order-1003"];
    for step in ["created", "paid", "shipped", "delivered"] {
        for order in orders {
            let msg = Message::new(topic.as_str(), format!("{order} {step}"))
                .with_tags(step)
                .with_key(order);
            // One attempt on the key's queue; an error means this step was
            // not stored and the order's later steps should wait.
            let sent = producer
                .send_with_selector(msg, select_by_key, order)
                .await
                .with_context(|| format!("send {order} {step}"))?;
            println!(
                "{order} {step:<9} -> queue {}@{} offset {}",
                sent.message_queue.queue_id, sent.message_queue.broker_name, sent.queue_offset
            );
        }
    }
    producer.shutdown().await;
    Ok(())
}
