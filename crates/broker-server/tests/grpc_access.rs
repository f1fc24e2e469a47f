//! Access control on the gRPC endpoint: calls signed in the
//! `authorization` header over `x-mq-date-time`, as RocketMQ 5's clients
//! sign them, refused `UNAUTHORIZED` unsigned, badly signed, or beyond
//! what the user's policies allow.
#![allow(clippy::unwrap_used)]

mod common;

use common::TestBroker;
use grpc_protocol::{
    v2::{Code, Message, QueryRouteRequest, Resource, SendMessageRequest, SystemProperties},
    MessagingServiceClient,
};
use remoting_protocol::{
    acl::{sign, Credentials},
    body::{self, AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo},
    RemotingCommand, RequestCode, ResponseCode,
};
use tonic::{transport::Channel, Request};

const DATE: &str = "20261205T101500Z";

async fn client(b: &TestBroker) -> MessagingServiceClient<Channel> {
    let port = b.broker.grpc_addr().expect("gRPC endpoint runs").port();
    MessagingServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap()
}

/// A call from `user` (name, secret) or anonymous, signing `signed_date`
/// while sending `DATE`.
fn call<T>(message: T, user: Option<(&str, &str)>, signed_date: &str) -> Request<T> {
    let mut r = Request::new(message);
    let md = r.metadata_mut();
    md.insert("x-mq-client-id", "access-test@1#1".parse().unwrap());
    md.insert("x-mq-date-time", DATE.parse().unwrap());
    if let Some((ak, sk)) = user {
        let value = auth::grpc::sign(ak, sk.as_bytes(), signed_date);
        md.insert("authorization", value.parse().unwrap());
    }
    r
}

fn resource(name: &str) -> Resource {
    Resource {
        resource_namespace: String::new(),
        name: name.into(),
    }
}

fn route(topic: &str) -> QueryRouteRequest {
    QueryRouteRequest {
        topic: Some(resource(topic)),
        endpoints: None,
    }
}

fn send(topic: &str) -> SendMessageRequest {
    SendMessageRequest {
        messages: vec![Message {
            topic: Some(resource(topic)),
            user_properties: Default::default(),
            system_properties: Some(SystemProperties {
                message_id: "0100000000000000000000000A".into(),
                message_type: 1,
                body_encoding: 1,
                ..SystemProperties::default()
            }),
            body: b"hello".to_vec(),
        }],
    }
}

async fn admin(b: &TestBroker, mut req: RemotingCommand) {
    sign(&mut req, &Credentials::new("admin", "admin-pw"));
    let answer = b.invoke(req).await;
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        answer.remark
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_need_a_valid_signature_and_a_policy_allowing_them() {
    let b = TestBroker::start(&[
        ("authenticationEnabled", "true"),
        ("authorizationEnabled", "true"),
        (
            "initAuthenticationUser",
            r#"{"username":"admin","password":"admin-pw"}"#,
        ),
    ])
    .await;
    for topic in ["orders", "payments"] {
        let create = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &remoting_protocol::header::CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                ..remoting_protocol::header::CreateTopicRequestHeader::default()
            },
        );
        admin(&b, create).await;
    }
    let mut user = RemotingCommand::request(RequestCode::AUTH_CREATE_USER);
    user.ext_fields.insert("username".into(), "alice".into());
    admin(
        &b,
        user.with_body(body::to_json(&UserInfo {
            username: Some("alice".into()),
            password: Some("alice-pw".into()),
            user_type: Some("Normal".into()),
            user_status: None,
        })),
    )
    .await;
    let policy = AclInfo {
        subject: "User:alice".into(),
        policies: vec![PolicyInfo {
            policy_type: None,
            entries: vec![PolicyEntryInfo {
                resource: "Topic:orders".into(),
                actions: vec!["Pub".into()],
                source_ips: vec![],
                decision: Some("Allow".into()),
            }],
        }],
    };
    let mut acl = RemotingCommand::request(RequestCode::AUTH_CREATE_ACL);
    acl.ext_fields.insert("subject".into(), "User:alice".into());
    admin(&b, acl.with_body(body::to_json(&policy))).await;

    let mut c = client(&b).await;
    let code = |st: Option<grpc_protocol::v2::Status>| {
        let st = st.unwrap();
        (st.code, st.message)
    };
    let (anonymous, why) = code(
        c.query_route(call(route("orders"), None, DATE))
            .await
            .unwrap()
            .into_inner()
            .status,
    );
    assert_eq!(anonymous, Code::Unauthorized as i32);
    assert!(why.contains("no AccessKey"), "{why}");
    let (stale, why) = code(
        c.query_route(call(
            route("orders"),
            Some(("alice", "alice-pw")),
            "20261205T101501Z",
        ))
        .await
        .unwrap()
        .into_inner()
        .status,
    );
    assert_eq!(stale, Code::Unauthorized as i32);
    assert!(why.contains("does not verify"), "{why}");
    let alice = Some(("alice", "alice-pw"));
    let (ok, why) = code(
        c.query_route(call(route("orders"), alice, DATE))
            .await
            .unwrap()
            .into_inner()
            .status,
    );
    assert_eq!(ok, Code::Ok as i32, "{why}");
    let sent = c
        .send_message(call(send("orders"), alice, DATE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(sent.status).0, Code::Ok as i32);
    let refused = c
        .send_message(call(send("payments"), alice, DATE))
        .await
        .unwrap()
        .into_inner();
    let (denied, why) = code(refused.status);
    assert_eq!(denied, Code::Unauthorized as i32);
    assert!(
        why.contains("User:alice may not Pub Topic:payments"),
        "{why}"
    );
    // A super user passes everything.
    let root = Some(("admin", "admin-pw"));
    let sent = c
        .send_message(call(send("payments"), root, DATE))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(sent.status).0, Code::Ok as i32);
    b.broker.shutdown().await;
}
