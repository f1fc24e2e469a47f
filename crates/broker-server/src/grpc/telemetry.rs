//! Telemetry: the settings exchange. Every `settings` command a client
//! writes is answered at once on the same stream with `status OK` and the
//! client's settings completed by the broker's values (back-off policy,
//! largest body, subscription parameters). The stream stays open until the
//! client half-closes it or the broker shuts down.
//!
//! A producer's stream is registered under the topics its settings publish
//! to, so the broker can send it `RecoverOrphanedTransactionCommand`s: the
//! checks of its transactions (see [`crate::grpc::transaction`]).

use std::{sync::Arc, time::Duration};

use grpc_protocol::v2::{
    retry_policy::Strategy, settings::PubSub, telemetry_command::Command, ClientType,
    CustomizedBackoff, ExponentialBackoff, Metric, RetryPolicy, Settings, TelemetryCommand,
};
use remoting_net::CancellationToken;
use tokio::sync::mpsc;
use tonic::Streaming;

use crate::{clients::TelemetryStream, grpc::status::ok, state::BrokerState};

/// Commands the broker may have queued for one client before it waits.
pub const STREAM_CHANNEL_CAPACITY: usize = 16;

/// Messages a simple or push consumer asks for per receive.
const RECEIVE_BATCH_SIZE: i32 = 32;
/// Long-polling time of a push consumer's receives.
const LONG_POLLING_TIMEOUT: Duration = Duration::from_secs(20);
/// Redelivery delays of consumers (RocketMQ's classic 1 s .. 2 h ladder).
const CONSUMER_BACKOFF_SECS: [u64; 18] = [
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
];

fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// The producer back-off: 3 attempts, 10 ms doubling up to 1 s.
fn producer_backoff() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        strategy: Some(Strategy::ExponentialBackoff(ExponentialBackoff {
            initial: Some(duration(Duration::from_millis(10))),
            max: Some(duration(Duration::from_secs(1))),
            multiplier: 2.0,
        })),
    }
}

/// The consumer back-off: 17 deliveries along the classic ladder.
fn consumer_backoff() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 17,
        strategy: Some(Strategy::CustomizedBackoff(CustomizedBackoff {
            next: CONSUMER_BACKOFF_SECS
                .iter()
                .map(|s| duration(Duration::from_secs(*s)))
                .collect(),
        })),
    }
}

/// The broker's answer to a client's settings: the client's own values
/// echoed, the broker-owned ones filled in.
pub fn settings_reply(client: &Settings, max_body_size: usize, fifo: bool) -> Settings {
    let mut out = client.clone();
    let max_body = i32::try_from(max_body_size).unwrap_or(i32::MAX);
    let consumer = matches!(out.pub_sub, Some(PubSub::Subscription(_)))
        || matches!(
            client
                .client_type
                .and_then(|t| ClientType::try_from(t).ok()),
            Some(ClientType::SimpleConsumer | ClientType::PushConsumer)
        );
    match &mut out.pub_sub {
        Some(PubSub::Publishing(p)) => {
            p.max_body_size = max_body;
            p.validate_message_type = true;
        }
        Some(PubSub::Subscription(s)) => {
            s.fifo = Some(fifo);
            s.receive_batch_size = Some(RECEIVE_BATCH_SIZE);
            s.long_polling_timeout = Some(duration(LONG_POLLING_TIMEOUT));
        }
        None => {}
    }
    out.backoff_policy = Some(if consumer {
        consumer_backoff()
    } else {
        producer_backoff()
    });
    out.metric = Some(Metric {
        on: false,
        endpoints: None,
    });
    out
}

/// Reads a client's commands until it half-closes (or the broker stops) and
/// answers each `settings` on `tx`; a producer's stream is known by its
/// topics until it ends.
pub async fn serve_stream(
    mut inbound: Streaming<TelemetryCommand>,
    tx: mpsc::Sender<Result<TelemetryCommand, tonic::Status>>,
    client_id: String,
    state: Arc<BrokerState>,
    shutdown: CancellationToken,
) {
    let stream_id = state.grpc_producers.new_stream_id();
    loop {
        let next = tokio::select! {
            () = shutdown.cancelled() => break,
            next = inbound.message() => next,
        };
        match next {
            Ok(Some(cmd)) => match cmd.command {
                Some(Command::Settings(settings)) => {
                    tracing::debug!(client = %client_id, "telemetry settings received");
                    let fifo = match &settings.pub_sub {
                        Some(PubSub::Subscription(s)) => s.group.as_ref().is_some_and(|g| {
                            state
                                .subscriptions
                                .get(&g.name)
                                .is_some_and(|g| g.consume_message_orderly)
                        }),
                        _ => false,
                    };
                    if let Some(PubSub::Publishing(p)) = &settings.pub_sub {
                        let topics = p.topics.iter().map(|t| t.name.clone()).collect();
                        let stream = TelemetryStream {
                            client_id: client_id.clone(),
                            tx: tx.clone(),
                        };
                        state.grpc_producers.register(stream_id, topics, &stream);
                    }
                    let max_body_size = state.config().store.max_message_size;
                    let reply = TelemetryCommand {
                        status: Some(ok()),
                        command: Some(Command::Settings(settings_reply(
                            &settings,
                            max_body_size,
                            fifo,
                        ))),
                    };
                    let sent = tokio::select! {
                        () = shutdown.cancelled() => break,
                        sent = tx.send(Ok(reply)) => sent,
                    };
                    if sent.is_err() {
                        break;
                    }
                }
                Some(other) => {
                    tracing::debug!(client = %client_id, command = ?std::mem::discriminant(&other), "telemetry command ignored");
                }
                None => {}
            },
            Ok(None) => break,
            Err(e) => {
                tracing::debug!(client = %client_id, cause = %e, "telemetry stream ended with an error");
                break;
            }
        }
    }
    state.grpc_producers.unregister(stream_id);
    tracing::debug!(client = %client_id, "telemetry stream closed");
}

#[cfg(test)]
mod tests {
    use grpc_protocol::v2::{Publishing, Resource, Subscription};

    use super::*;

    #[test]
    fn producer_reply_has_exponential_backoff_and_a_body_limit() {
        let client = Settings {
            client_type: Some(ClientType::Producer as i32),
            pub_sub: Some(PubSub::Publishing(Publishing {
                topics: vec![Resource {
                    resource_namespace: String::new(),
                    name: "T".into(),
                }],
                max_body_size: 0,
                validate_message_type: false,
            })),
            ..Settings::default()
        };
        let reply = settings_reply(&client, 4 * 1024 * 1024, false);
        let Some(PubSub::Publishing(p)) = &reply.pub_sub else {
            panic!("publishing echoed: {reply:?}");
        };
        assert_eq!(p.max_body_size, 4 * 1024 * 1024);
        assert_eq!(p.topics.len(), 1);
        let policy = reply.backoff_policy.unwrap();
        assert_eq!(policy.max_attempts, 3);
        let Some(Strategy::ExponentialBackoff(e)) = policy.strategy else {
            panic!("exponential");
        };
        assert_eq!(e.initial.unwrap().nanos, 10_000_000);
        assert_eq!(e.max.unwrap().seconds, 1);
        assert!((e.multiplier - 2.0).abs() < f32::EPSILON);
    }

    #[test]
    fn consumer_reply_has_subscription_values() {
        let client = Settings {
            client_type: Some(ClientType::SimpleConsumer as i32),
            pub_sub: Some(PubSub::Subscription(Subscription::default())),
            ..Settings::default()
        };
        let reply = settings_reply(&client, 1024, false);
        let Some(PubSub::Subscription(s)) = &reply.pub_sub else {
            panic!("subscription echoed");
        };
        assert_eq!(s.receive_batch_size, Some(32));
        assert_eq!(s.fifo, Some(false));
        assert_eq!(s.long_polling_timeout.as_ref().unwrap().seconds, 20);
        assert!(reply.backoff_policy.is_some());
    }
}
