//! Transactions over gRPC: a `TRANSACTION` message is a half message (see
//! [`crate::transaction`]) whose producer group is its topic, as the
//! RocketMQ proxy has it; its `transaction_id` is the half's offset message
//! id, which names where the half is stored. `EndTransaction` becomes the
//! remoting `END_TRANSACTION` and waits in the same queue; the broker's
//! checks reach gRPC producers of the topic as
//! `RecoverOrphanedTransactionCommand` on their telemetry streams.

use std::{net::SocketAddr, sync::Arc};

use grpc_protocol::v2::{
    telemetry_command::Command, Code, Encoding, EndTransactionRequest, EndTransactionResponse,
    Message, MessageType, RecoverOrphanedTransactionCommand, Resource, SystemProperties,
    TelemetryCommand, TransactionResolution, TransactionSource,
};
use message_model::{
    flags::{TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE},
    properties::{keys, Properties},
    record::{self, Record, StoredMessage},
    MessageId,
};
use remoting_protocol::{header::EndTransactionRequestHeader, RemotingCommand, RequestCode};

use crate::{
    clients::TelemetryStream,
    grpc::{
        admit_and_wait,
        message::{stored_keys, timestamp, user_properties, BORN_HOST_TEXT},
        status::{remoting_status, status},
    },
    state::BrokerState,
    transaction::HALF_TOPIC,
};

/// Ends the half message `request.transaction_id` names.
pub async fn end(
    state: &Arc<BrokerState>,
    peer: SocketAddr,
    request: &EndTransactionRequest,
) -> EndTransactionResponse {
    let answer = |code: Code, text: String| EndTransactionResponse {
        status: Some(status(code, text)),
    };
    let topic = request
        .topic
        .as_ref()
        .map(|t| t.name.as_str())
        .unwrap_or_default();
    let outcome = match TransactionResolution::try_from(request.resolution) {
        Ok(TransactionResolution::Commit) => TRANSACTION_COMMIT_TYPE,
        Ok(TransactionResolution::Rollback) => TRANSACTION_ROLLBACK_TYPE,
        _ => {
            return answer(
                Code::BadRequest,
                format!(
                    "resolution is {}: COMMIT (1) or ROLLBACK (2)",
                    request.resolution
                ),
            )
        }
    };
    let half = match find_half(state, &request.transaction_id, topic) {
        Ok(half) => half,
        Err(why) => return answer(Code::InvalidTransactionId, why),
    };
    let header = EndTransactionRequestHeader {
        producer_group: topic.to_owned(),
        tran_state_table_offset: half.0,
        commit_log_offset: half.1,
        commit_or_rollback: outcome,
        from_transaction_check: Some(request.source == TransactionSource::SourceServerCheck as i32),
        msg_id: request.message_id.clone(),
        transaction_id: Some(request.transaction_id.clone()),
        ..EndTransactionRequestHeader::default()
    };
    let command = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
    match admit_and_wait(state, peer, command).await {
        Some(response) => EndTransactionResponse {
            status: Some(remoting_status(&response).0),
        },
        None => answer(
            Code::InternalServerError,
            "the broker dropped the end without an answer".into(),
        ),
    }
}

/// The half `transaction_id` names, as (queue offset, CommitLog offset),
/// when it is a half message of `topic`.
fn find_half(state: &BrokerState, transaction_id: &str, topic: &str) -> Result<(i64, i64), String> {
    let not_ours = || {
        format!(
            "transaction_id {transaction_id:?} names no half message of topic {topic:?} on this \
             broker"
        )
    };
    let id = MessageId::decode(transaction_id).map_err(|_| not_ours())?;
    let offset = u64::try_from(id.commit_log_offset).map_err(|_| not_ours())?;
    let stored = state.store.lookup_message(offset).ok_or_else(not_ours)?;
    let Record::Message(half) = record::check(&stored, false) else {
        return Err(not_ours());
    };
    if half.topic != HALF_TOPIC
        || Properties::decode(half.properties).get(keys::REAL_TOPIC) != Some(topic)
    {
        return Err(not_ours());
    }
    Ok((half.queue_offset, half.physical_offset))
}

/// The transaction id a gRPC producer is given for the half stored at
/// `half_physical_offset`.
pub fn transaction_id(store_host: SocketAddr, half_physical_offset: i64) -> String {
    MessageId::new(store_host, half_physical_offset).encode()
}

/// Sends the check of `half` to one of `streams` (round robin from
/// `start`, at most `tries` of them); false when none took it.
pub fn send_check(
    store_host: SocketAddr,
    half: &StoredMessage<'_>,
    streams: &[TelemetryStream],
    start: usize,
    tries: usize,
) -> bool {
    let Some(command) = check_command(store_host, half) else {
        return false;
    };
    (0..streams.len().min(tries)).any(|i| {
        let stream = &streams[(start + i) % streams.len()];
        let sent = stream.tx.try_send(Ok(command.clone())).is_ok();
        if !sent {
            tracing::debug!(client = %stream.client_id, "telemetry stream full or closed: check not sent");
        }
        sent
    })
}

/// The `RecoverOrphanedTransactionCommand` asking about `half`: the message
/// as it was sent (real topic, ids, tag, keys, properties, body) and its
/// transaction id.
fn check_command(store_host: SocketAddr, half: &StoredMessage<'_>) -> Option<TelemetryCommand> {
    let props = Properties::decode(half.properties);
    let topic = props.get(keys::REAL_TOPIC)?;
    let message_id = props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).map_or_else(
        || transaction_id(store_host, half.physical_offset),
        str::to_owned,
    );
    let system = SystemProperties {
        tag: props.get(keys::TAGS).map(str::to_owned),
        keys: stored_keys(&props),
        message_id,
        body_encoding: Encoding::Identity as i32,
        message_type: MessageType::Transaction as i32,
        born_timestamp: Some(timestamp(half.born_timestamp)),
        born_host: props
            .get(BORN_HOST_TEXT)
            .map_or_else(|| half.born_host.ip().to_string(), str::to_owned),
        store_timestamp: Some(timestamp(half.store_timestamp)),
        store_host: half.store_host.to_string(),
        queue_id: props
            .get(keys::REAL_QUEUE_ID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0),
        ..SystemProperties::default()
    };
    Some(TelemetryCommand {
        status: None,
        command: Some(Command::RecoverOrphanedTransactionCommand(
            RecoverOrphanedTransactionCommand {
                message: Some(Message {
                    topic: Some(Resource {
                        resource_namespace: String::new(),
                        name: topic.to_owned(),
                    }),
                    user_properties: user_properties(&props),
                    system_properties: Some(system),
                    body: half.body.to_vec(),
                }),
                transaction_id: transaction_id(store_host, half.physical_offset),
            },
        )),
    })
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use message_model::MessageToStore;

    use super::*;

    #[test]
    fn a_check_carries_the_message_as_sent_and_its_transaction_id() {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let msg = MessageToStore {
            topic: HALF_TOPIC.into(),
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_123,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::from_static(b"debit"),
            properties:
                "REAL_TOPIC\u{1}Orders\u{2}REAL_QID\u{1}2\u{2}UNIQ_KEY\u{1}ID1\u{2}\
                         TAGS\u{1}t\u{2}KEYS\u{1}k1 k2\u{2}color\u{1}red\u{2}PGROUP\u{1}Orders\u{2}"
                    .into(),
        };
        let mut out = Vec::new();
        record::encode(&msg, usize::MAX, &mut out).unwrap();
        record::patch(&mut out, 7, 4096, 1_700_000_000_500);
        let Record::Message(half) = record::check(&out, false) else {
            panic!("a record");
        };
        let command = check_command(host, &half).unwrap();
        let Some(Command::RecoverOrphanedTransactionCommand(c)) = command.command else {
            panic!("a check");
        };
        assert_eq!(c.transaction_id, transaction_id(host, 4096));
        assert_eq!(
            MessageId::decode(&c.transaction_id)
                .unwrap()
                .commit_log_offset,
            4096
        );
        let m = c.message.unwrap();
        assert_eq!(m.topic.unwrap().name, "Orders");
        assert_eq!(m.body, b"debit");
        assert_eq!(
            m.user_properties.get("color").map(String::as_str),
            Some("red")
        );
        assert_eq!(m.user_properties.len(), 1, "{:?}", m.user_properties);
        let s = m.system_properties.unwrap();
        assert_eq!(
            (
                s.message_id.as_str(),
                s.tag.as_deref(),
                s.keys.len(),
                s.queue_id
            ),
            ("ID1", Some("t"), 2, 2)
        );
        assert_eq!(s.message_type, MessageType::Transaction as i32);
        assert_eq!(s.born_timestamp.unwrap().nanos, 123_000_000);
    }
}
