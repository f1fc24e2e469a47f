//! Golden frames: bytes laid out by hand from RocketMQ's frame layout decode to
//! the expected commands and encode back to exactly the same bytes.

use bytes::{BufMut, BytesMut};
use remoting_protocol::{
    decode_frame, encode_frame, ExtFields, LanguageCode, RemotingCodec, RemotingCommand,
    SerializeType, DEFAULT_MAX_FRAME_LEN,
};
use tokio_util::codec::{Decoder, Encoder};

/// Lays out `length | type<<24 | headerLen | header | body` by hand.
fn frame(serialize_type: u8, header: &[u8], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.push(serialize_type);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(header);
    out.extend_from_slice(body);
    out
}

/// Lays out a binary ("ROCKETMQ") header by hand.
fn binary_header(
    code: i16,
    language: u8,
    version: i16,
    opaque: i32,
    flag: i32,
    remark: &str,
    ext: &[(&str, &str)],
) -> Vec<u8> {
    let mut entries = Vec::new();
    for (k, v) in ext {
        entries.put_i16(k.len() as i16);
        entries.put_slice(k.as_bytes());
        entries.put_i32(v.len() as i32);
        entries.put_slice(v.as_bytes());
    }
    let mut h = Vec::new();
    h.put_i16(code);
    h.put_u8(language);
    h.put_i16(version);
    h.put_i32(opaque);
    h.put_i32(flag);
    h.put_i32(remark.len() as i32);
    h.put_slice(remark.as_bytes());
    h.put_i32(entries.len() as i32);
    h.extend_from_slice(&entries);
    h
}

fn ext(pairs: &[(&str, &str)]) -> ExtFields {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

fn command(
    code: i32,
    opaque: i32,
    flag: i32,
    remark: Option<&str>,
    fields: &[(&str, &str)],
    body: &[u8],
    serialize_type: SerializeType,
) -> RemotingCommand {
    RemotingCommand {
        code,
        language: LanguageCode::Java,
        version: 479,
        opaque,
        flag,
        remark: remark.map(str::to_owned),
        ext_fields: ext(fields),
        body: body.to_vec().into(),
        serialize_type,
    }
}

/// Decodes `bytes` to `expected` and encodes `expected` back to `bytes`.
fn assert_golden(bytes: &[u8], expected: &RemotingCommand) {
    let mut src = BytesMut::from(bytes);
    let decoded = decode_frame(&mut src, DEFAULT_MAX_FRAME_LEN)
        .expect("golden frame decodes")
        .expect("golden frame is complete");
    assert_eq!(&decoded, expected);
    assert!(src.is_empty(), "decoder left {} bytes", src.len());
    let mut out = BytesMut::new();
    encode_frame(expected, &mut out, DEFAULT_MAX_FRAME_LEN).expect("golden command encodes");
    assert_eq!(&out[..], bytes);
}

#[test]
fn json_request_without_body_matches_the_spec_example() {
    let header = br#"{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let bytes = frame(0, header, b"");
    assert_eq!(
        &bytes[..8],
        &[0x00, 0x00, 0x00, 0x7F, 0x00, 0x00, 0x00, 0x7B]
    );
    let expected = command(105, 1, 0, None, &[("topic", "T")], b"", SerializeType::Json);
    assert_golden(&bytes, &expected);
}

#[test]
fn json_send_request_with_body() {
    let header = br#"{"code":310,"extFields":{"a":"PG","b":"TopicTest","c":"TBW102","d":"4","e":"0","f":"0","g":"1700000000000","h":"0","i":"TAGS\u0001TagA\u0002"},"flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let bytes = frame(0, header, b"Hello RocketMQ");
    let expected = command(
        310,
        42,
        0,
        None,
        &[
            ("a", "PG"),
            ("b", "TopicTest"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "0"),
            ("f", "0"),
            ("g", "1700000000000"),
            ("h", "0"),
            ("i", "TAGS\u{1}TagA\u{2}"),
        ],
        b"Hello RocketMQ",
        SerializeType::Json,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn json_busy_response_with_remark() {
    let header = br#"{"code":2,"flag":1,"language":"JAVA","opaque":42,"remark":"[OVERLOAD]system busy, start flow control for a while","serializeTypeCurrentRPC":"JSON","version":479}"#;
    let bytes = frame(0, header, b"");
    let expected = command(
        2,
        42,
        1,
        Some("[OVERLOAD]system busy, start flow control for a while"),
        &[],
        b"",
        SerializeType::Json,
    );
    assert_golden(&bytes, &expected);
    assert!(expected.is_response());
}

#[test]
fn json_response_with_header_and_body() {
    let header = br#"{"code":0,"extFields":{"suggestWhichBrokerId":"0","nextBeginOffset":"3","minOffset":"0","maxOffset":"3"},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}"#;
    let body = [0xDAu8, 0xA3, 0x20, 0xA7, 0x00, 0xFF];
    let bytes = frame(0, header, &body);
    let expected = command(
        0,
        7,
        1,
        None,
        &[
            ("suggestWhichBrokerId", "0"),
            ("nextBeginOffset", "3"),
            ("minOffset", "0"),
            ("maxOffset", "3"),
        ],
        &body,
        SerializeType::Json,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn binary_request_without_body_matches_the_spec_example() {
    let header = [
        0x00, 0x69, 0x00, 0x01, 0xDF, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x00, 0x05, 0x74, 0x6F, 0x70, 0x69, 0x63, 0x00, 0x00,
        0x00, 0x01, 0x54,
    ];
    assert_eq!(
        header.to_vec(),
        binary_header(105, 0, 479, 1, 0, "", &[("topic", "T")])
    );
    let bytes = frame(1, &header, b"");
    assert_eq!(
        &bytes[..8],
        &[0x00, 0x00, 0x00, 0x25, 0x01, 0x00, 0x00, 0x21]
    );
    let expected = command(
        105,
        1,
        0,
        None,
        &[("topic", "T")],
        b"",
        SerializeType::RocketMq,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn binary_send_request_with_body() {
    let fields = [
        ("a", "PG"),
        ("b", "TopicTest"),
        ("e", "-1"),
        ("g", "1700000000000"),
    ];
    let header = binary_header(310, 0, 479, 9, 0, "", &fields);
    let bytes = frame(1, &header, b"payload");
    let expected = command(
        310,
        9,
        0,
        None,
        &fields,
        b"payload",
        SerializeType::RocketMq,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn binary_oneway_request() {
    let fields = [("consumerGroup", "G"), ("commitOffset", "12")];
    let header = binary_header(15, 0, 479, 3, 2, "", &fields);
    let bytes = frame(1, &header, b"");
    let expected = command(15, 3, 2, None, &fields, b"", SerializeType::RocketMq);
    assert_golden(&bytes, &expected);
    assert!(expected.is_oneway());
}

#[test]
fn binary_busy_response_with_remark_and_fields() {
    let remark = "[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: 205ms, size of queue: 17";
    let fields = [("retryAfterMs", "50")];
    let header = binary_header(2, 0, 479, 11, 1, remark, &fields);
    let bytes = frame(1, &header, b"");
    let expected = command(
        2,
        11,
        1,
        Some(remark),
        &fields,
        b"",
        SerializeType::RocketMq,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn binary_response_with_body() {
    let header = binary_header(0, 0, 479, 5, 1, "", &[]);
    let bytes = frame(1, &header, b"{\"table\":{}}");
    let expected = command(
        0,
        5,
        1,
        None,
        &[],
        b"{\"table\":{}}",
        SerializeType::RocketMq,
    );
    assert_golden(&bytes, &expected);
}

#[test]
fn response_is_encoded_in_the_request_encoding() {
    for ty in [SerializeType::Json, SerializeType::RocketMq] {
        let request = command(310, 77, 0, None, &[("a", "PG")], b"x", ty);
        let mut wire = BytesMut::new();
        encode_frame(&request, &mut wire, DEFAULT_MAX_FRAME_LEN).unwrap();
        let received = decode_frame(&mut wire, DEFAULT_MAX_FRAME_LEN)
            .unwrap()
            .unwrap();
        let response = received.response_to(remoting_protocol::ResponseCode::SUCCESS, None);
        let mut out = BytesMut::new();
        encode_frame(&response, &mut out, DEFAULT_MAX_FRAME_LEN).unwrap();
        assert_eq!(out[4], ty.code(), "response header type for {ty:?}");
        let back = decode_frame(&mut out, DEFAULT_MAX_FRAME_LEN)
            .unwrap()
            .unwrap();
        assert_eq!(back.opaque, 77);
        assert!(back.is_response());
    }
}

#[test]
fn codec_decodes_back_to_back_frames_from_one_buffer() {
    let a = command(105, 1, 0, None, &[("topic", "A")], b"", SerializeType::Json);
    let b = command(
        105,
        2,
        0,
        None,
        &[("topic", "B")],
        b"body",
        SerializeType::RocketMq,
    );
    let mut codec = RemotingCodec::new();
    let mut buf = BytesMut::new();
    codec.encode(&a, &mut buf).unwrap();
    codec.encode(b.clone(), &mut buf).unwrap();
    assert_eq!(codec.decode(&mut buf).unwrap(), Some(a));
    assert_eq!(codec.decode(&mut buf).unwrap(), Some(b));
    assert_eq!(codec.decode(&mut buf).unwrap(), None);
}

/// `GET_TIMER_CHECK_POINT`'s body: RocketMQ's `TimerCheckpoint` layout,
/// seven big-endian longs (read time, timer log flush position, timer queue
/// offset, master timer queue offset, then the data version's state
/// version, timestamp and counter); older writers stop after the fourth.
#[test]
fn timer_checkpoint_body_is_rocketmqs_layout() {
    use remoting_protocol::body::{DataVersion, TimerCheckpoint};
    let mut bytes = Vec::new();
    for v in [1_700_000_000_123_i64, 0, 41, 57, 3, 1_700_000_000_999, 9] {
        bytes.put_i64(v);
    }
    let cp = TimerCheckpoint::decode(&bytes).unwrap();
    assert_eq!(
        cp,
        TimerCheckpoint {
            last_read_time_ms: 1_700_000_000_123,
            last_timer_log_flush_pos: 0,
            last_timer_queue_offset: 41,
            master_timer_queue_offset: 57,
            data_version: DataVersion {
                state_version: 3,
                timestamp: 1_700_000_000_999,
                counter: 9,
            },
        }
    );
    assert_eq!(cp.encode(), bytes);
    let short = TimerCheckpoint::decode(&bytes[..32]).unwrap();
    assert_eq!(short.master_timer_queue_offset, 57);
    assert_eq!(short.data_version, DataVersion::default());
    let err = TimerCheckpoint::decode(&bytes[..40]).unwrap_err();
    assert!(err.contains("not 40"), "{err}");
}
