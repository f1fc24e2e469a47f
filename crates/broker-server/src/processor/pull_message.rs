//! `PULL_MESSAGE` and `LITE_PULL_MESSAGE`: plain reads from a queue.

use std::time::Duration;

use bytes::BytesMut;
use message_model::{
    flags::{is_readable, PULL_COMMIT_OFFSET, PULL_SUSPEND},
    tag_hash,
};
use remoting_protocol::{
    header::{is_tag_type, PullMessageRequestHeader, PullMessageResponseHeader},
    RemotingCommand, ResponseCode,
};
use store::{GetStatus, ReadCaps};

use crate::{
    processor::{bad_header, client_manage::unsupported_filter},
    request::Job,
    state::BrokerState,
};

/// Reads messages and answers with them and the next offsets; parks the
/// pull (answering later, `None` now) when it finds nothing and may wait.
pub(crate) fn pull(state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let header: PullMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return Some(bad_header(req, &e)),
    };
    let response = read(state, req, &header, !job.resumed);
    if response.response_code() != ResponseCode::PULL_NOT_FOUND
        || job.resumed
        || header.sys_flag & PULL_SUSPEND == 0
    {
        return Some(response);
    }
    let cfg = state.config();
    let hold = if cfg.broker.long_polling_enable {
        Duration::from_millis(u64::try_from(header.suspend_timeout_millis).unwrap_or(0))
    } else {
        Duration::from_millis(cfg.broker.short_polling_time_mills)
    };
    let parked = Job {
        family: job.family,
        reply: job.reply.clone(),
        request: req.clone(),
        resumed: true,
        work: None,
    };
    match state.pull_hold.park(
        parked,
        &header.topic,
        header.queue_id,
        header.queue_offset,
        hold,
        state.store.watch_arrivals(),
    ) {
        Ok(()) => {
            // A message may have arrived between the read and the parking.
            let max = state
                .store
                .max_offset_in_queue(&header.topic, header.queue_id);
            for ready in state.pull_hold.arrived(&header.topic, header.queue_id, max) {
                state.resume(ready);
            }
            None
        }
        Err(_) => Some(response),
    }
}

/// Reads for a pull; `store_offset` commits the offset the pull carries
/// (only on its first run: a parked pull served again later would move the
/// group's offset back to what it was when the pull was sent, as RocketMQ
/// also avoids).
fn read(
    state: &BrokerState,
    req: &RemotingCommand,
    header: &PullMessageRequestHeader,
    store_offset: bool,
) -> RemotingCommand {
    let cfg = state.config();
    if !is_readable(cfg.broker.broker_permission) {
        return req.response_to(
            ResponseCode::NO_PERMISSION,
            Some(format!(
                "the broker[{}] pulling message is forbidden",
                cfg.broker.broker_ip1
            )),
        );
    }
    match state.subscriptions.consume_permissions(
        &header.consumer_group,
        cfg.broker.auto_create_subscription_group,
    ) {
        Ok(Some(p)) if p.consume && p.broadcast => {}
        Ok(Some(p)) if p.consume => {
            if state.clients.is_broadcasting(&header.consumer_group) {
                return req.response_to(
                    ResponseCode::NO_PERMISSION,
                    Some(format!(
                        "the consumer group[{}] can not consume by broadcast way",
                        header.consumer_group
                    )),
                );
            }
        }
        Ok(Some(_)) => {
            return req.response_to(
                ResponseCode::NO_PERMISSION,
                Some(format!(
                    "subscription group no permission, {}",
                    header.consumer_group
                )),
            )
        }
        Ok(None) => {
            return req.response_to(
                ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
                Some(format!(
                    "subscription group [{}] does not exist: create it first \
                     (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP) or set autoCreateSubscriptionGroup=true",
                    header.consumer_group
                )),
            )
        }
        Err(e) => {
            return req.response_to(
                ResponseCode::SYSTEM_ERROR,
                Some(format!("cannot save subscription groups: {e}")),
            )
        }
    }
    let Some(topic) = state.topics.get(&header.topic) else {
        return req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!(
                "topic[{}] not exist, apply first please!",
                header.topic
            )),
        );
    };
    if !is_readable(topic.perm) {
        return req.response_to(
            ResponseCode::NO_PERMISSION,
            Some(format!(
                "the topic[{}] pulling message is forbidden",
                header.topic
            )),
        );
    }
    if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                header.queue_id, header.topic, topic.read_queue_nums
            )),
        );
    }
    if !is_tag_type(header.expression_type.as_deref()) {
        // Sluice filters by tag only (RocketMQ without enablePropertyFilter).
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(unsupported_filter(
                header.expression_type.as_deref().unwrap_or_default(),
            )),
        );
    }
    // An operator's reset of this queue, taken by this pull: the client
    // moves there, and the offset the pull carries is not committed.
    if let Some(offset) =
        state
            .offsets
            .take_reset(&header.consumer_group, &header.topic, header.queue_id)
    {
        return reset_answer(state, req, header, offset);
    }
    if store_offset && header.sys_flag & PULL_COMMIT_OFFSET != 0 && header.commit_offset >= 0 {
        state.offsets.commit(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    let tags = subscribed_tags(header.subscription.as_deref());
    let filter = |code: i64| tags.as_ref().is_none_or(|t| t.contains(&code));
    // What the client asks for, within the broker's caps.
    let byte_cap = cfg.broker.max_transfer_bytes_on_message_in_memory;
    let max_bytes = header
        .max_msg_bytes
        .and_then(|b| usize::try_from(b).ok())
        .filter(|b| *b > 0)
        .map_or(byte_cap, |b| b.min(byte_cap));
    let max_msgs = usize::try_from(header.max_msg_nums)
        .unwrap_or(1)
        .clamp(1, cfg.broker.max_transfer_count_on_message_in_memory);
    let caps = ReadCaps {
        count_in_memory: max_msgs,
        bytes_in_memory: max_bytes,
        count_on_disk: max_msgs.min(cfg.broker.max_transfer_count_on_message_in_disk),
        bytes_on_disk: max_bytes.min(cfg.broker.max_transfer_bytes_on_message_in_disk),
        memory_bytes: physical_memory_bytes() / 100 * cfg.broker.access_message_in_memory_max_ratio,
    };
    let got = state.store.get_messages_capped(
        &header.topic,
        header.queue_id,
        header.queue_offset,
        &caps,
        Some(&filter),
    );
    let asked = header.queue_offset;
    let (code, remark) = match got.status {
        GetStatus::Found => (ResponseCode::SUCCESS, None),
        GetStatus::NoMatchedMessage => (ResponseCode::PULL_RETRY_IMMEDIATELY, None),
        GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue if asked != 0 => (
            ResponseCode::PULL_OFFSET_MOVED,
            Some("the queue holds no message at this offset".to_owned()),
        ),
        GetStatus::NoMatchedLogicQueue | GetStatus::NoMessageInQueue => {
            (ResponseCode::PULL_NOT_FOUND, None)
        }
        GetStatus::OffsetFoundNull | GetStatus::OffsetOverflowOne => {
            (ResponseCode::PULL_NOT_FOUND, None)
        }
        GetStatus::OffsetOverflowBadly | GetStatus::OffsetTooSmall => (
            ResponseCode::PULL_OFFSET_MOVED,
            Some(format!(
                "offset {asked} is outside the queue [{}, {})",
                got.min_offset, got.max_offset
            )),
        ),
    };
    let size: usize = got.messages.iter().map(|m| m.len()).sum();
    if got.status == GetStatus::Found {
        state.stats.record_get(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            got.messages.len() as u64,
            size as u64,
            got.next_begin_offset,
        );
    } else {
        state.stats.record_miss();
    }
    let mut body = BytesMut::with_capacity(size);
    for m in &got.messages {
        body.extend_from_slice(m);
    }
    req.response_to(code, remark)
        .with_header(&PullMessageResponseHeader {
            suggest_which_broker_id: 0,
            next_begin_offset: got.next_begin_offset,
            min_offset: got.min_offset,
            max_offset: got.max_offset,
            ..PullMessageResponseHeader::default()
        })
        .with_body(body.freeze())
}

/// `PULL_OFFSET_MOVED` to where the group's offset on the queue was reset.
#[cold]
fn reset_answer(
    state: &BrokerState,
    req: &RemotingCommand,
    header: &PullMessageRequestHeader,
    offset: i64,
) -> RemotingCommand {
    tracing::info!(
        group = %header.consumer_group, topic = %header.topic, queue_id = header.queue_id,
        asked = header.queue_offset, offset, "pull answered with the reset offset"
    );
    req.response_to(
        ResponseCode::PULL_OFFSET_MOVED,
        Some(format!("the group's offset was reset to {offset}")),
    )
    .with_header(&PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: offset,
        min_offset: state
            .store
            .min_offset_in_queue(&header.topic, header.queue_id),
        max_offset: state
            .store
            .max_offset_in_queue(&header.topic, header.queue_id),
        ..PullMessageResponseHeader::default()
    })
}

/// Tag hashes of a tag expression (`TagA || TagB`); `None` for all tags.
fn subscribed_tags(expression: Option<&str>) -> Option<Vec<i64>> {
    let expr = expression?.trim();
    if expr.is_empty() || expr == "*" {
        return None;
    }
    Some(
        expr.split("||")
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(tag_hash)
            .collect(),
    )
}

/// The machine's physical memory (`MemTotal` in `/proc/meminfo`), read once;
/// 8 GiB when it cannot be read.
fn physical_memory_bytes() -> u64 {
    static TOTAL: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOTAL.get_or_init(|| {
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|text| {
                let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
                let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
                Some(kib * 1024)
            })
            .unwrap_or(8 << 30)
    })
}
