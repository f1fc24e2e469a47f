//! `CONSUMER_SEND_MSG_BACK`: a consumer failed a message and hands it back.
//! The broker stores a copy in the group's retry topic `%RETRY%<group>`,
//! delayed by level `3 + reconsumeTimes` (or the level asked for), with its
//! redelivery count raised; once the count reaches the group's
//! `retryMaxTimes` (or the request asks for it with level -1) the copy goes
//! to the dead-letter topic `%DLQ%<group>` instead, where nobody consumes it
//! until an operator does.

use message_model::{
    flags::{dlq_topic, is_writeable, retry_topic, DLQ_QUEUE_NUMS},
    properties::{keys, Properties},
    record::{self, Record},
    MessageId, MessageToStore,
};
use remoting_protocol::{header::ConsumerSendMsgBackRequestHeader, RemotingCommand, ResponseCode};
use store::PutStatus;

use super::{
    bad_header,
    send_message::{
        apply_delay, clear_delay, ensure_topic, find_group, max_reconsume_times,
        put_error_response, rand_index,
    },
    Refusal,
};
use crate::{request::Job, state::BrokerState};

/// Stores the failed message again in the group's retry or dead-letter
/// topic and answers once it is stored (under SYNC_FLUSH, once durable).
pub(crate) fn send_back(state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let header: ConsumerSendMsgBackRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return Some(bad_header(req, &e)),
    };
    let msg = match prepare(state, &header, req.version) {
        Ok(Some(msg)) => msg,
        Ok(None) => return Some(req.response_to(ResponseCode::SUCCESS, None)),
        Err(refused) => return Some(refused.answer(req)),
    };
    let ticket = match state.store.append_message(&msg) {
        Ok(ticket) => ticket,
        Err(e) => {
            return Some(put_error_response(
                req,
                &e,
                state.config().store.max_message_size,
            ))
        }
    };
    state.metrics.messages_stored.increment(1);
    let response = req.response_to(ResponseCode::SUCCESS, None);
    let ticket = match ticket.try_complete() {
        Ok(outcome) => return Some(answer(response, outcome.status)),
        Err(ticket) => ticket,
    };
    let reply = job.reply.clone();
    ticket.on_durable(move |outcome| {
        reply.send(answer(response, outcome.status));
    });
    None
}

/// `SUCCESS` when stored; any other outcome is a `SYSTEM_ERROR` named after
/// it, a flush timeout included (the consumer then retries it itself).
fn answer(mut response: RemotingCommand, status: PutStatus) -> RemotingCommand {
    if status == PutStatus::FlushDiskTimeout {
        response.code = ResponseCode::SYSTEM_ERROR.0;
        response.remark = Some("FLUSH_DISK_TIMEOUT".into());
    }
    response
}

/// The copy to store, `None` when the group keeps no retry queues (the
/// message is dropped, as RocketMQ does), or the refusal.
fn prepare(
    state: &BrokerState,
    header: &ConsumerSendMsgBackRequestHeader,
    version: i32,
) -> Result<Option<MessageToStore>, Refusal> {
    let group = find_group(state, &header.group)?;
    let cfg = state.config();
    if !is_writeable(cfg.broker.broker_permission) {
        return Err(Refusal::new(
            ResponseCode::NO_PERMISSION,
            format!(
                "the broker[{}] sending message is forbidden",
                cfg.broker.broker_ip1
            ),
        ));
    }
    if group.retry_queue_nums <= 0 {
        tracing::info!(group = %header.group, offset = header.offset, "message sent back dropped: the group has retryQueueNums <= 0");
        return Ok(None);
    }
    let retry = retry_topic(&header.group);
    ensure_topic(state, &retry, group.retry_queue_nums)?;
    let not_found = || {
        Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("look message by offset failed, {}", header.offset),
        )
    };
    let stored = u64::try_from(header.offset)
        .ok()
        .and_then(|offset| state.store.lookup_message(offset))
        .ok_or_else(not_found)?;
    let Record::Message(old) = record::check(&stored, false) else {
        return Err(not_found());
    };

    let mut props = Properties::decode(old.properties);
    if props.get(keys::RETRY_TOPIC).is_none() {
        let _ = props.insert(keys::RETRY_TOPIC, old.topic);
    }
    let _ = props.insert(keys::WAIT_STORE_MSG_OK, "false");
    if props.get(keys::ORIGIN_MESSAGE_ID).is_none() {
        let id = MessageId::new(old.store_host, old.physical_offset).encode();
        let _ = props.insert(keys::ORIGIN_MESSAGE_ID, id);
    }
    let max = max_reconsume_times(version, header.max_reconsume_times, &group);
    let to_dlq = old.reconsume_times >= max || header.delay_level < 0;
    let (topic, queue_id) = if to_dlq {
        let dlq = dlq_topic(&header.group);
        ensure_topic(state, &dlq, DLQ_QUEUE_NUMS)?;
        tracing::info!(
            group = %header.group,
            topic = old.topic,
            reconsume_times = old.reconsume_times,
            max,
            "message sent to the dead-letter topic"
        );
        (dlq, 0)
    } else {
        let level = if header.delay_level == 0 {
            3 + old.reconsume_times
        } else {
            header.delay_level
        };
        let _ = props.insert(keys::DELAY_TIME_LEVEL, level.to_string());
        (retry, (rand_index() % group.retry_queue_nums as u64) as i32)
    };
    let mut msg = MessageToStore {
        topic,
        queue_id,
        flag: old.flag,
        sys_flag: old.sys_flag,
        born_timestamp: old.born_timestamp,
        born_host: old.born_host,
        store_host: state.store_host,
        reconsume_times: old.reconsume_times + 1,
        prepared_transaction_offset: old.prepared_transaction_offset,
        body: bytes::Bytes::copy_from_slice(old.body),
        properties: props.encode(),
    };
    if to_dlq {
        clear_delay(&mut msg);
    } else {
        apply_delay(&mut msg, state.schedule.max_level())?;
    }
    Ok(Some(msg))
}
