//! Property tests of the frame codec: every command round-trips through both
//! header encodings, and no byte string makes the decoder panic.

use bytes::BytesMut;
use proptest::prelude::*;
use remoting_protocol::{
    decode_frame, encode_frame, ExtFields, LanguageCode, RemotingCommand, SerializeType,
};

const MAX: usize = 64 * 1024;

fn ext_fields() -> impl Strategy<Value = ExtFields> {
    proptest::collection::vec(("[a-zA-Z_][a-zA-Z0-9_]{0,15}", "\\PC{1,40}"), 0..12).prop_map(
        |pairs| {
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect()
        },
    )
}

fn command(serialize_type: SerializeType) -> impl Strategy<Value = RemotingCommand> {
    // The binary header carries code and version as i16; JSON carries i32.
    let (code, version) = match serialize_type {
        SerializeType::Json => (any::<i32>().boxed(), any::<i32>().boxed()),
        SerializeType::RocketMq => (
            any::<i16>().prop_map(i32::from).boxed(),
            any::<i16>().prop_map(i32::from).boxed(),
        ),
    };
    (
        code,
        0u8..14,
        version,
        any::<i32>(),
        any::<i32>(),
        proptest::option::of("\\PC{1,60}"),
        ext_fields(),
        proptest::collection::vec(any::<u8>(), 0..2048),
    )
        .prop_map(
            move |(code, lang, version, opaque, flag, remark, ext_fields, body)| RemotingCommand {
                code,
                language: LanguageCode::from_code(lang),
                version,
                opaque,
                flag,
                remark,
                ext_fields,
                body: body.into(),
                serialize_type,
            },
        )
}

fn any_command() -> impl Strategy<Value = RemotingCommand> {
    prop_oneof![
        command(SerializeType::Json),
        command(SerializeType::RocketMq)
    ]
}

/// Decodes frames from `bytes` until the decoder asks for more or fails.
fn decode_all(bytes: &[u8], max: usize) -> usize {
    let mut src = BytesMut::from(bytes);
    let mut count = 0;
    while let Ok(Some(_)) = decode_frame(&mut src, max) {
        count += 1;
    }
    count
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_command_round_trips(cmd in any_command()) {
        let mut buf = BytesMut::new();
        encode_frame(&cmd, &mut buf, MAX).unwrap();
        let encoded_len = buf.len();
        let back = decode_frame(&mut buf, MAX).unwrap().unwrap();
        prop_assert_eq!(back, cmd);
        prop_assert!(buf.is_empty());
        prop_assert!(encoded_len <= MAX);
    }

    #[test]
    fn streams_of_commands_split_anywhere_decode_in_order(
        cmds in proptest::collection::vec(any_command(), 1..5),
        split in any::<prop::sample::Index>(),
    ) {
        let mut wire = BytesMut::new();
        for c in &cmds {
            encode_frame(c, &mut wire, MAX).unwrap();
        }
        let at = split.index(wire.len() + 1);
        let mut src = BytesMut::from(&wire[..at]);
        let mut got = Vec::new();
        while let Some(c) = decode_frame(&mut src, MAX).unwrap() {
            got.push(c);
        }
        src.extend_from_slice(&wire[at..]);
        while let Some(c) = decode_frame(&mut src, MAX).unwrap() {
            got.push(c);
        }
        prop_assert_eq!(got, cmds);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        decode_all(&bytes, MAX);
    }

    #[test]
    fn corrupted_frames_never_panic(
        cmd in any_command(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut buf = BytesMut::new();
        encode_frame(&cmd, &mut buf, MAX).unwrap();
        let mut bytes = buf.to_vec();
        for (i, v) in flips {
            let i = i.index(bytes.len());
            bytes[i] ^= v;
        }
        let end = cut.index(bytes.len() + 1);
        decode_all(&bytes[..end], MAX);
    }

    #[test]
    fn frames_with_arbitrary_headers_never_panic(
        ty in 0u8..3,
        header in proptest::collection::vec(any::<u8>(), 0..256),
        body in proptest::collection::vec(any::<u8>(), 0..32),
    ) {
        let mut frame = Vec::new();
        frame.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
        frame.push(ty);
        frame.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
        frame.extend_from_slice(&header);
        frame.extend_from_slice(&body);
        decode_all(&frame, MAX);
    }
}
