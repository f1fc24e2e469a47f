//! Subscription-group administration (`UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`,
//! `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`, `DELETE_SUBSCRIPTIONGROUP`) and the
//! delay-level progress (`GET_ALL_DELAY_OFFSET`).

use remoting_protocol::{
    body::{self, SubscriptionGroupConfig},
    header::DeleteSubscriptionGroupRequestHeader,
    RemotingCommand, ResponseCode,
};

use crate::{processor::bad_header, state::BrokerState, subscriptions::PutGroupError};

/// Creates or replaces a group's settings from the JSON body.
pub(crate) fn update_and_create(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let config: SubscriptionGroupConfig = match body::from_json(&req.body) {
        Ok(c) => c,
        Err(e) => {
            return req.response_to(
                ResponseCode::SYSTEM_ERROR,
                Some(format!("bad subscription group body: {e}")),
            )
        }
    };
    match state.subscriptions.put(config) {
        Ok(()) => req.response_to(ResponseCode::SUCCESS, None),
        Err(PutGroupError::Invalid(why)) => {
            req.response_to(ResponseCode::INVALID_PARAMETER, Some(why))
        }
        Err(e @ PutGroupError::Io(_)) => {
            req.response_to(ResponseCode::SYSTEM_ERROR, Some(e.to_string()))
        }
    }
}

/// Every group's settings, in the layout of `subscriptionGroup.json`.
pub(crate) fn get_all(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_json(&state.subscriptions.wrapper()))
}

/// Removes a group's settings (and, with `cleanOffset`, its committed
/// offsets). Succeeds for an unknown group too.
pub(crate) fn delete(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: DeleteSubscriptionGroupRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    if let Err(e) = state.subscriptions.delete(&h.group_name) {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("cannot save subscription groups: {e}")),
        );
    }
    if h.clean_offset.unwrap_or(false) {
        let topics = state.offsets.remove_group(&h.group_name);
        tracing::info!(group = %h.group_name, topics, "consumer offsets of a deleted group removed");
    }
    req.response_to(ResponseCode::SUCCESS, None)
}

/// How far the timer wheel delivered (`GET_TIMER_CHECK_POINT`), in
/// RocketMQ's checkpoint layout.
pub(crate) fn timer_checkpoint(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(state.timers.checkpoint().encode())
}

/// How far each delay level was delivered, as `delayOffset.json` holds it.
pub(crate) fn delay_offsets(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(state.schedule.to_json().into_bytes())
}
