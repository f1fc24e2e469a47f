//! Store benchmark program: append throughput of 1 KiB messages with one and
//! four writers under ASYNC_FLUSH (with and without the transient store
//! pool), SYNC_FLUSH with 64 writers and the messages each fsync covered, and
//! the time to recover 1 GiB of CommitLog after a crash.
//!
//! `cargo bench -p store --bench append` runs the full measurement (several
//! GiB of writes under the target dir, or `SLUICE_BENCH_DIR`);
//! `SLUICE_BENCH_ONLY=text` picks the scenarios whose name contains `text`.
//! Run without `--bench` (as `cargo test` does), it makes a tiny smoke run of
//! each scenario.

use std::{
    net::SocketAddr,
    path::Path,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

use bytes::Bytes;
use store::{flush_calls, FlushDiskType, MessageStore, MessageToStore, StoreConfig};

struct Scale {
    seconds: f64,
    file_size: usize,
    recovery_bytes: u64,
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let scale = if full {
        Scale {
            seconds: 3.0,
            file_size: 1 << 30,
            recovery_bytes: 1 << 30,
        }
    } else {
        Scale {
            seconds: 0.05,
            file_size: 4 << 20,
            recovery_bytes: 8 << 20,
        }
    };
    let base = std::env::var_os("SLUICE_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_TARGET_TMPDIR")).join("store-bench"));
    println!(
        "store benchmark, 1 KiB messages, files of {} MiB, dir {}",
        scale.file_size >> 20,
        base.display()
    );
    println!(
        "{:<44} {:>12} {:>10} {:>14}",
        "scenario", "msgs/s", "MB/s", "msgs/fsync"
    );
    // Pre-touched runs append a fixed count that stays inside the first
    // file, which (like the pre-allocated second one) is fully faulted in
    // before the clock starts; the others run for a fixed time and fault
    // pages in as they go.
    let in_first_file = (scale.file_size as u64 * 8 / 10) / 1200;
    for (name, writers, pool, warm) in [
        ("async, 1 writer, pre-touched", 1, false, true),
        ("async, 4 writers, pre-touched", 4, false, true),
        ("async, 1 writer, not pre-touched", 1, false, false),
        ("async, 4 writers, not pre-touched", 4, false, false),
        ("async, 1 writer, transient pool", 1, true, false),
        ("async, 4 writers, transient pool", 4, true, false),
    ] {
        let cfg = StoreConfig {
            transient_store_pool_enable: pool,
            transient_store_pool_size: 3,
            warm_maped_file_enable: warm,
            ..config(&base, &scale)
        };
        run(name, cfg, writers, &scale, warm.then_some(in_first_file));
    }
    let sync = StoreConfig {
        flush_disk_type: FlushDiskType::SyncFlush,
        ..config(&base, &scale)
    };
    run("sync, 64 writers", sync, 64, &scale, None);
    recovery(&base, &scale);
}

fn config(base: &Path, scale: &Scale) -> StoreConfig {
    let dir = base.join("run");
    let _ = std::fs::remove_dir_all(&dir);
    StoreConfig {
        mapped_file_size_commit_log: scale.file_size,
        max_message_size: 64 * 1024,
        ..StoreConfig::with_root(dir)
    }
}

fn message(i: u64, body: &Bytes) -> MessageToStore {
    let host = SocketAddr::from(([127, 0, 0, 1], 10911));
    MessageToStore {
        topic: "BenchTopic".into(),
        queue_id: (i % 8) as i32,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.clone(),
        properties: "TAGS\u{1}TagA\u{2}UNIQ_KEY\u{1}7F0000010001000000000000000000AB\u{2}".into(),
    }
}

/// Appends with `writers` threads for the scale's time, or until `count`
/// messages are stored when given, and prints the rates.
fn run(name: &str, cfg: StoreConfig, writers: usize, scale: &Scale, limit: Option<u64>) {
    if !selected(name) {
        return;
    }
    let store = Arc::new(MessageStore::open(cfg).expect("open store"));
    let body = Bytes::from(vec![0x5Au8; 1024]);
    // The first append makes the first file; give the pre-allocation
    // thread time to make (and, if asked, fault in) the second.
    store.put_message(&message(0, &body)).expect("first append");
    let next = store
        .config()
        .commit_log_dir()
        .join(format!("{:020}", scale.file_size));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !next.exists() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(if scale.seconds > 1.0 {
        2500
    } else {
        10
    }));
    let quota = limit.map(|c| c / writers as u64);
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    let fsyncs_before = flush_calls();
    let started = Instant::now();
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (store, stop, count, bytes, body) = (
                Arc::clone(&store),
                Arc::clone(&stop),
                Arc::clone(&count),
                Arc::clone(&bytes),
                body.clone(),
            );
            thread::spawn(move || {
                let msg = message(w as u64, &body);
                let (mut n, mut b) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) && quota.is_none_or(|q| n < q) {
                    let out = store.put_message(&msg).expect("append");
                    n += 1;
                    b += out.append.wrote_bytes as u64;
                }
                count.fetch_add(n, Ordering::Relaxed);
                bytes.fetch_add(b, Ordering::Relaxed);
            })
        })
        .collect();
    if limit.is_none() {
        thread::sleep(Duration::from_secs_f64(scale.seconds));
        stop.store(true, Ordering::Relaxed);
    }
    for h in handles {
        h.join().expect("writer");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let fsyncs = flush_calls() - fsyncs_before;
    let n = count.load(Ordering::Relaxed);
    let per_fsync = if fsyncs > 0 {
        format!("{:.1}", n as f64 / fsyncs as f64)
    } else {
        "-".into()
    };
    println!(
        "{:<44} {:>12.0} {:>10.1} {:>14}",
        name,
        n as f64 / elapsed,
        bytes.load(Ordering::Relaxed) as f64 / elapsed / 1e6,
        per_fsync
    );
    drop(store);
}

/// `SLUICE_BENCH_ONLY=text` runs only the scenarios whose name contains it.
fn selected(name: &str) -> bool {
    std::env::var("SLUICE_BENCH_ONLY").map_or(true, |only| name.contains(&only))
}

fn recovery(base: &Path, scale: &Scale) {
    if !selected("recovery") {
        return;
    }
    let cfg = config(base, scale);
    let cfg = StoreConfig {
        mapped_file_size_commit_log: (scale.recovery_bytes as usize).max(scale.file_size),
        ..cfg
    };
    let store = MessageStore::open(cfg.clone()).expect("open store");
    let body = Bytes::from(vec![0xA5u8; 1024]);
    let mut i = 0u64;
    while store.max_physical_offset() + 2048 < scale.recovery_bytes {
        store.put_message(&message(i, &body)).expect("append");
        i += 1;
    }
    let written = store.max_physical_offset();
    while store.dispatch_behind_bytes() > 0 {
        thread::sleep(Duration::from_millis(1));
    }
    store.abandon();
    let started = Instant::now();
    let store = MessageStore::open(cfg.clone()).expect("recover");
    let abnormal = started.elapsed();
    assert_eq!(store.max_physical_offset(), written, "everything recovered");
    store.shutdown();
    drop(store);
    let started = Instant::now();
    let store = MessageStore::open(cfg).expect("reopen");
    let normal = started.elapsed();
    drop(store);
    println!(
        "recovery of {:.0} MiB ({i} messages): after a crash {:.3} s, after a clean shutdown {:.3} s",
        written as f64 / (1 << 20) as f64,
        abnormal.as_secs_f64(),
        normal.as_secs_f64()
    );
}
