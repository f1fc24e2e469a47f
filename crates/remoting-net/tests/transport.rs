//! The transport against real sockets on loopback: pipelined requests,
//! oneway requests, timeouts, closed connections and malformed frames.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use remoting_net::{
    client::ClientConnection, serve, ClientError, ClientOptions, Connection, Handler,
    RemotingClient, ServerOptions,
};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};
use tokio_util::sync::CancellationToken;

/// Echoes the body of HEART_BEAT requests, ignores GET_BROKER_CONFIG (so that
/// clients time out), closes the connection on UNREGISTER_CLIENT, and counts
/// oneway requests.
#[derive(Default)]
struct Echo {
    oneway: AtomicUsize,
    closed: AtomicUsize,
}

impl Handler for Echo {
    fn on_request(&self, conn: &Arc<Connection>, request: RemotingCommand) {
        if request.is_oneway() {
            self.oneway.fetch_add(1, Ordering::SeqCst);
            return;
        }
        match request.request_code() {
            RequestCode::GET_BROKER_CONFIG => {}
            RequestCode::UNREGISTER_CLIENT => conn.close(),
            _ => {
                let response = request
                    .response_to(ResponseCode::SUCCESS, None)
                    .with_body(request.body.clone());
                conn.send(response);
            }
        }
    }

    fn on_close(&self, _conn: &Arc<Connection>) {
        self.closed.fetch_add(1, Ordering::SeqCst);
    }
}

async fn start() -> (String, Arc<Echo>, CancellationToken) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let handler = Arc::new(Echo::default());
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        Arc::clone(&handler),
        ServerOptions {
            max_frame_len: 1 << 20,
            ..ServerOptions::default()
        },
        shutdown.clone(),
    ));
    (addr, handler, shutdown)
}

fn heartbeat(body: &str) -> RemotingCommand {
    RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.as_bytes().to_vec())
}

#[tokio::test]
async fn pipelined_requests_get_their_own_responses() {
    let (addr, _, _shutdown) = start().await;
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let calls: Vec<_> = (0..200)
        .map(|i| {
            let client = Arc::clone(&client);
            let addr = addr.clone();
            tokio::spawn(async move {
                let body = format!("request {i}");
                let response = client
                    .invoke(&addr, heartbeat(&body), Duration::from_secs(5))
                    .await
                    .unwrap();
                assert_eq!(response.body, body.as_bytes());
                assert_eq!(response.response_code(), ResponseCode::SUCCESS);
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    assert_eq!(client.connection(&addr).await.unwrap().pending(), 0);
}

#[tokio::test]
async fn oneway_requests_get_no_response() {
    let (addr, handler, _shutdown) = start().await;
    let conn = ClientConnection::connect(&addr, &ClientOptions::default())
        .await
        .unwrap();
    for _ in 0..5 {
        conn.invoke_oneway(heartbeat("x")).unwrap();
    }
    // A normal request after them proves they were read.
    conn.invoke(heartbeat("y"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(handler.oneway.load(Ordering::SeqCst), 5);
    assert_eq!(conn.pending(), 0);
}

#[tokio::test]
async fn unanswered_request_times_out_and_leaves_nothing_pending() {
    let (addr, _, _shutdown) = start().await;
    let conn = ClientConnection::connect(&addr, &ClientOptions::default())
        .await
        .unwrap();
    let err = conn
        .invoke(
            RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
            Duration::from_millis(50),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, ClientError::Timeout { timeout_ms: 50, .. }),
        "{err}"
    );
    assert_eq!(conn.pending(), 0);
}

#[tokio::test]
async fn closed_connection_fails_pending_requests_at_once() {
    let (addr, handler, _shutdown) = start().await;
    let conn = ClientConnection::connect(&addr, &ClientOptions::default())
        .await
        .unwrap();
    let waiting = {
        let conn = Arc::clone(&conn);
        tokio::spawn(async move {
            conn.invoke(
                RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
                Duration::from_secs(30),
            )
            .await
        })
    };
    tokio::time::sleep(Duration::from_millis(20)).await;
    // The server closes the connection when it receives this one.
    let _ = conn
        .invoke(
            RemotingCommand::request(RequestCode::UNREGISTER_CLIENT),
            Duration::from_millis(200),
        )
        .await;
    let outcome = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(outcome, Err(ClientError::ConnectionClosed { .. })),
        "{outcome:?}"
    );
    // The server calls `on_close` after its writer has closed the socket,
    // so the client may see the close first: wait for the count.
    let deadline = Instant::now() + Duration::from_secs(10);
    while handler.closed.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "on_close was never called");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let again = conn.invoke(heartbeat("z"), Duration::from_secs(1)).await;
    assert!(matches!(again, Err(ClientError::ConnectionClosed { .. })));
}

#[tokio::test]
async fn malformed_frame_closes_only_that_connection() {
    let (addr, _, _shutdown) = start().await;
    let good = ClientConnection::connect(&addr, &ClientOptions::default())
        .await
        .unwrap();
    for garbage in [
        &[0x7Fu8, 0xFF, 0xFF, 0xFF][..],
        &[0, 0, 0, 8, 9, 0, 0, 4, 1, 2, 3, 4][..],
        &b"\0\0\0\x0c\0\0\0\x08{\"code\":"[..],
    ] {
        let mut bad = TcpStream::connect(&addr).await.unwrap();
        bad.write_all(garbage).await.unwrap();
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(5), bad.read(&mut buf))
            .await
            .unwrap();
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "the server closed the bad connection: {read:?}"
        );
    }
    let response = good
        .invoke(heartbeat("still here"), Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(response.body, &b"still here"[..]);
}

#[tokio::test]
async fn shutdown_stops_accepting() {
    let (addr, _, shutdown) = start().await;
    let conn = ClientConnection::connect(&addr, &ClientOptions::default())
        .await
        .unwrap();
    shutdown.cancel();
    // The accept loop drops the listener when it sees the cancellation.
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(&addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "listener still there 10 s after shutdown"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let outcome = conn.invoke(heartbeat("late"), Duration::from_secs(2)).await;
    assert!(outcome.is_err(), "connections close on shutdown");
}

#[tokio::test]
async fn reconnecting_to_a_dead_address_backs_off() {
    // A port that was just free: nothing listens there.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().to_string()
    };
    let client = RemotingClient::new(ClientOptions::default());
    let attempt = || async {
        client
            .invoke(&addr, heartbeat("x"), Duration::from_secs(1))
            .await
            .unwrap_err()
    };
    let started = Instant::now();
    let first = attempt().await;
    assert!(matches!(first, ClientError::Connect { .. }), "{first}");
    assert!(!first.to_string().contains("next attempt in"), "{first}");
    let second = attempt().await.to_string();
    if started.elapsed() < Duration::from_millis(100) {
        // Both calls fell within the first back-off (100 ms from the failure).
        assert!(
            second.contains("1 connect attempt(s) failed; next attempt in"),
            "{second}"
        );
    }
    // A call that came after the back-off (a slow machine) tried again and
    // started a longer one; an immediate call then falls within that.
    let mut refusal = second;
    for _ in 0..10 {
        if refusal.contains("next attempt in") {
            break;
        }
        refusal = attempt().await.to_string();
    }
    let wait_ms: u64 = refusal
        .split("next attempt in ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|ms| ms.parse().ok())
        .unwrap_or_else(|| panic!("no back-off announced: {refusal}"));
    assert!(wait_ms <= 5_000, "{refusal}");
    // Once the announced back-off has passed, the next call tries again.
    tokio::time::sleep(Duration::from_millis(wait_ms + 50)).await;
    let third = attempt().await;
    assert!(
        !third.to_string().contains("next attempt in"),
        "tried again after the back-off: {third}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_per_address_limit_are_closed() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let shutdown = CancellationToken::new();
    tokio::spawn(serve(
        listener,
        Arc::new(Echo::default()),
        ServerOptions {
            max_connections_per_address: 2,
            ..ServerOptions::default()
        },
        shutdown.clone(),
    ));
    let options = ClientOptions::default();
    let a = ClientConnection::connect(&addr, &options).await.unwrap();
    let b = ClientConnection::connect(&addr, &options).await.unwrap();
    for c in [&a, &b] {
        let r = c
            .invoke(heartbeat("hi"), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(&r.body[..], b"hi");
    }
    // A third from the same address is closed at once.
    let mut third = TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(10), third.read(&mut buf))
        .await
        .expect("the third connection stayed open")
        .unwrap_or(0);
    assert_eq!(n, 0, "the third connection got data");
    // Once one closes, a new one is served.
    a.close();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = ClientConnection::connect(&addr, &options).await.unwrap();
        if let Ok(r) = c.invoke(heartbeat("again"), Duration::from_secs(1)).await {
            assert_eq!(&r.body[..], b"again");
            break;
        }
        assert!(Instant::now() < deadline, "no place freed after a close");
    }
    shutdown.cancel();
}
