//! `cluster`: every broker the name server knows, with its runtime figures.

use std::collections::BTreeMap;

use remoting_protocol::{body::KvTable, RemotingCommand, RequestCode};
use serde::Serialize;

use crate::{
    call::Admin,
    error::AdminError,
    render::{or_dash, Align, Report, Table},
};

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
