//! Helpers shared by the store's integration tests.
#![allow(dead_code, clippy::unwrap_used)]

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Command,
};

use bytes::Bytes;
use store::{MessageToStore, StoreConfig};

/// A small-file configuration rooted at `dir`.
pub fn config(dir: &Path) -> StoreConfig {
    StoreConfig {
        mapped_file_size_commit_log: 256 * 1024,
        mapped_file_size_consume_queue: 100 * 20,
        max_message_size: 64 * 1024,
        flush_interval_consume_queue: 50,
        max_hash_slot_num: 1000,
        max_index_num: 4000,
        // The tests decide what retention deletes, not how full the shared
        // disk happens to be: past diskMaxUsedSpaceRatio expired files would
        // go at any hour, past diskSpaceCleanForciblyRatio unexpired ones.
        disk_max_used_space_ratio: 95,
        clean_file_forcibly_enable: false,
        ..StoreConfig::with_root(dir)
    }
}

/// The body of message `i`: its index followed by a repeating pattern.
pub fn body(i: u64, len: usize) -> Bytes {
    let mut b = i.to_be_bytes().to_vec();
    b.extend((0..len.saturating_sub(8)).map(|j| (i as usize + j) as u8));
    Bytes::from(b)
}

/// Message `i` for a topic queue.
pub fn message(topic: &str, queue_id: i32, i: u64, len: usize) -> MessageToStore {
    MessageToStore {
        topic: topic.into(),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000 + i as i64,
        born_host: addr("127.0.0.1:40000"),
        store_host: addr("127.0.0.1:10911"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body(i, len),
        properties: format!("TAGS\u{1}tag{}\u{2}UNIQ_KEY\u{1}{i}\u{2}", i % 3),
    }
}

pub fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// Decodes a stored record's body.
pub fn record_body(record: &[u8]) -> Vec<u8> {
    match message_model::record::check(record, true) {
        message_model::record::Record::Message(m) => m.body.to_vec(),
        other => panic!("not a valid record: {other:?}"),
    }
}

/// Checks that `crash_writer`'s message `ack.index` is found once by its
/// unique key (the index `i` as text) in `topic`, at its offset.
pub fn assert_found_by_unique_key(store: &store::MessageStore, topic: &str, ack: &WriterAck) {
    let found = store.query_message(topic, &ack.index.to_string(), 32, 0, i64::MAX);
    let offsets: Vec<i64> = found
        .messages
        .iter()
        .map(|r| match message_model::record::check(r, false) {
            message_model::record::Record::Message(m) => m.physical_offset,
            other => panic!("not a valid record: {other:?}"),
        })
        .collect();
    assert_eq!(
        offsets,
        [ack.physical_offset as i64],
        "message {} by its unique key",
        ack.index
    );
}

/// A tmpfs of a given size mounted for a test (needs root), unmounted on drop.
pub struct Tmpfs(pub PathBuf);

impl Tmpfs {
    /// Mounts a tmpfs of `size` (`5m`, `64m`) on `dir`.
    pub fn mount(dir: &Path, size: &str) -> Self {
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success(), "mount tmpfs on {}", dir.display());
        Self(dir.to_path_buf())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// One append the `crash_writer` tool printed as acknowledged, and when
/// this process read the line.
#[derive(Debug, Clone, Copy)]
pub struct WriterAck {
    pub index: u64,
    pub queue_id: i32,
    pub queue_offset: i64,
    pub physical_offset: u64,
    pub at: std::time::Instant,
}

/// The body of `crash_writer`'s message `i`.
pub fn writer_body(i: u64) -> Vec<u8> {
    let len = 200 + (i % 13) as usize * 61;
    let mut b = i.to_be_bytes().to_vec();
    b.extend((0..len).map(|j| (i as usize * 7 + j) as u8));
    b
}

/// Runs `crash_writer` on `dir` (with the environment `envs`) until it is
/// killed with SIGKILL `run_for` after its first acknowledgement; returns
/// its acknowledgements and the instant of the kill.
pub fn write_and_kill(
    dir: &Path,
    topic: &str,
    flush: &str,
    run_for: std::time::Duration,
    envs: &[(&str, &Path)],
) -> (Vec<WriterAck>, std::time::Instant) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_crash_writer"))
        .args([dir.to_str().unwrap(), topic, flush, "5000000"])
        .envs(envs.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let at = std::time::Instant::now();
            let f: Vec<&str> = line.split(' ').collect();
            if f.len() == 4 {
                let _ = tx.send(WriterAck {
                    index: f[0].parse().unwrap(),
                    queue_id: f[1].parse().unwrap(),
                    queue_offset: f[2].parse().unwrap(),
                    physical_offset: f[3].parse().unwrap(),
                    at,
                });
            }
        }
    });
    let first = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("writer acknowledged nothing");
    std::thread::sleep(run_for);
    child.kill().unwrap();
    let killed = std::time::Instant::now();
    assert!(!child.wait().unwrap().success(), "writer was killed");
    reader.join().unwrap();
    let mut acks = vec![first];
    acks.extend(rx.try_iter());
    (acks, killed)
}
