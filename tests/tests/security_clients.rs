//! Apache's official clients against brokers with access control on: the
//! RocketMQ C++ client 2.x over remoting with session credentials, and the
//! RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0) over gRPC with an
//! access key and secret key, in plain and over TLS.
//!
//! Each scenario starts its own broker (with its embedded name server),
//! with `authenticationEnabled`, `authorizationEnabled` and a super user
//! that creates the user `alice` and her policy. The broker logs every
//! refused request at debug level (`broker_server::executor` for remoting,
//! `broker_server::grpc::access` for gRPC), which these brokers turn on, so
//! that a scenario can check that nothing was refused while alice's clients
//! ran, and what was refused to the others.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::{BTreeSet, HashMap},
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use e2e_tests::{free_port, log_lines, unique, E2eEnv, OwnBroker, SignedAdmin};
use rocketmq::{
    conf::{ClientOption, ProducerOption, SimpleConsumerOption},
    model::{
        common::{FilterExpression, FilterType},
        message::MessageBuilder,
    },
    Producer, SimpleConsumer,
};
use serde_json::Value;
use tokio::sync::mpsc;

const ADMIN: (&str, &str) = ("admin", "admin-secret-1");
const INIT_USER: &str =
    r#"initAuthenticationUser={"username":"admin","password":"admin-secret-1"}"#;
const ALICE: (&str, &str) = ("alice", "alice-secret-1");
/// Log filter of the scenario brokers: refusals of access control shown.
const REFUSALS_LOGGED: (&str, &str) = ("RUST_LOG", "info,broker_server::access=debug");

/// Starts a broker named `name` with authentication and authorization on,
/// the super user `ADMIN`, refusals logged, and `sets`; creates `topic`
/// and the user alice, allowed `Pub` and `Sub` on the topic and `Sub` on
/// `group`.
async fn broker_with_alice(
    env: &E2eEnv,
    name: &str,
    sets: &[&str],
    topic: &str,
    group: &str,
) -> OwnBroker {
    let dir = env
        .dir
        .clone()
        .expect("SLUICE_E2E_DIR")
        .join(unique(&format!("{name}-")));
    let mut all = vec![
        "authenticationEnabled=true",
        "authorizationEnabled=true",
        INIT_USER,
    ];
    all.extend_from_slice(sets);
    let broker = OwnBroker::start_with_env(env, dir, &all, &[REFUSALS_LOGGED]).unwrap();
    // An enforcing broker (and its name server) takes TLS only, a permissive
    // one both, and one without TLS plain only.
    let admin = if sets.iter().any(|s| s.starts_with("tlsServerMode=")) {
        SignedAdmin::over_tls(&broker.addr, ADMIN.0, ADMIN.1).unwrap()
    } else {
        SignedAdmin::new(&broker.addr, ADMIN.0, ADMIN.1)
    };
    admin.create_topic(&broker.namesrv, topic, 2).await.unwrap();
    admin.create_user(ALICE.0, ALICE.1, "Normal").await.unwrap();
    let (on_topic, on_group) = (format!("Topic:{topic}"), format!("Group:{group}"));
    admin
        .allow(
            ALICE.0,
            &[(&on_topic, &["Pub", "Sub"]), (&on_group, &["Sub"])],
        )
        .await
        .unwrap();
    broker
}

/// The access-control refusals in the broker's log that contain `part`.
fn refusals(broker: &OwnBroker, part: &str) -> Vec<String> {
    log_lines(&broker.dir.join("broker.log"), "refused by access control")
        .into_iter()
        .filter(|l| l.contains(part))
        .collect()
}

/// Writes a self-signed certificate for 127.0.0.1 and its key into `dir`;
/// their paths.
fn certificate(dir: &Path) -> (PathBuf, PathBuf) {
    std::fs::create_dir_all(dir).unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (crt, key) = (dir.join("broker.crt"), dir.join("broker.key"));
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    (crt, key)
}

// ---------------------------------------------------------------------
// The RocketMQ C++ client (tests/cpp-client/driver.py).
// ---------------------------------------------------------------------

/// A running `tests/cpp-client/driver.py`; killed when dropped.
struct Driver {
    name: String,
    child: Child,
    lines: mpsc::UnboundedReceiver<String>,
    events: Vec<Value>,
}

impl Driver {
    /// Starts the driver with `args` under `python`, with HOME (where the
    /// C++ client writes its log) `home`.
    fn spawn(python: &Path, home: &Path, name: &str, args: &[&str]) -> Self {
        std::fs::create_dir_all(home).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/cpp-client/driver.py");
        let mut child = Command::new(python)
            .arg(script)
            .args(args)
            .env("HOME", home)
            .env_remove("ROCKETMQ_CLIENT_LOG_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {} {script}: {e}", python.display()));
        let stdout = child.stdout.take().expect("driver stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            name: format!("C++ {name} (log under {}/logs)", home.display()),
            child,
            lines,
            events: Vec::new(),
        }
    }

    /// The next JSON line; `None` when the output ended. Panics when none
    /// comes before `deadline`.
    async fn next(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = tokio::time::timeout(left, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("{}: no output in time", self.name))?;
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: not a JSON line ({e}): {line}", self.name));
        self.events.push(event.clone());
        Some(event)
    }

    /// Waits (up to 30 s) for the `started` line.
    async fn started(&mut self) {
        match self.next(Instant::now() + Duration::from_secs(30)).await {
            Some(e) if e["event"] == "started" => {}
            other => panic!("{}: did not start: {other:?}", self.name),
        }
    }

    /// Reads the output to its end and waits for the exit, within `limit`.
    async fn finish(mut self, limit: Duration) -> (ExitStatus, Vec<Value>) {
        let deadline = Instant::now() + limit;
        while self.next(deadline).await.is_some() {}
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: output ended but the process did not exit",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        println!("{}: {status}, last {:?}", self.name, self.events.last());
        (status, std::mem::take(&mut self.events))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn of<'a>(events: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> {
    events.iter().filter(move |e| e["event"] == kind)
}

/// Mechanism: the C++ client's `ClientRPCHook` adds `AccessKey`,
/// `OnsChannel` and `Signature` (HMAC-SHA1 over the sorted header fields
/// and the body) to every request; the broker verifies them against alice's
/// secret and checks her policy: `Pub` on the topic for the producer's
/// `SEND_MESSAGE_V2`, `Sub` on the group and topic for the consumer's
/// `HEART_BEAT`, `GET_CONSUMER_LIST_BY_GROUP`, offsets and `PULL_MESSAGE`s
/// (its retry topic's pulls are checked as the group). A producer without
/// credentials sends unsigned requests, which are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_cpp_client_with_session_credentials() {
    let Some(env) = E2eEnv::from_env("security: C++ client with session credentials") else {
        return;
    };
    let Some(python) = env.cpp_python.clone() else {
        println!(
            "skipping security: C++ client: SLUICE_E2E_CPP_PYTHON not set \
             (run scripts/install-cpp-client.sh, then `cargo xtask e2e`)"
        );
        return;
    };
    let (topic, group) = (unique("SecurityCpp"), unique("security-cpp-"));
    let broker = broker_with_alice(&env, "cpp-acl", &[], &topic, &group).await;
    let homes = broker.dir.join("cpp-homes");
    let n: usize = if env.quick { 50 } else { 500 };
    let (count, timeout) = (n.to_string(), "90".to_owned());
    let ns = broker.namesrv.as_str();
    let alice = ["--access-key", ALICE.0, "--secret-key", ALICE.1];

    let mut push_args = vec![
        "push",
        "--namesrv",
        ns,
        "--group",
        &group,
        "--topic",
        &topic,
        "--expect",
        &count,
        "--timeout",
        &timeout,
        "--from-first",
    ];
    push_args.extend_from_slice(&alice);
    let mut consumer = Driver::spawn(&python, &homes.join("consumer"), "consumer", &push_args);
    consumer.started().await;

    let mut produce_args = vec![
        "produce",
        "--namesrv",
        ns,
        "--topic",
        &topic,
        "--count",
        &count,
        "--body-prefix",
        "cpp-sec-",
    ];
    produce_args.extend_from_slice(&alice);
    let producer = Driver::spawn(&python, &homes.join("producer"), "producer", &produce_args);
    let (status, events) = producer.finish(Duration::from_secs(150)).await;
    assert!(status.success(), "C++ producer as alice: {status}");
    let sent: Vec<&Value> = of(&events, "sent").collect();
    assert_eq!(sent.len(), n, "sent lines");
    assert!(sent.iter().all(|e| e["status"] == "SEND_OK"), "{sent:?}");

    let (status, events) = consumer.finish(Duration::from_secs(120)).await;
    let mut bodies: HashMap<String, usize> = HashMap::new();
    for e in of(&events, "message") {
        *bodies
            .entry(e["body"].as_str().unwrap_or_default().to_owned())
            .or_default() += 1;
    }
    let expected: BTreeSet<String> = (0..n).map(|i| format!("cpp-sec-{i}")).collect();
    let received: BTreeSet<String> = bodies.keys().cloned().collect();
    assert_eq!(
        received.symmetric_difference(&expected).count(),
        0,
        "missing {:?}, unexpected {:?}",
        expected.difference(&received).collect::<Vec<_>>(),
        received.difference(&expected).collect::<Vec<_>>()
    );
    assert!(status.success(), "C++ push consumer as alice: {status}");
    let twice: Vec<_> = bodies.iter().filter(|(_, &c)| c > 1).collect();
    assert!(twice.is_empty(), "received more than once: {twice:?}");
    let refused = refusals(&broker, "");
    assert!(refused.is_empty(), "requests refused: {refused:#?}");

    // Without credentials: every send refused. The C++ client tries each
    // queue in turn and then reports that no route is left.
    let anonymous = Driver::spawn(
        &python,
        &homes.join("anonymous"),
        "anonymous producer",
        &[
            "produce",
            "--namesrv",
            ns,
            "--topic",
            &topic,
            "--count",
            "3",
            "--timeout",
            "60",
        ],
    );
    let (status, events) = anonymous.finish(Duration::from_secs(90)).await;
    assert_eq!(status.code(), Some(4), "exit code: some sends failed");
    let errors: Vec<String> = of(&events, "send_error")
        .map(|e| e["error"].as_str().unwrap_or_default().to_owned())
        .collect();
    println!("C++ producer without credentials: {errors:?}");
    assert_eq!(errors.len(), 3, "{events:?}");
    assert_eq!(of(&events, "sent").count(), 0, "{events:?}");
    let answers = cpp_log_lines(&homes.join("anonymous"), "processSendResponse error");
    assert!(!answers.is_empty(), "the C++ client logged no refused send");
    for line in &answers {
        assert!(
            line.contains("no AccessKey, error code:16"),
            "not a NO_PERMISSION answer: {line}"
        );
    }
    // SEND_MESSAGE_V2 (310), unsigned.
    let sends = refusals(&broker, "request=SEND_MESSAGE_V2 ");
    assert!(!sends.is_empty(), "the broker refused no send");
    assert!(
        sends.iter().all(|l| l.contains("no AccessKey")),
        "{sends:#?}"
    );
}

/// The lines of the C++ client's logs under `home` that contain `part`.
fn cpp_log_lines(home: &Path, part: &str) -> Vec<String> {
    let dir = home.join("logs").join("rocketmq-client");
    std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|entry| log_lines(&entry.path(), part))
        .collect()
}

// ---------------------------------------------------------------------
// The RocketMQ 5 Rust client (crates.io `rocketmq` 5.0.0) over gRPC.
// ---------------------------------------------------------------------

/// The client's options: `endpoint`, TLS or plain h2c, signing as `user`.
fn client_option(endpoint: &str, tls: bool, user: (&str, &str)) -> ClientOption {
    let mut option = ClientOption::default();
    option.set_access_url(endpoint);
    option.set_enable_tls(tls);
    option.set_access_key(user.0);
    option.set_secret_key(user.1);
    // The client's gRPC deadline of a receive equals this; the broker
    // answers "no message" before it.
    option.set_long_polling_timeout(Duration::from_secs(5));
    option
}

fn message(topic: &str, i: usize) -> impl rocketmq::model::message::Message {
    MessageBuilder::builder()
        .set_topic(topic)
        .set_tag("sec")
        .set_body(format!("grpc-sec-{i}").into_bytes())
        .build()
        .unwrap()
}

/// As alice over `option`: a SimpleConsumer of `group` receives once
/// (nothing, which places the group at the queues' end), a producer sends
/// `n` messages, and the consumer receives and acknowledges every one
/// within 60 s.
async fn alice_round_trip(option: &ClientOption, topic: &str, group: &str, n: usize) {
    let mut consumer_option = SimpleConsumerOption::default();
    consumer_option.set_topics(vec![topic.to_owned()]);
    consumer_option.set_consumer_group(group);
    let mut consumer = SimpleConsumer::new(consumer_option, option.clone()).unwrap();
    consumer.start().await.unwrap();
    let all = FilterExpression::new(FilterType::Tag, "*");
    let first = consumer
        .receive_with(topic, &all, 32, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(first.is_empty(), "nothing sent yet: {}", first.len());

    let mut producer_option = ProducerOption::default();
    producer_option.set_topics(vec![topic.to_owned()]);
    let mut producer = Producer::new(producer_option, option.clone()).unwrap();
    producer.start().await.unwrap();
    let mut sent = BTreeSet::new();
    for i in 0..n {
        let receipt = producer
            .send(message(topic, i))
            .await
            .unwrap_or_else(|e| panic!("alice's send {i}: {e}"));
        sent.insert(receipt.message_id().to_owned());
    }
    assert_eq!(sent.len(), n, "distinct message ids");
    producer.shutdown().await.unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acked = BTreeSet::new();
    while acked.len() < n {
        assert!(
            Instant::now() < deadline,
            "received {} of {n} within 60 s",
            acked.len()
        );
        let messages = consumer
            .receive_with(topic, &all, 32, Duration::from_secs(30))
            .await
            .unwrap();
        for m in messages {
            assert!(
                sent.contains(m.message_id()),
                "unknown message {}",
                m.message_id()
            );
            consumer
                .ack(&m)
                .await
                .unwrap_or_else(|e| panic!("ack {}: {e}", m.message_id()));
            acked.insert(m.message_id().to_owned());
        }
    }
    consumer.shutdown().await.unwrap();
}

/// A producer over `option` starts and sends one message to `topic`; the
/// error of whichever step failed.
async fn try_send(option: &ClientOption, topic: &str) -> Result<(), rocketmq::error::ClientError> {
    let mut producer = Producer::new(ProducerOption::default(), option.clone())?;
    producer.start().await?;
    producer.send(message(topic, 0)).await?;
    producer.shutdown().await
}

/// Mechanism: the client signs every call with an `authorization` header
/// (`MQv2-HMAC-SHA1 Credential=<ak>, ..., Signature=<HMAC of
/// x-mq-date-time>`); the broker verifies it against the user's secret and
/// checks the call's needs (`Pub` on the topic for SendMessage, `Sub` on
/// topic and group for ReceiveMessage and AckMessage, either for
/// QueryRoute). A wrong secret is refused `UNAUTHORIZED`. The broker's gRPC
/// port is permissive, so this plain h2c client is served on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_official_grpc_client_with_credentials() {
    let Some(env) = E2eEnv::from_env("security: gRPC client with credentials") else {
        return;
    };
    let (topic, group) = (unique("SecurityGrpc"), unique("security-grpc-"));
    let port = free_port().unwrap();
    let grpc = format!("grpcListenPort={port}");
    let (crt, key) = certificate(&env.dir.clone().unwrap().join(unique("grpc-certs-")));
    let (crt, key) = (
        format!("tlsServerCertPath={}", crt.display()),
        format!("tlsServerKeyPath={}", key.display()),
    );
    let sets = [grpc.as_str(), "tlsServerMode=permissive", &crt, &key];
    let broker = broker_with_alice(&env, "grpc-acl", &sets, &topic, &group).await;
    let endpoint = format!("127.0.0.1:{port}");
    let n = if env.quick { 20 } else { 200 };

    let started = Instant::now();
    alice_round_trip(&client_option(&endpoint, false, ALICE), &topic, &group, n).await;
    println!(
        "gRPC client as alice: {n} sent, received and acked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let refused = refusals(&broker, "");
    assert!(refused.is_empty(), "calls refused: {refused:#?}");

    let wrong = client_option(&endpoint, false, (ALICE.0, "guessed"));
    let err = try_send(&wrong, &topic)
        .await
        .expect_err("a send signed with a wrong secret succeeded");
    println!("gRPC client with a wrong secret: {err}");
    assert!(err.to_string().contains("UNAUTHORIZED"), "{err}");
    let refused = refusals(&broker, "signature of User:alice does not verify");
    assert!(!refused.is_empty(), "the broker logged no refusal of it");
}

/// Mechanism: `set_enable_tls(true)` makes the client dial
/// `https://host:port`; its gRPC library then makes a TLS connection
/// trusting the platform's root certificates (rustls-native-certs, which
/// reads `SSL_CERT_FILE` when set) and verifying the server's name (here
/// the IP 127.0.0.1). An enforcing broker's gRPC port takes TLS only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn security_official_grpc_client_over_tls() {
    let Some(env) = E2eEnv::from_env("security: gRPC client over TLS") else {
        return;
    };
    let (topic, group) = (unique("SecurityGrpcTls"), unique("security-grpc-tls-"));
    let dir = env.dir.clone().unwrap().join(unique("grpc-tls-certs-"));
    let (crt, key) = certificate(&dir.join("broker"));
    let (stranger, _) = certificate(&dir.join("stranger"));
    let port = free_port().unwrap();
    let grpc = format!("grpcListenPort={port}");
    let (crt_set, key_set) = (
        format!("tlsServerCertPath={}", crt.display()),
        format!("tlsServerKeyPath={}", key.display()),
    );
    let sets = [grpc.as_str(), "tlsServerMode=enforcing", &crt_set, &key_set];
    let broker = broker_with_alice(&env, "grpc-tls", &sets, &topic, &group).await;
    let endpoint = format!("127.0.0.1:{port}");

    let plain = try_send(&client_option(&endpoint, false, ALICE), &topic).await;
    println!("gRPC client in plain on an enforcing port: {plain:?}");
    let plain = plain.expect_err("plain h2c was served on an enforcing port");
    assert!(
        format!("{plain:?}").contains("transport error"),
        "{plain:?}"
    );

    let saved = std::env::var_os("SSL_CERT_FILE");
    std::env::set_var("SSL_CERT_FILE", &stranger);
    let untrusted = try_send(&client_option(&endpoint, true, ALICE), &topic).await;
    println!("gRPC client over TLS, the broker's certificate untrusted: {untrusted:?}");
    let untrusted = untrusted.expect_err("TLS with an untrusted certificate");
    assert!(
        format!("{untrusted:?}").contains("invalid peer certificate"),
        "{untrusted:?}"
    );

    std::env::set_var("SSL_CERT_FILE", &crt);
    let n = if env.quick { 20 } else { 200 };
    let started = Instant::now();
    alice_round_trip(&client_option(&endpoint, true, ALICE), &topic, &group, n).await;
    println!(
        "gRPC client over TLS as alice: {n} sent, received and acked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    match saved {
        Some(v) => std::env::set_var("SSL_CERT_FILE", v),
        None => std::env::remove_var("SSL_CERT_FILE"),
    }
    let refused = refusals(&broker, "");
    assert!(refused.is_empty(), "calls refused: {refused:#?}");
}
