//! `group list`, `group create`, `group delete` and `group lag`: the
//! requests, the merge over brokers and the reports.

use std::collections::BTreeMap;

use remoting_protocol::{
    body::{self, ConsumeStats, SubscriptionGroupConfig, SubscriptionGroupWrapper},
    header::{DeleteSubscriptionGroupRequestHeader, GetConsumeStatsRequestHeader},
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use super::{brokers_of_routes, ChangeReport, RETRY_GROUP_TOPIC_PREFIX};
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{time_text, Align, Report, Table},
};

/// `group list`: subscription groups of the brokers asked, merged by name.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupListReport {
    /// The groups, by name.
    pub groups: Vec<GroupSummary>,
}

/// One subscription group's settings (from the first broker that has it).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupSummary {
    /// The group.
    pub group: String,
    /// Addresses of the brokers that have it.
    pub brokers: Vec<String>,
    /// Whether it may consume.
    pub consume_enable: bool,
    /// Whether it may consume in broadcast mode.
    pub consume_broadcast_enable: bool,
    /// Whether it consumes in order.
    pub consume_message_orderly: bool,
    /// Queues of its retry topic.
    pub retry_queue_nums: i32,
    /// Redeliveries before a message goes to the dead-letter topic.
    pub retry_max_times: i32,
}

impl Report for GroupListReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Group", Align::Left),
            ("Consume", Align::Left),
            ("Broadcast", Align::Left),
            ("Orderly", Align::Left),
            ("RetryQueues", Align::Right),
            ("RetryMax", Align::Right),
            ("Brokers", Align::Left),
        ]);
        for g in &self.groups {
            t.row(vec![
                g.group.clone(),
                g.consume_enable.to_string(),
                g.consume_broadcast_enable.to_string(),
                g.consume_message_orderly.to_string(),
                g.retry_queue_nums.to_string(),
                g.retry_max_times.to_string(),
                g.brokers.join(","),
            ]);
        }
        t.to_string()
    }
}

/// Merges the group tables of several brokers (address, table) by group.
pub fn merge_groups(tables: &[(String, SubscriptionGroupWrapper)]) -> GroupListReport {
    let mut merged: BTreeMap<String, GroupSummary> = BTreeMap::new();
    for (addr, wrapper) in tables {
        for (name, c) in &wrapper.subscription_group_table {
            merged
                .entry(name.clone())
                .or_insert_with(|| GroupSummary {
                    group: name.clone(),
                    consume_enable: c.consume_enable,
                    consume_broadcast_enable: c.consume_broadcast_enable,
                    consume_message_orderly: c.consume_message_orderly,
                    retry_queue_nums: c.retry_queue_nums,
                    retry_max_times: c.retry_max_times,
                    ..GroupSummary::default()
                })
                .brokers
                .push(addr.clone());
        }
    }
    GroupListReport {
        groups: merged.into_values().collect(),
    }
}

/// Subscription groups of `broker`, or of every master broker
/// (`GET_ALL_SUBSCRIPTIONGROUP_CONFIG`).
///
/// # Errors
/// The first broker that fails.
pub async fn group_list(
    admin: &Admin,
    broker: Option<&str>,
) -> Result<GroupListReport, AdminError> {
    let mut tables = Vec::new();
    for addr in admin.targets(broker).await? {
        let request = RemotingCommand::request(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
        let wrapper: SubscriptionGroupWrapper = admin.broker_json(&addr, request).await?;
        tables.push((addr, wrapper));
    }
    Ok(merge_groups(&tables))
}

/// Creates or updates subscription group `group` with default settings on
/// `broker` or every master broker (`UPDATE_AND_CREATE_SUBSCRIPTIONGROUP`).
///
/// # Errors
/// The first broker that fails.
pub async fn group_create(
    admin: &Admin,
    group: &str,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    let config = body::to_json(&SubscriptionGroupConfig::named(group));
    for addr in &brokers {
        let request = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
            .with_body(config.clone());
        admin.call(Peer::Broker, addr, request).await?;
    }
    Ok(ChangeReport {
        action: format!("created group {group}"),
        brokers,
    })
}

/// Deletes subscription group `group` (and with `clean_offset` its
/// committed offsets) on `broker` or every master broker
/// (`DELETE_SUBSCRIPTIONGROUP`).
///
/// # Errors
/// The first broker that fails.
pub async fn group_delete(
    admin: &Admin,
    group: &str,
    clean_offset: bool,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::DELETE_SUBSCRIPTIONGROUP,
            &DeleteSubscriptionGroupRequestHeader {
                group_name: group.to_owned(),
                clean_offset: Some(clean_offset),
            },
        );
        admin.call(Peer::Broker, addr, request).await?;
    }
    Ok(ChangeReport {
        action: format!("deleted group {group}"),
        brokers,
    })
}

/// `group lag`: a group's progress on every queue it has offsets for.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LagReport {
    /// The group.
    pub group: String,
    /// The topic asked for, if one was.
    pub topic: Option<String>,
    /// The queues, by topic, broker name and queue id.
    pub queues: Vec<QueueLag>,
    /// Sum of the brokers' offsets.
    pub total_broker_offset: i64,
    /// Sum of the group's committed offsets.
    pub total_consumer_offset: i64,
    /// Sum of the lags.
    pub total_lag: i64,
    /// Messages fetched per second by the group, summed over the brokers.
    pub consume_tps: f64,
}

/// One queue's progress.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueLag {
    /// The topic.
    pub topic: String,
    /// The broker's name.
    pub broker_name: String,
    /// The address asked.
    pub broker_addr: String,
    /// The queue id.
    pub queue_id: i32,
    /// The queue's next offset.
    pub broker_offset: i64,
    /// The group's committed offset (0 when none).
    pub consumer_offset: i64,
    /// `broker_offset − consumer_offset`.
    pub lag: i64,
    /// Store time of the last message consumed, ms since the epoch; 0 when
    /// unknown.
    pub last_timestamp: i64,
}

impl Report for LagReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Topic", Align::Left),
            ("Broker", Align::Left),
            ("Queue", Align::Right),
            ("BrokerOffset", Align::Right),
            ("ConsumerOffset", Align::Right),
            ("Lag", Align::Right),
            ("LastConsumed(UTC)", Align::Left),
        ]);
        for q in &self.queues {
            t.row(vec![
                q.topic.clone(),
                q.broker_name.clone(),
                q.queue_id.to_string(),
                q.broker_offset.to_string(),
                q.consumer_offset.to_string(),
                q.lag.to_string(),
                time_text(q.last_timestamp),
            ]);
        }
        t.row(vec![
            "Total".into(),
            String::new(),
            String::new(),
            self.total_broker_offset.to_string(),
            self.total_consumer_offset.to_string(),
            self.total_lag.to_string(),
        ]);
        format!(
            "{t}group {}: {} queues, lag {}, consume TPS {:.2}\n",
            self.group,
            self.queues.len(),
            self.total_lag,
            self.consume_tps
        )
    }
}

/// The progress tables of several brokers (address, stats), merged.
pub fn merge_consume_stats(
    group: &str,
    topic: Option<&str>,
    stats: &[(String, ConsumeStats)],
) -> LagReport {
    let mut queues: Vec<QueueLag> = stats
        .iter()
        .flat_map(|(addr, s)| {
            s.offset_table.iter().map(move |(q, o)| QueueLag {
                topic: q.topic.clone(),
                broker_name: q.broker_name.clone(),
                broker_addr: addr.clone(),
                queue_id: q.queue_id,
                broker_offset: o.broker_offset,
                consumer_offset: o.consumer_offset,
                lag: o.broker_offset - o.consumer_offset,
                last_timestamp: o.last_timestamp,
            })
        })
        .filter(|q| topic.is_none_or(|t| t == q.topic))
        .collect();
    queues.sort_by(|a, b| {
        (&a.topic, &a.broker_name, a.queue_id).cmp(&(&b.topic, &b.broker_name, b.queue_id))
    });
    LagReport {
        group: group.to_owned(),
        topic: topic.map(str::to_owned),
        total_broker_offset: queues.iter().map(|q| q.broker_offset).sum(),
        total_consumer_offset: queues.iter().map(|q| q.consumer_offset).sum(),
        total_lag: queues.iter().map(|q| q.lag).sum(),
        consume_tps: stats.iter().map(|(_, s)| s.consume_tps).sum(),
        queues,
    }
}

/// The progress of `group` (on `topic` only, if given) on `broker`, or on the
/// brokers of the routes of `%RETRY%group` and of the topic, or on every
/// master broker when neither has a route (`GET_CONSUME_STATS`).
///
/// # Errors
/// The first broker that fails.
pub async fn group_lag(
    admin: &Admin,
    group: &str,
    topic: Option<&str>,
    broker: Option<&str>,
) -> Result<LagReport, AdminError> {
    let brokers = match broker {
        Some(addr) => vec![addr.to_owned()],
        None => {
            let mut topics = vec![format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")];
            topics.extend(topic.map(str::to_owned));
            brokers_of_routes(admin, &topics).await?
        }
    };
    let mut stats = Vec::new();
    for addr in brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUME_STATS,
            &GetConsumeStatsRequestHeader {
                consumer_group: group.to_owned(),
                topic: topic.map(str::to_owned),
                ..GetConsumeStatsRequestHeader::default()
            },
        );
        let s: ConsumeStats = admin.broker_json(&addr, request).await?;
        stats.push((addr, s));
    }
    Ok(merge_consume_stats(group, topic, &stats))
}
