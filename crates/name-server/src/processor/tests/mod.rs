//! Round trips of every handled request code through `RemotingCommand`, the
//! error answers, and a property test feeding arbitrary headers and bodies;
//! the admin codes are in [`admin`].

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

mod admin;

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

#[test]
fn with_cluster_credentials_only_signed_changes_are_served_and_reads_stay_open() {
    use remoting_protocol::acl::{sign, Credentials};
    let cluster = Credentials::new("cluster", "cluster-secret");
    let p = processor().with_guard(Some(cluster.clone()));
    let refused = |req: &RemotingCommand, why: &str| {
        let resp = handle(&p, req);
        assert_eq!(resp.response_code(), ResponseCode::NO_PERMISSION);
        let remark = resp.remark.unwrap_or_default();
        assert!(
            remark.contains("REGISTER_BROKER needs the cluster's credentials"),
            "{remark}"
        );
        assert!(remark.contains(why), "{remark}");
        assert!(!remark.contains("cluster-secret"), "{remark}");
    };
    refused(&register_request(MASTER, 0, &["T"]), "not signed");
    let mut other = register_request(MASTER, 0, &["T"]);
    sign(&mut other, &Credentials::new("someone", "cluster-secret"));
    refused(&other, "signed by someone");
    let mut wrong = register_request(MASTER, 0, &["T"]);
    sign(&mut wrong, &Credentials::new("cluster", "guess"));
    refused(&wrong, "does not verify");
    assert!(p.registry().route("T").is_none(), "nothing was registered");

    let mut ok = register_request(MASTER, 0, &["T"]);
    sign(&mut ok, &cluster);
    assert_eq!(handle(&p, &ok).response_code(), ResponseCode::SUCCESS);
    // Routes are read without credentials.
    let route = handle(&p, &route_request("T", 453, None));
    assert_eq!(route.response_code(), ResponseCode::SUCCESS);
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
