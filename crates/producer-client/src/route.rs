//! Topic routes: fetched from the name servers with `GET_ROUTEINFO_BY_TOPIC`,
//! turned into writable queues, cached, refreshed by the producer's
//! background task and again after a failure.
//!
//! A topic without a route borrows the auto-create topic's (`TBW102`), as
//! RocketMQ's `tryToFindTopicPublishInfo` does: the same brokers, with
//! `min(defaultTopicQueueNums, readQueueNums)` queues each; the broker
//! creates the topic on the first send.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use remoting_net::RemotingClient;
use remoting_protocol::{
    body::{from_json, TopicRouteData},
    header::GetRouteInfoRequestHeader,
    message::flags::is_writeable,
    RemotingCommand, RequestCode, ResponseCode,
};

use crate::{selector::TopicPublishInfo, send::Budget, MessageQueue, ProducerError};

/// The writable queues of `topic` in `route`: for each queue data with the
/// write permission whose broker has a master, queue ids `0..writeQueueNums`
/// (or `0..min(cap, readQueueNums)` when borrowing the auto-create route).
pub(crate) fn publish_info(
    topic: &str,
    route: &TopicRouteData,
    default_queue_cap: Option<i32>,
) -> TopicPublishInfo {
    let masters: HashMap<String, String> = route
        .broker_datas
        .iter()
        .filter_map(|b| Some((b.broker_name.clone(), b.master_addr()?.to_owned())))
        .collect();
    let mut datas: Vec<_> = route.queue_datas.iter().collect();
    datas.sort_by(|a, b| a.broker_name.cmp(&b.broker_name));
    let mut queues = Vec::new();
    for qd in datas {
        if !is_writeable(qd.perm) || !masters.contains_key(&qd.broker_name) {
            continue;
        }
        let count = match default_queue_cap {
            Some(cap) => cap.min(qd.read_queue_nums),
            None => qd.write_queue_nums,
        };
        for queue_id in 0..u32::try_from(count).unwrap_or(0) {
            queues.push(MessageQueue {
                topic: topic.to_owned(),
                broker_name: qd.broker_name.clone(),
                queue_id,
            });
        }
    }
    TopicPublishInfo::new(queues, masters, default_queue_cap.is_some())
}

#[derive(Debug)]
struct Entry {
    info: Arc<TopicPublishInfo>,
    stale: bool,
}

/// The route cache.
#[derive(Debug)]
pub(crate) struct RouteCache {
    namesrv: Vec<String>,
    next_namesrv: AtomicUsize,
    create_topic_key: String,
    default_queue_nums: i32,
    api_timeout: Duration,
    table: Mutex<HashMap<String, Entry>>,
    /// Held while a send fetches a route, so that concurrent sends of an
    /// uncached topic make one query rather than one each.
    fetching: tokio::sync::Mutex<()>,
}

impl RouteCache {
    pub(crate) fn new(
        namesrv: Vec<String>,
        create_topic_key: String,
        default_queue_nums: i32,
        api_timeout: Duration,
    ) -> Self {
        Self {
            namesrv,
            next_namesrv: AtomicUsize::new(0),
            create_topic_key,
            default_queue_nums,
            api_timeout,
            table: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The topic's queues: cached, else fetched (falling back to the
    /// auto-create route). A stale entry is refetched, but still used if the
    /// name servers cannot be asked.
    ///
    /// # Errors
    /// [`ProducerError::NoRoute`] when no route exists; the transport error
    /// when no name server could be asked and nothing is cached.
    pub(crate) async fn get(
        &self,
        client: &RemotingClient,
        topic: &str,
        budget: &Budget,
    ) -> Result<Arc<TopicPublishInfo>, ProducerError> {
        if let Some(info) = self.fresh(topic) {
            return Ok(info);
        }
        let Ok(_fetching) = tokio::time::timeout(budget.remaining(), self.fetching.lock()).await
        else {
            return Err(budget.timed_out(None));
        };
        // Another send may have fetched it while this one waited.
        if let Some(info) = self.fresh(topic) {
            return Ok(info);
        }
        let cached = self.cached(topic);
        let fetched = match self.fetch(client, topic, budget).await {
            Ok(Some(route)) => Ok(Some(publish_info(topic, &route, None))),
            Ok(None) => match self.fetch(client, &self.create_topic_key, budget).await {
                Ok(Some(route)) => Ok(Some(publish_info(
                    topic,
                    &route,
                    Some(self.default_queue_nums),
                ))),
                other => other.map(|_| None),
            },
            Err(e) => Err(e),
        };
        match (fetched, cached) {
            (Ok(Some(info)), _) if !info.queues.is_empty() => Ok(self.store(topic, info)),
            (_, Some((info, _))) if !info.queues.is_empty() => Ok(info),
            (Err(e), _) => Err(e),
            _ => Err(ProducerError::NoRoute {
                topic: topic.to_owned(),
            }),
        }
    }

    /// Makes the next send refetch the topic's route.
    pub(crate) fn mark_stale(&self, topic: &str) {
        if let Some(e) = self
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(topic)
        {
            e.stale = true;
        }
    }

    /// Refetches every cached topic's route; a topic whose route is gone or
    /// cannot be fetched keeps the one it has.
    pub(crate) async fn refresh_all(&self, client: &RemotingClient) {
        let topics: Vec<String> = self
            .table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect();
        for topic in topics {
            match self
                .fetch(client, &topic, &Budget::new(self.api_timeout))
                .await
            {
                Ok(Some(route)) => {
                    let info = publish_info(&topic, &route, None);
                    if !info.queues.is_empty() {
                        self.store(&topic, info);
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(%topic, cause = %e, "route refresh failed"),
            }
        }
    }

    fn fresh(&self, topic: &str) -> Option<Arc<TopicPublishInfo>> {
        match self.cached(topic) {
            Some((info, false)) if !info.queues.is_empty() => Some(info),
            _ => None,
        }
    }

    fn cached(&self, topic: &str) -> Option<(Arc<TopicPublishInfo>, bool)> {
        self.table
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)
            .map(|e| (Arc::clone(&e.info), e.stale))
    }

    fn store(&self, topic: &str, info: TopicPublishInfo) -> Arc<TopicPublishInfo> {
        let info = Arc::new(info);
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let changed = table.get(topic).is_none_or(|old| {
            old.info.queues != info.queues || old.info.broker_addrs != info.broker_addrs
        });
        if changed {
            tracing::debug!(
                %topic,
                queues = info.queues.len(),
                from_default = info.from_default,
                "route updated"
            );
        }
        table.insert(
            topic.to_owned(),
            Entry {
                info: Arc::clone(&info),
                stale: false,
            },
        );
        info
    }

    /// Asks the name servers in turn, starting after the last one used.
    /// `Ok(None)` means a name server said the topic has no route.
    async fn fetch(
        &self,
        client: &RemotingClient,
        topic: &str,
        budget: &Budget,
    ) -> Result<Option<TopicRouteData>, ProducerError> {
        let n = self.namesrv.len();
        let first = self.next_namesrv.load(Ordering::Relaxed);
        let mut last_err = None;
        for i in 0..n {
            let remaining = budget.remaining();
            if remaining.is_zero() {
                break;
            }
            let addr = &self.namesrv[(first + i) % n];
            match self.fetch_from(client, addr, topic, remaining).await {
                Ok(route) => {
                    self.next_namesrv.store((first + i) % n, Ordering::Relaxed);
                    return Ok(route);
                }
                Err(e) => {
                    tracing::debug!(namesrv = %addr, %topic, cause = %e, "route query failed");
                    self.next_namesrv
                        .store((first + i + 1) % n, Ordering::Relaxed);
                    last_err = Some(e);
                }
            }
        }
        Err(last_err.unwrap_or_else(|| budget.timed_out(None)))
    }

    async fn fetch_from(
        &self,
        client: &RemotingClient,
        addr: &str,
        topic: &str,
        remaining: Duration,
    ) -> Result<Option<TopicRouteData>, ProducerError> {
        let timeout = remaining.min(self.api_timeout);
        let timeout_ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &GetRouteInfoRequestHeader {
                topic: topic.to_owned(),
                accept_standard_json_only: Some(true),
            },
        );
        let response =
            match tokio::time::timeout(timeout, client.invoke(addr, request, timeout)).await {
                Ok(Ok(r)) => r,
                Ok(Err(e)) => return Err(ProducerError::from_client(addr, e, timeout_ms)),
                Err(_) => {
                    return Err(ProducerError::Timeout {
                        timeout_ms,
                        broker_addr: Some(addr.to_owned()),
                    })
                }
            };
        match response.response_code() {
            ResponseCode::SUCCESS => {
                from_json(&response.body)
                    .map(Some)
                    .map_err(|e| ProducerError::Protocol {
                        addr: addr.to_owned(),
                        reason: format!("route of topic {topic}: {e}"),
                    })
            }
            ResponseCode::TOPIC_NOT_EXIST => Ok(None),
            code => Err(ProducerError::Broker {
                code: code.0,
                remark: response.remark.unwrap_or_default(),
                broker_addr: addr.to_owned(),
                retry_after_ms: None,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use remoting_protocol::body::{BrokerData, QueueData};

    use super::*;

    fn route() -> TopicRouteData {
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
                queues("a", 8, 2, 6),
                queues("readonly", 8, 8, 4),
                queues("slave-only", 8, 8, 6),
            ],
            broker_datas: vec![
                broker("a", true),
                broker("b", true),
                broker("readonly", true),
                broker("slave-only", false),
            ],
            ..TopicRouteData::default()
        }
    }

    #[test]
    fn queues_are_the_writable_ones_on_brokers_with_a_master() {
        let info = publish_info("T", &route(), None);
        let ids: Vec<(&str, u32)> = info
            .queues
            .iter()
            .map(|q| (q.broker_name.as_str(), q.queue_id))
            .collect();
        assert_eq!(ids, [("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]);
        assert_eq!(info.master_addr("a"), Some("a:10911"));
        assert_eq!(info.master_addr("slave-only"), None);
        assert!(!info.from_default);
        assert!(info.queues.iter().all(|q| q.topic == "T"));
    }

    #[test]
    fn the_auto_create_route_lends_at_most_the_default_queue_count() {
        let info = publish_info("New", &route(), Some(4));
        let per_broker = |name: &str| info.queues.iter().filter(|q| q.broker_name == name).count();
        assert_eq!((per_broker("a"), per_broker("b")), (4, 4));
        assert!(info.from_default);
        assert!(info.queues.iter().all(|q| q.topic == "New"));
    }
}
