//! A slow reader held to its budget.

use super::*;

/// A slow reader: one connection writes pull requests whose answers (32
/// messages of 1 KiB each) it never reads. The broker stops reading that
/// connection once its unread answers pass `writeBufferHighWaterMark`, so
/// its memory grows by less than that budget plus a small constant, and,
/// once the pulls it did read are served, another producer's p99 send
/// latency while the reader sits there stays within 2x of its p99 before
/// (or, when the machine itself slowed down, of its p99 after the reader
/// left).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_is_held_to_its_budget() {
    let Some(env) = chaos_env("slow reader") else {
        return;
    };
    let pulls: i32 = if env.quick { 5_000 } else { 20_000 };
    let budget: u64 = 64 << 20;
    let slack: u64 = 64 << 20;
    let broker = OwnBroker::start(&env, "slow-reader", &[]).unwrap();
    let mut config = ProducerConfig::with_namesrv(&broker.namesrv);
    config.retry_times_when_send_failed = 0;
    let producer = Producer::start(config).await.unwrap();
    let topic = unique("SlowRead");
    for _ in 0..2000 {
        producer
            .send_to_queue(
                Message::new(topic.as_str(), vec![b's'; 1024]),
                &producer.publish_queues(&topic).await.unwrap()[0],
            )
            .await
            .unwrap();
    }
    let other = unique("Other");
    let seconds = if env.quick { 2 } else { 5 };
    // Latency is compared across two phases: start on a quiet machine, not
    // while the kernel still frees what an earlier case left behind.
    let idle = quiet_machine(Duration::from_secs(30)).await;
    let cpu0 = cpu(broker.pid());
    let t0 = Instant::now();
    let before = other_producer_p99(&broker.addr, &other, seconds);
    let cpu_before = (cpu(broker.pid()) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let base_rss = rss(broker.pid());

    // The reader: every pull asks for queue 0 from offset 0.
    let mut frames = bytes::BytesMut::new();
    for i in 0..pulls {
        let mut req = RemotingCommand::request_with_header(
            RequestCode::PULL_MESSAGE,
            &PullMessageRequestHeader {
                consumer_group: "chaos-slow".into(),
                topic: topic.clone(),
                queue_id: 0,
                queue_offset: 0,
                max_msg_nums: 32,
                subscription: Some("*".into()),
                ..PullMessageRequestHeader::default()
            },
        );
        req.opaque = i + 1;
        remoting_protocol::codec::encode_frame(&req, &mut frames, 16 << 20).unwrap();
    }
    let mut reader = tokio::net::TcpStream::connect(&broker.addr).await.unwrap();
    // Write until the broker stops reading (a write makes no progress for 1 s).
    let mut written = 0usize;
    while written < frames.len() {
        let end = (written + 65536).min(frames.len());
        match tokio::time::timeout(Duration::from_secs(1), reader.write(&frames[written..end]))
            .await
        {
            Ok(Ok(n)) => written += n,
            Ok(Err(e)) => panic!("slow reader write: {e}"),
            Err(_) => break,
        }
    }
    // The broker serves the pulls it read (their answers wait unread), then
    // sits with the reader parked: measure the other producer from there.
    let client = RemotingClient::new(ClientOptions::default());
    let drain_started = Instant::now();
    loop {
        let queued = e2e_tests::runtime_figure(&client, &broker.addr, "pullThreadPoolQueueSize")
            .await
            .unwrap();
        if queued == 0 {
            break;
        }
        assert!(
            drain_started.elapsed() < Duration::from_secs(120),
            "{queued} pulls still queued after 120 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let drained_in = drain_started.elapsed();
    client.close_all().await;
    let parked_rss = rss(broker.pid());
    let cpu0 = cpu(broker.pid());
    let t0 = Instant::now();
    let mut during = other_producer_p99(&broker.addr, &other, seconds);
    // One window's p99 on a shared 2-core machine can double by chance; a
    // reader that really slowed the others slows every window it sits in.
    for _ in 0..2 {
        if during <= 2.0 * before {
            break;
        }
        during = during.min(other_producer_p99(&broker.addr, &other, seconds));
    }
    let cpu_during = (cpu(broker.pid()) - cpu0).as_secs_f64() / t0.elapsed().as_secs_f64();
    let peak_rss = parked_rss.max(rss(broker.pid()));
    drop(reader);
    // Still slower: measure once more with the reader gone. If the machine
    // itself got slower, that window is slow too and becomes the baseline;
    // if the reader was the cause, it is fast and the comparison stands.
    let mut after = None;
    if during > 2.0 * before {
        after = Some(other_producer_p99(&broker.addr, &other, seconds));
    }
    producer.shutdown().await;

    let baseline = after.map_or(before, |a| a.max(before));
    let growth = peak_rss.saturating_sub(base_rss);
    let ratio = during / baseline;
    let figure = format!(
        "{pulls} unread pulls ({} of {} request bytes taken before the broker stopped reading): \
         pulls served in {:.1} s; broker RSS {} -> {} MiB (+{} MiB, budget {} + {} MiB); \
         other producer p99 {:.2} ms before, {:.2} ms with the reader parked{} ({ratio:.2}x); \
         broker CPU {cpu_before:.2} then {cpu_during:.2} cores; machine {:.0} % idle at the start",
        written,
        frames.len(),
        drained_in.as_secs_f64(),
        base_rss >> 20,
        peak_rss >> 20,
        growth >> 20,
        budget >> 20,
        slack >> 20,
        before,
        during,
        after.map_or(String::new(), |a| format!(", {a:.2} ms after it left")),
        idle * 100.0,
    );
    let pass = growth < budget + slack && ratio <= 2.0;
    println!(
        "chaos: slow reader | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}
