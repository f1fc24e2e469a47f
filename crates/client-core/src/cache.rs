//! The producer's route cache: each topic's publish route, fetched from the
//! name servers on first use, refreshed in the background and again after
//! a failure.
//!
//! A route in which a broker name has queues but no master (its master
//! died and another is being elected) is checked again soon, every
//! [`HEADLESS_RECHECK`] for [`HEADLESS_WINDOW`] and less often after that,
//! so the group's queues come back as soon as the new master registers:
//! sends that keep succeeding on other groups would otherwise never make
//! the producer read the route again before its periodic refresh.
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
    time::{Duration, Instant},
};

use remoting_net::RemotingClient;
use remoting_protocol::body::TopicRouteData;

use crate::{
    route::{self, has_headless_broker, master_addrs, writable_queues},
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
    /// Some broker name has queues of the topic but no master.
    pub headless: bool,
    /// Round-robin position; starts at random so that producers spread out.
    position: AtomicUsize,
}

impl PublishRoute {
    /// The publish route of `topic` in `route`; `cap` as for
    /// [`writable_queues`], and set when the route is the auto-create topic's.
    pub fn new(topic: &str, route: &TopicRouteData, cap: Option<u32>) -> Self {
        Self {
            headless: has_headless_broker(route),
            ..Self::from_parts(
                writable_queues(topic, route, cap),
                master_addrs(route),
                cap.is_some(),
            )
        }
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
            headless: false,
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

/// How often a route with a headless broker is read again at first.
pub const HEADLESS_RECHECK: Duration = Duration::from_millis(500);

/// How long a broker may stay headless before its route's checks back off
/// (doubling up to the periodic refresh): a failover takes seconds; a group
/// headless for longer is down, not changing masters.
pub const HEADLESS_WINDOW: Duration = Duration::from_secs(15);

#[derive(Debug)]
struct Entry {
    route: Arc<PublishRoute>,
    stale: bool,
    /// When the route, headless, is to be read again.
    recheck: Option<Recheck>,
}

#[derive(Debug, Clone, Copy)]
struct Recheck {
    /// Since when the route has been headless.
    since: Instant,
    /// The time between checks now.
    step: Duration,
    /// The next check.
    at: Instant,
}

impl Recheck {
    /// The check after `previous` (none: the first), made at `now`, with
    /// checks backing off up to `cap` once the window is over.
    fn next(previous: Option<Self>, now: Instant, cap: Duration) -> Self {
        let (since, step) = match previous {
            None => (now, HEADLESS_RECHECK),
            Some(p) if now.duration_since(p.since) < HEADLESS_WINDOW => (p.since, p.step),
            Some(p) => (p.since, (p.step * 2).min(cap.max(HEADLESS_RECHECK))),
        };
        Self {
            since,
            step,
            at: now + step,
        }
    }
}

/// Publish routes by topic.
#[derive(Debug)]
pub struct RouteCache {
    namesrv: NameServers,
    create_topic_key: String,
    default_queue_nums: u32,
    api_timeout: Duration,
    /// Longest time between checks of a headless route.
    recheck_cap: Duration,
    table: Mutex<HashMap<String, Entry>>,
    /// Woken when a route becomes headless, for the refresher.
    rechecks: tokio::sync::Notify,
    /// Held while a route is fetched, so that concurrent sends of an
    /// uncached topic make one query rather than one each.
    fetching: tokio::sync::Mutex<()>,
}

impl RouteCache {
    /// An empty cache asking `namesrv`, each query for at most
    /// `api_timeout`; a topic without a route borrows `create_topic_key`'s
    /// with at most `default_queue_nums` queues per broker. A headless
    /// route is checked at least every `recheck_cap` (the periodic refresh).
    pub fn new(
        namesrv: NameServers,
        create_topic_key: String,
        default_queue_nums: u32,
        api_timeout: Duration,
        recheck_cap: Duration,
    ) -> Self {
        Self {
            namesrv,
            create_topic_key,
            default_queue_nums,
            api_timeout,
            recheck_cap,
            table: Mutex::default(),
            rechecks: tokio::sync::Notify::new(),
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
            self.refresh(client, &topic).await;
        }
    }

    /// Refetches the routes whose headless check is due by `now`.
    pub async fn refresh_headless(&self, client: &RemotingClient, now: Instant) {
        let due: Vec<String> = self
            .lock()
            .iter()
            .filter(|(_, e)| e.recheck.is_some_and(|r| r.at <= now))
            .map(|(topic, _)| topic.clone())
            .collect();
        for topic in due {
            tracing::debug!(%topic, "a broker of the route has no master; reading it again");
            self.refresh(client, &topic).await;
        }
    }

    /// When the next headless check is due, if a route is headless.
    pub fn next_headless_check(&self) -> Option<Instant> {
        self.lock()
            .values()
            .filter_map(|e| e.recheck.map(|r| r.at))
            .min()
    }

    /// Resolves when a route became headless after the call (so the
    /// refresher can move its next wake-up earlier).
    pub async fn became_headless(&self) {
        self.rechecks.notified().await;
    }

    /// Refetches one topic's route; kept when gone or not fetched (a
    /// headless check then backs off as if it had been made).
    async fn refresh(&self, client: &RemotingClient, topic: &str) {
        let deadline = Deadline::new(self.api_timeout);
        match self.query(client, topic, &deadline).await {
            Ok(Some(route)) => {
                let route = PublishRoute::new(topic, &route, None);
                if !route.queues.is_empty() {
                    self.store(topic, route);
                    return;
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(%topic, cause = %e, "route refresh failed"),
        }
        let cap = self.recheck_cap;
        if let Some(e) = self.lock().get_mut(topic) {
            e.recheck = e
                .recheck
                .map(|r| Recheck::next(Some(r), Instant::now(), cap));
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
        let old = table.get(topic);
        let changed = old.is_none_or(|old| {
            old.route.queues != route.queues || old.route.masters != route.masters
        });
        let previous = old.and_then(|o| o.recheck);
        let recheck = route
            .headless
            .then(|| Recheck::next(previous, Instant::now(), self.recheck_cap));
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
                recheck,
            },
        );
        drop(table);
        // The refresher knows of a check it scheduled itself.
        if recheck.is_some() && previous.is_none() {
            self.rechecks.notify_one();
        }
        route
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.table.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache() -> RouteCache {
        RouteCache::new(
            NameServers::new(vec!["n:1".into()]),
            "TBW102".into(),
            4,
            Duration::from_secs(1),
            Duration::from_secs(30),
        )
    }

    #[test]
    fn master_addrs_name_each_cached_broker_once() {
        let cache = cache();
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

    #[test]
    fn a_headless_route_is_checked_often_during_a_failover_then_less_often() {
        let t0 = Instant::now();
        let cap = Duration::from_secs(30);
        let first = Recheck::next(None, t0, cap);
        assert_eq!(first.at, t0 + HEADLESS_RECHECK);
        // Within the window the step stays.
        let later = t0 + HEADLESS_WINDOW - Duration::from_millis(1);
        let within = Recheck::next(Some(first), later, cap);
        assert_eq!((within.since, within.step), (t0, HEADLESS_RECHECK));
        // After it, the step doubles up to the cap.
        let mut r = within;
        let mut now = t0 + HEADLESS_WINDOW;
        let mut steps = Vec::new();
        for _ in 0..10 {
            r = Recheck::next(Some(r), now, cap);
            steps.push(r.step.as_millis());
            now = r.at;
        }
        assert_eq!(
            steps,
            [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000, 30000]
        );
    }

    #[test]
    fn only_a_headless_route_has_a_check_due() {
        let cache = cache();
        let masters: HashMap<String, String> = [("a".to_owned(), "h:1".to_owned())].into();
        let headless = PublishRoute {
            headless: true,
            ..PublishRoute::from_parts(Vec::new(), masters.clone(), false)
        };
        let before = Instant::now();
        cache.store("T", headless);
        let due = cache.next_headless_check().unwrap();
        assert!(due >= before + HEADLESS_RECHECK, "{due:?}");
        cache.store("T", PublishRoute::from_parts(Vec::new(), masters, false));
        assert_eq!(cache.next_headless_check(), None);
    }
}
