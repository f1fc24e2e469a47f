//! Request signing against a tiny server that reads raw frames: a client
//! with credentials signs every request it sends (oneway ones too) so that
//! the signature verifies with the secret; a client without sends neither
//! an access key nor a signature; responses to a server's requests are not
//! signed.
#![allow(clippy::unwrap_used)]

use std::{sync::Arc, time::Duration};

use bytes::BytesMut;
use remoting_net::{client::ClientConnection, ClientOptions, RemotingClient, ServerRequests};
use remoting_protocol::{
    acl::{self, Credentials},
    decode_frame, encode_frame, RemotingCommand, RequestCode, ResponseCode,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    sync::mpsc,
};

const SECRET: &str = "sk-of-alice";
const MAX_FRAME: usize = 1 << 20;
const WAIT: Duration = Duration::from_secs(10);

/// The far end of one connection: every command it read, and a way to send
/// it commands of its own.
struct TinyServer {
    addr: String,
    seen: mpsc::UnboundedReceiver<RemotingCommand>,
    to_client: mpsc::UnboundedSender<RemotingCommand>,
}

impl TinyServer {
    /// Listens on loopback and serves the first connection: each command
    /// read is passed on to `seen`; a request that is not oneway is
    /// answered `SUCCESS` if its signature verifies with [`SECRET`], else
    /// `NO_PERMISSION`.
    async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let (to_client, mut outgoing) = mpsc::unbounded_channel::<RemotingCommand>();
        let answers = to_client.clone();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (mut reader, mut writer) = stream.into_split();
            tokio::spawn(async move {
                while let Some(cmd) = outgoing.recv().await {
                    let mut frame = BytesMut::new();
                    encode_frame(&cmd, &mut frame, MAX_FRAME).unwrap();
                    if writer.write_all(&frame).await.is_err() {
                        return;
                    }
                }
            });
            let mut pending = BytesMut::new();
            let mut buf = vec![0_u8; 64 * 1024];
            loop {
                let n = reader.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                pending.extend_from_slice(&buf[..n]);
                while let Some(cmd) = decode_frame(&mut pending, MAX_FRAME).unwrap() {
                    if !cmd.is_response() && !cmd.is_oneway() {
                        let code = if acl::verify(&cmd, SECRET.as_bytes()) {
                            ResponseCode::SUCCESS
                        } else {
                            ResponseCode::NO_PERMISSION
                        };
                        let _ = answers.send(cmd.response_to(code, None));
                    }
                    let _ = seen_tx.send(cmd);
                }
            }
        });
        Self {
            addr,
            seen,
            to_client,
        }
    }

    async fn next_seen(&mut self) -> RemotingCommand {
        tokio::time::timeout(WAIT, self.seen.recv())
            .await
            .expect("the server read nothing")
            .expect("the server stopped")
    }
}

fn request_with_fields() -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
    request.set_ext("a", "T");
    request.set_ext("b", "group");
    request.with_body(b"payload".to_vec())
}

fn signed(credentials: Credentials) -> ClientOptions {
    ClientOptions {
        credentials: Some(credentials),
        ..ClientOptions::default()
    }
}

#[tokio::test]
async fn a_client_with_credentials_signs_every_request() {
    let mut server = TinyServer::start().await;
    let client = RemotingClient::new(signed(Credentials::new("alice", SECRET)));
    let answer = client
        .invoke(&server.addr, request_with_fields(), WAIT)
        .await
        .unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let seen = server.next_seen().await;
    assert_eq!(acl::access_key(&seen), Some("alice"));
    assert!(acl::verify(&seen, SECRET.as_bytes()));
    assert!(!acl::verify(&seen, b"another secret"));
    assert_eq!(seen.ext("a"), Some("T"), "the request's own fields stay");
    assert_eq!(&seen.body[..], b"payload");
    assert!(seen.ext(acl::SECURITY_TOKEN).is_none());

    client
        .invoke_oneway(&server.addr, request_with_fields())
        .await
        .unwrap();
    let oneway = server.next_seen().await;
    assert!(oneway.is_oneway());
    assert_eq!(acl::access_key(&oneway), Some("alice"));
    assert!(acl::verify(&oneway, SECRET.as_bytes()));
    client.close_all().await;
}

#[tokio::test]
async fn a_session_token_travels_signed_on_a_single_connection() {
    let mut server = TinyServer::start().await;
    let mut credentials = Credentials::new("alice", SECRET);
    credentials.security_token = Some("session-1".into());
    let conn = ClientConnection::connect(&server.addr, &signed(credentials))
        .await
        .unwrap();
    let answer = conn.invoke(request_with_fields(), WAIT).await.unwrap();
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let seen = server.next_seen().await;
    assert_eq!(seen.ext(acl::SECURITY_TOKEN), Some("session-1"));
    assert!(acl::verify(&seen, SECRET.as_bytes()));
    conn.invoke_oneway(RemotingCommand::request(RequestCode::HEART_BEAT))
        .unwrap();
    let oneway = server.next_seen().await;
    assert!(oneway.is_oneway() && acl::verify(&oneway, SECRET.as_bytes()));
    conn.close();
}

#[tokio::test]
async fn a_client_without_credentials_sends_requests_unsigned() {
    let mut server = TinyServer::start().await;
    let client = RemotingClient::new(ClientOptions::default());
    let answer = client
        .invoke(&server.addr, request_with_fields(), WAIT)
        .await
        .unwrap();
    assert_eq!(answer.response_code(), ResponseCode::NO_PERMISSION);
    let seen = server.next_seen().await;
    assert_eq!(acl::access_key(&seen), None);
    assert!(seen.ext(acl::SIGNATURE).is_none());
    assert_eq!(seen.ext_fields.len(), 2, "{:?}", seen.ext_fields);
    client.close_all().await;
}

#[tokio::test]
async fn answers_to_the_servers_requests_are_not_signed() {
    let mut server = TinyServer::start().await;
    let answer_server: ServerRequests = ServerRequests(Arc::new(|_peer, request| {
        Some(
            request
                .response_to(ResponseCode::SUCCESS, None)
                .with_body(b"answer".to_vec()),
        )
    }));
    let options = ClientOptions {
        on_request: Some(answer_server),
        ..signed(Credentials::new("alice", SECRET))
    };
    let conn = ClientConnection::connect(&server.addr, &options)
        .await
        .unwrap();
    conn.invoke(request_with_fields(), WAIT).await.unwrap();
    assert!(acl::verify(&server.next_seen().await, SECRET.as_bytes()));
    let mut asked = RemotingCommand::request(RequestCode::CHECK_TRANSACTION_STATE);
    asked.set_ext("tranStateTableOffset", "1");
    let opaque = asked.opaque;
    server.to_client.send(asked).unwrap();
    let response = server.next_seen().await;
    assert!(response.is_response());
    assert_eq!(response.opaque, opaque);
    assert_eq!(&response.body[..], b"answer");
    assert_eq!(acl::access_key(&response), None);
    assert!(response.ext(acl::SIGNATURE).is_none());
    conn.close();
}
