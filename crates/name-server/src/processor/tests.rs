//! Round trips of every handled request code through `RemotingCommand`, the
//! error answers, and a property test feeding arbitrary headers and bodies.

use std::collections::BTreeMap;

use proptest::prelude::*;
use remoting_protocol::{
    body::{
        from_json, to_json, ClusterInfo, DataVersion, KvTable, RegisterBrokerBody, TopicConfig,
        TopicConfigSerializeWrapper, TopicList, TopicRouteData,
    },
    header::{
        AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
        DeleteKvConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader, GetKvConfigRequestHeader,
        GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader, GetRouteInfoRequestHeader,
        GetTopicsByClusterRequestHeader, PutKvConfigRequestHeader, RegisterBrokerRequestHeader,
        RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
        WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

use super::{broker::masked_crc32, *};

const MASTER: &str = "10.0.0.1:10911";
const SLAVE: &str = "10.0.0.2:10911";

fn processor() -> NameServerProcessor {
    NameServerProcessor::new(Arc::new(RouteRegistry::new()))
}

fn register_header(addr: &str, id: i64) -> RegisterBrokerRequestHeader {
    RegisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: format!("{addr}-ha"),
        broker_id: id,
        enable_acting_master: Some(false),
        compressed: Some(false),
        ..RegisterBrokerRequestHeader::default()
    }
}

fn register_body(topics: &[&str]) -> Vec<u8> {
    register_body_versioned(topics, 0)
}

/// A registration body whose topic-config data version has `counter`.
fn register_body_versioned(topics: &[&str], counter: i64) -> Vec<u8> {
    let topic_config_table = topics
        .iter()
        .map(|&topic| {
            let config = TopicConfig {
                topic_name: topic.into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                ..TopicConfig::default()
            };
            (topic.to_owned(), config)
        })
        .collect();
    to_json(&RegisterBrokerBody {
        topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
            topic_config_table,
            data_version: DataVersion {
                counter,
                ..DataVersion::default()
            },
            ..TopicConfigSerializeWrapper::default()
        },
        filter_server_list: Vec::new(),
    })
}

fn register_request(addr: &str, id: i64, topics: &[&str]) -> RemotingCommand {
    register_request_versioned(addr, id, topics, 0)
}

fn register_request_versioned(
    addr: &str,
    id: i64,
    topics: &[&str],
    counter: i64,
) -> RemotingCommand {
    let body = register_body_versioned(topics, counter);
    let header = RegisterBrokerRequestHeader {
        body_crc32: Some(masked_crc32(&body)),
        ..register_header(addr, id)
    };
    RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(body)
}

fn route_request(topic: &str, version: i32, standard_only: Option<bool>) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: standard_only,
    };
    let mut req =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    req.version = version;
    req
}

fn handle(p: &NameServerProcessor, req: &RemotingCommand) -> RemotingCommand {
    let resp = p.handle(req, Instant::now(), Some(1)).unwrap();
    assert!(resp.is_response());
    assert_eq!(resp.opaque, req.opaque);
    resp
}

fn body_text(resp: &RemotingCommand) -> &str {
    std::str::from_utf8(&resp.body).unwrap()
}

#[test]
fn register_then_route_round_trips_through_commands() {
    let p = processor();
    let resp = handle(&p, &register_request(MASTER, 0, &["T"]));
    assert_eq!(
        resp.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        resp.remark
    );
    let header: RegisterBrokerResponseHeader = resp.decode_header().unwrap();
    assert_eq!(header, RegisterBrokerResponseHeader::default());
    assert_eq!(
        from_json::<KvTable>(&resp.body).unwrap(),
        KvTable::default()
    );

    let resp = handle(&p, &route_request("T", 479, None));
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert!(body_text(&resp).contains(r#""brokerAddrs":{"0":"10.0.0.1:10911"}"#));
    let route: TopicRouteData = serde_json::from_slice(&resp.body).unwrap();
    assert_eq!(Some(route), p.registry().route("T"));
}

#[test]
fn a_slave_registration_answers_with_the_master_addresses() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["T"]));
    let resp = handle(&p, &register_request(SLAVE, 1, &["T"]));
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    let header: RegisterBrokerResponseHeader = resp.decode_header().unwrap();
    assert_eq!(header.master_addr.as_deref(), Some(MASTER));
    assert_eq!(header.ha_server_addr.as_deref(), Some("10.0.0.1:10911-ha"));
}

#[test]
fn a_body_crc_mismatch_is_refused_and_zero_skips_the_check() {
    let p = processor();
    let mut req = register_request(MASTER, 0, &["T"]);
    let good = req.ext("bodyCrc32").unwrap().parse::<i32>().unwrap();
    req.set_ext("bodyCrc32", (good ^ 1).to_string());
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(resp.remark.as_deref(), Some("crc32 not match"));
    assert_eq!(p.registry().route("T"), None);

    req.set_ext("bodyCrc32", "0");
    assert_eq!(handle(&p, &req).response_code(), ResponseCode::SUCCESS);
    assert!(p.registry().route("T").is_some());
}

#[test]
fn the_body_crc_is_masked_to_31_bits() {
    // CRC32 of "123456789" is 0xCBF43926; masked, 0x4BF43926.
    assert_eq!(masked_crc32(b"123456789"), 0x4BF4_3926);
    assert_eq!(masked_crc32(b""), 0);
}

#[test]
fn an_unknown_topic_gets_topic_not_exist_with_rocketmqs_remark() {
    let p = processor();
    let resp = handle(&p, &route_request("NOPE", 479, None));
    assert_eq!(resp.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(
        resp.remark.as_deref(),
        Some("No topic route info in name server for the topic: NOPE")
    );
    assert!(resp.body.is_empty());
}

#[test]
fn old_clients_get_legacy_route_json_unless_they_ask_for_standard() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["T"]));
    let expected = p.registry().route("T").unwrap();

    let legacy = handle(&p, &route_request("T", 400, None));
    assert!(
        body_text(&legacy).contains(r#""brokerAddrs":{0:""#),
        "{}",
        body_text(&legacy)
    );
    assert_eq!(from_json::<TopicRouteData>(&legacy.body).unwrap(), expected);
    let legacy_false = handle(&p, &route_request("T", 400, Some(false)));
    assert_eq!(legacy_false.body, legacy.body);

    for req in [
        route_request("T", 400, Some(true)),
        route_request("T", 401, None),
    ] {
        let standard = handle(&p, &req);
        assert!(body_text(&standard).contains(r#""brokerAddrs":{"0":""#));
        assert_eq!(
            serde_json::from_slice::<TopicRouteData>(&standard.body).unwrap(),
            expected
        );
    }
}

#[test]
fn cluster_info_is_always_legacy_json() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["T"]));
    handle(&p, &register_request(SLAVE, 1, &[]));
    let req = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SUCCESS);
    assert!(
        body_text(&resp).contains(r#""brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"}"#),
        "{}",
        body_text(&resp)
    );
    let info: ClusterInfo = from_json(&resp.body).unwrap();
    assert_eq!(info, p.registry().cluster_info());
    assert!(info.cluster_addr_table["DefaultCluster"].contains("broker-a"));
}

#[test]
fn unregister_round_trips_and_removes_the_route() {
    let p = processor();
    handle(&p, &register_request(MASTER, 0, &["T"]));
    let header = UnregisterBrokerRequestHeader {
        broker_name: "broker-a".into(),
        broker_addr: MASTER.into(),
        cluster_name: "DefaultCluster".into(),
        broker_id: 0,
    };
    let req = RemotingCommand::request_with_header(RequestCode::UNREGISTER_BROKER, &header);
    assert_eq!(handle(&p, &req).response_code(), ResponseCode::SUCCESS);
    let resp = handle(&p, &route_request("T", 479, None));
    assert_eq!(resp.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert_eq!(p.registry().cluster_info(), ClusterInfo::default());
}

#[test]
fn an_unknown_code_gets_rocketmqs_not_supported_remark() {
    let p = processor();
    let resp = handle(&p, &RemotingCommand::request(RequestCode(9999)));
    assert_eq!(
        resp.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    assert_eq!(
        resp.remark.as_deref(),
        Some(" request type 9999 not supported")
    );
}

#[test]
fn malformed_headers_are_answered_with_a_remark_naming_the_field() {
    let p = processor();
    let mut req = register_request(MASTER, 0, &["T"]);
    req.ext_fields.shift_remove("brokerName");
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = resp.remark.unwrap();
    assert!(
        remark.contains("REGISTER_BROKER") && remark.contains("`brokerName`"),
        "{remark}"
    );

    let mut req = register_request(MASTER, 0, &["T"]);
    req.set_ext("brokerId", "zero");
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("`brokerId`"));

    // Booleans read as Java's Boolean.parseBoolean: never malformed.
    let mut req = route_request("T", 479, None);
    req.set_ext("acceptStandardJsonOnly", "maybe");
    let resp = handle(&p, &req);
    assert_ne!(resp.response_code(), ResponseCode::SYSTEM_ERROR);

    let req = RemotingCommand::request(RequestCode::UNREGISTER_BROKER);
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("UNREGISTER_BROKER"));
}

#[test]
fn a_garbage_body_is_answered_with_an_error_not_a_panic() {
    let p = processor();
    let header = register_header(MASTER, 0);
    let req = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header)
        .with_body(&b"{\"topicConfigSerializeWrapper\":[1,2"[..]);
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = resp.remark.unwrap();
    assert!(
        remark.starts_with("failed to decode RegisterBrokerBody: bad JSON body"),
        "{remark}"
    );
    assert!(p.registry().cluster_info().broker_addr_table.is_empty());
}

#[test]
fn an_empty_body_registers_a_broker_without_topics() {
    let p = processor();
    let req = RemotingCommand::request_with_header(
        RequestCode::REGISTER_BROKER,
        &register_header(MASTER, 0),
    );
    assert_eq!(handle(&p, &req).response_code(), ResponseCode::SUCCESS);
    let info = p.registry().cluster_info();
    assert_eq!(
        info.broker_addr_table["broker-a"].broker_addrs,
        BTreeMap::from([(0, MASTER.to_owned())])
    );
    assert!(p.registry().topic_names().is_empty());
}

#[test]
fn a_compressed_body_is_refused() {
    let p = processor();
    let mut req = register_request(MASTER, 0, &["T"]);
    req.set_ext("compressed", "true");
    let resp = handle(&p, &req);
    assert_eq!(resp.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(resp.remark.unwrap().contains("compressed"));
}

#[test]
fn oneway_requests_are_carried_out_without_a_response() {
    let p = processor();
    let mut req = register_request(MASTER, 0, &["T"]);
    req.mark_oneway();
    assert_eq!(p.handle(&req, Instant::now(), None), None);
    assert!(p.registry().route("T").is_some());
    let mut unknown = RemotingCommand::request(RequestCode(9999));
    unknown.mark_oneway();
    assert_eq!(p.handle(&unknown, Instant::now(), None), None);
}

#[test]
fn responses_are_not_answered() {
    let p = processor();
    let resp = RemotingCommand::response(ResponseCode::SUCCESS, None);
    assert_eq!(p.handle(&resp, Instant::now(), None), None);
}

#[test]
fn the_connection_id_reaches_the_registry() {
    let p = processor();
    let req = register_request(MASTER, 0, &["T"]);
    p.handle(&req, Instant::now(), Some(42)).unwrap();
    assert!(p.registry().connection_closed(41).is_empty());
    assert_eq!(p.registry().connection_closed(42), [MASTER]);
    assert_eq!(p.registry().route("T"), None);
}

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

const HEADER_KEYS: &[&str] = &[
    "brokerName",
    "brokerAddr",
    "clusterName",
    "haServerAddr",
    "brokerId",
    "heartbeatTimeoutMillis",
    "enableActingMaster",
    "compressed",
    "bodyCrc32",
    "topic",
    "acceptStandardJsonOnly",
    "cluster",
    "namespace",
    "key",
    "value",
];

fn ext_fields() -> impl Strategy<Value = Vec<(String, String)>> {
    let key = prop_oneof![
        proptest::sample::select(HEADER_KEYS).prop_map(str::to_owned),
        ".{0,12}",
    ];
    let value = prop_oneof![
        ".{0,16}",
        any::<i64>().prop_map(|n| n.to_string()),
        Just("0".to_owned()),
        Just("true".to_owned()),
    ];
    proptest::collection::vec((key, value), 0..14)
}

fn body_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..256),
        Just(register_body(&["T"])),
        // Valid JSON cut short or with a byte flipped.
        (0..200usize, any::<u8>()).prop_map(|(at, byte)| {
            let mut body = register_body(&["T", "U"]);
            let at = at % body.len();
            body[at] = byte;
            body
        }),
    ]
}

proptest! {
    #[test]
    fn arbitrary_headers_and_bodies_always_get_a_response(
        code in prop_oneof![
            100..=106i32,
            proptest::sample::select(vec![205, 206, 216, 219, 224, 327]),
            any::<i32>(),
        ],
        version in any::<i32>(),
        fields in ext_fields(),
        body in body_bytes(),
    ) {
        let p = processor();
        let mut req = RemotingCommand::request(RequestCode(code)).with_body(body);
        req.version = version;
        for (key, value) in fields {
            req.set_ext(key, value);
        }
        let resp = p.handle(&req, Instant::now(), Some(3)).unwrap();
        prop_assert!(resp.is_response());
        prop_assert_eq!(resp.opaque, req.opaque);
        let allowed = [
            ResponseCode::SUCCESS,
            ResponseCode::SYSTEM_ERROR,
            ResponseCode::TOPIC_NOT_EXIST,
            ResponseCode::QUERY_NOT_FOUND,
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
        ];
        prop_assert!(allowed.contains(&resp.response_code()), "{:?}", resp);
        if resp.response_code() != ResponseCode::SUCCESS {
            prop_assert!(resp.remark.as_deref().is_some_and(|r| !r.is_empty()));
        }
        // Whatever was registered still yields well-formed views.
        for topic in p.registry().topic_names() {
            prop_assert!(p.registry().route(&topic).is_some());
        }
        let info = p.registry().cluster_info();
        prop_assert!(from_json::<ClusterInfo>(&crate::to_legacy_json(&info)).is_ok());
    }

    #[test]
    fn arbitrary_bytes_as_a_register_body_never_panic(body in proptest::collection::vec(any::<u8>(), 0..512)) {
        let p = processor();
        let req = RemotingCommand::request_with_header(
            RequestCode::REGISTER_BROKER,
            &register_header(MASTER, 0),
        )
        .with_body(body);
        let resp = p.handle(&req, Instant::now(), None).unwrap();
        prop_assert!(
            resp.response_code() == ResponseCode::SUCCESS
                || resp.response_code() == ResponseCode::SYSTEM_ERROR
        );
    }
}
