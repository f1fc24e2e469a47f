//! Statistics through a broker: sends and pulls show in
//! `VIEW_BROKER_STATS_DATA` (315), in the runtime table's rates and daily
//! totals, in `GET_CONSUME_STATS`' `consumeTps`, `lastTimestamp` and
//! `pullOffset`, and in the RocketMQ 5 metrics (messages in and out, and
//! the lag of a group that committed part of a queue). Its own test
//! binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{batch_request, pull_request, sample, scrape, send_request, TestBroker};
use remoting_protocol::{
    body::{self, BatchEntry, BrokerStatsData, ConsumeStats, KvTable, TopicStatsTable},
    header::{
        GetConsumeStatsRequestHeader, GetTopicStatsInfoRequestHeader, SendMessageResponseHeader,
        UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};

const TOPIC: &str = "Stats";

async fn view(b: &TestBroker, name: &str, key: &str) -> RemotingCommand {
    let mut req = RemotingCommand::request(RequestCode::VIEW_BROKER_STATS_DATA);
    req.set_ext("statsName", name);
    req.set_ext("statsKey", key);
    b.invoke(req).await
}

async fn stats(b: &TestBroker, name: &str, key: &str) -> BrokerStatsData {
    let answer = view(b, name, key).await;
    assert_eq!(
        answer.response_code(),
        ResponseCode::SUCCESS,
        "{name} {key}: {:?}",
        answer.remark
    );
    body::from_json(&answer.body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sends_and_pulls_show_in_stats_runtime_info_consume_stats_and_metrics() {
    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    let b = TestBroker::start(&[("metricsListenPort", port_text.as_str())]).await;
    b.create_topic(TOPIC, 1).await;

    // Ten sends of one message and one batch of three: 13 messages, 11 sends.
    for i in 0..10 {
        let sent = b
            .invoke(send_request(TOPIC, 0, format!("m{i}").as_bytes(), ""))
            .await;
        assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
        let h: SendMessageResponseHeader = sent.decode_header().unwrap();
        assert_eq!(h.queue_offset, i);
    }
    let entries: Vec<BatchEntry> = (0..3)
        .map(|i| BatchEntry {
            body: format!("b{i}").into_bytes().into(),
            ..BatchEntry::default()
        })
        .collect();
    let sent = b.invoke(batch_request(TOPIC, &entries)).await;
    assert_eq!(
        sent.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        sent.remark
    );

    // "CG" reads 8 messages, then commits 5 of them.
    let pulled = b.invoke(pull_request(TOPIC, 0, 0, 8)).await;
    assert_eq!(pulled.response_code(), ResponseCode::SUCCESS);
    let pulled_bytes = pulled.body.len() as i64;
    let commit = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "CG".into(),
            topic: TOPIC.into(),
            queue_id: 0,
            commit_offset: 5,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        b.invoke(commit).await.response_code(),
        ResponseCode::SUCCESS
    );

    // VIEW_BROKER_STATS_DATA.
    let put = stats(&b, "TOPIC_PUT_NUMS", TOPIC).await;
    for window in [put.stats_minute, put.stats_hour, put.stats_day] {
        assert_eq!(window.sum, 13, "{put:?}");
        assert!(window.tps > 0.0, "{put:?}");
        assert!((window.avgpt - 13.0 / 11.0).abs() < 1e-9, "{put:?}");
    }
    assert!(stats(&b, "TOPIC_PUT_SIZE", TOPIC).await.stats_minute.sum > 13);
    let get = stats(&b, "GROUP_GET_NUMS", &format!("{TOPIC}@CG")).await;
    assert_eq!(get.stats_minute.sum, 8);
    let got_bytes = stats(&b, "GROUP_GET_SIZE", &format!("{TOPIC}@CG")).await;
    assert_eq!(got_bytes.stats_minute.sum, pulled_bytes);
    assert_eq!(
        stats(&b, "BROKER_PUT_NUMS", "DefaultCluster")
            .await
            .stats_day
            .sum,
        13
    );
    assert_eq!(
        stats(&b, "BROKER_GET_NUMS", "DefaultCluster")
            .await
            .stats_day
            .sum,
        8
    );
    let unknown = view(&b, "TOPIC_PUT_NUMS", "Nope").await;
    assert_eq!(unknown.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        unknown.remark.as_deref(),
        Some("The stats <TOPIC_PUT_NUMS> <Nope> not exist")
    );

    // The runtime table.
    let info = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_BROKER_RUNTIME_INFO,
        ))
        .await;
    let table: KvTable = body::from_json(&info.body).unwrap();
    let t = &table.table;
    for key in [
        "putTps",
        "getFoundTps",
        "getMissTps",
        "getTotalTps",
        "getTransferredTps",
    ] {
        assert_eq!(t[key].matches(' ').count(), 2, "{key}: {:?}", t[key]);
    }
    assert_eq!(t["msgPutTotalTodayNow"], "13");
    assert_eq!(t["msgGetTotalTodayNow"], "8");
    for key in [
        "msgPutTotalTodayMorning",
        "msgGetTotalTodayMorning",
        "msgPutTotalYesterdayMorning",
        "msgGetTotalYesterdayMorning",
    ] {
        assert!(t[key].parse::<u64>().is_ok(), "{key}: {:?}", t[key]);
    }
    assert_eq!(t["brokerVersion"], "479");
    assert!(t["earliestMessageTimeStamp"].parse::<i64>().unwrap() > 0);
    assert!(t["runtime"].starts_with("[ 0 days, "), "{}", t["runtime"]);

    // GET_TOPIC_STATS_INFO and GET_CONSUME_STATS.
    let topic_stats = b
        .invoke(RemotingCommand::request_with_header(
            RequestCode::GET_TOPIC_STATS_INFO,
            &GetTopicStatsInfoRequestHeader {
                topic: TOPIC.into(),
                ..GetTopicStatsInfoRequestHeader::default()
            },
        ))
        .await;
    let topic_stats: TopicStatsTable = body::from_json(&topic_stats.body).unwrap();
    assert!(topic_stats.topic_put_tps > 0.0);
    let consume = b
        .invoke(RemotingCommand::request_with_header(
            RequestCode::GET_CONSUME_STATS,
            &GetConsumeStatsRequestHeader {
                consumer_group: "CG".into(),
                topic: Some(TOPIC.into()),
                ..GetConsumeStatsRequestHeader::default()
            },
        ))
        .await;
    assert_eq!(consume.response_code(), ResponseCode::SUCCESS);
    let consume: ConsumeStats = body::from_json(&consume.body).unwrap();
    assert!(consume.consume_tps > 0.0, "{consume:?}");
    let q0 = consume.offset_table.values().next().unwrap();
    assert_eq!(
        (q0.broker_offset, q0.consumer_offset, q0.pull_offset),
        (13, 5, 8)
    );
    // The store time of the last message consumed (offset 4): between the
    // store times of its neighbours, read back by another group, so that
    // "CG"'s reads stay as they were.
    let mut around = pull_request(TOPIC, 0, 3, 3);
    around.set_ext("consumerGroup", "Reader");
    let around = b.invoke(around).await;
    let times = store_timestamps(&around.body);
    assert_eq!(times.len(), 3);
    assert!(
        times[0] <= q0.last_timestamp && q0.last_timestamp <= times[2],
        "{times:?} {q0:?}"
    );
    assert_eq!(q0.last_timestamp, times[1]);

    // The metrics: in, out, and the lag of "CG" (computed every 5 s).
    let deadline = Instant::now() + Duration::from_secs(20);
    let lag_line = ["rocketmq_consumer_lag_messages{", "consumer_group=\"CG\""];
    let text = loop {
        let text = scrape(port).await;
        if sample(&text, &lag_line).is_some_and(|v| v == 8.0) {
            break text;
        }
        assert!(Instant::now() < deadline, "no lag of CG: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let cg = |name: &str| {
        sample(
            &text,
            &[
                name,
                "consumer_group=\"CG\"",
                "topic=\"Stats\"",
                "is_retry=\"false\"",
            ],
        )
    };
    assert_eq!(cg("rocketmq_consumer_inflight_messages{"), Some(3.0));
    assert_eq!(cg("rocketmq_consumer_ready_messages{"), Some(5.0));
    assert!(cg("rocketmq_consumer_lag_latency{").is_some_and(|ms| ms >= 0.0));
    assert!(text.contains("node_type=\"broker\""));
    assert_eq!(
        sample(
            &text,
            &[
                "rocketmq_messages_in_total{",
                "topic=\"Stats\"",
                "message_type=\"normal\"",
                "cluster=\"DefaultCluster\"",
                "node_id=\"broker-a\""
            ]
        ),
        Some(13.0)
    );
    assert_eq!(
        sample(
            &text,
            &[
                "rocketmq_messages_out_total{",
                "topic=\"Stats\"",
                "consumer_group=\"CG\""
            ]
        ),
        Some(8.0)
    );
    assert!(sample(
        &text,
        &["rocketmq_processor_watermark{", "processor=\"send\""]
    )
    .is_some());
    assert_eq!(sample(&text, &["rocketmq_broker_permission{"]), Some(6.0));
    assert!(sample(&text, &["rocketmq_topic_number{"]).is_some_and(|n| n >= 1.0));
    assert!(
        sample(&text, &["rocketmq_storage_size{", "storage_type=\"local\""])
            .is_some_and(|n| n > 0.0)
    );
    b.broker.shutdown().await;
}

/// The store timestamps of the records in a pull answer's body.
fn store_timestamps(mut body: &[u8]) -> Vec<i64> {
    let mut out = Vec::new();
    while body.len() >= 4 {
        let len = usize::try_from(i32::from_be_bytes(body[..4].try_into().unwrap())).unwrap();
        out.push(message_model::record::read_store_timestamp(&body[..len]).unwrap());
        body = &body[len..];
    }
    out
}
