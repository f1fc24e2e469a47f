//! Apache's official RocketMQ C++ client 2.x against both brokers, over the
//! remoting protocol: its producer sends and Sluice's pull consumer reads
//! every message back; its push consumer (clustering, broadcasting, orderly)
//! receives what Sluice's producer sends; a failed message comes back
//! through the group's retry topic; a delayed message waits for its level;
//! its transaction producer's commits are delivered and its rollbacks not.
//!
//! The client is `librocketmq.so` 2.1.0 from PyPI's `rocketmq-python-cvs`,
//! installed by `scripts/install-cpp-client.sh` into a venv whose python
//! `cargo xtask e2e` passes in `SLUICE_E2E_CPP_PYTHON`; each scenario runs
//! `tests/cpp-client/driver.py` (the library's C API through ctypes) as a
//! child process and reads its JSON lines. Every child gets a HOME of its
//! own under the run's directory, where the C++ client keeps its log
//! (`logs/rocketmq-client/PID_rocketmq-cpp.log.0`) and a broadcasting
//! consumer its offsets; xtask keeps that directory when a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::HashMap,
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, ChildStdin, Command, ExitStatus, Stdio},
    time::{Duration, Instant},
};

use consumer_client::{ConsumerConfig, PullConsumer, PullStatus};
use e2e_tests::{unique, wait_for, E2eEnv};
use producer_client::{Message, MessageQueue, Producer, ProducerConfig, SendResult};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{OffsetResponseHeader, QueryConsumerOffsetRequestHeader},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;
use tokio::sync::mpsc;

/// Queues of each test topic on each broker.
const QUEUES: i32 = 2;
/// How long a C++ client may take to start.
const START_LIMIT: Duration = Duration::from_secs(30);
/// Beyond a driver's own `--timeout`: how long it may take to stop.
const EXIT_SLACK: Duration = Duration::from_secs(30);

/// The suite's processes plus the python that drives the C++ client.
struct Cpp {
    env: E2eEnv,
    python: PathBuf,
    /// This scenario's directory; each driver gets a HOME below it.
    dir: PathBuf,
}

impl Cpp {
    /// `None` (after printing why) when the suite runs without processes or
    /// without the C++ client.
    fn from_env(scenario: &str) -> Option<Self> {
        let env = E2eEnv::from_env(scenario)?;
        let Some(python) = env.cpp_python.clone() else {
            println!(
                "skipping {scenario}: SLUICE_E2E_CPP_PYTHON not set \
                 (run scripts/install-cpp-client.sh, then `cargo xtask e2e`)"
            );
            return None;
        };
        let dir = env
            .dir
            .clone()
            .unwrap_or_else(std::env::temp_dir)
            .join(unique("cpp-client-"));
        Some(Self { env, python, dir })
    }

    /// Starts the driver with `args`; `name` names it in messages and its HOME.
    fn spawn(&self, name: &str, args: &[&str]) -> Driver {
        let home = self.dir.join(name);
        std::fs::create_dir_all(&home).unwrap();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/cpp-client/driver.py");
        let mut child = Command::new(&self.python)
            .arg(script)
            .args(args)
            .env("HOME", &home)
            .env_remove("ROCKETMQ_CLIENT_LOG_DIR")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("start {} {script}: {e}", self.python.display()));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("driver stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        println!("C++ client {name}: {args:?}, HOME {}", home.display());
        Driver {
            name: format!("C++ {name} (log under {}/logs)", home.display()),
            child,
            stdin,
            lines,
            events: Vec::new(),
        }
    }

    /// Runs the driver to its end.
    async fn run(&self, name: &str, args: &[&str], limit: Duration) -> Finished {
        self.spawn(name, args).finish(limit).await
    }

    /// `produce` with `args` after the name server and topic.
    async fn produce(&self, topic: &str, args: &[&str]) -> Finished {
        let mut all = vec!["produce", "--namesrv", &self.env.namesrv, "--topic", topic];
        all.extend_from_slice(args);
        self.run("producer", &all, Duration::from_secs(120) + EXIT_SLACK)
            .await
    }

    /// Starts `push` for `group` and `topic`, expecting `n` messages within
    /// `timeout_s`, with `args` added; returns once the consumer started.
    async fn push(
        &self,
        name: &str,
        group: &str,
        topic: &str,
        n: usize,
        timeout_s: u64,
        args: &[&str],
    ) -> Driver {
        let (n, timeout) = (n.to_string(), timeout_s.to_string());
        let mut all = vec![
            "push",
            "--namesrv",
            &self.env.namesrv,
            "--group",
            group,
            "--topic",
            topic,
            "--expect",
            &n,
            "--timeout",
            &timeout,
        ];
        all.extend_from_slice(args);
        let mut driver = self.spawn(name, &all);
        driver.started().await;
        driver
    }
}

/// A running driver; killed when dropped.
struct Driver {
    name: String,
    child: Child,
    /// Closing it ends a `--hold` consumer.
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// Every line read so far.
    events: Vec<Value>,
}

impl Driver {
    /// The next JSON line (also kept in `events`); `None` when the output
    /// ended. Panics when none comes before `deadline`.
    async fn next(&mut self, deadline: Instant) -> Option<Value> {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = tokio::time::timeout(left, self.lines.recv())
            .await
            .unwrap_or_else(|_| panic!("{}: no output in time", self.name))?;
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("{}: not a JSON line ({e}): {line}", self.name));
        self.events.push(event.clone());
        Some(event)
    }

    /// The next delivery of a running consumer; panics when its output ends
    /// or nothing comes before `deadline`.
    async fn next_delivery(&mut self, deadline: Instant) -> Delivery {
        loop {
            match self.next(deadline).await {
                Some(e) if e["event"] == "message" => return Delivery::from(&e),
                Some(_) => {}
                None => panic!("{}: output ended: {:?}", self.name, self.events.last()),
            }
        }
    }

    /// Ends a `--hold` consumer: closes its stdin.
    fn release(&mut self) {
        self.stdin.take();
    }

    /// Waits for the `started` line.
    async fn started(&mut self) {
        let deadline = Instant::now() + START_LIMIT;
        match self.next(deadline).await {
            Some(e) if e["event"] == "started" => println!("{}: started {e}", self.name),
            Some(e) => panic!("{}: did not start: {e}", self.name),
            None => panic!(
                "{}: exited before it started: {:?}",
                self.name,
                self.child.wait()
            ),
        }
    }

    /// Closes stdin (which ends a `--hold` consumer), reads the output to
    /// its end and waits for the exit, within `limit`.
    async fn finish(mut self, limit: Duration) -> Finished {
        let deadline = Instant::now() + limit;
        self.release();
        while self.next(deadline).await.is_some() {}
        let events = std::mem::take(&mut self.events);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "{}: output ended but the process did not exit",
                self.name
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        let done = events
            .iter()
            .rfind(|e| e["event"] == "done")
            .cloned()
            .unwrap_or(Value::Null);
        println!("{}: {status}, {done}", self.name);
        if let Some(counted) = done["deliveries"].as_u64() {
            let printed = events.iter().filter(|e| e["event"] == "message").count();
            assert_eq!(
                u64::try_from(printed).unwrap(),
                counted,
                "{}: delivery lines printed and counted",
                self.name
            );
        }
        Finished {
            name: std::mem::take(&mut self.name),
            status,
            events,
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // Already exited after finish(); killing a live one on a panic.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A driver's whole output.
struct Finished {
    name: String,
    status: ExitStatus,
    events: Vec<Value>,
}

impl Finished {
    /// The lines of one event kind.
    fn of<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a Value> {
        self.events.iter().filter(move |e| e["event"] == event)
    }

    /// The push consumer's deliveries, in the order it printed them.
    fn deliveries(&self) -> Vec<Delivery> {
        self.of("message").map(Delivery::from).collect()
    }

    fn assert_success(&self) {
        assert!(
            self.status.success(),
            "{} ended with {}: {:?}",
            self.name,
            self.status,
            self.events.last()
        );
    }
}

/// One delivery to the C++ push consumer.
#[derive(Debug, Clone)]
struct Delivery {
    topic: String,
    tags: String,
    keys: String,
    body: String,
    msg_id: String,
    queue_id: i64,
    queue_offset: i64,
    reconsume_times: i64,
    born_ms: i64,
    store_ms: i64,
    received_ms: i64,
    status: String,
    properties: HashMap<String, String>,
}

impl From<&Value> for Delivery {
    fn from(e: &Value) -> Self {
        let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
        let n = |k: &str| {
            e[k].as_i64()
                .unwrap_or_else(|| panic!("{k} missing in {e}"))
        };
        Self {
            topic: s("topic"),
            tags: s("tags"),
            keys: s("keys"),
            body: s("body"),
            msg_id: s("msg_id"),
            queue_id: n("queue_id"),
            queue_offset: n("queue_offset"),
            reconsume_times: n("reconsume_times"),
            born_ms: n("born_ms"),
            store_ms: n("store_ms"),
            received_ms: n("received_ms"),
            status: s("status"),
            properties: e["properties"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// Sends `n` messages with Sluice's producer: tag `tags`, key `k{i}` and
/// body `body(i)`; returns each send result by `UNIQ_KEY`, with its index.
async fn sluice_send(
    env: &E2eEnv,
    topic: &str,
    n: usize,
    tags: &str,
    body: impl Fn(usize) -> String,
    queue: Option<&MessageQueue>,
) -> HashMap<String, (usize, SendResult)> {
    let producer = Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
        .await
        .unwrap();
    let mut sent = HashMap::with_capacity(n);
    for i in 0..n {
        let msg = Message::new(topic, body(i))
            .with_tags(tags)
            .with_key(format!("k{i}"));
        let r = match queue {
            Some(q) => producer.send_to_queue(msg, q).await,
            None => producer.send(msg).await,
        }
        .unwrap_or_else(|e| panic!("Sluice send {i}: {e}"));
        assert!(
            sent.insert(r.msg_id.clone(), (i, r)).is_none(),
            "UNIQ_KEY reused"
        );
    }
    producer.shutdown().await;
    sent
}

/// Checks that `deliveries` hold every sent message exactly once, answered
/// CONSUME_SUCCESS at the first attempt, with its topic, tag, key, body,
/// queue and offset and sane timestamps.
fn assert_received_once(
    who: &str,
    topic: &str,
    sent: &HashMap<String, (usize, SendResult)>,
    deliveries: &[Delivery],
    tags: &str,
    body: impl Fn(usize) -> String,
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for d in deliveries {
        let (i, r) = sent
            .get(&d.msg_id)
            .unwrap_or_else(|| panic!("{who}: unknown message {d:?}"));
        assert_eq!(d.topic, topic, "{who}: topic of message {i}");
        assert_eq!(d.tags, tags, "{who}: tag of message {i}");
        assert_eq!(d.keys, format!("k{i}"), "{who}: keys of message {i}");
        assert_eq!(d.body, body(*i), "{who}: body of message {i}");
        assert_eq!(
            (d.queue_id, d.queue_offset),
            (
                i64::from(r.message_queue.queue_id),
                i64::try_from(r.queue_offset).unwrap()
            ),
            "{who}: queue and offset of message {i} (sent to {:?})",
            r.message_queue
        );
        assert_eq!(d.reconsume_times, 0, "{who}: reconsume times of {i}");
        assert_eq!(d.status, "CONSUME_SUCCESS", "{who}: message {i}");
        assert!(
            d.born_ms <= d.store_ms && d.store_ms <= d.received_ms,
            "{who}: message {i} born {} stored {} received {}",
            d.born_ms,
            d.store_ms,
            d.received_ms
        );
        *seen.entry(d.msg_id.as_str()).or_default() += 1;
    }
    let twice: Vec<&Delivery> = deliveries
        .iter()
        .filter(|d| seen.get(d.msg_id.as_str()).is_some_and(|&c| c > 1))
        .collect();
    assert!(
        twice.is_empty(),
        "{who}: messages received more than once: {twice:#?}"
    );
    let missing = sent.len() - seen.len();
    assert_eq!(
        missing,
        0,
        "{who}: {missing} of {} not received",
        sent.len()
    );
}

/// The group's committed offset of queue `queue_id` of `topic` on the
/// broker at `addr` (`QUERY_CONSUMER_OFFSET`); `None` when it has none.
async fn committed_offset(
    client: &RemotingClient,
    addr: &str,
    group: &str,
    topic: &str,
    queue_id: u32,
) -> Option<u64> {
    let req = RemotingCommand::request_with_header(
        RequestCode::QUERY_CONSUMER_OFFSET,
        &QueryConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: topic.into(),
            queue_id: i32::try_from(queue_id).unwrap(),
            set_zero_if_not_found: Some(false),
            ..QueryConsumerOffsetRequestHeader::default()
        },
    );
    let resp = client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .expect("QUERY_CONSUMER_OFFSET");
    if resp.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    let h: OffsetResponseHeader = resp.decode_header().expect("offset header");
    u64::try_from(h.offset).ok()
}

/// The client ids the broker at `addr` lists for `group`
/// (`GET_CONSUMER_LIST_BY_GROUP`; none when it answers that there are none).
async fn consumer_ids(client: &RemotingClient, addr: &str, group: &str) -> Vec<String> {
    let mut req = RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP);
    req.set_ext("consumerGroup", group);
    let resp = client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .expect("GET_CONSUMER_LIST_BY_GROUP");
    if resp.response_code() != ResponseCode::SUCCESS {
        return Vec::new();
    }
    let body: Value = serde_json::from_slice(&resp.body).expect("consumer list body");
    body["consumerIdList"]
        .as_array()
        .map(|ids| {
            ids.iter()
                .filter_map(|id| id.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Mechanism: the C++ producer's route query (`GET_ROUTEINFO_BY_TOPIC`),
/// `HEART_BEAT`, and `SEND_MESSAGE_V2` with its headers (numbers in
/// extFields, `0`/`1` booleans) round-robin over both brokers' queues;
/// then a plain pull of every queue from its start with Sluice's consumer.
/// Every send must be SEND_OK, and every message must come back once with
/// its tag, both keys, body and the queue offset the client was told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_producer_sends_and_sluice_pulls_every_message_back() {
    let Some(cpp) = Cpp::from_env("C++ producer") else {
        return;
    };
    let n: usize = if cpp.env.quick { 200 } else { 2000 };
    let topic = unique("CppProduce");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();

    let started = Instant::now();
    let count = n.to_string();
    let run = cpp
        .produce(
            &topic,
            &[
                "--count",
                &count,
                "--tag",
                "cpp",
                "--keys",
                "k{i} cpp-e2e",
                "--body-prefix",
                "cpp-e2e-",
            ],
        )
        .await;
    run.assert_success();
    let mut sent: HashMap<String, (usize, i64)> = HashMap::with_capacity(n);
    for e in run.of("sent") {
        assert_eq!(e["status"], "SEND_OK", "{e}");
        let i = usize::try_from(e["i"].as_u64().unwrap()).unwrap();
        let id = e["msg_id"].as_str().unwrap().to_owned();
        assert!(
            sent.insert(id, (i, e["offset"].as_i64().unwrap()))
                .is_none(),
            "msg id reused: {e}"
        );
    }
    assert_eq!(sent.len(), n, "sends reported");
    println!(
        "C++ producer: {n} sent in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let consumer = PullConsumer::start(ConsumerConfig::new(&cpp.env.namesrv, unique("cpp-pull-")))
        .await
        .unwrap();
    let queues = consumer.fetch_queues(&topic).await.unwrap();
    assert_eq!(queues.len(), 2 * usize::try_from(QUEUES).unwrap());
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen: HashMap<String, usize> = HashMap::with_capacity(n);
    let mut per_broker: HashMap<String, usize> = HashMap::new();
    for q in &queues {
        let mut offset = 0;
        loop {
            assert!(Instant::now() < deadline, "pulling took over 60 s");
            let r = consumer.pull(q, offset, 32).await.unwrap();
            for m in &r.messages {
                let &(i, sent_offset) = sent
                    .get(&m.msg_id)
                    .unwrap_or_else(|| panic!("pulled an unknown message {m:?}"));
                assert_eq!(m.tags.as_deref(), Some("cpp"), "tag of {i}");
                assert_eq!(
                    m.keys,
                    [format!("k{i}"), "cpp-e2e".to_owned()],
                    "keys of {i}"
                );
                assert_eq!(m.body, format!("cpp-e2e-{i}").as_bytes(), "body of {i}");
                assert_eq!(
                    i64::try_from(m.queue_offset).unwrap(),
                    sent_offset,
                    "offset of {i}"
                );
                assert!(m.born_timestamp_ms <= m.store_timestamp_ms, "times of {i}");
                *seen.entry(m.msg_id.clone()).or_default() += 1;
                *per_broker.entry(q.broker_name.clone()).or_default() += 1;
            }
            offset = r.next_begin_offset;
            if r.status == PullStatus::NoNewMsg || offset >= r.max_offset {
                break;
            }
        }
    }
    println!("pulled {} distinct, per broker {per_broker:?}", seen.len());
    assert_eq!(seen.len(), n, "distinct messages pulled");
    assert!(seen.values().all(|&c| c == 1), "a message was stored twice");
    assert_eq!(per_broker.len(), 2, "the C++ producer used one broker only");
}

/// Mechanism: the C++ push consumer's `HEART_BEAT` (enums as ordinals),
/// `GET_CONSUMER_LIST_BY_GROUP` and average allocation, the new group's
/// `QUERY_CONSUMER_OFFSET` (0 on a fresh queue, so nothing sent after its
/// start is skipped), long-polling `PULL_MESSAGE` with its sysFlag and
/// subscription, and `UPDATE_CONSUMER_OFFSET`. Everything Sluice's producer
/// sends arrives once, with tag, key, body, queue and offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_push_consumer_receives_what_sluice_sends() {
    let Some(cpp) = Cpp::from_env("C++ push consumer") else {
        return;
    };
    let n: usize = if cpp.env.quick { 200 } else { 2000 };
    let topic = unique("CppPush");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let consumer = cpp
        .push("consumer", &unique("cpp-push-"), &topic, n, 120, &[])
        .await;
    let body = |i: usize| format!("sluice-to-cpp-{i}");
    let started = Instant::now();
    let sent = sluice_send(&cpp.env, &topic, n, "sluice", body, None).await;
    let run = consumer.finish(Duration::from_secs(120) + EXIT_SLACK).await;
    println!(
        "C++ push consumer: {n} sent and received in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    run.assert_success();
    assert_received_once(
        "clustering consumer",
        &topic,
        &sent,
        &run.deliveries(),
        "sluice",
        body,
    );
}

/// Mechanism: two C++ consumers of one group in BROADCASTING mode, with
/// their offsets in local files and starting at each queue's first offset
/// (`GET_MIN_OFFSET`, not the broker's committed offsets): each receives
/// every message Sluice's producer sends, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_broadcast_consumers_each_receive_every_message() {
    let Some(cpp) = Cpp::from_env("C++ broadcast consumers") else {
        return;
    };
    let n: usize = if cpp.env.quick { 50 } else { 500 };
    let topic = unique("CppBroadcast");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let group = unique("cpp-bc-");
    let flags = ["--broadcast", "--from-first"];
    let first = cpp.push("broadcast-1", &group, &topic, n, 90, &flags).await;
    let second = cpp.push("broadcast-2", &group, &topic, n, 90, &flags).await;
    let body = |i: usize| format!("broadcast-{i}");
    let sent = sluice_send(&cpp.env, &topic, n, "bc", body, None).await;
    for (who, driver) in [("first", first), ("second", second)] {
        let run = driver.finish(Duration::from_secs(90) + EXIT_SLACK).await;
        run.assert_success();
        let who = format!("{who} broadcast consumer");
        assert_received_once(&who, &topic, &sent, &run.deliveries(), "bc", body);
    }
}

/// Mechanism: an orderly C++ consumer (CLUSTERING) consumes a queue only
/// after `LOCK_BATCH_MQ` locked it for its client id (and keeps the lock
/// every 20 s); it then hands over one queue's messages in offset order.
/// Sluice's producer puts all messages into one queue of broker-a.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_orderly_consumer_receives_a_queue_in_order() {
    let Some(cpp) = Cpp::from_env("C++ orderly consumer") else {
        return;
    };
    let n: usize = if cpp.env.quick { 50 } else { 500 };
    let topic = unique("CppOrderly");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let queue = MessageQueue::new(topic.as_str(), "broker-a", 1);
    let body = |i: usize| format!("orderly-{i:06}");
    let sent = sluice_send(&cpp.env, &topic, n, "ord", body, Some(&queue)).await;
    let consumer = cpp
        .push(
            "orderly",
            &unique("cpp-ord-"),
            &topic,
            n,
            30,
            &["--orderly"],
        )
        .await;
    let run = consumer.finish(Duration::from_secs(30) + EXIT_SLACK).await;
    let deliveries = run.deliveries();
    assert!(
        run.status.success(),
        "orderly consumer received {} of {n} in 30 s; it pulls a queue only once \
         LOCK_BATCH_MQ has locked it for the client (see the C++ client log: \
         \"lock fails of mq\")",
        deliveries.len()
    );
    assert_received_once("orderly consumer", &topic, &sent, &deliveries, "ord", body);
    let bodies: Vec<&str> = deliveries.iter().map(|d| d.body.as_str()).collect();
    let mut in_order = bodies.clone();
    in_order.sort_unstable();
    assert_eq!(bodies, in_order, "orderly consumer: out of order");
}

/// Mechanism: a C++ consumer answers RECONSUME_LATER; the client sends the
/// message back with `CONSUMER_SEND_MSG_BACK` (delay level 0: the broker
/// picks 3 + reconsume times), the broker stores it in `%RETRY%<group>`
/// with `RETRY_TOPIC` and `ORIGIN_MESSAGE_ID`, and the consumer, which
/// subscribes to that topic by itself, receives it again with reconsume
/// times 1. When the send-back fails the client retries the message in
/// memory after 1 s instead: same store time, no `RETRY_TOPIC`; that does
/// not count here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_failed_message_comes_back_through_the_retry_topic() {
    let Some(cpp) = Cpp::from_env("C++ consumer retry") else {
        return;
    };
    let n = 4;
    let topic = unique("CppRetry");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let consumer = cpp
        .push(
            "retry",
            &unique("cpp-retry-"),
            &topic,
            n,
            120,
            &["--fail-body", "fail-me"],
        )
        .await;
    let body = |i: usize| {
        if i == 1 {
            format!("fail-me-{i}")
        } else {
            format!("ok-{i}")
        }
    };
    let sent = sluice_send(&cpp.env, &topic, n, "retry", body, None).await;
    let run = consumer.finish(Duration::from_secs(120) + EXIT_SLACK).await;
    run.assert_success();
    let deliveries = run.deliveries();
    let (failing, others): (Vec<Delivery>, Vec<Delivery>) = deliveries
        .into_iter()
        .partition(|d| d.body.contains("fail-me"));
    let first = failing.first().expect("the failing message was delivered");
    assert_eq!(
        (first.reconsume_times, first.status.as_str()),
        (0, "RECONSUME_LATER")
    );
    let again = failing.get(1).expect("the failed message came back");
    assert!(
        again.reconsume_times >= 1
            && again.properties.get("RETRY_TOPIC") == Some(&topic)
            && again.store_ms >= first.received_ms,
        "the failed message came back without the broker's send-back (the client's \
         own retry after CONSUMER_SEND_MSG_BACK failed keeps its store time and has no \
         RETRY_TOPIC): first {first:?}, again {again:?}"
    );
    assert_eq!(again.msg_id, first.msg_id, "the retry keeps the UNIQ_KEY");
    assert_eq!(again.body, first.body);
    assert_eq!(again.status, "CONSUME_SUCCESS");
    assert_eq!(failing.len(), 2, "deliveries of the failed message");
    let ok: HashMap<String, (usize, SendResult)> =
        sent.into_iter().filter(|(_, (i, _))| *i != 1).collect();
    assert_received_once("retry consumer", &topic, &ok, &others, "retry", body);
}

/// Mechanism: the C++ producer sets the `DELAY` property (level 2: 5 s in
/// RocketMQ's default ladder); the broker keeps the message in
/// `SCHEDULE_TOPIC_XXXX` and puts it into its topic once the level's time
/// has passed, so the consumer receives it no earlier than born + 5 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_delayed_message_arrives_no_earlier_than_its_level() {
    let Some(cpp) = Cpp::from_env("C++ delayed message") else {
        return;
    };
    const LEVEL_2_MS: i64 = 5000;
    let n = 3;
    let topic = unique("CppDelay");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let consumer = cpp
        .push("delay-consumer", &unique("cpp-delay-"), &topic, n, 60, &[])
        .await;
    let run = cpp
        .produce(
            &topic,
            &[
                "--count",
                "3",
                "--delay-level",
                "2",
                "--body-prefix",
                "delayed-",
            ],
        )
        .await;
    run.assert_success();
    let sent: HashMap<String, i64> = run
        .of("sent")
        .map(|e| {
            (
                e["msg_id"].as_str().unwrap().to_owned(),
                e["sent_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sent.len(), n);
    let run = consumer.finish(Duration::from_secs(60) + EXIT_SLACK).await;
    run.assert_success();
    let deliveries = run.deliveries();
    assert_eq!(deliveries.len(), n, "deliveries: {deliveries:?}");
    for d in &deliveries {
        assert!(sent.contains_key(&d.msg_id), "unknown {d:?}");
        let waited = d.received_ms - d.born_ms;
        assert!(
            waited >= LEVEL_2_MS,
            "delay level 2 message received {waited} ms after it was born: {d:?}"
        );
        assert!(
            waited < LEVEL_2_MS + 20_000,
            "delay level 2 message received only after {waited} ms: {d:?}"
        );
    }
}

/// Mechanism: the C++ consumer commits its offsets (`commitOffset` in
/// `PULL_MESSAGE`'s sysFlag, and `UPDATE_CONSUMER_OFFSET` every 5 s) and
/// the broker answers them to `QUERY_CONSUMER_OFFSET`; when the consumer's
/// process ends, the broker drops it from the group as its connection
/// closes (the C++ client's shutdown is not called, see the driver). A new
/// consumer of the group then starts at the committed offsets: it gets the
/// messages sent since, and none of those consumed before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_consumer_resumes_from_its_committed_offsets() {
    let Some(cpp) = Cpp::from_env("C++ consumer offsets") else {
        return;
    };
    let n: usize = if cpp.env.quick { 40 } else { 400 };
    let topic = unique("CppOffsets");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let group = unique("cpp-offsets-");
    let before = |i: usize| format!("before-{i}");
    let first_sent = sluice_send(&cpp.env, &topic, n, "off", before, None).await;
    let mut first = cpp.push("first", &group, &topic, n, 120, &["--hold"]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = HashMap::new();
    while got.len() < n {
        let d = first.next_delivery(deadline).await;
        got.insert(d.msg_id.clone(), d);
    }

    // Every queue's committed offset reaches its end while the consumer runs.
    let client = RemotingClient::new(ClientOptions::default());
    let mut ends: Vec<(String, u32, u64)> = Vec::new();
    for r in first_sent.values().map(|(_, r)| r) {
        let addr = r.broker_addr.clone();
        let end = r.queue_offset + 1;
        match ends
            .iter_mut()
            .find(|(a, q, _)| *a == addr && *q == r.message_queue.queue_id)
        {
            Some(e) => e.2 = e.2.max(end),
            None => ends.push((addr, r.message_queue.queue_id, end)),
        }
    }
    wait_for(Duration::from_secs(20), || async {
        for (addr, queue_id, end) in &ends {
            let committed = committed_offset(&client, addr, &group, &topic, *queue_id).await;
            if committed != Some(*end) {
                return false;
            }
        }
        true
    })
    .await
    .unwrap_or_else(|e| panic!("committed offsets of {group} did not reach {ends:?}: {e}"));

    // The consumer goes; the brokers forget it once its connection closes.
    let run = first.finish(EXIT_SLACK).await;
    run.assert_success();
    wait_for(Duration::from_secs(15), || async {
        let mut none = true;
        for addr in &cpp.env.brokers {
            none &= consumer_ids(&client, addr, &group).await.is_empty();
        }
        none
    })
    .await
    .unwrap_or_else(|e| panic!("the brokers still list a consumer of {group}: {e}"));

    let after = |i: usize| format!("after-{i}");
    let second_sent = sluice_send(&cpp.env, &topic, n, "off", after, None).await;
    let second = cpp.push("second", &group, &topic, n, 60, &[]).await;
    let run = second.finish(Duration::from_secs(60) + EXIT_SLACK).await;
    run.assert_success();
    assert_received_once(
        "resumed consumer",
        &topic,
        &second_sent,
        &run.deliveries(),
        "off",
        after,
    );
    client.close_all().await;
}

/// How soon two consumers of a group must have split the queues.
const SPLIT_LIMIT: Duration = Duration::from_secs(5);

/// Mechanism: when a second consumer joins a group, the broker sends
/// `NOTIFY_CONSUMER_IDS_CHANGED` to the group's consumers and they
/// rebalance at once, each taking half of the topic's queues, instead of
/// at their next periodic rebalance (every 10 s in the C++ client, the
/// first 10 s after start; until then the first consumer still pulls every
/// queue and messages of the queues the second took come twice). Probe
/// rounds, one message into each queue, show when each queue is read by
/// one consumer only; two clean rounds must come within 5 s of the second
/// consumer's start. Then every message comes once, each queue to one of
/// the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_consumers_of_one_group_split_the_queues_at_once() {
    let Some(cpp) = Cpp::from_env("C++ consumers sharing a group") else {
        return;
    };
    let n: usize = if cpp.env.quick { 100 } else { 1000 };
    let topic = unique("CppSplit");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let group = unique("cpp-split-");
    let hold = ["--hold"];
    let mut members = [
        cpp.push("member-a", &group, &topic, 1, 120, &hold).await,
        cpp.push("member-b", &group, &topic, 1, 120, &hold).await,
    ];
    let joined = Instant::now();
    let producer = Producer::start(ProducerConfig::with_namesrv(&cpp.env.namesrv))
        .await
        .unwrap();
    let queues = producer.publish_queues(&topic).await.unwrap();
    assert_eq!(queues.len(), 2 * usize::try_from(QUEUES).unwrap());

    // Probe rounds until two in a row are clean.
    let mut clean = 0;
    let mut round = 0;
    let mut owners: HashMap<String, usize> = HashMap::new();
    let mut last = String::new();
    while clean < 2 {
        assert!(
            joined.elapsed() < SPLIT_LIMIT,
            "the two consumers of {group} did not split the queues within {SPLIT_LIMIT:?} \
             of the second one's start ({round} probe rounds; the first consumer \
             rebalances only when notified or at its periodic rebalance); last round, \
             probe: members (0 started first) {last}"
        );
        if round > 0 {
            // Paces the rounds of an unsettled group (about 50 at most).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        round += 1;
        let mut probes = HashMap::new();
        for q in &queues {
            let body = format!("probe-{round}-{}-{}", q.broker_name, q.queue_id);
            producer
                .send_to_queue(Message::new(topic.as_str(), body.clone()), q)
                .await
                .unwrap();
            probes.insert(body, q.clone());
        }
        let mut seen: HashMap<String, Vec<usize>> = HashMap::new();
        let mut stale = 0;
        let deadline = Instant::now() + SPLIT_LIMIT;
        while seen.len() < probes.len() {
            let (who, d) = next_of_either(&mut members, deadline).await;
            if probes.contains_key(&d.body) {
                seen.entry(d.body).or_default().push(who);
            } else {
                stale += 1;
            }
        }
        last = format!("{seen:?}, {stale} from earlier rounds");
        let once = seen.values().all(|w| w.len() == 1);
        let both = (0..2).all(|m| seen.values().any(|w| w.contains(&m)));
        if once && both && stale == 0 {
            clean += 1;
            owners = seen
                .into_iter()
                .map(|(body, w)| (body.splitn(3, '-').nth(2).unwrap().to_owned(), w[0]))
                .collect();
        } else {
            clean = 0;
        }
    }
    println!(
        "split after {round} probe rounds, {} ms after the second consumer started",
        joined.elapsed().as_millis()
    );

    // Every message once, each queue to one member.
    let mut sent: HashMap<String, MessageQueue> = HashMap::with_capacity(n);
    for i in 0..n {
        let r = producer
            .send(Message::new(topic.as_str(), format!("split-{i}")))
            .await
            .unwrap();
        sent.insert(r.msg_id, r.message_queue);
    }
    producer.shutdown().await;
    // Counted while both members run: once one stops, the other takes its
    // queues and may read again what the first consumed but had not yet
    // committed, which at-least-once delivery allows.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut count: HashMap<String, usize> = HashMap::new();
    let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
    while count.len() < n {
        let (who, d) = next_of_either(&mut members, deadline).await;
        let Some(q) = sent.get(&d.msg_id) else {
            continue;
        };
        *count.entry(d.msg_id.clone()).or_default() += 1;
        let r = readers
            .entry(format!("{}-{}", q.broker_name, q.queue_id))
            .or_default();
        if !r.contains(&who) {
            r.push(who);
        }
    }
    let [a, b] = members;
    a.finish(EXIT_SLACK).await.assert_success();
    b.finish(EXIT_SLACK).await.assert_success();
    let twice = count.values().filter(|&&c| c > 1).count();
    assert_eq!(twice, 0, "messages received twice while both ran");
    let shared: Vec<_> = readers.iter().filter(|(_, r)| r.len() > 1).collect();
    assert!(shared.is_empty(), "queues read by both: {shared:?}");
    println!("queues per member after the split: {owners:?}");
}

/// The next delivery to either of two running consumers, with its index.
async fn next_of_either(members: &mut [Driver; 2], deadline: Instant) -> (usize, Delivery) {
    let [a, b] = members;
    tokio::select! {
        d = a.next_delivery(deadline) => (0, d),
        d = b.next_delivery(deadline) => (1, d),
    }
}

/// Every message in the topic's queues now, from offset 0.
async fn pull_everything(consumer: &PullConsumer, topic: &str) -> Vec<consumer_client::MessageExt> {
    let mut all = Vec::new();
    for q in &consumer.fetch_queues(topic).await.unwrap() {
        let mut offset = 0;
        loop {
            let r = consumer.pull(q, offset, 32).await.unwrap();
            all.extend(r.messages);
            offset = r.next_begin_offset;
            if r.status == PullStatus::NoNewMsg || offset >= r.max_offset {
                break;
            }
        }
    }
    all
}

/// Runs the C++ transaction producer with `args` on a new topic; returns
/// the topic and each message's index and decided outcome by id
/// (`outcome` or, when that is unknown, the check's answer).
async fn cpp_transactions(
    cpp: &Cpp,
    name: &str,
    args: &[&str],
) -> (String, HashMap<String, (usize, String)>) {
    let topic = unique("CppTx");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let mut all = vec!["transact", "--namesrv", &cpp.env.namesrv, "--topic", &topic];
    all.extend_from_slice(args);
    let run = cpp
        .run(name, &all, Duration::from_secs(150) + EXIT_SLACK)
        .await;
    run.assert_success();
    let answers: HashMap<usize, String> = run
        .of("checked")
        .map(|e| {
            let i = usize::try_from(e["i"].as_u64().unwrap()).unwrap();
            (i, e["answer"].as_str().unwrap().to_owned())
        })
        .collect();
    let mut outcomes = HashMap::new();
    for e in run.of("sent") {
        assert_eq!(e["status"], "SEND_OK", "{e}");
        let i = usize::try_from(e["i"].as_u64().unwrap()).unwrap();
        let mut outcome = e["outcome"].as_str().unwrap().to_owned();
        if outcome == "unknown" {
            outcome = answers
                .get(&i)
                .unwrap_or_else(|| panic!("message {i}: unknown outcome, never checked"))
                .clone();
        }
        outcomes.insert(e["msg_id"].as_str().unwrap().to_owned(), (i, outcome));
    }
    (topic, outcomes)
}

/// Pulls until every committed message of `outcomes` arrived, then checks
/// that each came once with its body and that no other did.
async fn assert_only_commits_delivered(
    cpp: &Cpp,
    topic: &str,
    outcomes: &HashMap<String, (usize, String)>,
) -> usize {
    let commits = outcomes.values().filter(|(_, o)| o == "commit").count();
    // The ends are oneway: wait until every commit is delivered.
    let consumer = PullConsumer::start(ConsumerConfig::new(&cpp.env.namesrv, unique("cpp-tx-")))
        .await
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let pulled = loop {
        let pulled = pull_everything(&consumer, topic).await;
        if pulled.len() >= commits {
            break pulled;
        }
        assert!(
            Instant::now() < deadline,
            "{} of {commits} commits delivered in 60 s",
            pulled.len()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for m in &pulled {
        let (i, outcome) = outcomes
            .get(&m.msg_id)
            .unwrap_or_else(|| panic!("an unknown message was delivered: {m:?}"));
        assert_eq!(
            outcome, "commit",
            "message {i} was rolled back yet delivered"
        );
        assert_eq!(m.body, format!("cpp-tx-{i}").as_bytes(), "body of {i}");
        *seen.entry(m.msg_id.as_str()).or_default() += 1;
    }
    assert_eq!(seen.len(), commits, "distinct commits delivered");
    assert!(
        seen.values().all(|&c| c == 1),
        "a commit was delivered twice"
    );
    commits
}

/// Mechanism: the C++ transaction producer's half send (`TRAN_MSG`,
/// `PGROUP`), then its oneway `END_TRANSACTION` with the offsets it reads
/// from the send answer. Committed messages are delivered once each with
/// their body; rolled-back ones never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_transaction_producer_commits_and_rolls_back() {
    let Some(cpp) = Cpp::from_env("C++ transaction producer") else {
        return;
    };
    let n: usize = if cpp.env.quick { 20 } else { 200 };
    let count = n.to_string();
    let (topic, outcomes) = cpp_transactions(
        &cpp,
        "transactions",
        &["--count", &count, "--outcome", "alternate"],
    )
    .await;
    assert_eq!(outcomes.len(), n, "sends reported");
    let commits = assert_only_commits_delivered(&cpp, &topic, &outcomes).await;
    println!("C++ transactions: {n} sent, {commits} committed and delivered once, none rolled back delivered");
}

/// Mechanism: local transactions that answer "unknown" leave their halves
/// pending; the broker's `CHECK_TRANSACTION_STATE` reaches the C++
/// producer (registered by its heartbeat), whose checker answers commit or
/// rollback with `END_TRANSACTION`. The suite's brokers check after 1 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_transaction_checks_settle_unknown_outcomes() {
    let Some(cpp) = Cpp::from_env("C++ transaction checks") else {
        return;
    };
    let n: usize = if cpp.env.quick { 10 } else { 60 };
    let count = n.to_string();
    let (topic, outcomes) = cpp_transactions(
        &cpp,
        "checked-transactions",
        &[
            "--count",
            &count,
            "--outcome",
            "unknown",
            "--check-outcome",
            "alternate",
            "--linger",
            "60",
        ],
    )
    .await;
    assert_eq!(outcomes.len(), n, "sends reported");
    let commits = assert_only_commits_delivered(&cpp, &topic, &outcomes).await;
    println!("C++ transaction checks: {n} sent unknown, all checked; {commits} committed by their check and delivered once");
}

/// Mechanism: a C++ transaction producer sends halves and is killed
/// (SIGKILL) before it ends them; its connection closes, so the broker's
/// checks (`CHECK_TRANSACTION_STATE`, every second on the e2e brokers) go
/// to the other live producer of the group, which settles every half:
/// commits delivered once, rollbacks never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpp_transaction_of_a_killed_producer_is_checked_through_another_of_its_group() {
    let Some(cpp) = Cpp::from_env("C++ transaction producer killed") else {
        return;
    };
    let n: usize = if cpp.env.quick { 6 } else { 40 };
    let count = n.to_string();
    let topic = unique("CppTxKilled");
    let group = unique("cpp-tx-group-");
    cpp.env.create_topic(&topic, QUEUES).await.unwrap();
    let common = [
        "--namesrv",
        &cpp.env.namesrv,
        "--topic",
        &topic,
        "--group",
        &group,
    ];

    // The first producer leaves every outcome unknown and answers its
    // checks "unknown" while it lives; it is killed once its sends are
    // acknowledged.
    let mut args = vec!["transact"];
    args.extend_from_slice(&common);
    args.extend_from_slice(&["--count", &count, "--outcome", "unknown", "--linger", "120"]);
    let mut first = cpp.spawn("killed-producer", &args);
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut halves: HashMap<String, usize> = HashMap::new();
    while halves.len() < n {
        match first.next(deadline).await {
            Some(e) if e["event"] == "sent" => {
                assert_eq!(e["status"], "SEND_OK", "{e}");
                let i = usize::try_from(e["i"].as_u64().unwrap()).unwrap();
                halves.insert(e["msg_id"].as_str().unwrap().to_owned(), i);
            }
            Some(e) => assert_ne!(e["event"], "send_error", "{e}"),
            None => panic!(
                "the first producer ended before its sends: {:?}",
                first.events
            ),
        }
    }
    drop(first);

    // The second producer of the group sends one committed message of its
    // own, then answers the checks of the first one's halves.
    let mut args = vec!["transact"];
    args.extend_from_slice(&common);
    let expect = count.clone();
    args.extend_from_slice(&[
        "--count",
        "1",
        "--outcome",
        "commit",
        "--body-prefix",
        "cpp-tx-",
        "--check-outcome",
        "alternate",
        "--expect-checks",
        &expect,
        "--linger",
        "90",
    ]);
    let second = cpp
        .run(
            "checking-producer",
            &args,
            Duration::from_secs(150) + EXIT_SLACK,
        )
        .await;
    second.assert_success();
    let answers: HashMap<usize, String> = second
        .of("checked")
        .map(|e| {
            let i = usize::try_from(e["i"].as_u64().unwrap()).unwrap();
            (i, e["answer"].as_str().unwrap().to_owned())
        })
        .collect();
    let mut outcomes: HashMap<String, (usize, String)> = halves
        .into_iter()
        .map(|(msg_id, i)| {
            let answer = answers
                .get(&i)
                .unwrap_or_else(|| panic!("half {i} of the killed producer was never checked"))
                .clone();
            (msg_id, (i, answer))
        })
        .collect();
    for e in second.of("sent") {
        assert_eq!(e["status"], "SEND_OK", "{e}");
        outcomes.insert(
            e["msg_id"].as_str().unwrap().to_owned(),
            (0, "commit".to_owned()),
        );
    }
    let commits = assert_only_commits_delivered(&cpp, &topic, &outcomes).await;
    println!(
        "C++ transaction producer killed after {n} halves: every half checked through the other \
         producer of its group; {commits} commits delivered once (one of them its own), the rest never"
    );
}
