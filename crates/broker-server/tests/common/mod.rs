//! Helpers for the broker's integration tests: a broker on free loopback
//! ports in a temporary directory, and request builders.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use broker_server::{testing, Broker};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{PullMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};

/// A running broker and what it needs to stay alive.
pub struct TestBroker {
    pub broker: Broker,
    pub addr: String,
    pub namesrv: String,
    pub client: RemotingClient,
    _dir: Option<tempfile::TempDir>,
}

impl TestBroker {
    /// Starts a broker with `key=value` overrides.
    pub async fn start(overrides: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut b = Self::start_in(dir.path(), overrides).await;
        b._dir = Some(dir);
        b
    }

    /// Starts a broker storing under `dir`, which the caller keeps (to
    /// start another broker on the same files later).
    pub async fn start_in(dir: &std::path::Path, overrides: &[(&str, &str)]) -> Self {
        let broker = testing::start_broker(dir, overrides).await.unwrap();
        Self {
            addr: testing::loopback(broker.remoting_addr()),
            // Empty for a broker without an embedded name server.
            namesrv: broker
                .namesrv_addr()
                .map(testing::loopback)
                .unwrap_or_default(),
            broker,
            client: RemotingClient::new(ClientOptions::default()),
            _dir: None,
        }
    }

    /// Creates (or updates) `topic` with `queues` read and write queues,
    /// readable and writable.
    pub async fn create_topic(&self, topic: &str, queues: i32) {
        let create = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &remoting_protocol::header::CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: "TBW102".into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: 6,
                topic_filter_type: remoting_protocol::header::TopicFilterType::SingleTag,
                order: false,
                ..remoting_protocol::header::CreateTopicRequestHeader::default()
            },
        );
        let answer = self.invoke(create).await;
        assert_eq!(
            answer.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            answer.remark
        );
    }

    /// Waits (up to 10 s) until `topic`'s queue `queue_id` holds at least
    /// `n` dispatched messages: an acknowledged send is readable only once
    /// the store's dispatch has indexed it.
    pub async fn until_dispatched(&self, topic: &str, queue_id: i32, n: i64) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while self
            .broker
            .state()
            .store
            .max_offset_in_queue(topic, queue_id)
            < n
        {
            assert!(
                std::time::Instant::now() < deadline,
                "{topic}:{queue_id} never held {n} messages"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The next queue offset of `topic`'s queue `queue_id` (`GET_MAX_OFFSET`).
    pub async fn max_offset(&self, topic: &str, queue_id: i32) -> i64 {
        let answer = self
            .invoke(RemotingCommand::request_with_header(
                RequestCode::GET_MAX_OFFSET,
                &remoting_protocol::header::GetMaxOffsetRequestHeader {
                    topic: topic.into(),
                    queue_id,
                    ..remoting_protocol::header::GetMaxOffsetRequestHeader::default()
                },
            ))
            .await;
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
        answer
            .decode_header::<remoting_protocol::header::OffsetResponseHeader>()
            .unwrap()
            .offset
    }

    /// The broker, the client, the broker's address and the directory that
    /// must outlive the broker.
    pub fn into_parts(self) -> (Broker, RemotingClient, String, Option<tempfile::TempDir>) {
        (self.broker, self.client, self.addr, self._dir)
    }

    pub async fn invoke(&self, request: RemotingCommand) -> RemotingCommand {
        self.client
            .invoke(&self.addr, request, Duration::from_secs(10))
            .await
            .unwrap()
    }
}

/// A `SEND_MESSAGE_V2` request.
pub fn send_request(topic: &str, queue_id: i32, body: &[u8], properties: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(properties.into()),
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(body.to_vec())
}

/// A `SEND_BATCH_MESSAGE` request for queue 0 of `topic` with `entries`.
pub fn batch_request(
    topic: &str,
    entries: &[remoting_protocol::body::BatchEntry],
) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1,
        batch: Some(true),
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_BATCH_MESSAGE, &header)
        .with_body(remoting_protocol::body::encode_batch(entries).unwrap())
}

/// A normal gRPC message for queue 0 of `topic`, whose message id and body
/// are `id`.
pub fn grpc_message(topic: &str, id: &str) -> grpc_protocol::v2::Message {
    use grpc_protocol::v2::{Message, Resource, SystemProperties};
    Message {
        topic: Some(Resource {
            resource_namespace: String::new(),
            name: topic.into(),
        }),
        system_properties: Some(SystemProperties {
            message_id: id.into(),
            queue_id: 0,
            message_type: 1,
            body_encoding: 1,
            ..SystemProperties::default()
        }),
        body: id.as_bytes().to_vec(),
        ..Message::default()
    }
}

/// A `PULL_MESSAGE` request.
pub fn pull_request(topic: &str, queue_id: i32, offset: i64, max: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: "CG".into(),
            topic: topic.into(),
            queue_id,
            queue_offset: offset,
            max_msg_nums: max,
            sys_flag: 0,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            sub_version: 0,
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    )
}

/// The value of the sample whose line holds every one of `parts`.
pub fn sample(text: &str, parts: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| parts.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The broker's `/metrics` page (Prometheus text) on `port`.
pub async fn scrape(port: u16) -> String {
    scrape_at("127.0.0.1", port).await
}

/// `GET /metrics` from `host:port`.
pub async fn scrape_at(host: &str, port: u16) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect((host, port)).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(5), s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}
