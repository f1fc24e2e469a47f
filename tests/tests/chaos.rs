//! The chaos suite, run by `cargo xtask chaos [--quick]`: real broker
//! processes pushed past their limits, one case per test, each printing one
//! line `chaos: <case> | <figure> | PASS` (or panicking with the figure).
//! Without `SLUICE_CHAOS_DIR` (as under `cargo test --workspace`) every
//! case prints that it did not run and returns.
//!
//! - `SLUICE_CHAOS_DIR`: the run's temporary directory.
//! - `SLUICE_CHAOS_BROKER_BIN`: the broker binary.
//! - `SLUICE_CHAOS_BENCH_BIN`: the load tool (`sluice-bench`), which
//!   measures other clients from a process of its own.
//! - `SLUICE_CHAOS_QUICK=1`: the short form CI runs.
#![allow(clippy::unwrap_used)]

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use e2e_tests::{unique, E2eEnv, OwnBroker};
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{
        CreateTopicRequestHeader, GetMaxOffsetRequestHeader, OffsetResponseHeader,
        PullMessageRequestHeader, TopicFilterType, UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};
use tokio::io::AsyncWriteExt;

/// The suite's settings, or `None` when it runs outside `cargo xtask chaos`.
fn chaos_env(case: &str) -> Option<E2eEnv> {
    let Ok(dir) = std::env::var("SLUICE_CHAOS_DIR") else {
        println!("chaos: {case} | not run (run `cargo xtask chaos`)");
        return None;
    };
    Some(E2eEnv {
        namesrv: String::new(),
        brokers: [String::new(), String::new()],
        grpc: None,
        broker_bin: std::env::var("SLUICE_CHAOS_BROKER_BIN")
            .ok()
            .map(PathBuf::from),
        dir: Some(PathBuf::from(dir)),
        quick: std::env::var("SLUICE_CHAOS_QUICK").is_ok_and(|v| v == "1"),
        cpp_python: None,
    })
}

/// A tmpfs mounted for one case, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `mib` MiB on `dir`; `None` when that is not
    /// allowed (not root).
    fn mount(dir: &Path, mib: u64) -> Option<Self> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Self(dir.to_path_buf()))
    }

    /// Used fraction, as `df` counts it.
    fn used(&self) -> f64 {
        let out = Command::new("df")
            .args(["--output=used,avail", "-B1"])
            .arg(&self.0)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let numbers: Vec<f64> = text
            .lines()
            .nth(1)
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        match numbers[..] {
            [used, avail] if used + avail > 0.0 => used / (used + avail),
            _ => panic!("df {}: {text}", self.0.display()),
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

async fn admin(client: &RemotingClient, addr: &str, req: RemotingCommand) -> RemotingCommand {
    client
        .invoke(addr, req, Duration::from_secs(5))
        .await
        .unwrap()
}

/// The end offset (message count) of one queue.
async fn max_offset(client: &RemotingClient, addr: &str, topic: &str, queue_id: i32) -> i64 {
    let req = RemotingCommand::request_with_header(
        RequestCode::GET_MAX_OFFSET,
        &GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            ..GetMaxOffsetRequestHeader::default()
        },
    );
    admin(client, addr, req)
        .await
        .decode_header::<OffsetResponseHeader>()
        .unwrap()
        .offset
}

/// Retention on a small filesystem: writing 2.5 times its size through the
/// broker keeps disk use under the warning ratio, the last stretch of sends
/// all succeed, nothing acknowledged is missing from the queues, and a
/// consumer group that never consumed is warned about before the first
/// file goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_on_a_small_disk() {
    let Some(env) = chaos_env("retention") else {
        return;
    };
    let (mib, file_mib, last_window) = if env.quick {
        (128u64, 8u64, Duration::from_secs(5))
    } else {
        (512, 16, Duration::from_secs(60))
    };
    let dir = env.dir.clone().unwrap().join(unique("retention-"));
    // The store on the small disk, the broker's log beside it.
    let Some(disk) = Tmpfs::mount(&dir.join("store"), mib) else {
        println!("chaos: retention | needs root to mount a {mib} MiB tmpfs | SKIP");
        return;
    };
    let file_size = (file_mib << 20).to_string();
    let broker = OwnBroker::start_at(
        &env,
        dir.clone(),
        &[
            &format!("mappedFileSizeCommitLog={file_size}"),
            "mappedFileSizeConsumeQueue=600000",
            "cleanResourceInterval=1000",
            "deleteCommitLogFilesInterval=0",
            "deleteConsumeQueueFilesInterval=0",
        ],
    )
    .unwrap();
    let topic = unique("Retained");
    let queues = 4;
    let client = RemotingClient::new(ClientOptions::default());
    let created = admin(
        &client,
        &broker.addr,
        RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.clone(),
                default_topic: AUTO_CREATE_TOPIC.into(),
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: 6,
                topic_filter_type: TopicFilterType::SingleTag,
                ..CreateTopicRequestHeader::default()
            },
        ),
    )
    .await;
    assert_eq!(created.response_code(), ResponseCode::SUCCESS);
    for queue_id in 0..queues {
        let committed = admin(
            &client,
            &broker.addr,
            RemotingCommand::request_with_header(
                RequestCode::UPDATE_CONSUMER_OFFSET,
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: "chaos-lagging".into(),
                    topic: topic.clone(),
                    queue_id,
                    commit_offset: 0,
                    ..UpdateConsumerOffsetRequestHeader::default()
                },
            ),
        )
        .await;
        assert_eq!(committed.response_code(), ResponseCode::SUCCESS);
    }

    let mut config = ProducerConfig::with_namesrv(&broker.namesrv);
    config.retry_times_when_send_failed = 0;
    let producer = Arc::new(Producer::start(config).await.unwrap());
    let body = vec![b'r'; 4096];
    let target = mib * (1 << 20) * 5 / 2;
    let written = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    // When each refusal happened, for the last-window check.
    let refusals: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(if env.quick { 120 } else { 600 });
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (producer, topic, body) = (Arc::clone(&producer), topic.clone(), body.clone());
        let (written, acked, refusals) = (
            Arc::clone(&written),
            Arc::clone(&acked),
            Arc::clone(&refusals),
        );
        tasks.push(tokio::spawn(async move {
            while written.load(Ordering::Relaxed) < target && Instant::now() < deadline {
                match producer
                    .send(Message::new(topic.as_str(), body.clone()))
                    .await
                {
                    Ok(_) => {
                        written.fetch_add(body.len() as u64, Ordering::Relaxed);
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        refusals
                            .lock()
                            .unwrap()
                            .push((Instant::now(), e.to_string()));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    let mut max_used = 0.0f64;
    while tasks.iter().any(|t| !t.is_finished()) {
        max_used = max_used.max(disk.used());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let finished = Instant::now();
    let took = finished - started;
    producer.shutdown().await;
    // One more pass settles the disk.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let end_used = disk.used();

    let total_written = written.load(Ordering::Relaxed);
    let refusals = refusals.lock().unwrap().clone();
    let late = refusals
        .iter()
        .filter(|(at, _)| finished.duration_since(*at) < last_window)
        .count();
    let mut in_queues = 0i64;
    for queue_id in 0..queues {
        in_queues += max_offset(&client, &broker.addr, &topic, queue_id).await;
    }
    let log = std::fs::read_to_string(dir.join("broker.log")).unwrap();
    let warned = log
        .lines()
        .position(|l| l.contains("has not consumed yet") && l.contains("chaos-lagging"));
    let first_delete = log
        .lines()
        .position(|l| l.contains("deleted CommitLog file"));
    let deleted = log
        .lines()
        .filter(|l| l.contains("deleted CommitLog file"))
        .count();
    let figure = format!(
        "{mib} MiB disk, {:.1}x written in {:.0} s ({} files deleted): disk use max {:.2} end {:.2}, \
         {} refusals ({late} in the last {} s), {} acknowledged, {in_queues} in the queues, \
         lagging group warned first: {}",
        total_written as f64 / (mib << 20) as f64,
        took.as_secs_f64(),
        deleted,
        max_used,
        end_used,
        refusals.len(),
        last_window.as_secs(),
        acked.load(Ordering::Relaxed),
        matches!((warned, first_delete), (Some(w), Some(d)) if w < d),
    );
    let pass = total_written >= target
        && end_used < 0.90
        && max_used < 0.97
        && late == 0
        && in_queues >= acked.load(Ordering::Relaxed) as i64
        && matches!((warned, first_delete), (Some(w), Some(d)) if w < d);
    println!(
        "chaos: retention | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}; refusals: {:?}", refusals.last());
    client.close_all().await;
    drop(broker);
}

/// Resident memory of a process in bytes.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
        .unwrap()
        * 1024
}

/// CPU time (user and system) a process has used so far.
fn cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses): utime and
    // stime are the 12th and 13th of them, in clock ticks (100 per second).
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .map(|f| f.parse().unwrap())
        .collect();
    Duration::from_millis((fields[0] + fields[1]) * 10)
}

/// The p99 send latency (ms) of one producer with one request in flight,
/// 1 KiB messages for `seconds`, measured by the load tool in a process of
/// its own.
fn other_producer_p99(addr: &str, topic: &str, seconds: u64) -> f64 {
    let bin = std::env::var("SLUICE_CHAOS_BENCH_BIN").expect("SLUICE_CHAOS_BENCH_BIN");
    let out = Command::new(bin)
        .args([
            "produce", "--broker", addr, "--topic", topic, "--queues", "1",
        ])
        .args(["--in-flight", "1", "--size", "1024", "--json"])
        .args(["--duration", &seconds.to_string()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("load tool output: {text}"));
    assert_eq!(report["failed_total"], 0, "{report}");
    report["latency_ms"]["p99"].as_f64().unwrap()
}

/// A slow reader: one connection writes pull requests whose answers (32
/// messages of 1 KiB each) it never reads. The broker stops reading that
/// connection once its unread answers pass `writeBufferHighWaterMark`, so
/// its memory grows by less than that budget plus a small constant, and,
/// once the pulls it did read are served, another producer's p99 send
/// latency while the reader sits there stays within 2x of its p99 before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_is_held_to_its_budget() {
    let Some(env) = chaos_env("slow reader") else {
        return;
    };
    let pulls: i32 = if env.quick { 5_000 } else { 20_000 };
    let budget: u64 = 64 << 20;
    let slack: u64 = 64 << 20;
    let broker = OwnBroker::start(&env, "slow-reader", &[]).unwrap();
    let mut config = ProducerConfig::with_namesrv(&broker.namesrv);
    config.retry_times_when_send_failed = 0;
    let producer = Producer::start(config).await.unwrap();
    let topic = unique("SlowRead");
    for _ in 0..2000 {
        producer
            .send_to_queue(
                Message::new(topic.as_str(), vec![b's'; 1024]),
                &producer.publish_queues(&topic).await.unwrap()[0],
            )
            .await
            .unwrap();
    }
    let other = unique("Other");
    let seconds = if env.quick { 2 } else { 5 };
    let cpu0 = cpu(broker.pid());
    let t0 = Instant::now();
    let before = other_producer_p99(&broker.addr, &other, seconds);
    let cpu_before = (cpu(broker.pid()) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let base_rss = rss(broker.pid());

    // The reader: every pull asks for queue 0 from offset 0.
    let mut frames = bytes::BytesMut::new();
    for i in 0..pulls {
        let mut req = RemotingCommand::request_with_header(
            RequestCode::PULL_MESSAGE,
            &PullMessageRequestHeader {
                consumer_group: "chaos-slow".into(),
                topic: topic.clone(),
                queue_id: 0,
                queue_offset: 0,
                max_msg_nums: 32,
                subscription: Some("*".into()),
                ..PullMessageRequestHeader::default()
            },
        );
        req.opaque = i + 1;
        remoting_protocol::codec::encode_frame(&req, &mut frames, 16 << 20).unwrap();
    }
    let mut reader = tokio::net::TcpStream::connect(&broker.addr).await.unwrap();
    // Write until the broker stops reading (a write makes no progress for 1 s).
    let mut written = 0usize;
    while written < frames.len() {
        let end = (written + 65536).min(frames.len());
        match tokio::time::timeout(Duration::from_secs(1), reader.write(&frames[written..end]))
            .await
        {
            Ok(Ok(n)) => written += n,
            Ok(Err(e)) => panic!("slow reader write: {e}"),
            Err(_) => break,
        }
    }
    // The broker serves the pulls it read (their answers wait unread), then
    // sits with the reader parked: measure the other producer from there.
    let client = RemotingClient::new(ClientOptions::default());
    let drain_started = Instant::now();
    loop {
        let queued = e2e_tests::runtime_figure(&client, &broker.addr, "pullThreadPoolQueueSize")
            .await
            .unwrap();
        if queued == 0 {
            break;
        }
        assert!(
            drain_started.elapsed() < Duration::from_secs(120),
            "{queued} pulls still queued after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained_in = drain_started.elapsed();
    client.close_all().await;
    let parked_rss = rss(broker.pid());
    let cpu0 = cpu(broker.pid());
    let t0 = Instant::now();
    let during = other_producer_p99(&broker.addr, &other, seconds);
    let cpu_during = (cpu(broker.pid()) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let peak_rss = parked_rss.max(rss(broker.pid()));
    drop(reader);
    producer.shutdown().await;

    let growth = peak_rss.saturating_sub(base_rss);
    let ratio = during / before;
    let figure = format!(
        "{pulls} unread pulls ({} of {} request bytes taken before the broker stopped reading): \
         pulls served in {:.1} s; broker RSS {} -> {} MiB (+{} MiB, budget {} + {} MiB); \
         other producer p99 {:.2} ms before, {:.2} ms with the reader parked ({ratio:.2}x); \
         broker CPU {cpu_before:.2} then {cpu_during:.2} cores",
        written,
        frames.len(),
        drained_in.as_secs_f64(),
        base_rss >> 20,
        peak_rss >> 20,
        growth >> 20,
        budget >> 20,
        slack >> 20,
        before,
        during,
    );
    let pass = growth < budget + slack && ratio <= 2.0;
    println!(
        "chaos: slow reader | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}

/// A topic-creation race with kill -9: eight clients create topics as fast
/// as the broker answers; halfway the broker is killed with SIGKILL and
/// started again on the same store. Passes when `topics.json` parses and
/// every topic whose creation was acknowledged before the kill is in it,
/// and the broker started again on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_topics_survive_kill_9_during_creation() {
    let Some(env) = chaos_env("topic race") else {
        return;
    };
    let n = if env.quick { 400 } else { 4000 };
    let mut broker = OwnBroker::start(&env, "topic-race", &[]).unwrap();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (addr, acked, stop) = (broker.addr.clone(), Arc::clone(&acked), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::new(ClientOptions::default());
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let topic = format!("Race-{t}-{i}");
                let req = RemotingCommand::request_with_header(
                    RequestCode::UPDATE_AND_CREATE_TOPIC,
                    &CreateTopicRequestHeader {
                        topic: topic.clone(),
                        default_topic: AUTO_CREATE_TOPIC.into(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: 6,
                        topic_filter_type: TopicFilterType::SingleTag,
                        ..CreateTopicRequestHeader::default()
                    },
                );
                // After the kill, requests fail: that ends this client.
                match client.invoke(&addr, req, Duration::from_secs(5)).await {
                    Ok(r) if r.response_code() == ResponseCode::SUCCESS => {
                        acked.lock().unwrap().push(topic);
                    }
                    _ => break,
                }
            }
            client.close_all().await;
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.lock().unwrap().len() < n / 2 {
        assert!(Instant::now() < deadline, "topic creations too slow");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    broker.kill_and_restart().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let path = broker.dir.join("store").join("config").join("topics.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let table: Result<remoting_protocol::body::TopicConfigSerializeWrapper, _> =
        remoting_protocol::body::from_json(text.as_bytes());
    let parsed = table.is_ok();
    let saved = table.map(|t| t.topic_config_table).unwrap_or_default();
    let missing: Vec<&String> = acked.iter().filter(|t| !saved.contains_key(*t)).collect();
    let running = broker.is_running();
    let figure = format!(
        "{} topic creations acknowledged before kill -9; topics.json parses: {parsed}, holds {} \
         topics, {} acknowledged missing; broker running after the restart: {running}",
        acked.len(),
        saved.len(),
        missing.len(),
    );
    let pass = parsed && missing.is_empty() && running;
    println!(
        "chaos: topic race | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(
        pass,
        "{figure}; missing {:?}",
        &missing[..missing.len().min(5)]
    );
}

/// One send of `body` to `queue_id` of `topic` with `properties`.
fn send_with(topic: &str, queue_id: i32, body: Vec<u8>, properties: &str) -> RemotingCommand {
    let header = remoting_protocol::header::SendMessageRequestHeaderV2::from(
        remoting_protocol::header::SendMessageRequestHeader {
            producer_group: "chaos-hostile".into(),
            topic: topic.into(),
            default_topic: AUTO_CREATE_TOPIC.into(),
            default_topic_queue_nums: 4,
            queue_id,
            born_timestamp: 1_700_000_000_000,
            properties: Some(properties.into()),
            ..remoting_protocol::header::SendMessageRequestHeader::default()
        },
    );
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header).with_body(body)
}

/// One pull of queue 0 of `topic` from `offset` for `max` messages.
fn pull_from(topic: &str, offset: i64, max: i32) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: "chaos-hostile".into(),
            topic: topic.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: max,
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    )
}

/// Hostile requests, each answered with its own refusal while the broker
/// keeps serving: out-of-range queue ids and offsets, a body past
/// `maxMessageSize`, properties past 32 KiB, a pull for two billion
/// messages, and a frame whose header claims more bytes than the frame
/// holds (that connection is closed). Passes when every answer is the
/// expected one and an ordinary send succeeds afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_their_refusals_and_harm_nothing_else() {
    let Some(env) = chaos_env("hostile payloads") else {
        return;
    };
    let broker = OwnBroker::start(&env, "hostile", &["maxMessageSize=1048576"]).unwrap();
    let client = RemotingClient::new(ClientOptions::default());
    let topic = unique("Hostile");
    let ok = admin(
        &client,
        &broker.addr,
        send_with(&topic, 0, b"first".to_vec(), ""),
    )
    .await;
    assert_eq!(ok.response_code(), ResponseCode::SUCCESS, "{:?}", ok.remark);
    let cases: Vec<(&str, RemotingCommand, ResponseCode)> = vec![
        (
            "queue id 9999",
            send_with(&topic, 9999, b"x".to_vec(), ""),
            ResponseCode::SYSTEM_ERROR,
        ),
        (
            "body of maxMessageSize + 1",
            send_with(&topic, 0, vec![b'b'; (1 << 20) + 1], ""),
            ResponseCode::MESSAGE_ILLEGAL,
        ),
        (
            "40 KiB of properties",
            send_with(
                &topic,
                0,
                b"x".to_vec(),
                &format!("K\u{1}{}\u{2}", "v".repeat(40 * 1024)),
            ),
            ResponseCode::MESSAGE_ILLEGAL,
        ),
        (
            "pull at offset i64::MAX",
            pull_from(&topic, i64::MAX, 32),
            ResponseCode::PULL_OFFSET_MOVED,
        ),
        (
            "pull of i32::MAX messages",
            pull_from(&topic, 0, i32::MAX),
            ResponseCode::SUCCESS,
        ),
    ];
    let mut lines = Vec::new();
    let mut pass = true;
    for (name, req, want) in cases {
        let got = admin(&client, &broker.addr, req).await;
        let good = got.response_code() == want;
        pass &= good;
        lines.push(format!(
            "{name}: {:?}{}",
            got.response_code(),
            if good { "" } else { " (unexpected)" }
        ));
    }
    // A frame whose header length exceeds the frame: that connection closes.
    let mut raw = tokio::net::TcpStream::connect(&broker.addr).await.unwrap();
    let mut frame = Vec::new();
    frame.extend_from_slice(&100i32.to_be_bytes());
    frame.extend_from_slice(&1_000_000i32.to_be_bytes());
    frame.extend_from_slice(&[b'{'; 96]);
    raw.write_all(&frame).await.unwrap();
    let mut buf = [0u8; 64];
    let closed = matches!(
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio::io::AsyncReadExt::read(&mut raw, &mut buf)
        )
        .await,
        Ok(Ok(0) | Err(_))
    );
    pass &= closed;
    lines.push(format!(
        "header longer than its frame: connection closed {closed}"
    ));
    let after = admin(
        &client,
        &broker.addr,
        send_with(&topic, 0, b"after".to_vec(), ""),
    )
    .await;
    let served = after.response_code() == ResponseCode::SUCCESS;
    pass &= served;
    lines.push(format!(
        "ordinary send afterwards: {:?}",
        after.response_code()
    ));
    client.close_all().await;
    let figure = lines.join("; ");
    println!(
        "chaos: hostile payloads | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}

/// What the senders of the SIGTERM case saw.
#[derive(Debug, Default)]
struct Outcomes {
    /// Acknowledged sends per queue id.
    acked: [i64; 4],
    /// Other answers, by code.
    refused: std::collections::BTreeMap<i32, u64>,
    /// Sends that ended with the connection closed or refused.
    closed: u64,
    /// Sends that got no answer within the client's timeout.
    timed_out: u64,
}

/// SIGTERM under SYNC_FLUSH load: sixteen clients send as fast as the
/// broker answers; the broker is sent SIGTERM. Passes when it exits 0
/// within 15 s, no send hangs (each gets an answer or a closed
/// connection), it starts again on the same ports at once, and every
/// acknowledged message is there after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_sync_flush_answers_and_keeps_what_it_acknowledged() {
    let Some(env) = chaos_env("SIGTERM under SYNC_FLUSH") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "sigterm", &["flushDiskType=SYNC_FLUSH"]).unwrap();
    let topic = unique("Term");
    let outcomes: Arc<Mutex<Outcomes>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (addr, topic, outcomes) = (broker.addr.clone(), topic.clone(), Arc::clone(&outcomes));
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::new(ClientOptions::default());
            for i in 0u64.. {
                let queue = ((t + i) % 4) as usize;
                let req = send_with(&topic, queue as i32, vec![b't'; 512], "");
                let answer = client.invoke(&addr, req, Duration::from_secs(10)).await;
                let mut o = outcomes.lock().unwrap();
                match answer {
                    Ok(r) if r.response_code() == ResponseCode::SUCCESS => o.acked[queue] += 1,
                    Ok(r) => *o.refused.entry(r.code).or_default() += 1,
                    Err(remoting_net::ClientError::Timeout { .. }) => {
                        o.timed_out += 1;
                        break;
                    }
                    Err(_) => {
                        o.closed += 1;
                        break;
                    }
                }
            }
            client.close_all().await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(if env.quick { 2 } else { 10 })).await;
    let asked = Instant::now();
    let status = broker.terminate(Duration::from_secs(15)).await.unwrap();
    let took = asked.elapsed();
    for t in tasks {
        t.await.unwrap();
    }
    let restarted = broker.restart().is_ok();
    let o = std::mem::take(&mut *outcomes.lock().unwrap());
    let client = RemotingClient::new(ClientOptions::default());
    let mut lost = 0i64;
    if restarted {
        for (queue_id, acked) in o.acked.iter().enumerate() {
            let max = max_offset(&client, &broker.addr, &topic, queue_id as i32).await;
            lost += (acked - max).max(0);
        }
    }
    client.close_all().await;
    let exited_ok = status.is_some_and(|s| s.success());
    let figure = format!(
        "{} sends acknowledged, other answers by code {:?}, {} ended by the closed connection, \
         {} hung; exit {:?} after {:.1} s; restarted on the same ports: {restarted}; \
         acknowledged but missing after the restart: {lost}",
        o.acked.iter().sum::<i64>(),
        o.refused,
        o.closed,
        o.timed_out,
        status.map(|s| s.to_string()),
        took.as_secs_f64(),
    );
    let pass = exited_ok && o.timed_out == 0 && restarted && lost == 0;
    println!(
        "chaos: sigterm | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}
