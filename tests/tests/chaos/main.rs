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
        GetMaxOffsetRequestHeader, OffsetResponseHeader, PullMessageRequestHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode, AUTO_CREATE_TOPIC,
};
use tokio::io::AsyncWriteExt;

mod abuse;
mod controllers;
mod disk_full;
mod failover;
mod hostile;
mod kill;
mod netns;
mod overload;
mod partition;
mod power_loss;
mod replication;
mod retention;
mod senders;
mod slow_reader;

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

    /// Free bytes.
    fn free(&self) -> u64 {
        self.df()[1] as u64
    }

    /// Size in bytes.
    fn total(&self) -> u64 {
        let [used, avail] = self.df();
        (used + avail) as u64
    }

    /// Used fraction, as `df` counts it.
    fn used(&self) -> f64 {
        let [used, avail] = self.df();
        used / (used + avail).max(1.0)
    }

    /// Used and available bytes, as `df` counts them.
    fn df(&self) -> [f64; 2] {
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
            [used, avail] if used + avail > 0.0 => [used, avail],
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

/// Creates `topic` with `queues` read and write queues.
async fn create_topic(client: &RemotingClient, addr: &str, topic: &str, queues: i32) {
    let created = admin(client, addr, e2e_tests::create_topic_request(topic, queues)).await;
    assert_eq!(
        created.response_code(),
        ResponseCode::SUCCESS,
        "create {topic}"
    );
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

/// Resident memory of a process in bytes.
fn rss(pid: u32) -> u64 {
    proc_status(pid, "VmRSS:")
}

/// A memory figure of `/proc/<pid>/status` (`VmRSS:`, `RssAnon:`), in bytes.
fn proc_status(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
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

/// Busy and total jiffies of all CPUs, from `/proc/stat`.
fn cpu_jiffies() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let fields: Vec<u64> = stat
        .lines()
        .next()
        .unwrap()
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait are the 4th and 5th.
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Waits (up to `limit`) for a half second in which the machine's CPUs
/// were at least 80 % idle; returns the idle fraction of the last one.
async fn quiet_machine(limit: Duration) -> f64 {
    let deadline = Instant::now() + limit;
    loop {
        let (busy0, total0) = cpu_jiffies();
        tokio::time::sleep(Duration::from_millis(500)).await;
        let (busy1, total1) = cpu_jiffies();
        let idle = 1.0 - (busy1 - busy0) as f64 / (total1 - total0).max(1) as f64;
        if idle >= 0.8 || Instant::now() >= deadline {
            return idle;
        }
    }
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
