//! Consumer offsets and queue offsets: `QUERY_CONSUMER_OFFSET`,
//! `UPDATE_CONSUMER_OFFSET`, `GET_MAX_OFFSET`, `GET_MIN_OFFSET`,
//! `SEARCH_OFFSET_BY_TIMESTAMP`.

use remoting_protocol::{
    header::{
        BoundaryType, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
        QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, ResponseCode,
};

use crate::{processor::bad_header, state::BrokerState};

fn offset_response(req: &RemotingCommand, offset: i64) -> RemotingCommand {
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&OffsetResponseHeader { offset })
}

/// The committed offset, RocketMQ's way: stored, else 0 when asked and the
/// queue still starts at 0, else QUERY_NOT_FOUND.
pub(crate) fn query(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: QueryConsumerOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    if let Some(offset) = state.offsets.query(&h.consumer_group, &h.topic, h.queue_id) {
        return offset_response(req, offset);
    }
    if h.set_zero_if_not_found != Some(false)
        && state.store.min_offset_in_queue(&h.topic, h.queue_id) <= 0
    {
        return offset_response(req, 0);
    }
    req.response_to(
        ResponseCode::QUERY_NOT_FOUND,
        Some("Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first".into()),
    )
}

/// Stores a committed offset; while an operator's reset of the queue waits
/// for the group's next pull, the commit is ignored (answered SUCCESS with
/// RocketMQ's remark), so a consumer still on the old position cannot undo
/// the reset.
pub(crate) fn update(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: UpdateConsumerOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    if state.topics.get(&h.topic).is_none() {
        return req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!("Topic {} not exist!", h.topic)),
        );
    }
    if state
        .offsets
        .has_reset(&h.consumer_group, &h.topic, h.queue_id)
    {
        tracing::info!(
            group = %h.consumer_group, topic = %h.topic, queue_id = h.queue_id,
            offset = h.commit_offset, "commit ignored: the offset was reset"
        );
        return req.response_to(
            ResponseCode::SUCCESS,
            Some("Offset has been previously reset".into()),
        );
    }
    state
        .offsets
        .commit(&h.consumer_group, &h.topic, h.queue_id, h.commit_offset);
    req.response_to(ResponseCode::SUCCESS, None)
}

/// The queue's end offset.
pub(crate) fn max_offset(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<GetMaxOffsetRequestHeader>() {
        Ok(h) => offset_response(req, state.store.max_offset_in_queue(&h.topic, h.queue_id)),
        Err(e) => bad_header(req, &e),
    }
}

/// The queue's first offset.
pub(crate) fn min_offset(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<GetMinOffsetRequestHeader>() {
        Ok(h) => offset_response(req, state.store.min_offset_in_queue(&h.topic, h.queue_id)),
        Err(e) => bad_header(req, &e),
    }
}

/// The first offset stored at or after the timestamp (the last one at or
/// before it with the upper boundary).
pub(crate) fn search_by_time(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: SearchOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let offset = match h.boundary_type {
        Some(BoundaryType::Upper) => {
            let after =
                state
                    .store
                    .offset_by_time(&h.topic, h.queue_id, h.timestamp.saturating_add(1));
            (after - 1).max(state.store.min_offset_in_queue(&h.topic, h.queue_id))
        }
        _ => state
            .store
            .offset_by_time(&h.topic, h.queue_id, h.timestamp),
    };
    offset_response(req, offset)
}
