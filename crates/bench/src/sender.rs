//! What the load loops send through: remoting `SEND_MESSAGE_V2` requests
//! over TCP connections to one broker or to a topic's route, or gRPC
//! `SendMessage` calls over HTTP/2 channels ([`crate::grpc`]), behind one
//! [`Sender`], so that the closed and open loops are the same code for both.
//!
//! Request `seq` of a run goes to queue `seq mod queues` (remoting: of the
//! destinations in route order) over connection `seq / queues mod
//! connections`, so every connection sees every queue.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use message_model::{
    now_ms,
    properties::{keys, Properties},
};
use remoting_net::{client::ClientConnection, ClientOptions};
use remoting_protocol::{
    command::next_opaque,
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, AUTO_CREATE_TOPIC,
};

use crate::{
    config::{Config, Protocol},
    grpc::GrpcSender,
    outcome::Outcome,
    route::{self, Destination},
};

/// Producer group the remoting requests declare.
pub const PRODUCER_GROUP: &str = "sluice-bench";

/// Ext field of `SEND_MESSAGE_V2` holding the born timestamp (RocketMQ's
/// `bornTimestamp`), set afresh on every send so that consumers can measure
/// end-to-end latency.
const BORN_TIMESTAMP_V2: &str = "g";

/// The sending side of a run, by protocol.
pub enum Sender {
    /// Remoting `SEND_MESSAGE_V2` over TCP connections.
    Remoting(RemotingSender),
    /// gRPC `SendMessage` over HTTP/2 channels.
    Grpc(GrpcSender),
}

impl Sender {
    /// Opens the connections `config` asks for, over its protocol.
    ///
    /// # Errors
    /// Invalid settings, a route that cannot be found, or a connection that
    /// cannot be made.
    pub async fn connect(config: &Config) -> Result<Self> {
        config.validate()?;
        Ok(match config.protocol {
            Protocol::Remoting => Self::Remoting(RemotingSender::connect(config).await?),
            Protocol::Grpc => Self::Grpc(GrpcSender::connect(config).await?),
        })
    }

    /// Sends request `seq` of the run and waits at most `timeout` for what
    /// became of it.
    pub async fn send(&self, seq: u64, timeout: Duration) -> Outcome {
        match self {
            Self::Remoting(s) => s.send(seq, timeout).await,
            Self::Grpc(s) => s.send(seq, timeout).await,
        }
    }

    /// The brokers sent to, as the report names them.
    pub fn brokers(&self) -> String {
        match self {
            Self::Remoting(s) => s.brokers.clone(),
            Self::Grpc(s) => s.addr().to_owned(),
        }
    }
}

/// One queue the remoting sender sends to.
struct Target {
    /// The request for this queue, copied for each send.
    template: RemotingCommand,
    /// The connections to the queue's broker.
    connections: Vec<Arc<ClientConnection>>,
}

/// Remoting `SEND_MESSAGE_V2` to every queue of one broker or of a route.
pub struct RemotingSender {
    /// Every queue, in the order requests rotate over them.
    targets: Vec<Target>,
    /// The brokers sent to, for the report.
    brokers: String,
}

impl RemotingSender {
    /// Finds the queues (directly or through the name server) and opens
    /// `config.connections` connections to each broker.
    ///
    /// # Errors
    /// A route that cannot be found, or a connection that cannot be made.
    pub async fn connect(config: &Config) -> Result<Self> {
        let destinations = match &config.namesrv {
            Some(namesrv) => {
                route::lookup(namesrv, &config.topic, config.queues, config.timeout).await?
            }
            None => route::direct(&config.broker, config.queues),
        };
        let targets = connect_all(config, &destinations).await?;
        if targets.is_empty() {
            bail!("no queue to send to");
        }
        let mut brokers: Vec<String> = Vec::new();
        for d in &destinations {
            let label = if d.broker_name == d.addr {
                d.addr.clone()
            } else {
                format!("{}={}", d.broker_name, d.addr)
            };
            if !brokers.contains(&label) {
                brokers.push(label);
            }
        }
        Ok(Self {
            targets,
            brokers: brokers.join(","),
        })
    }

    async fn send(&self, seq: u64, timeout: Duration) -> Outcome {
        let Some(target) = pick(&self.targets, seq) else {
            return Outcome::ConnectionError;
        };
        let round = seq / u64::try_from(self.targets.len()).unwrap_or(1).max(1);
        let Some(conn) = pick(&target.connections, round) else {
            return Outcome::ConnectionError;
        };
        let mut request = target.template.clone();
        request.opaque = next_opaque();
        request.set_ext(BORN_TIMESTAMP_V2, now_ms().to_string());
        Outcome::of(&conn.invoke(request, timeout).await)
    }
}

/// Opens `config.connections` connections to each broker of `destinations`
/// and pairs every destination with its request and its broker's connections.
async fn connect_all(config: &Config, destinations: &[Destination]) -> Result<Vec<Target>> {
    let options = ClientOptions::default();
    let mut by_addr: BTreeMap<&str, Vec<Arc<ClientConnection>>> = BTreeMap::new();
    for d in destinations {
        if by_addr.contains_key(d.addr.as_str()) {
            continue;
        }
        let mut connections = Vec::new();
        for i in 0..config.connections {
            let conn = ClientConnection::connect(&d.addr, &options)
                .await
                .with_context(|| format!("open connection {i} to broker {}", d.addr))?;
            connections.push(conn);
        }
        by_addr.insert(&d.addr, connections);
    }
    let body = Bytes::from(vec![b'x'; config.body_bytes]);
    destinations
        .iter()
        .map(|d| {
            Ok(Target {
                template: send_request(
                    &config.topic,
                    d.queue_id,
                    body.clone(),
                    config.queues,
                    config.delay_level,
                    config.timer_delay_ms,
                )?,
                connections: by_addr.get(d.addr.as_str()).cloned().unwrap_or_default(),
            })
        })
        .collect()
}

/// A `SEND_MESSAGE_V2` request for `queue_id`, without a fresh opaque;
/// `default_queues` is the queue count of the topic if the broker creates it
/// on this send. With a `delay_level` the message carries the property
/// `DELAY` = that level; without one it carries no properties.
///
/// # Errors
/// A queue id or queue count beyond `i32`.
pub fn send_request(
    topic: &str,
    queue_id: u32,
    body: Bytes,
    default_queues: u32,
    delay_level: Option<u32>,
    timer_delay_ms: Option<u64>,
) -> Result<RemotingCommand> {
    let born_timestamp = now_ms();
    let mut props = Properties::new();
    if let Some(level) = delay_level {
        props
            .insert(keys::DELAY_TIME_LEVEL, level.to_string())
            .context("DELAY property")?;
    }
    if let Some(ms) = timer_delay_ms {
        props
            .insert(keys::TIMER_DELAY_MS, ms.to_string())
            .context("TIMER_DELAY_MS property")?;
    }
    let properties = (!props.is_empty()).then(|| props.encode());
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.into(),
        topic: topic.into(),
        default_topic: AUTO_CREATE_TOPIC.into(),
        default_topic_queue_nums: i32::try_from(default_queues)
            .context("queue count beyond i32")?,
        queue_id: i32::try_from(queue_id).context("queue id beyond i32")?,
        sys_flag: 0,
        born_timestamp,
        flag: 0,
        properties,
        ..SendMessageRequestHeader::default()
    });
    Ok(RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header).with_body(body))
}

/// Item `seq mod len` of `items`, `None` when there is none.
pub fn pick<T>(items: &[T], seq: u64) -> Option<&T> {
    let len = u64::try_from(items.len()).ok()?;
    let index = usize::try_from(seq.checked_rem(len)?).ok()?;
    items.get(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_rotate_over_connections_and_queues() {
        let items = [10, 11, 12];
        let picked: Vec<i32> = (0..5).filter_map(|s| pick(&items, s).copied()).collect();
        assert_eq!(picked, [10, 11, 12, 10, 11]);
        assert_eq!(pick::<i32>(&[], 3), None);
    }

    #[test]
    fn send_request_carries_topic_queue_and_body() -> Result<()> {
        let cmd = send_request("T", 5, Bytes::from_static(b"abc"), 8, None, None)?;
        assert_eq!(cmd.request_code(), RequestCode::SEND_MESSAGE_V2);
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(header.topic, "T");
        assert_eq!(header.queue_id, 5);
        assert_eq!(header.producer_group, PRODUCER_GROUP);
        assert_eq!(header.properties, None);
        assert_eq!(&cmd.body[..], b"abc");
        Ok(())
    }

    #[test]
    fn a_delay_level_becomes_the_delay_property() -> Result<()> {
        let cmd = send_request("T", 0, Bytes::from_static(b"abc"), 8, Some(3), None)?;
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(header.properties.as_deref(), Some("DELAY\u{1}3\u{2}"));
        Ok(())
    }

    #[test]
    fn a_timer_delay_becomes_the_timer_property() -> Result<()> {
        let cmd = send_request("T", 0, Bytes::from_static(b"abc"), 8, None, Some(60_000))?;
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(
            header.properties.as_deref(),
            Some("TIMER_DELAY_MS\u{1}60000\u{2}")
        );
        Ok(())
    }
}
