//! `END_TRANSACTION` (37): the producer commits or rolls back a half
//! message (see [`crate::transaction`]). Producers send it oneway, so the
//! answer is only seen by a caller that asks for one; refusals are also
//! logged, at most once a second.

use std::sync::atomic::{AtomicU64, Ordering};

use message_model::{
    flags::{
        TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE,
        TRANSACTION_TYPE_MASK,
    },
    properties::{keys, Properties},
    record::{self, Record},
};
use remoting_protocol::{header::EndTransactionRequestHeader, RemotingCommand, ResponseCode};

use crate::{
    processor::{bad_header, send_message::apply_timing, Refusal},
    schedule::to_real_topic,
    state::{once_a_second, BrokerState},
    transaction::{op_record, CHECK_IMMUNITY, HALF_TOPIC},
};

/// Commits or rolls back the half message the header names.
pub(crate) fn end(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let header: EndTransactionRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let outcome = match header.commit_or_rollback {
        TRANSACTION_COMMIT_TYPE => "commit",
        TRANSACTION_ROLLBACK_TYPE => "rollback",
        TRANSACTION_NOT_TYPE => {
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
                metrics::counter!("sluice_transactions_ended_total", "outcome" => outcome)
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
    if ended.contains(&half.queue_offset) {
        tracing::debug!(
            half_offset = half.queue_offset,
            "the half message has already ended; this end changes nothing"
        );
        return Ok(false);
    }
    let op = op_record(half.queue_offset, state.store_host);
    if header.commit_or_rollback == TRANSACTION_COMMIT_TYPE {
        let Some(mut real) = to_real_topic(&stored, |_| {}) else {
            return Err(Refusal::new(
                ResponseCode::SYSTEM_ERROR,
                "the half message names no real topic and queue",
            ));
        };
        real.sys_flag = (real.sys_flag & !TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE;
        real.prepared_transaction_offset = half.physical_offset;
        if let Err(refusal) = apply_timing(state, &mut real, state.schedule.max_level()) {
            tracing::warn!(
                remark = %refusal.remark,
                "committed message stored at once: its delay or timer cannot be honoured"
            );
        }
        if let Err(e) = state.store.put_message(&real) {
            return Err(Refusal::new(
                ResponseCode::SYSTEM_ERROR,
                format!("the committed message was not stored: {e}"),
            ));
        }
    }
    // The commit is stored; without its op record a restarted broker would
    // see the half as pending, so a failure here is logged loudly.
    if let Err(e) = state.store.put_message(&op) {
        tracing::error!(
            half_offset = half.queue_offset,
            cause = %e,
            "the end of a half message was not recorded; after a restart it counts as pending"
        );
    }
    ended.insert(half.queue_offset);
    state.transactions.forget_checks(half.queue_offset);
    Ok(true)
}
