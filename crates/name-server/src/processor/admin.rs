//! `GET_ALL_TOPIC_LIST_FROM_NAMESERVER` (206), `GET_TOPICS_BY_CLUSTER` (224),
//! `DELETE_TOPIC_IN_NAMESRV` (216), `WIPE_WRITE_PERM_OF_BROKER` (205) and
//! `ADD_WRITE_PERM_OF_BROKER` (327).
//!
//! RocketMQ can turn the two topic lists off (`enableAllTopicList`,
//! `enableTopicList`, both on by default); here they are always on.

use remoting_protocol::{
    body::{to_fastjson, TopicList},
    header::{
        AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
        DeleteTopicFromNamesrvRequestHeader, GetTopicsByClusterRequestHeader,
        WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
    },
    RemotingCommand, ResponseCode,
};

use super::bad_header;
use crate::registry::RouteRegistry;

fn topic_list(req: &RemotingCommand, names: Vec<String>) -> RemotingCommand {
    let list = TopicList {
        broker_addr: None,
        topic_list: names.into_iter().collect(),
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(to_fastjson(&list))
}

/// Answers with every known topic.
pub(super) fn all_topics(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    topic_list(req, registry.topic_names())
}

/// Answers with the topics served by the brokers of the asked cluster; an
/// unknown cluster gets an empty list.
pub(super) fn cluster_topics(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<GetTopicsByClusterRequestHeader>() {
        Ok(header) => topic_list(req, registry.cluster_topic_names(&header.cluster)),
        Err(err) => bad_header(req, "GET_TOPICS_BY_CLUSTER", &err),
    }
}

/// Forgets the topic, in one cluster when `clusterName` is given and not
/// empty; always answers success, as RocketMQ does.
pub(super) fn delete_topic(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<DeleteTopicFromNamesrvRequestHeader>() {
        Ok(header) => {
            let cluster = header.cluster_name.as_deref().filter(|c| !c.is_empty());
            registry.delete_topic(&header.topic, cluster);
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(err) => bad_header(req, "DELETE_TOPIC_IN_NAMESRV", &err),
    }
}

/// Clears the broker's write permission in every route; answers how many
/// topics it touched.
pub(super) fn wipe_write_perm(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<WipeWritePermOfBrokerRequestHeader>() {
        Ok(header) => {
            let response_header = WipeWritePermOfBrokerResponseHeader {
                wipe_topic_count: registry.wipe_write_perm(&header.broker_name),
            };
            req.response_to(ResponseCode::SUCCESS, None)
                .with_header(&response_header)
        }
        Err(err) => bad_header(req, "WIPE_WRITE_PERM_OF_BROKER", &err),
    }
}

/// Gives the broker read and write permission in every route; answers how
/// many topics it touched.
pub(super) fn add_write_perm(registry: &RouteRegistry, req: &RemotingCommand) -> RemotingCommand {
    match req.decode_header::<AddWritePermOfBrokerRequestHeader>() {
        Ok(header) => {
            let response_header = AddWritePermOfBrokerResponseHeader {
                add_topic_count: registry.add_write_perm(&header.broker_name),
            };
            req.response_to(ResponseCode::SUCCESS, None)
                .with_header(&response_header)
        }
        Err(err) => bad_header(req, "ADD_WRITE_PERM_OF_BROKER", &err),
    }
}
