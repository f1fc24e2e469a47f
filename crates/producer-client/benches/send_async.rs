//! The client-side cost of one send, without the network: validating the
//! message, generating its `UNIQ_KEY`, encoding its properties, building the
//! `SEND_MESSAGE_V2` command and encoding it into a frame
//! ([`Producer::request_for`], behind the `bench-internals` feature that
//! this crate's own tests and benches turn on, plus `encode_frame`), as
//! every send does before writing to the socket.
//!
//! `cargo bench -p producer-client --bench send_async`

use std::{hint::black_box, time::Duration};

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use producer_client::{Message, MessageQueue, Producer, ProducerConfig};
use remoting_protocol::{encode_frame, DEFAULT_MAX_FRAME_LEN};

fn build_and_encode(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Runtime::new() else {
        eprintln!("no tokio runtime");
        return;
    };
    // No traffic: routes are fetched on first send, and none happens here.
    let Ok(producer) = runtime.block_on(Producer::start(ProducerConfig::with_namesrv(
        "127.0.0.1:9876",
    ))) else {
        eprintln!("producer did not start");
        return;
    };
    let queue = MessageQueue::new("BenchTopic", "broker-a", 1);
    let mut group = c.benchmark_group("send_request");
    for size in [128_usize, 1024] {
        let msg = Message::new("BenchTopic", vec![b'x'; size])
            .with_tags("TagA")
            .with_key("order-1");
        let mut frame = BytesMut::with_capacity(4096);
        group.throughput(Throughput::Elements(1));
        group.bench_function(format!("build_and_encode_{size}b"), |b| {
            b.iter(|| {
                frame.clear();
                if let Ok(request) = producer.request_for(black_box(&msg), &queue) {
                    let _ = encode_frame(&request, &mut frame, DEFAULT_MAX_FRAME_LEN);
                }
                black_box(frame.len())
            });
        });
    }
    group.finish();
    runtime.block_on(producer.shutdown());
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(3));
    targets = build_and_encode
}
criterion_main!(benches);
