//! A producer with `accessKey` and `secretKey` signs every request it
//! sends, to the name server and the broker alike; without them it signs
//! none. One fake server plays both parts and refuses any request whose
//! signature does not verify; a real broker with authentication on takes
//! the sends of its user.
#![allow(clippy::unwrap_used)]

mod common;

use std::{sync::Arc, time::Duration};

use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{serve, CancellationToken, Connection, Handler, ServerOptions};
use remoting_protocol::{
    acl,
    body::{self, BrokerData, QueueData, TopicRouteData},
    header::SendMessageResponseHeader,
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

const TOPIC: &str = "SignedTopic";
const ACCESS_KEY: &str = "alice";
const SECRET: &str = "alice-secret";

/// What the fake server saw of one request.
#[derive(Debug)]
struct Seen {
    code: RequestCode,
    access_key: Option<String>,
    verified: bool,
}

/// A name server and broker in one: routes `TOPIC` to itself, takes every
/// send, answers every other request `SUCCESS`, but refuses with
/// `NO_PERMISSION` whatever `alice` did not sign.
struct FakeCluster {
    addr: String,
    seen: mpsc::UnboundedSender<Seen>,
}

impl Handler for FakeCluster {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        let access_key = acl::access_key(&request).map(str::to_owned);
        let verified =
            access_key.as_deref() == Some(ACCESS_KEY) && acl::verify(&request, SECRET.as_bytes());
        let _ = self.seen.send(Seen {
            code: request.request_code(),
            access_key,
            verified,
        });
        if request.is_oneway() {
            return;
        }
        if !verified {
            conn.send(request.response_to(ResponseCode::NO_PERMISSION, Some("not signed".into())));
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

/// Starts the fake; returns its address, what it sees, and its stop.
async fn start() -> (String, mpsc::UnboundedReceiver<Seen>, CancellationToken) {
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
        ServerOptions::default(),
        stop.clone(),
    ));
    (addr, rx, stop)
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Vec<Seen> {
    std::iter::from_fn(|| rx.try_recv().ok()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_credentials_every_request_is_signed_route_lookups_and_sends_among_them() {
    let (addr, mut seen, stop) = start().await;
    let producer = Producer::start(ProducerConfig {
        access_key: Some(ACCESS_KEY.into()),
        secret_key: Some(SECRET.into()),
        ..ProducerConfig::with_namesrv(&addr)
    })
    .await
    .unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(20),
        producer.send(Message::new(TOPIC, "signed")),
    )
    .await
    .expect("the send did not end")
    .unwrap();
    assert_eq!(sent.message_queue.topic, TOPIC);
    producer.shutdown().await;
    let requests = drain(&mut seen);
    let codes: Vec<RequestCode> = requests.iter().map(|s| s.code).collect();
    assert!(
        codes.contains(&RequestCode::GET_ROUTEINFO_BY_TOPIC),
        "{codes:?}"
    );
    assert!(
        codes.contains(&RequestCode::SEND_MESSAGE_V2) || codes.contains(&RequestCode::SEND_MESSAGE),
        "{codes:?}"
    );
    for s in &requests {
        assert!(s.verified, "not signed by {ACCESS_KEY}: {s:?}");
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_credentials_nothing_is_signed() {
    let (addr, mut seen, stop) = start().await;
    let producer = Producer::start(ProducerConfig {
        send_msg_timeout: Duration::from_secs(2),
        retry_times_when_send_failed: 0,
        ..ProducerConfig::with_namesrv(&addr)
    })
    .await
    .unwrap();
    let sent = tokio::time::timeout(
        Duration::from_secs(20),
        producer.send(Message::new(TOPIC, "unsigned")),
    )
    .await
    .expect("the send did not end");
    assert!(sent.is_err(), "{sent:?}");
    producer.shutdown().await;
    let requests = drain(&mut seen);
    assert!(!requests.is_empty());
    for s in &requests {
        assert_eq!(s.access_key, None, "{s:?}");
    }
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_authentication_on_stores_what_its_user_sends() {
    let init = format!(r#"{{"username":"{ACCESS_KEY}","password":"{SECRET}"}}"#);
    let b = common::TestBroker::start(&[
        ("authenticationEnabled", "true"),
        ("initAuthenticationUser", &init),
    ])
    .await;
    let send = |config: ProducerConfig| async move {
        let producer = Producer::start(config).await.unwrap();
        let sent =
            common::bounded(20, producer.send(Message::new(TOPIC, "to a real broker"))).await;
        producer.shutdown().await;
        sent
    };
    let signed = send(ProducerConfig {
        access_key: Some(ACCESS_KEY.into()),
        secret_key: Some(SECRET.into()),
        ..common::config(b.namesrv())
    })
    .await
    .unwrap();
    assert_eq!(signed.message_queue.topic, TOPIC);
    let unsigned = send(ProducerConfig {
        retry_times_when_send_failed: 0,
        ..common::config(b.namesrv())
    })
    .await
    .unwrap_err();
    assert!(unsigned.to_string().contains("NO_PERMISSION"), "{unsigned}");
    b.broker.shutdown().await;
}
