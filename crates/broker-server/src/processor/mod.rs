//! Request processors, one file per family of request codes. Each runs on
//! its family's worker threads and returns the response (or `None` when the
//! request is oneway and needs none).

mod admin;
mod client_manage;
mod consumer_offset;
mod pull_message;
mod send_message;

use remoting_protocol::{HeaderError, RemotingCommand, RequestCode, ResponseCode};

use crate::core::{BrokerCore, Job};

/// Serves one request.
pub(crate) fn process(core: &BrokerCore, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let response = match req.request_code() {
        RequestCode::SEND_MESSAGE
        | RequestCode::SEND_MESSAGE_V2
        | RequestCode::SEND_BATCH_MESSAGE => send_message::send(core, job)?,
        RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => {
            pull_message::pull(core, job)?
        }
        RequestCode::QUERY_CONSUMER_OFFSET => consumer_offset::query(core, req),
        RequestCode::UPDATE_CONSUMER_OFFSET => consumer_offset::update(core, req),
        RequestCode::GET_MAX_OFFSET => consumer_offset::max_offset(core, req),
        RequestCode::GET_MIN_OFFSET => consumer_offset::min_offset(core, req),
        RequestCode::SEARCH_OFFSET_BY_TIMESTAMP => consumer_offset::search_by_time(core, req),
        RequestCode::GET_CONSUMER_LIST_BY_GROUP => client_manage::consumer_list(core, req),
        RequestCode::HEART_BEAT => client_manage::heartbeat(core, job),
        RequestCode::UNREGISTER_CLIENT => client_manage::unregister(core, req),
        RequestCode::UPDATE_AND_CREATE_TOPIC => admin::create_topic(core, req),
        RequestCode::GET_BROKER_CONFIG => admin::get_config(core, req),
        RequestCode::UPDATE_BROKER_CONFIG => admin::update_config(core, req),
        RequestCode::GET_BROKER_RUNTIME_INFO => admin::runtime_info(core, req),
        RequestCode::VIEW_MESSAGE_BY_ID => admin::view_message(core, req),
        other => req.response_to(
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
            Some(format!(" request type {} not supported", other.0)),
        ),
    };
    (!req.is_oneway()).then_some(response)
}

/// The response to a request whose header could not be read.
pub(crate) fn bad_header(req: &RemotingCommand, e: &HeaderError) -> RemotingCommand {
    req.response_to(
        ResponseCode::SYSTEM_ERROR,
        Some(format!("bad {} request header: {e}", code_name(req))),
    )
}

fn code_name(req: &RemotingCommand) -> String {
    req.request_code()
        .name()
        .map_or_else(|| req.code.to_string(), str::to_owned)
}
