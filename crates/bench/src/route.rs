//! Where sends go: either the queues `0..N` of one broker given directly, or
//! every writable queue of every master broker of the topic's route, asked
//! from a name server with `GET_ROUTEINFO_BY_TOPIC`.
//!
//! A topic the name server does not know borrows the auto-create topic's
//! route (`TBW102`), with `min(queues, readQueueNums)` queues per broker: the
//! brokers create the topic on its first send, as with RocketMQ's producer.
//! [`create_topic`] creates one ahead of a run (`sluice-bench create-topic`).

use std::time::Duration;

use anyhow::{bail, Context, Result};
use client_core::{route, Deadline, MessageQueue, NameServers};
use remoting_net::{client::ClientConnection, ClientOptions, RemotingClient};
use remoting_protocol::{
    acl::Credentials,
    body::TopicRouteData,
    header::{CreateTopicRequestHeader, TopicFilterType},
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};

/// Read and write permission bits of a topic.
const PERM_READ_WRITE: i32 = 6;

/// One queue to send to: the broker's address and the queue id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Destination {
    /// Broker address (`host:port`).
    pub addr: String,
    /// Broker name, or the address when given directly.
    pub broker_name: String,
    /// Queue id on that broker.
    pub queue_id: u32,
}

/// Queues `0..queues` of the broker at `addr`.
pub fn direct(addr: &str, queues: u32) -> Vec<Destination> {
    (0..queues)
        .map(|queue_id| Destination {
            addr: addr.to_owned(),
            broker_name: addr.to_owned(),
            queue_id,
        })
        .collect()
}

/// The writable queues of `topic` in `route` on brokers with a master, by
/// broker name then queue id; `cap`, when borrowing the auto-create route,
/// limits each broker to `min(cap, readQueueNums)` queues.
pub fn writable_queues(topic: &str, route: &TopicRouteData, cap: Option<u32>) -> Vec<Destination> {
    let masters = route::master_addrs(route);
    route::writable_queues(topic, route, cap)
        .into_iter()
        .filter_map(
            |MessageQueue {
                 broker_name,
                 queue_id,
                 ..
             }| {
                Some(Destination {
                    addr: masters.get(&broker_name)?.clone(),
                    broker_name,
                    queue_id,
                })
            },
        )
        .collect()
}

/// Asks the name server at `namesrv` for `topic`'s route and returns its
/// writable queues, borrowing the auto-create route (at most `queues` per
/// broker) when the topic does not exist yet. With `credentials`, the
/// lookups are signed.
///
/// # Errors
/// The name server cannot be reached or refuses, or no writable queue on a
/// master broker is found.
pub async fn lookup(
    namesrv: &str,
    topic: &str,
    queues: u32,
    timeout: Duration,
    credentials: Option<&Credentials>,
) -> Result<Vec<Destination>> {
    let client = RemotingClient::new(signed_by(credentials));
    let name_servers = NameServers::new(vec![namesrv.to_owned()]);
    let fetch = |topic: String| {
        let (client, name_servers) = (&client, &name_servers);
        async move {
            route::query(
                client,
                name_servers,
                &topic,
                timeout,
                &Deadline::new(timeout),
            )
            .await
            .with_context(|| format!("ask {namesrv} for the route of {topic}"))
        }
    };
    let found = match fetch(topic.to_owned()).await {
        Ok(Some(route)) => Ok(writable_queues(topic, &route, None)),
        Ok(None) => match fetch(AUTO_CREATE_TOPIC.to_owned()).await {
            Ok(Some(route)) => Ok(writable_queues(topic, &route, Some(queues))),
            Ok(None) => Err(anyhow::anyhow!(
                "name server {namesrv} knows neither topic {topic} nor the \
                 auto-create topic {AUTO_CREATE_TOPIC}: create the topic first"
            )),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    };
    client.close_all().await;
    let found = found?;
    if found.is_empty() {
        bail!("the route of topic {topic} from {namesrv} has no writable queue on a master broker");
    }
    Ok(found)
}

/// Creates (or updates) `topic` on the broker at `broker` with `queues`
/// read and write queues, readable and writable, with
/// `UPDATE_AND_CREATE_TOPIC`, signed with `credentials` if given.
///
/// # Errors
/// The broker cannot be reached or refuses (the answer's code and remark).
pub async fn create_topic(
    broker: &str,
    topic: &str,
    queues: u32,
    timeout: Duration,
    credentials: Option<&Credentials>,
) -> Result<()> {
    let queue_nums = i32::try_from(queues).context("queue count beyond i32")?;
    let conn = ClientConnection::connect(broker, &signed_by(credentials))
        .await
        .with_context(|| format!("connect to broker {broker}"))?;
    let request = RemotingCommand::request_with_header(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &CreateTopicRequestHeader {
            topic: topic.to_owned(),
            default_topic: AUTO_CREATE_TOPIC.to_owned(),
            read_queue_nums: queue_nums,
            write_queue_nums: queue_nums,
            perm: PERM_READ_WRITE,
            topic_filter_type: TopicFilterType::SingleTag,
            ..CreateTopicRequestHeader::default()
        },
    );
    let response = conn
        .invoke(request, timeout)
        .await
        .with_context(|| format!("ask broker {broker} to create topic {topic}"));
    conn.close();
    let response = response?;
    if response.response_code() != ResponseCode::SUCCESS {
        bail!(
            "broker {broker} answered code {} to creating topic {topic} with {queues} queues: {}",
            response.response_code().0,
            response.remark.unwrap_or_default()
        );
    }
    Ok(())
}

/// Client settings that sign every request with `credentials`, if given.
pub fn signed_by(credentials: Option<&Credentials>) -> ClientOptions {
    ClientOptions {
        credentials: credentials.cloned(),
        ..ClientOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{BrokerData, QueueData};

    use super::*;

    fn broker(name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        BrokerData {
            broker_name: name.into(),
            broker_addrs: addrs.iter().map(|(id, a)| (*id, (*a).into())).collect(),
            ..BrokerData::default()
        }
    }

    fn queues(name: &str, read: i32, write: i32, perm: i32) -> QueueData {
        QueueData {
            broker_name: name.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            topic_sys_flag: 0,
        }
    }

    #[test]
    fn every_write_queue_of_every_master_is_used() {
        let route = TopicRouteData {
            queue_datas: vec![
                queues("b", 4, 2, 6),
                queues("a", 4, 3, 6),
                // Read-only: skipped.
                queues("c", 4, 4, 4),
                // No master: skipped.
                queues("d", 4, 4, 6),
            ],
            broker_datas: vec![
                broker("a", &[(0, "10.0.0.1:10911")]),
                broker("b", &[(0, "10.0.0.2:10911"), (1, "10.0.0.3:10911")]),
                broker("c", &[(0, "10.0.0.4:10911")]),
                broker("d", &[(1, "10.0.0.5:10911")]),
            ],
            ..TopicRouteData::default()
        };
        let got: Vec<(String, u32)> = writable_queues("T", &route, None)
            .into_iter()
            .map(|d| (d.addr, d.queue_id))
            .collect();
        let want: Vec<(String, u32)> = [
            ("10.0.0.1:10911", 0),
            ("10.0.0.1:10911", 1),
            ("10.0.0.1:10911", 2),
            ("10.0.0.2:10911", 0),
            ("10.0.0.2:10911", 1),
        ]
        .iter()
        .map(|(a, q)| ((*a).to_owned(), *q))
        .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn the_borrowed_route_is_capped_by_the_requested_queues() {
        let route = TopicRouteData {
            queue_datas: vec![queues("a", 8, 8, 7)],
            broker_datas: vec![broker("a", &[(0, "h:1")])],
            ..TopicRouteData::default()
        };
        assert_eq!(writable_queues("T", &route, Some(3)).len(), 3);
        assert_eq!(writable_queues("T", &route, Some(16)).len(), 8);
    }

    #[test]
    fn direct_queues_count_from_zero() {
        let d = direct("h:1", 2);
        assert_eq!(d.len(), 2);
        assert_eq!((d[1].addr.as_str(), d[1].queue_id), ("h:1", 1));
    }
}
