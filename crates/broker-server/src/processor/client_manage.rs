//! `HEART_BEAT`, `UNREGISTER_CLIENT`, `GET_CONSUMER_LIST_BY_GROUP` and
//! `CHECK_CLIENT_CONFIG`.

use std::{sync::Arc, time::Instant};

use remoting_protocol::{
    body::{self, CheckClientRequestBody, HeartbeatData},
    header::{is_tag_type, NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader},
    RemotingCommand, RequestCode, ResponseCode,
};

use message_model::flags::retry_topic;

use crate::{
    clients::ClientChannel,
    processor::bad_header,
    request::{Job, Reply},
    state::BrokerState,
};

/// Records the client and its groups.
pub(crate) fn heartbeat(state: &BrokerState, job: &Job) -> Option<RemotingCommand> {
    let req = &job.request;
    let response = match body::from_json::<HeartbeatData>(&req.body) {
        Ok(mut data) => {
            data.consumer_data_set
                .retain(|consumer| prepare_group(state, &consumer.group_name));
            let conn_id = job.reply.connection_id().unwrap_or(0);
            let conn = match &job.reply {
                Reply::Remoting(conn) => Some(Arc::clone(conn)),
                Reply::Channel(_) => None,
            };
            let channel = ClientChannel {
                addr: job.reply.peer().to_string(),
                language: req.language,
                version: req.version,
            };
            let changed =
                state
                    .clients
                    .heartbeat_from(&data, conn_id, conn, channel, Instant::now());
            notify_ids_changed(state, &changed);
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(e) => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("bad heartbeat body: {e}")),
        ),
    };
    Some(response)
}

/// Makes sure a heartbeating consumer group has its settings (created when
/// `autoCreateSubscriptionGroup` allows) and its retry topic. Returns
/// false for a group that does not exist and may not be created: its
/// clients are not registered for it, as RocketMQ does.
fn prepare_group(state: &BrokerState, group: &str) -> bool {
    let auto = state.config().broker.auto_create_subscription_group;
    let config = match state.subscriptions.find_or_create(group, auto) {
        Ok(Some(config)) => config,
        Ok(None) => {
            tracing::debug!(group, "heartbeat for an unknown subscription group ignored");
            return false;
        }
        Err(e) => {
            tracing::error!(group, cause = %e, "cannot save subscription groups");
            return true;
        }
    };
    if config.retry_queue_nums > 0 {
        match state
            .topics
            .ensure_group_topic(&retry_topic(group), config.retry_queue_nums)
        {
            Ok((_, true)) => state.topics_changed.notify_one(),
            Ok((_, false)) => {}
            Err(e) => tracing::error!(group, cause = %e, "cannot create the retry topic"),
        }
    }
    true
}

/// Tells every member of each group that its membership changed
/// (`NOTIFY_CONSUMER_IDS_CHANGED`, oneway), so that they rebalance at once
/// instead of at their next periodic check; unless the broker's or the
/// group's `notifyConsumerIdsChangedEnable` is off.
pub(crate) fn notify_ids_changed(state: &BrokerState, groups: &[String]) {
    if groups.is_empty() || !state.config().broker.notify_consumer_ids_changed_enable {
        return;
    }
    for group in groups {
        let enabled = state
            .subscriptions
            .get(group)
            .is_none_or(|g| g.notify_consumer_ids_changed_enable);
        if !enabled {
            continue;
        }
        let members = state.clients.connections_of(group);
        tracing::debug!(
            group,
            members = members.len(),
            "consumer group changed; telling its members"
        );
        for conn in members {
            let mut notice = RemotingCommand::request_with_header(
                RequestCode::NOTIFY_CONSUMER_IDS_CHANGED,
                &NotifyConsumerIdsChangedRequestHeader {
                    consumer_group: group.clone(),
                },
            );
            notice.mark_oneway();
            conn.send(notice);
        }
    }
}

/// Forgets a client or some of its groups.
pub(crate) fn unregister(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<UnregisterClientRequestHeader>() {
        Ok(h) => {
            let left = state.clients.unregister(
                &h.client_id,
                h.producer_group.as_deref(),
                h.consumer_group.as_deref(),
            );
            notify_ids_changed(state, &left);
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

/// Answers whether the broker can serve a consumer's subscription: tag
/// expressions yes; any other filter type (SQL92) is refused with
/// RocketMQ's code and remark for a broker without property filtering.
pub(crate) fn check_client_config(_state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let body = match body::from_json::<CheckClientRequestBody>(&req.body) {
        Ok(b) => b,
        Err(e) => {
            return req.response_to(
                ResponseCode::SYSTEM_ERROR,
                Some(format!("bad check client config body: {e}")),
            )
        }
    };
    let expression_type = body
        .subscription_data
        .as_ref()
        .map(|s| s.expression_type.as_str());
    if is_tag_type(expression_type) {
        return req.response_to(ResponseCode::SUCCESS, None);
    }
    req.response_to(
        ResponseCode::SYSTEM_ERROR,
        Some(unsupported_filter(expression_type.unwrap_or_default())),
    )
}

/// RocketMQ's remark for a filter type a broker cannot apply.
pub(crate) fn unsupported_filter(expression_type: &str) -> String {
    format!("The broker does not support consumer to filter message by {expression_type}")
}
