//! The gRPC sender: RocketMQ 5 `SendMessage` calls, one message each, over
//! `--connections` HTTP/2 channels (plain h2c) to a broker's gRPC endpoint.
//!
//! Every call carries the `x-mq-client-id` header the endpoint requires and
//! a message with a unique `message_id`, the topic, a queue id rotating over
//! `0..queues` (the broker picks a queue itself when the id is beyond the
//! topic's write queues), the born time of the send and a body of
//! `body_bytes`. Before the run one `QueryRoute` checks that the endpoint
//! answers and knows (or creates) the topic.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use grpc_protocol::{
    v2::{
        Code, Encoding, Message, MessageType, QueryRouteRequest, Resource, SendMessageRequest,
        SystemProperties,
    },
    MessagingServiceClient,
};
use tonic::{
    metadata::AsciiMetadataValue,
    transport::{Channel, Endpoint},
    Request,
};

use crate::{
    config::Config,
    outcome::{grpc_code_name, Outcome, RETRY_AFTER_METADATA},
    sender::pick,
};

/// Header naming the client; the endpoint answers `CLIENT_ID_REQUIRED`
/// without it.
pub const CLIENT_ID_HEADER: &str = "x-mq-client-id";

/// Distinguishes the senders of one process, so their message ids differ.
static SENDERS: AtomicU64 = AtomicU64::new(0);

/// gRPC `SendMessage` over HTTP/2 channels to one endpoint.
pub struct GrpcSender {
    addr: String,
    clients: Vec<MessagingServiceClient<Channel>>,
    client_id: AsciiMetadataValue,
    topic: String,
    queues: u64,
    body: Vec<u8>,
    /// The part of every message id that is the same within this sender.
    id_prefix: String,
}

impl GrpcSender {
    /// Opens `config.connections` channels to `config.grpc` and checks the
    /// topic's route over the first.
    ///
    /// # Errors
    /// A channel that cannot be opened, or a route query that fails or is
    /// refused (e.g. `TOPIC_NOT_FOUND` with auto-creation off).
    pub async fn connect(config: &Config) -> Result<Self> {
        let addr = config.grpc.clone();
        let endpoint = Endpoint::from_shared(format!("http://{addr}"))
            .with_context(|| format!("grpc address {addr:?} is not host:port"))?
            .connect_timeout(config.timeout)
            .tcp_nodelay(true);
        let mut clients = Vec::new();
        for i in 0..config.connections {
            let channel = endpoint
                .connect()
                .await
                .with_context(|| format!("open HTTP/2 channel {i} to gRPC endpoint {addr}"))?;
            clients.push(MessagingServiceClient::new(channel));
        }
        let pid = std::process::id();
        let sender = SENDERS.fetch_add(1, Ordering::Relaxed);
        let client_id = format!("sluice-bench@{pid}#{sender}");
        let client_id = AsciiMetadataValue::try_from(client_id.as_str())
            .with_context(|| format!("client id {client_id:?} is not a header value"))?;
        let started = u64::try_from(message_model::now_ms()).unwrap_or(0);
        let this = Self {
            addr,
            clients,
            client_id,
            topic: config.topic.clone(),
            queues: u64::from(config.queues.max(1)),
            body: vec![b'x'; config.body_bytes],
            id_prefix: format!("01{:08X}{:04X}{:012X}", pid, sender & 0xFFFF, started),
        };
        this.check_route(config.timeout).await?;
        Ok(this)
    }

    /// The endpoint's address.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Asks for the topic's route; the broker creates the topic here if
    /// auto-creation is on.
    async fn check_route(&self, timeout: Duration) -> Result<()> {
        let client = self.clients.first().context("no channel")?.clone();
        let request = self.request(QueryRouteRequest {
            topic: Some(self.resource()),
            endpoints: None,
        });
        check_route(client, request, &self.addr, timeout).await
    }

    fn resource(&self) -> Resource {
        Resource {
            resource_namespace: String::new(),
            name: self.topic.clone(),
        }
    }

    fn request<T>(&self, message: T) -> Request<T> {
        with_client_id(message, &self.client_id)
    }

    /// The message of request `seq`.
    pub fn message(&self, seq: u64) -> Message {
        let queue_id = i32::try_from(seq % self.queues).unwrap_or(-1);
        Message {
            topic: Some(self.resource()),
            user_properties: Default::default(),
            system_properties: Some(SystemProperties {
                message_id: format!("{}{seq:016X}", self.id_prefix),
                queue_id,
                born_timestamp: Some(born_now()),
                message_type: MessageType::Normal as i32,
                body_encoding: Encoding::Identity as i32,
                ..SystemProperties::default()
            }),
            body: self.body.clone(),
        }
    }

    /// Sends request `seq`: queue `seq mod queues` over channel
    /// `seq / queues mod connections`.
    pub async fn send(&self, seq: u64, timeout: Duration) -> Outcome {
        let Some(client) = pick(&self.clients, seq / self.queues) else {
            return Outcome::ConnectionError;
        };
        let mut client = client.clone();
        let request = self.request(SendMessageRequest {
            messages: vec![self.message(seq)],
        });
        match tokio::time::timeout(timeout, client.send_message(request)).await {
            Err(_) => Outcome::Timeout,
            Ok(Err(status)) => Outcome::of_rpc_error(&status),
            Ok(Ok(response)) => {
                let hint = response
                    .metadata()
                    .get(RETRY_AFTER_METADATA)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let body = response.into_inner();
                let status = body
                    .status
                    .or_else(|| body.entries.first().and_then(|e| e.status.clone()));
                match status {
                    Some(st) => Outcome::of_grpc_status(st.code, &st.message, hint.as_deref()),
                    None => Outcome::GrpcCode(Code::Unspecified as i32),
                }
            }
        }
    }
}

/// `message` as a request naming the client (`x-mq-client-id`).
pub(crate) fn with_client_id<T>(message: T, client_id: &AsciiMetadataValue) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert(CLIENT_ID_HEADER, client_id.clone());
    request
}

/// Sends `request` (a route query with the client id set) to the endpoint
/// at `addr`: an error unless it answers `OK` within `timeout`.
pub(crate) async fn check_route(
    mut client: MessagingServiceClient<Channel>,
    request: Request<QueryRouteRequest>,
    addr: &str,
    timeout: Duration,
) -> Result<()> {
    let topic = request
        .get_ref()
        .topic
        .as_ref()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let response = tokio::time::timeout(timeout, client.query_route(request))
        .await
        .with_context(|| format!("gRPC endpoint {addr} did not answer QueryRoute in time"))?
        .with_context(|| format!("QueryRoute of topic {topic} at gRPC endpoint {addr}"))?
        .into_inner();
    let status = response.status.unwrap_or_default();
    if status.code != Code::Ok as i32 {
        bail!(
            "gRPC endpoint {addr} answered the route query of topic {topic} with {} {}: {}",
            status.code,
            grpc_code_name(status.code).unwrap_or("(unknown code)"),
            status.message
        );
    }
    Ok(())
}

/// Now, as a protobuf timestamp.
fn born_now() -> prost_types::Timestamp {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    prost_types::Timestamp {
        seconds: i64::try_from(since.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(since.subsec_nanos()).unwrap_or(0),
    }
}
