//! Retention through a broker: `DELETE_EXPIRED_COMMITLOG` (329) deletes the
//! expired CommitLog files, the queue's minimum offset moves, a pull below
//! it is told the offset moved, and a consumer group that had not consumed
//! the deleted messages is counted (and warned about) before they go. Its
//! own test binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use chrono::Timelike;
use common::{pull_request, scrape, send_request, TestBroker};
use remoting_protocol::{
    body::{self, KvTable},
    header::{
        GetMinOffsetRequestHeader, OffsetResponseHeader, PullMessageResponseHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

async fn commit(b: &TestBroker, group: &str, offset: i64) {
    let req = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: "Lagging".into(),
            queue_id: 0,
            commit_offset: offset,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(b.invoke(req).await.response_code(), ResponseCode::SUCCESS);
}

async fn min_offset(b: &TestBroker) -> i64 {
    let req = RemotingCommand::request_with_header(
        RequestCode::GET_MIN_OFFSET,
        &GetMinOffsetRequestHeader {
            topic: "Lagging".into(),
            queue_id: 0,
            ..GetMinOffsetRequestHeader::default()
        },
    );
    b.invoke(req)
        .await
        .decode_header::<OffsetResponseHeader>()
        .unwrap()
        .offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_files_go_on_request_and_lagging_groups_are_counted_first() {
    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    // An hour far from now and the highest space ratio, so that only the
    // request starts a deletion (a shared disk may well be over the default
    // 75%; past diskSpaceCleanForciblyRatio, 85%, files would go anyway).
    let later = ((chrono::Local::now().hour() + 12) % 24).to_string();
    let b = TestBroker::start(&[
        ("metricsListenPort", port_text.as_str()),
        ("maxMessageSize", "65536"),
        ("mappedFileSizeCommitLog", "262144"),
        ("mappedFileSizeConsumeQueue", "2000"),
        ("flushIntervalCommitLog", "10"),
        ("fileReservedTime", "0"),
        ("deleteWhen", later.as_str()),
        ("diskMaxUsedSpaceRatio", "95"),
        ("cleanResourceInterval", "20"),
        ("deleteCommitLogFilesInterval", "0"),
        ("deleteConsumeQueueFilesInterval", "0"),
    ])
    .await;
    let n = 400i64;
    let body = vec![b'x'; 2000];
    for _ in 0..n {
        let sent = b.invoke(send_request("Lagging", 0, &body, "")).await;
        assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    }
    commit(&b, "Slow", 5).await;
    commit(&b, "Done", n).await;
    assert_eq!(min_offset(&b).await, 0);

    // A file goes once it is flushed and indexed; ask again until it has.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let asked = b
            .invoke(RemotingCommand::request(
                RequestCode::DELETE_EXPIRED_COMMITLOG,
            ))
            .await;
        assert_eq!(asked.response_code(), ResponseCode::SUCCESS);
        if min_offset(&b).await > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "nothing was deleted");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Wait until only the active file is left, then for the next pass to
    // start: the one that deleted the files has also moved the queues.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut settled_after = None;
    let info = loop {
        let info = b
            .invoke(RemotingCommand::request(
                RequestCode::GET_BROKER_RUNTIME_INFO,
            ))
            .await;
        let table: KvTable = body::from_json(&info.body).unwrap();
        let number = |k: &str| table.table[k].parse::<u64>().unwrap();
        let passes = number("retentionPasses");
        match settled_after {
            Some(p) if passes >= p + 2 => break table,
            None if number("commitLogMaxOffset") - number("commitLogMinOffset") <= 262_144 => {
                settled_after = Some(passes)
            }
            _ => {}
        }
        assert!(
            Instant::now() < deadline,
            "deletion stopped early: {table:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let min = min_offset(&b).await;
    assert!(min > 5 && min < n, "{min}");
    assert!(info.table["retentionDeletedConsumeQueueFiles"] != "0");
    let ratio: f64 = info.table["commitLogDiskRatio"].parse().unwrap();
    assert!(ratio > 0.0 && ratio < 1.0, "{ratio}");

    let pulled = b.invoke(pull_request("Lagging", 0, 0, 4)).await;
    assert_eq!(pulled.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let header: PullMessageResponseHeader = pulled.decode_header().unwrap();
    assert_eq!(header.next_begin_offset, min);
    let pulled = b.invoke(pull_request("Lagging", 0, min, 4)).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);

    // "Slow" had consumed 5 messages: it lost the rest below the new minimum.
    let text = scrape(port).await;
    let lost = |group: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("sluice_retention_unconsumed_messages_total{")
                    && l.contains(&format!("group=\"{group}\""))
                    && l.contains("topic=\"Lagging\"")
            })
            .map(|l| l.rsplit(' ').next().unwrap().parse::<i64>().unwrap())
    };
    assert_eq!(lost("Slow"), Some(min - 5), "{text}");
    assert_eq!(lost("Done"), None);
    assert!(text.contains("sluice_store_retention_deleted_files_total{kind=\"commitlog\"}"));

    let unsupported = b
        .invoke(RemotingCommand::request(RequestCode::TRIGGER_DELETE_FILES))
        .await;
    assert_eq!(
        unsupported.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    b.broker.shutdown().await;
}
