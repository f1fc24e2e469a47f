//! Feeds arbitrary first bytes of a connection to the TLS/plain sniffing of
//! each port mode, and what a plain connection sends on to the frame
//! decoder. Nothing may panic; a connection opening with a TLS handshake is
//! never served plain, an enforcing port serves nothing plain, and a
//! disabled one never starts TLS.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use remoting_net::{sniff, Sniffed, TlsMode};
use remoting_protocol::decode_frame;

const MAX: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, stream)) = data.split_first() else {
        return;
    };
    let Some(&first) = stream.first() else {
        return;
    };
    let mode = match mode % 3 {
        0 => TlsMode::Disabled,
        1 => TlsMode::Permissive,
        _ => TlsMode::Enforcing,
    };
    let outcome = sniff(mode, first);
    if first == 0x16 {
        assert_ne!(outcome, Sniffed::Plain);
    }
    match mode {
        TlsMode::Enforcing => assert!(matches!(outcome, Sniffed::Tls | Sniffed::RefusedPlain)),
        TlsMode::Disabled => assert!(matches!(outcome, Sniffed::Plain | Sniffed::RefusedTls)),
        TlsMode::Permissive => assert!(matches!(outcome, Sniffed::Plain | Sniffed::Tls)),
    }
    if outcome == Sniffed::Plain {
        let mut src = BytesMut::from(stream);
        while let Ok(Some(_)) = decode_frame(&mut src, MAX) {}
    }
});
