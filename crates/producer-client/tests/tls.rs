//! A producer with `useTLS` makes every connection, to the name server and
//! the broker alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. It trusts any certificate by default, the roots of
//! `tlsClientTrustCertPath` when given, and shows the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to a server requiring one.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use producer_client::{Message, Producer, ProducerConfig, ProducerError, SendResult};
use remoting_net::{
    serve, CancellationToken, ClientAuth, Connection, Handler, ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{
    body::{self, BrokerData, QueueData, TopicRouteData},
    header::SendMessageResponseHeader,
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

const TOPIC: &str = "TlsTopic";

/// A name server and broker in one: routes `TOPIC` to itself, takes every
/// send and answers every other request `SUCCESS`, reporting the code of
/// each request it serves.
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
        let answer = request.response_to(ResponseCode::SUCCESS, None);
        let answer = match request.request_code() {
            RequestCode::GET_ROUTEINFO_BY_TOPIC => answer.with_body(body::to_json(&self.route())),
            RequestCode::SEND_MESSAGE | RequestCode::SEND_MESSAGE_V2 => {
                answer.with_header(&SendMessageResponseHeader {
                    msg_id: "0A000001000000000000000000000001".into(),
                    queue_id: 0,
                    queue_offset: 0,
                    ..SendMessageResponseHeader::default()
                })
            }
            _ => answer,
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
        let client = CertificateParams::new(vec!["producer.example".to_owned()])
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

/// Starts a producer with `config` and sends one message to `TOPIC`.
async fn send_one(config: ProducerConfig) -> Result<SendResult, ProducerError> {
    let producer = Producer::start(ProducerConfig {
        send_msg_timeout: Duration::from_secs(5),
        retry_times_when_send_failed: 0,
        ..config
    })
    .await
    .unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(20),
        producer.send(Message::new(TOPIC, "over TLS")),
    )
    .await
    .expect("the send did not end");
    producer.shutdown().await;
    sent
}

fn drain(rx: &mut mpsc::UnboundedReceiver<RequestCode>) -> Vec<RequestCode> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_use_tls_the_route_lookup_and_the_send_reach_an_enforcing_server() {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(false)).await;
    let sent = send_one(ProducerConfig {
        use_tls: true,
        ..ProducerConfig::with_namesrv(&addr)
    })
    .await
    .unwrap();
    assert_eq!(sent.message_queue.topic, TOPIC);
    let codes = drain(&mut seen);
    assert!(
        codes.contains(&RequestCode::GET_ROUTEINFO_BY_TOPIC),
        "{codes:?}"
    );
    assert!(
        codes.contains(&RequestCode::SEND_MESSAGE_V2) || codes.contains(&RequestCode::SEND_MESSAGE),
        "{codes:?}"
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_use_tls_an_enforcing_server_serves_nothing() {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(false)).await;
    let failed = send_one(ProducerConfig::with_namesrv(&addr))
        .await
        .unwrap_err();
    assert!(
        !matches!(failed, ProducerError::Config { .. }),
        "{failed:?}"
    );
    assert_eq!(drain(&mut seen), []);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_roots_and_a_client_certificate_reach_a_server_requiring_one() {
    let pems = Pems::new();
    let (addr, mut seen, stop) = start(pems.enforcing(true)).await;
    let trusting = |trust: &Path| ProducerConfig {
        use_tls: true,
        tls_client_trust_cert_path: Some(trust.to_path_buf()),
        ..ProducerConfig::with_namesrv(&addr)
    };
    let sent = send_one(ProducerConfig {
        tls_client_cert_path: Some(pems.client_crt.clone()),
        tls_client_key_path: Some(pems.client_key.clone()),
        ..trusting(&pems.server_crt)
    })
    .await
    .unwrap();
    assert_eq!(sent.message_queue.topic, TOPIC);
    assert!(
        drain(&mut seen).contains(&RequestCode::GET_ROUTEINFO_BY_TOPIC),
        "the name server part was asked"
    );

    // Without the certificate the server refuses the handshake.
    assert!(send_one(trusting(&pems.server_crt)).await.is_err());
    // Roots that did not sign the server's certificate refuse the server.
    let distrusting = ProducerConfig {
        tls_client_cert_path: Some(pems.client_crt.clone()),
        tls_client_key_path: Some(pems.client_key.clone()),
        ..trusting(&pems.ca)
    };
    assert!(send_one(distrusting).await.is_err());
    assert_eq!(drain(&mut seen), []);
    stop.cancel();
}
