//! `END_TRANSACTION` (37): the producer commits or rolls back a half
//! message (see [`crate::transaction`]). Producers send it oneway, so the
//! answer is only seen by a caller that asks for one; refusals are also
//! logged, at most once a second.

use std::sync::atomic::{AtomicU64, Ordering};

use message_model::{
    flags::{
        transaction_type, TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE,
        TRANSACTION_TYPE_MASK,
    },
    properties::{keys, Properties},
    record::{self, Record},
    MessageToStore,
};
use remoting_protocol::{header::EndTransactionRequestHeader, RemotingCommand, ResponseCode};

use crate::{
    processor::{bad_header, send_message::apply_timing, Refusal},
    schedule::to_real_topic,
    state::{once_a_second, BrokerState},
    transaction::{
        op_offsets, op_record, undo_record, CHECK_IMMUNITY, COMMIT, END_OUTCOME, HALF_TOPIC,
        OP_TOPIC, QUEUE_ID, REMOVE_TAG, ROLLBACK,
    },
};

/// Commits or rolls back the half message the header names.
pub(crate) fn end(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let header: EndTransactionRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    // Who decided: the producer after its local transaction, or its answer
    // to a check.
    let source = if header.from_transaction_check.unwrap_or(false) {
        "check"
    } else {
        "producer"
    };
    let outcome = match header.commit_or_rollback {
        TRANSACTION_COMMIT_TYPE => "commit",
        TRANSACTION_ROLLBACK_TYPE => "rollback",
        TRANSACTION_NOT_TYPE => {
            metrics::counter!(
                "sluice_transactions_ended_total",
                "outcome" => "unknown",
                "source" => source
            )
            .increment(1);
            tracing::debug!(
                producer_group = %header.producer_group,
                msg_id = %header.msg_id,
                "transaction outcome unknown: the half message stays until it is ended"
            );
            return req.response_to(ResponseCode::SUCCESS, None);
        }
        other => {
            return refuse(
                req,
                &header,
                Refusal::new(
                    ResponseCode::SYSTEM_ERROR,
                    format!(
                        "commitOrRollback is {other}: 0 (unknown), 8 (commit) or 12 (rollback)"
                    ),
                ),
            )
        }
    };
    match end_half(state, &header) {
        Ok(ended) => {
            if ended {
                metrics::counter!(
                    "sluice_transactions_ended_total",
                    "outcome" => outcome,
                    "source" => source
                )
                .increment(1);
            }
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(refusal) => refuse(req, &header, refusal),
    }
}

/// Logs a refusal (at most one line a second, with the number of refusals
/// since the last line) and answers it.
fn refuse(
    req: &RemotingCommand,
    header: &EndTransactionRequestHeader,
    refusal: Refusal,
) -> RemotingCommand {
    static LAST_LOG_MS: AtomicU64 = AtomicU64::new(0);
    static SINCE_LAST_LOG: AtomicU64 = AtomicU64::new(0);
    let refused = SINCE_LAST_LOG.fetch_add(1, Ordering::Relaxed) + 1;
    if once_a_second(&LAST_LOG_MS) {
        SINCE_LAST_LOG.store(0, Ordering::Relaxed);
        tracing::warn!(
            producer_group = %header.producer_group,
            msg_id = %header.msg_id,
            commit_log_offset = header.commit_log_offset,
            code = refusal.code.0,
            remark = %refusal.remark,
            refused_since_last_line = refused,
            "END_TRANSACTION refused (logged at most once a second)"
        );
    }
    refusal.answer(req)
}

/// Ends the half message: `Ok(true)` when this end stored its outcome,
/// `Ok(false)` when the half had already ended (a second end changes
/// nothing).
fn end_half(state: &BrokerState, header: &EndTransactionRequestHeader) -> Result<bool, Refusal> {
    let not_found = || {
        Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!(
                "Find prepared transaction message failed: no half message at commitLogOffset {}",
                header.commit_log_offset
            ),
        )
    };
    let offset = u64::try_from(header.commit_log_offset).map_err(|_| not_found())?;
    let stored = state.store.lookup_message(offset).ok_or_else(not_found)?;
    let Record::Message(half) = record::check(&stored, false) else {
        return Err(not_found());
    };
    if half.topic != HALF_TOPIC {
        return Err(not_found());
    }
    let props = Properties::decode(half.properties);
    if props.get(keys::PRODUCER_GROUP) != Some(header.producer_group.as_str()) {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!(
                "The producer group wrong: the half message belongs to {:?}, not {:?}",
                props.get(keys::PRODUCER_GROUP).unwrap_or(""),
                header.producer_group
            ),
        ));
    }
    if half.queue_offset != header.tran_state_table_offset {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!(
                "The transaction state table offset wrong: the half message is at {}, not {}",
                half.queue_offset, header.tran_state_table_offset
            ),
        ));
    }
    if half.physical_offset != header.commit_log_offset {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            "The commit log offset wrong",
        ));
    }
    if !header.from_transaction_check.unwrap_or(false) {
        if let Some(immunity_s) = props
            .get(CHECK_IMMUNITY)
            .and_then(|v| v.parse::<i64>().ok())
        {
            let timeout = state.config().broker.transaction_time_out as i64;
            let limit = immunity_s.saturating_mul(1000).max(timeout);
            let age = message_model::now_ms() - half.born_timestamp;
            if age > limit {
                return Err(Refusal::new(
                    ResponseCode::ILLEGAL_OPERATION,
                    format!(
                        "the half message was sent {age} ms ago, past its check immunity of \
                         {limit} ms: its outcome is taken from a check"
                    ),
                ));
            }
        }
    }
    let mut ended = state.transactions.lock();
    if ended.contains(half.queue_offset) {
        tracing::debug!(
            half_offset = half.queue_offset,
            "the half message has already ended; this end changes nothing"
        );
        return Ok(false);
    }
    let commit = header.commit_or_rollback == TRANSACTION_COMMIT_TYPE;
    let real = if commit {
        Some(committed(state, &stored, half.physical_offset)?)
    } else {
        None
    };
    let outcome = if commit { COMMIT } else { ROLLBACK };
    if let Err(e) =
        state
            .store
            .put_message(&op_record(half.queue_offset, outcome, state.store_host))
    {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("the end of the half message was not recorded: {e}"),
        ));
    }
    if let Some(real) = real {
        if let Err(e) = state.store.put_message(&real) {
            undo_end(state, half.queue_offset, &e);
            return Err(Refusal::new(
                ResponseCode::SYSTEM_ERROR,
                format!("the committed message was not stored: {e}"),
            ));
        }
    }
    ended.insert(half.queue_offset);
    state.transactions.forget_checks(half.queue_offset);
    Ok(true)
}

/// The committed message of the half stored as `half_record` (at
/// `half_physical_offset`): in its real topic and queue, flagged as a
/// commit, its delay or timer applied.
fn committed(
    state: &BrokerState,
    half_record: &[u8],
    half_physical_offset: i64,
) -> Result<MessageToStore, Refusal> {
    let Some(mut real) = to_real_topic(half_record, |_| {}) else {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            "the half message names no real topic and queue",
        ));
    };
    real.sys_flag = (real.sys_flag & !TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE;
    real.prepared_transaction_offset = half_physical_offset;
    if let Err(refusal) = apply_timing(state, &mut real, state.schedule.max_level()) {
        tracing::warn!(
            remark = %refusal.remark,
            "committed message stored at once: its delay or timer cannot be honoured"
        );
    }
    Ok(real)
}

/// Records that the commit of the half at `half_offset` did not happen
/// after all, so the half is pending again (a check or a retried end
/// commits it later).
fn undo_end(state: &BrokerState, half_offset: i64, cause: &store::PutError) {
    match state
        .store
        .put_message(&undo_record(half_offset, state.store_host))
    {
        Ok(_) => tracing::error!(
            half_offset,
            %cause,
            "the committed message was not stored: its end is undone and the half is pending again"
        ),
        Err(e) => tracing::error!(
            half_offset,
            %cause,
            undo_error = %e,
            "the committed message was not stored, nor its end undone: it is stored when the \
             broker starts next, unless another half ends first (then the half counts as ended)"
        ),
    }
}

/// How long after a commit's op record its message can be stored: the
/// two appends follow each other under one lock, so this only bounds the
/// wait for the put lock.
const COMMIT_AFTER_OP_MS: i64 = 10 * 60 * 1000;

/// Stores the message of the last committed half if the broker stopped
/// between recording the commit and storing its message. Runs when the
/// broker starts, before it serves or checks.
pub(crate) fn repair_last_end(state: &BrokerState) {
    let store = &state.store;
    let end = store.max_offset_in_queue(OP_TOPIC, QUEUE_ID);
    if end <= store.min_offset_in_queue(OP_TOPIC, QUEUE_ID) {
        return;
    }
    let Some(op_bytes) = store
        .queue_entry(OP_TOPIC, QUEUE_ID, end - 1)
        .and_then(|e| store.lookup_message(u64::try_from(e.commit_log_offset).ok()?))
    else {
        return;
    };
    let Record::Message(op) = record::check(&op_bytes, false) else {
        return;
    };
    let props = Properties::decode(op.properties);
    if props.get(keys::TAGS) != Some(REMOVE_TAG) || props.get(END_OUTCOME) != Some(COMMIT) {
        return;
    }
    let after_op = op.physical_offset + op.total_size as i64;
    for half_offset in op_offsets(op.body) {
        let Some((half_record, half_physical_offset)) = store
            .queue_entry(HALF_TOPIC, QUEUE_ID, half_offset)
            .and_then(|e| {
                let record = store.lookup_message(u64::try_from(e.commit_log_offset).ok()?)?;
                Some((record, e.commit_log_offset))
            })
        else {
            continue;
        };
        if commit_stored(
            store,
            after_op,
            half_physical_offset,
            op.store_timestamp.saturating_add(COMMIT_AFTER_OP_MS),
        ) {
            continue;
        }
        let stored = committed(state, &half_record, half_physical_offset)
            .map_err(|r| r.remark)
            .and_then(|real| store.put_message(&real).map_err(|e| e.to_string()));
        match stored {
            Ok(_) => tracing::warn!(
                half_offset,
                "the broker stopped between recording a commit and storing its message: \
                 the committed message is stored now"
            ),
            Err(cause) => tracing::error!(
                half_offset,
                %cause,
                "the broker stopped between recording a commit and storing its message, \
                 and the message cannot be stored now"
            ),
        }
    }
}

/// Whether the commit of the half at `half_physical_offset` is in the
/// CommitLog from `from`, among the records stored until `until_ms`.
fn commit_stored(
    store: &store::MessageStore,
    from: i64,
    half_physical_offset: i64,
    until_ms: i64,
) -> bool {
    let file_size = store.config().mapped_file_size_commit_log as u64;
    let end = store.max_physical_offset();
    let Ok(mut at) = u64::try_from(from) else {
        return false;
    };
    while at < end {
        let Some(bytes) = store.lookup_message(at) else {
            return false;
        };
        match record::check(&bytes, false) {
            Record::Message(m) if m.total_size > 0 => {
                if m.store_timestamp > until_ms {
                    return false;
                }
                if m.prepared_transaction_offset == half_physical_offset
                    && transaction_type(m.sys_flag) == TRANSACTION_COMMIT_TYPE
                {
                    return true;
                }
                at += m.total_size as u64;
            }
            Record::Blank => at = (at / file_size + 1) * file_size,
            _ => return false,
        }
    }
    false
}
