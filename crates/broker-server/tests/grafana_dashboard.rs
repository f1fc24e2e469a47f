//! The Grafana dashboard under `deploy/grafana/` queries only metrics and
//! labels the broker exports: a broker is exercised until its `/metrics`
//! page holds the series, and every name and label in every panel's `expr`
//! is looked up there (or, for series that appear only on events a short
//! run does not produce, in the source that emits them). Its own test
//! binary: the metrics recorder is installed once per process.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

use common::{pull_request, scrape, send_request, TestBroker};
use grpc_protocol::{
    v2::{QueryRouteRequest, Resource},
    MessagingServiceClient,
};
use message_model::MessageId;
use remoting_protocol::{
    header::{
        EndTransactionRequestHeader, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
    },
    RemotingCommand, RequestCode, ResponseCode,
};
use serde_json::Value;
use tonic::Request;

const DASHBOARD: &str = include_str!("../../../deploy/grafana/sluice-broker.json");

/// The source files that emit the broker's metrics.
const SOURCES: &[(&str, &str)] = &[
    ("metrics.rs", include_str!("../src/metrics.rs")),
    ("state.rs", include_str!("../src/state.rs")),
    ("stats/mod.rs", include_str!("../src/stats/mod.rs")),
    ("stats/lag.rs", include_str!("../src/stats/lag.rs")),
    ("executor.rs", include_str!("../src/executor.rs")),
    ("timer.rs", include_str!("../src/timer.rs")),
    (
        "transaction_check.rs",
        include_str!("../src/transaction_check.rs"),
    ),
    (
        "processor/end_transaction.rs",
        include_str!("../src/processor/end_transaction.rs"),
    ),
    (
        "retention_watch.rs",
        include_str!("../src/retention_watch.rs"),
    ),
    (
        "store/commit_log.rs",
        include_str!("../../store/src/commit_log.rs"),
    ),
    ("store/state.rs", include_str!("../../store/src/state.rs")),
    (
        "store/retention.rs",
        include_str!("../../store/src/retention.rs"),
    ),
];

/// Metrics the dashboard uses that this short run does not emit: each is
/// registered only when its event happens. Each must still appear, quoted,
/// in the source file named with it.
const NOT_EMITTED_IN_SHORT_RUN: &[(&str, &str)] = &[
    // Counted per topic and unit only when a send is refused for a quota.
    ("sluice_quota_refusals_total", "executor.rs"),
    ("sluice_client_quota_refusals_total", "executor.rs"),
    // Recorded only when a request is refused.
    ("sluice_busy_answer_wait_seconds", "metrics.rs"),
    // Recorded only when a timer message is stored at its instant.
    ("sluice_timer_lateness_seconds", "timer.rs"),
    // Counted only when the checker finds a half message old enough.
    ("sluice_transaction_checks_total", "transaction_check.rs"),
    // Counted only when a retention pass deletes files.
    (
        "sluice_store_retention_deleted_files_total",
        "store/retention.rs",
    ),
];

/// Labels Prometheus adds when it scrapes, and the histogram bucket label.
const SCRAPE_LABELS: &[&str] = &["instance", "job", "le"];

/// The histogram series suffixes.
const HISTOGRAM_SUFFIXES: &[&str] = &["_bucket", "_sum", "_count"];

/// Row titles, each with the panel titles it must hold.
const LAYOUT: &[(&str, &[&str])] = &[
    (
        "Flow control",
        &[
            "Rejections per second by reason",
            "Queue wait p99 (send, pull)",
            "Queue length vs capacity",
            "Put-lock hold time p99",
            "Page cache busy: put lock held now",
            "Shares shedding",
        ],
    ),
    (
        "Throughput",
        &[
            "Messages stored per second",
            "Bytes stored per second",
            "Pulls per second",
        ],
    ),
    ("Store", &["Disk used ratio", "Flush and dispatch behind"]),
    (
        "Transactions",
        &[
            "Transaction ends by outcome and source",
            "Transaction checks by outcome",
            "Half messages pending",
        ],
    ),
    ("gRPC", &["gRPC calls per second by RPC and code"]),
    (
        "RocketMQ 5 metrics",
        &[
            "Consumer lag (messages) by group and topic",
            "Consumer lag latency by group and topic",
            "Messages in per second by topic",
            "Messages out per second by topic and group",
            "Processor watermarks",
        ],
    ),
];

/// The prefixes of the broker's metric names: its own, and RocketMQ 5's.
const PREFIXES: &[&str] = &["sluice_", "rocketmq_"];

/// What a `/metrics` page holds: per metric (histograms under their base
/// name), its type and the `label="value"` pairs of its samples.
#[derive(Debug, Default)]
struct Page {
    types: BTreeMap<String, String>,
    samples: BTreeMap<String, BTreeSet<(String, String)>>,
}

impl Page {
    fn parse(text: &str) -> Self {
        let mut page = Self::default();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    page.types.insert(name.to_owned(), kind.to_owned());
                }
                continue;
            }
            if !PREFIXES.iter().any(|p| line.starts_with(p)) {
                continue;
            }
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let name = &line[..end];
            let labels = page.samples.entry(name.to_owned()).or_default();
            if line[end..].starts_with('{') {
                let close = line.rfind('}').unwrap();
                for pair in split_matchers(&line[end + 1..close]) {
                    if let Some((k, v)) = pair.split_once('=') {
                        labels.insert((k.trim().to_owned(), v.trim().trim_matches('"').to_owned()));
                    }
                }
            }
        }
        page
    }

    /// Whether `series` (a name as written in a query) is on the page: as a
    /// sample, or as a histogram's `_bucket`/`_sum`/`_count` series.
    fn has_series(&self, series: &str) -> bool {
        if self.samples.contains_key(series) && !self.is_histogram(series) {
            return true;
        }
        histogram_base(series)
            .is_some_and(|base| self.is_histogram(base) && self.samples.contains_key(series))
    }

    fn is_histogram(&self, name: &str) -> bool {
        self.types.get(name).is_some_and(|t| t == "histogram")
    }

    fn has_label(&self, label: &str) -> bool {
        self.samples
            .values()
            .any(|pairs| pairs.iter().any(|(k, _)| k == label))
    }

    fn has_value(&self, label: &str, value: &str) -> bool {
        self.samples
            .values()
            .any(|pairs| pairs.iter().any(|(k, v)| k == label && v == value))
    }
}

/// The base name of a histogram series, when `series` ends in a histogram suffix.
fn histogram_base(series: &str) -> Option<&str> {
    HISTOGRAM_SUFFIXES
        .iter()
        .find_map(|s| series.strip_suffix(s))
}

/// Splits `a="x", b=~"y|z"` at the commas outside quotes.
fn split_matchers(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

/// What one `expr` refers to.
#[derive(Debug, Default)]
struct Refs {
    /// Metric names as written (`sluice_queue_wait_seconds_bucket`).
    series: BTreeSet<String>,
    /// Label names in selectors and in `by`/`without` clauses.
    labels: BTreeSet<String>,
    /// `(label, value)` for each plain alternative of each matcher.
    values: BTreeSet<(String, String)>,
}

fn is_ident(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'
}

/// The metric names (`sluice_[a-z0-9_]+`, `rocketmq_[a-z0-9_]+`), labels
/// and label values of a PromQL expression.
fn refs(expr: &str) -> Refs {
    let mut r = Refs::default();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while i < expr.len() {
        let rest = &expr[i..];
        let boundary = i == 0 || !is_ident(bytes[i - 1] as char);
        if boundary && PREFIXES.iter().any(|p| rest.starts_with(p)) {
            let len = rest.find(|c| !is_ident(c)).unwrap_or(rest.len());
            r.series.insert(rest[..len].to_owned());
            i += len;
            continue;
        }
        if rest.starts_with('{') {
            let close = rest.find('}').unwrap();
            for m in split_matchers(&rest[1..close]) {
                let at = m.find(['=', '!']).unwrap();
                let label = m[..at].trim().to_owned();
                let value = m[at..]
                    .trim_start_matches(['=', '!', '~'])
                    .trim()
                    .trim_matches('"');
                if !value.contains('$') {
                    for alt in value.split('|') {
                        r.values.insert((label.clone(), alt.to_owned()));
                    }
                }
                r.labels.insert(label);
            }
            i += close + 1;
            continue;
        }
        for kw in ["by", "without"] {
            if boundary && rest.starts_with(kw) && rest[kw.len()..].trim_start().starts_with('(') {
                let open = rest.find('(').unwrap();
                let close = rest.find(')').unwrap();
                for l in rest[open + 1..close].split(',') {
                    r.labels.insert(l.trim().to_owned());
                }
            }
        }
        i += rest.chars().next().unwrap().len_utf8();
    }
    r
}

/// Every `expr` of every panel, with its panel's title.
fn exprs(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack: Vec<&Value> = dashboard["panels"].as_array().unwrap().iter().collect();
    while let Some(p) = stack.pop() {
        if let Some(nested) = p["panels"].as_array() {
            stack.extend(nested);
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push((p["title"].as_str().unwrap_or("").to_owned(), e.to_owned()));
            }
        }
    }
    out
}

/// The source file named `file` in [`SOURCES`].
fn source(file: &str) -> &'static str {
    SOURCES
        .iter()
        .find(|(n, _)| *n == file)
        .unwrap_or_else(|| panic!("no source {file}"))
        .1
}

/// Whether any emitting source quotes `text`.
fn in_sources(text: &str) -> bool {
    SOURCES.iter().any(|(_, s)| s.contains(text))
}

#[test]
fn dashboard_has_its_rows_and_panels() {
    let d: Value = serde_json::from_str(DASHBOARD).unwrap();
    assert_eq!(d["schemaVersion"], 39);
    assert_eq!(d["__inputs"][0]["name"], "DS_PROMETHEUS");
    let vars = d["templating"]["list"].as_array().unwrap();
    assert!(vars
        .iter()
        .any(|v| v["name"] == "datasource" && v["type"] == "datasource"));
    let instance = vars.iter().find(|v| v["name"] == "instance").unwrap();
    assert!(instance["definition"]
        .as_str()
        .unwrap()
        .starts_with("label_values("));

    // Top-level panels in order: each row's panels follow it.
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        let title = p["title"].as_str().unwrap().to_owned();
        if p["type"] == "row" {
            rows.push((title, Vec::new()));
        } else {
            assert_eq!(p["datasource"]["uid"], "${datasource}", "{title}");
            rows.last_mut().unwrap().1.push(title);
        }
    }
    for (row, panels) in LAYOUT {
        let (_, have) = rows
            .iter()
            .find(|(t, _)| t == row)
            .unwrap_or_else(|| panic!("no row {row}: {rows:?}"));
        for p in *panels {
            assert!(have.iter().any(|h| h == p), "row {row} lacks {p}: {have:?}");
        }
    }
}

#[test]
fn allow_listed_metrics_are_in_their_sources() {
    for (name, file) in NOT_EMITTED_IN_SHORT_RUN {
        assert!(
            source(file).contains(&format!("\"{name}\"")),
            "{name} is not in {file}"
        );
    }
}

const TX_PROPS: &str = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}TxDashboard\u{2}";

/// Sends a half message and commits it.
async fn half_then_commit(b: &TestBroker) {
    let answer = b
        .invoke(send_request("TxDashboard", 0, b"m", TX_PROPS))
        .await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let h: SendMessageResponseHeader = answer.decode_header().unwrap();
    let end = RemotingCommand::request_with_header(
        RequestCode::END_TRANSACTION,
        &EndTransactionRequestHeader {
            producer_group: "TxDashboard".into(),
            tran_state_table_offset: h.queue_offset,
            commit_log_offset: MessageId::decode(&h.msg_id).unwrap().commit_log_offset,
            commit_or_rollback: 8,
            from_transaction_check: Some(false),
            msg_id: h.transaction_id.clone().unwrap_or_default(),
            ..EndTransactionRequestHeader::default()
        },
    );
    let r = b.invoke(end).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_query_uses_exported_metrics_and_labels() {
    let d: Value = serde_json::from_str(DASHBOARD).unwrap();
    let exprs = exprs(&d);
    assert!(exprs.len() >= 20, "{exprs:?}");

    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    let b = TestBroker::start(&[("metricsListenPort", port_text.as_str())]).await;
    for i in 0..3 {
        let r = b
            .invoke(send_request("Dashboard", 0, format!("m{i}").as_bytes(), ""))
            .await;
        assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    }
    let pulled = b.invoke(pull_request("Dashboard", 0, 0, 8)).await;
    assert_eq!(
        pulled.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        pulled.remark
    );
    half_then_commit(&b).await;
    // A committed offset behind the end: the lag gauges appear.
    let commit = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "CG".into(),
            topic: "Dashboard".into(),
            queue_id: 0,
            commit_offset: 1,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        b.invoke(commit).await.response_code(),
        ResponseCode::SUCCESS
    );
    let grpc = b.broker.grpc_addr().unwrap().port();
    let mut c = MessagingServiceClient::connect(format!("http://127.0.0.1:{grpc}"))
        .await
        .unwrap();
    let mut r = Request::new(QueryRouteRequest {
        topic: Some(Resource {
            resource_namespace: String::new(),
            name: "Dashboard".into(),
        }),
        endpoints: None,
    });
    r.metadata_mut()
        .insert("x-mq-client-id", "dash@1".parse().unwrap());
    c.query_route(r).await.unwrap();

    // Emitted series, with the labels they carry in this run.
    let mut wanted: BTreeSet<String> = BTreeSet::new();
    for (_, e) in &exprs {
        wanted.extend(refs(e).series);
    }
    let allowed = |s: &str| {
        let base = histogram_base(s).unwrap_or(s);
        NOT_EMITTED_IN_SHORT_RUN.iter().any(|(n, _)| *n == base)
    };
    // Gauges are refreshed every second, lag every five: scrape until all
    // are there.
    let deadline = Instant::now() + Duration::from_secs(20);
    let page = loop {
        let page = Page::parse(&scrape(port).await);
        let done = wanted.iter().all(|s| allowed(s) || page.has_series(s));
        if done || Instant::now() > deadline {
            break page;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    b.broker.shutdown().await;

    let mut problems = Vec::new();
    for (title, e) in &exprs {
        let r = refs(e);
        for s in &r.series {
            if page.has_series(s) {
                continue;
            }
            let base = histogram_base(s).unwrap_or(s);
            match NOT_EMITTED_IN_SHORT_RUN.iter().find(|(n, _)| *n == base) {
                Some((n, file)) if source(file).contains(&format!("\"{n}\"")) => {}
                _ => problems.push(format!("{title}: series {s} not exported")),
            }
        }
        for l in &r.labels {
            let known = SCRAPE_LABELS.contains(&l.as_str())
                || page.has_label(l)
                || in_sources(&format!("\"{l}\" =>"));
            if !known {
                problems.push(format!("{title}: label {l} not exported"));
            }
        }
        for (l, v) in &r.values {
            let known = page.has_value(l, v) || in_sources(&format!("\"{v}\""));
            if !known {
                problems.push(format!("{title}: {l}=\"{v}\" not exported"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{problems:#?}\nscraped: {:#?}",
        page.samples.keys().collect::<Vec<_>>()
    );
}
