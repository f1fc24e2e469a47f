//! Consumers with `useTLS` make every connection, to the name server and
//! the broker alike, over TLS: one fake server plays both parts on a port
//! whose TLS mode is `enforcing`, which closes plain connections before
//! they are served. They trust any certificate by default, the roots of
//! `tlsClientTrustCertPath` when given, and show the certificate of
//! `tlsClientCertPath` and `tlsClientKeyPath` to a server requiring one.
#![allow(clippy::unwrap_used)]

use client_core::testing::{served, start_fake, Pems};
use std::time::Duration;

use consumer_client::{
    ConsumeStatus, ConsumerConfig, FnHandler, PullConsumer, PullStatus, PushConsumer,
};
use remoting_protocol::RequestCode;

const TOPIC: &str = "TlsTopic";
const GROUP: &str = "TlsGroup";

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
    let pems = Pems::new("consumer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(false)).await;
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
        &served(&mut seen),
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
    let pems = Pems::new("consumer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(true)).await;
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
        &served(&mut seen),
        &[
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            RequestCode::GET_CONSUMER_LIST_BY_GROUP,
            RequestCode::HEART_BEAT,
        ],
    );

    stop.cancel();

    // A second server of the same kind, so that nothing the first consumer
    // still had on the wire when it shut down can be counted here.
    let (addr, mut seen, stop) = start_fake(pems.enforcing(true)).await;
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
    assert_eq!(served(&mut seen), []);
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_without_use_tls_get_nothing_served_by_an_enforcing_server() {
    let pems = Pems::new("consumer");
    let (addr, mut seen, stop) = start_fake(pems.enforcing(false)).await;
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
    assert_eq!(served(&mut seen), []);
    stop.cancel();
}
