//! The RocketMQ 5 gRPC endpoint against an in-process broker, through a
//! tonic client built from the same protocol files: routes, the settings
//! exchange on Telemetry, sends (read back through the remoting pull path),
//! header checks, unserved RPCs, and every busy answer of the flow control
//! mapped to `TOO_MANY_REQUESTS`.
#![allow(clippy::unwrap_used)]

mod common;

use std::{sync::Arc, time::Duration};

use common::{pull_request, TestBroker};
use grpc_protocol::{
    v2::{
        settings::PubSub, telemetry_command::Command, Address, AddressScheme, ClientType, Code,
        EndTransactionRequest, Endpoints, HeartbeatRequest, Message, Permission, Publishing,
        QueryAssignmentRequest, QueryOffsetRequest, QueryRouteRequest, Resource,
        SendMessageRequest, Settings, SystemProperties, TelemetryCommand, TransactionResolution,
        TransactionSource,
    },
    MessagingServiceClient,
};
use remoting_protocol::ResponseCode;
use tonic::{transport::Channel, Request};

const CLIENT_ID: &str = "test-host@4242#1";

async fn client(b: &TestBroker) -> MessagingServiceClient<Channel> {
    let port = b.broker.grpc_addr().expect("gRPC endpoint runs").port();
    MessagingServiceClient::connect(format!("http://127.0.0.1:{port}"))
        .await
        .unwrap()
}

fn with_id<T>(message: T) -> Request<T> {
    let mut r = Request::new(message);
    r.metadata_mut()
        .insert("x-mq-client-id", CLIENT_ID.parse().unwrap());
    r
}

fn resource(name: &str) -> Resource {
    Resource {
        resource_namespace: String::new(),
        name: name.into(),
    }
}

fn access_point(host: &str, port: u16) -> Endpoints {
    Endpoints {
        scheme: AddressScheme::IPv4 as i32,
        addresses: vec![Address {
            host: host.into(),
            port: i32::from(port),
        }],
    }
}

fn message(topic: &str, id: &str, queue_id: i32, body: &[u8]) -> Message {
    Message {
        topic: Some(resource(topic)),
        user_properties: [("color".to_owned(), "blue".to_owned())].into(),
        system_properties: Some(SystemProperties {
            message_id: id.into(),
            tag: Some("TagA".into()),
            keys: vec!["order-1".into()],
            queue_id,
            born_host: "producer-host".into(),
            born_timestamp: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            message_type: 1,
            body_encoding: 1,
            ..SystemProperties::default()
        }),
        body: body.to_vec(),
    }
}

fn code_of(status: Option<&grpc_protocol::v2::Status>) -> i32 {
    status.map_or(-1, |s| s.code)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_lists_queues_from_zero_with_reachable_endpoints() {
    let b = TestBroker::start(&[]).await;
    let port = b.broker.grpc_addr().unwrap().port();
    let mut c = client(&b).await;
    let r = c
        .query_route(with_id(QueryRouteRequest {
            topic: Some(resource("RouteMe")),
            endpoints: Some(access_point("127.0.0.1", port)),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(r.status.as_ref()), Code::Ok as i32, "{r:?}");
    let topic = b.broker.state().topics.get("RouteMe").unwrap();
    assert_eq!(r.message_queues.len(), topic.write_queue_nums as usize);
    for (i, q) in r.message_queues.iter().enumerate() {
        assert_eq!(q.id, i as i32);
        assert_eq!(q.permission, Permission::ReadWrite as i32);
        let broker = q.broker.as_ref().unwrap();
        assert_eq!((broker.name.as_str(), broker.id), ("broker-a", 0));
        let ep = broker.endpoints.as_ref().unwrap();
        assert_eq!(ep.scheme, AddressScheme::IPv4 as i32);
        assert_eq!(ep.addresses[0].host, "127.0.0.1");
        assert_eq!(ep.addresses[0].port, i32::from(port));
        assert!(q.accept_message_types.contains(&1), "NORMAL accepted");
    }

    // A wildcard access point is never handed out: brokerIP1 and the gRPC port instead.
    let r = c
        .query_route(with_id(QueryRouteRequest {
            topic: Some(resource("RouteMe")),
            endpoints: Some(access_point("0.0.0.0", 1234)),
        }))
        .await
        .unwrap()
        .into_inner();
    let ep = r.message_queues[0]
        .broker
        .as_ref()
        .unwrap()
        .endpoints
        .clone()
        .unwrap();
    assert_eq!(ep.addresses[0].host, "127.0.0.1");
    assert_eq!(ep.addresses[0].port, i32::from(port));

    let assigned = c
        .query_assignment(with_id(QueryAssignmentRequest {
            topic: Some(resource("RouteMe")),
            group: Some(resource("G")),
            endpoints: Some(access_point("127.0.0.1", port)),
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(assigned.status.as_ref()), Code::Ok as i32);
    assert_eq!(assigned.assignments.len(), topic.read_queue_nums as usize);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_topic_is_not_found_without_auto_creation() {
    let b = TestBroker::start(&[("autoCreateTopicEnable", "false")]).await;
    let mut c = client(&b).await;
    let r = c
        .query_route(with_id(QueryRouteRequest {
            topic: Some(resource("Missing")),
            endpoints: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(r.status.as_ref()), Code::TopicNotFound as i32);
    assert!(r.message_queues.is_empty());
    assert!(b.broker.state().topics.get("Missing").is_none());
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_sends_headers_at_once_and_answers_every_settings() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<TelemetryCommand>(4);
    // Nothing written yet: the call must still complete (response headers).
    let response = tokio::time::timeout(
        Duration::from_secs(5),
        c.telemetry(with_id(tokio_stream::wrappers::ReceiverStream::new(rx))),
    )
    .await
    .expect("response headers arrive before any command is written")
    .unwrap();
    let mut inbound = response.into_inner();
    let settings = Settings {
        client_type: Some(ClientType::Producer as i32),
        pub_sub: Some(PubSub::Publishing(Publishing {
            topics: vec![resource("T")],
            max_body_size: 128 * 1024 * 1024,
            validate_message_type: true,
        })),
        ..Settings::default()
    };
    for round in 0..2 {
        tx.send(TelemetryCommand {
            status: None,
            command: Some(Command::Settings(settings.clone())),
        })
        .await
        .unwrap();
        let reply = tokio::time::timeout(Duration::from_secs(5), inbound.message())
            .await
            .expect("settings answered")
            .unwrap()
            .unwrap();
        assert_eq!(
            code_of(reply.status.as_ref()),
            Code::Ok as i32,
            "round {round}"
        );
        let Some(Command::Settings(s)) = reply.command else {
            panic!("a settings reply: {reply:?}");
        };
        let Some(PubSub::Publishing(p)) = s.pub_sub else {
            panic!("publishing echoed");
        };
        assert_eq!(p.max_body_size, 1024 * 1024, "the broker's maxMessageSize");
        assert_eq!(p.topics, vec![resource("T")]);
        let policy = s.backoff_policy.unwrap();
        assert_eq!(policy.max_attempts, 3);
        assert!(matches!(
            policy.strategy,
            Some(grpc_protocol::v2::retry_policy::Strategy::ExponentialBackoff(_))
        ));
    }
    // Half-close: the broker ends the stream.
    drop(tx);
    let end = tokio::time::timeout(Duration::from_secs(5), inbound.message())
        .await
        .expect("stream ends after the client half-closes")
        .unwrap();
    assert!(end.is_none());
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_echo_the_id_report_offsets_and_store_the_uniq_key() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    let route = c
        .query_route(with_id(QueryRouteRequest {
            topic: Some(resource("GrpcSend")),
            endpoints: None,
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(route.status.as_ref()), Code::Ok as i32);

    let one = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![message("GrpcSend", "0102ID-ONE", 0, b"first")],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(one.status.as_ref()), Code::Ok as i32, "{one:?}");
    assert_eq!(one.entries.len(), 1);
    assert_eq!(one.entries[0].message_id, "0102ID-ONE");
    assert_eq!(one.entries[0].offset, 0);

    // Several messages in one request: one entry each, in order.
    let two = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![
                message("GrpcSend", "0102ID-TWO", 0, b"second"),
                message("GrpcSend", "0102ID-THREE", 0, b"third"),
            ],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(two.status.as_ref()), Code::Ok as i32, "{two:?}");
    let ids: Vec<(&str, i64)> = two
        .entries
        .iter()
        .map(|e| (e.message_id.as_str(), e.offset))
        .collect();
    assert_eq!(ids, [("0102ID-TWO", 1), ("0102ID-THREE", 2)]);

    // The stored message is readable through the remoting pull path.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let pulled = loop {
        let p = b.invoke(pull_request("GrpcSend", 0, 0, 1)).await;
        if p.response_code() == ResponseCode::SUCCESS || std::time::Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    let message_model::record::Record::Message(m) =
        message_model::record::check(&pulled.body, true)
    else {
        panic!("a message record");
    };
    assert_eq!(m.body, b"first");
    let props = message_model::properties::Properties::decode(m.properties);
    assert_eq!(props.get("UNIQ_KEY"), Some("0102ID-ONE"));
    assert_eq!(props.get("TAGS"), Some("TagA"));
    assert_eq!(props.get("KEYS"), Some("order-1"));
    assert_eq!(props.get("color"), Some("blue"));
    assert_eq!(m.born_timestamp, 1_700_000_000_000);

    // An empty message id is refused and nothing is stored.
    let bad = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![message("GrpcSend", "", 0, b"x")],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(bad.status.as_ref()), Code::IllegalMessageId as i32);
    assert_eq!(b.broker.state().store.max_offset_in_queue("GrpcSend", 0), 3);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_client_id_and_unserved_rpcs_answer_business_statuses() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    let sent = c
        .send_message(Request::new(SendMessageRequest {
            messages: vec![message("NoId", "0102A", 0, b"x")],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(sent.status.as_ref()), Code::ClientIdRequired as i32);
    let hb = c
        .heartbeat(Request::new(HeartbeatRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(hb.status.as_ref()), Code::ClientIdRequired as i32);
    let hb = c
        .heartbeat(with_id(HeartbeatRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(hb.status.as_ref()), Code::Ok as i32);

    // gRPC status OK, business status NOT_IMPLEMENTED.
    let offset = c
        .query_offset(with_id(QueryOffsetRequest::default()))
        .await
        .expect("gRPC status OK")
        .into_inner();
    assert_eq!(code_of(offset.status.as_ref()), Code::NotImplemented as i32);
    // An end without a resolution, or naming no half message.
    let end = c
        .end_transaction(with_id(EndTransactionRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(end.status.as_ref()), Code::BadRequest as i32);
    let end = c
        .end_transaction(with_id(EndTransactionRequest {
            topic: Some(Resource {
                resource_namespace: String::new(),
                name: "Orders".into(),
            }),
            transaction_id: "not-an-id".into(),
            resolution: TransactionResolution::Commit as i32,
            ..EndTransactionRequest::default()
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code_of(end.status.as_ref()),
        Code::InvalidTransactionId as i32,
        "{:?}",
        end.status
    );
    b.broker.shutdown().await;
}

/// Outcome of one send: business code, message, `retry-after-ms` metadata.
type Outcome = (i32, String, Option<u64>);

async fn burst(b: &TestBroker, topic: &str, n: usize) -> Vec<Outcome> {
    let c = client(b).await;
    let calls: Vec<_> = (0..n)
        .map(|i| {
            let mut c = c.clone();
            let topic = topic.to_owned();
            tokio::spawn(async move {
                let r = c
                    .send_message(with_id(SendMessageRequest {
                        messages: vec![message(&topic, &format!("0102B{i}"), 0, b"payload")],
                    }))
                    .await
                    .unwrap();
                let hint = r
                    .metadata()
                    .get("retry-after-ms")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.parse().ok());
                let body = r.into_inner();
                let st = body.status.unwrap();
                assert_eq!(body.entries.len(), 1);
                assert_eq!(body.entries[0].status.as_ref().unwrap().code, st.code);
                (st.code, st.message, hint)
            })
        })
        .collect();
    let mut out = Vec::new();
    for call in calls {
        out.push(call.await.unwrap());
    }
    out
}

fn busy_with<'a>(outcomes: &'a [Outcome], prefix: &str) -> Vec<&'a Outcome> {
    outcomes
        .iter()
        .filter(|o| o.1.starts_with(prefix))
        .collect()
}

async fn warm(b: &TestBroker, topic: &str) {
    let mut c = client(b).await;
    let r = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![message(topic, "0102WARM", 0, b"warm")],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(r.status.as_ref()), Code::Ok as i32, "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_send_queue_is_too_many_requests_with_overload_remark_and_hint() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("sendThreadPoolQueueCapacity", "2"),
            ("faultPutLockDelayMills", "100"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    let outcomes = burst(&b, "GOverload", 12).await;
    let overload = busy_with(
        &outcomes,
        "[OVERLOAD]system busy, start flow control for a while",
    );
    assert!(!overload.is_empty(), "{outcomes:?}");
    for (code, _, hint) in &overload {
        assert_eq!(*code, Code::TooManyRequests as i32);
        assert!(hint.is_some_and(|h| h > 0), "retry hint in metadata");
    }
    assert!(
        outcomes.iter().any(|o| o.0 == Code::Ok as i32),
        "{outcomes:?}"
    );
    assert!(b.broker.state().counters.rejected("overload") >= overload.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_waiting_too_long_are_too_many_requests_timeout_clean_queue() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("faultPutLockDelayMills", "80"),
        ("waitTimeMillsInSendQueue", "50"),
        ("earlyAdmissionEnable", "false"),
        ("adaptiveAdmissionEnable", "false"),
    ])
    .await;
    let outcomes = burst(&b, "GSlow", 10).await;
    let expired = busy_with(
        &outcomes,
        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ",
    );
    assert!(!expired.is_empty(), "{outcomes:?}");
    assert!(expired.iter().all(|o| o.0 == Code::TooManyRequests as i32));
    assert!(b.broker.state().counters.rejected("timeout_clean_queue") >= expired.len() as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn page_cache_busy_is_too_many_requests_reject_request_and_pcbusy_clean_queue() {
    let b = Arc::new(
        TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "600"),
            ("osPageCacheBusyTimeOutMills", "100"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await,
    );
    let queued = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { burst(&b, "GBusy", 4).await })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !b.broker.state().store.is_os_page_cache_busy() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(b.broker.state().store.is_os_page_cache_busy());
    let late = burst(&b, "GBusy", 1).await;
    assert_eq!(late[0].0, Code::TooManyRequests as i32, "{late:?}");
    assert_eq!(
        late[0].1,
        "[REJECTREQUEST]system busy, start flow control for a while"
    );
    let outcomes = queued.await.unwrap();
    let drained = busy_with(
        &outcomes,
        "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ",
    );
    assert!(!drained.is_empty(), "{outcomes:?}");
    assert!(drained.iter().all(|o| o.0 == Code::TooManyRequests as i32));
    assert!(b.broker.state().counters.rejected("reject_request") >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn early_admission_is_too_many_requests_early_reject() {
    let b = TestBroker::start(&[
        ("sendMessageThreadPoolNums", "1"),
        ("faultPutLockDelayMills", "40"),
        ("waitTimeMillsInSendQueue", "100"),
        ("earlyAdmissionEnable", "true"),
        ("adaptiveAdmissionEnable", "false"),
    ])
    .await;
    for _ in 0..3 {
        warm(&b, "GEarly").await;
    }
    let outcomes = burst(&b, "GEarly", 12).await;
    let early = busy_with(
        &outcomes,
        "[EARLY_REJECT]broker busy, start flow control for a while, predicted wait: ",
    );
    assert!(!early.is_empty(), "{outcomes:?}");
    for (code, _, hint) in &early {
        assert_eq!(*code, Code::TooManyRequests as i32);
        assert!(hint.is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_over_its_topic_quota_is_too_many_requests_with_the_refill_time() {
    let b = TestBroker::start(&[("topicQuotas", "GQuota=3/s")]).await;
    // 10 at once against a burst of 3, plus what refilled meanwhile.
    let started = std::time::Instant::now();
    let outcomes = burst(&b, "GQuota", 10).await;
    let refilled = (started.elapsed().as_secs_f64() * 3.0).ceil() as usize;
    let over = busy_with(
        &outcomes,
        "[QUOTA]broker busy, over the topic quota of 3 messages/s, retry after ",
    );
    assert!(
        !over.is_empty() && over.len() + 3 + refilled >= 10,
        "{outcomes:?}"
    );
    for (code, _, hint) in &over {
        assert_eq!(*code, Code::TooManyRequests as i32);
        let hint = hint.expect("retry-after-ms");
        assert!((1..=1000).contains(&hint), "{hint}");
    }
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_timeout_is_master_persistence_timeout() {
    let b = TestBroker::start(&[
        ("flushDiskType", "SYNC_FLUSH"),
        ("syncFlushTimeout", "20"),
        ("faultFlushDelayMills", "300"),
    ])
    .await;
    let mut c = client(&b).await;
    let r = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![message("GFlush", "0102FLUSH", 0, b"durable?")],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code_of(r.status.as_ref()),
        Code::MasterPersistenceTimeout as i32,
        "{r:?}"
    );
    assert_eq!(r.entries[0].message_id, "0102FLUSH");
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_open_telemetry_streams() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<TelemetryCommand>(4);
    let mut inbound = c
        .telemetry(with_id(tokio_stream::wrappers::ReceiverStream::new(rx)))
        .await
        .unwrap()
        .into_inner();
    tx.send(TelemetryCommand {
        status: None,
        command: Some(Command::Settings(Settings {
            client_type: Some(ClientType::SimpleConsumer as i32),
            ..Settings::default()
        })),
    })
    .await
    .unwrap();
    let reply = inbound.message().await.unwrap().unwrap();
    assert_eq!(code_of(reply.status.as_ref()), Code::Ok as i32);
    // The client keeps its side open; the broker still stops.
    tokio::time::timeout(Duration::from_secs(20), b.broker.shutdown())
        .await
        .expect("shutdown does not wait for the client to half-close");
    let end = tokio::time::timeout(Duration::from_secs(5), inbound.message())
        .await
        .expect("the stream ends with the broker");
    assert!(!matches!(end, Ok(Some(_))), "{end:?}");
    drop(tx);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_timestamp_makes_a_timer_message() {
    let b = TestBroker::start(&[]).await;
    let mut c = client(&b).await;
    let at = |ms: i64| prost_types::Timestamp {
        seconds: ms / 1000,
        nanos: ((ms % 1000) * 1_000_000) as i32,
    };
    let delayed = |id: &str, due: i64| {
        let mut m = message("GrpcTimer", id, 0, b"later");
        let sys = m.system_properties.as_mut().unwrap();
        sys.message_type = grpc_protocol::v2::MessageType::Delay as i32;
        sys.delivery_timestamp = Some(at(due));
        m
    };
    let due = message_model::now_ms() + 1_000;
    let sent = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![delayed("0102TIMER-1", due)],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code_of(sent.status.as_ref()), Code::Ok as i32, "{sent:?}");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    // The topic is created by the send, so its queue is the broker's pick.
    let pulled = 'found: loop {
        for queue in 0..8 {
            let p = b.invoke(pull_request("GrpcTimer", queue, 0, 1)).await;
            if p.response_code() == ResponseCode::SUCCESS {
                break 'found p;
            }
        }
        assert!(std::time::Instant::now() < deadline, "timer not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let message_model::record::Record::Message(m) =
        message_model::record::check(&pulled.body, true)
    else {
        panic!("not a message")
    };
    assert!(
        m.store_timestamp >= due,
        "delivered before its delivery_timestamp"
    );
    let too_far = c
        .send_message(with_id(SendMessageRequest {
            messages: vec![delayed(
                "0102TIMER-2",
                message_model::now_ms() + 2 * 86_400_000,
            )],
        }))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        code_of(too_far.status.as_ref()),
        Code::IllegalDeliveryTime as i32,
        "{too_far:?}"
    );
    b.broker.shutdown().await;
}

/// A TRANSACTION message of `topic`.
fn half_message(topic: &str, id: &str, body: &[u8]) -> Message {
    let mut m = message(topic, id, 0, body);
    if let Some(s) = m.system_properties.as_mut() {
        s.message_type = grpc_protocol::v2::MessageType::Transaction as i32;
    }
    m
}

async fn end_transaction(
    c: &mut MessagingServiceClient<Channel>,
    topic: &str,
    transaction_id: &str,
    resolution: TransactionResolution,
    source: TransactionSource,
) -> i32 {
    let end = c
        .end_transaction(with_id(EndTransactionRequest {
            topic: Some(resource(topic)),
            message_id: String::new(),
            transaction_id: transaction_id.into(),
            resolution: resolution as i32,
            source: source as i32,
            trace_context: String::new(),
        }))
        .await
        .unwrap()
        .into_inner();
    code_of(end.status.as_ref())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_end_by_call_and_by_a_check_on_the_telemetry_stream() {
    let b = TestBroker::start(&[
        ("transactionTimeOut", "0"),
        ("transactionCheckInterval", "100"),
    ])
    .await;
    let mut c = client(&b).await;
    let (tx, rx) = tokio::sync::mpsc::channel::<TelemetryCommand>(4);
    let mut inbound = c
        .telemetry(with_id(tokio_stream::wrappers::ReceiverStream::new(rx)))
        .await
        .unwrap()
        .into_inner();
    tx.send(TelemetryCommand {
        status: None,
        command: Some(Command::Settings(Settings {
            client_type: Some(ClientType::Producer as i32),
            pub_sub: Some(PubSub::Publishing(Publishing {
                topics: vec![resource("GTx")],
                max_body_size: 0,
                validate_message_type: true,
            })),
            ..Settings::default()
        })),
    })
    .await
    .unwrap();
    let reply = inbound.message().await.unwrap().unwrap();
    assert!(matches!(reply.command, Some(Command::Settings(_))));

    let sender = c.clone();
    let send = |id: &'static str, body: &'static [u8]| {
        let mut c = sender.clone();
        async move {
            let r = c
                .send_message(with_id(SendMessageRequest {
                    messages: vec![half_message("GTx", id, body)],
                }))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(code_of(r.status.as_ref()), Code::Ok as i32, "{r:?}");
            r.entries[0].transaction_id.clone()
        }
    };
    let committed = send("01TXA", b"committed").await;
    assert!(!committed.is_empty(), "a transaction id");
    let ok = Code::Ok as i32;
    let client_source = TransactionSource::SourceClient;
    assert_eq!(
        end_transaction(
            &mut c,
            "GTx",
            &committed,
            TransactionResolution::Commit,
            client_source
        )
        .await,
        ok
    );
    // A second end changes nothing; another topic's name finds nothing.
    assert_eq!(
        end_transaction(
            &mut c,
            "GTx",
            &committed,
            TransactionResolution::Rollback,
            client_source
        )
        .await,
        ok
    );
    assert_eq!(
        end_transaction(
            &mut c,
            "Other",
            &committed,
            TransactionResolution::Commit,
            client_source
        )
        .await,
        Code::InvalidTransactionId as i32
    );

    // Left open: checked on the telemetry stream, and rolled back there.
    let open = send("01TXB", b"rolled back by check").await;
    // (The first half may have been checked too, before its end came.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let check = loop {
        let next = tokio::time::timeout_at(deadline, inbound.message())
            .await
            .expect("checked within 10 s")
            .unwrap()
            .unwrap();
        let Some(Command::RecoverOrphanedTransactionCommand(check)) = next.command else {
            panic!("a check: {next:?}");
        };
        if check.transaction_id != committed {
            break check;
        }
    };
    assert_eq!(check.transaction_id, open);
    let m = check.message.unwrap();
    assert_eq!(m.system_properties.unwrap().message_id, "01TXB");
    assert_eq!(m.body, b"rolled back by check");
    assert_eq!(
        m.user_properties.get("color").map(String::as_str),
        Some("blue")
    );
    assert_eq!(
        end_transaction(
            &mut c,
            "GTx",
            &open,
            TransactionResolution::Rollback,
            TransactionSource::SourceServerCheck
        )
        .await,
        ok
    );
    let state = b.broker.state();
    assert_eq!(state.transactions.pending(0, 2), 0);
    // The commit's op record precedes its message; the rollback's op
    // record follows both.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while state
        .store
        .max_offset_in_queue(broker_server::transaction::OP_TOPIC, 0)
        < 2
    {
        assert!(std::time::Instant::now() < deadline, "op records indexed");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // The topic was made by the first send, which picked its queue.
    let delivered: Vec<Vec<u8>> = (0..16)
        .flat_map(|q| {
            state
                .store
                .get_messages("GTx", q, 0, 10, usize::MAX, None)
                .messages
        })
        .map(|m| match message_model::record::check(&m, false) {
            message_model::record::Record::Message(m) => m.body.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(delivered, [b"committed".to_vec()]);
    drop(tx);
    b.broker.shutdown().await;
}
