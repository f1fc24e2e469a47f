//! A full disk: writes are refused while it is full and resume, without a
//! restart, once space is free again; nothing acknowledged is lost.

use super::{
    senders::{holds, read_queues, Senders},
    *,
};

/// Fills `fs` with a file at `path` until `keep` bytes are left free (or,
/// with `keep` 0, until the filesystem refuses more).
fn fill_until(fs: &Tmpfs, path: &Path, keep: u64) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    let chunk = vec![0x5au8; 1 << 20];
    for _ in 0..1_000_000 {
        if fs.free() <= keep + chunk.len() as u64 && keep > 0 {
            break;
        }
        if f.write_all(&chunk).and_then(|()| f.flush()).is_err() {
            break;
        }
    }
}

/// Waits (up to `limit`) until `done` holds, checking every 50 ms.
async fn until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    true
}

/// Disk full on a small filesystem: producers send while a filler file
/// takes the disk past `diskSpaceWarningLevelRatio` and then to its last
/// byte (no room for a new CommitLog file); then the filler is deleted.
/// Passes when sends are refused while the disk is full, succeed again
/// within 10 s of the space coming back (no restart), the broker never
/// exits, and every acknowledged message reads back at its queue offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_writes_then_resumes() {
    let Some(env) = chaos_env("disk full") else {
        return;
    };
    let mib = if env.quick { 96 } else { 256 };
    let dir = env.dir.clone().unwrap().join(unique("disk-full-"));
    let Some(disk) = Tmpfs::mount(&dir.join("store"), mib) else {
        println!("chaos: disk full | needs root to mount a {mib} MiB tmpfs | SKIP");
        return;
    };
    let mut broker = OwnBroker::start_at(
        &env,
        dir.clone(),
        &[
            "mappedFileSizeCommitLog=8388608",
            "mappedFileSizeConsumeQueue=60000",
            // Nothing may be deleted to make room: only the filler goes.
            "cleanFileForciblyEnable=false",
        ],
    )
    .unwrap();
    let topic = unique("Full");
    let queues = 4;
    let client = RemotingClient::new(ClientOptions::default());
    create_topic(&client, &broker.addr, &topic, queues as i32).await;
    client.close_all().await;
    let senders = Senders::start(&broker.namesrv, &topic, 0, 8).await;
    assert!(
        until(Duration::from_secs(30), || senders.acked() > 100).await,
        "no send succeeded"
    );

    // Past the warning ratio: refused by the disk check.
    let filler = dir.join("store").join("filler");
    let total = disk.total();
    fill_until(&disk, &filler, total / 20);
    let refused_at_ratio = senders.refused();
    let refused_warning = until(Duration::from_secs(30), || {
        senders.refused() > refused_at_ratio + 20
    })
    .await;
    let used_warning = disk.used();
    // To the last byte: no room for anything.
    fill_until(&disk, &dir.join("store").join("filler-2"), 0);
    let refused_full = senders.refused();
    let refused_enospc = until(Duration::from_secs(30), || {
        senders.refused() > refused_full + 20
    })
    .await;
    let running_full = broker.is_running();

    // Space again.
    std::fs::remove_file(&filler).unwrap();
    std::fs::remove_file(dir.join("store").join("filler-2")).unwrap();
    let freed = Instant::now();
    let acked_then = senders.acked();
    let resumed = until(Duration::from_secs(10), || {
        senders.acked() > acked_then + 100
    })
    .await;
    let resumed_after = freed.elapsed();
    let sent = senders.stop().await;
    let held = read_queues(&broker.namesrv, &topic, queues).await;
    let missing = sent.acks.iter().filter(|a| !holds(&held, a)).count();
    let running = broker.is_running();
    let sample = sent
        .refusals
        .iter()
        .map(|(_, e)| e.as_str())
        .find(|e| e.contains("14"))
        .unwrap_or("none")
        .chars()
        .take(160)
        .collect::<String>();
    let figure = format!(
        "{mib} MiB disk: refused past the warning ratio (disk {:.2}): {refused_warning}, refused \
         when full: {refused_enospc}, broker up: {}; resumed {:.1} s after space came back: \
         {resumed}; {} acknowledged, {missing} missing; a refusal: {sample}",
        used_warning,
        running_full && running,
        resumed_after.as_secs_f64(),
        sent.acks.len(),
    );
    let pass =
        refused_warning && refused_enospc && running_full && running && resumed && missing == 0;
    println!(
        "chaos: disk full | {figure} | {}",
        if pass { "PASS" } else { "FAIL" }
    );
    assert!(pass, "{figure}");
    broker.kill().unwrap();
    drop(disk);
}
