//! Encode and decode cost of a `SEND_MESSAGE_V2` request with a 1 KiB body,
//! with the JSON header and with the binary header.

use bytes::BytesMut;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use remoting_protocol::{
    decode_frame, encode_frame,
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, SerializeType, DEFAULT_MAX_FRAME_LEN,
};
use std::hint::black_box;

fn send_request(serialize_type: SerializeType) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "bench-producer-group".into(),
        topic: "BenchTopic".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 3,
        sys_flag: 0,
        born_timestamp: 1_796_091_865_000,
        flag: 0,
        properties: Some(
            "UNIQ_KEY\u{1}7F00000100002A9F0000000000001234\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}"
                .into(),
        ),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        batch: Some(false),
        broker_name: Some("broker-a".into()),
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(vec![0xA5u8; 1024])
        .with_serialize_type(serialize_type)
}

fn bench_codec(c: &mut Criterion) {
    for (name, ty) in [
        ("json", SerializeType::Json),
        ("binary", SerializeType::RocketMq),
    ] {
        let cmd = send_request(ty);
        let mut frame = BytesMut::new();
        encode_frame(&cmd, &mut frame, DEFAULT_MAX_FRAME_LEN).expect("encode");
        let frame = frame.freeze();

        let mut group = c.benchmark_group(format!("send_message_v2_1k/{name}"));
        group.throughput(Throughput::Bytes(frame.len() as u64));
        let mut out = BytesMut::with_capacity(4096);
        group.bench_function("encode", |b| {
            b.iter(|| {
                out.clear();
                encode_frame(black_box(&cmd), &mut out, DEFAULT_MAX_FRAME_LEN).expect("encode");
                black_box(out.len())
            })
        });
        group.bench_function("decode", |b| {
            b.iter(|| {
                let mut src = BytesMut::from(&frame[..]);
                black_box(decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN).expect("decode"))
            })
        });
        group.finish();
    }
}

criterion_group!(benches, bench_codec);
criterion_main!(benches);
