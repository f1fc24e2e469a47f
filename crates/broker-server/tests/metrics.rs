//! The `/metrics` endpoint in Prometheus text format. Its own test binary:
//! the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{scrape_at, send_request, TestBroker};
use remoting_protocol::ResponseCode;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_reports_requests_rejections_and_store_figures() {
    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    let b = TestBroker::start(&[
        ("metricsListenPort", port_text.as_str()),
        // Bound apart from the other listeners (on 0.0.0.0).
        ("metricsBindAddress", "127.0.0.2"),
        ("sendMessageThreadPoolNums", "1"),
        ("sendThreadPoolQueueCapacity", "1"),
        ("faultPutLockDelayMills", "50"),
        ("earlyAdmissionEnable", "false"),
        ("adaptiveAdmissionEnable", "false"),
        ("waitTimeMillsInSendQueue", "60000"),
        ("topicQuotas", "Capped=1/s,1MiB/s"),
        ("shareWeights", "M=2"),
    ])
    .await;
    // Two sends to a topic with a quota of one message a second: the
    // second is over it.
    for i in 0..2 {
        b.invoke(send_request("Capped", 0, format!("c{i}").as_bytes(), ""))
            .await;
    }
    let b = std::sync::Arc::new(b);
    let sends: Vec<_> = (0..6)
        .map(|i| {
            let b = std::sync::Arc::clone(&b);
            tokio::spawn(async move {
                b.invoke(send_request("M", 0, format!("{i}").as_bytes(), ""))
                    .await
                    .response_code()
            })
        })
        .collect();
    let mut codes = Vec::new();
    for s in sends {
        codes.push(s.await.unwrap());
    }
    assert!(
        codes.contains(&ResponseCode::SUCCESS) && codes.contains(&ResponseCode::SYSTEM_BUSY),
        "{codes:?}"
    );
    let needles = [
        "sluice_requests_total{family=\"send\",outcome=\"accepted\"}",
        "sluice_rejections_total{family=\"send\",reason=\"overload\"}",
        "sluice_store_messages_total",
        "sluice_store_bytes_total",
        "sluice_store_put_lock_hold_seconds_bucket",
        "sluice_store_append_seconds_bucket",
        "sluice_queue_wait_seconds_bucket{queue=\"send\"",
        "sluice_queue_capacity{queue=\"send\"} 1",
        "sluice_quota_limit{topic=\"Capped\",unit=\"messages\"} 1",
        "sluice_quota_limit{topic=\"Capped\",unit=\"bytes\"} 1048576",
        "sluice_quota_refusals_total{topic=\"Capped\",unit=\"messages\"}",
        "sluice_rejections_total{family=\"send\",reason=\"over_quota\"}",
        "sluice_share_weight{queue=\"send\",share=\"M\"} 2",
        "sluice_share_queue_length{queue=\"send\",share=\"M\"} 0",
        "sluice_share_shedding{queue=\"send\",share=\"M\"} 0",
        "sluice_share_head_wait_seconds{queue=\"send\",share=\"M\"}",
        "sluice_share_served{queue=\"send\",share=\"M\"}",
        "sluice_share_queue_length{queue=\"send\",share=\"(overflow)\"} 0",
        "sluice_busy_answer_wait_seconds_bucket{family=\"send\",le=\"0.00001\"}",
        // The pool is off.
        "sluice_store_transient_pool_buffers{state=\"total\"} 0",
    ];
    // The gauges are refreshed once a second: scrape until they have been.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape_at("127.0.0.2", port).await;
        if needles.iter().all(|n| text.contains(n)) || Instant::now() >= deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let elsewhere = tokio::net::TcpStream::connect(("127.0.0.1", port)).await;
    assert!(elsewhere.is_err(), "the metrics port answers on 127.0.0.1");
    for needle in needles {
        assert!(text.contains(needle), "missing {needle} in:\n{text}");
    }
    // Every refusal here is made on arrival (queue full, quota): each was
    // answered without a wait, in the smallest bucket.
    let value = |prefix: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
            .trim()
            .parse()
            .unwrap()
    };
    let refused = value("sluice_busy_answer_wait_seconds_count{family=\"send\"} ");
    assert!(refused >= 2, "{refused}");
    assert_eq!(
        value("sluice_busy_answer_wait_seconds_bucket{family=\"send\",le=\"0.00001\"} "),
        refused
    );
    // A quota removed at run time reads 0 from the next refresh on.
    let cleared = b
        .invoke(
            remoting_protocol::RemotingCommand::request(
                remoting_protocol::RequestCode::UPDATE_BROKER_CONFIG,
            )
            .with_body(b"topicQuotas=\n".to_vec()),
        )
        .await;
    assert_eq!(cleared.response_code(), ResponseCode::SUCCESS);
    let zero = "sluice_quota_limit{topic=\"Capped\",unit=\"messages\"} 0";
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let text = scrape_at("127.0.0.2", port).await;
        if text.contains(zero) || Instant::now() >= deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(text.contains(zero), "missing {zero} in:\n{text}");
}
