//! A peer that sends requests but does not read its answers: the server's
//! queue for it stays within its byte budget (its requests are not read
//! meanwhile) and resumes when the peer reads; a peer that never reads is
//! disconnected after the write timeout.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use bytes::BytesMut;
use remoting_net::{serve, Connection, Handler, ServerOptions};
use remoting_protocol::{encode_frame, RemotingCommand, RequestCode, ResponseCode};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
    sync::Notify,
};
use tokio_util::sync::CancellationToken;

const ANSWER: usize = 64 * 1024;
const BUDGET: usize = 4 * 1024 * 1024;
const REQUESTS: usize = 1000;

/// Answers every request with a 64 KiB body; records the most bytes ever
/// queued for a connection, says when the budget is reached and when a
/// connection closed.
#[derive(Default)]
struct Big {
    handled: AtomicUsize,
    max_queued: AtomicUsize,
    full: Notify,
    closed: Notify,
}

impl Handler for Big {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        self.handled.fetch_add(1, Ordering::SeqCst);
        conn.send(
            request
                .response_to(ResponseCode::SUCCESS, None)
                .with_body(vec![7u8; ANSWER]),
        );
        let queued = conn.queued_bytes();
        self.max_queued.fetch_max(queued, Ordering::SeqCst);
        if queued >= BUDGET {
            self.full.notify_one();
        }
    }

    fn on_close(&self, _conn: &Arc<Connection>) {
        self.closed.notify_one();
    }
}

async fn start(write_timeout: Option<Duration>) -> (String, Arc<Big>, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handler = Arc::new(Big::default());
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        Arc::clone(&handler),
        ServerOptions {
            max_frame_len: 1 << 20,
            write_queue_bytes: BUDGET,
            write_timeout,
            ..ServerOptions::default()
        },
        shutdown.clone(),
    ));
    (addr, handler, shutdown)
}

async fn send_requests(stream: &mut TcpStream) {
    let mut frames = BytesMut::new();
    for _ in 0..REQUESTS {
        encode_frame(
            &RemotingCommand::request(RequestCode::HEART_BEAT),
            &mut frames,
            1 << 20,
        )
        .unwrap();
    }
    stream.write_all(&frames).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unread_connection_stays_within_its_budget_and_resumes_when_read() {
    let (addr, handler, shutdown) = start(None).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    send_requests(&mut stream).await;
    tokio::time::timeout(Duration::from_secs(20), handler.full.notified())
        .await
        .expect("the budget was never reached");
    let handled_when_full = handler.handled.load(Ordering::SeqCst);
    assert!(
        handled_when_full < REQUESTS,
        "every request was read although nothing was: {handled_when_full}"
    );
    // Now read everything: the server goes on reading requests as the
    // queue drains, and every answer arrives.
    let mut answers = 0;
    let mut buf = vec![0u8; 1 << 20];
    let mut pending = BytesMut::new();
    while answers < REQUESTS {
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .expect("answers stopped")
            .unwrap();
        assert!(n > 0, "connection closed after {answers} answers");
        pending.extend_from_slice(&buf[..n]);
        while let Some(cmd) = remoting_protocol::decode_frame(&mut pending, 1 << 20).unwrap() {
            assert_eq!(cmd.body.len(), ANSWER);
            answers += 1;
        }
    }
    let max = handler.max_queued.load(Ordering::SeqCst);
    println!(
        "budget {BUDGET} B: {handled_when_full} requests read before the reader paused; \
         most queued {max} B"
    );
    assert!(
        max <= BUDGET + ANSWER + 1024,
        "queued {max} B, over the budget by more than one answer"
    );
    shutdown.cancel();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_never_reads_is_disconnected_after_the_write_timeout() {
    let (addr, handler, shutdown) = start(Some(Duration::from_millis(300))).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    send_requests(&mut stream).await;
    tokio::time::timeout(Duration::from_secs(20), handler.closed.notified())
        .await
        .expect("the connection was not closed");
    shutdown.cancel();
}
