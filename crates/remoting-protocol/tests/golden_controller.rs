//! Golden frames of the controller's requests and answers: bytes laid out
//! by hand from RocketMQ's frame layout and its header classes' field names
//! decode to the typed headers, and the typed headers encode back to the
//! same bytes.

use std::fmt::Debug;

use bytes::BytesMut;
use remoting_protocol::{
    body::{from_json, to_fastjson, ElectMasterResponseBody, SyncStateSet},
    decode_frame, encode_frame,
    header::{
        AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader,
        ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
        CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
        ElectMasterResponseHeader, GetMetaDataResponseHeader, GetNextBrokerIdRequestHeader,
        GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
        NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
        RegisterBrokerToControllerResponseHeader,
    },
    CommandHeader, ExtFields, LanguageCode, RemotingCommand, SerializeType, DEFAULT_MAX_FRAME_LEN,
};

/// Lays out `length | type<<24 | headerLen | header | body` by hand.
fn frame(header: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.push(0);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    out
}

/// A JSON request header with `ext` (keys in order) as Java lays it out.
fn request_json(code: i32, ext: &str) -> String {
    format!(
        r#"{{"code":{code},"extFields":{{{ext}}},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}}"#
    )
}

fn response_json(code: i32, ext: &str) -> String {
    format!(
        r#"{{"code":{code},"extFields":{{{ext}}},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}}"#
    )
}

/// The frame decodes to a command of `code` whose header is `expected`, and
/// a command built from `expected` encodes to the same bytes.
fn golden<H: CommandHeader + PartialEq + Debug>(
    json: &str,
    body: &[u8],
    code: i32,
    response: bool,
    expected: &H,
) {
    let bytes = frame(json, body);
    let mut src = BytesMut::from(&bytes[..]);
    let decoded = decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN)
        .expect("golden frame decodes")
        .expect("golden frame is complete");
    assert_eq!(decoded.code, code);
    assert_eq!(
        &decoded.decode_header::<H>().expect("the header decodes"),
        expected
    );
    // The typed header writes the same fields (Java's field order is its
    // HashMap's, so only the set of fields is compared).
    let sorted = |ext: &ExtFields| {
        let mut v: Vec<(String, String)> = ext
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        sorted(&expected.to_ext_fields()),
        sorted(&decoded.ext_fields)
    );
    assert_eq!(decoded.flag & 1, i32::from(response));
    assert_eq!(&decoded.body[..], body);
    // The frame encodes back to the same bytes.
    let rebuilt = RemotingCommand {
        language: LanguageCode::Java,
        version: 479,
        remark: None,
        serialize_type: SerializeType::Json,
        ..decoded
    };
    let mut out = BytesMut::new();
    encode_frame(&rebuilt, &mut out, DEFAULT_MAX_FRAME_LEN).expect("the frame encodes");
    assert_eq!(&out[..], &bytes[..], "{expected:?}");
}

#[test]
fn broker_heartbeat_to_the_controller() {
    golden(
        &request_json(
            904,
            r#""brokerAddr":"10.0.0.1:10911","brokerId":"2","brokerName":"b","clusterName":"c","confirmOffset":"100","electionPriority":"2147483647","epoch":"3","heartbeatTimeoutMills":"10000","maxOffset":"120""#,
        ),
        b"",
        904,
        false,
        &BrokerHeartbeatRequestHeader {
            cluster_name: "c".into(),
            broker_addr: "10.0.0.1:10911".into(),
            broker_name: "b".into(),
            broker_id: Some(2),
            epoch: Some(3),
            max_offset: Some(120),
            confirm_offset: Some(100),
            heartbeat_timeout_mills: Some(10_000),
            election_priority: Some(i32::MAX),
        },
    );
}

#[test]
fn alter_sync_state_set_request_and_answer() {
    let body = br#"{"syncStateSet":[1,2],"syncStateSetEpoch":4}"#;
    golden(
        &request_json(
            1001,
            r#""brokerName":"b","invokeTime":"1700000000000","masterBrokerId":"1","masterEpoch":"2""#,
        ),
        body,
        1001,
        false,
        &AlterSyncStateSetRequestHeader {
            broker_name: "b".into(),
            master_broker_id: 1,
            master_epoch: 2,
            invoke_time: Some(1_700_000_000_000),
        },
    );
    let set: SyncStateSet = from_json(body).unwrap();
    assert_eq!(to_fastjson(&set), body);
    golden(
        &response_json(0, r#""newSyncStateSetEpoch":"5""#),
        br#"{"syncStateSet":[1,2],"syncStateSetEpoch":5}"#,
        0,
        true,
        &AlterSyncStateSetResponseHeader {
            new_sync_state_set_epoch: 5,
        },
    );
}

#[test]
fn elect_master_request_and_answer() {
    golden(
        &request_json(
            1002,
            r#""brokerId":"1","brokerName":"b","clusterName":"c","designateElect":"false","invokeTime":"1700000000000""#,
        ),
        b"",
        1002,
        false,
        &ElectMasterRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            broker_id: Some(1),
            designate_elect: Some(false),
            invoke_time: Some(1_700_000_000_000),
        },
    );
    let body = br#"{"brokerMemberGroup":{"brokerAddrs":{"1":"10.0.0.1:10911","2":"10.0.0.2:10911"},"brokerName":"b","cluster":"c"},"syncStateSet":[1]}"#;
    golden(
        &response_json(
            0,
            r#""masterAddress":"10.0.0.1:10911","masterBrokerId":"1","masterEpoch":"1","syncStateSetEpoch":"1""#,
        ),
        body,
        0,
        true,
        &ElectMasterResponseHeader {
            master_broker_id: Some(1),
            master_address: Some("10.0.0.1:10911".into()),
            master_epoch: Some(1),
            sync_state_set_epoch: Some(1),
        },
    );
    let parsed: ElectMasterResponseBody = from_json(body).unwrap();
    assert_eq!(to_fastjson(&parsed), body);
}

#[test]
fn registration_requests_and_answers() {
    golden(
        &request_json(1012, r#""brokerName":"b","clusterName":"c""#),
        b"",
        1012,
        false,
        &GetNextBrokerIdRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
        },
    );
    golden(
        &response_json(
            0,
            r#""brokerName":"b","clusterName":"c","nextBrokerId":"3""#,
        ),
        b"",
        0,
        true,
        &GetNextBrokerIdResponseHeader {
            cluster_name: Some("c".into()),
            broker_name: Some("b".into()),
            next_broker_id: 3,
        },
    );
    golden(
        &request_json(
            1013,
            r#""appliedBrokerId":"3","brokerName":"b","clusterName":"c","registerCheckCode":"10.0.0.3:10911;1700000000000""#,
        ),
        b"",
        1013,
        false,
        &ApplyBrokerIdRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            applied_broker_id: 3,
            register_check_code: "10.0.0.3:10911;1700000000000".into(),
        },
    );
    golden(
        &request_json(
            1003,
            r#""brokerAddress":"10.0.0.3:10911","brokerId":"3","brokerName":"b","clusterName":"c","invokeTime":"1""#,
        ),
        b"",
        1003,
        false,
        &RegisterBrokerToControllerRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            broker_id: 3,
            broker_address: "10.0.0.3:10911".into(),
            invoke_time: Some(1),
        },
    );
    golden(
        &response_json(
            0,
            r#""brokerName":"b","clusterName":"c","masterAddress":"10.0.0.1:10911","masterBrokerId":"1","masterEpoch":"2","syncStateSetEpoch":"3""#,
        ),
        br#"{"syncStateSet":[1,3],"syncStateSetEpoch":3}"#,
        0,
        true,
        &RegisterBrokerToControllerResponseHeader {
            cluster_name: Some("c".into()),
            broker_name: Some("b".into()),
            master_broker_id: Some(1),
            master_address: Some("10.0.0.1:10911".into()),
            master_epoch: Some(2),
            sync_state_set_epoch: Some(3),
        },
    );
}

#[test]
fn replica_info_metadata_notify_and_clean() {
    golden(
        &request_json(1004, r#""brokerName":"b""#),
        b"",
        1004,
        false,
        &GetReplicaInfoRequestHeader {
            broker_name: "b".into(),
        },
    );
    golden(
        &response_json(
            0,
            r#""masterAddress":"10.0.0.1:10911","masterBrokerId":"1","masterEpoch":"2""#,
        ),
        br#"{"syncStateSet":[1],"syncStateSetEpoch":3}"#,
        0,
        true,
        &GetReplicaInfoResponseHeader {
            master_broker_id: Some(1),
            master_address: Some("10.0.0.1:10911".into()),
            master_epoch: Some(2),
        },
    );
    golden(
        &response_json(
            0,
            r#""controllerLeaderAddress":"127.0.0.1:9878","controllerLeaderId":"n0","group":"g","isLeader":"true","peers":"n0:127.0.0.1:9878;n1:127.0.0.1:9868;""#,
        ),
        b"",
        0,
        true,
        &GetMetaDataResponseHeader {
            group: Some("g".into()),
            controller_leader_id: Some("n0".into()),
            controller_leader_address: Some("127.0.0.1:9878".into()),
            is_leader: Some(true),
            peers: Some("n0:127.0.0.1:9878;n1:127.0.0.1:9868;".into()),
        },
    );
    golden(
        &request_json(
            1008,
            r#""masterAddress":"10.0.0.2:10911","masterBrokerId":"2","masterEpoch":"4","syncStateSetEpoch":"5""#,
        ),
        br#"{"syncStateSet":[2],"syncStateSetEpoch":5}"#,
        1008,
        false,
        &NotifyBrokerRoleChangedRequestHeader {
            master_address: Some("10.0.0.2:10911".into()),
            master_epoch: Some(4),
            sync_state_set_epoch: Some(5),
            master_broker_id: Some(2),
        },
    );
    golden(
        &request_json(
            1011,
            r#""brokerControllerIdsToClean":"2;3","brokerName":"b","clusterName":"c","invokeTime":"1","isCleanLivingBroker":"false""#,
        ),
        b"",
        1011,
        false,
        &CleanControllerBrokerDataRequestHeader {
            cluster_name: Some("c".into()),
            broker_name: "b".into(),
            broker_controller_ids_to_clean: Some("2;3".into()),
            is_clean_living_broker: Some(false),
            invoke_time: Some(1),
        },
    );
}
