//! `connections`: the clients of a consumer or producer group.

use std::collections::{BTreeMap, BTreeSet};

use remoting_protocol::{
    body::{self, ConsumerConnection, ProducerConnection},
    header::{GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader},
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use super::{brokers_of_routes, RETRY_GROUP_TOPIC_PREFIX};
use crate::{
    call::Admin,
    error::AdminError,
    render::{section, Align, Report, Table},
};

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
