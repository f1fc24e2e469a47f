//! Killed and stopped brokers: kill -9 during topic creation, SIGTERM under SYNC_FLUSH load.

use super::*;

/// A topic-creation race with kill -9: eight clients create topics as fast
/// as the broker answers; halfway the broker is killed with SIGKILL and
/// started again on the same store. Passes when `topics.json` parses and
/// every topic whose creation was acknowledged before the kill is in it,
/// and the broker started again on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_topics_survive_kill_9_during_creation() {
    let Some(env) = chaos_env("topic race") else {
        return;
    };
    let n = if env.quick { 400 } else { 4000 };
    let mut broker = OwnBroker::start(&env, "topic-race", &[]).unwrap();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for t in 0..8 {
        let (addr, acked, stop) = (broker.addr.clone(), Arc::clone(&acked), Arc::clone(&stop));
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::new(ClientOptions::default());
            for i in 0.. {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let topic = format!("Race-{t}-{i}");
                let req = e2e_tests::create_topic_request(&topic, 4);
                // After the kill, requests fail: that ends this client.
                match client.invoke(&addr, req, Duration::from_secs(5)).await {
                    Ok(r) if r.response_code() == ResponseCode::SUCCESS => {
                        acked.lock().unwrap().push(topic);
                    }
                    _ => break,
                }
            }
            client.close_all().await;
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while acked.lock().unwrap().len() < n / 2 {
        assert!(Instant::now() < deadline, "topic creations too slow");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    broker.kill_and_restart().unwrap();
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    let path = broker.dir.join("store").join("config").join("topics.json");
    let text = std::fs::read_to_string(&path).unwrap();
    let table: Result<remoting_protocol::body::TopicConfigSerializeWrapper, _> =
        remoting_protocol::body::from_json(text.as_bytes());
    let parsed = table.is_ok();
    let saved = table.map(|t| t.topic_config_table).unwrap_or_default();
    let missing: Vec<&String> = acked.iter().filter(|t| !saved.contains_key(*t)).collect();
    let running = broker.is_running();
    let figure = format!(
        "{} topic creations acknowledged before kill -9; topics.json parses: {parsed}, holds {} \
         topics, {} acknowledged missing; broker running after the restart: {running}",
        acked.len(),
        saved.len(),
        missing.len(),
    );
    let pass = parsed && missing.is_empty() && running;
    println!(
        "chaos: topic race | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(
        pass,
        "{figure}; missing {:?}",
        &missing[..missing.len().min(5)]
    );
}

/// What the senders of the SIGTERM case saw.
#[derive(Debug, Default)]
struct Outcomes {
    /// Acknowledged sends per queue id.
    acked: [i64; 4],
    /// Other answers, by code.
    refused: std::collections::BTreeMap<i32, u64>,
    /// Sends that ended with the connection closed or refused.
    closed: u64,
    /// Sends that got no answer within the client's timeout.
    timed_out: u64,
}

/// SIGTERM under SYNC_FLUSH load: sixteen clients send as fast as the
/// broker answers; the broker is sent SIGTERM. Passes when it exits 0
/// within 15 s, no send hangs (each gets an answer or a closed
/// connection), it starts again on the same ports at once, and every
/// acknowledged message is there after the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_sync_flush_answers_and_keeps_what_it_acknowledged() {
    let Some(env) = chaos_env("SIGTERM under SYNC_FLUSH") else {
        return;
    };
    let mut broker = OwnBroker::start(&env, "sigterm", &["flushDiskType=SYNC_FLUSH"]).unwrap();
    let topic = unique("Term");
    let outcomes: Arc<Mutex<Outcomes>> = Arc::default();
    let mut tasks = Vec::new();
    for t in 0..16 {
        let (addr, topic, outcomes) = (broker.addr.clone(), topic.clone(), Arc::clone(&outcomes));
        tasks.push(tokio::spawn(async move {
            let client = RemotingClient::new(ClientOptions::default());
            for i in 0u64.. {
                let queue = ((t + i) % 4) as usize;
                let req = send_with(&topic, queue as i32, vec![b't'; 512], "");
                let answer = client.invoke(&addr, req, Duration::from_secs(10)).await;
                let mut o = outcomes.lock().unwrap();
                match answer {
                    Ok(r) if r.response_code() == ResponseCode::SUCCESS => o.acked[queue] += 1,
                    Ok(r) => *o.refused.entry(r.code).or_default() += 1,
                    Err(remoting_net::ClientError::Timeout { .. }) => {
                        o.timed_out += 1;
                        break;
                    }
                    Err(_) => {
                        o.closed += 1;
                        break;
                    }
                }
            }
            client.close_all().await;
        }));
    }
    tokio::time::sleep(Duration::from_secs(if env.quick { 2 } else { 10 })).await;
    let asked = Instant::now();
    let status = broker.terminate(Duration::from_secs(15)).await.unwrap();
    let took = asked.elapsed();
    for t in tasks {
        t.await.unwrap();
    }
    let restarted = broker.restart().is_ok();
    let o = std::mem::take(&mut *outcomes.lock().unwrap());
    let client = RemotingClient::new(ClientOptions::default());
    let mut lost = 0i64;
    if restarted {
        for (queue_id, acked) in o.acked.iter().enumerate() {
            let max = max_offset(&client, &broker.addr, &topic, queue_id as i32).await;
            lost += (acked - max).max(0);
        }
    }
    client.close_all().await;
    let exited_ok = status.is_some_and(|s| s.success());
    let figure = format!(
        "{} sends acknowledged, other answers by code {:?}, {} ended by the closed connection, \
         {} hung; exit {:?} after {:.1} s; restarted on the same ports: {restarted}; \
         acknowledged but missing after the restart: {lost}",
        o.acked.iter().sum::<i64>(),
        o.refused,
        o.closed,
        o.timed_out,
        status.map(|s| s.to_string()),
        took.as_secs_f64(),
    );
    let pass = exited_ok && o.timed_out == 0 && restarted && lost == 0;
    println!(
        "chaos: sigterm | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
}
