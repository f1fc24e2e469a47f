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
    let client = RemotingClient::new(ClientOptions {
        tls,
        ..ClientOptions::default()
    });
    client
        .invoke(
            addr,
            RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
            Duration::from_secs(10),
        )
        .await
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
