//! Access control on the remoting port: requests signed by users, refused
//! unsigned or with a wrong secret, checked against each user's policies;
//! the user and ACL admin codes; users and policies kept across restarts.
#![allow(clippy::unwrap_used)]

mod common;

use common::{send_request, TestBroker};
use remoting_protocol::{
    acl::{self, Credentials},
    body::{self, AclInfo, PolicyEntryInfo, PolicyInfo, UserInfo},
    RemotingCommand, RequestCode, ResponseCode,
};

const ADMIN: (&str, &str) = ("admin", "admin-secret-1");
const INIT_USER: &str = r#"{"username":"admin","password":"admin-secret-1"}"#;

fn signed(mut req: RemotingCommand, (ak, sk): (&str, &str)) -> RemotingCommand {
    acl::sign(&mut req, &Credentials::new(ak, sk));
    req
}

fn with_field(code: RequestCode, key: &str, value: &str) -> RemotingCommand {
    let mut req = RemotingCommand::request(code);
    req.ext_fields.insert(key.into(), value.into());
    req
}

fn create_user(name: &str, password: &str, kind: &str) -> RemotingCommand {
    with_field(RequestCode::AUTH_CREATE_USER, "username", name).with_body(body::to_json(
        &UserInfo {
            username: Some(name.into()),
            password: Some(password.into()),
            user_type: Some(kind.into()),
            user_status: None,
        },
    ))
}

fn acl_for(subject: &str, entries: &[(&str, &[&str], &str)]) -> AclInfo {
    AclInfo {
        subject: subject.into(),
        policies: vec![PolicyInfo {
            policy_type: Some("Custom".into()),
            entries: entries
                .iter()
                .map(|(resource, actions, decision)| PolicyEntryInfo {
                    resource: (*resource).into(),
                    actions: actions.iter().map(|a| (*a).to_owned()).collect(),
                    source_ips: vec![],
                    decision: Some((*decision).into()),
                })
                .collect(),
        }],
    }
}

fn create_acl(info: &AclInfo) -> RemotingCommand {
    with_field(RequestCode::AUTH_CREATE_ACL, "subject", &info.subject)
        .with_body(body::to_json(info))
}

fn expect(answer: &RemotingCommand, code: ResponseCode, remark_has: &str) {
    assert_eq!(answer.response_code(), code, "{:?}", answer.remark);
    if !remark_has.is_empty() {
        let remark = answer.remark.as_deref().unwrap_or("");
        assert!(
            remark.contains(remark_has),
            "{remark:?} lacks {remark_has:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_must_be_signed_by_an_enabled_user_with_the_right_secret() {
    let b = TestBroker::start(&[
        ("authenticationEnabled", "true"),
        ("initAuthenticationUser", INIT_USER),
    ])
    .await;
    let config = || RemotingCommand::request(RequestCode::GET_BROKER_CONFIG);
    expect(
        &b.invoke(config()).await,
        ResponseCode::NO_PERMISSION,
        "no AccessKey",
    );
    let wrong = b.invoke(signed(config(), ("admin", "guess"))).await;
    expect(
        &wrong,
        ResponseCode::NO_PERMISSION,
        "signature of User:admin does not verify",
    );
    let unknown = b.invoke(signed(config(), ("mallory", "x"))).await;
    expect(
        &unknown,
        ResponseCode::NO_PERMISSION,
        "User:mallory does not exist",
    );
    // A signed request whose field was changed on the way.
    let mut tampered = signed(send_request("T", 0, b"x", ""), ADMIN);
    tampered.ext_fields.insert("b".into(), "Other".into());
    expect(
        &b.invoke(tampered).await,
        ResponseCode::NO_PERMISSION,
        "does not verify",
    );

    let ok = b.invoke(signed(config(), ADMIN)).await;
    expect(&ok, ResponseCode::SUCCESS, "");
    let text = String::from_utf8_lossy(&ok.body).into_owned();
    assert!(text.contains("initAuthenticationUser=******"), "{text}");
    assert!(!text.contains(ADMIN.1), "the secret is shown");

    // A disabled user is refused.
    expect(
        &b.invoke(signed(create_user("bob", "bob-pw", "Super"), ADMIN))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(config(), ("bob", "bob-pw"))).await,
        ResponseCode::SUCCESS,
        "",
    );
    let disable = with_field(RequestCode::AUTH_UPDATE_USER, "username", "bob").with_body(
        body::to_json(&UserInfo {
            user_status: Some("disable".into()),
            ..UserInfo::default()
        }),
    );
    expect(
        &b.invoke(signed(disable, ADMIN)).await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(config(), ("bob", "bob-pw"))).await,
        ResponseCode::NO_PERMISSION,
        "User:bob is disabled",
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_normal_user_does_only_what_its_policies_allow_and_they_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let settings = [
        ("authenticationEnabled", "true"),
        ("authorizationEnabled", "true"),
        ("initAuthenticationUser", INIT_USER),
    ];
    let b = TestBroker::start_in(dir.path(), &settings).await;
    let alice = ("alice", "alice-pw");
    expect(
        &b.invoke(signed(create_user("alice", alice.1, "Normal"), ADMIN))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    let policy = acl_for("User:alice", &[("Topic:orders", &["Pub"], "Allow")]);
    expect(
        &b.invoke(signed(create_acl(&policy), ADMIN)).await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(send_request("orders", 0, b"m", ""), alice))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(send_request("payments", 0, b"m", ""), alice))
            .await,
        ResponseCode::NO_PERMISSION,
        "User:alice may not Pub Topic:payments from 127.0.0.1",
    );
    let change = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"brokerPermission=4".to_vec());
    expect(
        &b.invoke(signed(change.clone(), alice)).await,
        ResponseCode::NO_PERMISSION,
        "User:alice may not Update Cluster:DefaultCluster",
    );
    assert_eq!(
        b.broker.state().config().broker.broker_permission,
        6,
        "unchanged"
    );

    // Rights on the cluster still do not let a normal user make a super
    // user; a normal one it may.
    let cluster = acl_for("User:alice", &[("Cluster:*", &["All"], "Allow")]);
    expect(
        &b.invoke(signed(create_acl(&cluster), ADMIN)).await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(create_user("eve", "x", "Super"), alice))
            .await,
        ResponseCode::NO_PERMISSION,
        "only a super user",
    );
    expect(
        &b.invoke(signed(create_user("carol", "c-pw", "Normal"), alice))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    let user_file = dir.path().join("config").join("users.json");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&user_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", user_file.display());
    let (broker, _, _, _) = b.into_parts();
    broker.shutdown().await;

    let b = TestBroker::start_in(dir.path(), &settings).await;
    expect(
        &b.invoke(signed(send_request("orders", 0, b"m", ""), alice))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(send_request("payments", 0, b"m", ""), alice))
            .await,
        ResponseCode::NO_PERMISSION,
        "Pub Topic:payments",
    );
    let got = b
        .invoke(signed(
            with_field(RequestCode::AUTH_GET_ACL, "subject", "User:alice"),
            ADMIN,
        ))
        .await;
    expect(&got, ResponseCode::SUCCESS, "");
    let acl: AclInfo = body::from_json(&got.body).unwrap();
    let resources: Vec<&str> = acl.policies[0]
        .entries
        .iter()
        .map(|e| e.resource.as_str())
        .collect();
    assert_eq!(resources, ["Topic:orders", "Cluster:*"]);
    let listed = b
        .invoke(signed(
            RemotingCommand::request(RequestCode::AUTH_LIST_USER),
            ADMIN,
        ))
        .await;
    let users: Vec<UserInfo> = body::from_json(&listed.body).unwrap();
    let names: Vec<&str> = users.iter().filter_map(|u| u.username.as_deref()).collect();
    assert_eq!(names, ["admin", "alice", "carol"]);
    // Deleting the ACL entry takes the right away at once.
    let mut delete = with_field(RequestCode::AUTH_DELETE_ACL, "subject", "User:alice");
    delete
        .ext_fields
        .insert("resource".into(), "Topic:orders".into());
    expect(
        &b.invoke(signed(delete, ADMIN)).await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(signed(send_request("orders", 0, b"m", ""), alice))
            .await,
        ResponseCode::NO_PERMISSION,
        "Pub Topic:orders",
    );
    b.broker.shutdown().await;
}

#[tokio::test]
async fn with_authentication_off_anyone_is_served_and_users_can_be_prepared() {
    let b = TestBroker::start(&[]).await;
    expect(
        &b.invoke(RemotingCommand::request(RequestCode::GET_BROKER_CONFIG))
            .await,
        ResponseCode::SUCCESS,
        "",
    );
    expect(
        &b.invoke(create_user("root", "r", "Super")).await,
        ResponseCode::SUCCESS,
        "",
    );
    let again = b.invoke(create_user("root", "r", "Super")).await;
    expect(
        &again,
        ResponseCode::SYSTEM_ERROR,
        "User:root already exists",
    );
    let bad = b
        .invoke(create_acl(&acl_for(
            "User:root",
            &[("Queue:x", &["Pub"], "Allow")],
        )))
        .await;
    expect(&bad, ResponseCode::SYSTEM_ERROR, "bad resource \"Queue:x\"");
    let missing = b
        .invoke(with_field(RequestCode::AUTH_GET_USER, "username", "nobody"))
        .await;
    expect(&missing, ResponseCode::SUCCESS, "");
    assert!(missing.body.is_empty());
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_brokers_with_the_cluster_credentials_register_on_a_guarded_name_server() {
    let cluster = r#"{"accessKey":"cluster","secretKey":"cluster-secret"}"#;
    let a = TestBroker::start(&[
        ("authenticationEnabled", "true"),
        ("innerClientAuthenticationCredentials", cluster),
    ])
    .await;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let join = |dir: &std::path::Path, name: &'static str, credentials: &'static str| {
        let namesrv = a.namesrv.clone();
        let dir = dir.to_path_buf();
        async move {
            broker_server::testing::start_broker(
                &dir,
                &[
                    ("brokerName", name),
                    ("embeddedNamesrv", "false"),
                    ("namesrvAddr", namesrv.as_str()),
                    ("innerClientAuthenticationCredentials", credentials),
                ],
            )
            .await
            .unwrap()
        }
    };
    // Each start returns after its first registration was answered.
    let wrong = join(
        dirs[0].path(),
        "broker-wrong",
        r#"{"accessKey":"cluster","secretKey":"guess"}"#,
    )
    .await;
    let right = join(dirs[1].path(), "broker-right", cluster).await;
    let info = a
        .client
        .invoke(
            &a.namesrv,
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            std::time::Duration::from_secs(10),
        )
        .await
        .unwrap();
    let info: remoting_protocol::body::ClusterInfo = body::from_json(&info.body).unwrap();
    let names: Vec<&str> = info.broker_addr_table.keys().map(String::as_str).collect();
    assert_eq!(names, ["broker-a", "broker-right"]);
    wrong.shutdown().await;
    right.shutdown().await;
    a.broker.shutdown().await;
}
