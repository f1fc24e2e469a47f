//! SendMessage: each message becomes the same `SEND_MESSAGE_V2` command a
//! remoting producer sends and enters the send queue through
//! [`crate::executor::admit`], so admission, the fast-failure sweeper, the send
//! processor, the store, counters and metrics are the remoting path's own.

use std::{net::SocketAddr, sync::Arc};

use grpc_protocol::v2::{
    Code, Message, MessageType, SendMessageRequest, SendMessageResponse, SendResultEntry,
};
use message_model::flags::TRANSACTION_PREPARED_TYPE;
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader},
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};

use crate::{
    grpc::{
        admit_and_wait,
        message::properties_for_send,
        status::{combined, remoting_status, status},
    },
    state::BrokerState,
    topics::validate_topic_name,
};

/// Stores the messages of a request one after another (so their order is
/// kept) and answers one entry per message; the second value is the largest
/// retry hint (ms) of a busy answer.
pub async fn send(
    state: &Arc<BrokerState>,
    peer: SocketAddr,
    client_id: &str,
    request: SendMessageRequest,
) -> (SendMessageResponse, Option<u64>) {
    if request.messages.is_empty() {
        return (
            SendMessageResponse {
                status: Some(status(Code::BadRequest, "the request holds no message")),
                entries: Vec::new(),
            },
            None,
        );
    }
    let mut entries = Vec::with_capacity(request.messages.len());
    let mut hint: Option<u64> = None;
    for message in &request.messages {
        let (entry, h) = send_one(state, peer, client_id, message).await;
        if let Some(h) = h {
            hint = Some(hint.map_or(h, |old| old.max(h)));
        }
        entries.push(entry);
    }
    let code = combined(
        entries
            .iter()
            .map(|e| e.status.as_ref().map_or(Code::Ok as i32, |s| s.code)),
    );
    let message = if code == Code::MultipleResults as i32 {
        "the messages had different outcomes; see each entry".to_owned()
    } else {
        entries
            .first()
            .and_then(|e| e.status.as_ref())
            .map(|s| s.message.clone())
            .unwrap_or_default()
    };
    let top = grpc_protocol::v2::Status { code, message };
    (
        SendMessageResponse {
            status: Some(top),
            entries,
        },
        hint,
    )
}

async fn send_one(
    state: &Arc<BrokerState>,
    peer: SocketAddr,
    client_id: &str,
    message: &Message,
) -> (SendResultEntry, Option<u64>) {
    let message_id = message
        .system_properties
        .as_ref()
        .map(|s| s.message_id.clone())
        .unwrap_or_default();
    let failed = |code: Code, text: String| SendResultEntry {
        status: Some(status(code, text)),
        message_id: message_id.clone(),
        ..SendResultEntry::default()
    };
    let topic = message
        .topic
        .as_ref()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    if let Err(why) = validate_topic_name(&topic) {
        return (failed(Code::IllegalTopic, why), None);
    }
    let cfg = state.config();
    let properties = match properties_for_send(message, cfg.store.max_message_size) {
        Ok(p) => p,
        Err(refused) => return (failed(refused.code, refused.message), None),
    };
    let command = build_command(state, client_id, &topic, message, properties);
    let response = match admit_and_wait(state, peer, command).await {
        Some(r) => r,
        None => {
            tracing::error!(%topic, %peer, "send was dropped without an answer");
            return (
                failed(
                    Code::InternalServerError,
                    "the broker dropped the send without an answer".into(),
                ),
                None,
            );
        }
    };
    let (st, hint) = remoting_status(&response);
    let mut entry = SendResultEntry {
        status: Some(st),
        message_id: message_id.clone(),
        ..SendResultEntry::default()
    };
    // These answers all mean "stored": the entry says where.
    if matches!(
        response.response_code(),
        ResponseCode::SUCCESS
            | ResponseCode::FLUSH_DISK_TIMEOUT
            | ResponseCode::FLUSH_SLAVE_TIMEOUT
            | ResponseCode::SLAVE_NOT_AVAILABLE
    ) {
        if let Ok(h) = response.decode_header::<SendMessageResponseHeader>() {
            entry.offset = h.queue_offset;
            if is_transaction(message) {
                // The half's offset message id: where an end finds it.
                entry.transaction_id = h.msg_id;
            }
        }
    }
    (entry, hint)
}

/// The `SEND_MESSAGE_V2` command for one gRPC message.
fn build_command(
    state: &BrokerState,
    client_id: &str,
    topic: &str,
    message: &Message,
    properties: String,
) -> RemotingCommand {
    let sys = message.system_properties.clone().unwrap_or_default();
    let cfg = state.config();
    let write_queues = state
        .topics
        .get(topic)
        .map(|t| t.write_queue_nums)
        .filter(|n| *n > 0);
    let queue_id = match (write_queues, sys.message_group.as_deref()) {
        (Some(n), Some(group)) if !group.is_empty() => (stable_hash(group) % n as u64) as i32,
        (Some(n), _) if (0..n).contains(&sys.queue_id) => sys.queue_id,
        _ => -1,
    };
    let born = sys
        .born_timestamp
        .as_ref()
        .map_or_else(message_model::now_ms, |t| {
            t.seconds * 1000 + i64::from(t.nanos) / 1_000_000
        });
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: client_id.to_owned(),
        topic: topic.to_owned(),
        default_topic: AUTO_CREATE_TOPIC.to_owned(),
        default_topic_queue_nums: cfg.broker.default_topic_queue_nums,
        queue_id,
        sys_flag: if is_transaction(message) {
            TRANSACTION_PREPARED_TYPE
        } else {
            0
        },
        born_timestamp: born,
        flag: 0,
        properties: Some(properties),
        reconsume_times: Some(0),
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(message.body.clone())
}

fn is_transaction(message: &Message) -> bool {
    message
        .system_properties
        .as_ref()
        .is_some_and(|s| s.message_type == MessageType::Transaction as i32)
}

/// FNV-1a: the same group lands in the same queue across restarts.
fn stable_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}
