//! The wire side of transactions: the `END_TRANSACTION` headers of a
//! producer's own end and of its answer to a check, and the serving of the
//! brokers' `CHECK_TRANSACTION_STATE` requests.

use std::{collections::BTreeMap, sync::Arc};

use bytes::Bytes;
use message_model::{
    compression::decompress_body,
    properties::{keys, Properties},
    record::{self, Record},
    MessageId,
};
use remoting_net::{CancellationToken, ServerRequests};
use remoting_protocol::{
    header::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader},
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::{mpsc, Semaphore};

use crate::{
    send::Inner,
    transaction::{CheckedMessage, LocalTransactionState, TransactionListener},
    ProducerError, SendResult,
};

/// Largest decompressed body a check may carry (the largest
/// `maxMessageSize` a producer accepts).
const MAX_CHECK_BODY: usize = 16 * 1024 * 1024;

/// A check as it arrived: the broker's address and its request.
pub(crate) type QueuedCheck = (String, RemotingCommand);

/// The `END_TRANSACTION` header of the producer's own end of the half
/// `sent` names: its queue offset as `tranStateTableOffset`, the CommitLog
/// offset from its offset message id, its unique key as `msgId`.
///
/// # Errors
/// [`ProducerError::Protocol`] when the send answer's offset message id or
/// queue offset cannot name the half.
pub(crate) fn end_header(
    group: &str,
    sent: &SendResult,
    state: LocalTransactionState,
) -> Result<EndTransactionRequestHeader, ProducerError> {
    let bad = |reason: String| ProducerError::Protocol {
        addr: sent.broker_addr.clone(),
        reason,
    };
    let stored_at = MessageId::decode(&sent.offset_msg_id)
        .map_err(|e| bad(format!("offset message id {:?}: {e}", sent.offset_msg_id)))?;
    let queue_offset = i64::try_from(sent.queue_offset)
        .map_err(|_| bad(format!("queue offset {} out of range", sent.queue_offset)))?;
    Ok(EndTransactionRequestHeader {
        producer_group: group.to_owned(),
        tran_state_table_offset: queue_offset,
        commit_log_offset: stored_at.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(false),
        msg_id: sent.msg_id.clone(),
        transaction_id: Some(
            sent.transaction_id
                .clone()
                .unwrap_or_else(|| sent.msg_id.clone()),
        ),
        topic: Some(sent.message_queue.topic.clone()),
        broker_name: Some(sent.message_queue.broker_name.clone()),
    })
}

/// The `END_TRANSACTION` header answering a check: the check's offsets and
/// ids, `fromTransactionCheck=true`.
pub(crate) fn check_end_header(
    group: &str,
    check: &CheckTransactionStateRequestHeader,
    msg: &CheckedMessage,
    state: LocalTransactionState,
) -> EndTransactionRequestHeader {
    EndTransactionRequestHeader {
        producer_group: group.to_owned(),
        tran_state_table_offset: check.tran_state_table_offset,
        commit_log_offset: check.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(true),
        msg_id: msg.msg_id.clone(),
        transaction_id: Some(msg.transaction_id.clone()),
        topic: Some(msg.topic.clone()),
        broker_name: check.broker_name.clone(),
    }
}

/// A decoded check.
#[derive(Debug)]
pub(crate) struct Check {
    pub header: CheckTransactionStateRequestHeader,
    pub message: CheckedMessage,
    /// The half's producer group (`PGROUP`).
    pub group: Option<String>,
}

/// Reads a `CHECK_TRANSACTION_STATE` request from `broker`: its header and
/// the message record of its body.
///
/// # Errors
/// What is wrong with it, for the log.
pub(crate) fn decode_check(broker: &str, request: &RemotingCommand) -> Result<Check, String> {
    let header: CheckTransactionStateRequestHeader = request
        .decode_header()
        .map_err(|e| format!("header: {e}"))?;
    let Record::Message(stored) = record::check(&request.body, false) else {
        return Err(format!(
            "the body ({} bytes) is not a message record",
            request.body.len()
        ));
    };
    let props = Properties::decode(stored.properties);
    let msg_id = props
        .get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_owned)
        .or_else(|| header.msg_id.clone())
        .ok_or("the message has no unique key")?;
    let body = decompress_body(
        stored.sys_flag,
        Bytes::copy_from_slice(stored.body),
        MAX_CHECK_BODY,
    )
    .map_err(|e| format!("body: {e}"))?;
    let transaction_id = header
        .transaction_id
        .clone()
        .or_else(|| props.get(keys::TRANSACTION_ID).map(str::to_owned))
        .unwrap_or_else(|| msg_id.clone());
    let message = CheckedMessage {
        topic: stored.topic.to_owned(),
        queue_id: stored.queue_id,
        body,
        tags: props.get(keys::TAGS).map(str::to_owned),
        keys: props
            .get(keys::KEYS)
            .map(|k| k.split_whitespace().map(str::to_owned).collect())
            .unwrap_or_default(),
        flag: stored.flag,
        properties: props
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect::<BTreeMap<_, _>>(),
        msg_id,
        transaction_id,
        offset_msg_id: header.offset_msg_id.clone(),
        born_timestamp: stored.born_timestamp,
        store_timestamp: stored.store_timestamp,
        broker_name: header.broker_name.clone(),
        broker_addr: broker.to_owned(),
    };
    Ok(Check {
        group: props.get(keys::PRODUCER_GROUP).map(str::to_owned),
        header,
        message,
    })
}

/// Serves the brokers' requests to a transactional producer: a
/// `CHECK_TRANSACTION_STATE` goes to `queue` (dropped, and logged, when the
/// queue is full: the broker checks again); anything else is answered
/// `REQUEST_CODE_NOT_SUPPORTED`. Runs on a connection's reader task, so it
/// only queues.
pub(crate) fn serve(queue: mpsc::Sender<QueuedCheck>) -> ServerRequests {
    ServerRequests(Arc::new(move |broker: &str, req: &RemotingCommand| {
        if req.request_code() != RequestCode::CHECK_TRANSACTION_STATE {
            return Some(req.response_to(
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                Some(format!(" request type {} not supported", req.code)),
            ));
        }
        match queue.try_send((broker.to_owned(), req.clone())) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(_)) => tracing::warn!(
                broker,
                "too many transaction checks waiting (checkRequestHoldMax); \
                 this one is dropped and the broker checks again later"
            ),
            Err(mpsc::error::TrySendError::Closed(_)) => {
                tracing::debug!(broker, "transaction check after shutdown ignored");
            }
        }
        None
    }))
}

/// Answers queued checks, at most `concurrency` at once, until stopped.
pub(crate) async fn dispatch(
    inner: Arc<Inner>,
    listener: Arc<dyn TransactionListener>,
    mut checks: mpsc::Receiver<QueuedCheck>,
    concurrency: usize,
    stop: CancellationToken,
) {
    let permits = Arc::new(Semaphore::new(concurrency));
    loop {
        let next = tokio::select! {
            () = stop.cancelled() => return,
            next = checks.recv() => next,
        };
        let Some((broker, request)) = next else {
            return;
        };
        let permit = tokio::select! {
            () = stop.cancelled() => return,
            permit = Arc::clone(&permits).acquire_owned() => permit,
        };
        let Ok(permit) = permit else {
            return;
        };
        let inner = Arc::clone(&inner);
        let listener = Arc::clone(&listener);
        tokio::spawn(async move {
            answer(&inner, listener, &broker, &request).await;
            drop(permit);
        });
    }
}

/// Decodes one check, asks the listener on a blocking thread and sends
/// the end oneway to the broker that asked. Malformed checks, checks of
/// another group and listener panics are logged and left unanswered.
async fn answer(
    inner: &Inner,
    listener: Arc<dyn TransactionListener>,
    broker: &str,
    request: &RemotingCommand,
) {
    let group = &inner.config.producer_group;
    let check = match decode_check(broker, request) {
        Ok(c) => c,
        Err(reason) => {
            tracing::warn!(broker, %reason, "malformed transaction check ignored");
            return;
        }
    };
    if check.group.as_deref() != Some(group.as_str()) {
        tracing::warn!(
            broker,
            half_group = check.group.as_deref().unwrap_or(""),
            group = %group,
            "transaction check for another producer group ignored"
        );
        return;
    }
    let Check {
        header, message, ..
    } = check;
    let msg_id = message.msg_id.clone();
    let asked = tokio::task::spawn_blocking(move || {
        let state = listener.check_local_transaction(&message);
        (state, message)
    })
    .await;
    let (state, message) = match asked {
        Ok(answer) => answer,
        Err(e) => {
            tracing::error!(
                broker,
                %msg_id,
                cause = %e,
                "the transaction listener failed; the broker checks again later"
            );
            return;
        }
    };
    if inner.check_open().is_err() {
        return;
    }
    let end = check_end_header(group, &header, &message, state);
    let request = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &end);
    let handed = tokio::time::timeout(
        inner.config.send_msg_timeout,
        inner.client.invoke_oneway(broker, request),
    )
    .await;
    match handed {
        Ok(Ok(())) => tracing::debug!(broker, %msg_id, ?state, "transaction check answered"),
        Ok(Err(e)) => {
            tracing::warn!(broker, %msg_id, cause = %e, "cannot answer a transaction check");
        }
        Err(_) => tracing::warn!(broker, %msg_id, "answering a transaction check timed out"),
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use message_model::{compression::ZLIB_SYS_FLAG, record::MessageToStore};

    use super::*;
    use crate::{MessageQueue, SendStatus};

    fn sent() -> SendResult {
        let host: SocketAddr = "10.0.0.7:10911".parse().unwrap();
        SendResult {
            status: SendStatus::SendOk,
            msg_id: "UNIQ".into(),
            offset_msg_id: MessageId::new(host, 4242).encode(),
            message_queue: MessageQueue {
                topic: "Orders".into(),
                broker_name: "broker-a".into(),
                queue_id: 2,
            },
            queue_offset: 17,
            broker_addr: "10.0.0.7:10911".into(),
            region_id: None,
            transaction_id: Some("TXID".into()),
        }
    }

    #[test]
    fn an_end_names_the_half_by_its_offsets_and_unique_key() {
        let h = end_header("TXG", &sent(), LocalTransactionState::Commit).unwrap();
        assert_eq!(h.producer_group, "TXG");
        assert_eq!((h.tran_state_table_offset, h.commit_log_offset), (17, 4242));
        assert_eq!(h.commit_or_rollback, 8);
        assert_eq!(h.from_transaction_check, Some(false));
        assert_eq!(h.msg_id, "UNIQ");
        assert_eq!(h.transaction_id.as_deref(), Some("TXID"));
        assert_eq!(h.topic.as_deref(), Some("Orders"));
        assert_eq!(h.broker_name.as_deref(), Some("broker-a"));
        let rollback = end_header("TXG", &sent(), LocalTransactionState::Rollback).unwrap();
        assert_eq!(rollback.commit_or_rollback, 12);
        let unknown = end_header("TXG", &sent(), LocalTransactionState::Unknown).unwrap();
        assert_eq!(unknown.commit_or_rollback, 0);

        let request = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &h);
        let back: EndTransactionRequestHeader = request.decode_header().unwrap();
        assert_eq!(back, h, "the header survives the wire");
    }

    #[test]
    fn an_end_without_a_transaction_id_uses_the_unique_key() {
        let no_id = SendResult {
            transaction_id: None,
            ..sent()
        };
        let h = end_header("TXG", &no_id, LocalTransactionState::Commit).unwrap();
        assert_eq!(h.transaction_id.as_deref(), Some("UNIQ"));
    }

    #[test]
    fn an_unreadable_offset_id_is_a_protocol_error() {
        let bad = SendResult {
            offset_msg_id: "not-an-id".into(),
            ..sent()
        };
        let err = end_header("TXG", &bad, LocalTransactionState::Commit).unwrap_err();
        assert!(matches!(err, ProducerError::Protocol { .. }), "{err}");
        assert!(err.to_string().contains("not-an-id"), "{err}");
    }

    fn check_request(body: Vec<u8>) -> RemotingCommand {
        let mut req = RemotingCommand::request_with_header(
            RequestCode::CHECK_TRANSACTION_STATE,
            &CheckTransactionStateRequestHeader {
                tran_state_table_offset: 5,
                commit_log_offset: 900,
                offset_msg_id: Some("OFFSETID".into()),
                msg_id: Some("UNIQ".into()),
                transaction_id: Some("TXID".into()),
                topic: Some("RMQ_SYS_TRANS_HALF_TOPIC".into()),
                broker_name: Some("broker-a".into()),
            },
        )
        .with_body(body);
        req.mark_oneway();
        req
    }

    fn record(body: &[u8], sys_flag: i32) -> Vec<u8> {
        let mut props = Properties::new();
        for (k, v) in [
            ("TAGS", "TagA"),
            ("KEYS", "k1 k2"),
            ("UNIQ_KEY", "UNIQ"),
            ("PGROUP", "TXG"),
            ("TRAN_MSG", "true"),
            ("__transactionId__", "UNIQ"),
        ] {
            props.insert(k, v).unwrap();
        }
        let msg = MessageToStore {
            topic: "Orders".into(),
            queue_id: 3,
            flag: 9,
            sys_flag,
            born_timestamp: 1000,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host: "127.0.0.1:2".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::copy_from_slice(body),
            properties: props.encode(),
        };
        let mut out = Vec::new();
        record::encode(&msg, usize::MAX, &mut out).unwrap();
        record::patch(&mut out, 5, 900, 2000);
        out
    }

    #[test]
    fn a_check_is_read_from_its_header_and_record() {
        let req = check_request(record(b"hello", 0));
        let check = decode_check("b:1", &req).unwrap();
        assert_eq!(check.group.as_deref(), Some("TXG"));
        let m = &check.message;
        assert_eq!((m.topic.as_str(), m.queue_id, m.flag), ("Orders", 3, 9));
        assert_eq!(&m.body[..], b"hello");
        assert_eq!(m.tags.as_deref(), Some("TagA"));
        assert_eq!(m.keys, ["k1", "k2"]);
        assert_eq!(
            m.properties.get("TRAN_MSG").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            (m.msg_id.as_str(), m.transaction_id.as_str()),
            ("UNIQ", "TXID")
        );
        assert_eq!(m.offset_msg_id.as_deref(), Some("OFFSETID"));
        assert_eq!((m.born_timestamp, m.store_timestamp), (1000, 2000));
        assert_eq!(m.broker_name.as_deref(), Some("broker-a"));
        assert_eq!(m.broker_addr, "b:1");

        let end = check_end_header("TXG", &check.header, m, LocalTransactionState::Rollback);
        assert_eq!(
            (end.tran_state_table_offset, end.commit_log_offset),
            (5, 900)
        );
        assert_eq!(end.commit_or_rollback, 12);
        assert_eq!(end.from_transaction_check, Some(true));
        assert_eq!(end.msg_id, "UNIQ");
        assert_eq!(end.transaction_id.as_deref(), Some("TXID"));
        assert_eq!(end.broker_name.as_deref(), Some("broker-a"));
        assert_eq!(end.producer_group, "TXG");
    }

    #[test]
    fn a_compressed_body_is_decompressed() {
        let packed = message_model::compression::compress(b"zipped").unwrap();
        let req = check_request(record(&packed, ZLIB_SYS_FLAG));
        let check = decode_check("b:1", &req).unwrap();
        assert_eq!(&check.message.body[..], b"zipped");
    }

    #[test]
    fn malformed_checks_are_errors_not_panics() {
        assert!(decode_check("b:1", &check_request(Vec::new())).is_err());
        assert!(decode_check("b:1", &check_request(b"garbage bytes".to_vec())).is_err());
        let mut truncated = record(b"hello", 0);
        truncated.truncate(truncated.len() - 3);
        assert!(decode_check("b:1", &check_request(truncated)).is_err());
        let headerless = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE)
            .with_body(record(b"hello", 0));
        let err = decode_check("b:1", &headerless).unwrap_err();
        assert!(err.starts_with("header"), "{err}");
        let bad_zip = check_request(record(b"not zlib", ZLIB_SYS_FLAG));
        assert!(decode_check("b:1", &bad_zip).is_err());
    }

    #[test]
    fn only_checks_are_queued_and_other_requests_are_refused() {
        let (queue, mut checks) = mpsc::channel(1);
        let ServerRequests(serve) = serve(queue);
        assert!(serve("b:1", &check_request(record(b"x", 0))).is_none());
        assert_eq!(checks.try_recv().unwrap().0, "b:1");
        let other = RemotingCommand::request(RequestCode::HEART_BEAT);
        let answer = serve("b:1", &other).unwrap();
        assert_eq!(
            answer.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED
        );
        // A full queue drops the check rather than block the reader.
        assert!(serve("b:1", &check_request(record(b"x", 0))).is_none());
        assert!(serve("b:1", &check_request(record(b"y", 0))).is_none());
        assert!(checks.try_recv().is_ok());
        assert!(checks.try_recv().is_err());
    }
}
