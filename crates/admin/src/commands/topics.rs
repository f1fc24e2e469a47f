//! `topic list`, `topic create`, `topic status` and `topic route`: the
//! requests, the merge over brokers and the reports.

use std::collections::BTreeMap;

use remoting_protocol::{
    body::{TopicConfigSerializeWrapper, TopicRouteData, TopicStatsTable},
    header::{CreateTopicRequestHeader, GetTopicStatsInfoRequestHeader, TopicFilterType},
    RemotingCommand, RequestCode, AUTO_CREATE_TOPIC,
};
use serde::Serialize;

use super::{perm_text, PERM_READ_WRITE};
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, time_text, Align, Report, Table},
};

/// `topic list`: topics of the brokers asked, merged by name.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicListReport {
    /// The topics, by name.
    pub topics: Vec<TopicSummary>,
}

/// One topic over the brokers that have it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicSummary {
    /// The topic.
    pub topic: String,
    /// Addresses of the brokers that have it.
    pub brokers: Vec<String>,
    /// Read queues, summed over those brokers.
    pub read_queues: i64,
    /// Write queues, summed over those brokers.
    pub write_queues: i64,
    /// The permission on the first broker (`perm` bits).
    pub perm: i32,
}

impl Report for TopicListReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Topic", Align::Left),
            ("Read", Align::Right),
            ("Write", Align::Right),
            ("Perm", Align::Left),
            ("Brokers", Align::Left),
        ]);
        for s in &self.topics {
            t.row(vec![
                s.topic.clone(),
                s.read_queues.to_string(),
                s.write_queues.to_string(),
                perm_text(s.perm),
                s.brokers.join(","),
            ]);
        }
        t.to_string()
    }
}

/// Merges the topic tables of several brokers (address, table) by topic.
pub fn merge_topics(tables: &[(String, TopicConfigSerializeWrapper)]) -> TopicListReport {
    let mut merged: BTreeMap<String, TopicSummary> = BTreeMap::new();
    for (addr, wrapper) in tables {
        for (name, config) in &wrapper.topic_config_table {
            let entry = merged.entry(name.clone()).or_insert_with(|| TopicSummary {
                topic: name.clone(),
                perm: config.perm,
                ..TopicSummary::default()
            });
            entry.brokers.push(addr.clone());
            entry.read_queues += i64::from(config.read_queue_nums);
            entry.write_queues += i64::from(config.write_queue_nums);
        }
    }
    TopicListReport {
        topics: merged.into_values().collect(),
    }
}

/// Topics of `broker`, or of every master broker (`GET_ALL_TOPIC_CONFIG`).
///
/// # Errors
/// The first broker that fails.
pub async fn topic_list(
    admin: &Admin,
    broker: Option<&str>,
) -> Result<TopicListReport, AdminError> {
    let mut tables = Vec::new();
    for addr in admin.targets(broker).await? {
        let request = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG);
        let wrapper: TopicConfigSerializeWrapper = admin.broker_json(&addr, request).await?;
        tables.push((addr, wrapper));
    }
    Ok(merge_topics(&tables))
}

/// `topic create`, `group create` and `group delete`: what was changed where.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangeReport {
    /// What was done (`created topic T with 8 queues`).
    pub action: String,
    /// The brokers it was done on.
    pub brokers: Vec<String>,
}

impl Report for ChangeReport {
    fn text(&self) -> String {
        self.brokers
            .iter()
            .map(|b| format!("{} on {b}\n", self.action))
            .collect()
    }
}

/// Creates or updates `topic` with `queues` read and write queues, readable
/// and writable, on `broker` or every master broker
/// (`UPDATE_AND_CREATE_TOPIC`).
///
/// # Errors
/// The first broker that fails; the brokers before it keep the topic.
pub async fn topic_create(
    admin: &Admin,
    topic: &str,
    queues: i32,
    broker: Option<&str>,
) -> Result<ChangeReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    for addr in &brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.to_owned(),
                default_topic: AUTO_CREATE_TOPIC.to_owned(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: PERM_READ_WRITE,
                topic_filter_type: TopicFilterType::SingleTag,
                ..CreateTopicRequestHeader::default()
            },
        );
        admin.call(Peer::Broker, addr, request).await?;
    }
    Ok(ChangeReport {
        action: format!("created topic {topic} with {queues} queues"),
        brokers,
    })
}

/// `topic status`: every queue of a topic on the brokers asked.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatusReport {
    /// The topic.
    pub topic: String,
    /// The queues, by broker name then queue id.
    pub queues: Vec<QueueStatus>,
}

/// One queue's offsets.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueStatus {
    /// The broker's name.
    pub broker_name: String,
    /// The address asked.
    pub broker_addr: String,
    /// The queue id.
    pub queue_id: i32,
    /// First offset still stored.
    pub min_offset: i64,
    /// Next offset (messages ever put).
    pub max_offset: i64,
    /// Store time of the last message, ms since the epoch; 0 when empty.
    pub last_update_timestamp: i64,
}

impl TopicStatusReport {
    /// Messages stored over every queue (`max − min`).
    pub fn stored(&self) -> i64 {
        self.queues
            .iter()
            .map(|q| q.max_offset - q.min_offset)
            .sum()
    }
}

impl Report for TopicStatusReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Broker", Align::Left),
            ("Address", Align::Left),
            ("Queue", Align::Right),
            ("MinOffset", Align::Right),
            ("MaxOffset", Align::Right),
            ("LastUpdated(UTC)", Align::Left),
        ]);
        for q in &self.queues {
            t.row(vec![
                q.broker_name.clone(),
                q.broker_addr.clone(),
                q.queue_id.to_string(),
                q.min_offset.to_string(),
                q.max_offset.to_string(),
                time_text(q.last_update_timestamp),
            ]);
        }
        format!(
            "{t}topic {}: {} queues, {} messages stored\n",
            self.topic,
            self.queues.len(),
            self.stored()
        )
    }
}

/// The queues of the stats tables of several brokers (address, table).
pub fn merge_topic_stats(topic: &str, tables: &[(String, TopicStatsTable)]) -> TopicStatusReport {
    let mut queues: Vec<QueueStatus> = tables
        .iter()
        .flat_map(|(addr, table)| {
            table.offset_table.iter().map(move |(q, o)| QueueStatus {
                broker_name: q.broker_name.clone(),
                broker_addr: addr.clone(),
                queue_id: q.queue_id,
                min_offset: o.min_offset,
                max_offset: o.max_offset,
                last_update_timestamp: o.last_update_timestamp,
            })
        })
        .collect();
    queues.sort_by(|a, b| (&a.broker_name, a.queue_id).cmp(&(&b.broker_name, b.queue_id)));
    TopicStatusReport {
        topic: topic.to_owned(),
        queues,
    }
}

/// The offsets of every queue of `topic` (`GET_TOPIC_STATS_INFO`) on
/// `broker`, or on the brokers of its route, or on every master broker when
/// it has no route.
///
/// # Errors
/// The first broker that fails (an unknown topic: `TOPIC_NOT_EXIST`).
pub async fn topic_status(
    admin: &Admin,
    topic: &str,
    broker: Option<&str>,
) -> Result<TopicStatusReport, AdminError> {
    let brokers = match broker {
        Some(addr) => vec![addr.to_owned()],
        None => match admin.route(topic).await? {
            Some(route) if !Admin::route_masters(&route).is_empty() => Admin::route_masters(&route),
            _ => admin.master_addrs().await?,
        },
    };
    let mut tables = Vec::new();
    for addr in brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_TOPIC_STATS_INFO,
            &GetTopicStatsInfoRequestHeader {
                topic: topic.to_owned(),
                broker_name: None,
            },
        );
        let table: TopicStatsTable = admin.broker_json(&addr, request).await?;
        tables.push((addr, table));
    }
    Ok(merge_topic_stats(topic, &tables))
}

/// `topic route`: the name server's route of a topic.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteReport {
    /// The topic.
    pub topic: String,
    /// The route as the name server gave it.
    pub route: TopicRouteData,
}

impl Report for RouteReport {
    fn text(&self) -> String {
        let mut brokers = Table::new(&[
            ("Cluster", Align::Left),
            ("Broker", Align::Left),
            ("Id", Align::Right),
            ("Address", Align::Left),
        ]);
        for b in &self.route.broker_datas {
            for (id, addr) in &b.broker_addrs {
                brokers.row(vec![
                    b.cluster.clone(),
                    b.broker_name.clone(),
                    id.to_string(),
                    addr.clone(),
                ]);
            }
        }
        let mut queues = Table::new(&[
            ("Broker", Align::Left),
            ("ReadQueues", Align::Right),
            ("WriteQueues", Align::Right),
            ("Perm", Align::Left),
        ]);
        for q in &self.route.queue_datas {
            queues.row(vec![
                q.broker_name.clone(),
                q.read_queue_nums.to_string(),
                q.write_queue_nums.to_string(),
                perm_text(q.perm),
            ]);
        }
        let mut out = String::new();
        section(&mut out, &format!("route of topic {}", self.topic), "");
        section(&mut out, "", &brokers.to_string());
        section(&mut out, "", &queues.to_string());
        out
    }
}

/// The route of `topic` (`GET_ROUTEINFO_BY_TOPIC`).
///
/// # Errors
/// No name server answered, or [`AdminError::NoRoute`].
pub async fn topic_route(admin: &Admin, topic: &str) -> Result<RouteReport, AdminError> {
    match admin.route(topic).await? {
        Some(route) => Ok(RouteReport {
            topic: topic.to_owned(),
            route,
        }),
        None => Err(AdminError::NoRoute {
            namesrv: admin.namesrv_text(),
            topic: topic.to_owned(),
        }),
    }
}
