//! Feeds arbitrary bytes to the remoting frame decoder, as one buffer and in
//! two pieces, and re-encodes every frame it accepts. The decoder must never
//! panic, and whatever it accepts must encode and decode to the same command.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use remoting_protocol::{decode_frame, encode_frame, RemotingCommand};

const MAX: usize = 1 << 20;

fn check_round_trip(cmd: &RemotingCommand) {
    let mut out = BytesMut::new();
    if encode_frame(cmd, &mut out, MAX).is_ok() {
        let again = decode_frame(&mut out, MAX).expect("re-encoded frame decodes");
        assert_eq!(again.as_ref(), Some(cmd));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut src = BytesMut::from(data);
    while let Ok(Some(cmd)) = decode_frame(&mut src, MAX) {
        check_round_trip(&cmd);
    }
    if let Some((&split, rest)) = data.split_first() {
        let at = usize::from(split).min(rest.len());
        let mut src = BytesMut::from(&rest[..at]);
        let _ = decode_frame(&mut src, MAX);
        src.extend_from_slice(&rest[at..]);
        while let Ok(Some(cmd)) = decode_frame(&mut src, MAX) {
            check_round_trip(&cmd);
        }
    }
});
