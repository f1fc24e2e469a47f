//! `broker config get` and `broker config set`: a broker's configuration.

use std::collections::BTreeMap;

use remoting_protocol::{
    body::{self},
    RemotingCommand, RequestCode,
};
use serde::Serialize;

use crate::{
    call::Admin,
    error::{AdminError, Peer},
    render::{Align, Report, Table},
};

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
