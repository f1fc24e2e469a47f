//! A producer with `useTLS` makes every connection, to the name server and
//! the broker alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. It trusts any certificate by default, the roots of
//! `tlsClientTrustCertPath` when given, and shows the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to a server requiring one.
#![allow(clippy::unwrap_used)]

use client_core::testing::{served, start_fake, Pems};
use std::{path::Path, time::Duration};

use producer_client::{Message, Producer, ProducerConfig, ProducerError, SendResult};
use remoting_protocol::RequestCode;

const TOPIC: &str = "TlsTopic";

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_use_tls_the_route_lookup_and_the_send_reach_an_enforcing_server() {
    let pems = Pems::new("producer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(false)).await;
    let sent = send_one(ProducerConfig {
        use_tls: true,
        ..ProducerConfig::with_namesrv(&addr)
    })
    .await
    .unwrap();
    assert_eq!(sent.message_queue.topic, TOPIC);
    let codes = served(&mut seen);
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
    let pems = Pems::new("producer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(false)).await;
    let failed = send_one(ProducerConfig::with_namesrv(&addr))
        .await
        .unwrap_err();
    assert!(
        !matches!(failed, ProducerError::Config { .. }),
        "{failed:?}"
    );
    assert_eq!(served(&mut seen), []);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_roots_and_a_client_certificate_reach_a_server_requiring_one() {
    let pems = Pems::new("producer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(true)).await;
    let trusting = |addr: &str, trust: &Path| ProducerConfig {
        use_tls: true,
        tls_client_trust_cert_path: Some(trust.to_path_buf()),
        ..ProducerConfig::with_namesrv(addr)
    };
    let sent = send_one(ProducerConfig {
        tls_client_cert_path: Some(pems.client_crt.clone()),
        tls_client_key_path: Some(pems.client_key.clone()),
        ..trusting(&addr, &pems.server_crt)
    })
    .await
    .unwrap();
    assert_eq!(sent.message_queue.topic, TOPIC);
    assert!(
        served(&mut seen).contains(&RequestCode::GET_ROUTEINFO_BY_TOPIC),
        "the name server part was asked"
    );

    stop.cancel();

    // A second server of the same kind, so that nothing the first producer
    // still had on the wire when it shut down can be counted here.
    let (addr, mut seen, stop) = start_fake(pems.enforcing(true)).await;
    // Without the certificate the server refuses the handshake.
    assert!(send_one(trusting(&addr, &pems.server_crt)).await.is_err());
    // Roots that did not sign the server's certificate refuse the server.
    let distrusting = ProducerConfig {
        tls_client_cert_path: Some(pems.client_crt.clone()),
        tls_client_key_path: Some(pems.client_key.clone()),
        ..trusting(&addr, &pems.ca)
    };
    assert!(send_one(distrusting).await.is_err());
    assert_eq!(served(&mut seen), []);
    stop.cancel();
}
