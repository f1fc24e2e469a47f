//! What the load loops send through: remoting `SEND_MESSAGE_V2` requests
//! over TCP connections to one broker or to a topic's route, or gRPC
//! `SendMessage` calls over HTTP/2 channels ([`crate::grpc`]), behind one
//! [`Sender`], so that the closed and open loops are the same code for both.
//!
//! Request `seq` of a run goes to queue `seq mod queues` (remoting: of the
//! destinations in route order) over connection `seq / queues mod
//! connections`, so every connection sees every queue.

use std::{
    collections::BTreeMap,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use message_model::{
    flags::{TRANSACTION_COMMIT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE},
    now_ms,
    properties::{keys, Properties},
    MessageId,
};
use remoting_net::{client::ClientConnection, ClientOptions, ClientTls};
use remoting_protocol::{
    body::{self, encode_batch, BatchEntry, HeartbeatData, ProducerData},
    command::next_opaque,
    header::{
        EndTransactionRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
        SendMessageResponseHeader,
    },
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};

use crate::{
    config::{Config, Protocol, TransactionEnd},
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
    /// How each send's half ends, when sends are transactional.
    transaction: Option<TransactionEnd>,
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
                route::lookup(
                    namesrv,
                    &config.topic,
                    config.queues,
                    config.timeout,
                    config.credentials.as_ref(),
                )
                .await?
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
            transaction: config.transaction,
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
        let started = Instant::now();
        let answer = conn.invoke(request, timeout).await;
        let outcome = match (self.transaction, &answer) {
            (Some(end), Ok(response)) if response.response_code() == ResponseCode::SUCCESS => end,
            _ => return Outcome::of(&answer),
        };
        let Some(end) = answer.ok().and_then(|r| end_request(&r, outcome)) else {
            return Outcome::Ok;
        };
        let left = timeout.saturating_sub(started.elapsed());
        Outcome::of(&conn.invoke(end, left).await)
    }
}

/// Opens `config.connections` connections to each broker of `destinations`
/// and pairs every destination with its request and its broker's connections.
async fn connect_all(config: &Config, destinations: &[Destination]) -> Result<Vec<Target>> {
    let options = ClientOptions {
        tls: if config.tls {
            Some(ClientTls::new(config.tls_trust.as_deref(), None).context("set up TLS")?)
        } else {
            None
        },
        credentials: config.credentials.clone(),
        ..ClientOptions::default()
    };
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
            if config.producer_heartbeat || config.transaction.is_some() {
                let client_id = format!("sluice-bench@{}#{i}", std::process::id());
                let answer = conn
                    .invoke(producer_heartbeat(&client_id), config.timeout)
                    .await
                    .with_context(|| format!("heartbeat on connection {i} to {}", d.addr))?;
                if answer.response_code() != ResponseCode::SUCCESS {
                    bail!(
                        "heartbeat on connection {i} to {} answered {}: {}",
                        d.addr,
                        answer.code,
                        answer.remark.unwrap_or_default()
                    );
                }
            }
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
                    MessageOptions {
                        delay_level: config.delay_level,
                        timer_delay_ms: config.timer_delay_ms,
                        transaction: config.transaction.is_some(),
                        batch: config.batch,
                    },
                )?,
                connections: by_addr.get(d.addr.as_str()).cloned().unwrap_or_default(),
            })
        })
        .collect()
}

/// What a sent message carries besides its topic, queue and body.
#[derive(Debug, Clone, Copy, Default)]
pub struct MessageOptions {
    /// The property `DELAY` = this level.
    pub delay_level: Option<u32>,
    /// The property `TIMER_DELAY_MS` = this.
    pub timer_delay_ms: Option<u64>,
    /// The half of a transaction: `TRAN_MSG` = true, `PGROUP` =
    /// [`PRODUCER_GROUP`] and the prepared flag.
    pub transaction: bool,
    /// Messages per request: above 1, a `SEND_BATCH_MESSAGE` of this many
    /// copies of the body (no properties each, as single sends carry none
    /// without options); 0 and 1 send one message.
    pub batch: u32,
}

/// A `SEND_MESSAGE_V2` request for `queue_id` (a `SEND_BATCH_MESSAGE` of
/// [`MessageOptions::batch`] copies of `body` when that is above 1), without
/// a fresh opaque;
/// `default_queues` is the queue count of the topic if the broker creates it
/// on this send. It carries the properties `options` asks for, and none
/// without any.
///
/// # Errors
/// A queue id or queue count beyond `i32`, or a batch that cannot be encoded.
pub fn send_request(
    topic: &str,
    queue_id: u32,
    body: Bytes,
    default_queues: u32,
    options: MessageOptions,
) -> Result<RemotingCommand> {
    let born_timestamp = now_ms();
    let mut props = Properties::new();
    if let Some(level) = options.delay_level {
        props
            .insert(keys::DELAY_TIME_LEVEL, level.to_string())
            .context("DELAY property")?;
    }
    if let Some(ms) = options.timer_delay_ms {
        props
            .insert(keys::TIMER_DELAY_MS, ms.to_string())
            .context("TIMER_DELAY_MS property")?;
    }
    if options.transaction {
        props
            .insert(keys::TRANSACTION_PREPARED, "true")
            .context("TRAN_MSG property")?;
        props
            .insert(keys::PRODUCER_GROUP, PRODUCER_GROUP)
            .context("PGROUP property")?;
    }
    let properties = (!props.is_empty()).then(|| props.encode());
    let batch = options.batch > 1;
    let (code, body) = if batch {
        let entry = BatchEntry {
            flag: 0,
            body,
            properties: properties.clone().unwrap_or_default(),
        };
        let entries = vec![entry; options.batch as usize];
        let body = encode_batch(&entries).context("encode the batch")?;
        (RequestCode::SEND_BATCH_MESSAGE, body)
    } else {
        (RequestCode::SEND_MESSAGE_V2, body)
    };
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: PRODUCER_GROUP.into(),
        topic: topic.into(),
        default_topic: AUTO_CREATE_TOPIC.into(),
        default_topic_queue_nums: i32::try_from(default_queues)
            .context("queue count beyond i32")?,
        queue_id: i32::try_from(queue_id).context("queue id beyond i32")?,
        sys_flag: if options.transaction {
            TRANSACTION_PREPARED_TYPE
        } else {
            0
        },
        born_timestamp,
        flag: 0,
        properties: if batch { None } else { properties },
        batch: batch.then_some(true),
        ..SendMessageRequestHeader::default()
    });
    Ok(RemotingCommand::request_with_header(code, &header).with_body(body))
}

/// The `END_TRANSACTION` request ending the half that `answer` (its send's
/// `SUCCESS`) stored; `None` for [`TransactionEnd::Open`] or an answer
/// that does not say where the half is.
pub fn end_request(answer: &RemotingCommand, end: TransactionEnd) -> Option<RemotingCommand> {
    let outcome = match end {
        TransactionEnd::Commit => TRANSACTION_COMMIT_TYPE,
        TransactionEnd::Rollback => TRANSACTION_ROLLBACK_TYPE,
        TransactionEnd::Open => return None,
    };
    let h: SendMessageResponseHeader = answer.decode_header().ok()?;
    let header = EndTransactionRequestHeader {
        producer_group: PRODUCER_GROUP.into(),
        tran_state_table_offset: h.queue_offset,
        commit_log_offset: MessageId::decode(&h.msg_id).ok()?.commit_log_offset,
        commit_or_rollback: outcome,
        from_transaction_check: Some(false),
        msg_id: h.transaction_id.clone().unwrap_or_default(),
        transaction_id: h.transaction_id,
        ..EndTransactionRequestHeader::default()
    };
    Some(RemotingCommand::request_with_header(
        RequestCode::END_TRANSACTION,
        &header,
    ))
}

/// The `HEART_BEAT` declaring a connection a producer of [`PRODUCER_GROUP`].
pub fn producer_heartbeat(client_id: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: client_id.to_owned(),
        producer_data_set: vec![ProducerData {
            group_name: PRODUCER_GROUP.into(),
        }],
        ..HeartbeatData::default()
    };
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body::to_json(&data))
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
        let cmd = send_request(
            "T",
            5,
            Bytes::from_static(b"abc"),
            8,
            MessageOptions::default(),
        )?;
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
    fn a_batch_request_carries_that_many_copies_of_the_body() -> Result<()> {
        let options = MessageOptions {
            batch: 3,
            ..MessageOptions::default()
        };
        let cmd = send_request("T", 2, Bytes::from_static(b"abc"), 8, options)?;
        assert_eq!(cmd.request_code(), RequestCode::SEND_BATCH_MESSAGE);
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!((header.topic.as_str(), header.queue_id), ("T", 2));
        assert_eq!(header.batch, Some(true));
        let entries = remoting_protocol::body::decode_batch(&cmd.body)?;
        assert_eq!(entries.len(), 3);
        assert!(entries.iter().all(|e| &e.body[..] == b"abc"));
        Ok(())
    }

    #[test]
    fn a_delay_level_becomes_the_delay_property() -> Result<()> {
        let cmd = send_request(
            "T",
            0,
            Bytes::from_static(b"abc"),
            8,
            MessageOptions {
                delay_level: Some(3),
                ..MessageOptions::default()
            },
        )?;
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(header.properties.as_deref(), Some("DELAY\u{1}3\u{2}"));
        Ok(())
    }

    #[test]
    fn a_timer_delay_becomes_the_timer_property() -> Result<()> {
        let cmd = send_request(
            "T",
            0,
            Bytes::from_static(b"abc"),
            8,
            MessageOptions {
                timer_delay_ms: Some(60_000),
                ..MessageOptions::default()
            },
        )?;
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(
            header.properties.as_deref(),
            Some("TIMER_DELAY_MS\u{1}60000\u{2}")
        );
        Ok(())
    }
}

#[cfg(test)]
mod transaction_tests {
    use remoting_protocol::header::EndTransactionRequestHeader;

    use super::*;

    #[test]
    fn a_transactional_send_is_a_half_of_the_load_tools_group() -> Result<()> {
        let options = MessageOptions {
            transaction: true,
            ..MessageOptions::default()
        };
        let cmd = send_request("T", 0, Bytes::from_static(b"abc"), 8, options)?;
        let header = SendMessageRequestHeader::from_command(&cmd)?;
        assert_eq!(header.sys_flag, TRANSACTION_PREPARED_TYPE);
        let props = Properties::decode(header.properties.as_deref().unwrap_or(""));
        assert_eq!(props.get(keys::TRANSACTION_PREPARED), Some("true"));
        assert_eq!(props.get(keys::PRODUCER_GROUP), Some(PRODUCER_GROUP));
        Ok(())
    }

    #[test]
    fn the_end_names_the_half_the_answer_reports() -> Result<()> {
        let store: std::net::SocketAddr = "127.0.0.1:10911".parse()?;
        let answer = RemotingCommand::response(ResponseCode::SUCCESS, None).with_header(
            &SendMessageResponseHeader {
                msg_id: MessageId::new(store, 4096).encode(),
                queue_id: 0,
                queue_offset: 7,
                transaction_id: Some("UNIQ1".into()),
                ..SendMessageResponseHeader::default()
            },
        );
        let end = end_request(&answer, TransactionEnd::Rollback).expect("an end");
        let h: EndTransactionRequestHeader = end.decode_header()?;
        assert_eq!(
            (
                h.commit_log_offset,
                h.tran_state_table_offset,
                h.commit_or_rollback
            ),
            (4096, 7, TRANSACTION_ROLLBACK_TYPE)
        );
        assert_eq!(h.producer_group, PRODUCER_GROUP);
        assert!(end_request(&answer, TransactionEnd::Open).is_none());
        Ok(())
    }
}
