//! Tests of the route registry: registration, unregistration, expiry and
//! connection loss, checked through the route and cluster views.

use std::collections::BTreeMap;

use remoting_protocol::body::{TopicConfig, TopicConfigSerializeWrapper};

use super::*;

const CLUSTER: &str = "DefaultCluster";

fn header(name: &str, addr: &str, id: i64) -> RegisterBrokerRequestHeader {
    RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: CLUSTER.into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        ..RegisterBrokerRequestHeader::default()
    }
}

fn unregister(name: &str, addr: &str, id: i64) -> UnregisterBrokerRequestHeader {
    UnregisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: CLUSTER.into(),
        broker_id: id,
    }
}

fn body(topics: &[(&str, i32)]) -> RegisterBrokerBody {
    body_with_version(topics, 0)
}

fn body_with_version(topics: &[(&str, i32)], state_version: i64) -> RegisterBrokerBody {
    let topic_config_table: BTreeMap<String, TopicConfig> = topics
        .iter()
        .map(|&(topic, queues)| {
            let config = TopicConfig {
                topic_name: topic.into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                ..TopicConfig::default()
            };
            (topic.to_owned(), config)
        })
        .collect();
    RegisterBrokerBody {
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            topic_config_table,
            data_version: DataVersion {
                state_version,
                ..DataVersion::default()
            },
            ..TopicConfigSerializeWrapper::default()
        },
        filter_server_list: Vec::new(),
    }
}

fn deleting_registry() -> RouteRegistry {
    RouteRegistry::from_config(&NamesrvConfig {
        delete_topic_with_broker_registration: true,
        ..NamesrvConfig::default()
    })
}

#[test]
fn a_registered_master_serves_its_topics() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let result = reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("T1", 8), ("T2", 4)]),
        now,
        Some(1),
    );
    assert_eq!(result, RegisterResult::default());

    let route = reg.route("T1").unwrap();
    assert_eq!(route.queue_datas.len(), 1);
    let queue = &route.queue_datas[0];
    assert_eq!(queue.broker_name, "broker-a");
    assert_eq!(
        (queue.read_queue_nums, queue.write_queue_nums, queue.perm),
        (8, 8, 6)
    );
    assert_eq!(route.broker_datas.len(), 1);
    assert_eq!(route.broker_datas[0].cluster, CLUSTER);
    assert_eq!(route.broker_datas[0].master_addr(), Some("10.0.0.1:10911"));
    assert_eq!(reg.route("T2").unwrap().queue_datas[0].write_queue_nums, 4);
    assert_eq!(reg.route("T3"), None);
    assert_eq!(reg.topic_names(), ["T1", "T2"]);

    let info = reg.cluster_info();
    assert!(info.cluster_addr_table[CLUSTER].contains("broker-a"));
    assert_eq!(info.broker_addr_table["broker-a"].broker_addrs.len(), 1);
}

#[test]
fn a_slave_learns_its_master_and_adds_no_queue_data() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let slave_first = reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 1),
        &body(&[("T1", 8), ("SLAVE_ONLY", 2)]),
        now,
        None,
    );
    assert_eq!(slave_first, RegisterResult::default());
    assert_eq!(reg.route("T1"), None);

    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("T1", 8)]),
        now,
        None,
    );
    let slave = reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 1),
        &body(&[("T1", 8), ("SLAVE_ONLY", 2)]),
        now,
        None,
    );
    assert_eq!(slave.master_addr.as_deref(), Some("10.0.0.1:10911"));
    assert_eq!(slave.ha_server_addr.as_deref(), Some("10.0.0.1:10911-ha"));
    assert_eq!(reg.route("SLAVE_ONLY"), None);
    let route = reg.route("T1").unwrap();
    assert_eq!(
        route.broker_datas[0].broker_addrs,
        BTreeMap::from([
            (0, "10.0.0.1:10911".to_owned()),
            (1, "10.0.0.2:10911".to_owned())
        ])
    );
}

#[test]
fn two_brokers_serving_a_topic_are_listed_by_broker_name() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("T", 2)]),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("T", 4)]),
        now,
        None,
    );
    let route = reg.route("T").unwrap();
    let queue_names: Vec<&str> = route
        .queue_datas
        .iter()
        .map(|q| q.broker_name.as_str())
        .collect();
    let broker_names: Vec<&str> = route
        .broker_datas
        .iter()
        .map(|b| b.broker_name.as_str())
        .collect();
    assert_eq!(queue_names, ["broker-a", "broker-b"]);
    assert_eq!(broker_names, ["broker-a", "broker-b"]);
    assert_eq!(route.queue_datas[1].write_queue_nums, 2);
    assert_eq!(reg.cluster_info().cluster_addr_table[CLUSTER].len(), 2);
}

/// A registration body whose data version has `counter`.
fn body_with_counter(topics: &[(&str, i32)], counter: i64) -> RegisterBrokerBody {
    let mut body = body(topics);
    body.topic_config_serialize_wrapper.data_version.counter = counter;
    body
}

fn perms(reg: &RouteRegistry, topic: &str) -> Vec<(String, i32)> {
    reg.route(topic)
        .map(|route| {
            route
                .queue_datas
                .into_iter()
                .map(|q| (q.broker_name, q.perm))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn re_registration_replaces_the_queue_data_of_listed_topics() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let master = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(&master, &body_with_counter(&[("T", 4)], 1), now, None);
    reg.register_broker(&master, &body_with_counter(&[("T", 16)], 2), now, None);
    let route = reg.route("T").unwrap();
    assert_eq!(route.queue_datas.len(), 1);
    assert_eq!(route.queue_datas[0].read_queue_nums, 16);
}

#[test]
fn re_registration_with_an_unchanged_data_version_keeps_existing_queue_data() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let master = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(&master, &body_with_counter(&[("T", 4)], 1), now, None);
    // Same version: T is kept as it is, the new topic U is still added.
    reg.register_broker(
        &master,
        &body_with_counter(&[("T", 16), ("U", 8)], 1),
        now,
        None,
    );
    assert_eq!(reg.route("T").unwrap().queue_datas[0].read_queue_nums, 4);
    assert_eq!(reg.route("U").unwrap().queue_datas[0].read_queue_nums, 8);

    // After the broker name expired, its next registration is a first one.
    reg.unregister_broker(&unregister("broker-a", "10.0.0.1:10911", 0));
    reg.register_broker(&master, &body_with_counter(&[("T", 16)], 1), now, None);
    assert_eq!(reg.route("T").unwrap().queue_datas[0].read_queue_nums, 16);
}

#[test]
fn write_perm_is_wiped_and_added_per_broker_name() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let master_a = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(
        &master_a,
        &body_with_counter(&[("T", 4), ("U", 4)], 1),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("T", 4)]),
        now,
        None,
    );

    assert_eq!(reg.wipe_write_perm("broker-a"), 2);
    assert_eq!(
        perms(&reg, "T"),
        [("broker-a".to_owned(), 4), ("broker-b".to_owned(), 6)]
    );
    assert_eq!(perms(&reg, "U"), [("broker-a".to_owned(), 4)]);
    assert_eq!(reg.wipe_write_perm("broker-a"), 2);
    assert_eq!(perms(&reg, "U"), [("broker-a".to_owned(), 4)]);

    reg.register_broker(
        &master_a,
        &body_with_counter(&[("T", 4), ("U", 4)], 1),
        now,
        None,
    );
    assert_eq!(perms(&reg, "U"), [("broker-a".to_owned(), 4)]);
    reg.register_broker(
        &master_a,
        &body_with_counter(&[("T", 4), ("U", 4)], 2),
        now,
        None,
    );
    assert_eq!(perms(&reg, "U"), [("broker-a".to_owned(), 6)]);

    assert_eq!(reg.wipe_write_perm("broker-b"), 1);
    assert_eq!(reg.add_write_perm("broker-b"), 1);
    assert_eq!(
        perms(&reg, "T"),
        [("broker-a".to_owned(), 6), ("broker-b".to_owned(), 6)]
    );
    assert_eq!(reg.add_write_perm("unknown"), 0);
    assert_eq!(reg.wipe_write_perm("unknown"), 0);
}

#[test]
fn topics_are_listed_per_cluster_and_deleted_per_cluster_or_everywhere() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("A", 4), ("SHARED", 4)]),
        now,
        None,
    );
    let other = RegisterBrokerRequestHeader {
        cluster_name: "Other".into(),
        ..header("broker-b", "10.0.0.3:10911", 0)
    };
    reg.register_broker(&other, &body(&[("B", 4), ("SHARED", 4)]), now, None);

    assert_eq!(reg.cluster_topic_names(CLUSTER), ["A", "SHARED"]);
    assert_eq!(reg.cluster_topic_names("Other"), ["B", "SHARED"]);
    assert!(reg.cluster_topic_names("None").is_empty());

    assert!(reg.delete_topic("SHARED", Some("Other")));
    assert_eq!(perms(&reg, "SHARED"), [("broker-a".to_owned(), 6)]);
    assert!(!reg.delete_topic("SHARED", Some("Other")));
    assert!(!reg.delete_topic("SHARED", Some("None")));
    assert!(reg.delete_topic("SHARED", Some(CLUSTER)));
    assert_eq!(reg.route("SHARED"), None);
    assert!(reg.delete_topic("B", None));
    assert!(!reg.delete_topic("B", None));
    assert_eq!(reg.topic_names(), ["A"]);
    // The brokers and clusters stay.
    assert_eq!(reg.cluster_info().cluster_addr_table.len(), 2);
}

#[test]
fn re_registration_without_a_topic_drops_it_when_deletion_is_on() {
    let reg = deleting_registry();
    let now = Instant::now();
    let master_a = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(
        &master_a,
        &body(&[("KEEP", 4), ("SHARED", 4), ("GONE", 4)]),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("SHARED", 4)]),
        now,
        None,
    );

    reg.register_broker(&master_a, &body(&[("KEEP", 4)]), now, None);
    assert_eq!(reg.route("GONE"), None);
    let shared = reg.route("SHARED").unwrap();
    assert_eq!(shared.queue_datas.len(), 1);
    assert_eq!(shared.queue_datas[0].broker_name, "broker-b");
    assert_eq!(shared.broker_datas.len(), 1);
    assert!(reg.route("KEEP").is_some());
}

#[test]
fn re_registration_without_a_topic_keeps_it_by_default_as_rocketmq_does() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let master = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(&master, &body(&[("OLD", 4), ("OTHER", 4)]), now, None);
    // A Java broker announces a new topic with a registration that lists
    // only that topic.
    reg.register_broker(&master, &body(&[("NEW", 4)]), now, None);
    assert_eq!(reg.topic_names(), ["NEW", "OLD", "OTHER"]);
}

#[test]
fn unregistering_the_last_address_removes_the_broker_and_its_only_topics() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("A", 4), ("S", 4)]),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 1),
        &body(&[]),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("S", 4)]),
        now,
        None,
    );

    assert!(reg.unregister_broker(&unregister("broker-a", "10.0.0.1:10911", 0)));
    // The slave keeps the broker name and its queue data alive.
    let route = reg.route("A").unwrap();
    assert_eq!(route.broker_datas[0].master_addr(), None);
    assert_eq!(route.broker_datas[0].broker_addrs.len(), 1);

    assert!(reg.unregister_broker(&unregister("broker-a", "10.0.0.2:10911", 1)));
    assert_eq!(reg.route("A"), None);
    let shared = reg.route("S").unwrap();
    assert_eq!(shared.queue_datas.len(), 1);
    assert_eq!(shared.queue_datas[0].broker_name, "broker-b");
    let info = reg.cluster_info();
    assert!(!info.broker_addr_table.contains_key("broker-a"));
    assert_eq!(info.cluster_addr_table[CLUSTER].len(), 1);

    assert!(reg.unregister_broker(&unregister("broker-b", "10.0.0.3:10911", 0)));
    assert_eq!(reg.cluster_info(), ClusterInfo::default());
    assert!(reg.topic_names().is_empty());
    assert!(!reg.unregister_broker(&unregister("broker-b", "10.0.0.3:10911", 0)));
}

#[test]
fn brokers_expire_after_their_timeout_and_not_before() {
    let reg = RouteRegistry::new();
    let t0 = Instant::now();
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("A", 4)]),
        t0,
        None,
    );
    let mut short = header("broker-b", "10.0.0.3:10911", 0);
    short.heartbeat_timeout_millis = Some(10_000);
    reg.register_broker(&short, &body(&[("B", 4)]), t0, None);

    assert!(reg.scan_expired(t0 + Duration::from_secs(10)).is_empty());
    assert_eq!(
        reg.scan_expired(t0 + Duration::from_millis(10_001)),
        ["10.0.0.3:10911"]
    );
    assert_eq!(reg.route("B"), None);
    assert!(reg.route("A").is_some());

    // Renewing the registration restarts the default 120 s clock.
    let t1 = t0 + Duration::from_secs(60);
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("A", 4)]),
        t1,
        None,
    );
    assert!(reg.scan_expired(t0 + Duration::from_secs(121)).is_empty());
    assert!(reg.scan_expired(t1 + Duration::from_secs(120)).is_empty());
    assert_eq!(
        reg.scan_expired(t1 + Duration::from_millis(120_001)),
        ["10.0.0.1:10911"]
    );
    assert_eq!(reg.cluster_info(), ClusterInfo::default());
}

#[test]
fn non_positive_timeouts_fall_back_to_the_configured_expiry() {
    let reg = RouteRegistry::from_config(&NamesrvConfig {
        broker_channel_expired_time: 3000,
        ..NamesrvConfig::default()
    });
    let t0 = Instant::now();
    let mut h = header("broker-a", "10.0.0.1:10911", 0);
    h.heartbeat_timeout_millis = Some(-5);
    reg.register_broker(&h, &body(&[("A", 4)]), t0, None);
    assert!(reg.scan_expired(t0 + Duration::from_secs(3)).is_empty());
    assert_eq!(reg.scan_expired(t0 + Duration::from_millis(3001)).len(), 1);
}

#[test]
fn closing_a_connection_removes_only_the_brokers_registered_over_it() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &body(&[("A", 4)]),
        now,
        Some(7),
    );
    reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 1),
        &body(&[]),
        now,
        Some(7),
    );
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("B", 4)]),
        now,
        Some(8),
    );

    assert!(reg.connection_closed(99).is_empty());
    let mut gone = reg.connection_closed(7);
    gone.sort();
    assert_eq!(gone, ["10.0.0.1:10911", "10.0.0.2:10911"]);
    assert_eq!(reg.route("A"), None);
    assert!(reg.route("B").is_some());
    assert!(reg.connection_closed(7).is_empty());
}

#[test]
fn a_promoted_slave_moves_its_address_to_the_master_id() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 1),
        &body(&[]),
        now,
        None,
    );
    reg.register_broker(
        &header("broker-a", "10.0.0.2:10911", 0),
        &body(&[("T", 4)]),
        now,
        None,
    );
    let route = reg.route("T").unwrap();
    assert_eq!(
        route.broker_datas[0].broker_addrs,
        BTreeMap::from([(0, "10.0.0.2:10911".to_owned())])
    );
}

#[test]
fn a_stale_address_cannot_take_over_a_broker_id_with_a_newer_state() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let current = header("broker-a", "10.0.0.1:10911", 0);
    reg.register_broker(&current, &body_with_version(&[("T", 4)], 5), now, None);
    let stale = header("broker-a", "10.0.0.9:10911", 0);
    reg.register_broker(&stale, &body_with_version(&[("T", 1)], 4), now, None);
    let route = reg.route("T").unwrap();
    assert_eq!(route.broker_datas[0].master_addr(), Some("10.0.0.1:10911"));
    assert_eq!(route.queue_datas[0].write_queue_nums, 4);
    // The rejected address has no registration to expire.
    assert_eq!(
        reg.scan_expired(now + Duration::from_secs(121)),
        ["10.0.0.1:10911"]
    );

    reg.register_broker(&current, &body_with_version(&[("T", 4)], 5), now, None);
    reg.register_broker(&stale, &body_with_version(&[("T", 1)], 6), now, None);
    let route = reg.route("T").unwrap();
    assert_eq!(route.broker_datas[0].master_addr(), Some("10.0.0.9:10911"));
    assert_eq!(route.queue_datas[0].write_queue_nums, 1);
}

#[test]
fn filter_servers_of_involved_brokers_appear_in_the_route() {
    let reg = RouteRegistry::new();
    let now = Instant::now();
    let mut with_filters = body(&[("T", 4)]);
    with_filters.filter_server_list = vec!["10.0.0.1:30000".into()];
    reg.register_broker(
        &header("broker-a", "10.0.0.1:10911", 0),
        &with_filters,
        now,
        None,
    );
    reg.register_broker(
        &header("broker-b", "10.0.0.3:10911", 0),
        &body(&[("T", 4)]),
        now,
        None,
    );
    let route = reg.route("T").unwrap();
    assert_eq!(
        route.filter_server_table,
        BTreeMap::from([(
            "10.0.0.1:10911".to_owned(),
            vec!["10.0.0.1:30000".to_owned()]
        )])
    );
}
