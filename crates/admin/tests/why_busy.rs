//! `sluice-admin why-busy` against a real broker in-process, made busy in
//! each way the flow control knows: the put lock held past the page-cache
//! limit, a full send queue, an exhausted transient store pool, a SYNC_FLUSH
//! backlog behind slow flushes; and an idle broker, watched twice.
#![allow(clippy::unwrap_used)]

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use admin::Cli;
use clap::Parser;
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    body::{self, KvTable},
    header::{SendMessageRequestHeader, SendMessageRequestHeaderV2},
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;

mod common;
use common::{bounded, poll_within, TestBroker};

/// How long and how often the tests poll for a busy broker to show.
const POLL_LIMIT: Duration = Duration::from_secs(20);
const POLL_EVERY: Duration = Duration::from_millis(10);

/// `why-busy` against a test broker.
trait WhyBusy {
    async fn why_busy(&self, extra: &[&str]) -> Vec<Value>;
    async fn finding(&self, mechanism: &str) -> Value;
}

impl WhyBusy for TestBroker {
    /// `sluice-admin --json why-busy --broker <this> <extra>`, each look
    /// parsed.
    async fn why_busy(&self, extra: &[&str]) -> Vec<Value> {
        let argv = [
            "sluice-admin",
            "--json",
            "--timeout-ms",
            "3000",
            "why-busy",
            "--broker",
            &self.addr,
        ]
        .into_iter()
        .chain(extra.iter().copied());
        let cli = Cli::try_parse_from(argv).unwrap();
        let out = admin::run(&cli).await.unwrap();
        serde_json::Deserializer::from_str(&out)
            .into_iter::<Value>()
            .map(|v| v.unwrap_or_else(|e| panic!("{e}: {out}")))
            .collect()
    }

    /// One look's finding for `mechanism`.
    async fn finding(&self, mechanism: &str) -> Value {
        let look = self.why_busy(&[]).await.remove(0);
        finding_of(&look, mechanism)
    }
}

fn finding_of(look: &Value, mechanism: &str) -> Value {
    look["brokers"][0]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["mechanism"] == mechanism)
        .unwrap_or_else(|| panic!("no {mechanism} finding: {look}"))
        .clone()
}

/// A `SEND_MESSAGE_V2` request for queue 0 of `topic`.
fn send_request(topic: &str, body: &[u8]) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2::from(SendMessageRequestHeader {
        producer_group: "WhyBusyProducers".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        born_timestamp: 1_700_000_000_000,
        properties: Some(String::new()),
        ..SendMessageRequestHeader::default()
    });
    RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(body.to_vec())
}

/// `senders` tasks sending to `topic` until the load is stopped, each on
/// its own connection.
struct Load {
    stop: Arc<AtomicBool>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(addr: &str, topic: &str, senders: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let tasks = (0..senders)
            .map(|_| {
                let (stop, addr, topic) = (Arc::clone(&stop), addr.to_owned(), topic.to_owned());
                tokio::spawn(async move {
                    let client = RemotingClient::new(ClientOptions::default());
                    let mut remarks = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let answer = client
                            .invoke(&addr, send_request(&topic, b"load"), Duration::from_secs(5))
                            .await;
                        if let Ok(a) = answer {
                            if a.response_code() == ResponseCode::SYSTEM_BUSY {
                                remarks.push(a.remark.unwrap_or_default());
                                // A refusal comes back at once: pace the retry.
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                        }
                    }
                    client.close_all().await;
                    remarks
                })
            })
            .collect();
        Self { stop, tasks }
    }

    /// Stops the senders and returns the busy remarks they were given.
    async fn stop(self) -> Vec<String> {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        for t in self.tasks {
            all.extend(t.await.unwrap());
        }
        all
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_put_lock_is_named_with_its_figures_and_the_injected_delay() {
    bounded(async {
        let b = TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("faultPutLockDelayMills", "400"),
            ("osPageCacheBusyTimeOutMills", "100"),
            ("waitTimeMillsInSendQueue", "60000"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await;
        let load = Load::start(&b.addr, "PutLock", 4);
        let busy = poll_within(
            POLL_LIMIT,
            POLL_EVERY,
            "why-busy sees the page cache busy",
            || async {
                let f = b.finding("page_cache").await;
                (f["state"] == "REJECTING" && f["value"].as_f64()? >= 100.0).then_some(f)
            },
        )
        .await;
        let remarks = load.stop().await;
        assert_eq!(busy["limit"], 100.0, "{busy}");
        assert_eq!(busy["answer"], "[REJECTREQUEST] [PCBUSY_CLEAN_QUEUE]");
        let figures = busy["figures"].as_str().unwrap();
        assert!(
            figures.starts_with("put lock held ") && figures.contains(" ms of 100 ms ("),
            "{figures}"
        );
        let why = busy["why"].as_str().unwrap();
        assert!(
            why.contains("past osPageCacheBusyTimeOutMills (100 ms)"),
            "{why}"
        );
        assert!(
            busy["action"]
                .as_str()
                .unwrap()
                .starts_with("faultPutLockDelayMills is 400 ms"),
            "{busy}"
        );
        assert!(
            remarks
                .iter()
                .any(|r| r.starts_with("[REJECTREQUEST]") || r.starts_with("[PCBUSY_CLEAN_QUEUE]")),
            "the broker really refused: {remarks:?}"
        );
        // The refusals were counted: since boot they keep it at least at risk.
        let after = b.finding("page_cache").await;
        assert!(after["refused"].as_u64().unwrap() > 0, "{after}");
        assert_ne!(after["state"], "OK", "{after}");
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_send_queue_is_named_overload_with_its_capacity() {
    bounded(async {
        let b = TestBroker::start(&[
            ("sendMessageThreadPoolNums", "1"),
            ("sendThreadPoolQueueCapacity", "2"),
            ("faultPutLockDelayMills", "50"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
            ("sendShareKey", "none"),
        ])
        .await;
        let load = Load::start(&b.addr, "Tiny", 8);
        let full = poll_within(
            POLL_LIMIT,
            POLL_EVERY,
            "why-busy sees the send queue full",
            || async {
                let look = b.why_busy(&[]).await.remove(0);
                let f = finding_of(&look, "send_queue_full");
                (f["state"] == "REJECTING" && f["value"] == 2.0).then_some(look)
            },
        )
        .await;
        let remarks = load.stop().await;
        let f = finding_of(&full, "send_queue_full");
        assert_eq!(f["answer"], "[OVERLOAD]");
        assert_eq!(f["limit"], 2.0);
        assert!(
            f["figures"]
                .as_str()
                .unwrap()
                .starts_with("2 of 2 queued (100 %)"),
            "{f}"
        );
        assert!(
            f["why"]
                .as_str()
                .unwrap()
                .contains("sendThreadPoolQueueCapacity (2)"),
            "{f}"
        );
        assert!(
            f["action"]
                .as_str()
                .unwrap()
                .contains("sendThreadPoolQueueCapacity"),
            "{f}"
        );
        let verdict = full["brokers"][0]["verdict"].as_str().unwrap();
        assert!(
            verdict.starts_with("REJECTING:") && verdict.contains("send queue full"),
            "{verdict}"
        );
        assert!(
            remarks.iter().any(|r| r.starts_with("[OVERLOAD]")),
            "the broker really refused: {remarks:?}"
        );
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_transient_store_pool_is_named_apart_from_the_page_cache() {
    bounded(async {
        let b = TestBroker::start(&[
            ("transientStorePoolEnable", "true"),
            ("transientStorePoolSize", "1"),
        ])
        .await;
        let client = RemotingClient::new(ClientOptions::default());
        // The first send makes the first file, which takes the only buffer.
        let first = client
            .invoke(
                &b.addr,
                send_request("Pool", b"first"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(first.response_code(), ResponseCode::SUCCESS, "{first:?}");
        let refused = client
            .invoke(
                &b.addr,
                send_request("Pool", b"second"),
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!(
            refused.remark.as_deref(),
            Some("[REJECTREQUEST]system busy, start flow control for a while")
        );
        client.close_all().await;
        let look = poll_within(
            POLL_LIMIT,
            POLL_EVERY,
            "why-busy sees the pool empty",
            || async {
                let look = b.why_busy(&[]).await.remove(0);
                (finding_of(&look, "transient_pool")["state"] == "REJECTING").then_some(look)
            },
        )
        .await;
        let pool = finding_of(&look, "transient_pool");
        assert_eq!(pool["figures"], "1 of 1 buffers in use (100 %)");
        assert_eq!(pool["refused"], 1, "the refusal is the pool's: {pool}");
        assert!(
            pool["action"]
                .as_str()
                .unwrap()
                .contains("transientStorePoolSize"),
            "{pool}"
        );
        // The page cache is not to blame.
        let page = finding_of(&look, "page_cache");
        assert_eq!(page["state"], "OK", "{page}");
        assert_eq!(page["refused"], 0, "{page}");
        assert_eq!(
            look["brokers"][0]["findings"][0]["mechanism"],
            "transient_pool"
        );
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_broker_is_ok_everywhere_and_watch_counts_since_the_previous_look() {
    bounded(async {
        let b = TestBroker::start(&[]).await;
        let looks = b.why_busy(&["--watch", "0.2", "--count", "2"]).await;
        assert_eq!(looks.len(), 2);
        for (n, look) in looks.iter().enumerate() {
            assert_eq!(look["refresh"], n + 1);
            let d = &look["brokers"][0];
            assert_eq!(d["broker"], b.addr.as_str());
            let findings = d["findings"].as_array().unwrap();
            assert_eq!(findings.len(), 12, "{d}");
            // The disk is the machine's, shared with everything else on
            // it: its finding follows its own figure.
            let disk_full = findings
                .iter()
                .find(|f| f["mechanism"] == "disk")
                .and_then(|f| f["value"].as_f64())
                .is_some_and(|used| used >= 85.0);
            for f in findings {
                if f["mechanism"] == "disk" && disk_full {
                    assert_ne!(f["state"], "OK", "{f}");
                    continue;
                }
                assert_eq!(f["state"], "OK", "{f}");
                assert_eq!(f["action"], "Nothing to do.", "{f}");
            }
            if !disk_full {
                assert!(d["verdict"].as_str().unwrap().starts_with("OK:"), "{d}");
            }
        }
        assert_eq!(looks[0]["brokers"][0]["window"]["kind"], "sinceBoot");
        let second = &looks[1]["brokers"][0]["window"];
        assert_eq!(second["kind"], "sincePreviousLook");
        // The time between the two samples: positive (its length depends on
        // when each sample was answered, not only on the refresh period).
        assert!(second["seconds"].as_f64().unwrap() > 0.0, "{second}");

        // The text report, and the keys the diagnosis reads.
        let cli = Cli::try_parse_from(["sluice-admin", "why-busy", "--broker", &b.addr]).unwrap();
        let text = admin::run(&cli).await.unwrap();
        // Only the machine's disk may keep the verdict from OK.
        let verdict = text.lines().nth(1).unwrap_or_default();
        assert!(
            verdict.starts_with("OK: no flow-control mechanism")
                || verdict == "AT RISK: disk space."
                || verdict == "REJECTING: disk space.",
            "{text}"
        );
        assert!(text.contains("OK     page cache busy (put lock)"), "{text}");
        let client = RemotingClient::new(ClientOptions::default());
        let info = client
            .invoke(
                &b.addr,
                RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO),
                Duration::from_secs(3),
            )
            .await
            .unwrap();
        let table = body::from_json::<KvTable>(&info.body).unwrap().table;
        client.close_all().await;
        assert_eq!(table["osPageCacheBusy"], "false");
        assert_eq!(table["transientStorePoolTotalBuffers"], "0");
        assert_eq!(table["sendQueueSheddingShares"], "0");
        assert_eq!(table["sendQueueAdmissionTargetMills"], "5");
        let unflushed: u64 = table["remainHowManyDataToFlushBytes"].parse().unwrap();
        assert!(
            table["remainHowManyDataToFlush"].ends_with(" B")
                || table["remainHowManyDataToFlush"].ends_with("iB"),
            "{unflushed}: {}",
            table["remainHowManyDataToFlush"]
        );
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_sync_flush_is_named_with_its_backlog_against_sync_flush_timeout() {
    bounded(async {
        // Every flush waits 3 s; sends wait for their flush at most 100 ms,
        // so more than 100 MiB/s x 100 ms = 10 MiB unflushed cannot make it.
        let b = TestBroker::start(&[
            ("flushDiskType", "SYNC_FLUSH"),
            ("faultFlushDelayMills", "3000"),
            ("syncFlushTimeout", "100"),
            ("earlyAdmissionEnable", "false"),
            ("adaptiveAdmissionEnable", "false"),
        ])
        .await;
        let client = Arc::new(RemotingClient::new(ClientOptions::default()));
        let body = vec![b's'; 256 * 1024];
        // 64 sends of 256 KiB at once: 16 MiB written while a flush sleeps.
        let sends: Vec<_> = (0..64)
            .map(|_| {
                let (client, addr, body) = (Arc::clone(&client), b.addr.clone(), body.clone());
                tokio::spawn(async move {
                    client
                        .invoke(
                            &addr,
                            send_request("SlowFlush", &body),
                            Duration::from_secs(10),
                        )
                        .await
                        .map(|a| a.response_code())
                })
            })
            .collect();
        let flush = poll_within(
            POLL_LIMIT,
            POLL_EVERY,
            "why-busy sees the flush backlog",
            || async {
                let f = b.finding("flush").await;
                (f["state"] != "OK").then_some(f)
            },
        )
        .await;
        let mut timeouts = 0;
        for s in sends {
            if s.await.unwrap().unwrap() == ResponseCode::FLUSH_DISK_TIMEOUT {
                timeouts += 1;
            }
        }
        client.close_all().await;
        let limit = 10.0 * 1024.0 * 1024.0;
        assert_eq!(flush["limit"].as_f64(), Some(limit), "{flush}");
        assert!(flush["value"].as_f64().unwrap() >= limit / 2.0, "{flush}");
        assert_eq!(flush["answer"], "FLUSH_DISK_TIMEOUT");
        let figures = flush["figures"].as_str().unwrap();
        assert!(figures.contains(" unflushed of 10.0 MiB ("), "{figures}");
        let why = flush["why"].as_str().unwrap();
        assert!(
            why.starts_with("Under SYNC_FLUSH, ") && why.contains("syncFlushTimeout (100 ms)"),
            "{why}"
        );
        assert!(timeouts > 0, "sends really waited past syncFlushTimeout");
        b.broker.shutdown().await;
    })
    .await;
}
