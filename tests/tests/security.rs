//! Access control and TLS of real broker processes on the remoting port:
//! unsigned requests refused, a super user (`initAuthenticationUser`)
//! creating a normal user and her policy, her requests checked against it
//! (an admin change refused naming the action and resource, a send to her
//! topic served, a send elsewhere refused), TLS and plain clients on a
//! permissive port, only TLS ones on an enforcing port, and a broker whose
//! `innerClientAuthenticationCredentials` differ from the cluster's kept out
//! of the name server's cluster while one with the right ones registers;
//! a certificate renewed on disk taken by SIGHUP without dropping open
//! connections.
//!
//! Each scenario starts its own brokers (with their embedded name
//! servers); the TLS ones get a self-signed certificate for 127.0.0.1,
//! written under the run's directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{path::Path, time::Duration};

use e2e_tests::{log_lines, send_request, unique, wait_for, E2eEnv, OwnBroker, SignedAdmin};
use producer_client::{Message, Producer, ProducerConfig, ProducerError, SendStatus};
use remoting_net::{ClientError, ClientOptions, ClientTls, RemotingClient};
use remoting_protocol::{
    acl::Credentials,
    body::{self, ClusterInfo},
    RemotingCommand, RequestCode, ResponseCode,
};

/// The super user every access-controlled broker here starts with.
const ADMIN: (&str, &str) = ("admin", "admin-secret-1");
const INIT_USER: &str =
    r#"initAuthenticationUser={"username":"admin","password":"admin-secret-1"}"#;
/// The normal user the super user creates.
const ALICE: (&str, &str) = ("alice", "alice-secret-1");
/// The broker's cluster (its default `brokerClusterName`).
const CLUSTER: &str = "DefaultCluster";
/// Answers to single requests come within this.
const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// Writes a self-signed certificate for 127.0.0.1 and its key as PEM files
/// into `dir`; returns the `tlsServerCertPath` and `tlsServerKeyPath`
/// settings.
fn certificate(dir: &Path) -> [String; 2] {
    std::fs::create_dir_all(dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (crt, key) = (dir.join("broker.crt"), dir.join("broker.key"));
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    [
        format!("tlsServerCertPath={}", crt.display()),
        format!("tlsServerKeyPath={}", key.display()),
    ]
}

/// A certificate directory of its own for a scenario named `name`.
fn cert_dir(env: &E2eEnv, name: &str) -> std::path::PathBuf {
    env.dir
        .clone()
        .expect("SLUICE_E2E_DIR")
        .join(unique(&format!("{name}-certs-")))
}

/// A remoting client over TLS (trusting any server) or plain, signing as
/// `user` or not at all.
fn client(tls: bool, user: Option<(&str, &str)>) -> RemotingClient {
    RemotingClient::new(ClientOptions {
        tls: tls.then(|| ClientTls::trust_any().unwrap()),
        credentials: user.map(|(ak, sk)| Credentials::new(ak, sk)),
        ..ClientOptions::default()
    })
}

/// An `UPDATE_BROKER_CONFIG` setting `maxMessageSize` to 1234567.
fn update_config() -> RemotingCommand {
    RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
        .with_body(b"maxMessageSize=1234567\n".to_vec())
}

fn get_config() -> RemotingCommand {
    RemotingCommand::request(RequestCode::GET_BROKER_CONFIG)
}

/// Checks the answer's code and that its remark contains each of `remark_has`.
fn expect(what: &str, answer: &RemotingCommand, code: ResponseCode, remark_has: &[&str]) {
    let remark = answer.remark.as_deref().unwrap_or("");
    assert_eq!(answer.response_code(), code, "{what}: remark {remark:?}");
    for part in remark_has {
        assert!(remark.contains(part), "{what}: {remark:?} lacks {part:?}");
    }
}

/// Mechanism: with `authenticationEnabled` and `authorizationEnabled`, the
/// broker verifies each request's `AccessKey`/`Signature` against its users
/// and checks what the request needs (`Update` on `Cluster:<cluster>` for
/// `UPDATE_BROKER_CONFIG`, `Pub` on a send's topic) against the user's
/// policies; super users pass every check. The permissive port sniffs the
/// first bytes of each connection and serves TLS and plain remoting alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_users_and_policies_on_a_permissive_tls_port() {
    let Some(env) = E2eEnv::from_env("security: users and policies") else {
        return;
    };
    let [cert, key] = certificate(&cert_dir(&env, "acl"));
    let broker = OwnBroker::start(
        &env,
        "acl",
        &[
            "tlsServerMode=permissive",
            &cert,
            &key,
            "authenticationEnabled=true",
            "authorizationEnabled=true",
            INIT_USER,
        ],
    )
    .unwrap();
    let addr = broker.addr.as_str();

    // Unsigned: refused over plain and over TLS alike, and both answered.
    for tls in [false, true] {
        let anonymous = client(tls, None);
        let answer = anonymous
            .invoke(addr, update_config(), ANSWER_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("unsigned request (tls {tls}) got no answer: {e}"));
        expect(
            &format!("unsigned UPDATE_BROKER_CONFIG, tls {tls}"),
            &answer,
            ResponseCode::NO_PERMISSION,
            &["authentication is required", "no AccessKey"],
        );
        anonymous.close_all().await;
    }
    // The super user is served over both.
    for tls in [false, true] {
        let admin = client(tls, Some(ADMIN));
        let answer = admin
            .invoke(addr, get_config(), ANSWER_LIMIT)
            .await
            .unwrap();
        expect(
            &format!("super user's GET_BROKER_CONFIG, tls {tls}"),
            &answer,
            ResponseCode::SUCCESS,
            &[],
        );
        admin.close_all().await;
    }

    let topic = unique("SecurityAlice");
    let admin = SignedAdmin::new(addr, ADMIN.0, ADMIN.1);
    admin
        .create_topic(&broker.namesrv, &topic, 2)
        .await
        .unwrap();
    admin.create_user(ALICE.0, ALICE.1, "Normal").await.unwrap();
    let resource = format!("Topic:{topic}");
    admin
        .allow(ALICE.0, &[(&resource, &["Pub"])])
        .await
        .unwrap();

    // Alice may not change the broker's configuration; it stays as it was.
    let alice_tls = client(true, Some(ALICE));
    let refused = alice_tls
        .invoke(addr, update_config(), ANSWER_LIMIT)
        .await
        .unwrap();
    expect(
        "alice's UPDATE_BROKER_CONFIG",
        &refused,
        ResponseCode::NO_PERMISSION,
        &[
            &format!("User:alice may not Update Cluster:{CLUSTER}"),
            "no policy entry allows it",
        ],
    );
    let admin_client = client(false, Some(ADMIN));
    let config = admin_client
        .invoke(addr, get_config(), ANSWER_LIMIT)
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&config.body).into_owned();
    assert!(text.contains("maxMessageSize="), "{text}");
    assert!(
        !text.contains("maxMessageSize=1234567"),
        "a refused update was applied"
    );
    admin_client.close_all().await;

    // Nor send to a topic her policy does not name.
    let other = alice_tls
        .invoke(addr, send_request("SecurityOther", 0), ANSWER_LIMIT)
        .await
        .unwrap();
    expect(
        "alice's send to another topic",
        &other,
        ResponseCode::NO_PERMISSION,
        &["User:alice may not Pub Topic:SecurityOther"],
    );
    // Her send to her topic is stored, over TLS...
    let sent = alice_tls
        .invoke(addr, send_request(&topic, 0), ANSWER_LIMIT)
        .await
        .unwrap();
    expect("alice's send over TLS", &sent, ResponseCode::SUCCESS, &[]);
    alice_tls.close_all().await;

    // ...and through Sluice's producer with her access key, in plain.
    let producer = Producer::start(ProducerConfig {
        access_key: Some(ALICE.0.into()),
        secret_key: Some(ALICE.1.into()),
        ..ProducerConfig::with_namesrv(&broker.namesrv)
    })
    .await
    .unwrap();
    for i in 0..5 {
        let result = producer
            .send(Message::new(topic.as_str(), format!("alice {i}")))
            .await
            .unwrap_or_else(|e| panic!("alice's send {i}: {e}"));
        assert_eq!(result.status, SendStatus::SendOk, "send {i}");
        assert_eq!(result.message_queue.topic, topic);
    }
    producer.shutdown().await;

    // Without credentials the same producer is refused.
    let anonymous = Producer::start(ProducerConfig::with_namesrv(&broker.namesrv))
        .await
        .unwrap();
    let err = anonymous
        .send(Message::new(topic.as_str(), "anonymous"))
        .await
        .expect_err("an unsigned send was stored");
    assert!(
        matches!(
            &err,
            ProducerError::Broker { code, .. } if *code == ResponseCode::NO_PERMISSION
        ),
        "{err}"
    );
    anonymous.shutdown().await;
}

/// Mechanism: an enforcing port starts a TLS handshake on every
/// connection; a plain client's first frame is no ClientHello, so the
/// broker closes the connection without an answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_enforcing_tls_port_serves_tls_clients_only() {
    let Some(env) = E2eEnv::from_env("security: enforcing TLS") else {
        return;
    };
    let [cert, key] = certificate(&cert_dir(&env, "enforcing"));
    let broker =
        OwnBroker::start(&env, "enforcing", &["tlsServerMode=enforcing", &cert, &key]).unwrap();
    let tls = client(true, None);
    let answer = tls
        .invoke(&broker.addr, get_config(), ANSWER_LIMIT)
        .await
        .unwrap();
    expect(
        "GET_BROKER_CONFIG over TLS",
        &answer,
        ResponseCode::SUCCESS,
        &[],
    );
    tls.close_all().await;

    let plain = client(false, None);
    let err = plain
        .invoke(&broker.addr, get_config(), ANSWER_LIMIT)
        .await
        .expect_err("a plain client was answered on an enforcing port");
    assert!(
        matches!(err, ClientError::ConnectionClosed { .. }),
        "{err:?}"
    );
    plain.close_all().await;
}

/// The name server's cluster table, `None` when it does not answer.
async fn cluster_info(reader: &RemotingClient, namesrv: &str) -> Option<ClusterInfo> {
    let answer = reader
        .invoke(
            namesrv,
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            Duration::from_secs(3),
        )
        .await
        .ok()?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    body::from_json(&answer.body).ok()
}

/// Mechanism: broker A's embedded name server runs with A's
/// `authenticationEnabled` and `innerClientAuthenticationCredentials`, and
/// accepts only `REGISTER_BROKER` requests signed with those credentials.
/// Brokers B and C have no name server of their own and register with A's,
/// signing with their own `innerClientAuthenticationCredentials`: B's
/// secret is wrong, so its registrations are refused (and it logs so); C's
/// is right, so it joins A's cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_broker_with_wrong_inner_credentials_cannot_register() {
    let Some(env) = E2eEnv::from_env("security: inner credentials") else {
        return;
    };
    let right = r#"innerClientAuthenticationCredentials={"accessKey":"cluster","secretKey":"cluster-secret-1"}"#;
    let wrong =
        r#"innerClientAuthenticationCredentials={"accessKey":"cluster","secretKey":"guessed"}"#;
    let a = OwnBroker::start(&env, "inner-a", &["authenticationEnabled=true", right]).unwrap();
    let joining = |name: &'static str, credentials: &'static str| {
        let namesrv = format!("namesrvAddr={}", a.namesrv);
        let broker_name = format!("brokerName={name}");
        OwnBroker::start(
            &env,
            name,
            &[
                "embeddedNamesrv=false",
                &namesrv,
                &broker_name,
                "authenticationEnabled=true",
                credentials,
            ],
        )
        .unwrap()
    };
    let b = joining("broker-b", wrong);
    let c = joining("broker-c", right);

    let reader = RemotingClient::new(ClientOptions::default());
    wait_for(Duration::from_secs(30), || async {
        cluster_info(&reader, &a.namesrv)
            .await
            .is_some_and(|info| info.broker_addr_table.contains_key("broker-c"))
    })
    .await
    .expect("broker-c registered with A's name server within 30 s");
    let refusal = "name server refused registration";
    wait_for(Duration::from_secs(30), || async {
        !log_lines(&b.dir.join("broker.log"), refusal).is_empty()
    })
    .await
    .unwrap_or_else(|e| panic!("broker-b's log shows no refusal: {e}"));
    let refused = log_lines(&b.dir.join("broker.log"), refusal);
    println!("broker-b: {}", refused[0]);
    assert!(
        refused[0].contains("NO_PERMISSION")
            && refused[0].contains("innerClientAuthenticationCredentials"),
        "{refused:?}"
    );
    assert!(
        log_lines(&c.dir.join("broker.log"), refusal).is_empty(),
        "broker-c was refused too: {:?}",
        log_lines(&c.dir.join("broker.log"), refusal)
    );

    let info = cluster_info(&reader, &a.namesrv)
        .await
        .expect("cluster info of A's name server");
    println!("A's name server: {:?}", info.cluster_addr_table);
    assert!(
        !info.broker_addr_table.contains_key("broker-b"),
        "broker-b registered with the wrong credentials: {info:?}"
    );
    let members = info
        .cluster_addr_table
        .get(CLUSTER)
        .cloned()
        .unwrap_or_default();
    assert!(
        members.contains("broker-a") && members.contains("broker-c"),
        "{members:?}"
    );
    assert!(!members.contains("broker-b"), "{members:?}");
    reader.close_all().await;
}

/// Mechanism: SIGHUP makes the broker read its certificate files again;
/// new connections get the renewed certificate, open ones keep their
/// session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_sighup_reads_a_renewed_certificate_and_keeps_open_connections() {
    let Some(env) = E2eEnv::from_env("security: certificate renewal on SIGHUP") else {
        return;
    };
    let dir = cert_dir(&env, "renewal");
    let [cert, key] = certificate(&dir);
    let broker =
        OwnBroker::start(&env, "renewal", &["tlsServerMode=enforcing", &cert, &key]).unwrap();
    // Each certificate as a trust root of its own, kept apart from the
    // files the broker reads.
    let keep = |name: &str| {
        let path = dir.join(name);
        std::fs::copy(dir.join("broker.crt"), &path).unwrap();
        path
    };
    let old_root = keep("old-root.crt");
    let trusting = |root: &Path| {
        RemotingClient::new(ClientOptions {
            tls: Some(ClientTls::trust_roots(root).unwrap()),
            ..ClientOptions::default()
        })
    };
    let open = trusting(&old_root);
    let answer = open
        .invoke(&broker.addr, get_config(), ANSWER_LIMIT)
        .await
        .unwrap();
    expect("before renewal", &answer, ResponseCode::SUCCESS, &[]);

    certificate(&dir);
    let new_root = keep("new-root.crt");
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &broker.pid().to_string()])
        .status()
        .unwrap();
    assert!(hup.success(), "kill -HUP");
    wait_for(Duration::from_secs(20), || async {
        let fresh = trusting(&new_root);
        let ok = fresh.invoke(&broker.addr, get_config(), ANSWER_LIMIT).await;
        fresh.close_all().await;
        ok.is_ok_and(|a| a.response_code() == ResponseCode::SUCCESS)
    })
    .await
    .expect("a client trusting the renewed certificate is served");
    let stale = trusting(&old_root);
    assert!(
        stale
            .invoke(&broker.addr, get_config(), ANSWER_LIMIT)
            .await
            .is_err(),
        "a new connection still got the old certificate"
    );
    stale.close_all().await;
    // The connection opened before the renewal goes on.
    let answer = open
        .invoke(&broker.addr, get_config(), ANSWER_LIMIT)
        .await
        .unwrap();
    expect("the open connection", &answer, ResponseCode::SUCCESS, &[]);
    open.close_all().await;
}
