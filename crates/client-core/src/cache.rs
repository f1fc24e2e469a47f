//! The producer's route cache: each topic's publish route, fetched from the
//! name servers on first use, refreshed in the background and again after
//! a failure.
//!
//! A topic without a route borrows the auto-create topic's (`TBW102`), as
//! RocketMQ's `tryToFindTopicPublishInfo` does: the same brokers, with
//! `min(defaultTopicQueueNums, readQueueNums)` queues each; the broker
//! creates the topic on the first send.

use std::{
    collections::{BTreeSet, HashMap},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::Duration,
};

use remoting_net::RemotingClient;
use remoting_protocol::body::TopicRouteData;

use crate::{
    route::{self, master_addrs, writable_queues},
    CallError, Deadline, MessageQueue, NameServers,
};

/// The queues a topic can be sent to and the master address of each broker.
#[derive(Debug)]
pub struct PublishRoute {
    /// Queues, sorted by broker name then id.
    pub queues: Vec<MessageQueue>,
    /// Broker name to master address.
    pub masters: HashMap<String, String>,
    /// Built from the auto-create topic's route because the topic had none.
    pub from_default: bool,
    /// Round-robin position; starts at random so that producers spread out.
    position: AtomicUsize,
}

impl PublishRoute {
    /// The publish route of `topic` in `route`; `cap` as for
    /// [`writable_queues`], and set when the route is the auto-create topic's.
    pub fn new(topic: &str, route: &TopicRouteData, cap: Option<u32>) -> Self {
        Self::from_parts(
            writable_queues(topic, route, cap),
            master_addrs(route),
            cap.is_some(),
        )
    }

    /// A publish route of the given queues and masters.
    pub fn from_parts(
        queues: Vec<MessageQueue>,
        masters: HashMap<String, String>,
        from_default: bool,
    ) -> Self {
        Self {
            queues,
            masters,
            from_default,
            position: AtomicUsize::new(fastrand::usize(..1 << 16)),
        }
    }

    /// The master address of a broker name.
    pub fn master_addr(&self, broker_name: &str) -> Option<&str> {
        self.masters.get(broker_name).map(String::as_str)
    }

    /// The round-robin position to start the next selection at; each call
    /// moves it one on.
    pub fn next_position(&self) -> usize {
        self.position.fetch_add(1, Ordering::Relaxed)
    }
}

#[derive(Debug)]
struct Entry {
    route: Arc<PublishRoute>,
    stale: bool,
}

/// Publish routes by topic.
#[derive(Debug)]
pub struct RouteCache {
    namesrv: NameServers,
    create_topic_key: String,
    default_queue_nums: u32,
    api_timeout: Duration,
    table: Mutex<HashMap<String, Entry>>,
    /// Held while a route is fetched, so that concurrent sends of an
    /// uncached topic make one query rather than one each.
    fetching: tokio::sync::Mutex<()>,
}

impl RouteCache {
    /// An empty cache asking `namesrv`, each query for at most
    /// `api_timeout`; a topic without a route borrows `create_topic_key`'s
    /// with at most `default_queue_nums` queues per broker.
    pub fn new(
        namesrv: NameServers,
        create_topic_key: String,
        default_queue_nums: u32,
        api_timeout: Duration,
    ) -> Self {
        Self {
            namesrv,
            create_topic_key,
            default_queue_nums,
            api_timeout,
            table: Mutex::default(),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The topic's publish route: cached, else fetched (falling back to the
    /// auto-create route). A stale entry is refetched, but still used if the
    /// name servers cannot be asked.
    ///
    /// # Errors
    /// [`CallError::NoRoute`] when no route with a queue exists; the name
    /// servers' failure when none could be asked and nothing is cached;
    /// [`CallError::Timeout`] when the deadline runs out first.
    pub async fn get(
        &self,
        client: &RemotingClient,
        topic: &str,
        deadline: &Deadline,
    ) -> Result<Arc<PublishRoute>, CallError> {
        if let Some(route) = self.fresh(topic) {
            return Ok(route);
        }
        let Ok(_fetching) = tokio::time::timeout(deadline.remaining(), self.fetching.lock()).await
        else {
            return Err(deadline.timed_out(None));
        };
        // Another caller may have fetched it while this one waited.
        if let Some(route) = self.fresh(topic) {
            return Ok(route);
        }
        let cached = self.cached(topic);
        let fetched = match self.query(client, topic, deadline).await {
            Ok(Some(route)) => Ok(Some(PublishRoute::new(topic, &route, None))),
            Ok(None) => match self.query(client, &self.create_topic_key, deadline).await {
                Ok(Some(route)) => Ok(Some(PublishRoute::new(
                    topic,
                    &route,
                    Some(self.default_queue_nums),
                ))),
                other => other.map(|_| None),
            },
            Err(e) => Err(e),
        };
        match (fetched, cached) {
            (Ok(Some(route)), _) if !route.queues.is_empty() => Ok(self.store(topic, route)),
            (_, Some((route, _))) if !route.queues.is_empty() => Ok(route),
            (Err(e), _) => Err(e),
            _ => Err(CallError::NoRoute {
                topic: topic.to_owned(),
            }),
        }
    }

    /// Makes the next [`RouteCache::get`] refetch the topic's route.
    pub fn mark_stale(&self, topic: &str) {
        if let Some(e) = self.lock().get_mut(topic) {
            e.stale = true;
        }
    }

    /// The master address of every broker in a cached route, sorted and
    /// without repeats.
    pub fn master_addrs(&self) -> Vec<String> {
        let table = self.lock();
        let addrs: BTreeSet<&String> = table
            .values()
            .flat_map(|e| e.route.masters.values())
            .collect();
        addrs.into_iter().cloned().collect()
    }

    /// Refetches every cached topic's route; a topic whose route is gone or
    /// cannot be fetched keeps the one it has.
    pub async fn refresh_all(&self, client: &RemotingClient) {
        let topics: Vec<String> = self.lock().keys().cloned().collect();
        for topic in topics {
            let deadline = Deadline::new(self.api_timeout);
            match self.query(client, &topic, &deadline).await {
                Ok(Some(route)) => {
                    let route = PublishRoute::new(&topic, &route, None);
                    if !route.queues.is_empty() {
                        self.store(&topic, route);
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::debug!(%topic, cause = %e, "route refresh failed"),
            }
        }
    }

    async fn query(
        &self,
        client: &RemotingClient,
        topic: &str,
        deadline: &Deadline,
    ) -> Result<Option<TopicRouteData>, CallError> {
        route::query(client, &self.namesrv, topic, self.api_timeout, deadline).await
    }

    fn fresh(&self, topic: &str) -> Option<Arc<PublishRoute>> {
        match self.cached(topic) {
            Some((route, false)) if !route.queues.is_empty() => Some(route),
            _ => None,
        }
    }

    fn cached(&self, topic: &str) -> Option<(Arc<PublishRoute>, bool)> {
        self.lock()
            .get(topic)
            .map(|e| (Arc::clone(&e.route), e.stale))
    }

    fn store(&self, topic: &str, route: PublishRoute) -> Arc<PublishRoute> {
        let route = Arc::new(route);
        let mut table = self.lock();
        let changed = table.get(topic).is_none_or(|old| {
            old.route.queues != route.queues || old.route.masters != route.masters
        });
        if changed {
            tracing::debug!(
                %topic,
                queues = route.queues.len(),
                from_default = route.from_default,
                "route updated"
            );
        }
        table.insert(
            topic.to_owned(),
            Entry {
                route: Arc::clone(&route),
                stale: false,
            },
        );
        route
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_addrs_name_each_cached_broker_once() {
        let cache = RouteCache::new(
            NameServers::new(vec!["n:1".into()]),
            "TBW102".into(),
            4,
            Duration::from_secs(1),
        );
        assert!(cache.master_addrs().is_empty());
        let masters = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(name, addr)| ((*name).to_owned(), (*addr).to_owned()))
                .collect()
        };
        cache.store(
            "A",
            PublishRoute::from_parts(Vec::new(), masters(&[("b", "h:2"), ("a", "h:1")]), false),
        );
        cache.store(
            "B",
            PublishRoute::from_parts(Vec::new(), masters(&[("a", "h:1")]), false),
        );
        assert_eq!(cache.master_addrs(), ["h:1", "h:2"]);
    }
}
