//! What the clients' tests share (feature `testing`): a name server and
//! broker in one fake server, and the PEM files of a TLS test.

use std::{path::PathBuf, sync::Arc, time::Duration};

use remoting_net::{
    serve, CancellationToken, ClientAuth, Connection, Handler, ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{
    body::{to_json, BrokerData, ClusterInfo, QueueData, TopicRouteData},
    header::{PullMessageResponseHeader, SendMessageResponseHeader},
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

/// A name server and broker in one, named `broker-a` of `DefaultCluster`:
/// routes every topic to itself (one queue), names itself the only master
/// in its cluster info, takes every send, knows no message, group member
/// or user, answers every other request `SUCCESS`, and reports the code of
/// each request it serves.
struct FakeCluster {
    addr: String,
    seen: mpsc::UnboundedSender<RequestCode>,
}

impl FakeCluster {
    fn broker(&self) -> BrokerData {
        BrokerData {
            cluster: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_addrs: [(0, self.addr.clone())].into_iter().collect(),
            ..BrokerData::default()
        }
    }
}

impl Handler for FakeCluster {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let _ = self.seen.send(request.request_code());
        if request.is_oneway() {
            return;
        }
        let ok = request.response_to(ResponseCode::SUCCESS, None);
        let answer = match request.request_code() {
            RequestCode::GET_ROUTEINFO_BY_TOPIC => ok.with_body(to_json(&TopicRouteData {
                queue_datas: vec![QueueData {
                    broker_name: "broker-a".into(),
                    read_queue_nums: 1,
                    write_queue_nums: 1,
                    perm: 6,
                    topic_sys_flag: 0,
                }],
                broker_datas: vec![self.broker()],
                ..TopicRouteData::default()
            })),
            RequestCode::GET_BROKER_CLUSTER_INFO => ok.with_body(to_json(&ClusterInfo {
                broker_addr_table: [("broker-a".to_owned(), self.broker())].into(),
                cluster_addr_table: [("DefaultCluster".to_owned(), ["broker-a".to_owned()].into())]
                    .into(),
            })),
            RequestCode::SEND_MESSAGE | RequestCode::SEND_MESSAGE_V2 => {
                ok.with_header(&SendMessageResponseHeader {
                    msg_id: "0A000001000000000000000000000001".into(),
                    queue_id: 0,
                    queue_offset: 0,
                    ..SendMessageResponseHeader::default()
                })
            }
            RequestCode::PULL_MESSAGE => request
                .response_to(ResponseCode::PULL_NOT_FOUND, None)
                .with_header(&PullMessageResponseHeader::default()),
            RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
                ok.with_body(br#"{"consumerIdList":[]}"#.to_vec())
            }
            RequestCode::AUTH_LIST_USER => ok.with_body(b"[]".to_vec()),
            _ => ok,
        };
        conn.send(answer);
    }
}

/// Starts the fake on a loopback port with `tls`; returns its address, the
/// codes of what it serves, and its stop.
///
/// # Panics
/// When no loopback port can be bound.
pub async fn start_fake(
    tls: Arc<ServerTls>,
) -> (
    String,
    mpsc::UnboundedReceiver<RequestCode>,
    CancellationToken,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener
        .local_addr()
        .expect("the bound address")
        .to_string();
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

/// The codes the fake served since the last call.
pub fn served(seen: &mut mpsc::UnboundedReceiver<RequestCode>) -> Vec<RequestCode> {
    std::iter::from_fn(|| seen.try_recv().ok()).collect()
}

/// The PEM files of a test: the server's self-signed certificate for
/// 127.0.0.1 and its key, a certificate authority, and a client
/// certificate it signed, with its key.
pub struct Pems {
    /// The server's certificate.
    pub server_crt: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// The authority that signed the client's certificate.
    pub ca: PathBuf,
    /// The client's certificate.
    pub client_crt: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    _dir: tempfile::TempDir,
}

impl Pems {
    /// New files in a temporary directory, the client's certificate for
    /// `<client>.example`.
    ///
    /// # Panics
    /// When a certificate cannot be made or written.
    pub fn new(client: &str) -> Self {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let dir = tempfile::tempdir().expect("a temporary directory");
        let at = |name: &str| dir.path().join(name);
        let server = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()])
            .expect("a server certificate");
        let mut ca_params =
            CertificateParams::new(Vec::<String>::new()).expect("authority parameters");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca_key = KeyPair::generate().expect("an authority key");
        let ca = ca_params.self_signed(&ca_key).expect("an authority");
        let client_key = KeyPair::generate().expect("a client key");
        let client = CertificateParams::new(vec![format!("{client}.example")])
            .and_then(|p| p.signed_by(&client_key, &ca, &ca_key))
            .expect("a client certificate");
        let files = [
            ("server.crt", server.cert.pem()),
            ("server.key", server.key_pair.serialize_pem()),
            ("ca.crt", ca.pem()),
            ("client.crt", client.pem()),
            ("client.key", client_key.serialize_pem()),
        ];
        for (name, pem) in files {
            std::fs::write(at(name), pem).expect("write a PEM file");
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
    ///
    /// # Panics
    /// When the files cannot be read.
    pub fn enforcing(&self, require_client: bool) -> Arc<ServerTls> {
        let tls = ServerTls::from_pem_files(TlsMode::Enforcing, &self.server_crt, &self.server_key)
            .expect("the server's TLS");
        let tls = if require_client {
            tls.with_client_auth(ClientAuth::Require(self.ca.clone()))
                .expect("client certificates required")
        } else {
            tls
        };
        Arc::new(tls)
    }
}
