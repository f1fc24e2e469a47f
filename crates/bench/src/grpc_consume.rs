//! The gRPC consumer benchmark: `--receivers` loops, each sending RocketMQ
//! 5 `ReceiveMessage` calls (long polling up to 1 s) to a broker's gRPC
//! endpoint and acknowledging what came with one `AckMessage`, for a fixed
//! time. Messages are counted, and their end-to-end latency measured, as
//! the remoting consumer does ([`crate::consume`]).
//!
//! A POP group reads from where it stands: a new group starts at the
//! queues' end, so a run measures what is sent during it; a group that has
//! read before goes on with its backlog.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use grpc_protocol::{
    v2::{
        receive_message_response::Content, AckMessageEntry, AckMessageRequest, Code,
        FilterExpression, FilterType, Message, MessageQueue, QueryRouteRequest,
        ReceiveMessageRequest, Resource,
    },
    MessagingServiceClient,
};
use message_model::now_ms;
use tokio::{task::JoinSet, time::Instant};
use tonic::{
    metadata::AsciiMetadataValue,
    transport::{Channel, Endpoint},
    Request,
};

use crate::{
    consume::{lock, progress, ConsumeConfig, ConsumeRecorder, ConsumeReport},
    grpc::{check_route, with_client_id},
    outcome::grpc_code_name,
};

/// Longest a receive waits for messages (the broker clamps it to at least
/// 5 s, and to the call's deadline minus 200 ms, which this sets).
const LONG_POLL: Duration = Duration::from_secs(1);
/// What the broker keeps back from a call's deadline to answer in time.
const DEADLINE_RESERVE: Duration = Duration::from_millis(200);
/// How long received messages stay invisible before they come back.
const INVISIBLE: Duration = Duration::from_secs(30);
/// Pause of a receiver after a failed receive.
const ERROR_PAUSE: Duration = Duration::from_millis(200);
/// Extra time, beyond the end, allowed for the last receives to return.
const DRAIN_SLACK: Duration = Duration::from_secs(8);

/// One receiver's view of the endpoint.
#[derive(Clone)]
struct Receiver {
    client: MessagingServiceClient<Channel>,
    client_id: AsciiMetadataValue,
    group: Resource,
    topic: Resource,
    batch: i32,
    timeout: Duration,
}

/// Receives from `config.grpc` with `config.receivers` loops for the
/// configured time and reports what arrived.
///
/// # Errors
/// The endpoint cannot be reached, or refuses the topic's route.
pub async fn consume(config: &ConsumeConfig) -> Result<ConsumeReport> {
    let addr = &config.grpc;
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .with_context(|| format!("grpc address {addr:?} is not host:port"))?
        .connect_timeout(config.timeout)
        .tcp_nodelay(true)
        .connect()
        .await
        .with_context(|| format!("open an HTTP/2 channel to gRPC endpoint {addr}"))?;
    let client_id = format!("sluice-bench-consume@{}", std::process::id());
    let resource = |name: &str| Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    };
    let receiver = Receiver {
        client: MessagingServiceClient::new(channel),
        client_id: AsciiMetadataValue::try_from(client_id.as_str())
            .with_context(|| format!("client id {client_id:?} is not a header value"))?,
        group: resource(&config.group),
        topic: resource(&config.topic),
        batch: i32::try_from(config.batch).unwrap_or(32),
        timeout: config.timeout,
    };
    receiver.check_route(addr).await?;
    let recorder = Arc::new(Mutex::new(ConsumeRecorder::new()?));
    let start = Instant::now();
    let end = start + config.duration;
    let mut loops = JoinSet::new();
    for _ in 0..config.receivers {
        let receiver = receiver.clone();
        let recorder = Arc::clone(&recorder);
        loops.spawn(async move { receiver.run(end, &recorder).await });
    }
    let progress = config.progress.then(|| {
        let recorder = Arc::clone(&recorder);
        tokio::spawn(async move { progress(&recorder, start, end).await })
    });
    let all = async { while loops.join_next().await.is_some() {} };
    if tokio::time::timeout_at(end + DRAIN_SLACK, all)
        .await
        .is_err()
    {
        loops.abort_all();
        while loops.join_next().await.is_some() {}
    }
    if let Some(p) = progress {
        p.abort();
        let _ = p.await;
    }
    let report = lock(&recorder).report(config, config.receivers);
    Ok(report)
}

impl Receiver {
    fn request<T>(&self, message: T) -> Request<T> {
        with_client_id(message, &self.client_id)
    }

    /// Asks for the topic's route: the endpoint answers and knows the topic.
    async fn check_route(&self, addr: &str) -> Result<()> {
        let request = self.request(QueryRouteRequest {
            topic: Some(self.topic.clone()),
            endpoints: None,
        });
        check_route(self.client.clone(), request, addr, self.timeout).await
    }

    /// Receives and acknowledges until `end`.
    async fn run(&self, end: Instant, recorder: &Mutex<ConsumeRecorder>) {
        loop {
            let now = Instant::now();
            if now >= end {
                return;
            }
            let poll = LONG_POLL.min(end - now).max(Duration::from_millis(1));
            match self.receive(poll).await {
                Ok(messages) => {
                    let arrived = now_ms();
                    if Instant::now() < end {
                        lock(recorder).record_answer(messages.iter().map(stamps), arrived);
                    }
                    if let Err(e) = self.ack(&messages).await {
                        eprintln!("consume: ack failed: {e:#}");
                    }
                }
                Err(e) => {
                    if Instant::now() < end {
                        lock(recorder).record_error();
                    }
                    eprintln!("consume: receive failed: {e:#}");
                    tokio::time::sleep(ERROR_PAUSE).await;
                }
            }
        }
    }

    /// One receive: its messages, none when the broker found nothing in
    /// `poll`.
    async fn receive(&self, poll: Duration) -> Result<Vec<Message>> {
        let mut request = self.request(ReceiveMessageRequest {
            group: Some(self.group.clone()),
            message_queue: Some(MessageQueue {
                topic: Some(self.topic.clone()),
                ..MessageQueue::default()
            }),
            filter_expression: Some(FilterExpression {
                r#type: FilterType::Tag as i32,
                expression: "*".into(),
            }),
            batch_size: self.batch,
            invisible_duration: Some(proto_duration(INVISIBLE)),
            auto_renew: false,
            long_polling_timeout: Some(proto_duration(poll)),
            attempt_id: None,
        });
        let call = poll + DEADLINE_RESERVE;
        request.set_timeout(call);
        let limit = call + self.timeout;
        let received = async {
            let mut stream = self
                .client
                .clone()
                .receive_message(request)
                .await
                .context("ReceiveMessage")?
                .into_inner();
            let mut code = Code::Unspecified as i32;
            let mut text = String::new();
            let mut messages = Vec::new();
            while let Some(item) = stream.message().await.context("ReceiveMessage stream")? {
                match item.content {
                    Some(Content::Status(s)) => (code, text) = (s.code, s.message),
                    Some(Content::Message(m)) => messages.push(m),
                    _ => {}
                }
            }
            if code == Code::Ok as i32 || code == Code::MessageNotFound as i32 {
                Ok(messages)
            } else {
                bail!(
                    "answered {code} {}: {text}",
                    grpc_code_name(code).unwrap_or("(unknown code)")
                )
            }
        };
        tokio::time::timeout(limit, received)
            .await
            .context("ReceiveMessage did not end in time")?
    }

    /// Acknowledges `messages` in one call.
    async fn ack(&self, messages: &[Message]) -> Result<()> {
        let entries: Vec<AckMessageEntry> = messages
            .iter()
            .filter_map(|m| {
                let sys = m.system_properties.as_ref()?;
                Some(AckMessageEntry {
                    message_id: sys.message_id.clone(),
                    receipt_handle: sys.receipt_handle.clone()?,
                    lite_topic: None,
                })
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        let request = self.request(AckMessageRequest {
            group: Some(self.group.clone()),
            topic: Some(self.topic.clone()),
            entries,
        });
        let response = tokio::time::timeout(self.timeout, self.client.clone().ack_message(request))
            .await
            .context("AckMessage did not answer in time")?
            .context("AckMessage")?
            .into_inner();
        let code = response.status.map_or(Code::Unspecified as i32, |s| s.code);
        if code != Code::Ok as i32 {
            bail!(
                "AckMessage answered {code} {}",
                grpc_code_name(code).unwrap_or("(unknown code)")
            );
        }
        Ok(())
    }
}

/// A message's born and store timestamps (ms since the epoch, 0 when
/// absent) and body length.
fn stamps(m: &Message) -> (i64, i64, usize) {
    let ms = |t: Option<&prost_types::Timestamp>| {
        t.map_or(0, |t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000)
    };
    let sys = m.system_properties.as_ref();
    (
        ms(sys.and_then(|s| s.born_timestamp.as_ref())),
        ms(sys.and_then(|s| s.store_timestamp.as_ref())),
        m.body.len(),
    )
}

fn proto_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use grpc_protocol::v2::SystemProperties;

    use super::*;

    #[test]
    fn stamps_are_milliseconds_since_the_epoch_and_zero_when_absent() {
        let at = |ms: i64| prost_types::Timestamp {
            seconds: ms / 1000,
            nanos: i32::try_from(ms % 1000).unwrap() * 1_000_000,
        };
        let m = Message {
            system_properties: Some(SystemProperties {
                born_timestamp: Some(at(1_700_000_000_123)),
                store_timestamp: Some(at(1_700_000_000_456)),
                ..SystemProperties::default()
            }),
            body: vec![0; 7],
            ..Message::default()
        };
        assert_eq!(stamps(&m), (1_700_000_000_123, 1_700_000_000_456, 7));
        let bare = Message {
            body: vec![1],
            ..Message::default()
        };
        assert_eq!(stamps(&bare), (0, 0, 1));
    }
}
