//! Consumers with `useTLS` make every connection, to the name server and
//! the broker alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. They trust any certificate by default, the roots of
//! `tlsClientTrustCertPath` when given, and show the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to a server requiring one.
#![allow(clippy::unwrap_used)]

use std::{path::PathBuf, sync::Arc, time::Duration};

use consumer_client::{
    ConsumeStatus, ConsumerConfig, FnHandler, PullConsumer, PullStatus, PushConsumer,
};
use remoting_net::{
    serve, CancellationToken, ClientAuth, Connection, Handler, ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{
    body::{self, BrokerData, QueueData, TopicRouteData},
    header::PullMessageResponseHeader,
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

const TOPIC: &str = "TlsTopic";
const GROUP: &str = "TlsGroup";

/// A name server and broker in one: routes every topic to itself (one
/// queue), knows no message and no group member, answers every other
/// request `SUCCESS`, and reports the code of each request it serves.
struct FakeCluster {
    addr: String,
    seen: mpsc::UnboundedSender<RequestCode>,
}

impl Handler for FakeCluster {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let _ = self.seen.send(request.request_code());
        if request.is_oneway() {
            return;
        }
        let answer = match request.request_code() {
            RequestCode::GET_ROUTEINFO_BY_TOPIC => request
                .response_to(ResponseCode::SUCCESS, None)
                .with_body(body::to_json(&self.route())),
            RequestCode::PULL_MESSAGE => request
                .response_to(ResponseCode::PULL_NOT_FOUND, None)
                .with_header(&PullMessageResponseHeader::default()),
            RequestCode::GET_CONSUMER_LIST_BY_GROUP => request
                .response_to(ResponseCode::SUCCESS, None)
                .with_body(br#"{"consumerIdList":[]}"#.to_vec()),
            _ => request.response_to(ResponseCode::SUCCESS, None),
        };
        conn.send(answer);
    }
}

impl FakeCluster {
    fn route(&self) -> TopicRouteData {
        TopicRouteData {
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_nums: 1,
                write_queue_nums: 1,
                perm: 6,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addrs: [(0, self.addr.clone())].into_iter().collect(),
                ..BrokerData::default()
            }],
            ..TopicRouteData::default()
        }
    }
}

/// The PEM files of a test: the server's self-signed certificate for
/// 127.0.0.1 and its key, a certificate authority, and a client
/// certificate it signed with its key.
struct Pems {
    server_crt: PathBuf,
    server_key: PathBuf,
    ca: PathBuf,
    client_crt: PathBuf,
    client_key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pems {
    fn new() -> Self {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let dir = tempfile::tempdir().unwrap();
        let at = |name: &str| dir.path().join(name);
        let server = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client = CertificateParams::new(vec!["consumer.example".to_owned()])
            .unwrap()
            .signed_by(&client_key, &ca, &ca_key)
            .unwrap();
        let files = [
            ("server.crt", server.cert.pem()),
            ("server.key", server.key_pair.serialize_pem()),
            ("ca.crt", ca.pem()),
            ("client.crt", client.pem()),
            ("client.key", client_key.serialize_pem()),
        ];
        for (name, pem) in files {
            std::fs::write(at(name), pem).unwrap();
        }
        Self {
            server_crt: at("server.crt"),
            server_key: at("server.key"),
            ca: at("ca.crt"),
            client_crt: at("client.crt"),
            client_key: at("client.key"),
            _dir: dir,
        }
    }

    /// An enforcing server side with the server certificate, requiring
    /// client certificates signed by the authority when `require_client`.
    fn enforcing(&self, require_client: bool) -> Arc<ServerTls> {
        let tls = ServerTls::from_pem_files(TlsMode::Enforcing, &self.server_crt, &self.server_key)
            .unwrap();
        let tls = if require_client {
            tls.with_client_auth(ClientAuth::Require(self.ca.clone()))
                .unwrap()
        } else {
            tls
        };
        Arc::new(tls)
    }
}

/// Starts the fake on a port with `tls`; returns its address, the codes
/// of what it serves, and its stop.
async fn start(
    tls: Arc<ServerTls>,
) -> (
    String,
    mpsc::UnboundedReceiver<RequestCode>,
    CancellationToken,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (seen, rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        Arc::new(FakeCluster {
            addr: addr.clone(),
            seen,
        }),
        ServerOptions {
            tls: Some(tls),
            handshake_timeout: Duration::from_secs(10),
            ..ServerOptions::default()
        },
        stop.clone(),
    ));
    (addr, rx, stop)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<RequestCode>) -> Vec<RequestCode> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

fn assert_served(codes: &[RequestCode], wanted: &[RequestCode]) {
    for code in wanted {
        assert!(codes.contains(code), "no {code:?} among {codes:?}");
    }
}

/// Fails the test if `fut` takes longer than 30 s.
async fn bounded<T>(fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("the call did not end")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_consumer_with_use_tls_looks_up_and_pulls_from_an_enforcing_server() {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(false)).await;
    let consumer = PullConsumer::start(ConsumerConfig {
        use_tls: true,
        ..ConsumerConfig::new(&addr, GROUP)
    })
    .await
    .unwrap();
    let queues = bounded(consumer.fetch_queues(TOPIC)).await.unwrap();
    assert_eq!(queues.len(), 1);
    let pulled = bounded(consumer.pull(&queues[0], 0, 32)).await.unwrap();
    assert_eq!(pulled.status, PullStatus::NoNewMsg);
    consumer.shutdown().await;
    assert_served(
        &drain(&mut seen),
        &[
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            RequestCode::PULL_MESSAGE,
        ],
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_consumer_with_trusted_roots_and_a_client_certificate_reaches_a_server_requiring_one(
) {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(true)).await;
    let config = ConsumerConfig {
        use_tls: true,
        tls_client_trust_cert_path: Some(pems.server_crt.clone()),
        tls_client_cert_path: Some(pems.client_crt.clone()),
        tls_client_key_path: Some(pems.client_key.clone()),
        ..ConsumerConfig::new(&addr, GROUP)
    };
    let handler = FnHandler(|_| async { ConsumeStatus::Success });
    let consumer = bounded(PushConsumer::start(config.subscribe(TOPIC, "*"), handler))
        .await
        .unwrap();
    consumer.shutdown().await;
    assert_served(
        &drain(&mut seen),
        &[
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            RequestCode::GET_CONSUMER_LIST_BY_GROUP,
            RequestCode::HEART_BEAT,
        ],
    );

    // Without the certificate the server refuses the handshake.
    let pull = PullConsumer::start(ConsumerConfig {
        use_tls: true,
        tls_client_trust_cert_path: Some(pems.server_crt.clone()),
        ..ConsumerConfig::new(&addr, GROUP)
    })
    .await
    .unwrap();
    assert!(bounded(pull.fetch_queues(TOPIC)).await.is_err());
    pull.shutdown().await;
    assert_eq!(drain(&mut seen), []);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_without_use_tls_get_nothing_served_by_an_enforcing_server() {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(false)).await;
    let pull = PullConsumer::start(ConsumerConfig::new(&addr, GROUP))
        .await
        .unwrap();
    assert!(bounded(pull.fetch_queues(TOPIC)).await.is_err());
    pull.shutdown().await;
    let handler = FnHandler(|_| async { ConsumeStatus::Success });
    let push = bounded(PushConsumer::start(
        ConsumerConfig::new(&addr, GROUP).subscribe(TOPIC, "*"),
        handler,
    ))
    .await
    .unwrap();
    push.shutdown().await;
    assert_eq!(drain(&mut seen), []);
    stop.cancel();
}
