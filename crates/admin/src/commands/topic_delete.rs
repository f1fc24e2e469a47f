//! `topic delete` and `topic list --cluster`: the cluster's master brokers
//! from the name server's cluster info, `DELETE_TOPIC_IN_BROKER` on each
//! of them then `DELETE_TOPIC_IN_NAMESRV` on every name server (as
//! `mqadmin deleteTopic` does), and the name server's topics of one cluster
//! (`GET_TOPICS_BY_CLUSTER`).

use std::collections::BTreeSet;

use remoting_protocol::{
    body::{from_json, ClusterInfo, TopicConfigSerializeWrapper, TopicList},
    header::{
        DeleteTopicFromNamesrvRequestHeader, DeleteTopicRequestHeader,
        GetTopicsByClusterRequestHeader,
    },
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use super::{merge_topics, TopicListReport, TopicSummary};
use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{section, Align, Report, Table},
};

/// The master address of every broker of `cluster` (every cluster when
/// `None`) in `info`, sorted.
///
/// # Errors
/// [`AdminError::NoSuchCluster`] when `info` has no such cluster.
pub fn cluster_masters(
    info: &ClusterInfo,
    cluster: Option<&str>,
    namesrv: &str,
) -> Result<Vec<String>, AdminError> {
    let names: Option<&BTreeSet<String>> = match cluster {
        Some(c) => {
            Some(
                info.cluster_addr_table
                    .get(c)
                    .ok_or_else(|| AdminError::NoSuchCluster {
                        namesrv: namesrv.to_owned(),
                        cluster: c.to_owned(),
                        known: info.cluster_addr_table.keys().cloned().collect(),
                    })?,
            )
        }
        None => None,
    };
    let masters: BTreeSet<String> = info
        .broker_addr_table
        .iter()
        .filter(|(name, _)| names.is_none_or(|n| n.contains(*name)))
        .filter_map(|(_, b)| b.master_addr().map(str::to_owned))
        .collect();
    Ok(masters.into_iter().collect())
}

/// `topic delete`: where the topic was deleted.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicDeleteReport {
    /// The topic.
    pub topic: String,
    /// The cluster it was deleted from; `None` for every cluster.
    pub cluster: Option<String>,
    /// The master brokers that deleted it (`DELETE_TOPIC_IN_BROKER`).
    pub brokers: Vec<String>,
    /// The name servers that forgot it (`DELETE_TOPIC_IN_NAMESRV`).
    pub name_servers: Vec<String>,
}

impl Report for TopicDeleteReport {
    fn text(&self) -> String {
        let mut t = Table::new(&[
            ("Server", Align::Left),
            ("Address", Align::Left),
            ("Request", Align::Left),
        ]);
        for b in &self.brokers {
            t.row(vec![
                "broker".into(),
                b.clone(),
                "DELETE_TOPIC_IN_BROKER".into(),
            ]);
        }
        for n in &self.name_servers {
            t.row(vec![
                "name server".into(),
                n.clone(),
                "DELETE_TOPIC_IN_NAMESRV".into(),
            ]);
        }
        let mut out = String::new();
        let title = match &self.cluster {
            Some(c) => format!("deleted topic {} from cluster {c}", self.topic),
            None => format!("deleted topic {} from every cluster", self.topic),
        };
        section(&mut out, &title, &t.to_string());
        out
    }
}

/// Deletes `topic` from every master broker of `cluster` (of every cluster
/// when `None`), then from every name server (only `cluster`'s part of the
/// route when given).
///
/// # Errors
/// An unknown cluster, a cluster without master brokers, or the first
/// broker or name server that fails; the deletions before it stay done and
/// running the command again is safe.
pub async fn topic_delete(
    admin: &Admin,
    topic: &str,
    cluster: Option<&str>,
) -> Result<TopicDeleteReport, AdminError> {
    let info = admin.cluster_info().await?;
    let brokers = cluster_masters(&info, cluster, &admin.namesrv_text())?;
    if brokers.is_empty() {
        return Err(AdminError::NoBrokers {
            namesrv: admin.namesrv_text(),
        });
    }
    for addr in &brokers {
        let request = RemotingCommand::request_with_header(
            RequestCode::DELETE_TOPIC_IN_BROKER,
            &DeleteTopicRequestHeader {
                topic: topic.to_owned(),
            },
        );
        admin.call(Peer::Broker, addr, request).await?;
    }
    let name_servers = admin.namesrv_addrs();
    for addr in &name_servers {
        let request = RemotingCommand::request_with_header(
            RequestCode::DELETE_TOPIC_IN_NAMESRV,
            &DeleteTopicFromNamesrvRequestHeader {
                topic: topic.to_owned(),
                cluster_name: cluster.map(str::to_owned),
            },
        );
        admin.call(Peer::NameServer, addr, request).await?;
    }
    Ok(TopicDeleteReport {
        topic: topic.to_owned(),
        cluster: cluster.map(str::to_owned),
        brokers,
        name_servers,
    })
}

/// The topics `names` the name server lists for a cluster, each with the
/// configuration of the cluster's brokers that have it (a topic none of
/// them has is listed without brokers or queues).
pub fn cluster_topics(
    names: &BTreeSet<String>,
    tables: &[(String, TopicConfigSerializeWrapper)],
) -> TopicListReport {
    let merged = merge_topics(tables);
    let mut topics: Vec<TopicSummary> = merged
        .topics
        .into_iter()
        .filter(|t| names.contains(&t.topic))
        .collect();
    let known: BTreeSet<String> = topics.iter().map(|t| t.topic.clone()).collect();
    topics.extend(names.difference(&known).map(|name| TopicSummary {
        topic: name.clone(),
        ..TopicSummary::default()
    }));
    topics.sort_by(|a, b| a.topic.cmp(&b.topic));
    TopicListReport { topics }
}

/// The topics of `cluster` (`GET_TOPICS_BY_CLUSTER` from the first name
/// server that answers), with the configuration the cluster's master
/// brokers hold (`GET_ALL_TOPIC_CONFIG`).
///
/// # Errors
/// An unknown cluster, or the first name server or broker failure.
pub async fn topic_list_in_cluster(
    admin: &Admin,
    cluster: &str,
) -> Result<TopicListReport, AdminError> {
    let info = admin.cluster_info().await?;
    let masters = cluster_masters(&info, Some(cluster), &admin.namesrv_text())?;
    let (addr, answer) = admin
        .namesrv_call(|| {
            RemotingCommand::request_with_header(
                RequestCode::GET_TOPICS_BY_CLUSTER,
                &GetTopicsByClusterRequestHeader {
                    cluster: cluster.to_owned(),
                },
            )
        })
        .await?;
    let list: TopicList = from_json(&answer.body).map_err(|e| AdminError::BadAnswer {
        peer: Peer::NameServer,
        addr,
        request: RequestCode::GET_TOPICS_BY_CLUSTER,
        reason: e.to_string(),
    })?;
    let mut tables = Vec::new();
    for addr in masters {
        let request = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG);
        let wrapper: TopicConfigSerializeWrapper = admin.broker_json(&addr, request).await?;
        tables.push((addr, wrapper));
    }
    Ok(cluster_topics(&list.topic_list, &tables))
}
