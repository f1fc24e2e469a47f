//! `--tls` makes every connection of `sluice-admin`, to the name server and
//! the brokers alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. It names itself as the only master broker and lists no
//! users. `--tls-trust` names the certificates to trust instead of any, and
//! `--tls-cert` with `--tls-key` the certificate shown to a server
//! requiring one.
#![allow(clippy::unwrap_used)]

use std::{path::PathBuf, sync::Arc, time::Duration};

use admin::{AdminError, Cli};
use clap::Parser;
use remoting_net::{
    serve, CancellationToken, ClientAuth, Connection, Handler, ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{
    body::{to_json, BrokerData, ClusterInfo},
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

/// A name server and broker in one: its cluster info names itself as the
/// master of `broker-a`, it lists no users, and it reports the code of
/// each request it serves.
struct FakeCluster {
    addr: String,
    seen: mpsc::UnboundedSender<RequestCode>,
}

impl Handler for FakeCluster {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let _ = self.seen.send(request.request_code());
        let ok = request.response_to(ResponseCode::SUCCESS, None);
        let answer = match request.request_code() {
            RequestCode::GET_BROKER_CLUSTER_INFO => {
                let info = ClusterInfo {
                    broker_addr_table: [(
                        "broker-a".to_owned(),
                        BrokerData {
                            cluster: "DefaultCluster".into(),
                            broker_name: "broker-a".into(),
                            broker_addrs: [(0, self.addr.clone())].into_iter().collect(),
                            ..BrokerData::default()
                        },
                    )]
                    .into_iter()
                    .collect(),
                    cluster_addr_table: [(
                        "DefaultCluster".to_owned(),
                        ["broker-a".to_owned()].into_iter().collect(),
                    )]
                    .into_iter()
                    .collect(),
                };
                ok.with_body(to_json(&info))
            }
            RequestCode::AUTH_LIST_USER => ok.with_body(b"[]".to_vec()),
            _ => request.response_to(ResponseCode::REQUEST_CODE_NOT_SUPPORTED, None),
        };
        conn.send(answer);
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
        let client = CertificateParams::new(vec!["admin.example".to_owned()])
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

/// The fake, running.
struct Running {
    addr: String,
    seen: mpsc::UnboundedReceiver<RequestCode>,
    stop: CancellationToken,
}

impl Running {
    async fn start(tls: Arc<ServerTls>) -> Self {
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
        Self {
            addr,
            seen: rx,
            stop,
        }
    }

    /// Runs `sluice-admin <flags> user list` against this name server.
    async fn users(&self, flags: &[&str]) -> Result<String, AdminError> {
        let argv: Vec<&str> = ["sluice-admin", "--namesrv", self.addr.as_str()]
            .into_iter()
            .chain(flags.iter().copied())
            .chain(["user", "list"])
            .collect();
        let cli = Cli::try_parse_from(argv).unwrap_or_else(|e| panic!("{flags:?}: {e}"));
        tokio::time::timeout(Duration::from_secs(20), admin::run(&cli))
            .await
            .expect("the command did not end")
    }

    /// The codes of the requests served since the last call.
    fn served(&mut self) -> Vec<RequestCode> {
        std::iter::from_fn(|| self.seen.try_recv().ok()).collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tls_the_name_server_and_the_broker_are_asked_over_tls() {
    let pems = Pems::new();
    let mut fake = Running::start(pems.enforcing(false)).await;
    assert_eq!(fake.users(&["--tls"]).await.unwrap(), "no users\n");
    assert_eq!(
        fake.served(),
        [
            RequestCode::GET_BROKER_CLUSTER_INFO,
            RequestCode::AUTH_LIST_USER
        ]
    );

    let plain = fake.users(&[]).await.unwrap_err();
    assert!(matches!(plain, AdminError::Connection { .. }), "{plain:?}");
    assert_eq!(fake.served(), []);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_roots_and_a_client_certificate_reach_a_server_requiring_one() {
    let pems = Pems::new();
    let mut fake = Running::start(pems.enforcing(true)).await;
    let trust = pems.server_crt.to_string_lossy().into_owned();
    let cert = pems.client_crt.to_string_lossy().into_owned();
    let key = pems.client_key.to_string_lossy().into_owned();
    let identified = [
        "--tls",
        "--tls-trust",
        &trust,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    assert_eq!(fake.users(&identified).await.unwrap(), "no users\n");
    assert_eq!(
        fake.served(),
        [
            RequestCode::GET_BROKER_CLUSTER_INFO,
            RequestCode::AUTH_LIST_USER
        ]
    );

    // Without the certificate the server refuses the handshake.
    let anonymous = fake.users(&["--tls", "--tls-trust", &trust]).await;
    assert!(
        matches!(anonymous, Err(AdminError::Connection { .. })),
        "{anonymous:?}"
    );
    // Roots that did not sign the server's certificate refuse the server.
    let ca = pems.ca.to_string_lossy().into_owned();
    let distrusting = [
        "--tls",
        "--tls-trust",
        &ca,
        "--tls-cert",
        &cert,
        "--tls-key",
        &key,
    ];
    let refused = fake.users(&distrusting).await;
    assert!(
        matches!(refused, Err(AdminError::Connection { .. })),
        "{refused:?}"
    );
    assert_eq!(fake.served(), []);
}
