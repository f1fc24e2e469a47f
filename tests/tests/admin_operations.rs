//! `sluice-admin`'s operations against real processes: a group's offsets
//! reset to a time between two batches (the running push consumer reads
//! the second batch again, never the first); a broker drained while a
//! producer sends (new sends go to the other broker of the cluster, pulls
//! from the drained one go on) and undrained; and `why-busy` naming a
//! SYNC_FLUSH backlog left by slow flushes, with its figures; and
//! `message get` finding messages by key and by unique key after the broker
//! was killed and started again on its store.
//!
//! Mechanism: `INVOKE_BROKER_TO_RESET_OFFSET` answered by `PULL_OFFSET_MOVED`
//! on the group's next pull; `brokerPermission=4` with
//! `WIPE_WRITE_PERM_OF_BROKER` (and back); `GET_BROKER_RUNTIME_INFO`'s
//! `remainHowManyDataToFlushBytes` against `syncFlushTimeout` while the
//! `faultFlushDelayMills` fault holds every flush back; `QUERY_MESSAGE` to
//! each broker of the topic's route, answered from the IndexFiles that the
//! broker's recovery completes from the CommitLog.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use admin::{run, AdminError, Cli};
use clap::Parser;
use consumer_client::{
    ConsumeFromWhere, ConsumeStatus, ConsumerConfig, FnHandler, PullConsumer, PushConsumer,
};
use e2e_tests::{unique, wait_for, E2eEnv, OwnBroker};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;

/// Runs `sluice-admin --json` with `args` against the name server `namesrv`.
async fn admin_json(namesrv: &str, args: &[&str]) -> Value {
    let mut all = vec!["sluice-admin", "--namesrv", namesrv, "--json"];
    all.extend_from_slice(args);
    let out = run(&Cli::parse_from(all))
        .await
        .unwrap_or_else(|e| panic!("sluice-admin {args:?}: {e}"));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Runs `sluice-admin --json` with `args` against `namesrv`: its JSON
/// output, or its failure.
async fn try_admin_json(namesrv: &str, args: &[&str]) -> Result<Value, AdminError> {
    let mut all = vec!["sluice-admin", "--namesrv", namesrv, "--json"];
    all.extend_from_slice(args);
    let out = run(&Cli::parse_from(all)).await?;
    Ok(serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}")))
}

fn now_ms() -> i64 {
    message_model::now_ms()
}

/// Waits (at most 1 s) until the clock reads later than `ms`.
async fn clock_past(ms: i64) {
    wait_for(Duration::from_secs(1), || async move { now_ms() > ms })
        .await
        .expect("the clock moves");
}

/// How many times each body was consumed.
type Seen = Arc<Mutex<BTreeMap<String, usize>>>;

fn times(seen: &Seen, body: &str) -> usize {
    seen.lock().unwrap().get(body).copied().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_reset_offset_by_time_makes_the_consumer_reread_from_there() {
    let Some(env) = E2eEnv::from_env("admin reset-offset") else {
        return;
    };
    let topic = unique("AdminReset");
    let group = unique("admin-reset-");
    env.create_topic(&topic, 2).await.unwrap();
    admin_json(&env.namesrv, &["group", "create", "--group", &group]).await;

    let seen: Seen = Arc::default();
    let record = Arc::clone(&seen);
    let handler = FnHandler(move |batch: Vec<consumer_client::MessageExt>| {
        let record = Arc::clone(&record);
        async move {
            let mut seen = record.lock().unwrap();
            for m in batch {
                *seen
                    .entry(String::from_utf8_lossy(&m.body).into_owned())
                    .or_default() += 1;
            }
            ConsumeStatus::Success
        }
    });
    let config = ConsumerConfig {
        consume_from_where: ConsumeFromWhere::FirstOffset,
        ..ConsumerConfig::new(&env.namesrv, group.clone())
    }
    .subscribe(&topic, "*");
    let consumer = PushConsumer::start(config, handler).await.unwrap();

    let producer = Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
        .await
        .unwrap();
    let (first, second, third) = (20, 20, 4);
    for i in 0..first {
        producer
            .send(Message::new(&topic, format!("one-{i}")))
            .await
            .unwrap();
    }
    // Every message of the first batch was stored before `between`, every
    // later one after it.
    let between = now_ms() + 1;
    clock_past(between).await;
    for i in 0..second {
        producer
            .send(Message::new(&topic, format!("two-{i}")))
            .await
            .unwrap();
    }
    wait_for(Duration::from_secs(30), || async {
        seen.lock().unwrap().len() == first + second
    })
    .await
    .expect("the group consumes both batches");

    let reset = admin_json(
        &env.namesrv,
        &[
            "group",
            "reset-offset",
            "--group",
            &group,
            "--topic",
            &topic,
            "--timestamp",
            &between.to_string(),
        ],
    )
    .await;
    let queues = reset["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 4, "2 queues on each broker: {reset}");
    let total: i64 = queues.iter().map(|q| q["offset"].as_i64().unwrap()).sum();
    assert_eq!(
        total, first as i64,
        "each queue reset to its first message of the second batch: {reset}"
    );

    // New messages wake the consumer's held pulls; its next pull of each
    // queue is sent back to the reset offset.
    for i in 0..third {
        producer
            .send(Message::new(&topic, format!("three-{i}")))
            .await
            .unwrap();
    }
    let reread = wait_for(Duration::from_secs(60), || async {
        (0..second).all(|i| times(&seen, &format!("two-{i}")) >= 2)
            && (0..third).all(|i| times(&seen, &format!("three-{i}")) >= 1)
    })
    .await;
    producer.shutdown().await;
    consumer.shutdown().await;
    reread.unwrap_or_else(|e| {
        panic!(
            "the second batch consumed again: {e}: {:?}",
            seen.lock().unwrap()
        )
    });
    let again: Vec<String> = (0..first)
        .map(|i| format!("one-{i}"))
        .filter(|b| times(&seen, b) > 1)
        .collect();
    assert!(
        again.is_empty(),
        "the first batch stays consumed: {again:?}"
    );
    println!("admin reset-offset: {second} messages read again from the reset time, none of the {first} before it");
}

/// The broker names of where `n` sends of `producer` landed, counted.
async fn send_n(producer: &Producer, topic: &str, n: usize, tag: &str) -> BTreeMap<String, usize> {
    let mut landed = BTreeMap::new();
    for i in 0..n {
        let sent = producer
            .send(Message::new(topic, format!("{tag}-{i}")))
            .await
            .unwrap_or_else(|e| panic!("send {tag}-{i}: {e}"));
        *landed.entry(sent.message_queue.broker_name).or_insert(0) += 1;
    }
    landed
}

/// The broker names of `producer`'s writable queues of `topic`.
async fn writable(producer: &Producer, topic: &str) -> Vec<String> {
    let mut names: Vec<String> = producer
        .publish_queues(topic)
        .await
        .map(|qs| qs.into_iter().map(|q| q.broker_name).collect())
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_drain_moves_sends_to_the_other_broker_while_pulls_go_on() {
    let Some(env) = E2eEnv::from_env("admin drain") else {
        return;
    };
    let a = OwnBroker::start(&env, "drain-a", &["brokerName=drain-a"]).unwrap();
    let ns = a.namesrv.clone();
    let b_sets = [
        "embeddedNamesrv=false".to_owned(),
        format!("namesrvAddr={ns}"),
        "brokerName=drain-b".to_owned(),
    ];
    let b_sets: Vec<&str> = b_sets.iter().map(String::as_str).collect();
    let b = OwnBroker::start(&env, "drain-b", &b_sets).unwrap();
    wait_for(Duration::from_secs(20), || async {
        run(&Cli::parse_from([
            "sluice-admin",
            "--namesrv",
            &ns,
            "cluster",
        ]))
        .await
        .is_ok_and(|c| c.contains("drain-a") && c.contains("drain-b"))
    })
    .await
    .expect("both brokers register in one cluster");
    let topic = unique("AdminDrain");
    let created = admin_json(
        &ns,
        &["topic", "create", "--topic", &topic, "--queues", "2"],
    )
    .await;
    assert_eq!(
        created["brokers"].as_array().map(Vec::len),
        Some(2),
        "{created}"
    );

    let producer = Producer::start(ProducerConfig {
        poll_name_server_interval: Duration::from_millis(100),
        ..ProducerConfig::with_namesrv(&ns)
    })
    .await
    .unwrap();
    wait_for(Duration::from_secs(40), || async {
        writable(&producer, &topic).await == ["drain-a", "drain-b"]
    })
    .await
    .expect("the route holds both brokers");
    let before = send_n(&producer, &topic, 16, "before").await;
    assert_eq!(before.len(), 2, "sends go to both brokers: {before:?}");
    let on_a = before["drain-a"];

    let drained = admin_json(&ns, &["broker", "drain", "--broker-name", "drain-a"]).await;
    assert_eq!(drained["brokers"][0]["addr"], a.addr.as_str(), "{drained}");
    assert_eq!(drained["brokerPermission"], 4, "{drained}");
    assert!(
        drained["nameServers"][0]["topics"].as_i64().unwrap() >= 1,
        "{drained}"
    );
    // The producer learns the route at its next refresh.
    wait_for(Duration::from_secs(20), || async {
        writable(&producer, &topic).await == ["drain-b"]
    })
    .await
    .expect("the producer's route loses the drained broker");
    let during = send_n(&producer, &topic, 16, "during").await;
    assert_eq!(during.keys().collect::<Vec<_>>(), ["drain-b"], "{during:?}");
    // The drained broker refuses a send sent to it anyway.
    let client = RemotingClient::new(ClientOptions::default());
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "admin-drain".into(),
        topic: topic.clone(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 2,
        queue_id: 0,
        born_timestamp: now_ms(),
        ..SendMessageRequestHeader::default()
    });
    let direct = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(b"direct".to_vec());
    let refused = client
        .invoke(&a.addr, direct, Duration::from_secs(5))
        .await
        .unwrap();
    client.close_all().await;
    assert_eq!(
        refused.response_code(),
        ResponseCode::NO_PERMISSION,
        "{:?}",
        refused.remark
    );

    // Pulls from the drained broker go on: what it stored is still read.
    let puller = PullConsumer::start(ConsumerConfig::new(&ns, unique("admin-drain-pull-")))
        .await
        .unwrap();
    let mut pulled = 0;
    for q in puller.fetch_queues(&topic).await.unwrap() {
        if q.broker_name == "drain-a" {
            pulled += puller.pull(&q, 0, 32).await.unwrap().messages.len();
        }
    }
    puller.shutdown().await;
    assert_eq!(
        pulled, on_a,
        "every message stored on the drained broker is pulled"
    );

    let undrained = admin_json(&ns, &["broker", "undrain", "--broker-name", "drain-a"]).await;
    assert_eq!(undrained["brokerPermission"], 6, "{undrained}");
    wait_for(Duration::from_secs(20), || async {
        writable(&producer, &topic).await == ["drain-a", "drain-b"]
    })
    .await
    .expect("the producer's route has the undrained broker again");
    let after = send_n(&producer, &topic, 16, "after").await;
    producer.shutdown().await;
    assert_eq!(after.len(), 2, "sends go to both brokers again: {after:?}");
    drop((a, b));
    println!("admin drain: before {before:?}, drained {during:?}, {pulled} pulled from the drained broker, after {after:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_why_busy_names_a_slow_sync_flush_with_its_figures() {
    let Some(env) = E2eEnv::from_env("admin why-busy") else {
        return;
    };
    // Every flush waits 3 s; sends wait for their flush at most 100 ms, so
    // a backlog past 100 MiB/s x 100 ms = 10 MiB cannot be flushed in time.
    let broker = OwnBroker::start(
        &env,
        "slow-flush",
        &[
            "flushDiskType=SYNC_FLUSH",
            "faultFlushDelayMills=3000",
            "syncFlushTimeout=100",
            // Nothing else refuses the sends.
            "earlyAdmissionEnable=false",
            "adaptiveAdmissionEnable=false",
        ],
    )
    .unwrap();
    let body = vec![b'f'; 256 * 1024];
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    // 64 sends of 256 KiB at once: 16 MiB written while the flush sleeps.
    let sends: Vec<_> = (0..64)
        .map(|i| {
            let (client, addr, body) = (Arc::clone(&client), broker.addr.clone(), body.clone());
            tokio::spawn(async move {
                let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
                    producer_group: "admin-why-busy".into(),
                    topic: "SlowFlush".into(),
                    default_topic: "TBW102".into(),
                    default_topic_queue_nums: 4,
                    queue_id: i % 4,
                    born_timestamp: now_ms(),
                    ..SendMessageRequestHeader::default()
                });
                let req =
                    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
                        .with_body(body);
                client
                    .invoke(&addr, req, Duration::from_secs(10))
                    .await
                    .map(|r| r.response_code())
            })
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    let look = loop {
        let look = admin_json(&broker.namesrv, &["why-busy", "--broker", &broker.addr]).await;
        let flush = look["brokers"][0]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["mechanism"] == "flush")
            .unwrap_or_else(|| panic!("no flush finding: {look}"))
            .clone();
        if flush["state"] != "OK" {
            break look;
        }
        assert!(
            Instant::now() < deadline,
            "why-busy never saw the flush backlog: {look}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let mut codes = BTreeMap::new();
    for s in sends {
        *codes.entry(s.await.unwrap().unwrap().0).or_insert(0) += 1;
    }
    client.close_all().await;
    let d = &look["brokers"][0];
    let flush = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mechanism"] == "flush")
        .unwrap();
    let limit = 10.0 * 1024.0 * 1024.0;
    assert_eq!(flush["limit"].as_f64(), Some(limit), "{flush}");
    assert!(flush["value"].as_f64().unwrap() >= limit / 2.0, "{flush}");
    assert_eq!(flush["answer"], "FLUSH_DISK_TIMEOUT", "{flush}");
    let figures = flush["figures"].as_str().unwrap();
    assert!(figures.contains(" unflushed of 10.0 MiB ("), "{figures}");
    let why = flush["why"].as_str().unwrap();
    assert!(
        why.starts_with("Under SYNC_FLUSH, ") && why.contains("syncFlushTimeout (100 ms)"),
        "{why}"
    );
    // The verdict names it (nothing else refuses or is close to it).
    let verdict = d["verdict"].as_str().unwrap();
    assert!(verdict.contains("flush backlog"), "{verdict}: {look}");
    assert!(
        codes.contains_key(&ResponseCode::FLUSH_DISK_TIMEOUT.0),
        "sends really waited past syncFlushTimeout: {codes:?}"
    );
    println!(
        "admin why-busy: {} {figures}; send answers {codes:?}",
        flush["state"]
    );
    drop(broker);
}

/// The unique keys of the messages of a `message get --json` answer.
fn unique_keys(got: &Value) -> BTreeSet<String> {
    got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["uniqueKey"].as_str().unwrap().to_owned())
        .collect()
}

/// Polls `message get --key key --topic topic` (at most `limit`) until it
/// finds `n` messages.
async fn found_by_key(namesrv: &str, topic: &str, key: &str, n: usize, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let got =
            try_admin_json(namesrv, &["message", "get", "--key", key, "--topic", topic]).await;
        match &got {
            Ok(v) if v["messages"].as_array().map(Vec::len) == Some(n) => return v.clone(),
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "message get --key {key} never found {n} messages of {topic}: {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_message_get_finds_messages_by_key_after_a_kill_and_restart() {
    let Some(env) = E2eEnv::from_env("admin message get by key") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "query-key", &[]).unwrap();
    let ns = broker.namesrv.clone();
    let topic = unique("AdminQuery");
    wait_for(Duration::from_secs(20), || async {
        try_admin_json(
            &ns,
            &["topic", "create", "--topic", &topic, "--queues", "2"],
        )
        .await
        .is_ok()
    })
    .await
    .expect("the broker registers and takes the topic");
    let producer = Producer::start(ProducerConfig::with_namesrv(&ns))
        .await
        .unwrap();
    let mut sent = Vec::new();
    for (body, keys) in [
        ("a and b", &["a", "b"][..]),
        ("only a", &["a"][..]),
        ("only c", &["c"][..]),
    ] {
        let mut m = Message::new(&topic, body);
        for k in keys {
            m = m.with_key(*k);
        }
        sent.push(producer.send(m).await.unwrap().msg_id);
    }
    producer.shutdown().await;
    let (ab, a, c) = (sent[0].clone(), sent[1].clone(), sent[2].clone());

    let before = found_by_key(&ns, &topic, "a", 2, Duration::from_secs(20)).await;
    assert_eq!(
        unique_keys(&before),
        BTreeSet::from([ab.clone(), a.clone()])
    );

    // kill -9: what the IndexFiles had not written is rebuilt from the
    // CommitLog when the broker starts again on the same store.
    broker.kill_and_restart().unwrap();
    let after = found_by_key(&ns, &topic, "a", 2, Duration::from_secs(30)).await;
    assert_eq!(
        unique_keys(&after),
        BTreeSet::from([ab.clone(), a.clone()]),
        "{after}"
    );
    assert!(
        after["messages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|m| m["brokerAddr"] == broker.addr.as_str() && m["topic"] == topic.as_str()),
        "{after}"
    );
    let by_b = found_by_key(&ns, &topic, "b", 1, Duration::from_secs(5)).await;
    assert_eq!(unique_keys(&by_b), BTreeSet::from([ab.clone()]), "{by_b}");
    assert_eq!(by_b["messages"][0]["body"], "a and b");
    let by_id = try_admin_json(&ns, &["message", "get", "--id", &c, "--topic", &topic])
        .await
        .unwrap_or_else(|e| panic!("message get --id {c}: {e}"));
    assert_eq!(unique_keys(&by_id), BTreeSet::from([c.clone()]), "{by_id}");
    assert_eq!(by_id["messages"][0]["body"], "only c");
    let missing = try_admin_json(&ns, &["message", "get", "--key", "nope", "--topic", &topic])
        .await
        .unwrap_err();
    let text = missing.to_string();
    assert!(
        matches!(missing, AdminError::NoMessage { .. })
            && text.contains("\"nope\"")
            && text.contains(&topic),
        "{text}"
    );
    drop(broker);
    println!("admin message get: key a found {{{ab}, {a}}}, unique key {c} found, after kill -9 and restart");
}
