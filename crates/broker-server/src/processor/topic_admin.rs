//! What operators' tools ask about topics, groups and clients:
//! `GET_ALL_TOPIC_CONFIG`, `GET_TOPIC_CONFIG`, `GET_TOPIC_STATS_INFO`,
//! `GET_CONSUME_STATS`, `QUERY_TOPIC_CONSUME_BY_WHO`,
//! `GET_CONSUMER_CONNECTION_LIST`, `GET_PRODUCER_CONNECTION_LIST`,
//! `GET_ALL_CONSUMER_OFFSET`, `GET_EARLIEST_MSG_STORETIME` and
//! `GET_ALL_PRODUCER_INFO`, answered with RocketMQ's bodies, codes and
//! remarks; `DELETE_TOPIC_IN_BROKER`; and `INVOKE_BROKER_TO_RESET_OFFSET`
//! as RocketMQ 5's brokers serve it by default (`useServerSideResetOffset`):
//! the broker moves the group's offsets itself and the group's consumers
//! learn of it on their next pull of each queue.
//!
//! `topicPutTps` is the topic's `TOPIC_PUT_NUMS` rate over the last minute
//! and `consumeTps` the sum of the group's `GROUP_GET_NUMS` rates over the
//! topics answered ([`crate::stats`]); `pullOffset` is the next offset of
//! the group's last read of the queue since the broker started, never below
//! the committed offset.

use std::collections::{BTreeMap, BTreeSet};

use remoting_protocol::{
    body::{
        self, ClientConnection, ConsumeStats, ConsumerConnection, DataVersion, GroupList,
        MessageQueueBody, OffsetWrapper, ProducerConnection, ProducerInfo, ProducerTableInfo,
        ResetOffsetBody, TopicOffset, TopicStatsTable,
    },
    header::{
        DeleteTopicRequestHeader, GetConsumeStatsRequestHeader,
        GetConsumerConnectionListRequestHeader, GetEarliestMsgStoretimeRequestHeader,
        GetEarliestMsgStoretimeResponseHeader, GetProducerConnectionListRequestHeader,
        GetTopicConfigRequestHeader, GetTopicStatsInfoRequestHeader,
        QueryTopicConsumeByWhoRequestHeader, ResetOffsetRequestHeader,
    },
    RemotingCommand, ResponseCode,
};

use crate::{
    clients::ClientChannel, processor::bad_header, state::BrokerState, stats,
    topics::is_rocketmq_system_topic,
};

/// The whole topic table with its version; paging fields of newer admin
/// tools are ignored (and no `totalTopicNum` is answered, which makes them
/// stop after this one page).
pub(crate) fn all_topic_config(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let mut wrapper = state.topics.wrapper();
    // No static topics: an empty mapping table of the broker's start.
    wrapper.mapping_data_version = Some(DataVersion {
        timestamp: state.boot_timestamp,
        ..DataVersion::default()
    });
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_fastjson(&wrapper))
}

/// One topic's configuration.
pub(crate) fn topic_config(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetTopicConfigRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    match state.topics.get(&h.topic) {
        Some(config) => req
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(body::to_fastjson(&config)),
        None => req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!("No topic in this broker. topic: {}", h.topic)),
        ),
    }
}

/// Min and max offset and last store time of each of a topic's queues.
pub(crate) fn topic_stats(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetTopicStatsInfoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let Some(config) = state.topics.get(&h.topic) else {
        return req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!("topic[{}] not exist", h.topic)),
        );
    };
    let broker_name = state.config().broker.broker_name.clone();
    let queues = config.read_queue_nums.max(config.write_queue_nums);
    let offset_table = (0..queues)
        .map(|queue_id| {
            let min_offset = state.store.min_offset_in_queue(&h.topic, queue_id).max(0);
            let max_offset = state.store.max_offset_in_queue(&h.topic, queue_id).max(0);
            let last_update_timestamp = if max_offset > 0 {
                store_time(state, &h.topic, queue_id, max_offset - 1).unwrap_or(-1)
            } else {
                0
            };
            (
                queue(&h.topic, &broker_name, queue_id),
                TopicOffset {
                    last_update_timestamp,
                    max_offset,
                    min_offset,
                },
            )
        })
        .collect();
    let stats = TopicStatsTable {
        offset_table,
        topic_put_tps: state.stats.topic_put_tps(&h.topic, message_model::now_ms()),
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(stats.encode())
}

/// A group's progress on each read queue of the topics asked for: those of
/// `topicList`, else `topic`, else every topic the group has offsets on;
/// without `topicList`, topics an online group does not subscribe to are
/// left out (when it subscribes to any).
pub(crate) fn consume_stats(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumeStatsRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let group = &h.consumer_group;
    let listed = h.fetch_topic_list();
    let topics: BTreeSet<String> = if listed.is_empty() {
        let mut topics = match h.topic.as_deref() {
            Some(topic) if !topic.trim().is_empty() => BTreeSet::from([topic.to_owned()]),
            _ => state.offsets.topics_of(group),
        };
        if let Some(view) = state.clients.consumer_group(group) {
            if !view.subscriptions.is_empty() {
                topics.retain(|t| view.subscriptions.contains_key(t));
            }
        }
        topics
    } else {
        listed.into_iter().collect()
    };
    let broker_name = state.config().broker.broker_name.clone();
    let mut offset_table = BTreeMap::new();
    let now_ms = message_model::now_ms();
    let mut consume_tps = 0.0;
    for topic in &topics {
        let Some(config) = state.topics.get(topic) else {
            tracing::debug!(%topic, %group, "consume stats: no such topic");
            continue;
        };
        for queue_id in 0..config.read_queue_nums {
            let broker_offset = state.store.max_offset_in_queue(topic, queue_id).max(0);
            let consumer_offset = state
                .offsets
                .peek(group, topic, queue_id)
                .unwrap_or(-1)
                .max(0);
            let last_timestamp = if consumer_offset > 0 {
                store_time(state, topic, queue_id, consumer_offset - 1)
                    .filter(|t| *t > 0)
                    .unwrap_or(0)
            } else {
                0
            };
            let pull_offset = state
                .stats
                .pulled(group, topic, queue_id)
                .map_or(consumer_offset, |p| p.max(consumer_offset));
            offset_table.insert(
                queue(topic, &broker_name, queue_id),
                OffsetWrapper {
                    broker_offset,
                    consumer_offset,
                    last_timestamp,
                    pull_offset,
                },
            );
        }
        consume_tps += state.stats.group_get_tps(group, topic, now_ms);
    }
    let stats = ConsumeStats {
        consume_tps,
        offset_table,
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(stats.encode())
}

/// The groups consuming a topic: online consumers subscribed to it, and
/// groups with offsets on it.
pub(crate) fn consumed_by_who(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: QueryTopicConsumeByWhoRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let mut group_list = state.clients.groups_consuming(&h.topic);
    group_list.extend(state.offsets.groups_of(&h.topic));
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_fastjson(&GroupList { group_list }))
}

/// An online consumer group's clients and what they declared.
pub(crate) fn consumer_connections(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetConsumerConnectionListRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let Some(view) = state.clients.consumer_group(&h.consumer_group) else {
        return req.response_to(
            ResponseCode::CONSUMER_NOT_ONLINE,
            Some(format!(
                "the consumer group[{}] not online",
                h.consumer_group
            )),
        );
    };
    let subscription_table = view
        .subscriptions
        .into_iter()
        .map(|(topic, mut s)| {
            // Absent in the heartbeat, RocketMQ's default.
            if s.expression_type.is_empty() {
                s.expression_type = "TAG".into();
            }
            (topic, s)
        })
        .collect();
    let answer = ConsumerConnection {
        connection_set: connections(view.members),
        consume_from_where: view.declared.consume_from_where,
        consume_type: view.declared.consume_type,
        message_model: view.declared.message_model,
        subscription_table,
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_fastjson(&answer))
}

/// An online producer group's clients.
pub(crate) fn producer_connections(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetProducerConnectionListRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let members = state.clients.producer_group(&h.producer_group);
    if members.is_empty() {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "the producer group[{}] not exist",
                h.producer_group
            )),
        );
    }
    let answer = ProducerConnection {
        connection_set: connections(members),
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(body::to_fastjson(&answer))
}

/// Every committed offset, as `consumerOffset.json` holds them.
pub(crate) fn all_consumer_offsets(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let content = state.offsets.encode();
    if content.is_empty() {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("No consumer offset in this broker".into()),
        );
    }
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(content.into_bytes())
}

/// Store time of a queue's first message; -1 when it has none.
pub(crate) fn earliest_store_time(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: GetEarliestMsgStoretimeRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let first = state.store.min_offset_in_queue(&h.topic, h.queue_id);
    let timestamp = store_time(state, &h.topic, h.queue_id, first).unwrap_or(-1);
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&GetEarliestMsgStoretimeResponseHeader { timestamp })
}

/// Deletes a topic from this broker: its configuration (the next
/// registration leaves it out), every group's offsets and POP state on it,
/// and its consume queues; the CommitLog keeps its records until retention
/// deletes them. The POP retry topics of the groups that consumed it
/// (`%RETRY%<group>+<topic>` and `%RETRY%<group>_<topic>`) go with it, as
/// under RocketMQ's default `clearRetryTopicWhenDeleteTopic`. System topics
/// are refused, as under its default `validateSystemTopicWhenUpdateTopic`.
pub(crate) fn delete_topic(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: DeleteTopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    let topic = h.topic;
    tracing::info!(%topic, "delete topic requested");
    if topic.trim().is_empty() {
        return req.response_to(
            ResponseCode::INVALID_PARAMETER,
            Some("The specified topic is blank.".into()),
        );
    }
    if is_rocketmq_system_topic(&topic) {
        return req.response_to(
            ResponseCode::INVALID_PARAMETER,
            Some(format!("The topic[{topic}] is conflict with system topic.")),
        );
    }
    let mut groups = state.offsets.groups_of(&topic);
    groups.extend(state.pop.groups_of(&topic));
    let mut to_clean = vec![topic.clone()];
    for group in &groups {
        for retry in [
            format!("%RETRY%{group}+{topic}"),
            format!("%RETRY%{group}_{topic}"),
        ] {
            if state.topics.get(&retry).is_some() && !to_clean.contains(&retry) {
                to_clean.push(retry);
            }
        }
    }
    for topic in &to_clean {
        if let Err(e) = delete_in_broker(state, topic) {
            return req.response_to(ResponseCode::SYSTEM_ERROR, Some(e));
        }
    }
    state.topics_changed.notify_one();
    req.response_to(ResponseCode::SUCCESS, None)
}

/// Removes one topic's configuration, offsets, POP state and queues.
fn delete_in_broker(state: &BrokerState, topic: &str) -> Result<(), String> {
    let existed = state.topics.delete(topic).map_err(|e| {
        format!("topic[{topic}] deleted, but the topic table cannot be written: {e}")
    })?;
    let offsets = state.offsets.remove_topic(topic);
    if offsets > 0 {
        if let Err(e) = state.offsets.persist() {
            tracing::warn!(%topic, cause = %e, "consumer offsets not persisted after topic deletion");
        }
    }
    let pop_groups = state.pop.remove_topic(topic);
    state.stats.remove_topic(topic);
    let queues = state
        .store
        .delete_topic(topic)
        .map_err(|e| format!("topic[{topic}]: its consume queues cannot be deleted: {e}"))?;
    tracing::info!(
        %topic,
        existed,
        offset_groups = offsets,
        pop_groups = pop_groups.len(),
        queues,
        "topic deleted from the broker"
    );
    Ok(())
}

/// Resets a group's offsets on a topic, as RocketMQ 5 does on the broker's
/// side: on one queue to an explicit offset (within `[min, max + 1]`, as
/// RocketMQ checks it) or, without one, to the first message stored at or
/// after `timestamp` (the end of the queue when it is below 0); on every
/// read queue by time. Each new offset is committed and kept until the
/// group's next pull of the queue, which is answered `PULL_OFFSET_MOVED`
/// with it; commits of the queue are ignored until then. `isForce` is
/// ignored. A queue id beyond the read queues is refused. The group must exist (RocketMQ's check, made without creating
/// it even under `autoCreateSubscriptionGroup`, so that a misspelt name is
/// refused rather than given offsets).
pub(crate) fn reset_offset(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: ResetOffsetRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    tracing::info!(
        topic = %h.topic, group = %h.group, timestamp = h.timestamp,
        queue_id = ?h.queue_id, offset = ?h.offset, force = h.is_force,
        "reset offset requested"
    );
    let Some(config) = state.topics.get(&h.topic) else {
        return req.response_to(
            ResponseCode::TOPIC_NOT_EXIST,
            Some(format!("Topic {} does not exist", h.topic)),
        );
    };
    if state.subscriptions.get(&h.group).is_none() {
        return req.response_to(
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            Some(format!("Group {} does not exist", h.group)),
        );
    }
    if let Some(queue_id) = h.single_queue().filter(|q| *q >= config.read_queue_nums) {
        // RocketMQ would record a reset no pull can ever take.
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "queueId[{queue_id}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
                h.topic, config.read_queue_nums
            )),
        );
    }
    let by_time = |queue_id: i32| {
        if h.timestamp < 0 {
            state.store.max_offset_in_queue(&h.topic, queue_id)
        } else {
            state.store.offset_by_time(&h.topic, queue_id, h.timestamp)
        }
    };
    let targets: BTreeMap<i32, i64> = match (h.single_queue(), h.explicit_offset()) {
        (Some(queue_id), Some(offset)) => {
            let min = state.store.min_offset_in_queue(&h.topic, queue_id);
            let max = state.store.max_offset_in_queue(&h.topic, queue_id);
            if (min >= 0 && offset < min) || offset > max + 1 {
                return req.response_to(
                    ResponseCode::SYSTEM_ERROR,
                    Some(format!(
                        "Target offset {offset} not in consume queue range [{min}-{max}]"
                    )),
                );
            }
            BTreeMap::from([(queue_id, offset)])
        }
        (Some(queue_id), None) => BTreeMap::from([(queue_id, by_time(queue_id))]),
        (None, _) => (0..config.read_queue_nums)
            .map(|queue_id| (queue_id, by_time(queue_id)))
            .collect(),
    };
    if targets.is_empty() {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("No queues to reset.".into()),
        );
    }
    let broker_name = state.config().broker.broker_name.clone();
    let mut offset_table = BTreeMap::new();
    for (queue_id, offset) in targets {
        // A negative offset (an empty queue's answer in some stores) is
        // not assigned, as RocketMQ skips it too.
        if offset >= 0 {
            state
                .offsets
                .assign_reset(&h.group, &h.topic, queue_id, offset);
        }
        offset_table.insert(queue(&h.topic, &broker_name, queue_id), offset);
    }
    tracing::info!(
        topic = %h.topic, group = %h.group, queues = offset_table.len(),
        "offsets reset"
    );
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(ResetOffsetBody { offset_table }.encode())
}

/// Every producer group's clients, from their heartbeats.
pub(crate) fn all_producer_info(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let now = std::time::Instant::now();
    let now_ms = message_model::now_ms();
    let data = state
        .clients
        .producers()
        .into_iter()
        .map(|(group, members)| {
            let infos = members
                .into_iter()
                .map(|(client_id, channel, last_seen)| ProducerInfo {
                    client_id,
                    // As Java writes the socket address.
                    remote_ip: format!("/{}", channel.addr),
                    language: language_name(channel.language),
                    version: channel.version,
                    last_update_timestamp: now_ms
                        - i64::try_from(now.saturating_duration_since(last_seen).as_millis())
                            .unwrap_or(i64::MAX),
                })
                .collect();
            (group, infos)
        })
        .collect();
    req.response_to(ResponseCode::SUCCESS, None)
        .with_body(ProducerTableInfo { data }.encode())
}

/// Store time of the message at a queue offset, if it is still stored.
fn store_time(state: &BrokerState, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
    stats::store_time(&state.store, topic, queue_id, offset)
}

fn queue(topic: &str, broker_name: &str, queue_id: i32) -> MessageQueueBody {
    MessageQueueBody {
        topic: topic.to_owned(),
        broker_name: broker_name.to_owned(),
        queue_id,
    }
}

fn connections(members: Vec<(String, ClientChannel)>) -> Vec<ClientConnection> {
    members
        .into_iter()
        .map(|(client_id, channel)| ClientConnection {
            client_addr: channel.addr,
            client_id,
            language: language_name(channel.language),
            version: channel.version,
        })
        .collect()
}

/// A client's `LanguageCode` name; `""` when unknown.
fn language_name(language: remoting_protocol::LanguageCode) -> String {
    match language {
        remoting_protocol::LanguageCode::Unknown(_) => String::new(),
        known => known.name().to_owned(),
    }
}
