//! Hostile requests.

use remoting_protocol::body::BatchEntry;

use super::*;

/// `req` (a send) with its header's `sysFlag` (`f`) set to `sys_flag`.
fn with_sys_flag(mut req: RemotingCommand, sys_flag: i32) -> RemotingCommand {
    req.set_ext("f", sys_flag.to_string());
    req
}

/// Hostile requests, each answered with its own refusal while the broker
/// keeps serving: out-of-range queue ids and offsets, a body past
/// `maxMessageSize`, properties past 32 KiB, a pull for two billion
/// messages, a zlib bomb (64 MiB of zeros compressed to 64 KiB), a batch
/// of twice `maxMessageSize`, and frames that lie about their sizes (a
/// header longer than its frame, a frame or a header of 1 GiB; each
/// connection is closed). Passes when every answer is the expected one, the
/// bomb reads back as stored without the broker growing by its inflated
/// size, and an ordinary send succeeds afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_get_their_refusals_and_harm_nothing_else() {
    let Some(env) = chaos_env("hostile payloads") else {
        return;
    };
    let broker = OwnBroker::start(&env, "hostile", &["maxMessageSize=1048576"]).unwrap();
    let client = RemotingClient::new(ClientOptions::default());
    let topic = unique("Hostile");
    let ok = admin(
        &client,
        &broker.addr,
        send_with(&topic, 0, b"first".to_vec(), ""),
    )
    .await;
    assert_eq!(ok.response_code(), ResponseCode::SUCCESS, "{:?}", ok.remark);
    let cases: Vec<(&str, RemotingCommand, ResponseCode)> = vec![
        (
            "queue id 9999",
            send_with(&topic, 9999, b"x".to_vec(), ""),
            ResponseCode::SYSTEM_ERROR,
        ),
        (
            "body of maxMessageSize + 1",
            send_with(&topic, 0, vec![b'b'; (1 << 20) + 1], ""),
            ResponseCode::MESSAGE_ILLEGAL,
        ),
        (
            "40 KiB of properties",
            send_with(
                &topic,
                0,
                b"x".to_vec(),
                &format!("K\u{1}{}\u{2}", "v".repeat(40 * 1024)),
            ),
            ResponseCode::MESSAGE_ILLEGAL,
        ),
        (
            "pull at offset i64::MAX",
            pull_from(&topic, i64::MAX, 32),
            ResponseCode::PULL_OFFSET_MOVED,
        ),
        (
            "pull of i32::MAX messages",
            pull_from(&topic, 0, i32::MAX),
            ResponseCode::SUCCESS,
        ),
    ];
    // A zlib bomb: 64 MiB of zeros in about 64 KiB. The broker stores a
    // compressed body as it came (as RocketMQ does) and inflates it only to
    // deliver it through gRPC, then at most to `maxMessageSize`.
    let bomb = message_model::compression::compress(&vec![0u8; 64 << 20]).unwrap();
    let bomb_len = bomb.len();
    let mut bomb_send = send_with(&topic, 0, bomb.to_vec(), "");
    bomb_send = with_sys_flag(bomb_send, message_model::compression::ZLIB_SYS_FLAG);
    // A batch of 2,000 entries of 1 KiB: twice `maxMessageSize` in all.
    let entries: Vec<BatchEntry> = (0..2000)
        .map(|_| BatchEntry {
            flag: 0,
            body: bytes::Bytes::from(vec![b'e'; 1024]),
            properties: String::new(),
        })
        .collect();
    let batch = RemotingCommand::request_with_header(
        RequestCode::SEND_BATCH_MESSAGE,
        &remoting_protocol::header::SendMessageRequestHeaderV2::from(
            remoting_protocol::header::SendMessageRequestHeader {
                producer_group: "chaos-hostile".into(),
                topic: topic.clone(),
                default_topic: AUTO_CREATE_TOPIC.into(),
                default_topic_queue_nums: 4,
                queue_id: 0,
                born_timestamp: 1_700_000_000_000,
                batch: Some(true),
                ..remoting_protocol::header::SendMessageRequestHeader::default()
            },
        ),
    )
    .with_body(remoting_protocol::body::encode_batch(&entries).unwrap());
    let rss_before = rss(broker.pid());
    let mut cases = cases;
    cases.push((
        "zlib bomb (64 MiB of zeros)",
        bomb_send,
        ResponseCode::SUCCESS,
    ));
    cases.push((
        "batch of twice maxMessageSize",
        batch,
        ResponseCode::MESSAGE_ILLEGAL,
    ));
    let mut lines = Vec::new();
    let mut pass = true;
    for (name, req, want) in cases {
        let got = admin(&client, &broker.addr, req).await;
        let good = got.response_code() == want;
        pass &= good;
        lines.push(format!(
            "{name}: {:?}{}",
            got.response_code(),
            if good { "" } else { " (unexpected)" }
        ));
    }
    // The bomb reads back as stored, compressed, and nothing inflated it.
    let bomb_back = admin(&client, &broker.addr, pull_from(&topic, 1, 1)).await;
    let stored_as_sent = bomb_back.response_code() == ResponseCode::SUCCESS
        && bomb_back.body.len() < bomb_len + 1024
        && bomb_back.body.len() >= bomb_len;
    let grown = rss(broker.pid()).saturating_sub(rss_before);
    pass &= stored_as_sent && grown < 32 << 20;
    lines.push(format!(
        "zlib bomb read back as stored ({} KiB): {stored_as_sent}, broker grew {} MiB",
        bomb_back.body.len() / 1024,
        grown >> 20
    ));
    // Frames that lie about their sizes: each closes its connection.
    for (name, total, header) in [
        ("header longer than its frame", 100i32, 1_000_000i32),
        ("frame of 1 GiB", 1 << 30, 64),
        ("header of 1 GiB", 1 << 30, 1 << 30),
    ] {
        let mut raw = tokio::net::TcpStream::connect(&broker.addr).await.unwrap();
        let mut frame = Vec::new();
        frame.extend_from_slice(&total.to_be_bytes());
        frame.extend_from_slice(&header.to_be_bytes());
        frame.extend_from_slice(&[b'{'; 96]);
        raw.write_all(&frame).await.unwrap();
        let mut buf = [0u8; 64];
        let closed = matches!(
            tokio::time::timeout(
                Duration::from_secs(5),
                tokio::io::AsyncReadExt::read(&mut raw, &mut buf)
            )
            .await,
            Ok(Ok(0) | Err(_))
        );
        pass &= closed;
        lines.push(format!("{name}: connection closed {closed}"));
    }
    let after = admin(
        &client,
        &broker.addr,
        send_with(&topic, 0, b"after".to_vec(), ""),
    )
    .await;
    let served = after.response_code() == ResponseCode::SUCCESS;
    pass &= served;
    lines.push(format!(
        "ordinary send afterwards: {:?}",
        after.response_code()
    ));
    client.close_all().await;
    let figure = lines.join("; ");
    println!(
        "chaos: hostile payloads | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}
