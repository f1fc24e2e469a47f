//! Admission cost on the hot path: one push and one pop of the same task,
//! with plain capacity admission, with early admission, and as the broker
//! admits a send by default (a share per topic, adaptive and early
//! admission), on an otherwise empty queue and behind 1000 queued tasks.
//!
//! `cargo bench -p flow-control --bench admit`; criterion reports ns per
//! round trip.

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use flow_control::RequestQueue;

fn round_trip(c: &mut Criterion) {
    let mut group = c.benchmark_group("admit");
    group.throughput(Throughput::Elements(1));
    for backlog in [0u64, 1000] {
        let q = RequestQueue::new("send", 10_000);
        q.set_workers(4);
        q.record_service_time(Duration::from_micros(20));
        let now = Instant::now();
        for i in 0..backlog {
            q.try_push(i, now).ok();
        }
        group.bench_function(format!("try_push+pop/backlog={backlog}"), |b| {
            b.iter(|| {
                q.try_push(black_box(7), now).ok();
                black_box(q.pop(Duration::ZERO))
            })
        });
        q.set_sojourn_control(Some(flow_control::SojournControl::default()));
        group.bench_function(format!("adaptive+early+share+pop/backlog={backlog}"), |b| {
            b.iter(|| {
                let admission = flow_control::Admission {
                    share: "BenchTopic",
                    bytes: 1200,
                    max_wait: Some(Duration::from_millis(200)),
                };
                q.push(black_box(7), now, admission).ok();
                black_box(q.pop(Duration::ZERO))
            })
        });
        q.set_sojourn_control(None);
        group.bench_function(format!("early_admission+pop/backlog={backlog}"), |b| {
            b.iter(|| {
                q.try_push_with_admission(black_box(7), now, Duration::from_millis(200), true)
                    .ok();
                black_box(q.pop(Duration::ZERO))
            })
        });
    }
    group.finish();
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
