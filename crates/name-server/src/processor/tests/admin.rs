//! The admin codes: topic lists, topic deletion, write permission and
//! the KV config, through `RemotingCommand`.

use super::*;

/// Registers `broker-b` of cluster `OtherCluster` as a master serving
/// `topics`.
fn register_other_cluster(p: &NameServerProcessor, topics: &[&str]) {
    let body = register_body(topics);
    let header = RegisterBrokerRequestHeader {
        broker_name: "broker-b".into(),
        broker_addr: "10.0.0.3:10911".into(),
        cluster_name: "OtherCluster".into(),
        body_crc32: Some(masked_crc32(&body)),
        ..register_header("10.0.0.3:10911", 0)
    };
    let req =
        RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(body);
    assert_eq!(handle(p, &req).response_code(), ResponseCode::SUCCESS);
}

fn topic_list_of(resp: &RemotingCommand) -> Vec<String> {
    assert_eq!(
        resp.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        resp.remark
    );
    from_json::<TopicList>(&resp.body)
        .unwrap()
        .topic_list
        .into_iter()
        .collect()
}

/// The perm of `broker`'s queues of `topic` in the route a client gets.
fn route_perm(p: &NameServerProcessor, topic: &str, broker: &str) -> i32 {
    let resp = handle(p, &route_request(topic, 479, None));
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    let route: TopicRouteData = from_json(&resp.body).unwrap();
    route
        .queue_datas
        .iter()
        .find(|q| q.broker_name == broker)
        .unwrap_or_else(|| panic!("no queue data of {broker} in {route:?}"))
        .perm
}

fn wipe(p: &NameServerProcessor, broker: &str) -> i32 {
    let req = RemotingCommand::request_with_header(
        RequestCode::WIPE_WRITE_PERM_OF_BROKER,
        &WipeWritePermOfBrokerRequestHeader {
            broker_name: broker.into(),
        },
    );
    let resp = handle(p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert_eq!(resp.remark, None);
    resp.decode_header::<WipeWritePermOfBrokerResponseHeader>()
        .unwrap()
        .wipe_topic_count
}

fn add(p: &NameServerProcessor, broker: &str) -> i32 {
    let req = RemotingCommand::request_with_header(
        RequestCode::ADD_WRITE_PERM_OF_BROKER,
        &AddWritePermOfBrokerRequestHeader {
            broker_name: broker.into(),
        },
    );
    let resp = handle(p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    resp.decode_header::<AddWritePermOfBrokerResponseHeader>()
        .unwrap()
        .add_topic_count
}

#[test]
fn all_topics_are_listed_sorted_without_a_broker_address() {
    let p = processor();
    let req = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER);
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert_eq!(body_text(&resp), r#"{"topicList":[]}"#);

    handle(&p, &register_request(MASTER, 0, &["TopicB", "TopicA"]));
    register_other_cluster(&p, &["TopicC", "TopicA"]);
    let resp = handle(&p, &req);
    assert_eq!(
        body_text(&resp),
        r#"{"topicList":["TopicA","TopicB","TopicC"]}"#
    );
}

#[test]
fn topics_by_cluster_lists_only_that_clusters_brokers_topics() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["A", "SHARED"]));
    register_other_cluster(&p, &["B", "SHARED"]);
    let by_cluster = |cluster: &str| {
        let req = RemotingCommand::request_with_header(
            RequestCode::GET_TOPICS_BY_CLUSTER,
            &GetTopicsByClusterRequestHeader {
                cluster: cluster.into(),
            },
        );
        topic_list_of(&handle(&p, &req))
    };
    assert_eq!(by_cluster("DefaultCluster"), ["A", "SHARED"]);
    assert_eq!(by_cluster("OtherCluster"), ["B", "SHARED"]);
    assert!(by_cluster("NoSuchCluster").is_empty());

    let resp = handle(
        &p,
        &RemotingCommand::request(RequestCode::GET_TOPICS_BY_CLUSTER),
    );
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = resp.remark.unwrap();
    assert!(
        remark.contains("GET_TOPICS_BY_CLUSTER") && remark.contains("`cluster`"),
        "{remark}"
    );
}

#[test]
fn delete_topic_in_namesrv_forgets_the_topic_everywhere_or_in_one_cluster() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["T", "KEEP"]));
    register_other_cluster(&p, &["T"]);
    let delete = |topic: &str, cluster: Option<&str>| {
        let req = RemotingCommand::request_with_header(
            RequestCode::DELETE_TOPIC_IN_NAMESRV,
            &DeleteTopicFromNamesrvRequestHeader {
                topic: topic.into(),
                cluster_name: cluster.map(str::to_owned),
            },
        );
        let resp = handle(&p, &req);
        assert_eq!(resp.response_code(), ResponseCode::SUCCESS, "{topic}");
        assert_eq!(resp.remark, None);
    };

    delete("T", Some("OtherCluster"));
    let route = p.registry().route("T").unwrap();
    let names: Vec<&str> = route
        .queue_datas
        .iter()
        .map(|q| q.broker_name.as_str())
        .collect();
    assert_eq!(names, ["broker-a"]);

    // Unknown topics and clusters are no error.
    delete("NOPE", None);
    delete("T", Some("NoSuchCluster"));
    assert!(p.registry().route("T").is_some());

    // An empty cluster name means every cluster.
    delete("T", Some(""));
    assert_eq!(p.registry().route("T"), None);
    let resp = handle(&p, &route_request("T", 479, None));
    assert_eq!(resp.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(p.registry().route("KEEP").is_some());

    // The broker still has the topic: its next registration brings it back.
    handle(&p, &register_request(MASTER, 0, &["T", "KEEP"]));
    assert!(p.registry().route("T").is_some());

    let resp = handle(
        &p,
        &RemotingCommand::request(RequestCode::DELETE_TOPIC_IN_NAMESRV),
    );
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("`topic`"));
}

#[test]
fn a_wiped_broker_has_no_write_perm_in_routes_until_write_perm_is_added() {
    let p = processor();
    handle(&p, &register_request_versioned(MASTER, 0, &["T", "U"], 1));
    register_other_cluster(&p, &["T"]);
    assert_eq!(route_perm(&p, "T", "broker-a"), 6);

    assert_eq!(wipe(&p, "broker-a"), 2);
    assert_eq!(route_perm(&p, "T", "broker-a"), 4);
    assert_eq!(route_perm(&p, "U", "broker-a"), 4);
    assert_eq!(route_perm(&p, "T", "broker-b"), 6);
    // Old clients' legacy route JSON shows the same.
    let resp = handle(&p, &route_request("U", 0, None));
    assert!(
        body_text(&resp).contains(r#""perm":4"#),
        "{}",
        body_text(&resp)
    );

    // A renewal with the same data version keeps the wiped permission, and
    // so does a slave's registration.
    handle(&p, &register_request_versioned(MASTER, 0, &["T", "U"], 1));
    handle(&p, &register_request_versioned(SLAVE, 1, &["T", "U"], 2));
    assert_eq!(route_perm(&p, "T", "broker-a"), 4);

    assert_eq!(add(&p, "broker-a"), 2);
    assert_eq!(route_perm(&p, "T", "broker-a"), 6);
    assert_eq!(route_perm(&p, "U", "broker-a"), 6);
    assert_eq!(wipe(&p, "no-such-broker"), 0);
    assert_eq!(add(&p, "no-such-broker"), 0);
}

#[test]
fn a_registration_with_a_changed_data_version_overwrites_a_wiped_perm() {
    let p = processor();
    handle(&p, &register_request_versioned(MASTER, 0, &["T"], 1));
    assert_eq!(wipe(&p, "broker-a"), 1);
    assert_eq!(route_perm(&p, "T", "broker-a"), 4);
    handle(&p, &register_request_versioned(MASTER, 0, &["T"], 2));
    assert_eq!(route_perm(&p, "T", "broker-a"), 6);
}

#[test]
fn write_perm_requests_without_a_broker_name_are_refused() {
    let p = processor();
    for (code, name) in [
        (
            RequestCode::WIPE_WRITE_PERM_OF_BROKER,
            "WIPE_WRITE_PERM_OF_BROKER",
        ),
        (
            RequestCode::ADD_WRITE_PERM_OF_BROKER,
            "ADD_WRITE_PERM_OF_BROKER",
        ),
    ] {
        let resp = handle(&p, &RemotingCommand::request(code));
        assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
        let remark = resp.remark.unwrap();
        assert!(
            remark.contains(name) && remark.contains("`brokerName`"),
            "{remark}"
        );
        assert!(!resp.ext_fields.contains_key("wipeTopicCount"));
        assert!(!resp.ext_fields.contains_key("addTopicCount"));
    }
}

fn put_kv(p: &NameServerProcessor, namespace: &str, key: &str, value: &str) {
    let req = RemotingCommand::request_with_header(
        RequestCode::PUT_KV_CONFIG,
        &PutKvConfigRequestHeader {
            namespace: namespace.into(),
            key: key.into(),
            value: value.into(),
        },
    );
    let resp = handle(p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert_eq!(resp.remark, None);
}

fn get_kv(p: &NameServerProcessor, namespace: &str, key: &str) -> RemotingCommand {
    let req = RemotingCommand::request_with_header(
        RequestCode::GET_KV_CONFIG,
        &GetKvConfigRequestHeader {
            namespace: namespace.into(),
            key: key.into(),
        },
    );
    handle(p, &req)
}

fn kv_list(p: &NameServerProcessor, namespace: &str) -> RemotingCommand {
    let req = RemotingCommand::request_with_header(
        RequestCode::GET_KVLIST_BY_NAMESPACE,
        &GetKvListByNamespaceRequestHeader {
            namespace: namespace.into(),
        },
    );
    handle(p, &req)
}

#[test]
fn kv_config_items_are_put_read_listed_and_deleted() {
    let p = processor();
    put_kv(&p, "ns", "k2", "v2");
    put_kv(&p, "ns", "k1", "old");
    put_kv(&p, "ns", "k1", "v1");

    let resp = get_kv(&p, "ns", "k1");
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert_eq!(resp.remark, None);
    assert_eq!(
        resp.decode_header::<GetKvConfigResponseHeader>().unwrap(),
        GetKvConfigResponseHeader {
            value: Some("v1".into())
        }
    );

    let resp = kv_list(&p, "ns");
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert_eq!(body_text(&resp), r#"{"table":{"k1":"v1","k2":"v2"}}"#);

    let req = RemotingCommand::request_with_header(
        RequestCode::DELETE_KV_CONFIG,
        &DeleteKvConfigRequestHeader {
            namespace: "ns".into(),
            key: "k1".into(),
        },
    );
    for _ in 0..2 {
        let resp = handle(&p, &req);
        assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    }
    let resp = get_kv(&p, "ns", "k1");
    assert_eq!(resp.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert!(!resp.ext_fields.contains_key("value"));
    assert_eq!(body_text(&kv_list(&p, "ns")), r#"{"table":{"k2":"v2"}}"#);
}

#[test]
fn missing_kv_items_get_query_not_found_with_rocketmqs_remarks() {
    let p = processor();
    let resp = get_kv(&p, "ns", "k");
    assert_eq!(resp.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No config item, Namespace: ns Key: k")
    );
    let resp = kv_list(&p, "ns");
    assert_eq!(resp.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No config item, Namespace: ns")
    );
    assert!(resp.body.is_empty());

    put_kv(&p, "ns", "other", "x");
    let resp = get_kv(&p, "ns", "k");
    assert_eq!(resp.response_code(), ResponseCode::QUERY_NOT_FOUND);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No config item, Namespace: ns Key: k")
    );
}

#[test]
fn kv_requests_missing_a_header_field_are_refused_and_change_nothing() {
    let p = processor();
    let mut put = RemotingCommand::request(RequestCode::PUT_KV_CONFIG);
    put.set_ext("namespace", "ns");
    put.set_ext("key", "k");
    let resp = handle(&p, &put);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = resp.remark.unwrap();
    assert!(
        remark.contains("PUT_KV_CONFIG") && remark.contains("`value`"),
        "{remark}"
    );
    assert_eq!(p.kv_config().namespace("ns"), None);

    for (code, name, missing) in [
        (RequestCode::GET_KV_CONFIG, "GET_KV_CONFIG", "`key`"),
        (RequestCode::DELETE_KV_CONFIG, "DELETE_KV_CONFIG", "`key`"),
        (
            RequestCode::GET_KVLIST_BY_NAMESPACE,
            "GET_KVLIST_BY_NAMESPACE",
            "`namespace`",
        ),
    ] {
        let mut req = RemotingCommand::request(code);
        if missing == "`key`" {
            req.set_ext("namespace", "ns");
        }
        let resp = handle(&p, &req);
        assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR, "{name}");
        let remark = resp.remark.unwrap();
        assert!(
            remark.contains(name) && remark.contains(missing),
            "{remark}"
        );
    }
}

#[test]
fn a_registration_answers_with_the_order_topic_kv_namespace() {
    let p = processor();
    put_kv(&p, "ORDER_TOPIC_CONFIG", "OrderTopic", "broker-a:4");
    let resp = handle(&p, &register_request(MASTER, 0, &["T"]));
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    let table: KvTable = from_json(&resp.body).unwrap();
    assert_eq!(
        table.table,
        BTreeMap::from([("OrderTopic".to_owned(), "broker-a:4".to_owned())])
    );
}

#[test]
fn a_kv_change_that_cannot_be_saved_is_refused_and_not_made() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("namesrv");
    let kv = crate::KvConfig::open(sub.join("kvConfig.json")).unwrap();
    let p = NameServerProcessor::with_kv_config(Arc::new(RouteRegistry::new()), Arc::new(kv));
    put_kv(&p, "ns", "kept", "v");
    // The file's directory becomes a regular file: no later write succeeds.
    std::fs::remove_dir_all(&sub).unwrap();
    std::fs::write(&sub, b"").unwrap();
    let req = RemotingCommand::request_with_header(
        RequestCode::PUT_KV_CONFIG,
        &PutKvConfigRequestHeader {
            namespace: "ns".into(),
            key: "new".into(),
            value: "v".into(),
        },
    );
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = resp.remark.unwrap_or_default();
    assert!(
        remark.contains("kvConfigPath") && remark.contains("the change was not made"),
        "{remark}"
    );
    assert_eq!(
        get_kv(&p, "ns", "new").response_code(),
        ResponseCode::QUERY_NOT_FOUND
    );
    let req = RemotingCommand::request_with_header(
        RequestCode::DELETE_KV_CONFIG,
        &DeleteKvConfigRequestHeader {
            namespace: "ns".into(),
            key: "kept".into(),
        },
    );
    assert_eq!(handle(&p, &req).response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        get_kv(&p, "ns", "kept").response_code(),
        ResponseCode::SUCCESS
    );
}
