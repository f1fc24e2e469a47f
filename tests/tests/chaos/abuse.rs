//! Abusive clients: pulls that ask for everything, connection floods on
//! every listener, topic floods.

use remoting_protocol::header::PullMessageResponseHeader;
use tokio::{
    io::AsyncReadExt,
    net::{TcpSocket, TcpStream},
};

use super::*;

/// A pull of `queue_id` of `topic` from `offset` for `max` messages with
/// tag expression `subscription`; parked up to `suspend_ms` when `suspend`.
fn pull(
    topic: &str,
    offset: i64,
    max: i32,
    subscription: &str,
    suspend: Option<i64>,
) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: "chaos-abuse".into(),
            topic: topic.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: max,
            max_msg_bytes: Some(i32::MAX),
            sys_flag: if suspend.is_some() { 0x2 } else { 0 },
            suspend_timeout_millis: suspend.unwrap_or(0),
            subscription: Some(subscription.into()),
            ..PullMessageRequestHeader::default()
        },
    )
}

/// Sends `req` until the answer is not `SYSTEM_BUSY` (at most 500 times,
/// 20 ms apart), as a client backing off would; the last answer.
async fn invoke_past_busy(
    client: &RemotingClient,
    addr: &str,
    req: &RemotingCommand,
) -> RemotingCommand {
    let mut answer = None;
    for _ in 0..500 {
        let got = client
            .invoke(addr, req.clone(), Duration::from_secs(10))
            .await
            .unwrap();
        let busy = got.response_code() == ResponseCode::SYSTEM_BUSY;
        answer = Some(got);
        if !busy {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    answer.unwrap()
}

/// Writes `n` messages of 1 KiB tagged `TagA` to queue 0 of `topic` from 16
/// concurrent senders.
async fn fill(client: &Arc<RemotingClient>, addr: &str, topic: &str, n: usize) {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let (client, addr, topic, next) = (
            Arc::clone(client),
            addr.to_owned(),
            topic.to_owned(),
            Arc::clone(&next),
        );
        tasks.push(tokio::spawn(async move {
            while next.fetch_add(1, Ordering::Relaxed) < n as u64 {
                let req = send_with(&topic, 0, vec![b'a'; 1024], "TAGS\u{1}TagA\u{2}");
                let answer = invoke_past_busy(&client, &addr, &req).await;
                assert_eq!(
                    answer.response_code(),
                    ResponseCode::SUCCESS,
                    "{:?}",
                    answer.remark
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Abusive pulls on a long queue: one asking for `i32::MAX` messages and
/// bytes gets at most the in-memory caps (32 messages, 256 KiB); a tag
/// filter that matches nothing walks the queue at most 800 entries per
/// pull, each answered `PULL_RETRY_IMMEDIATELY` with where to resume; and
/// connections that park as many pulls as they may, for the longest hold
/// anyone could ask, then disconnect, leave nothing parked. Passes when all
/// of that holds, no connection parks more than its share, the broker grows
/// by less than 16 MiB plus 8 KiB per pull sent, and it still serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abusive_pulls_are_capped_and_let_go() {
    let Some(env) = chaos_env("abusive pulls") else {
        return;
    };
    let (n, conns, per_conn) = if env.quick {
        (20_000, 8, 200)
    } else {
        (200_000, 32, 1000)
    };
    let share = per_conn / 2;
    let share_set = format!("pullHoldMaxRequestsPerConnection={share}");
    let broker = OwnBroker::start(&env, "abusive-pulls", &[share_set.as_str()]).unwrap();
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let topic = unique("Long");
    create_topic(&client, &broker.addr, &topic, 1).await;
    fill(&client, &broker.addr, &topic, n).await;
    let rss_before = rss(broker.pid());
    let anon_before = proc_status(broker.pid(), "RssAnon:");

    // Everything at once.
    let all = admin(&client, &broker.addr, pull(&topic, 0, i32::MAX, "*", None)).await;
    let all_count = count_records(&all.body);
    let capped = all.response_code() == ResponseCode::SUCCESS
        && (1..=32).contains(&all_count)
        && all.body.len() <= 256 * 1024 + 2048;

    // A filter that matches nothing, across the whole queue.
    let (mut offset, mut pulls, mut longest_step) = (0i64, 0u32, 0i64);
    let mut walk_ok = true;
    while offset < n as i64 && pulls < 10_000 {
        let answer = admin(
            &client,
            &broker.addr,
            pull(&topic, offset, 32, "NoSuchTag", None),
        )
        .await;
        let next = answer
            .decode_header::<PullMessageResponseHeader>()
            .map_or(-1, |h| h.next_begin_offset);
        walk_ok &= answer.response_code() == ResponseCode::PULL_RETRY_IMMEDIATELY
            && next > offset
            && next - offset <= 800;
        if next <= offset {
            break;
        }
        longest_step = longest_step.max(next - offset);
        offset = next;
        pulls += 1;
    }
    walk_ok &= offset == n as i64;

    // Parked pulls: an empty topic, the longest hold, then disconnect.
    let empty = unique("Empty");
    create_topic(&client, &broker.addr, &empty, 1).await;
    let mut frames = bytes::BytesMut::new();
    for _ in 0..per_conn {
        let req = pull(&empty, 0, 32, "*", Some(i64::MAX));
        remoting_protocol::codec::encode_frame(&req, &mut frames, 16 << 20).unwrap();
    }
    let mut holders = Vec::new();
    for _ in 0..conns {
        let mut s = TcpStream::connect(&broker.addr).await.unwrap();
        s.write_all(&frames).await.unwrap();
        holders.push(s);
    }
    let want = (conns * share) as i64;
    let parked = wait_for_figure(&client, &broker.addr, "pullHoldRequests", |v| v >= want).await;
    let rss_parked = rss(broker.pid());
    let anon_parked = proc_status(broker.pid(), "RssAnon:");
    drop(holders);
    let after = wait_for_figure(&client, &broker.addr, "pullHoldRequests", |v| v == 0).await;
    let sent = admin(
        &client,
        &broker.addr,
        send_with(&topic, 0, b"still here".to_vec(), ""),
    )
    .await;
    let grown = rss_parked.max(rss(broker.pid())).saturating_sub(rss_before);
    let anon_grown = anon_parked.saturating_sub(anon_before);
    // Every pull sent is held somewhere while the connections are open:
    // parked, queued, or answered and unread. Memory may grow with them,
    // by a bounded amount each.
    let requests = (conns * per_conn) as u64;
    let per_request = anon_grown / requests;

    let figure = format!(
        "pull of i32::MAX got {all_count} messages ({} KiB); a filter matching nothing walked \
         {n} entries in {pulls} pulls of at most {longest_step}; {conns} connections parked \
         {parked} pulls (share {share} each; the others answered at once or refused busy), \
         {after} left after they closed; broker grew {} MiB ({} MiB anonymous, {per_request} \
         bytes per pull sent)",
        all.body.len() / 1024,
        grown >> 20,
        anon_grown >> 20,
    );
    let pass = capped
        && walk_ok
        && parked > 0
        && parked <= want
        && after == 0
        && grown < (16 << 20) + requests * 8192
        && sent.response_code() == ResponseCode::SUCCESS;
    println!(
        "chaos: abusive pulls | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
    client.close_all().await;
}

/// The number of stored records in a pull answer's body (each starts with
/// its total size, big-endian).
fn count_records(body: &[u8]) -> usize {
    let (mut at, mut n) = (0, 0);
    while let Some(size) = body.get(at..at + 4) {
        let size = u32::from_be_bytes(size.try_into().unwrap()) as usize;
        if size == 0 {
            break;
        }
        at += size;
        n += 1;
    }
    n
}

/// Polls a runtime-info figure (up to 20 s) until `done` holds; returns it.
async fn wait_for_figure(
    client: &RemotingClient,
    addr: &str,
    key: &str,
    done: impl Fn(i64) -> bool,
) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let v = e2e_tests::runtime_figure(client, addr, key).await.unwrap();
        if done(v) || Instant::now() >= deadline {
            return v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A connection to `addr` from the loopback address `from`.
async fn connect_from(from: &str, addr: &str) -> std::io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(format!("{from}:0").parse().unwrap())?;
    socket.connect(addr.parse().unwrap()).await
}

/// Which listener a probe talks to.
#[derive(Debug, Clone, Copy)]
enum Listener {
    Remoting,
    Grpc,
    Metrics,
}

/// Asks a connection for one answer in the listener's own protocol:
/// whether it answered (not when the server closed it, or nothing came
/// within 10 s), and the connection, kept open by the caller.
async fn answers(mut s: TcpStream, listener: Listener) -> (bool, TcpStream) {
    let request: Vec<u8> = match listener {
        Listener::Remoting => {
            let mut b = bytes::BytesMut::new();
            let req = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
            remoting_protocol::codec::encode_frame(&req, &mut b, 1 << 20).unwrap();
            b.to_vec()
        }
        // The HTTP/2 client preface and an empty SETTINGS frame; the server
        // answers with its own SETTINGS.
        Listener::Grpc => [
            &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
            &[0, 0, 0, 4, 0, 0, 0, 0, 0],
        ]
        .concat(),
        Listener::Metrics => b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n".to_vec(),
    };
    if s.write_all(&request).await.is_err() {
        return (false, s);
    }
    let mut buf = [0u8; 16];
    let answered =
        match tokio::time::timeout(Duration::from_secs(10), s.read_exact(&mut buf[..9])).await {
            Ok(Ok(_)) => match listener {
                Listener::Remoting => true,
                Listener::Grpc => buf[3] == 4,
                Listener::Metrics => buf.starts_with(b"HTTP/1.1 "),
            },
            _ => false,
        };
    (answered, s)
}

/// Whether the server closes a connection (within 10 s) without having
/// been sent anything.
async fn closed_by_server(mut s: TcpStream) -> bool {
    let mut buf = [0u8; 1];
    matches!(
        tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf)).await,
        Ok(Ok(0) | Err(_))
    )
}

/// Connection floods: from one address, three times its share of
/// connections on each listener (remoting, gRPC, metrics, the embedded name
/// server). Passes when
/// exactly the share is served on each and the rest are closed, another
/// address is served on every listener meanwhile, and the broker grows by
/// less than 64 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_floods_are_held_to_each_address_share() {
    let Some(env) = chaos_env("connection floods") else {
        return;
    };
    let share = if env.quick { 50 } else { 300 };
    let (grpc_port, metrics_port) = (
        e2e_tests::free_port().unwrap(),
        e2e_tests::free_port().unwrap(),
    );
    let sets = [
        format!("maxConnectionsPerAddress={share}"),
        format!("grpcListenPort={grpc_port}"),
        format!("metricsListenPort={metrics_port}"),
    ];
    let sets: Vec<&str> = sets.iter().map(String::as_str).collect();
    let broker = OwnBroker::start(&env, "conn-flood", &sets).unwrap();
    let rss_before = rss(broker.pid());
    let listeners = [
        ("remoting", Listener::Remoting, broker.addr.clone()),
        ("gRPC", Listener::Grpc, format!("127.0.0.1:{grpc_port}")),
        (
            "metrics",
            Listener::Metrics,
            format!("127.0.0.1:{metrics_port}"),
        ),
        ("name server", Listener::Remoting, broker.namesrv.clone()),
    ];
    let mut lines = Vec::new();
    let mut pass = true;
    let mut peak = 0;
    for (name, listener, addr) in &listeners {
        let mut flood = Vec::new();
        for _ in 0..3 * share {
            flood.push(connect_from("127.0.0.2", addr).await.unwrap());
        }
        // The listener accepts in order: the first `share` connections are
        // kept, every later one is closed. Once the later ones are seen
        // closed, every connection was accepted, and the first ones are
        // asked for an answer (and kept open until all have answered).
        let later = flood.split_off(share);
        let closings: Vec<_> = later
            .into_iter()
            .map(|s| tokio::spawn(closed_by_server(s)))
            .collect();
        let mut closed = 0;
        for c in closings {
            closed += usize::from(c.await.unwrap());
        }
        let probes: Vec<_> = flood
            .into_iter()
            .map(|s| tokio::spawn(answers(s, *listener)))
            .collect();
        let mut served = 0;
        let mut kept = Vec::new();
        for p in probes {
            let (answered, s) = p.await.unwrap();
            served += usize::from(answered);
            kept.push(s);
        }
        peak = peak.max(rss(broker.pid()));
        let (other, _) = answers(connect_from("127.0.0.1", addr).await.unwrap(), *listener).await;
        lines.push(format!(
            "{name} served {served} of the first {share}, closed {closed} of the other {}, \
             another address {}",
            2 * share,
            if other { "served" } else { "REFUSED" }
        ));
        pass &= served == share && closed == 2 * share && other;
        drop(kept);
    }
    let grown = peak.saturating_sub(rss_before);
    let figure = format!(
        "share {share}: {}; broker grew {} MiB",
        lines.join("; "),
        grown >> 20
    );
    pass &= grown < 64 << 20;
    println!(
        "chaos: connection floods | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}

/// Topic floods: creating topics past `topicMaxCount`, by the admin request
/// and by sends to new topics. Passes when exactly the allowed number
/// exist, each refusal names the limit, `topics.json` parses after a
/// restart, and sends to an existing topic still succeed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_floods_stop_at_topic_max_count() {
    let Some(env) = chaos_env("topic floods") else {
        return;
    };
    let max = if env.quick { 300 } else { 3000 };
    let max_set = format!("topicMaxCount={max}");
    let mut broker = OwnBroker::start(&env, "topic-flood", &[max_set.as_str()]).unwrap();
    let client = Arc::new(RemotingClient::new(ClientOptions::default()));
    let kept = unique("Kept");
    create_topic(&client, &broker.addr, &kept, 1).await;
    let (created, refused, unclear) = (
        Arc::new(AtomicU64::new(1)),
        Arc::new(AtomicU64::new(0)),
        Arc::new(AtomicU64::new(0)),
    );
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (client, addr) = (Arc::clone(&client), broker.addr.clone());
        let (created, refused, unclear) = (
            Arc::clone(&created),
            Arc::clone(&refused),
            Arc::clone(&unclear),
        );
        tasks.push(tokio::spawn(async move {
            for i in 0..(max / 4) {
                let topic = format!("Flood-{t}-{i}");
                // Half create by the admin request, half by sending.
                let req = if t % 2 == 0 {
                    e2e_tests::create_topic_request(&topic, 1)
                } else {
                    send_with(&topic, 0, b"flood".to_vec(), "")
                };
                let answer = invoke_past_busy(&client, &addr, &req).await;
                let remark = answer.remark.clone().unwrap_or_default();
                if answer.response_code() == ResponseCode::SUCCESS {
                    created.fetch_add(1, Ordering::Relaxed);
                } else if remark.contains("topicMaxCount") {
                    refused.fetch_add(1, Ordering::Relaxed);
                } else {
                    unclear.fetch_add(1, Ordering::Relaxed);
                    eprintln!(
                        "topic flood: unexpected answer {:?} {remark}",
                        answer.response_code()
                    );
                }
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let send_ok = admin(
        &client,
        &broker.addr,
        send_with(&kept, 0, b"kept".to_vec(), ""),
    )
    .await
    .response_code()
        == ResponseCode::SUCCESS;
    client.close_all().await;
    broker.kill_and_restart().unwrap();
    let path = broker.dir.join("store").join("config").join("topics.json");
    let table: Result<remoting_protocol::body::TopicConfigSerializeWrapper, _> =
        remoting_protocol::body::from_json(std::fs::read_to_string(&path).unwrap().as_bytes());
    let saved = table.as_ref().map_or(0, |t| {
        t.topic_config_table
            .keys()
            .filter(|k| k.starts_with("Flood-") || k.starts_with("Kept"))
            .count()
    });
    let (created, refused, unclear) = (
        created.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
        unclear.load(Ordering::Relaxed),
    );
    let figure = format!(
        "topicMaxCount {max}: {created} topics created (with one made before), {refused} refused naming the limit, \
         {unclear} other answers; {saved} saved after kill -9; send to an existing topic: {send_ok}"
    );
    let pass = unclear == 0
        && created as usize == max
        && refused > 0
        && saved as u64 == created
        && table.is_ok()
        && send_ok;
    println!(
        "chaos: topic floods | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}
