//! Hostile requests.

use super::*;

/// Hostile requests, each answered with its own refusal while the broker
/// keeps serving: out-of-range queue ids and offsets, a body past
/// `maxMessageSize`, properties past 32 KiB, a pull for two billion
/// messages, and a frame whose header claims more bytes than the frame
/// holds (that connection is closed). Passes when every answer is the
/// expected one and an ordinary send succeeds afterwards.
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
    // A frame whose header length exceeds the frame: that connection closes.
    let mut raw = tokio::net::TcpStream::connect(&broker.addr).await.unwrap();
    let mut frame = Vec::new();
    frame.extend_from_slice(&100i32.to_be_bytes());
    frame.extend_from_slice(&1_000_000i32.to_be_bytes());
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
    lines.push(format!(
        "header longer than its frame: connection closed {closed}"
    ));
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
