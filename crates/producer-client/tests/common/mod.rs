//! Helpers for the producer's integration tests: a real broker in-process
//! (on free loopback ports, in a temporary directory, with its embedded name
//! server), fake brokers that misbehave on purpose and register themselves
//! with that name server, and a bound on every test's duration.
#![allow(dead_code, clippy::unwrap_used)]

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use broker_server::{testing, Broker};
use message_model::record::{self, Record};
use producer_client::{BusyPolicy, ProducerConfig};
use remoting_net::{serve, CancellationToken, ClientOptions, Connection, Handler, RemotingClient};
use remoting_protocol::{
    body::{self, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper, TopicRouteData},
    header::{
        CreateTopicRequestHeader, GetRouteInfoRequestHeader, PullMessageRequestHeader,
        RegisterBrokerRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

/// Fails the test if `fut` takes longer than `secs` seconds.
pub async fn bounded<T>(secs: u64, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .expect("test took too long")
}

/// A running broker and what it needs to stay alive.
pub struct TestBroker {
    pub broker: Broker,
    /// Remoting address, `127.0.0.1:port`.
    pub addr: String,
    /// The embedded name server's address, when it runs one.
    pub namesrv: Option<String>,
    pub client: RemotingClient,
    _dir: tempfile::TempDir,
}

impl TestBroker {
    /// Starts a broker with `key=value` overrides.
    pub async fn start(overrides: &[(&str, &str)]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let broker = testing::start_broker(dir.path(), overrides).await.unwrap();
        Self {
            addr: testing::loopback(broker.remoting_addr()),
            namesrv: broker.namesrv_addr().map(testing::loopback),
            broker,
            client: RemotingClient::new(ClientOptions::default()),
            _dir: dir,
        }
    }

    /// The embedded name server's address.
    pub fn namesrv(&self) -> &str {
        self.namesrv.as_deref().unwrap()
    }

    /// Creates a topic with 4 queues on this broker, which registers it at once.
    pub async fn create_topic(&self, topic: &str) {
        let request = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                order: false,
                ..CreateTopicRequestHeader::default()
            },
        );
        let response = self
            .client
            .invoke(&self.addr, request, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
}

/// A message read back from the broker's CommitLog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pulled {
    pub queue_offset: i64,
    pub sys_flag: i32,
    pub body: Vec<u8>,
    pub properties: String,
}

impl TestBroker {
    /// Pulls at least `count` messages of one queue from `offset` on with
    /// hand-built `PULL_MESSAGE` requests, parsing the raw CommitLog records
    /// of each answer; waits (up to 10 s) for the ConsumeQueue to catch up.
    pub async fn pull(&self, topic: &str, queue_id: i32, offset: i64, count: usize) -> Vec<Pulled> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut out: Vec<Pulled> = Vec::new();
        loop {
            let next = offset + i64::try_from(out.len()).unwrap();
            let request = RemotingCommand::request_with_header(
                RequestCode::PULL_MESSAGE,
                &PullMessageRequestHeader {
                    consumer_group: "CG".into(),
                    topic: topic.into(),
                    queue_id,
                    queue_offset: next,
                    max_msg_nums: 32,
                    sys_flag: 0,
                    commit_offset: 0,
                    suspend_timeout_millis: 0,
                    sub_version: 0,
                    subscription: Some("*".into()),
                    ..PullMessageRequestHeader::default()
                },
            );
            let response = self
                .client
                .invoke(&self.addr, request, Duration::from_secs(10))
                .await
                .unwrap();
            if response.response_code() == ResponseCode::SUCCESS {
                let mut rest = &response.body[..];
                while !rest.is_empty() {
                    let Record::Message(m) = record::check(rest, true) else {
                        panic!("pulled body is not a sequence of records");
                    };
                    out.push(Pulled {
                        queue_offset: m.queue_offset,
                        sys_flag: m.sys_flag,
                        body: m.body.to_vec(),
                        properties: m.properties.to_owned(),
                    });
                    rest = &rest[m.total_size..];
                }
            }
            if out.len() >= count {
                return out;
            }
            assert!(
                Instant::now() < deadline,
                "pulled {} of {count} from {topic}:{queue_id}",
                out.len()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A producer configuration for tests: the given name server, quick
/// back-offs, everything else default.
pub fn config(namesrv: &str) -> ProducerConfig {
    ProducerConfig {
        busy_policy: BusyPolicy::RetryWithBackoff {
            base: Duration::from_millis(1),
            max: Duration::from_millis(5),
            budget_ratio: 0.1,
        },
        ..ProducerConfig::with_namesrv(namesrv)
    }
}

/// Waits until the name server's route for `topic` names `brokers` brokers.
pub async fn wait_for_route(namesrv: &str, topic: &str, brokers: usize) -> TopicRouteData {
    let client = RemotingClient::new(ClientOptions::default());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
            &GetRouteInfoRequestHeader {
                topic: topic.into(),
                accept_standard_json_only: Some(true),
            },
        );
        let response = client
            .invoke(namesrv, request, Duration::from_secs(3))
            .await
            .unwrap();
        if response.response_code() == ResponseCode::SUCCESS {
            let route: TopicRouteData = body::from_json(&response.body).unwrap();
            if route.broker_datas.len() >= brokers {
                return route;
            }
        }
        assert!(
            Instant::now() < deadline,
            "route of {topic} never reached {brokers} brokers"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// How a fake broker treats every request but `HEART_BEAT`, which it
/// answers `SUCCESS` and counts apart.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// Answers `SYSTEM_BUSY` with a `[TIMEOUT_CLEAN_QUEUE]` remark and, if
    /// given, a `retryAfterMs` hint.
    Busy { retry_after_ms: Option<u64> },
    /// Never answers.
    Silent,
    /// Closes the connection on receiving a request.
    HangUp,
}

struct FakeHandler {
    behaviour: Behaviour,
    requests: Arc<AtomicUsize>,
    heartbeats: Arc<AtomicUsize>,
}

impl Handler for FakeHandler {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        if request.request_code() == RequestCode::HEART_BEAT {
            self.heartbeats.fetch_add(1, Ordering::SeqCst);
            conn.send(request.response_to(ResponseCode::SUCCESS, None));
            return;
        }
        self.requests.fetch_add(1, Ordering::SeqCst);
        match self.behaviour {
            Behaviour::Busy { retry_after_ms } => {
                let mut response = request.response_to(
                    ResponseCode::SYSTEM_BUSY,
                    Some(
                        "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, \
                         period in queue: 201ms, size of queue: 5"
                            .into(),
                    ),
                );
                if let Some(ms) = retry_after_ms {
                    response.set_ext("retryAfterMs", ms.to_string());
                }
                if !request.is_oneway() {
                    conn.send(response);
                }
            }
            Behaviour::Silent => {}
            Behaviour::HangUp => conn.close(),
        }
    }
}

/// A fake broker registered with a name server for some topics.
pub struct FakeBroker {
    pub addr: String,
    requests: Arc<AtomicUsize>,
    heartbeats: Arc<AtomicUsize>,
    stop: CancellationToken,
    // Keeps the registration's connection open: the name server drops a
    // broker's routes when that connection closes.
    _registration: RemotingClient,
}

impl FakeBroker {
    /// Serves `behaviour` on a free port and registers as `broker_name`
    /// (master) serving `topics` with 4 queues each.
    pub async fn start(
        behaviour: Behaviour,
        namesrv: &str,
        broker_name: &str,
        topics: &[&str],
    ) -> Self {
        Self::start_as(behaviour, namesrv, broker_name, topics, 0).await
    }

    /// [`FakeBroker::start`], registered with `broker_id` (0: master).
    pub async fn start_as(
        behaviour: Behaviour,
        namesrv: &str,
        broker_name: &str,
        topics: &[&str],
        broker_id: i64,
    ) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(AtomicUsize::new(0));
        let heartbeats = Arc::new(AtomicUsize::new(0));
        let stop = CancellationToken::new();
        let handler = Arc::new(FakeHandler {
            behaviour,
            requests: Arc::clone(&requests),
            heartbeats: Arc::clone(&heartbeats),
        });
        tokio::spawn(serve(
            listener,
            handler,
            remoting_net::ServerOptions::default(),
            stop.clone(),
        ));
        let table: BTreeMap<String, TopicConfig> = topics
            .iter()
            .map(|t| {
                (
                    (*t).to_owned(),
                    TopicConfig {
                        topic_name: (*t).to_owned(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        ..TopicConfig::default()
                    },
                )
            })
            .collect();
        let body = body::to_json(&RegisterBrokerBody {
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                topic_config_table: table,
                ..TopicConfigSerializeWrapper::default()
            },
            filter_server_list: Vec::new(),
        });
        let header = RegisterBrokerRequestHeader {
            broker_name: broker_name.into(),
            broker_addr: addr.clone(),
            cluster_name: "DefaultCluster".into(),
            ha_server_addr: String::new(),
            broker_id,
            compressed: Some(false),
            ..RegisterBrokerRequestHeader::default()
        };
        let registration = RemotingClient::new(ClientOptions::default());
        let request = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header)
            .with_body(body);
        let response = registration
            .invoke(namesrv, request, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        Self {
            addr,
            requests,
            heartbeats,
            stop,
            _registration: registration,
        }
    }

    /// Requests received so far, heartbeats apart.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// `HEART_BEAT` requests received so far.
    pub fn heartbeats(&self) -> usize {
        self.heartbeats.load(Ordering::SeqCst)
    }
}

/// Waits until the name server's route for `topic` lists `broker_name`
/// with a master (`true`) or without one (`false`).
pub async fn wait_for_master(namesrv: &str, topic: &str, broker_name: &str, master: bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let route = wait_for_route(namesrv, topic, 1).await;
        let has_master = route
            .broker_datas
            .iter()
            .any(|b| b.broker_name == broker_name && b.broker_addrs.contains_key(&0));
        if has_master == master {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{broker_name} never came to have a master: {master}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
