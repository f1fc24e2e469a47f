//! Retention on a small filesystem.

use super::*;

/// Files under `dir`, at any depth.
fn files_under(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .filter_map(Result::ok)
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => files_under(&e.path()),
                Ok(_) => 1,
                Err(_) => 0,
            })
            .sum()
    })
}

/// Mappings of files under `dir` in process `pid`, deleted ones included.
fn store_mappings(pid: u32, dir: &Path) -> usize {
    let prefix = dir.to_string_lossy().into_owned();
    std::fs::read_to_string(format!("/proc/{pid}/maps")).map_or(0, |maps| {
        maps.lines().filter(|l| l.contains(&prefix)).count()
    })
}

/// Retention on a small filesystem: writing 2.5 times its size through the
/// broker keeps disk use under the warning ratio, the last stretch of sends
/// all succeed, nothing acknowledged is missing from the queues, and a
/// consumer group that never consumed is warned about before the first
/// file goes, and the counts of store files on disk and of their mappings
/// in the broker level off (the second half of the run peaks no higher
/// than the first, give or take one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_on_a_small_disk() {
    let Some(env) = chaos_env("retention") else {
        return;
    };
    // CommitLog files smaller than the 5 % of the disk between the
    // forcible ratio (85 %) and the warning ratio (90 %), so that a new one
    // does not by itself carry a disk just under 85 % past 90 %.
    let (mib, file_mib, last_window) = if env.quick {
        (128u64, 5u64, Duration::from_secs(5))
    } else {
        (512, 16, Duration::from_secs(60))
    };
    let dir = env.dir.clone().unwrap().join(unique("retention-"));
    // The store on the small disk, the broker's log beside it.
    let Some(disk) = Tmpfs::mount(&dir.join("store"), mib) else {
        println!("chaos: retention | needs root to mount a {mib} MiB tmpfs | SKIP");
        return;
    };
    let file_size = (file_mib << 20).to_string();
    let broker = OwnBroker::start_at(
        &env,
        dir.clone(),
        &[
            &format!("mappedFileSizeCommitLog={file_size}"),
            "mappedFileSizeConsumeQueue=600000",
            "cleanResourceInterval=1000",
            "deleteCommitLogFilesInterval=0",
            "deleteConsumeQueueFilesInterval=0",
            // IndexFiles in proportion to the small disk (0.4 MB each,
            // deleted with the CommitLog files they index): the newest one,
            // which retention keeps, must not eat the few MiB between the
            // forcible ratio (85 %) and the warning ratio (90 %).
            "maxHashSlotNum=1000",
            "maxIndexNum=20000",
        ],
    )
    .unwrap();
    let topic = unique("Retained");
    let queues = 4;
    let client = RemotingClient::new(ClientOptions::default());
    create_topic(&client, &broker.addr, &topic, queues).await;
    for queue_id in 0..queues {
        let committed = admin(
            &client,
            &broker.addr,
            RemotingCommand::request_with_header(
                RequestCode::UPDATE_CONSUMER_OFFSET,
                &UpdateConsumerOffsetRequestHeader {
                    consumer_group: "chaos-lagging".into(),
                    topic: topic.clone(),
                    queue_id,
                    commit_offset: 0,
                    ..UpdateConsumerOffsetRequestHeader::default()
                },
            ),
        )
        .await;
        assert_eq!(committed.response_code(), ResponseCode::SUCCESS);
    }

    let mut config = ProducerConfig::with_namesrv(&broker.namesrv);
    config.retry_times_when_send_failed = 0;
    let producer = Arc::new(Producer::start(config).await.unwrap());
    let body = vec![b'r'; 4096];
    let target = mib * (1 << 20) * 5 / 2;
    let written = Arc::new(AtomicU64::new(0));
    let acked = Arc::new(AtomicU64::new(0));
    // When each refusal happened, for the last-window check.
    let refusals: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(if env.quick { 120 } else { 600 });
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (producer, topic, body) = (Arc::clone(&producer), topic.clone(), body.clone());
        let (written, acked, refusals) = (
            Arc::clone(&written),
            Arc::clone(&acked),
            Arc::clone(&refusals),
        );
        tasks.push(tokio::spawn(async move {
            while written.load(Ordering::Relaxed) < target && Instant::now() < deadline {
                match producer
                    .send(Message::new(topic.as_str(), body.clone()))
                    .await
                {
                    Ok(_) => {
                        written.fetch_add(body.len() as u64, Ordering::Relaxed);
                        acked.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        refusals
                            .lock()
                            .unwrap()
                            .push((Instant::now(), e.to_string()));
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
        }));
    }
    let mut max_used = 0.0f64;
    // CommitLog and ConsumeQueue files on disk, and the broker's mappings
    // of store files (deleted ones still mapped included), over time.
    let mut counts: Vec<(usize, usize)> = Vec::new();
    let store_dir = dir.join("store");
    while tasks.iter().any(|t| !t.is_finished()) {
        max_used = max_used.max(disk.used());
        counts.push((
            files_under(&store_dir),
            store_mappings(broker.pid(), &store_dir),
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (first_half, second_half) = counts.split_at(counts.len() / 2);
    let peak = |part: &[(usize, usize)]| {
        part.iter()
            .fold((0, 0), |(f, m), (pf, pm)| (f.max(*pf), m.max(*pm)))
    };
    // The second half's median, not its peak: a file made while another
    // is being deleted (a new CommitLog file and a ConsumeQueue's next one
    // at the same moment) lifts one sample by two, a leak lifts them all.
    let median = |part: &[(usize, usize)]| {
        let mut files: Vec<usize> = part.iter().map(|c| c.0).collect();
        let mut maps: Vec<usize> = part.iter().map(|c| c.1).collect();
        files.sort_unstable();
        maps.sort_unstable();
        let mid = part.len() / 2;
        (
            files.get(mid).copied().unwrap_or(0),
            maps.get(mid).copied().unwrap_or(0),
        )
    };
    let (early, late_peak, late_counts) =
        (peak(first_half), peak(second_half), median(second_half));
    for t in tasks {
        t.await.unwrap();
    }
    let finished = Instant::now();
    let took = finished - started;
    producer.shutdown().await;
    // One more pass settles the disk.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let end_used = disk.used();

    let total_written = written.load(Ordering::Relaxed);
    let refusals = refusals.lock().unwrap().clone();
    let late = refusals
        .iter()
        .filter(|(at, _)| finished.duration_since(*at) < last_window)
        .count();
    let mut in_queues = 0i64;
    for queue_id in 0..queues {
        in_queues += max_offset(&client, &broker.addr, &topic, queue_id).await;
    }
    let log = std::fs::read_to_string(dir.join("broker.log")).unwrap();
    let warned = log
        .lines()
        .position(|l| l.contains("has not consumed yet") && l.contains("chaos-lagging"));
    let first_delete = log
        .lines()
        .position(|l| l.contains("deleted CommitLog file"));
    let deleted = log
        .lines()
        .filter(|l| l.contains("deleted CommitLog file"))
        .count();
    let figure = format!(
        "{mib} MiB disk, {:.1}x written in {:.0} s ({} files deleted): disk use max {:.2} end {:.2}, \
         {} refusals ({late} in the last {} s), {} acknowledged, {in_queues} in the queues, \
         lagging group warned first: {}; files on disk at most {} then {} (median {}), \
         mappings at most {} then {} (median {}) (first half, second half)",
        total_written as f64 / (mib << 20) as f64,
        took.as_secs_f64(),
        deleted,
        max_used,
        end_used,
        refusals.len(),
        last_window.as_secs(),
        acked.load(Ordering::Relaxed),
        matches!((warned, first_delete), (Some(w), Some(d)) if w < d),
        early.0,
        late_peak.0,
        late_counts.0,
        early.1,
        late_peak.1,
        late_counts.1,
    );
    let pass = total_written >= target
        && end_used < 0.90
        && max_used < 0.97
        && late == 0
        && in_queues >= acked.load(Ordering::Relaxed) as i64
        && late_counts.0 <= early.0 + 1
        && late_counts.1 <= early.1 + 1
        && matches!((warned, first_delete), (Some(w), Some(d)) if w < d);
    println!(
        "chaos: retention | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}; refusals: {:?}", refusals.last());
    client.close_all().await;
    drop(broker);
}
