//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and
//! ForwardMessageToDeadLetterQueue on top of the POP engine
//! ([`crate::pop`]); a forward stores a copy in the group's dead-letter
//! topic through `CONSUMER_SEND_MSG_BACK`, then acknowledges.
//!
//! A receive pops from every readable queue of the topic on this broker
//! (the request's queue id is ignored, as the official clients expect) and
//! long-polls for at most the request's `long_polling_timeout` clamped to
//! 5–20 s, never past the call's `grpc-timeout` minus a 200 ms reserve. The
//! stream is `status OK` then one `message` per item, or a single status
//! (`MESSAGE_NOT_FOUND` when nothing came).

use std::{
    net::SocketAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use bytes::Bytes;
use grpc_protocol::v2::{
    receive_message_response::Content, AckMessageRequest, AckMessageResponse,
    AckMessageResultEntry, ChangeInvisibleDurationRequest, ChangeInvisibleDurationResponse, Code,
    Digest, DigestType, Encoding, FilterType, ForwardMessageToDeadLetterQueueRequest,
    ForwardMessageToDeadLetterQueueResponse, Message, MessageType, ReceiveMessageRequest,
    ReceiveMessageResponse, Resource, Status, SystemProperties,
};
use md5::{Digest as _, Md5};
use message_model::{
    properties::{keys, Properties},
    record::{self, Record},
    MessageId,
};
use remoting_net::CancellationToken;
use remoting_protocol::{
    header::ConsumerSendMsgBackRequestHeader, RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::{mpsc, oneshot};
use tonic::metadata::MetadataMap;

use crate::{
    executor,
    grpc::{
        admit_and_wait,
        message::{stored_keys, timestamp, user_properties, BORN_HOST_TEXT},
        status::{combined, ok, remoting_status, status},
    },
    pop::{PopError, PopRequest, PoppedMessage, TagFilter},
    request::{Family, Reply, Work},
    state::BrokerState,
};

/// Shortest invisible duration a receive may ask for.
pub const MIN_INVISIBLE: Duration = Duration::from_secs(10);
/// Longest invisible duration a receive or a change may ask for.
pub const MAX_INVISIBLE: Duration = Duration::from_secs(12 * 3600);
/// Invisible duration of a receive that names none.
pub const DEFAULT_INVISIBLE: Duration = Duration::from_secs(30);
/// Bounds of a receive's long polling.
pub const LONG_POLLING_MIN: Duration = Duration::from_secs(5);
/// Upper bound of a receive's long polling.
pub const LONG_POLLING_MAX: Duration = Duration::from_secs(20);
/// Long polling of a receive that names none.
const LONG_POLLING_DEFAULT: Duration = Duration::from_secs(20);
/// Time kept back from the call's deadline to answer before it.
pub const DEADLINE_RESERVE: Duration = Duration::from_millis(200);
/// Stream items a receive may have queued before it waits for the client.
pub const STREAM_CAPACITY: usize = 8;

/// The `grpc-timeout` header of a call (`<digits><H|M|S|m|u|n>`).
pub fn grpc_timeout(metadata: &MetadataMap) -> Option<Duration> {
    let text = metadata.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = text.split_at(text.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

fn to_duration(d: &prost_types::Duration) -> Option<Duration> {
    let secs = u64::try_from(d.seconds).ok()?;
    let nanos = u32::try_from(d.nanos).ok()?;
    Some(Duration::from_secs(secs) + Duration::from_nanos(u64::from(nanos)))
}

fn from_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// How long a receive may wait for messages, from its request and the
/// call's remaining time.
pub fn poll_budget(requested: Option<Duration>, call_timeout: Option<Duration>) -> Duration {
    let wanted = requested
        .unwrap_or(LONG_POLLING_DEFAULT)
        .clamp(LONG_POLLING_MIN, LONG_POLLING_MAX);
    match call_timeout {
        Some(t) => wanted.min(t.saturating_sub(DEADLINE_RESERVE)),
        None => wanted,
    }
}

/// A checked receive: what to pop and how long to wait.
struct Receive {
    group: String,
    topic: Resource,
    queue_ids: Vec<i32>,
    filter: TagFilter,
    batch: usize,
    invisible: Duration,
    budget: Duration,
    /// The group consumes in order (`consumeMessageOrderly`).
    fifo: bool,
}

fn check(
    state: &BrokerState,
    req: &ReceiveMessageRequest,
    call_timeout: Option<Duration>,
) -> Result<Receive, Status> {
    let group = req
        .group
        .as_ref()
        .map(|g| g.name.clone())
        .unwrap_or_default();
    if group.trim().is_empty() {
        return Err(status(
            Code::IllegalConsumerGroup,
            "the consumer group is empty",
        ));
    }
    let topic = req
        .message_queue
        .as_ref()
        .and_then(|q| q.topic.clone())
        .unwrap_or_default();
    let Some(config) = state.topics.get(&topic.name) else {
        return Err(status(
            Code::TopicNotFound,
            format!("topic {} does not exist", topic.name),
        ));
    };
    let expression = req.filter_expression.clone().unwrap_or_default();
    if expression.r#type == FilterType::Sql as i32 {
        return Err(status(
            Code::IllegalFilterExpression,
            "SQL filters are not supported; use a TAG expression",
        ));
    }
    let filter = TagFilter::parse(&expression.expression)
        .map_err(|e| status(Code::IllegalFilterExpression, e.to_string()))?;
    let invisible = match &req.invisible_duration {
        None => DEFAULT_INVISIBLE,
        Some(d) => match to_duration(d) {
            Some(d) if (MIN_INVISIBLE..=MAX_INVISIBLE).contains(&d) => d,
            _ => {
                return Err(status(
                    Code::IllegalInvisibleTime,
                    format!(
                        "invisible_duration {}s {}ns is outside 10 s ..= 12 h",
                        d.seconds, d.nanos
                    ),
                ))
            }
        },
    };
    let requested_poll = req.long_polling_timeout.as_ref().and_then(to_duration);
    Ok(Receive {
        topic,
        queue_ids: (0..config.read_queue_nums).collect(),
        filter,
        batch: usize::try_from(req.batch_size).unwrap_or(1).max(1),
        invisible,
        budget: poll_budget(requested_poll, call_timeout),
        fifo: state
            .subscriptions
            .get(&group)
            .is_some_and(|g| g.consume_message_orderly),
        group,
    })
}

/// One POP step of a receive, run by a pull worker in its turn: the pull
/// queue's share of the consumer group (`pullShareKey`), so that a group
/// that receives a lot waits behind its own requests, not in front of
/// other groups'. A refused or expired step is the queue's busy answer as a
/// status (`TOO_MANY_REQUESTS`, with the remark naming the reason).
async fn pop_in_turn(
    state: &Arc<BrokerState>,
    r: &Arc<Receive>,
    peer: SocketAddr,
) -> Result<Result<Vec<PoppedMessage>, PopError>, Status> {
    let (tx, popped) = oneshot::channel();
    let step = Arc::clone(r);
    let shared = Arc::clone(state);
    let work = Work::new(move || {
        let state = &shared;
        let req = PopRequest {
            group: &step.group,
            topic: &step.topic.name,
            queue_ids: &step.queue_ids,
            filter: &step.filter,
            max_messages: step.batch,
            invisible: step.invisible,
            fifo: step.fifo,
        };
        // The receive may have ended meanwhile; what was popped then comes
        // back after its invisible time.
        let _ = tx.send(state.pop.pop(&state.store, &req, message_model::now_ms()));
    });
    let mut request = RemotingCommand::request(RequestCode::POP_MESSAGE);
    request.set_ext("consumerGroup", r.group.clone());
    request.set_ext("topic", r.topic.name.clone());
    let (reply, refused) = Reply::channel(peer);
    executor::submit(state, Family::Pull, reply, request, work);
    if let Ok(result) = popped.await {
        return Ok(result);
    }
    // The work was dropped unrun: the queue refused it, or it waited too
    // long; the busy answer was sent before the drop.
    Err(match refused.await {
        Ok(answer) => remoting_status(&answer).0,
        Err(_) => {
            tracing::error!(group = %r.group, topic = %r.topic.name, "a receive's pop was dropped without an answer");
            status(
                Code::InternalServerError,
                "the broker dropped the receive without an answer",
            )
        }
    })
}

/// Serves one receive, writing its stream items to `tx`; returns the code
/// of the first item (for metrics).
pub async fn receive(
    state: Arc<BrokerState>,
    peer: SocketAddr,
    req: ReceiveMessageRequest,
    call_timeout: Option<Duration>,
    shutdown: CancellationToken,
    tx: mpsc::Sender<Result<ReceiveMessageResponse, tonic::Status>>,
) -> i32 {
    let status_item = |st: Status| ReceiveMessageResponse {
        content: Some(Content::Status(st)),
    };
    let r = match check(&state, &req, call_timeout) {
        Ok(r) => Arc::new(r),
        Err(st) => {
            let code = st.code;
            let _ = tx.send(Ok(status_item(st))).await;
            return code;
        }
    };
    let deadline = Instant::now() + r.budget;
    let arrival = state.pop.arrival(&r.topic.name);
    // New messages are dispatched at once while this receive may wait.
    let _watch = state.store.watch_arrivals();
    let popped = loop {
        let notified = arrival.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let got = match pop_in_turn(&state, &r, peer).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                let st = match &e {
                    PopError::TooManyInflight { .. } => {
                        status(Code::TooManyRequests, e.to_string())
                    }
                    PopError::IllegalFilter(_) => {
                        status(Code::IllegalFilterExpression, e.to_string())
                    }
                    PopError::InvalidReceiptHandle(_) => {
                        status(Code::InvalidReceiptHandle, e.to_string())
                    }
                    PopError::Io(_) => {
                        tracing::error!(group = %r.group, topic = %r.topic.name, cause = %e, "pop failed");
                        status(Code::InternalServerError, e.to_string())
                    }
                };
                let code = st.code;
                let _ = tx.send(Ok(status_item(st))).await;
                return code;
            }
            Err(st) => {
                let code = st.code;
                let _ = tx.send(Ok(status_item(st))).await;
                return code;
            }
        };
        if !got.is_empty() {
            break got;
        }
        let now = Instant::now();
        if now >= deadline {
            break Vec::new();
        }
        let mut wait = deadline - now;
        if let Some(visible) = state.pop.next_visible_ms(&r.group, &r.topic.name) {
            let until = visible.saturating_sub(message_model::now_ms()).max(1);
            wait = wait.min(Duration::from_millis(u64::try_from(until).unwrap_or(1)));
        }
        tokio::select! {
            () = shutdown.cancelled() => break Vec::new(),
            _ = tokio::time::timeout(wait, notified) => {}
        }
    };
    if popped.is_empty() {
        let st = status(Code::MessageNotFound, "no new message");
        let code = st.code;
        let _ = tx.send(Ok(status_item(st))).await;
        return code;
    }
    if tx.send(Ok(status_item(ok()))).await.is_err() {
        return Code::Ok as i32;
    }
    for p in &popped {
        let max_body = state.config().store.max_message_size;
        let Some(message) = to_message(state.store_host, &r.topic, r.invisible, max_body, p) else {
            tracing::error!(topic = %r.topic.name, queue = p.queue_id, offset = p.queue_offset, "popped record does not decode; left to redeliver");
            continue;
        };
        let item = ReceiveMessageResponse {
            content: Some(Content::Message(message)),
        };
        if tx.send(Ok(item)).await.is_err() {
            tracing::debug!(group = %r.group, topic = %r.topic.name, "receiver gone; undelivered messages come back after their invisible time");
            break;
        }
    }
    Code::Ok as i32
}

/// The delivered form of a popped record.
/// A compressed body inflates to at most `max_body` (`maxMessageSize`: what
/// a producer may send before compressing); beyond that it is delivered as
/// stored, compressed.
fn to_message(
    store_host: std::net::SocketAddr,
    topic: &Resource,
    invisible: Duration,
    max_body: usize,
    p: &PoppedMessage,
) -> Option<Message> {
    let Record::Message(m) = record::check(&p.record, false) else {
        return None;
    };
    let props = Properties::decode(m.properties);
    let raw = Bytes::copy_from_slice(m.body);
    let body = match message_model::compression::decompress_body(m.sys_flag, raw.clone(), max_body)
    {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(cause = %e, offset = p.queue_offset, "stored body cannot be decompressed; delivered as stored");
            raw
        }
    };
    let digest: String = Md5::digest(&body)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect();
    let group = props.get(keys::SHARDING_KEY).map(str::to_owned);
    // As RocketMQ's proxy: TIMER_DELAY_SEC from now, else TIMER_DELIVER_MS.
    let delivery = props
        .get(keys::TIMER_DELAY_SEC)
        .and_then(|s| s.parse::<i64>().ok())
        .map(|s| message_model::now_ms() + s * 1000)
        .or_else(|| {
            props
                .get(keys::TIMER_DELIVER_MS)
                .and_then(|v| v.parse::<i64>().ok())
        });
    let message_id = props
        .get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_owned)
        .unwrap_or_else(|| MessageId::new(store_host, m.physical_offset).encode());
    let system = SystemProperties {
        tag: props.get(keys::TAGS).map(str::to_owned),
        keys: stored_keys(&props),
        message_id,
        body_digest: Some(Digest {
            r#type: DigestType::Md5 as i32,
            checksum: digest,
        }),
        body_encoding: Encoding::Identity as i32,
        message_type: if group.is_some() {
            MessageType::Fifo
        } else if delivery.is_some() || props.get(keys::DELAY_TIME_LEVEL).is_some() {
            MessageType::Delay
        } else {
            MessageType::Normal
        } as i32,
        born_timestamp: Some(timestamp(m.born_timestamp)),
        born_host: props
            .get(BORN_HOST_TEXT)
            .map_or_else(|| m.born_host.ip().to_string(), str::to_owned),
        store_timestamp: Some(timestamp(m.store_timestamp)),
        store_host: m.store_host.to_string(),
        delivery_timestamp: delivery.map(timestamp),
        receipt_handle: Some(p.receipt_handle.clone()),
        queue_id: p.queue_id,
        queue_offset: Some(p.queue_offset),
        invisible_duration: Some(from_duration(invisible)),
        delivery_attempt: Some(i32::try_from(p.delivery_attempt).unwrap_or(i32::MAX)),
        message_group: group,
        trace_context: None,
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue: None,
    };
    Some(Message {
        topic: Some(topic.clone()),
        user_properties: user_properties(&props),
        system_properties: Some(system),
        body: body.to_vec(),
    })
}

/// Acknowledges each entry: OK, or `INVALID_RECEIPT_HANDLE` for a stale,
/// unknown or malformed handle.
pub fn ack(state: &BrokerState, req: &AckMessageRequest) -> AckMessageResponse {
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let topic = req.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    let now = message_model::now_ms();
    let entries: Vec<AckMessageResultEntry> = req
        .entries
        .iter()
        .map(|e| {
            let st = match state.pop.ack(group, topic, &e.receipt_handle, now) {
                Ok(()) => ok(),
                Err(err) => status(Code::InvalidReceiptHandle, err.to_string()),
            };
            AckMessageResultEntry {
                message_id: e.message_id.clone(),
                receipt_handle: e.receipt_handle.clone(),
                status: Some(st),
            }
        })
        .collect();
    let code = combined(
        entries
            .iter()
            .map(|e| e.status.as_ref().map_or(Code::Ok as i32, |s| s.code)),
    );
    let message = if code == Code::MultipleResults as i32 {
        "the entries had different outcomes; see each entry".to_owned()
    } else {
        entries
            .first()
            .and_then(|e| e.status.as_ref())
            .map_or_else(|| "OK".to_owned(), |s| s.message.clone())
    };
    AckMessageResponse {
        status: Some(Status { code, message }),
        entries,
    }
}

/// Restarts a delivery's invisible time (0 makes it visible at once) and
/// returns its new handle.
pub fn change_invisible(
    state: &BrokerState,
    req: &ChangeInvisibleDurationRequest,
) -> ChangeInvisibleDurationResponse {
    let refused = |st: Status| ChangeInvisibleDurationResponse {
        status: Some(st),
        receipt_handle: String::new(),
    };
    let invisible = match req.invisible_duration.as_ref().map(to_duration) {
        Some(Some(d)) if d <= MAX_INVISIBLE => d,
        _ => {
            return refused(status(
                Code::IllegalInvisibleTime,
                "invisible_duration must be given and at most 12 h",
            ))
        }
    };
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let topic = req.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    match state.pop.change_invisible(
        group,
        topic,
        &req.receipt_handle,
        invisible,
        message_model::now_ms(),
    ) {
        Ok(handle) => ChangeInvisibleDurationResponse {
            status: Some(ok()),
            receipt_handle: handle,
        },
        Err(e) => refused(status(Code::InvalidReceiptHandle, e.to_string())),
    }
}

/// Gives up on a delivery the client could not consume: a copy goes to
/// the group's dead-letter topic `%DLQ%<group>` (through the same
/// `CONSUMER_SEND_MSG_BACK` path as a remoting consumer's, with level -1),
/// and the delivery is acknowledged once the copy is stored.
pub async fn forward_to_dead_letter(
    state: &Arc<BrokerState>,
    peer: std::net::SocketAddr,
    req: &ForwardMessageToDeadLetterQueueRequest,
) -> ForwardMessageToDeadLetterQueueResponse {
    let answer = |st: Status| ForwardMessageToDeadLetterQueueResponse { status: Some(st) };
    let group = req.group.as_ref().map(|g| g.name.as_str()).unwrap_or("");
    let topic = req.topic.as_ref().map(|t| t.name.as_str()).unwrap_or("");
    let (queue_id, queue_offset) = match state.pop.locate(group, topic, &req.receipt_handle) {
        Ok(at) => at,
        Err(e) => return answer(status(Code::InvalidReceiptHandle, e.to_string())),
    };
    let entry = {
        let state = Arc::clone(state);
        let topic = topic.to_owned();
        tokio::task::spawn_blocking(move || state.store.queue_entry(&topic, queue_id, queue_offset))
            .await
            .ok()
            .flatten()
    };
    let Some(entry) = entry else {
        return answer(status(
            Code::MessageNotFound,
            format!(
                "message {} is no longer in {topic} queue {queue_id}",
                req.message_id
            ),
        ));
    };
    let header = ConsumerSendMsgBackRequestHeader {
        offset: entry.commit_log_offset,
        group: group.to_owned(),
        delay_level: -1,
        origin_msg_id: Some(req.message_id.clone()),
        origin_topic: Some(topic.to_owned()),
        max_reconsume_times: Some(0),
        ..ConsumerSendMsgBackRequestHeader::default()
    };
    let command =
        RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &header);
    let response = match admit_and_wait(state, peer, command).await {
        Some(r) => r,
        None => {
            return answer(status(
                Code::InternalServerError,
                "the broker dropped the dead-letter copy without an answer",
            ))
        }
    };
    match response.response_code() {
        ResponseCode::SUCCESS => {}
        ResponseCode::SYSTEM_BUSY => {
            return answer(status(
                Code::TooManyRequests,
                response.remark.unwrap_or_default(),
            ))
        }
        code => {
            return answer(status(
                Code::InternalServerError,
                format!(
                    "the dead-letter copy was not stored: {code:?} {}",
                    response.remark.unwrap_or_default()
                ),
            ))
        }
    }
    let st = match state
        .pop
        .ack(group, topic, &req.receipt_handle, message_model::now_ms())
    {
        Ok(()) => {
            tracing::info!(
                group,
                topic,
                message_id = %req.message_id,
                attempts = req.delivery_attempt,
                "message forwarded to the dead-letter topic"
            );
            ok()
        }
        // The copy is stored; the delivery was acknowledged or moved
        // meanwhile (it may be delivered again: at least once).
        Err(e) => status(Code::InvalidReceiptHandle, e.to_string()),
    };
    answer(st)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_units() {
        let mut m = MetadataMap::new();
        m.insert("grpc-timeout", "1500m".parse().unwrap());
        assert_eq!(grpc_timeout(&m), Some(Duration::from_millis(1500)));
        m.insert("grpc-timeout", "2S".parse().unwrap());
        assert_eq!(grpc_timeout(&m), Some(Duration::from_secs(2)));
        m.insert("grpc-timeout", "x".parse().unwrap());
        assert_eq!(grpc_timeout(&m), None);
    }

    #[test]
    fn poll_budget_is_clamped_and_kept_inside_the_deadline() {
        let s = Duration::from_secs;
        assert_eq!(poll_budget(Some(s(40)), None), s(20));
        assert_eq!(poll_budget(Some(s(1)), None), s(5));
        assert_eq!(
            poll_budget(Some(s(40)), Some(s(10))),
            s(10) - DEADLINE_RESERVE
        );
        assert_eq!(
            poll_budget(None, Some(Duration::from_millis(100))),
            Duration::ZERO
        );
    }
}
