//! How long appends hold the put lock while the cleaner deletes files,
//! against the same appends with no deletion: two phases on one machine,
//! each a writer appending 1 KiB messages as fast as it can for a while.
//! In the second, files expire at once and the cleaner deletes every
//! settled file each pass. Prints the put-lock hold percentiles of both
//! phases and their ratio.
//!
//! `cargo run --release -p store --example retention_lock -- [seconds per phase]`

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use hdrhistogram::Histogram;
use metrics::{Counter, Gauge, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use store::{MessageStore, MessageToStore, StoreConfig};

/// The put-lock hold times in ns, for the phase running now.
#[derive(Clone)]
struct Holds(Arc<Mutex<Histogram<u64>>>);

impl HistogramFn for Holds {
    fn record(&self, seconds: f64) {
        let ns = (seconds * 1e9) as u64;
        let _ = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(ns.max(1));
    }
}

/// Sends the store's put-lock histogram to `Holds`, ignoring everything else.
struct LockRecorder(Holds);

impl Recorder for LockRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, _: &Key, _: &Metadata<'_>) -> Counter {
        Counter::noop()
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> metrics::Histogram {
        if key.name() == "sluice_store_put_lock_hold_seconds" {
            metrics::Histogram::from_arc(Arc::new(self.0.clone()))
        } else {
            metrics::Histogram::noop()
        }
    }
}

fn message(i: u64) -> MessageToStore {
    MessageToStore {
        topic: "Retained".into(),
        queue_id: (i % 4) as i32,
        flag: 0,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: "127.0.0.1:40000".parse().expect("address"),
        store_host: "127.0.0.1:10911".parse().expect("address"),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: bytes::Bytes::from(vec![b'x'; 1024]),
        properties: String::new(),
    }
}

struct Phase {
    appends: u64,
    deleted: u64,
    p50: u64,
    p99: u64,
    p999: u64,
    max: u64,
}

fn run(holds: &Holds, deleting: bool, seconds: u64) -> anyhow::Result<Phase> {
    let dir = tempfile::tempdir()?;
    let store = MessageStore::open(StoreConfig {
        mapped_file_size_commit_log: 8 * 1024 * 1024,
        file_reserved_time: if deleting { 0 } else { 72 },
        // An hour that never comes: only the manual trigger starts passes.
        delete_when: ((chrono_hour() + 12) % 24).to_string(),
        clean_resource_interval: if deleting { 50 } else { 3_600_000 },
        delete_commit_log_files_interval: 0,
        delete_consume_queue_files_interval: 0,
        ..StoreConfig::with_root(dir.path())
    })?;
    holds
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .reset();
    let end = Instant::now() + Duration::from_secs(seconds);
    let mut appends = 0u64;
    let mut next_trigger = Instant::now();
    while Instant::now() < end {
        for _ in 0..1000 {
            store.put_message(&message(appends))?;
            appends += 1;
        }
        if deleting && Instant::now() >= next_trigger {
            store.trigger_delete_files();
            next_trigger = Instant::now() + Duration::from_millis(500);
        }
    }
    let h = holds
        .0
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let deleted = store.retention_stats().commit_log_files_deleted;
    store.shutdown();
    Ok(Phase {
        appends,
        deleted,
        p50: h.value_at_quantile(0.5),
        p99: h.value_at_quantile(0.99),
        p999: h.value_at_quantile(0.999),
        max: h.max(),
    })
}

fn chrono_hour() -> u32 {
    use chrono::Timelike;
    chrono::Local::now().hour()
}

fn main() -> anyhow::Result<()> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10);
    let holds = Holds(Arc::new(Mutex::new(Histogram::new(3)?)));
    metrics::set_global_recorder(LockRecorder(holds.clone()))
        .map_err(|e| anyhow::anyhow!("install the recorder: {e}"))?;
    println!("phase      appends  files deleted  hold p50 ns  p99 ns  p99.9 ns  max ns");
    let mut phases = Vec::new();
    for deleting in [false, true] {
        let p = run(&holds, deleting, seconds)?;
        println!(
            "{:<9} {:>9} {:>14} {:>12} {:>7} {:>9} {:>7}",
            if deleting { "deleting" } else { "quiet" },
            p.appends,
            p.deleted,
            p.p50,
            p.p99,
            p.p999,
            p.max
        );
        phases.push(p);
    }
    println!(
        "put-lock hold p99 deleting/quiet: {:.2}",
        phases[1].p99 as f64 / phases[0].p99.max(1) as f64
    );
    Ok(())
}
