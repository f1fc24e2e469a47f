//! Consumes a topic with a push consumer in group `ExamplePushGroup` until
//! Ctrl-C, printing each message; start it twice to see the queues split.
//!
//! Run against a broker whose name server listens on 127.0.0.1:9876:
//! `cargo run -p consumer-client --example push_consumer -- 127.0.0.1:9876 TopicTest`

use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, ConsumerError, FnHandler, MessageExt,
    PushConsumer,
};

#[tokio::main]
async fn main() -> Result<(), ConsumerError> {
    let mut args = std::env::args().skip(1);
    let namesrv = args.next().unwrap_or_else(|| "127.0.0.1:9876".to_owned());
    let topic = args.next().unwrap_or_else(|| "TopicTest".to_owned());
    let config = ConsumerConfig {
        consume_from_where: ConsumeFromWhere::FirstOffset,
        ..ConsumerConfig::new(&namesrv, "ExamplePushGroup")
    };
    let consumer = PushConsumer::start(
        config.subscribe(&topic, "*"),
        FnHandler(|msgs: Vec<MessageExt>| async move {
            for m in &msgs {
                println!(
                    "queue {} offset {} id {} tags {:?}: {}",
                    m.queue_id,
                    m.queue_offset,
                    m.msg_id,
                    m.tags,
                    String::from_utf8_lossy(&m.body)
                );
            }
            ConsumeStatus::Success
        }),
    )
    .await?;
    println!(
        "consuming {topic} as {}; Ctrl-C to stop",
        consumer.client_id()
    );
    let _ = tokio::signal::ctrl_c().await;
    consumer.shutdown().await;
    println!("stopped: {:?}", consumer.stats());
    Ok(())
}
