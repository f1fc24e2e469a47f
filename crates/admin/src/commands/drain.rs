//! `broker drain` and `broker undrain`: take a broker out of the send routes
//! for maintenance, and put it back.
//!
//! Draining sets `brokerPermission=4` (read only) on every address of the
//! broker name (`UPDATE_BROKER_CONFIG`): the broker refuses sends and
//! registers its topics without write permission from then on, also after a
//! restart of the name servers. It then sends `WIPE_WRITE_PERM_OF_BROKER`
//! to every name server, so the routes lose the broker's writable queues at
//! once. Pulls go on. Undraining sends `ADD_WRITE_PERM_OF_BROKER` to every
//! name server first, then sets `brokerPermission=6`: the broker registers
//! again with its topics' own perms, which replace the blanket read-write
//! perm the name servers gave.

use client_core::split_addrs;
use remoting_protocol::{
    body,
    header::{
        AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
        WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
    },
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{request_name, AdminError, Peer},
    render::{section, Align, Report, Table},
};

/// The `brokerPermission` of a drained broker: read only.
pub const DRAINED_PERMISSION: i32 = 4;
/// The `brokerPermission` of a broker taking sends: read and write.
pub const UNDRAINED_PERMISSION: i32 = 6;

/// `broker drain` / `broker undrain`: what was changed where.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainReport {
    /// `drain` or `undrain`.
    pub action: String,
    /// The broker name.
    pub broker_name: String,
    /// The `brokerPermission` set on each address.
    pub broker_permission: i32,
    /// Each address of the broker name that was updated.
    pub brokers: Vec<DrainedBroker>,
    /// Each name server asked, with the topics it touched.
    pub name_servers: Vec<NameServerPerm>,
}

/// One address of the broker name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DrainedBroker {
    /// Broker id (0 = master).
    pub broker_id: i64,
    /// Its address.
    pub addr: String,
}

/// One name server's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NameServerPerm {
    /// The name server's address.
    pub namesrv: String,
    /// `WIPE_WRITE_PERM_OF_BROKER` or `ADD_WRITE_PERM_OF_BROKER`.
    pub request: String,
    /// How many topics had queue data of the broker there
    /// (`wipeTopicCount` / `addTopicCount`).
    pub topics: i32,
}

impl Report for DrainReport {
    fn text(&self) -> String {
        let mut out = String::new();
        let mut brokers = Table::new(&[
            ("Broker Name", Align::Left),
            ("BID", Align::Right),
            ("Addr", Align::Left),
            ("brokerPermission", Align::Right),
        ]);
        for b in &self.brokers {
            brokers.row(vec![
                self.broker_name.clone(),
                b.broker_id.to_string(),
                b.addr.clone(),
                self.broker_permission.to_string(),
            ]);
        }
        let title = match self.action.as_str() {
            "drain" => format!(
                "drained {}: sends are refused and routed to other brokers; pulls go on",
                self.broker_name
            ),
            _ => format!("undrained {}: sends are taken again", self.broker_name),
        };
        section(&mut out, &title, &brokers.to_string());
        let mut servers = Table::new(&[
            ("Name Server", Align::Left),
            ("Request", Align::Left),
            ("Topics", Align::Right),
        ]);
        for n in &self.name_servers {
            servers.row(vec![
                n.namesrv.clone(),
                n.request.clone(),
                n.topics.to_string(),
            ]);
        }
        section(&mut out, "", &servers.to_string());
        out
    }
}

/// Drains the broker named `broker_name`: `brokerPermission=4` on each of
/// its addresses, then `WIPE_WRITE_PERM_OF_BROKER` to every name server.
///
/// # Errors
/// No name server knows the broker name, or a broker or name server
/// refuses or fails (the changes made before it stay made; run the command
/// again).
pub async fn broker_drain(admin: &Admin, broker_name: &str) -> Result<DrainReport, AdminError> {
    let addrs = broker_addrs(admin, broker_name).await?;
    let brokers = set_permission(admin, &addrs, DRAINED_PERMISSION).await?;
    let name_servers = write_perm_everywhere(admin, broker_name, false).await?;
    Ok(DrainReport {
        action: "drain".to_owned(),
        broker_name: broker_name.to_owned(),
        broker_permission: DRAINED_PERMISSION,
        brokers,
        name_servers,
    })
}

/// Undrains the broker named `broker_name`: `ADD_WRITE_PERM_OF_BROKER` to
/// every name server, then `brokerPermission=6` on each of its addresses
/// (whose registration then restores each topic's own perm).
///
/// # Errors
/// As [`broker_drain`].
pub async fn broker_undrain(admin: &Admin, broker_name: &str) -> Result<DrainReport, AdminError> {
    let addrs = broker_addrs(admin, broker_name).await?;
    let name_servers = write_perm_everywhere(admin, broker_name, true).await?;
    let brokers = set_permission(admin, &addrs, UNDRAINED_PERMISSION).await?;
    Ok(DrainReport {
        action: "undrain".to_owned(),
        broker_name: broker_name.to_owned(),
        broker_permission: UNDRAINED_PERMISSION,
        brokers,
        name_servers,
    })
}

/// Every address of `broker_name` the name servers know, by broker id.
async fn broker_addrs(admin: &Admin, broker_name: &str) -> Result<Vec<DrainedBroker>, AdminError> {
    let info = admin.cluster_info().await?;
    let addrs: Vec<DrainedBroker> = info
        .broker_addr_table
        .get(broker_name)
        .map(|b| {
            b.broker_addrs
                .iter()
                .filter(|(_, addr)| !addr.is_empty())
                .map(|(&broker_id, addr)| DrainedBroker {
                    broker_id,
                    addr: addr.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    if addrs.is_empty() {
        return Err(AdminError::NoSuchBroker {
            namesrv: admin.namesrv_text(),
            broker_name: broker_name.to_owned(),
            known: info.broker_addr_table.keys().cloned().collect(),
        });
    }
    Ok(addrs)
}

/// Sets `brokerPermission` on each broker (`UPDATE_BROKER_CONFIG`).
async fn set_permission(
    admin: &Admin,
    brokers: &[DrainedBroker],
    permission: i32,
) -> Result<Vec<DrainedBroker>, AdminError> {
    let value = permission.to_string();
    for b in brokers {
        let text = body::encode_config_text([("brokerPermission", value.as_str())]);
        let request = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG).with_body(text);
        admin.call(Peer::Broker, &b.addr, request).await?;
    }
    Ok(brokers.to_vec())
}

/// Sends `ADD_WRITE_PERM_OF_BROKER` (`add`) or `WIPE_WRITE_PERM_OF_BROKER`
/// to every name server and reads how many topics each touched.
async fn write_perm_everywhere(
    admin: &Admin,
    broker_name: &str,
    add: bool,
) -> Result<Vec<NameServerPerm>, AdminError> {
    let namesrvs = split_addrs(&admin.namesrv_text());
    if namesrvs.is_empty() {
        return Err(AdminError::NoNameServer);
    }
    let mut out = Vec::with_capacity(namesrvs.len());
    for addr in namesrvs {
        let (code, request) = if add {
            let header = AddWritePermOfBrokerRequestHeader {
                broker_name: broker_name.to_owned(),
            };
            let code = RequestCode::ADD_WRITE_PERM_OF_BROKER;
            (code, RemotingCommand::request_with_header(code, &header))
        } else {
            let header = WipeWritePermOfBrokerRequestHeader {
                broker_name: broker_name.to_owned(),
            };
            let code = RequestCode::WIPE_WRITE_PERM_OF_BROKER;
            (code, RemotingCommand::request_with_header(code, &header))
        };
        let answer = admin.call(Peer::NameServer, &addr, request).await?;
        let topics = if add {
            answer
                .decode_header::<AddWritePermOfBrokerResponseHeader>()
                .map(|h| h.add_topic_count)
        } else {
            answer
                .decode_header::<WipeWritePermOfBrokerResponseHeader>()
                .map(|h| h.wipe_topic_count)
        }
        .map_err(|e| AdminError::BadAnswer {
            peer: Peer::NameServer,
            addr: addr.clone(),
            request: code,
            reason: e.to_string(),
        })?;
        out.push(NameServerPerm {
            namesrv: addr,
            request: request_name(code),
            topics,
        });
    }
    Ok(out)
}
