//! Topic routes: asked from the name servers with `GET_ROUTEINFO_BY_TOPIC`,
//! and what a route gives a client: the queues it may send to, the queues
//! it may read from, and each broker's master address.

use std::{collections::HashMap, time::Duration};

use remoting_net::RemotingClient;
use remoting_protocol::{
    body::{from_json, TopicRouteData},
    header::GetRouteInfoRequestHeader,
    message::flags::{is_readable, is_writeable},
    RemotingCommand, RequestCode, ResponseCode,
};

use crate::{CallError, Deadline, MessageQueue, NameServers};

/// Asks the name servers in turn for `topic`'s route, each for at most
/// `per_call` and all within `deadline`. `Ok(None)`: a name server said the
/// topic has no route.
///
/// # Errors
/// The last name server's failure when none answered, or
/// [`CallError::Timeout`] when the deadline ran out first.
pub async fn query(
    client: &RemotingClient,
    namesrv: &NameServers,
    topic: &str,
    per_call: Duration,
    deadline: &Deadline,
) -> Result<Option<TopicRouteData>, CallError> {
    let mut last_err = None;
    for (index, addr) in namesrv.in_turn() {
        let remaining = deadline.remaining();
        if remaining.is_zero() {
            break;
        }
        match query_one(client, addr, topic, remaining.min(per_call), deadline).await {
            Ok(route) => {
                namesrv.answered(index);
                return Ok(route);
            }
            Err(e) => {
                tracing::debug!(namesrv = %addr, %topic, cause = %e, "route query failed");
                namesrv.failed(index);
                last_err = Some(e);
            }
        }
    }
    Err(last_err.unwrap_or_else(|| deadline.timed_out(None)))
}

async fn query_one(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    timeout: Duration,
    deadline: &Deadline,
) -> Result<Option<TopicRouteData>, CallError> {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            accept_standard_json_only: Some(true),
        },
    );
    let response = match tokio::time::timeout(timeout, client.invoke(addr, request, timeout)).await
    {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(CallError::from_client(addr, e, deadline.timeout_ms())),
        Err(_) => return Err(deadline.timed_out(Some(addr))),
    };
    match response.response_code() {
        ResponseCode::SUCCESS => {
            from_json(&response.body)
                .map(Some)
                .map_err(|e| CallError::Protocol {
                    addr: addr.to_owned(),
                    reason: format!("route of topic {topic}: {e}"),
                })
        }
        ResponseCode::TOPIC_NOT_EXIST => Ok(None),
        _ => Err(CallError::refused(addr, &response)),
    }
}

/// Whether some broker name of `route` holds queue data of the topic but
/// has no master: a group between masters (its master died, or another is
/// being elected), whose queues are left out until one registers.
pub fn has_headless_broker(route: &TopicRouteData) -> bool {
    let masters = master_addrs(route);
    route
        .queue_datas
        .iter()
        .any(|qd| !masters.contains_key(&qd.broker_name))
}

/// Broker name to master address, for every broker of `route` that has one.
pub fn master_addrs(route: &TopicRouteData) -> HashMap<String, String> {
    route
        .broker_datas
        .iter()
        .filter_map(|b| Some((b.broker_name.clone(), b.master_addr()?.to_owned())))
        .collect()
}

/// The queues of `topic` that `route` lets a producer send to: for each
/// writable queue data whose broker has a master, ids `0..writeQueueNums`,
/// or `0..min(cap, readQueueNums)` when the route is the auto-create
/// topic's, borrowed for a topic that has none yet (`cap` is the producer's
/// `defaultTopicQueueNums`).
pub fn writable_queues(topic: &str, route: &TopicRouteData, cap: Option<u32>) -> Vec<MessageQueue> {
    queues(topic, route, |perm, read, write| {
        if !is_writeable(perm) {
            return 0;
        }
        match cap {
            Some(cap) => cap.min(read),
            None => write,
        }
    })
}

/// The queues of `topic` that `route` lets a consumer read: ids
/// `0..readQueueNums` of each readable queue data whose broker has a master.
pub fn readable_queues(topic: &str, route: &TopicRouteData) -> Vec<MessageQueue> {
    queues(
        topic,
        route,
        |perm, read, _| if is_readable(perm) { read } else { 0 },
    )
}

/// The queues `count(perm, readQueueNums, writeQueueNums)` gives each queue
/// data of a broker with a master, sorted by broker name then id.
fn queues(
    topic: &str,
    route: &TopicRouteData,
    count: impl Fn(i32, u32, u32) -> u32,
) -> Vec<MessageQueue> {
    let masters = master_addrs(route);
    let mut out = Vec::new();
    for qd in &route.queue_datas {
        if !masters.contains_key(&qd.broker_name) {
            continue;
        }
        let read = u32::try_from(qd.read_queue_nums).unwrap_or(0);
        let write = u32::try_from(qd.write_queue_nums).unwrap_or(0);
        out.extend(
            (0..count(qd.perm, read, write))
                .map(|id| MessageQueue::new(topic, qd.broker_name.clone(), id)),
        );
    }
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use remoting_protocol::body::{BrokerData, QueueData};

    use super::*;

    pub(crate) fn route() -> TopicRouteData {
        let broker = |name: &str, master: bool| BrokerData {
            cluster: "C".into(),
            broker_name: name.into(),
            broker_addrs: if master {
                BTreeMap::from([(0, format!("{name}:10911")), (1, format!("{name}:10921"))])
            } else {
                BTreeMap::from([(1, format!("{name}:10921"))])
            },
            ..BrokerData::default()
        };
        let queues = |name: &str, read, write, perm| QueueData {
            broker_name: name.into(),
            read_queue_nums: read,
            write_queue_nums: write,
            perm,
            topic_sys_flag: 0,
        };
        TopicRouteData {
            queue_datas: vec![
                queues("b", 8, 3, 6),
                queues("a", 2, 2, 6),
                queues("readonly", 1, 8, 4),
                queues("writeonly", 8, 1, 2),
                queues("slave-only", 8, 8, 6),
            ],
            broker_datas: vec![
                broker("a", true),
                broker("b", true),
                broker("readonly", true),
                broker("writeonly", true),
                broker("slave-only", false),
            ],
            ..TopicRouteData::default()
        }
    }

    fn ids(queues: &[MessageQueue]) -> Vec<(&str, u32)> {
        queues
            .iter()
            .map(|q| (q.broker_name.as_str(), q.queue_id))
            .collect()
    }

    #[test]
    fn a_broker_with_queues_and_no_master_makes_the_route_headless() {
        let mut r = route();
        assert!(has_headless_broker(&r));
        r.queue_datas.retain(|q| q.broker_name != "slave-only");
        assert!(!has_headless_broker(&r));
    }

    #[test]
    fn producers_get_the_writable_queues_of_brokers_with_a_master() {
        let queues = writable_queues("T", &route(), None);
        assert_eq!(
            ids(&queues),
            [
                ("a", 0),
                ("a", 1),
                ("b", 0),
                ("b", 1),
                ("b", 2),
                ("writeonly", 0)
            ]
        );
        assert!(queues.iter().all(|q| q.topic == "T"));
        let masters = master_addrs(&route());
        assert_eq!(masters.get("a").map(String::as_str), Some("a:10911"));
        assert!(!masters.contains_key("slave-only"));
    }

    #[test]
    fn the_auto_create_route_lends_at_most_the_default_queue_count() {
        let queues = writable_queues("New", &route(), Some(4));
        let per_broker = |name: &str| queues.iter().filter(|q| q.broker_name == name).count();
        assert_eq!((per_broker("a"), per_broker("b")), (2, 4));
        assert!(queues.iter().all(|q| q.topic == "New"));
    }

    #[test]
    fn consumers_get_the_readable_queues_of_brokers_with_a_master() {
        let queues = readable_queues("T", &route());
        assert_eq!(queues.len(), 2 + 8 + 1);
        assert_eq!(ids(&queues)[..3], [("a", 0), ("a", 1), ("b", 0)]);
        assert!(queues.iter().all(|q| q.broker_name != "writeonly"));
    }
}
