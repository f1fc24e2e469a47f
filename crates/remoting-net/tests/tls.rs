//! TLS on loopback: each server mode against TLS and plain clients, trust
//! of the server's certificate, and a certificate read again while the
//! server runs.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use remoting_net::{
    client::ClientConnection, serve, ClientError, ClientOptions, ClientTls, Connection, Handler,
    ServerOptions, ServerTls, TlsMode,
};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Answers every request with its body.
struct Echo;

impl Handler for Echo {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let response = request
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(request.body.clone());
        conn.send(response);
    }
}

/// Writes a self-signed certificate for 127.0.0.1 and its key as
/// `<name>.crt` and `<name>.key` in `dir`.
fn certificate(dir: &Path, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (crt, key) = (
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    (crt, key)
}

async fn start(tls: Arc<ServerTls>) -> (String, CancellationToken) {
    start_with(tls, Some(Duration::from_secs(120))).await
}

async fn start_with(tls: Arc<ServerTls>, idle: Option<Duration>) -> (String, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        Arc::new(Echo),
        ServerOptions {
            tls: Some(tls),
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: idle,
            ..ServerOptions::default()
        },
        shutdown.clone(),
    ));
    (addr, shutdown)
}

/// One request over a new connection with `tls`: the echoed body, or why
/// there was none.
async fn round_trip(addr: &str, tls: Option<ClientTls>) -> Result<Vec<u8>, ClientError> {
    let options = ClientOptions {
        tls,
        ..ClientOptions::default()
    };
    let conn = ClientConnection::connect(addr, &options).await?;
    let request = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(b"hello".to_vec());
    let response = conn.invoke(request, Duration::from_secs(5)).await?;
    Ok(response.body.to_vec())
}

#[tokio::test]
async fn a_permissive_port_serves_tls_and_plain_clients_alike() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(dir.path(), "server");
    let tls = Arc::new(ServerTls::from_pem_files(TlsMode::Permissive, &crt, &key).unwrap());
    let (addr, shutdown) = start(tls).await;
    let trusted = ClientTls::trust_roots(&crt).unwrap();
    assert_eq!(round_trip(&addr, Some(trusted)).await.unwrap(), b"hello");
    let any = ClientTls::trust_any().unwrap();
    assert_eq!(round_trip(&addr, Some(any)).await.unwrap(), b"hello");
    assert_eq!(round_trip(&addr, None).await.unwrap(), b"hello");
    shutdown.cancel();
}

#[tokio::test]
async fn an_enforcing_port_closes_plain_connections_and_a_disabled_one_tls_connections() {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(dir.path(), "server");
    let enforcing = Arc::new(ServerTls::from_pem_files(TlsMode::Enforcing, &crt, &key).unwrap());
    let (addr, shutdown) = start(enforcing).await;
    let tls = ClientTls::trust_roots(&crt).unwrap();
    assert_eq!(
        round_trip(&addr, Some(tls.clone())).await.unwrap(),
        b"hello"
    );
    let plain = round_trip(&addr, None).await.unwrap_err();
    assert!(
        matches!(plain, ClientError::ConnectionClosed { .. }),
        "{plain:?}"
    );
    shutdown.cancel();

    let disabled = Arc::new(ServerTls::from_pem_files(TlsMode::Disabled, &crt, &key).unwrap());
    let (addr, shutdown) = start(disabled).await;
    assert_eq!(round_trip(&addr, None).await.unwrap(), b"hello");
    let refused = round_trip(&addr, Some(tls)).await.unwrap_err();
    assert!(
        matches!(refused, ClientError::Connect { .. }),
        "{refused:?}"
    );
    shutdown.cancel();
}

#[tokio::test]
async fn a_client_refuses_a_server_it_does_not_trust_until_the_server_reloads_a_trusted_certificate(
) {
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(dir.path(), "server");
    let (other_crt, other_key) = certificate(dir.path(), "other");
    let tls = Arc::new(ServerTls::from_pem_files(TlsMode::Enforcing, &crt, &key).unwrap());
    let (addr, shutdown) = start(Arc::clone(&tls)).await;
    let trusts_other = ClientTls::trust_roots(&other_crt).unwrap();
    let refused = round_trip(&addr, Some(trusts_other.clone()))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, ClientError::Connect { .. }),
        "{refused:?}"
    );
    // The files now hold the other certificate; a reload takes it up.
    std::fs::copy(&other_crt, &crt).unwrap();
    std::fs::copy(&other_key, &key).unwrap();
    tls.reload().unwrap();
    assert_eq!(
        round_trip(&addr, Some(trusts_other)).await.unwrap(),
        b"hello"
    );
    // A reload that fails keeps what was in use.
    std::fs::write(&key, "not a key").unwrap();
    assert!(tls.reload().is_err());
    let still = ClientTls::trust_roots(&other_crt).unwrap();
    assert_eq!(round_trip(&addr, Some(still)).await.unwrap(), b"hello");
    shutdown.cancel();
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_at_the_idle_limit_as_a_plain_one_is() {
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(dir.path(), "server");
    let tls = Arc::new(ServerTls::from_pem_files(TlsMode::Permissive, &crt, &key).unwrap());
    let (addr, shutdown) = start_with(tls, Some(Duration::from_millis(200))).await;
    let mut silent = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 1];
    // The server closes it at the idle limit (200 ms), well before the
    // handshake limit (5 s): the read ends with 0 bytes.
    let read = tokio::time::timeout(Duration::from_secs(3), silent.read(&mut buf))
        .await
        .expect("the silent connection was closed");
    assert_eq!(read.unwrap_or(0), 0);
    shutdown.cancel();
}

/// A certificate authority in `dir` (`<name>-ca.crt`) and a client
/// certificate it signed (`<name>.crt`, `<name>.key`).
fn client_certificate(dir: &Path, name: &str) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec![format!("{name}.example")])
        .unwrap()
        .signed_by(&client_key, &ca, &ca_key)
        .unwrap();
    let paths = (
        dir.join(format!("{name}-ca.crt")),
        dir.join(format!("{name}.crt")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, client.pem()).unwrap();
    std::fs::write(&paths.2, client_key.serialize_pem()).unwrap();
    paths
}

#[tokio::test]
async fn a_server_asking_for_client_certificates_takes_only_those_its_roots_signed() {
    use remoting_net::ClientAuth;
    let dir = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(dir.path(), "server");
    let (ca, good_crt, good_key) = client_certificate(dir.path(), "good");
    let (_, bad_crt, bad_key) = client_certificate(dir.path(), "stranger");
    let with =
        |identity: Option<(&Path, &Path)>| Some(ClientTls::new(Some(&crt), identity).unwrap());
    let good = Some((good_crt.as_path(), good_key.as_path()));
    let bad = Some((bad_crt.as_path(), bad_key.as_path()));

    let required = ServerTls::from_pem_files(TlsMode::Enforcing, &crt, &key)
        .unwrap()
        .with_client_auth(ClientAuth::Require(ca.clone()))
        .unwrap();
    let (addr, stop) = start(Arc::new(required)).await;
    assert_eq!(round_trip(&addr, with(good)).await.unwrap(), b"hello");
    assert!(
        round_trip(&addr, with(None)).await.is_err(),
        "no certificate"
    );
    assert!(round_trip(&addr, with(bad)).await.is_err(), "another CA's");
    stop.cancel();

    let optional = ServerTls::from_pem_files(TlsMode::Enforcing, &crt, &key)
        .unwrap()
        .with_client_auth(ClientAuth::Optional(ca))
        .unwrap();
    let (addr, stop) = start(Arc::new(optional)).await;
    assert_eq!(round_trip(&addr, with(good)).await.unwrap(), b"hello");
    assert_eq!(round_trip(&addr, with(None)).await.unwrap(), b"hello");
    assert!(round_trip(&addr, with(bad)).await.is_err(), "another CA's");
    stop.cancel();
}
