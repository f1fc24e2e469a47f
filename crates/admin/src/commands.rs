//! What each command asks and what it reports: the requests to brokers and
//! name servers, the merge of several brokers' answers, and the report
//! types with their text tables (JSON comes from their `Serialize`).

use std::collections::{BTreeMap, BTreeSet};

use remoting_protocol::{
    body::{
        self, ConsumeStats, ConsumerConnection, KvTable, ProducerConnection,
        SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicConfigSerializeWrapper,
        TopicRouteData, TopicStatsTable,
    },
    header::{
        CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader,
        GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
        GetProducerConnectionListRequestHeader, GetTopicStatsInfoRequestHeader, TopicFilterType,
    },
    RemotingCommand, RequestCode, AUTO_CREATE_TOPIC,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{or_dash, section, time_text, Align, Report, Table},
};

/// Read and write permission bits of a topic.
const PERM_READ_WRITE: i32 = 6;
/// The prefix of a consumer group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";

/// A permission as RocketMQ writes it: `R`, `W` and `X` (inherit) or `-`.
pub fn perm_text(perm: i32) -> String {
    [(4, 'R'), (2, 'W'), (1, 'X')]
        .iter()
        .map(|(bit, c)| if perm & bit != 0 { *c } else { '-' })
        .collect()
}

// ---------------------------------------------------------------- cluster

/// `cluster`: every broker the name server knows.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterReport {
    /// The brokers, by cluster, broker name and broker id.
    pub brokers: Vec<ClusterBroker>,
}

/// One broker (master or slave) of a cluster, with what its runtime info
/// says.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterBroker {
    /// The cluster's name.
    pub cluster: String,
    /// The broker's name.
    pub broker_name: String,
    /// 0 for the master.
    pub broker_id: i64,
    /// Its address.
    pub addr: String,
    /// `brokerVersionDesc`.
    pub version: Option<String>,
    /// The first figure of `putTps` (messages put per second, last 10 s).
    pub put_tps: Option<f64>,
    /// Messages put today (`msgPutTotalTodayNow − msgPutTotalTodayMorning`).
    pub in_today: Option<i64>,
    /// Messages got today (`msgGetTotalTodayNow − msgGetTotalTodayMorning`).
    pub out_today: Option<i64>,
    /// Why the runtime info could not be read.
    pub error: Option<String>,
}

impl ClusterBroker {
    /// Fills in what the runtime table `table` says.
    pub fn read_runtime(&mut self, table: &BTreeMap<String, String>) {
        let num = |k: &str| table.get(k).and_then(|v| v.trim().parse::<i64>().ok());
        let diff = |now: &str, morning: &str| Some(num(now)? - num(morning)?);
        self.version = table.get("brokerVersionDesc").cloned();
        self.put_tps = table
            .get("putTps")
            .and_then(|v| v.split_whitespace().next()?.parse().ok());
        self.in_today = diff("msgPutTotalTodayNow", "msgPutTotalTodayMorning");
        self.out_today = diff("msgGetTotalTodayNow", "msgGetTotalTodayMorning");
    }
}

impl Report for ClusterReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Cluster", Align::Left),
            ("Broker", Align::Left),
            ("Id", Align::Right),
            ("Address", Align::Left),
            ("Version", Align::Left),
            ("PutTPS", Align::Right),
            ("InToday", Align::Right),
            ("OutToday", Align::Right),
        ]);
        for b in &self.brokers {
            t.row(vec![
                b.cluster.clone(),
                b.broker_name.clone(),
                b.broker_id.to_string(),
                b.addr.clone(),
                or_dash(b.version.as_ref()),
                or_dash(b.put_tps.map(|v| format!("{v:.2}"))),
                or_dash(b.in_today),
                or_dash(b.out_today),
            ]);
        }
        let mut out = t.to_string();
        for b in self.brokers.iter().filter(|b| b.error.is_some()) {
            out.push_str(&format!(
                "{} {}: {}\n",
                b.broker_name,
                b.addr,
                or_dash(b.error.as_ref())
            ));
        }
        out
    }
}

/// Every broker of every cluster, with its runtime info
/// (`GET_BROKER_CLUSTER_INFO`, then `GET_BROKER_RUNTIME_INFO` per broker).
///
/// # Errors
/// No name server answered. A broker that does not answer is reported in
/// its row instead.
pub async fn cluster(admin: &Admin) -> Result<ClusterReport, AdminError> {
    let info = admin.cluster_info().await?;
    let mut cluster_of: BTreeMap<&str, &str> = BTreeMap::new();
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            cluster_of.insert(name.as_str(), cluster.as_str());
        }
    }
    let mut brokers = Vec::new();
    for (name, data) in &info.broker_addr_table {
        for (id, addr) in &data.broker_addrs {
            let mut row = ClusterBroker {
                cluster: cluster_of
                    .get(name.as_str())
                    .map_or_else(|| data.cluster.clone(), |c| (*c).to_owned()),
                broker_name: name.clone(),
                broker_id: *id,
                addr: addr.clone(),
                ..ClusterBroker::default()
            };
            let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
            match admin.broker_json::<KvTable>(addr, request).await {
                Ok(kv) => row.read_runtime(&kv.table),
                Err(e) => row.error = Some(e.to_string()),
            }
            brokers.push(row);
        }
    }
    brokers.sort_by(|a, b| {
        (&a.cluster, &a.broker_name, a.broker_id).cmp(&(&b.cluster, &b.broker_name, b.broker_id))
    });
    Ok(ClusterReport { brokers })
}

// ---------------------------------------------------------------- topics

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

// ---------------------------------------------------------------- groups

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

/// The brokers of the routes of `topics` (those that have one); every master
/// broker when none has.
async fn brokers_of_routes(admin: &Admin, topics: &[String]) -> Result<Vec<String>, AdminError> {
    let mut brokers = BTreeSet::new();
    for topic in topics {
        if let Some(route) = admin.route(topic).await? {
            brokers.extend(Admin::route_masters(&route));
        }
    }
    if brokers.is_empty() {
        return admin.master_addrs().await;
    }
    Ok(brokers.into_iter().collect())
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

// ---------------------------------------------------------------- connections

/// `connections`: the clients of a consumer or producer group.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionsReport {
    /// The group.
    pub group: String,
    /// `consumer` or `producer`.
    pub kind: String,
    /// The clients, by client id.
    pub connections: Vec<Connection>,
    /// For a consumer group: `CONSUME_PASSIVELY`, `CONSUME_ACTIVELY` or
    /// `CONSUME_POP`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    /// For a consumer group: `CLUSTERING` or `BROADCASTING`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    /// For a consumer group: where a new consumer starts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
    /// For a consumer group: the subscription expression per topic.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub subscriptions: BTreeMap<String, String>,
}

/// One client connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Connection {
    /// The client's id.
    pub client_id: String,
    /// Its address as the broker sees it.
    pub client_addr: String,
    /// Its language.
    pub language: String,
    /// Its version (RocketMQ's `MQVersion` ordinal).
    pub version: i32,
}

impl Report for ConnectionsReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("ClientId", Align::Left),
            ("ClientAddr", Align::Left),
            ("Language", Align::Left),
            ("Version", Align::Right),
        ]);
        for c in &self.connections {
            t.row(vec![
                c.client_id.clone(),
                c.client_addr.clone(),
                c.language.clone(),
                c.version.to_string(),
            ]);
        }
        let mut out = format!(
            "{} group {}: {} connections\n{t}",
            self.kind,
            self.group,
            self.connections.len()
        );
        if !self.subscriptions.is_empty() {
            let mut s = Table::new(&[("Topic", Align::Left), ("Expression", Align::Left)]);
            for (topic, expr) in &self.subscriptions {
                s.row(vec![topic.clone(), expr.clone()]);
            }
            section(&mut out, "", &s.to_string());
        }
        for (label, value) in [
            ("consume type", &self.consume_type),
            ("message model", &self.message_model),
            ("consume from", &self.consume_from_where),
        ] {
            if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
                out.push_str(&format!("{label}: {v}\n"));
            }
        }
        out
    }
}

fn connections_of(list: &[body::ClientConnection]) -> impl Iterator<Item = Connection> + '_ {
    list.iter().map(|c| Connection {
        client_id: c.client_id.clone(),
        client_addr: c.client_addr.clone(),
        language: c.language.clone(),
        version: c.version,
    })
}

/// Asks each broker in turn with `request(addr)`, keeping every success;
/// fails with the first failure only when no broker answered.
async fn ask_each<T: serde::de::DeserializeOwned>(
    admin: &Admin,
    brokers: &[String],
    request: impl Fn() -> RemotingCommand,
) -> Result<Vec<T>, AdminError> {
    let mut answers = Vec::new();
    let mut first_error = None;
    for addr in brokers {
        match admin.broker_json::<T>(addr, request()).await {
            Ok(a) => answers.push(a),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if answers.is_empty() => Err(e),
        _ => Ok(answers),
    }
}

/// The clients of consumer group `group` (`GET_CONSUMER_CONNECTION_LIST`)
/// on `broker`, or on the brokers of the `%RETRY%group` route (every master
/// broker when it has none), merged.
///
/// # Errors
/// Every broker failed (a group with no client online:
/// `CONSUMER_NOT_ONLINE`); the first failure is returned.
pub async fn consumer_connections(
    admin: &Admin,
    group: &str,
    broker: Option<&str>,
) -> Result<ConnectionsReport, AdminError> {
    let brokers = match broker {
        Some(addr) => vec![addr.to_owned()],
        None => brokers_of_routes(admin, &[format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")]).await?,
    };
    let answers: Vec<ConsumerConnection> = ask_each(admin, &brokers, || {
        RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: group.to_owned(),
            },
        )
    })
    .await?;
    let connections: BTreeSet<Connection> = answers
        .iter()
        .flat_map(|a| connections_of(&a.connection_set))
        .collect();
    let first = answers.first();
    let declared = |f: fn(&ConsumerConnection) -> &String| first.map(|a| f(a).clone());
    Ok(ConnectionsReport {
        group: group.to_owned(),
        kind: "consumer".into(),
        connections: connections.into_iter().collect(),
        consume_type: declared(|a| &a.consume_type),
        message_model: declared(|a| &a.message_model),
        consume_from_where: declared(|a| &a.consume_from_where),
        subscriptions: answers
            .iter()
            .flat_map(|a| &a.subscription_table)
            .map(|(topic, s)| (topic.clone(), s.sub_string.clone()))
            .collect(),
    })
}

/// The clients of producer group `group` (`GET_PRODUCER_CONNECTION_LIST`) on
/// `broker` or every master broker, merged.
///
/// # Errors
/// Every broker failed (an unknown group: `SYSTEM_ERROR`); the first
/// failure is returned.
pub async fn producer_connections(
    admin: &Admin,
    group: &str,
    broker: Option<&str>,
) -> Result<ConnectionsReport, AdminError> {
    let brokers = admin.targets(broker).await?;
    let answers: Vec<ProducerConnection> = ask_each(admin, &brokers, || {
        RemotingCommand::request_with_header(
            RequestCode::GET_PRODUCER_CONNECTION_LIST,
            &GetProducerConnectionListRequestHeader {
                producer_group: group.to_owned(),
            },
        )
    })
    .await?;
    let connections: BTreeSet<Connection> = answers
        .iter()
        .flat_map(|a| connections_of(&a.connection_set))
        .collect();
    Ok(ConnectionsReport {
        group: group.to_owned(),
        kind: "producer".into(),
        connections: connections.into_iter().collect(),
        ..ConnectionsReport::default()
    })
}

// ---------------------------------------------------------------- broker config

/// `broker config get`: a broker's configuration, or one key of it.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReport {
    /// The broker's address.
    pub broker: String,
    /// Key to value.
    pub config: BTreeMap<String, String>,
}

impl Report for ConfigReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[("Key", Align::Left), ("Value", Align::Left)]);
        for (k, v) in &self.config {
            t.row(vec![k.clone(), v.clone()]);
        }
        t.to_string()
    }
}

/// The configuration of the broker at `broker` (`GET_BROKER_CONFIG`), or
/// only `key`.
///
/// # Errors
/// The broker fails, or has no such key.
pub async fn config_get(
    admin: &Admin,
    broker: &str,
    key: Option<&str>,
) -> Result<ConfigReport, AdminError> {
    let request = RemotingCommand::request(RequestCode::GET_BROKER_CONFIG);
    let answer = admin.call(Peer::Broker, broker, request).await?;
    let entries = body::decode_config_text(&answer.body).map_err(|e| AdminError::BadAnswer {
        peer: Peer::Broker,
        addr: broker.to_owned(),
        request: RequestCode::GET_BROKER_CONFIG,
        reason: e.to_string(),
    })?;
    let mut config: BTreeMap<String, String> = entries.into_iter().collect();
    if let Some(key) = key {
        let value = config.remove(key).ok_or_else(|| AdminError::NoSuchKey {
            addr: broker.to_owned(),
            key: key.to_owned(),
        })?;
        config = BTreeMap::from([(key.to_owned(), value)]);
    }
    Ok(ConfigReport {
        broker: broker.to_owned(),
        config,
    })
}

/// `broker config set`: the change made.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSetReport {
    /// The broker's address.
    pub broker: String,
    /// The key.
    pub key: String,
    /// Its new value.
    pub value: String,
}

impl Report for ConfigSetReport {
    fn text(&self) -> String {
        format!("set {}={} on {}\n", self.key, self.value, self.broker)
    }
}

/// Sets `key` to `value` on the broker at `broker` (`UPDATE_BROKER_CONFIG`).
///
/// # Errors
/// The broker refuses (a key it cannot change at run time:
/// `INVALID_PARAMETER`) or fails.
pub async fn config_set(
    admin: &Admin,
    broker: &str,
    key: &str,
    value: &str,
) -> Result<ConfigSetReport, AdminError> {
    let text = body::encode_config_text([(key, value)]);
    let request = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG).with_body(text);
    admin.call(Peer::Broker, broker, request).await?;
    Ok(ConfigSetReport {
        broker: broker.to_owned(),
        key: key.to_owned(),
        value: value.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{MessageQueueBody, OffsetWrapper, TopicConfig, TopicOffset};

    use super::*;

    fn mq(topic: &str, broker: &str, id: i32) -> MessageQueueBody {
        MessageQueueBody {
            topic: topic.into(),
            broker_name: broker.into(),
            queue_id: id,
        }
    }

    #[test]
    fn permissions_read_as_rocketmq_writes_them() {
        assert_eq!(perm_text(6), "RW-");
        assert_eq!(perm_text(4), "R--");
        assert_eq!(perm_text(7), "RWX");
        assert_eq!(perm_text(0), "---");
    }

    #[test]
    fn runtime_info_gives_version_tps_and_todays_counts() {
        let mut b = ClusterBroker::default();
        let table: BTreeMap<String, String> = [
            ("brokerVersionDesc", "V5_3_3"),
            ("putTps", "12.5 10.0 "),
            ("msgPutTotalTodayNow", "150"),
            ("msgPutTotalTodayMorning", "100"),
            ("msgGetTotalTodayNow", "x"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        b.read_runtime(&table);
        assert_eq!(b.version.as_deref(), Some("V5_3_3"));
        assert_eq!(b.put_tps, Some(12.5));
        assert_eq!((b.in_today, b.out_today), (Some(50), None));
        b.read_runtime(&BTreeMap::from([("putTps".to_owned(), " ".to_owned())]));
        assert_eq!((b.version, b.put_tps), (None, None));
    }

    #[test]
    fn topics_merge_over_brokers() {
        let wrapper = |topics: &[(&str, i32)]| TopicConfigSerializeWrapper {
            topic_config_table: topics
                .iter()
                .map(|(t, q)| {
                    (
                        (*t).to_owned(),
                        TopicConfig {
                            topic_name: (*t).to_owned(),
                            read_queue_nums: *q,
                            write_queue_nums: *q,
                            ..TopicConfig::default()
                        },
                    )
                })
                .collect(),
            ..TopicConfigSerializeWrapper::default()
        };
        let report = merge_topics(&[
            ("a:1".into(), wrapper(&[("T", 4), ("Only", 1)])),
            ("b:1".into(), wrapper(&[("T", 8)])),
        ]);
        let names: Vec<&str> = report.topics.iter().map(|t| t.topic.as_str()).collect();
        assert_eq!(names, ["Only", "T"]);
        assert_eq!(report.topics[1].brokers, ["a:1", "b:1"]);
        assert_eq!(report.topics[1].read_queues, 12);
        assert_eq!(
            report.text(),
            "Topic  Read  Write  Perm  Brokers\n\
             Only      1      1  RW-   a:1\n\
             T        12     12  RW-   a:1,b:1\n"
        );
        let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["topics"][1]["writeQueues"], 12);
        assert_eq!(json["topics"][1]["brokers"][1], "b:1");
    }

    #[test]
    fn topic_status_sorts_queues_and_counts_stored_messages() {
        let table = |broker: &str, offsets: &[(i32, i64, i64)]| TopicStatsTable {
            offset_table: offsets
                .iter()
                .map(|(id, min, max)| {
                    (
                        mq("T", broker, *id),
                        TopicOffset {
                            min_offset: *min,
                            max_offset: *max,
                            last_update_timestamp: if *max > 0 { 1_714_564_800_123 } else { 0 },
                        },
                    )
                })
                .collect(),
            topic_put_tps: 0.0,
        };
        let report = merge_topic_stats(
            "T",
            &[
                ("b:1".into(), table("b", &[(1, 0, 0), (0, 2, 5)])),
                ("a:1".into(), table("a", &[(0, 0, 10)])),
            ],
        );
        let order: Vec<(&str, i32)> = report
            .queues
            .iter()
            .map(|q| (q.broker_name.as_str(), q.queue_id))
            .collect();
        assert_eq!(order, [("a", 0), ("b", 0), ("b", 1)]);
        assert_eq!(report.stored(), 13);
        let text = report.text();
        assert!(
            text.starts_with(
                "Broker  Address  Queue  MinOffset  MaxOffset  LastUpdated(UTC)\n\
                 a       a:1          0          0         10  2024-05-01 12:00:00.123\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("b       b:1          1          0          0  -\n"),
            "{text}"
        );
        assert!(
            text.ends_with("topic T: 3 queues, 13 messages stored\n"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            json["queues"][0]["lastUpdateTimestamp"],
            1_714_564_800_123_i64
        );
        assert_eq!(json["queues"][1]["minOffset"], 2);
    }

    #[test]
    fn lag_is_broker_minus_consumer_offset_with_totals() {
        let stats = |rows: &[(&str, i32, i64, i64)]| ConsumeStats {
            consume_tps: 1.5,
            offset_table: rows
                .iter()
                .map(|(topic, id, broker, consumer)| {
                    (
                        mq(topic, "a", *id),
                        OffsetWrapper {
                            broker_offset: *broker,
                            consumer_offset: *consumer,
                            last_timestamp: 0,
                            pull_offset: *consumer,
                        },
                    )
                })
                .collect(),
        };
        let all = [(
            "a:1".to_owned(),
            stats(&[("T", 0, 10, 4), ("T", 1, 3, 3), ("U", 0, 7, 0)]),
        )];
        let report = merge_consume_stats("G", None, &all);
        assert_eq!(report.queues.len(), 3);
        assert_eq!(
            (
                report.total_broker_offset,
                report.total_consumer_offset,
                report.total_lag
            ),
            (20, 7, 13)
        );
        assert_eq!(report.queues[0].lag, 6);
        let text = report.text();
        assert!(
            text.contains("\nT      a           0            10               4    6  -\n"),
            "{text}"
        );
        assert!(
            text.contains("\nTotal                           20               7   13\n"),
            "{text}"
        );
        assert!(
            text.ends_with("group G: 3 queues, lag 13, consume TPS 1.50\n"),
            "{text}"
        );
        let only_t = merge_consume_stats("G", Some("T"), &all);
        assert_eq!((only_t.queues.len(), only_t.total_lag), (2, 6));
        let json: serde_json::Value = serde_json::from_str(&crate::render::render(&only_t, true))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(json["totalLag"], 6);
        assert_eq!(json["topic"], "T");
        assert_eq!(json["queues"][0]["consumerOffset"], 4);
    }

    #[test]
    fn groups_merge_over_brokers() {
        let wrapper = |groups: &[&str]| SubscriptionGroupWrapper {
            subscription_group_table: groups
                .iter()
                .map(|g| ((*g).to_owned(), SubscriptionGroupConfig::named(g)))
                .collect(),
            ..SubscriptionGroupWrapper::default()
        };
        let report = merge_groups(&[
            ("a:1".into(), wrapper(&["G", "H"])),
            ("b:1".into(), wrapper(&["G"])),
        ]);
        assert_eq!(report.groups.len(), 2);
        assert_eq!(report.groups[0].brokers, ["a:1", "b:1"]);
        assert_eq!(report.groups[0].retry_max_times, 16);
        assert!(report
            .text()
            .contains("\nH      true     true       false    "));
    }

    #[test]
    fn change_and_config_reports_read_plainly() {
        let change = ChangeReport {
            action: "created topic T with 4 queues".into(),
            brokers: vec!["a:1".into(), "b:1".into()],
        };
        assert_eq!(
            change.text(),
            "created topic T with 4 queues on a:1\ncreated topic T with 4 queues on b:1\n"
        );
        let config = ConfigReport {
            broker: "a:1".into(),
            config: BTreeMap::from([("k".into(), "v".into()), ("long-key".into(), "2".into())]),
        };
        assert_eq!(config.text(), "Key       Value\nk         v\nlong-key  2\n");
    }
}
