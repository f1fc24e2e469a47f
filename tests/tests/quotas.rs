//! Per-topic quotas on a real broker process: a producer sending faster
//! than its topic's quota is paced to it (each `[QUOTA]` answer says when
//! the tokens are back, and Sluice's producer waits that long), no error
//! reaches the application, and another topic on the same broker keeps its
//! own pace.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use e2e_tests::{runtime_figure, unique, E2eEnv, OwnBroker};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};

/// Target: with a quota of N messages/s, the accepted rate stays within
/// 5 % of N. The rate can never be above N beyond the one-second burst
/// (checked); how close below N it gets depends on the machine, so the run
/// prints it and checks only that it is more than half of N.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producer_over_its_topic_quota_is_paced_to_it() {
    let Some(env) = E2eEnv::from_env("topic quotas") else {
        return;
    };
    let quota = 50u32;
    let topic = unique("Quoted");
    let setting = format!("topicQuotas={topic}={quota}/s");
    let broker = OwnBroker::start(&env, "quotas", &[setting.as_str()]).unwrap();
    let producer = Producer::start(ProducerConfig::with_namesrv(&broker.namesrv))
        .await
        .unwrap();
    let total = if env.quick { 150u32 } else { 400 };
    let started = Instant::now();
    for i in 0..total {
        producer
            .send(Message::new(topic.as_str(), format!("quota {i}")))
            .await
            .unwrap_or_else(|e| panic!("send {i} reached the application as {e}"));
    }
    let took = started.elapsed();
    let stats = producer.stats();
    let after_burst = f64::from(total - quota) / took.as_secs_f64();
    println!(
        "quota {quota}/s: {total} sends in {took:?}, {after_burst:.1}/s after the burst \
         ({:.3} of the quota), {} quota waits, {} busy retries",
        after_burst / f64::from(quota),
        stats.quota_waits,
        stats.busy_retries
    );
    // Never faster than the quota: the tokens beyond the burst arrive at N/s.
    let floor = Duration::from_secs_f64(f64::from(total - quota) / f64::from(quota));
    assert!(
        took + Duration::from_millis(50) >= floor,
        "{took:?} < {floor:?}"
    );
    assert!(after_burst > f64::from(quota) / 2.0, "{after_burst}/s");
    assert_eq!((stats.busy_retries, stats.budget_exhausted), (0, 0));
    assert!(stats.quota_waits > 0);
    // Another topic has no quota: its sends take no quota wait.
    let other = unique("Unquoted");
    for i in 0..20 {
        producer
            .send(Message::new(other.as_str(), format!("free {i}")))
            .await
            .unwrap();
    }
    assert_eq!(producer.stats().quota_waits, stats.quota_waits);
    let client = RemotingClient::new(ClientOptions::default());
    // Each refusal the broker counted was one wait of the producer.
    let refused = runtime_figure(&client, &broker.addr, "rejected_over_quota")
        .await
        .unwrap();
    assert_eq!(refused, stats.quota_waits as i64);
    producer.shutdown().await;
    client.close_all().await;
}
