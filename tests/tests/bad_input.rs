//! Hostile bytes on fresh raw TCP connections to a broker and to the name
//! server: each connection is closed by the server, and the server keeps
//! serving everyone else.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use e2e_tests::{unique, E2eEnv};
use producer_client::{Message, Producer, ProducerConfig};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    time::timeout,
};

/// How long a server may take to close a connection it should refuse.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

/// `len` pseudo-random bytes (xorshift, fixed seed: reproducible).
fn random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed.to_le_bytes()[0]
        })
        .collect()
}

/// A frame whose header is `header` as JSON-serialized bytes.
fn frame_with_header(header: &[u8]) -> Vec<u8> {
    let header_len = u32::try_from(header.len()).unwrap();
    let mut out = Vec::new();
    out.extend_from_slice(&(4 + header_len).to_be_bytes());
    out.extend_from_slice(&header_len.to_be_bytes()); // serialize type 0: JSON
    out.extend_from_slice(header);
    out
}

/// The hostile inputs: name, bytes, and whether the client then half-closes
/// its side (needed where only end-of-stream can reveal the frame is bad).
fn cases() -> Vec<(&'static str, Vec<u8>, bool)> {
    let mut truncated = frame_with_header(br#"{"code":10,"flag":0,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":0}"#);
    truncated.truncate(truncated.len() / 2);
    let mut oversized = 0x7fff_fff0_u32.to_be_bytes().to_vec();
    oversized.extend_from_slice(&[0; 64]);
    vec![
        (
            "random bytes",
            random_bytes(4096, 0x9e37_79b9_7f4a_7c15),
            true,
        ),
        ("truncated frame", truncated, true),
        ("oversized length prefix", oversized, false),
        (
            "invalid JSON header",
            frame_with_header(b"{\"code\": 10, \"opaque\": [unterminated"),
            false,
        ),
    ]
}

/// Sends `bytes` on a fresh connection and waits until the server closes it
/// (end of stream or reset), ignoring any error response before that.
async fn expect_closed(addr: &str, what: &str, bytes: &[u8], half_close: bool) {
    let mut s = TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connect to {addr} for {what}: {e}"));
    // The server may close before all bytes are written; that is fine.
    let _ = s.write_all(bytes).await;
    if half_close {
        let _ = s.shutdown().await;
    }
    let mut buf = vec![0u8; 64 * 1024];
    let closed = timeout(CLOSE_LIMIT, async {
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(
        closed.is_ok(),
        "{addr} kept the connection open {CLOSE_LIMIT:?} after {what}"
    );
    println!("{addr}: closed after {what}");
}

/// Mechanism: the remoting codec's frame checks (length prefix bounds,
/// header length, header JSON decoding) and end-of-stream handling close
/// only the offending connection; the broker's and the name server's accept
/// loops and an already-connected producer are unaffected, and both servers
/// still answer (route lookup, then a send) afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bytes_close_only_their_connection() {
    let Some(env) = E2eEnv::from_env("bad input") else {
        return;
    };
    let topic = unique("E2eBadInput");
    env.create_topic(&topic, 2).await.unwrap();
    let producer = Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
        .await
        .unwrap();
    producer
        .send(Message::new(topic.as_str(), "before"))
        .await
        .expect("send before the hostile input");

    for addr in [&env.brokers[0], &env.namesrv] {
        for (what, bytes, half_close) in cases() {
            expect_closed(addr, what, &bytes, half_close).await;
        }
    }

    // The connected producer still works...
    for i in 0..10 {
        producer
            .send(Message::new(topic.as_str(), format!("after {i}")))
            .await
            .expect("send on the existing producer after the hostile input");
    }
    producer.shutdown().await;
    // ...and so does a new one, which needs the name server for its route.
    let fresh = Producer::start(ProducerConfig::with_namesrv(&env.namesrv))
        .await
        .unwrap();
    let r = fresh
        .send(Message::new(topic.as_str(), "fresh"))
        .await
        .expect("send from a new producer after the hostile input");
    println!("send after hostile input stored on {}", r.broker_addr);
    fresh.shutdown().await;
}
