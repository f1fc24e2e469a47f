//! Consumers with `accessKey` and `secretKey` sign every request they send,
//! to the name server and the broker alike; without them they sign none.
//! One fake server plays both parts and refuses any request whose
//! signature does not verify.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use consumer_client::{
    ConsumeStatus, ConsumerConfig, FnHandler, PullConsumer, PullStatus, PushConsumer,
};
use remoting_net::{serve, CancellationToken, Connection, Handler, ServerOptions};
use remoting_protocol::{
    acl,
    body::{self, BrokerData, QueueData, TopicRouteData},
    header::PullMessageResponseHeader,
    RemotingCommand, RequestCode, ResponseCode,
};
use tokio::sync::mpsc;

const TOPIC: &str = "SignedTopic";
const GROUP: &str = "SignedGroup";
const ACCESS_KEY: &str = "alice";
const SECRET: &str = "alice-secret";

/// What the fake server saw of one request.
#[derive(Debug)]
struct Seen {
    code: RequestCode,
    access_key: Option<String>,
    verified: bool,
}

/// A name server and broker in one: routes every topic to itself (one
/// queue), knows no message and no group member, answers every other
/// request `SUCCESS`, but refuses with `NO_PERMISSION` whatever `alice` did
/// not sign.
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

fn signed(namesrv: &str) -> ConsumerConfig {
    ConsumerConfig {
        access_key: Some(ACCESS_KEY.into()),
        secret_key: Some(SECRET.into()),
        ..ConsumerConfig::new(namesrv, GROUP)
    }
}

fn assert_all_signed(requests: &[Seen], wanted: &[RequestCode]) {
    let codes: Vec<RequestCode> = requests.iter().map(|s| s.code).collect();
    for code in wanted {
        assert!(codes.contains(code), "no {code:?} among {codes:?}");
    }
    for s in requests {
        assert!(s.verified, "not signed by {ACCESS_KEY}: {s:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_consumer_with_credentials_signs_route_lookups_and_pulls() {
    let (addr, mut seen, stop) = start().await;
    let consumer = PullConsumer::start(signed(&addr)).await.unwrap();
    let queues = consumer.fetch_queues(TOPIC).await.unwrap();
    assert_eq!(queues.len(), 1);
    let pulled = consumer.pull(&queues[0], 0, 32).await.unwrap();
    assert_eq!(pulled.status, PullStatus::NoNewMsg);
    consumer.shutdown().await;
    assert_all_signed(
        &drain(&mut seen),
        &[
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            RequestCode::PULL_MESSAGE,
        ],
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_consumer_with_credentials_signs_lookups_membership_and_heartbeats() {
    let (addr, mut seen, stop) = start().await;
    let handler = FnHandler(|_| async { ConsumeStatus::Success });
    let consumer = PushConsumer::start(signed(&addr).subscribe(TOPIC, "*"), handler)
        .await
        .unwrap();
    consumer.shutdown().await;
    assert_all_signed(
        &drain(&mut seen),
        &[
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            RequestCode::GET_CONSUMER_LIST_BY_GROUP,
            RequestCode::HEART_BEAT,
        ],
    );
    stop.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumers_without_credentials_sign_nothing() {
    let (addr, mut seen, stop) = start().await;
    let pull = PullConsumer::start(ConsumerConfig::new(&addr, GROUP))
        .await
        .unwrap();
    assert!(pull.fetch_queues(TOPIC).await.is_err());
    pull.shutdown().await;
    let handler = FnHandler(|_| async { ConsumeStatus::Success });
    let push = PushConsumer::start(
        ConsumerConfig::new(&addr, GROUP).subscribe(TOPIC, "*"),
        handler,
    )
    .await
    .unwrap();
    push.shutdown().await;
    let requests = drain(&mut seen);
    assert!(!requests.is_empty());
    for s in &requests {
        assert_eq!(s.access_key, None, "{s:?}");
    }
    stop.cancel();
}
