//! `GET_ROUTEINFO_BY_TOPIC` (105) and `GET_BROKER_CLUSTER_INFO` (106).

use remoting_protocol::{
    body::to_json, header::GetRouteInfoRequestHeader, RemotingCommand, ResponseCode,
};

use super::{bad_header, STANDARD_JSON_SINCE_VERSION};
use crate::{legacy_json::to_legacy_json, registry::RouteRegistry};

/// Answers with the topic's route, as standard JSON for clients from 4.9.4
/// on or that ask for it, else as fastjson's legacy output.
pub(super) fn route_by_topic(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    let header: GetRouteInfoRequestHeader = match req.decode_header() {
        Ok(header) => header,
        Err(err) => return bad_header(req, "GET_ROUTEINFO_BY_TOPIC", &err),
    };
    let Some(route) = registry.route(&header.topic) else {
        return req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!(
                "No topic route info in name server for the topic: {}",
                header.topic
            )),
        );
    };
    let standard = req.version >= STANDARD_JSON_SINCE_VERSION
        || header.accept_standard_json_only == Some(true);
    let body = if standard {
        to_json(&route)
    } else {
        to_legacy_json(&route)
    };
    req.response_to(ResponseCode::SUCCESS, None).with_body(body)
}

/// Answers with every cluster and broker. Always fastjson's legacy output,
/// with unquoted broker ids, whatever the client's version: RocketMQ encodes
/// cluster info without options, and its clients expect that.
pub(super) fn cluster_info(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(to_legacy_json(&registry.cluster_info()))
}
