//! `QUERY_MESSAGE` (12): the messages of a topic indexed under a key (one
//! of their `KEYS`, or their `UNIQ_KEY` when the request says it is a
//! query by unique key), stored within a time range.

use bytes::{Bytes, BytesMut};
use remoting_protocol::{
    header::{QueryMessageRequestHeader, QueryMessageResponseHeader, UNIQUE_KEY_QUERY},
    RemotingCommand, ResponseCode,
};

use super::bad_header;
use crate::state::BrokerState;

/// The remark of a query that found nothing.
const NOT_FOUND: &str = "can not find message, maybe time range not correct";

/// Answers the stored records back to back, oldest first, with how far the
/// index goes; `QUERY_NOT_FOUND` when none matched.
pub(crate) fn query(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: QueryMessageRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let max_num = if req.ext(UNIQUE_KEY_QUERY) == Some("true") {
        state.store.config().default_query_max_num
    } else {
        usize::try_from(h.max_num).unwrap_or(0)
    };
    let found = state.store.query_message(
        &h.topic,
        &h.key,
        max_num,
        h.begin_timestamp,
        h.end_timestamp,
    );
    let header = QueryMessageResponseHeader {
        index_last_update_timestamp: found.index_last_update_timestamp,
        index_last_update_phyoffset: found.index_last_update_phyoffset,
    };
    if found.messages.is_empty() {
        return req
            .response_to(ResponseCode::QUERY_NOT_FOUND, Some(NOT_FOUND.into()))
            .with_header(&header);
    }
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&header)
        .with_body(back_to_back(found.messages))
}

/// The records as one body; a single record is passed on without a copy.
fn back_to_back(mut records: Vec<Bytes>) -> Bytes {
    if records.len() == 1 {
        return records.pop().unwrap_or_default();
    }
    let mut body = BytesMut::with_capacity(records.iter().map(Bytes::len).sum());
    for r in &records {
        body.extend_from_slice(r);
    }
    body.freeze()
}
