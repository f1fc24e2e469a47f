//! `SEND_MESSAGE`, `SEND_MESSAGE_V2` and `SEND_BATCH_MESSAGE`.
//!
//! The worker appends and builds the answer; under SYNC_FLUSH it hands the
//! answer to the store's group commit, which sends it once a flush covers
//! the append (or answers `FLUSH_DISK_TIMEOUT`), and goes back to the queue
//! at once. So one worker keeps many sends in one flush, and the worker's
//! service time (what the early-admission estimate of the queue wait is fed
//! with) is the append alone, the part that holds the queue up.

use message_model::{
    flags::{dlq_topic, is_writeable, DLQ_QUEUE_NUMS, RETRY_GROUP_TOPIC_PREFIX},
    properties::{find, keys, Properties},
    MessageId, UniqueIdGenerator,
};
use remoting_protocol::{
    body::{self, SubscriptionGroupConfig},
    header::{SendMessageRequestHeader, SendMessageResponseHeader},
    RemotingCommand, ResponseCode,
};
use store::{AppendResult, FlushTicket, MessageToStore, PutError, PutStatus};

use crate::{
    config::BrokerConfig,
    ha::Replicated,
    processor::{bad_header, Refusal},
    request::Job,
    schedule::{delay_request, to_schedule, DelayRequest},
    state::BrokerState,
    stats::MessageType,
    timer::{timer_request, to_timer, TimerRequest},
    topics::validate_topic_name,
    transaction::{to_half, HALF_TOPIC, OP_TOPIC},
};

/// `MQVersion.Version.V3_4_9`: requests of this version and later may
/// carry `maxReconsumeTimes`.
const VERSION_3_4_9: i32 = 121;

/// Appends the message(s) and answers with where they landed: the response
/// now, or `None` when the store's flush thread sends it once the append is
/// durable (SYNC_FLUSH) or nobody waits for one (a oneway request).
pub(crate) fn send(state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let (response, ticket) = match append(state, job) {
        Appended::Stored(response, ticket) => (response, ticket),
        Appended::Refused(refused) => return Some(refused),
    };
    let waiter = if req.is_oneway() {
        None
    } else {
        state.ha.waiter()
    };
    let ticket = match ticket.try_complete() {
        Ok(outcome) => {
            let Some(waiter) = waiter else {
                return Some(with_status(response, outcome.status));
            };
            let reply = job.reply.clone();
            let response = with_status(response, outcome.status);
            waiter.on_replicated(outcome.append.end_offset(), move |replicated| {
                reply.send(with_replicas(response, replicated));
            });
            return None;
        }
        Err(ticket) => ticket,
    };
    if req.is_oneway() {
        // Nothing to answer: the message is stored and the group commit
        // flushes it with the next ones.
        return None;
    }
    let reply = job.reply.clone();
    ticket.on_durable(move |outcome| {
        let response = with_status(response, outcome.status);
        match waiter {
            Some(waiter) if outcome.status == PutStatus::Ok => {
                waiter.on_replicated(outcome.append.end_offset(), move |replicated| {
                    reply.send(with_replicas(response, replicated));
                });
            }
            _ => {
                reply.send(response);
            }
        }
    });
    None
}

/// A stored message's answer turned into what its replicas say: RocketMQ's
/// `FLUSH_SLAVE_TIMEOUT` (12) when they did not confirm it within
/// `slaveTimeout`, `SLAVE_NOT_AVAILABLE` (11) when no slave is in sync;
/// both still carry the send result (the message is stored).
fn with_replicas(mut response: RemotingCommand, replicated: Replicated) -> RemotingCommand {
    match replicated {
        Replicated::Yes => {}
        Replicated::TimedOut => {
            response.code = ResponseCode::FLUSH_SLAVE_TIMEOUT.0;
            response.remark = Some("in-sync slaves did not confirm the message within slaveTimeout; it is stored on the master".into());
        }
        Replicated::NoReplica => {
            response.code = ResponseCode::SLAVE_NOT_AVAILABLE.0;
            response.remark =
                Some("no slave is in sync; the message is stored on the master only".into());
        }
    }
    response
}

/// The success answer turned into what `status` says.
fn with_status(mut response: RemotingCommand, status: PutStatus) -> RemotingCommand {
    response.code = match status {
        PutStatus::Ok => ResponseCode::SUCCESS,
        PutStatus::FlushDiskTimeout => ResponseCode::FLUSH_DISK_TIMEOUT,
    }
    .0;
    response
}

/// What [`append`] did.
enum Appended<'a> {
    /// Stored: the answer for when it is durable, and the store's ticket.
    Stored(RemotingCommand, FlushTicket<'a>),
    /// Refused, with the answer.
    Refused(RemotingCommand),
}

/// Checks the request and appends.
fn append<'a>(state: &'a BrokerState, job: &Job) -> Appended<'a> {
    let req = &job.request;
    let header = match SendMessageRequestHeader::from_command(req) {
        Ok(h) => h,
        Err(e) => return Appended::Refused(bad_header(req, &e)),
    };
    let cfg = state.config();
    if !is_writeable(cfg.broker.broker_permission) {
        return Appended::Refused(req.response_to(
            ResponseCode::NO_PERMISSION,
            Some(format!(
                "the broker[{}] sending message is forbidden",
                cfg.broker.broker_ip1
            )),
        ));
    }
    if let Err(why) = validate_topic_name(&header.topic) {
        return Appended::Refused(req.response_to(ResponseCode::MESSAGE_ILLEGAL, Some(why)));
    }
    let is_retry = header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX);
    let found = state
        .topics
        .get_or_create_for_send(
            &header.topic,
            &header.default_topic,
            header.default_topic_queue_nums,
            cfg.broker.auto_create_topic_enable,
        )
        .and_then(|found| match found {
            // A retry topic is made even when topics are not auto-created.
            None if is_retry => state.topics.ensure_group_topic(&header.topic, 1).map(Some),
            found => Ok(found),
        });
    let topic = match found {
        Ok(Some((topic, created))) => {
            if created {
                state.topics_changed.notify_one();
            }
            topic
        }
        Ok(None) => {
            return Appended::Refused(req.response_to(
                ResponseCode::TOPIC_NOT_EXIST,
                Some(format!(
                    "topic[{}] not exist, apply first please!",
                    header.topic
                )),
            ))
        }
        Err(e) => {
            return Appended::Refused(req.response_to(
                ResponseCode::SYSTEM_ERROR,
                Some(format!("topic[{}] cannot be created: {e}", header.topic)),
            ))
        }
    };
    if !is_writeable(topic.perm) {
        return Appended::Refused(req.response_to(
            ResponseCode::NO_PERMISSION,
            Some(format!(
                "the topic[{}] sending message is forbidden",
                header.topic
            )),
        ));
    }
    let queue_id = if header.queue_id < 0 {
        (rand_index() % topic.write_queue_nums.max(1) as u64) as i32
    } else {
        header.queue_id
    };
    if queue_id >= topic.write_queue_nums.max(topic.read_queue_nums) {
        return Appended::Refused(req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "request queueId[{queue_id}] is illegal, topic {} writeQueueNums {} readQueueNums {}",
                header.topic, topic.write_queue_nums, topic.read_queue_nums
            )),
        ));
    }
    let half = !header.is_batch()
        && is_half_message(
            header.properties.as_deref().unwrap_or(""),
            header.reconsume_times.unwrap_or(0),
        );
    if half {
        if cfg.broker.reject_transaction_message {
            return Appended::Refused(req.response_to(
                ResponseCode::NO_PERMISSION,
                Some(format!(
                    "the broker[{}] sending transaction message is forbidden \
                     (rejectTransactionMessage=true)",
                    cfg.broker.broker_ip1
                )),
            ));
        }
        for system in [HALF_TOPIC, OP_TOPIC] {
            if let Err(refused) = ensure_topic(state, system, 1) {
                return Appended::Refused(refused.answer(req));
            }
        }
    }
    if is_retry && header.is_batch() {
        return Appended::Refused(req.response_to(
            ResponseCode::MESSAGE_ILLEGAL,
            Some(format!(
                "batch request does not support retry group {}",
                header.topic
            )),
        ));
    }
    let (topic_name, queue_id, to_dlq) = if is_retry {
        match retry_or_dlq(state, req, &header) {
            Ok(Some(dlq)) => (dlq, 0, true),
            Ok(None) => (header.topic.clone(), queue_id, false),
            Err(refused) => return Appended::Refused(refused.answer(req)),
        }
    } else {
        (header.topic.clone(), queue_id, false)
    };
    let max_level = state.schedule.max_level();
    let kind = MessageType::of(header.properties.as_deref().unwrap_or(""), half);
    let base = |body: bytes::Bytes, flag: i32, properties: String| MessageToStore {
        topic: topic_name.clone(),
        queue_id,
        flag,
        sys_flag: header.sys_flag,
        born_timestamp: header.born_timestamp,
        born_host: job.reply.peer(),
        store_host: state.store_host,
        reconsume_times: header.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body,
        properties,
    };
    let started = std::time::Instant::now();
    let (appended, uniq) = if header.is_batch() {
        // As RocketMQ: the whole batch must fit where one message must.
        if req.body.len() > cfg.store.max_message_size {
            return Appended::Refused(req.response_to(
                ResponseCode::MESSAGE_ILLEGAL,
                Some(format!(
                    "the batch body is {} bytes, more than maxMessageSize {}: send smaller batches",
                    req.body.len(),
                    cfg.store.max_message_size
                )),
            ));
        }
        let entries = match body::decode_batch(&req.body) {
            Ok(e) if !e.is_empty() => e,
            Ok(_) => {
                return Appended::Refused(
                    req.response_to(ResponseCode::MESSAGE_ILLEGAL, Some("empty batch".into())),
                )
            }
            Err(e) => {
                return Appended::Refused(
                    req.response_to(ResponseCode::MESSAGE_ILLEGAL, Some(e.to_string())),
                )
            }
        };
        let now = message_model::now_ms();
        let delayed = std::iter::once(header.properties.as_deref().unwrap_or(""))
            .chain(entries.iter().map(|e| e.properties.as_str()))
            .any(|p| {
                carries_timing(p)
                    && (delay_request(p, header.sys_flag, max_level) != DelayRequest::None
                        || timer_request(&header.topic, p, now, i64::MAX) != TimerRequest::None)
            });
        if delayed {
            return Appended::Refused(req.response_to(
                ResponseCode::MESSAGE_ILLEGAL,
                Some("a batch cannot be delayed: send delayed messages one at a time".into()),
            ));
        }
        let mut uniq = Vec::with_capacity(entries.len());
        let msgs: Vec<MessageToStore> = entries
            .into_iter()
            .map(|e| {
                let (props, key) =
                    complete_properties(&e.properties, &cfg.broker.broker_cluster_name, state);
                uniq.push(key);
                base(e.body, e.flag, props)
            })
            .collect();
        (state.store.append_messages(&msgs), uniq.join(","))
    } else {
        let (props, key) = complete_properties(
            header.properties.as_deref().unwrap_or(""),
            &cfg.broker.broker_cluster_name,
            state,
        );
        let mut msg = base(req.body.clone(), header.flag, props);
        if half {
            // Its delay or timer applies once it is committed.
            to_half(&mut msg, &key);
        } else if to_dlq {
            clear_delay(&mut msg);
        } else if let Err(refused) = apply_timing(state, &mut msg, max_level) {
            return Appended::Refused(refused.answer(req));
        }
        (state.store.append_message(&msg), key)
    };
    state
        .metrics
        .append_time
        .record(started.elapsed().as_secs_f64());
    match appended {
        Ok(ticket) => {
            let done = ticket.append();
            state
                .metrics
                .messages_stored
                .increment(done.msg_count as u64);
            state
                .metrics
                .bytes_stored
                .increment(done.wrote_bytes as u64);
            state.stats.record_put(
                &topic_name,
                done.msg_count as u64,
                done.wrote_bytes as u64,
                kind,
            );
            let response = stored_response(req, done, queue_id, uniq, &cfg, state);
            Appended::Stored(response, ticket)
        }
        Err(e) => {
            if matches!(e, PutError::OsPageCacheBusy { .. }) {
                state
                    .counters
                    .record_rejected(&flow_control::Reason::PcSynchronized);
            }
            Appended::Refused(put_error_response(req, &e, cfg.store.max_message_size))
        }
    }
}

/// For a send to a retry topic: the dead-letter topic when the message was
/// redelivered more often than its group allows or the group consumes in
/// order (`Some`, created if needed), `None` to store it where it was sent.
fn retry_or_dlq(
    state: &BrokerState,
    req: &RemotingCommand,
    header: &SendMessageRequestHeader,
) -> Result<Option<String>, Refusal> {
    let group_name = &header.topic[RETRY_GROUP_TOPIC_PREFIX.len()..];
    let group = find_group(state, group_name)?;
    let max = max_reconsume_times(req.version, header.max_reconsume_times, &group);
    let reconsume_times = header.reconsume_times.unwrap_or(0);
    // A group that holds queue locks consumes in order: its client already
    // retried locally, so the message goes to the dead-letter topic now.
    let orderly = !state
        .locks
        .is_lock_all_expired(group_name, std::time::Instant::now());
    if reconsume_times <= max && !orderly {
        return Ok(None);
    }
    let dlq = dlq_topic(group_name);
    ensure_topic(state, &dlq, DLQ_QUEUE_NUMS)?;
    tracing::info!(
        group = group_name,
        reconsume_times,
        max,
        "message sent to the dead-letter topic"
    );
    Ok(Some(dlq))
}

/// A consumer group's settings, created when allowed; the refusal when it
/// does not exist.
pub(super) fn find_group(
    state: &BrokerState,
    group: &str,
) -> Result<SubscriptionGroupConfig, Refusal> {
    let auto = state.config().broker.auto_create_subscription_group;
    match state.subscriptions.find_or_create(group, auto) {
        Ok(Some(g)) => Ok(g),
        Ok(None) => Err(Refusal::new(
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!(
                "subscription group not exist, {group}: create it first \
                 (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) or set autoCreateSubscriptionGroup=true"
            ),
        )),
        Err(e) => Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("cannot save subscription groups: {e}"),
        )),
    }
}

/// Redeliveries allowed before the dead-letter topic: the request's, from
/// clients of 3.4.9 or later that send one, else the group's.
pub(super) fn max_reconsume_times(
    version: i32,
    requested: Option<i32>,
    group: &SubscriptionGroupConfig,
) -> i32 {
    match requested {
        Some(max) if version >= VERSION_3_4_9 => max,
        _ => group.retry_max_times,
    }
}

/// Makes sure a retry or dead-letter topic exists with `queues` queues and
/// may be written.
pub(super) fn ensure_topic(state: &BrokerState, topic: &str, queues: i32) -> Result<(), Refusal> {
    match state.topics.ensure_group_topic(topic, queues) {
        Ok((config, changed)) => {
            if changed {
                state.topics_changed.notify_one();
            }
            if !is_writeable(config.perm) {
                return Err(Refusal::new(
                    ResponseCode::NO_PERMISSION,
                    format!("the topic[{topic}] sending message is forbidden"),
                ));
            }
            Ok(())
        }
        Err(e) => Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("topic[{topic}] not exist and cannot be created: {e}"),
        )),
    }
}

/// Moves a message with a `DELAY` level into the schedule topic; refuses a
/// level that is not a number.
pub(super) fn apply_delay(msg: &mut MessageToStore, max_level: i32) -> Result<(), Refusal> {
    match delay_request(&msg.properties, msg.sys_flag, max_level) {
        DelayRequest::None => Ok(()),
        DelayRequest::Level(level) => {
            to_schedule(msg, level);
            Ok(())
        }
        DelayRequest::Invalid(text) => Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!(
                "the DELAY property {text:?} is not a delay level: 1..={max_level}, or 0 for none"
            ),
        )),
    }
}

/// Whether properties may ask for a delay level or a timer: most sends
/// carry neither, and this is one scan instead of five lookups.
fn carries_timing(properties: &str) -> bool {
    properties.contains("DELAY\u{1}") || properties.contains("TIMER_")
}

/// Moves a message with a `DELAY` level into the schedule topic, or one
/// with timer properties due later into the timer topic; refuses what
/// cannot be honoured.
pub(super) fn apply_timing(
    state: &BrokerState,
    msg: &mut MessageToStore,
    max_level: i32,
) -> Result<(), Refusal> {
    if !carries_timing(&msg.properties) {
        return Ok(());
    }
    if delay_request(&msg.properties, msg.sys_flag, max_level) != DelayRequest::None {
        return apply_delay(msg, max_level);
    }
    let cfg = state.config();
    let max_delay_ms = (cfg.broker.timer_max_delay_sec as i64).saturating_mul(1000);
    match timer_request(
        &msg.topic,
        &msg.properties,
        message_model::now_ms(),
        max_delay_ms,
    ) {
        TimerRequest::None => Ok(()),
        TimerRequest::Illegal(remark) => Err(Refusal::new(ResponseCode::MESSAGE_ILLEGAL, remark)),
        TimerRequest::At(_) if !cfg.broker.timer_wheel_enable => Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            "accurate timer message is not enabled, timerWheelEnable is false",
        )),
        TimerRequest::At(_) if !state.timers.has_room() => Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!(
                "timer message flow control: {} timers are waiting, timerMaxPending is {}; \
                 retry once some are delivered",
                state.timers.stats().pending,
                state.timers.max_pending()
            ),
        )),
        TimerRequest::At(due) => {
            to_timer(msg, due);
            Ok(())
        }
    }
}

/// Sets `DELAY` to 0: a message bound for the dead-letter topic goes there now.
pub(super) fn clear_delay(msg: &mut MessageToStore) {
    let mut props = Properties::decode(&msg.properties);
    if props.get(keys::DELAY_TIME_LEVEL).is_some() {
        let _ = props.insert(keys::DELAY_TIME_LEVEL, "0");
        msg.properties = props.encode();
    }
}

/// Whether a send is the half of a transaction, as RocketMQ decides it: its
/// `TRAN_MSG` property parses as true (`Boolean.parseBoolean`), unless it is
/// a redelivered delayed message (which clients before 4.6.1 marked so).
fn is_half_message(properties: &str, reconsume_times: i32) -> bool {
    let half = find(properties, keys::TRANSACTION_PREPARED)
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    half && !(reconsume_times > 0
        && find(properties, keys::DELAY_TIME_LEVEL)
            .and_then(|v| v.parse::<i32>().ok())
            .is_some_and(|level| level > 0))
}

/// The `SUCCESS` answer for stored messages: ids, queue and offset.
fn stored_response(
    req: &RemotingCommand,
    done: &AppendResult,
    queue_id: i32,
    uniq: String,
    cfg: &BrokerConfig,
    state: &BrokerState,
) -> RemotingCommand {
    let msg_id = done
        .physical_offsets
        .iter()
        .map(|&o| MessageId::new(state.store_host, o as i64).encode())
        .collect::<Vec<_>>()
        .join(",");
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&SendMessageResponseHeader {
            msg_id,
            queue_id,
            queue_offset: done.queue_offset,
            transaction_id: Some(uniq),
            msg_region: Some(cfg.broker.region_id.clone()),
            trace_on: Some(cfg.broker.trace_on.to_string()),
            ..SendMessageResponseHeader::default()
        })
}

/// Adds the broker's cluster name and, when the producer set none, a unique
/// key; returns the properties and the unique key.
fn complete_properties(properties: &str, cluster: &str, state: &BrokerState) -> (String, String) {
    let uniq = find(properties, keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX).map(str::to_owned);
    let mut out = String::with_capacity(properties.len() + 64);
    out.push_str(properties);
    let uniq = match uniq {
        Some(u) => u,
        None => {
            let key = unique_ids(state).next_key().encode();
            push_property(&mut out, keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &key);
            key
        }
    };
    if find(properties, keys::CLUSTER).is_none() {
        push_property(&mut out, keys::CLUSTER, cluster);
    }
    (out, uniq)
}

fn push_property(out: &mut String, key: &str, value: &str) {
    out.push_str(key);
    out.push('\u{1}');
    out.push_str(value);
    out.push('\u{2}');
}

fn unique_ids(state: &BrokerState) -> &'static UniqueIdGenerator {
    static IDS: std::sync::OnceLock<UniqueIdGenerator> = std::sync::OnceLock::new();
    IDS.get_or_init(|| {
        UniqueIdGenerator::new(
            state.store_host.ip(),
            std::process::id(),
            rand_index() as i32,
        )
    })
}

/// The response for an append the store refused, with RocketMQ's codes and remarks.
pub(crate) fn put_error_response(
    req: &RemotingCommand,
    e: &PutError,
    max_body: usize,
) -> RemotingCommand {
    match e {
        PutError::MessageIllegal { .. } | PutError::PropertiesSizeExceeded { .. } => req
            .response_to(
                ResponseCode::MESSAGE_ILLEGAL,
                Some(format!(
                    "the message is illegal, maybe msg body or properties length not matched. \
                 msg body length limit {max_body}B, msg properties length limit 32KB. ({e})"
                )),
            ),
        PutError::OsPageCacheBusy { .. } => req.response_to(
            ResponseCode::SYSTEM_BUSY,
            Some(flow_control::Reason::PcSynchronized.remark()),
        ),
        PutError::ServiceNotAvailable { reason } => req.response_to(
            ResponseCode::SERVICE_NOT_AVAILABLE,
            Some(format!("service not available now: {reason}")),
        ),
        PutError::CreateMappedFileFailed { reason } => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "create mapped file failed, server is busy or broken: {reason}"
            )),
        ),
        other => req.response_to(ResponseCode::SYSTEM_ERROR, Some(other.to_string())),
    }
}

/// A cheap, non-cryptographic random number.
pub(super) fn rand_index() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(message_model::now_ms() as u64);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use remoting_protocol::RequestCode;

    fn answer(e: PutError) -> RemotingCommand {
        put_error_response(
            &RemotingCommand::request(RequestCode::SEND_MESSAGE_V2),
            &e,
            4096,
        )
    }

    #[test]
    fn half_messages_are_told_apart_as_rocketmq_does() {
        assert!(is_half_message(
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}G\u{2}",
            0
        ));
        assert!(is_half_message("TRAN_MSG\u{1}TRUE\u{2}", 0));
        assert!(!is_half_message("TRAN_MSG\u{1}false\u{2}", 0));
        assert!(!is_half_message("TRAN_MSG\u{1}1\u{2}", 0), "parseBoolean");
        assert!(!is_half_message("TAGS\u{1}A\u{2}", 0));
        // A redelivered delayed message of an old client keeps its TRAN_MSG.
        assert!(!is_half_message(
            "TRAN_MSG\u{1}true\u{2}DELAY\u{1}3\u{2}",
            1
        ));
        assert!(is_half_message("TRAN_MSG\u{1}true\u{2}DELAY\u{1}3\u{2}", 0));
    }

    #[test]
    fn store_refusals_map_to_rocketmq_codes_and_remarks() {
        let busy = answer(PutError::OsPageCacheBusy { held_ms: 1200 });
        assert_eq!(busy.response_code(), ResponseCode::SYSTEM_BUSY);
        assert_eq!(
            busy.remark.as_deref(),
            Some("[PC_SYNCHRONIZED]broker busy, start flow control for a while")
        );
        let full = answer(PutError::ServiceNotAvailable {
            reason: "disk full: cannot create CommitLog file 00000000001073741824".into(),
        });
        assert_eq!(full.response_code(), ResponseCode::SERVICE_NOT_AVAILABLE);
        assert!(full.remark.unwrap().contains("disk full"));
        let illegal = answer(PutError::PropertiesSizeExceeded { len: 40_000 });
        assert_eq!(illegal.response_code(), ResponseCode::MESSAGE_ILLEGAL);
        assert!(illegal
            .remark
            .unwrap()
            .contains("msg body length limit 4096B"));
        let no_file = answer(PutError::CreateMappedFileFailed {
            reason: "no buffer".into(),
        });
        assert_eq!(no_file.response_code(), ResponseCode::SYSTEM_ERROR);
        assert!(no_file
            .remark
            .unwrap()
            .starts_with("create mapped file failed"));
    }
}
