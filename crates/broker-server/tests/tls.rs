//! TLS on the broker's remoting port: the settings that turn it on, and
//! clients with and without TLS against an enforcing and a permissive port.
#![allow(clippy::unwrap_used)]

mod common;

use std::{path::Path, time::Duration};

use broker_server::{testing, BrokerError};
use common::TestBroker;
use remoting_net::{ClientError, ClientOptions, ClientTls, RemotingClient};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};

/// A self-signed certificate for 127.0.0.1 and its key, as PEM files in
/// `dir`.
fn certificate(dir: &Path) -> (String, String) {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_owned()]).unwrap();
    let (crt, key) = (dir.join("broker.crt"), dir.join("broker.key"));
    std::fs::write(&crt, cert.cert.pem()).unwrap();
    std::fs::write(&key, cert.key_pair.serialize_pem()).unwrap();
    (crt.display().to_string(), key.display().to_string())
}

async fn get_config(addr: &str, tls: Option<ClientTls>) -> Result<RemotingCommand, ClientError> {
    ask(addr, tls, RequestCode::GET_BROKER_CONFIG).await
}

async fn ask(
    addr: &str,
    tls: Option<ClientTls>,
    code: RequestCode,
) -> Result<RemotingCommand, ClientError> {
    let client = RemotingClient::new(ClientOptions {
        tls,
        ..ClientOptions::default()
    });
    client
        .invoke(
            addr,
            RemotingCommand::request(code),
            Duration::from_secs(10),
        )
        .await
}

/// A certificate authority in `dir` (`ca.crt`) and a client certificate
/// it signed (`client.crt`, `client.key`).
fn client_certificate(dir: &Path) -> (String, String, String) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["client.example".to_owned()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let write = |name: &str, pem: String| {
        let path = dir.join(name);
        std::fs::write(&path, pem).unwrap();
        path.display().to_string()
    };
    (
        write("ca.crt", ca.pem()),
        write("client.crt", client.pem()),
        write("client.key", key.serialize_pem()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforcing_broker_registers_over_tls_with_its_embedded_name_server_which_takes_tls_only()
{
    let certs = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(certs.path());
    let b = TestBroker::start(&[
        ("tlsServerMode", "enforcing"),
        ("tlsServerCertPath", crt.as_str()),
        ("tlsServerKeyPath", key.as_str()),
    ])
    .await;
    let trusted = || Some(ClientTls::trust_roots(Path::new(&crt)).unwrap());
    let info = ask(&b.namesrv, trusted(), RequestCode::GET_BROKER_CLUSTER_INFO)
        .await
        .unwrap();
    let info: remoting_protocol::body::ClusterInfo =
        remoting_protocol::body::from_json(&info.body).unwrap();
    assert!(info.broker_addr_table.contains_key("broker-a"), "{info:?}");
    let plain = ask(&b.namesrv, None, RequestCode::GET_BROKER_CLUSTER_INFO).await;
    assert!(
        plain.is_err(),
        "a plain client on the enforcing name server"
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_requiring_client_certificates_serves_tls_clients_that_show_one_its_roots_signed()
{
    let certs = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(certs.path());
    let (ca, client_crt, client_key) = client_certificate(certs.path());
    let b = TestBroker::start(&[
        ("tlsServerMode", "permissive"),
        ("tlsServerCertPath", crt.as_str()),
        ("tlsServerKeyPath", key.as_str()),
        ("tlsServerNeedClientAuth", "require"),
        ("tlsServerTrustCertPath", ca.as_str()),
    ])
    .await;
    let with = |identity: Option<(&Path, &Path)>| {
        Some(ClientTls::new(Some(Path::new(&crt)), identity).unwrap())
    };
    let shown = Some((Path::new(&client_crt), Path::new(&client_key)));
    let answer = get_config(&b.addr, with(shown)).await.unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    assert!(
        get_config(&b.addr, with(None)).await.is_err(),
        "no certificate"
    );
    // Plain clients stay welcome on a permissive port.
    let answer = get_config(&b.addr, None).await.unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforcing_port_answers_tls_clients_only_and_a_permissive_one_both() {
    let certs = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(certs.path());
    let trusted = || Some(ClientTls::trust_roots(Path::new(&crt)).unwrap());
    let settings = |mode| {
        [
            ("tlsServerMode", mode),
            ("tlsServerCertPath", crt.as_str()),
            ("tlsServerKeyPath", key.as_str()),
        ]
    };

    let b = TestBroker::start(&settings("enforcing")).await;
    let answer = get_config(&b.addr, trusted()).await.unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let plain = get_config(&b.addr, None).await.unwrap_err();
    assert!(
        matches!(plain, ClientError::ConnectionClosed { .. }),
        "{plain:?}"
    );
    b.broker.shutdown().await;

    let b = TestBroker::start(&settings("Permissive")).await;
    for tls in [trusted(), None] {
        let answer = get_config(&b.addr, tls).await.unwrap();
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    }
    b.broker.shutdown().await;
}

/// A QueryRoute on the broker's gRPC port, over TLS trusting `ca` (PEM
/// file) or plain h2c; `Err` when the call cannot be made.
async fn grpc_route(b: &TestBroker, ca: Option<&str>) -> Result<i32, tonic::Status> {
    use grpc_protocol::{
        v2::{QueryRouteRequest, Resource},
        MessagingServiceClient,
    };
    use tonic::transport::{Certificate, Channel, ClientTlsConfig};
    let port = b.broker.grpc_addr().unwrap().port();
    let channel = match ca {
        Some(ca) => Channel::from_shared(format!("https://127.0.0.1:{port}"))
            .unwrap()
            .tls_config(
                ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(std::fs::read(ca).unwrap()))
                    .domain_name("127.0.0.1"),
            )
            .unwrap(),
        None => Channel::from_shared(format!("http://127.0.0.1:{port}")).unwrap(),
    };
    let channel = channel
        .connect_timeout(Duration::from_secs(10))
        .connect()
        .await
        .map_err(|e| tonic::Status::unavailable(e.to_string()))?;
    let mut request = tonic::Request::new(QueryRouteRequest {
        topic: Some(Resource {
            resource_namespace: String::new(),
            name: "TlsTopic".into(),
        }),
        endpoints: None,
    });
    request
        .metadata_mut()
        .insert("x-mq-client-id", "tls-test@1#1".parse().unwrap());
    let answer = MessagingServiceClient::new(channel)
        .query_route(request)
        .await?;
    Ok(answer.into_inner().status.unwrap().code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_grpc_port_follows_the_tls_mode_with_h2c_and_tls_on_one_permissive_port() {
    let certs = tempfile::tempdir().unwrap();
    let (crt, key) = certificate(certs.path());
    let settings = |mode| {
        [
            ("tlsServerMode", mode),
            ("tlsServerCertPath", crt.as_str()),
            ("tlsServerKeyPath", key.as_str()),
        ]
    };
    let ok = grpc_protocol::v2::Code::Ok as i32;
    let b = TestBroker::start(&settings("permissive")).await;
    assert_eq!(grpc_route(&b, Some(&crt)).await.unwrap(), ok);
    assert_eq!(grpc_route(&b, None).await.unwrap(), ok);
    b.broker.shutdown().await;

    let b = TestBroker::start(&settings("enforcing")).await;
    assert_eq!(grpc_route(&b, Some(&crt)).await.unwrap(), ok);
    assert!(
        grpc_route(&b, None).await.is_err(),
        "plain h2c on an enforcing port"
    );
    b.broker.shutdown().await;
}

#[tokio::test]
async fn tls_settings_that_cannot_work_stop_the_start_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let refused = |result: Result<broker_server::Broker, BrokerError>| match result {
        Ok(_) => panic!("the broker started"),
        Err(e) => e.to_string(),
    };
    let e = refused(testing::start_broker(dir.path(), &[("tlsServerMode", "on")]).await);
    assert!(e.contains("tlsServerMode"), "{e}");
    assert!(e.contains("disabled, permissive or enforcing"), "{e}");
    let e = refused(testing::start_broker(dir.path(), &[("tlsServerMode", "enforcing")]).await);
    assert!(e.contains("tlsServerCertPath"), "{e}");
    let e =
        refused(testing::start_broker(dir.path(), &[("tlsServerNeedClientAuth", "require")]).await);
    assert!(e.contains("tlsServerNeedClientAuth"), "{e}");
    assert!(e.contains("tlsServerTrustCertPath"), "{e}");
    let e = refused(
        testing::start_broker(dir.path(), &[("tlsServerNeedClientAuth", "sometimes")]).await,
    );
    assert!(e.contains("none, optional or require"), "{e}");
    let e = refused(testing::start_broker(dir.path(), &[("tlsClientCertPath", "/x.pem")]).await);
    assert!(e.contains("tlsClientKeyPath"), "{e}");
    let missing = dir.path().join("missing.pem").display().to_string();
    let e = refused(
        testing::start_broker(
            dir.path(),
            &[
                ("tlsServerMode", "permissive"),
                ("tlsServerCertPath", &missing),
                ("tlsServerKeyPath", &missing),
            ],
        )
        .await,
    );
    assert!(e.contains("missing.pem"), "{e}");
}
