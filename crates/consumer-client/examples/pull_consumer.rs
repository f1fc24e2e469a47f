//! Reads every queue of a topic from its first message to its end with a
//! pull consumer, then commits the end offsets for group `ExamplePullGroup`.
//!
//! Run against a broker whose name server listens on 127.0.0.1:9876:
//! `cargo run -p consumer-client --example pull_consumer -- 127.0.0.1:9876 TopicTest`

use consumer_client::{ConsumerConfig, ConsumerError, PullConsumer, PullStatus};

#[tokio::main]
async fn main() -> Result<(), ConsumerError> {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().unwrap_or_else(|| "127.0.0.1:9876".to_owned());
    let topic = args.next().unwrap_or_else(|| "TopicTest".to_owned());
    let consumer = PullConsumer::start(ConsumerConfig::new(&namesrv, "ExamplePullGroup")).await?;
    for queue in consumer.fetch_queues(&topic).await? {
        let mut offset = match consumer.fetch_consume_offset(&queue).await? {
            Some(o) => o,
            None => consumer.min_offset(&queue).await?,
        };
        loop {
            let result = consumer.pull(&queue, offset, 32).await?;
            for m in &result.messages {
                println!(
                    "{queue} offset {} id {} tags {:?}: {}",
                    m.queue_offset,
                    m.msg_id,
                    m.tags,
                    String::from_utf8_lossy(&m.body)
                );
            }
            offset = result.next_begin_offset;
            if result.status != PullStatus::Found {
                break;
            }
        }
        consumer.commit_offset(&queue, offset).await?;
    }
    consumer.shutdown().await;
    Ok(())
}
