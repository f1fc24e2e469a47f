//! `HEART_BEAT`, `UNREGISTER_CLIENT` and `GET_CONSUMER_LIST_BY_GROUP`.

use std::time::Instant;

use remoting_protocol::{
    body::{self, HeartbeatData},
    header::UnregisterClientRequestHeader,
    RemotingCommand, ResponseCode,
};

use crate::{
    core::{BrokerCore, Job},
    processor::bad_header,
};

/// Records the client and its groups.
pub(crate) fn heartbeat(core: &BrokerCore, job: &Job) -> RemotingCommand {
    let req = &job.request;
    match body::from_json::<HeartbeatData>(&req.body) {
        Ok(data) => {
            let conn_id = job.reply.connection_id().unwrap_or(0);
            core.clients.heartbeat(&data, conn_id, Instant::now());
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(e) => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("bad heartbeat body: {e}")),
        ),
    }
}

/// Forgets a client or some of its groups.
pub(crate) fn unregister(core: &BrokerCore, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<UnregisterClientRequestHeader>() {
        Ok(h) => {
            core.clients.unregister(
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
pub(crate) fn consumer_list(core: &BrokerCore, req: &RemotingCommand) -> RemotingCommand {
    let Some(group) = req.ext("consumerGroup") else {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("required header field `consumerGroup` is missing".into()),
        );
    };
    let ids = core.clients.consumers_of(group);
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
