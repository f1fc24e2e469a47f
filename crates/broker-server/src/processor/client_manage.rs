//! `HEART_BEAT`, `UNREGISTER_CLIENT` and `GET_CONSUMER_LIST_BY_GROUP`.

use std::time::Instant;

use remoting_protocol::{
    body::{self, HeartbeatData},
    header::UnregisterClientRequestHeader,
    RemotingCommand, ResponseCode,
};

use crate::{processor::bad_header, request::Job, state::BrokerState};

/// Records the client and its groups.
pub(crate) fn heartbeat(state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let response = match body::from_json::<HeartbeatData>(&req.body) {
        Ok(data) => {
            let conn_id = job.reply.connection_id().unwrap_or(0);
            state.clients.heartbeat(&data, conn_id, Instant::now());
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(e) => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("bad heartbeat body: {e}")),
        ),
    };
    Some(response)
}

/// Forgets a client or some of its groups.
pub(crate) fn unregister(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<UnregisterClientRequestHeader>() {
        Ok(h) => {
            state.clients.unregister(
                &h.client_id,
                h.producer_group.as_deref(),
                h.consumer_group.as_deref(),
            );
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(e) => bad_header(req, &e),
    }
}

/// The ids of a consumer group's clients.
pub(crate) fn consumer_list(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext("consumerGroup") else {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("required header field `consumerGroup` is missing".into()),
        );
    };
    let ids = state.clients.consumers_of(group);
    if ids.is_empty() {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("no consumer for this group, {group}")),
        );
    }
    let body = serde_json::json!({ "consumerIdList": ids }).to_string();
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body.into_bytes())
}
