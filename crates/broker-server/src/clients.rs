//! Clients known from their heartbeats: producer and consumer groups (with
//! each consumer group's topics and model), the connection each client
//! uses and when it was last heard from; and which clustering groups' membership
//! changed, so that their members can be told to rebalance
//! (`NOTIFY_CONSUMER_IDS_CHANGED`).

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
    time::{Duration, Instant},
};

use dashmap::DashMap;
use remoting_net::Connection;
use remoting_protocol::{
    body::{ConsumerData, HeartbeatData, SubscriptionData},
    LanguageCode,
};

/// One client's registration.
#[derive(Debug, Clone)]
pub struct ClientInfo {
    /// Client id.
    pub client_id: String,
    /// Connection the client uses.
    pub conn_id: u64,
    /// The connection itself, to send to the client (remoting clients only).
    pub conn: Option<Arc<Connection>>,
    /// Producer groups.
    pub producer_groups: Vec<String>,
    /// Consumer groups.
    pub consumer_groups: Vec<Membership>,
    /// Last heartbeat.
    pub last_seen: Instant,
    /// Where the client's last heartbeat came from and what it declared
    /// itself as.
    pub channel: ClientChannel,
}

/// A client's address, language and version, as its last heartbeat gave
/// them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientChannel {
    /// The address the heartbeat came from (`ip:port`).
    pub addr: String,
    /// The language the client declared.
    pub language: LanguageCode,
    /// The version the client declared (RocketMQ's `MQVersion` ordinal).
    pub version: i32,
}

/// A consumer group as its online members declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerGroupView {
    /// Each member's client id and channel, sorted by client id.
    pub members: Vec<(String, ClientChannel)>,
    /// What the member heard from last declared for the group (its
    /// subscriptions aside).
    pub declared: ConsumerData,
    /// Subscriptions by topic, the latest declaration of each.
    pub subscriptions: BTreeMap<String, SubscriptionData>,
}

/// A client's membership of one consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Membership {
    /// The group.
    pub group: String,
    /// Topics it subscribes to.
    pub topics: BTreeSet<String>,
    /// Broadcasting (every member gets everything: nothing to rebalance).
    pub broadcasting: bool,
    /// The group as the client declared it in its heartbeat.
    pub declared: ConsumerData,
}

/// Clients by id.
#[derive(Debug, Default)]
pub struct ClientRegistry {
    clients: DashMap<String, ClientInfo>,
    /// The client id last registered on each remoting connection.
    by_conn: DashMap<u64, String>,
}

impl ClientRegistry {
    /// Records a heartbeat; returns the clustering groups whose membership
    /// changed with it (the client joined one, came on another connection,
    /// or changed its topics).
    pub fn heartbeat(
        &self,
        data: &HeartbeatData,
        conn_id: u64,
        conn: Option<Arc<Connection>>,
        now: Instant,
    ) -> Vec<String> {
        self.heartbeat_from(data, conn_id, conn, ClientChannel::default(), now)
    }

    /// Records a heartbeat that came over `channel`, as
    /// [`ClientRegistry::heartbeat`] does.
    pub fn heartbeat_from(
        &self,
        data: &HeartbeatData,
        conn_id: u64,
        conn: Option<Arc<Connection>>,
        channel: ClientChannel,
        now: Instant,
    ) -> Vec<String> {
        let consumer_groups: Vec<Membership> = data
            .consumer_data_set
            .iter()
            .map(|c| Membership {
                group: c.group_name.clone(),
                topics: c
                    .subscription_data_set
                    .iter()
                    .map(|s| s.topic.clone())
                    .collect(),
                broadcasting: c.message_model == "BROADCASTING",
                declared: c.clone(),
            })
            .collect();
        let info = ClientInfo {
            client_id: data.client_id.clone(),
            conn_id,
            conn,
            producer_groups: data
                .producer_data_set
                .iter()
                .map(|p| p.group_name.clone())
                .collect(),
            consumer_groups,
            last_seen: now,
            channel,
        };
        // gRPC clients have no connection (nor a connection id) of their own.
        if info.conn.is_some()
            && self
                .by_conn
                .get(&conn_id)
                .is_none_or(|id| *id != data.client_id)
        {
            self.by_conn.insert(conn_id, data.client_id.clone());
        }
        let changed: Vec<String> = match self.clients.insert(data.client_id.clone(), info.clone()) {
            None => {
                tracing::info!(client = %data.client_id, conn = conn_id, "client registered");
                clustering(&info.consumer_groups)
            }
            Some(old) => info
                .consumer_groups
                .iter()
                .filter(|m| !m.broadcasting)
                .filter(|m| {
                    old.conn_id != conn_id
                        || !old
                            .consumer_groups
                            .iter()
                            .any(|o| o.group == m.group && o.topics == m.topics)
                })
                .map(|m| m.group.clone())
                .collect(),
        };
        changed
    }

    /// Forgets a client (all groups, or the named ones); returns the
    /// clustering groups it left. An empty group name counts as none: the
    /// C++ client names both groups and leaves the one it does not mean
    /// empty.
    pub fn unregister(
        &self,
        client_id: &str,
        producer_group: Option<&str>,
        consumer_group: Option<&str>,
    ) -> Vec<String> {
        let producer_group = producer_group.filter(|g| !g.is_empty());
        let consumer_group = consumer_group.filter(|g| !g.is_empty());
        if producer_group.is_none() && consumer_group.is_none() {
            return self
                .clients
                .remove(client_id)
                .map(|(_, c)| clustering(&c.consumer_groups))
                .unwrap_or_default();
        }
        let mut left = Vec::new();
        if let Some(mut c) = self.clients.get_mut(client_id) {
            if let Some(g) = producer_group {
                c.producer_groups.retain(|p| p != g);
            }
            if let Some(g) = consumer_group {
                left = clustering(&c.consumer_groups)
                    .into_iter()
                    .filter(|m| m == g)
                    .collect();
                c.consumer_groups.retain(|m| m.group != g);
            }
        }
        left
    }

    /// Ids of the clients in a consumer group, sorted.
    pub fn consumers_of(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .clients
            .iter()
            .filter(|c| c.consumer_groups.iter().any(|m| m.group == group))
            .map(|c| c.client_id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// The group as its online members declared it; `None` when no member
    /// is online.
    pub fn consumer_group(&self, group: &str) -> Option<ConsumerGroupView> {
        let mut members: Vec<(Instant, String, ClientChannel, ConsumerData)> = self
            .clients
            .iter()
            .filter_map(|c| {
                let m = c.consumer_groups.iter().find(|m| m.group == group)?;
                Some((
                    c.last_seen,
                    c.client_id.clone(),
                    c.channel.clone(),
                    m.declared.clone(),
                ))
            })
            .collect();
        // Oldest first, so that the latest declaration wins.
        members.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut subscriptions = BTreeMap::new();
        for (_, _, _, declared) in &members {
            for s in &declared.subscription_data_set {
                subscriptions.insert(s.topic.clone(), s.clone());
            }
        }
        let declared = ConsumerData {
            subscription_data_set: Vec::new(),
            ..members.last()?.3.clone()
        };
        let mut members: Vec<(String, ClientChannel)> = members
            .into_iter()
            .map(|(_, id, channel, _)| (id, channel))
            .collect();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        Some(ConsumerGroupView {
            members,
            declared,
            subscriptions,
        })
    }

    /// The members of producer group `group` (client id and channel),
    /// sorted by client id; empty when none is online.
    pub fn producer_group(&self, group: &str) -> Vec<(String, ClientChannel)> {
        let mut members: Vec<(String, ClientChannel)> = self
            .clients
            .iter()
            .filter(|c| c.producer_groups.iter().any(|g| g == group))
            .map(|c| (c.client_id.clone(), c.channel.clone()))
            .collect();
        members.sort_by(|a, b| a.0.cmp(&b.0));
        members
    }

    /// Every producer group with its clients: client id, channel and when
    /// its last heartbeat arrived; groups and clients sorted.
    pub fn producers(&self) -> BTreeMap<String, Vec<(String, ClientChannel, Instant)>> {
        let mut groups: BTreeMap<String, Vec<(String, ClientChannel, Instant)>> = BTreeMap::new();
        for c in &self.clients {
            for group in &c.producer_groups {
                groups.entry(group.clone()).or_default().push((
                    c.client_id.clone(),
                    c.channel.clone(),
                    c.last_seen,
                ));
            }
        }
        for members in groups.values_mut() {
            members.sort_by(|a, b| a.0.cmp(&b.0));
        }
        groups
    }

    /// The consumer groups with an online member subscribed to `topic`.
    pub fn groups_consuming(&self, topic: &str) -> BTreeSet<String> {
        self.clients
            .iter()
            .flat_map(|c| {
                c.consumer_groups
                    .iter()
                    .filter(|m| m.topics.contains(topic))
                    .map(|m| m.group.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether a member of the group registered as broadcasting.
    pub fn is_broadcasting(&self, group: &str) -> bool {
        self.clients.iter().any(|c| {
            c.consumer_groups
                .iter()
                .any(|m| m.group == group && m.broadcasting)
        })
    }

    /// The open connections of a consumer group's clients.
    pub fn connections_of(&self, group: &str) -> Vec<Arc<Connection>> {
        self.clients
            .iter()
            .filter(|c| c.consumer_groups.iter().any(|m| m.group == group))
            .filter_map(|c| c.conn.clone())
            .filter(|c| !c.is_closed())
            .collect()
    }

    /// Live remoting connections of the clients in producer group `group`.
    pub fn producer_connections(&self, group: &str) -> Vec<Arc<Connection>> {
        self.clients
            .iter()
            .filter(|c| c.producer_groups.iter().any(|g| g == group))
            .filter_map(|c| c.conn.clone())
            .filter(|c| !c.is_closed())
            .collect()
    }

    /// Forgets the clients of a closed connection; returns the consumer
    /// groups they were in.
    pub fn connection_closed(&self, conn_id: u64) -> Vec<String> {
        self.by_conn.remove(&conn_id);
        let mut left = BTreeSet::new();
        self.clients.retain(|_, c| {
            let keep = c.conn_id != conn_id;
            if !keep {
                left.extend(c.consumer_groups.iter().map(|m| m.group.clone()));
            }
            keep
        });
        left.into_iter().collect()
    }

    /// Forgets clients silent for longer than `max_idle`; returns their ids.
    pub fn expire(&self, now: Instant, max_idle: Duration) -> Vec<String> {
        let mut gone = Vec::new();
        self.clients.retain(|id, c| {
            let keep = now.saturating_duration_since(c.last_seen) <= max_idle;
            if !keep {
                gone.push(id.clone());
            }
            keep
        });
        gone
    }

    /// Calls `f` with the id of the client registered on connection
    /// `conn_id`, if one is (the id stays known until the connection
    /// closes).
    pub fn with_client_id_of<R>(&self, conn_id: u64, f: impl FnOnce(Option<&str>) -> R) -> R {
        match self.by_conn.get(&conn_id) {
            Some(id) => f(Some(id.as_str())),
            None => f(None),
        }
    }

    /// Number of clients.
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    /// Reports whether no client is known.
    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }
}

/// The clustering groups of a membership list.
fn clustering(groups: &[Membership]) -> Vec<String> {
    groups
        .iter()
        .filter(|m| !m.broadcasting)
        .map(|m| m.group.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use remoting_protocol::body::{ConsumerData, ProducerData, SubscriptionData};

    use super::*;

    fn data(client: &str, group: &str, topics: &[&str], model: &str) -> HeartbeatData {
        HeartbeatData {
            client_id: client.into(),
            producer_data_set: vec![ProducerData {
                group_name: "PG".into(),
            }],
            consumer_data_set: vec![ConsumerData {
                group_name: group.into(),
                message_model: model.into(),
                subscription_data_set: topics
                    .iter()
                    .map(|t| SubscriptionData {
                        topic: (*t).into(),
                        ..SubscriptionData::default()
                    })
                    .collect(),
                ..ConsumerData::default()
            }],
            ..HeartbeatData::default()
        }
    }

    #[test]
    fn an_empty_group_name_in_an_unregistration_means_none() {
        let registry = ClientRegistry::default();
        registry.heartbeat(
            &data("c1", "G", &["T"], "CLUSTERING"),
            1,
            None,
            Instant::now(),
        );
        // The C++ client's "unregister consumer G".
        assert_eq!(registry.unregister("c1", Some(""), Some("G")), ["G"]);
        assert!(registry.consumers_of("G").is_empty());
        let c = registry
            .clients
            .get("c1")
            .map(|c| c.producer_groups.clone());
        assert_eq!(c, Some(vec!["PG".to_owned()]), "the producer group stays");
        assert!(registry.unregister("c1", None, None).is_empty());
        assert!(registry.clients.get("c1").is_none());
    }

    #[test]
    fn group_views_answer_what_members_declared() {
        let r = ClientRegistry::default();
        let start = Instant::now();
        let channel = |port: u16| ClientChannel {
            addr: format!("127.0.0.1:{port}"),
            language: LanguageCode::Go,
            version: 317,
        };
        let mut first = data("c2", "G", &["T"], "CLUSTERING");
        first.consumer_data_set[0].consume_from_where = "CONSUME_FROM_FIRST_OFFSET".into();
        r.heartbeat_from(&first, 1, None, channel(1), start);
        let later = data("c1", "G", &["T", "U"], "CLUSTERING");
        r.heartbeat_from(&later, 2, None, channel(2), start + Duration::from_secs(1));
        let view = r.consumer_group("G").unwrap();
        let ids: Vec<&str> = view.members.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["c1", "c2"]);
        assert_eq!(view.members[0].1, channel(2));
        assert_eq!(
            view.declared.consume_from_where, "",
            "the latest heartbeat's"
        );
        assert!(view.declared.subscription_data_set.is_empty());
        assert_eq!(view.subscriptions.keys().collect::<Vec<_>>(), ["T", "U"]);
        assert!(r.consumer_group("Other").is_none());
        assert_eq!(r.producer_group("PG").len(), 2);
        assert!(r.producer_group("G").is_empty());
        assert_eq!(
            r.groups_consuming("U").into_iter().collect::<Vec<_>>(),
            ["G"]
        );
        assert!(r.groups_consuming("V").is_empty());
    }

    #[test]
    fn membership_changes_are_what_rocketmq_notifies() {
        let r = ClientRegistry::default();
        let now = Instant::now();
        let hb = |client, topics: &[&str], conn, model| {
            r.heartbeat(&data(client, "G", topics, model), conn, None, now)
        };
        assert_eq!(hb("c1", &["T"], 1, "CLUSTERING"), ["G"], "joined");
        assert!(hb("c1", &["T"], 1, "CLUSTERING").is_empty(), "same again");
        assert_eq!(
            hb("c1", &["T", "U"], 1, "CLUSTERING"),
            ["G"],
            "topics changed"
        );
        assert_eq!(
            hb("c1", &["T", "U"], 2, "CLUSTERING"),
            ["G"],
            "new connection"
        );
        assert!(hb("b1", &["T"], 3, "BROADCASTING").is_empty(), "broadcast");
        assert_eq!(r.consumers_of("G"), ["b1", "c1"]);
        assert_eq!(r.connection_closed(2), ["G"]);
        assert_eq!(r.consumers_of("G"), ["b1"]);
    }
}

/// What the broker sends a gRPC client on its telemetry stream.
pub type TelemetrySender =
    tokio::sync::mpsc::Sender<Result<grpc_protocol::v2::TelemetryCommand, tonic::Status>>;

/// One gRPC producer's telemetry stream.
#[derive(Debug, Clone)]
pub struct TelemetryStream {
    /// The client's id (`x-mq-client-id`).
    pub client_id: String,
    /// Where commands to the client go.
    pub tx: TelemetrySender,
}

/// The telemetry streams of gRPC producers, by the topics their settings
/// publish to: how the broker asks them what became of a transaction.
#[derive(Debug, Default)]
pub struct TelemetryProducers {
    by_topic: DashMap<String, Vec<(u64, TelemetryStream)>>,
    topics_of: DashMap<u64, Vec<String>>,
    next_stream: std::sync::atomic::AtomicU64,
}

impl TelemetryProducers {
    /// A new id for a telemetry stream.
    pub fn new_stream_id(&self) -> u64 {
        self.next_stream
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    /// Records that stream `id` publishes to `topics` (replacing what its
    /// earlier settings said).
    pub fn register(&self, id: u64, topics: Vec<String>, stream: &TelemetryStream) {
        self.unregister(id);
        for topic in &topics {
            self.by_topic
                .entry(topic.clone())
                .or_default()
                .push((id, stream.clone()));
        }
        self.topics_of.insert(id, topics);
    }

    /// Forgets stream `id` (it closed).
    pub fn unregister(&self, id: u64) {
        let Some((_, topics)) = self.topics_of.remove(&id) else {
            return;
        };
        for topic in topics {
            if let dashmap::mapref::entry::Entry::Occupied(mut e) = self.by_topic.entry(topic) {
                e.get_mut().retain(|(sid, _)| *sid != id);
                if e.get().is_empty() {
                    e.remove();
                }
            }
        }
    }

    /// The open streams of producers publishing to `topic`.
    pub fn streams_of(&self, topic: &str) -> Vec<TelemetryStream> {
        self.by_topic
            .get(topic)
            .map(|v| v.iter().map(|(_, s)| s.clone()).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod telemetry_tests {
    use super::*;

    fn stream(
        client: &str,
    ) -> (
        TelemetryStream,
        tokio::sync::mpsc::Receiver<Result<grpc_protocol::v2::TelemetryCommand, tonic::Status>>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        (
            TelemetryStream {
                client_id: client.into(),
                tx,
            },
            rx,
        )
    }

    #[test]
    fn streams_are_found_by_topic_until_they_close() {
        let producers = TelemetryProducers::default();
        let (a, _ra) = stream("a");
        let (b, _rb) = stream("b");
        let ia = producers.new_stream_id();
        let ib = producers.new_stream_id();
        producers.register(ia, vec!["T1".into(), "T2".into()], &a);
        producers.register(ib, vec!["T1".into()], &b);
        let ids = |t: &str| -> Vec<String> {
            producers
                .streams_of(t)
                .into_iter()
                .map(|s| s.client_id)
                .collect()
        };
        assert_eq!(ids("T1"), ["a", "b"]);
        assert_eq!(ids("T2"), ["a"]);
        // New settings replace the old topics.
        producers.register(ia, vec!["T3".into()], &a);
        assert_eq!(ids("T1"), ["b"]);
        assert!(ids("T2").is_empty());
        producers.unregister(ib);
        producers.unregister(ia);
        assert!(ids("T1").is_empty() && ids("T3").is_empty());
        assert!(producers.by_topic.is_empty() && producers.topics_of.is_empty());
    }
}
