//! Unit tests of `message get`'s record decoding and report, and of
//! `topic delete`'s and `topic list --cluster`'s cluster lookups.

use std::collections::{BTreeMap, BTreeSet};

use remoting_protocol::{
    body::{BrokerData, ClusterInfo, TopicConfig, TopicConfigSerializeWrapper},
    message::{
        compression::{compress, ZLIB_SYS_FLAG},
        record::{encode, patch},
        MessageToStore,
    },
};

use super::*;
use crate::render::Report;

/// One stored record of `topic` with `body` and `properties` at
/// CommitLog offset `offset`.
fn record(topic: &str, body: &[u8], properties: &str, sys_flag: i32, offset: i64) -> Vec<u8> {
    let msg = MessageToStore {
        topic: topic.into(),
        queue_id: 3,
        flag: 7,
        sys_flag,
        born_timestamp: 1_714_564_800_123,
        born_host: "10.0.0.9:5555".parse().unwrap_or_else(|e| panic!("{e}")),
        store_host: "127.0.0.1:10911".parse().unwrap_or_else(|e| panic!("{e}")),
        reconsume_times: 1,
        prepared_transaction_offset: 0,
        body: bytes::Bytes::copy_from_slice(body),
        properties: properties.into(),
    };
    let mut out = Vec::new();
    encode(&msg, 1 << 20, &mut out).unwrap_or_else(|e| panic!("{e}"));
    patch(&mut out, 42, offset, 1_714_564_801_000);
    out
}

fn props(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}\u{1}{v}\u{2}"))
        .collect()
}

#[test]
fn a_record_reads_back_with_its_fields_properties_and_text_body() {
    let p = props(&[
        ("KEYS", "k1 k2"),
        ("TAGS", "TagA"),
        ("UNIQ_KEY", "ABC"),
        ("x", "y"),
    ]);
    let rec = record("Orders", b"hello", &p, 0, 4096);
    let views = decode_records("127.0.0.1:10911", &rec, false).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(views.len(), 1);
    let v = &views[0];
    assert_eq!(v.topic, "Orders");
    assert_eq!(
        (v.queue_id, v.queue_offset, v.commit_log_offset),
        (3, 42, 4096)
    );
    assert_eq!(v.keys.as_deref(), Some("k1 k2"));
    assert_eq!(v.tags.as_deref(), Some("TagA"));
    assert_eq!(v.unique_key.as_deref(), Some("ABC"));
    assert_eq!(v.properties.get("x").map(String::as_str), Some("y"));
    assert_eq!(
        (v.born_host.as_str(), v.store_host.as_str()),
        ("10.0.0.9:5555", "127.0.0.1:10911")
    );
    assert_eq!(
        (v.born_timestamp, v.store_timestamp),
        (1_714_564_800_123, 1_714_564_801_000)
    );
    assert_eq!((v.flag, v.reconsume_times), (7, 1));
    assert_eq!(
        (v.body_encoding.as_str(), v.body.as_str(), v.body_size),
        ("utf8", "hello", 5)
    );
    assert!(!v.body_truncated);
    // The offset id names the store host and the offset, and decodes back.
    assert_eq!(v.msg_id, "7F00000100002A9F0000000000001000");
    assert_eq!(
        decode_offset_id(&v.msg_id).unwrap_or_else(|e| panic!("{e}")),
        ("127.0.0.1:10911".to_owned(), 4096)
    );
    let text = MessageReport { messages: views }.text();
    for want in [
        "Topic",
        "Orders",
        "TagA",
        "k1 k2",
        "2024-05-01 12:00:00.123",
        "UNIQ_KEY",
        "body (utf8, 5 bytes):\nhello\n",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
}

#[test]
fn binary_bodies_are_hex_and_long_bodies_are_cut_unless_asked() {
    let (enc, text, cut) = body_text(&[0xff, 0x00, 0x1a], false);
    assert_eq!((enc, text.as_str(), cut), ("hex", "FF001A", false));
    let long = "é".repeat(BODY_PREVIEW_BYTES);
    let (enc, text, cut) = body_text(long.as_bytes(), false);
    assert_eq!(enc, "utf8");
    assert!(cut);
    assert_eq!(
        text.len(),
        BODY_PREVIEW_BYTES,
        "cut on a character boundary"
    );
    let (_, all, cut) = body_text(long.as_bytes(), true);
    assert_eq!((all.len(), cut), (long.len(), false));
    let binary = vec![0xfe_u8; BODY_PREVIEW_BYTES + 1];
    let (enc, text, cut) = body_text(&binary, false);
    assert_eq!(
        (enc, text.len(), cut),
        ("hex", BODY_PREVIEW_BYTES * 2, true)
    );
    let rec = record("T", &binary, "", 0, 0);
    let report = MessageReport {
        messages: decode_records("b:1", &rec, false).unwrap_or_else(|e| panic!("{e}")),
    };
    assert!(
        report.text().contains("--full-body shows all"),
        "{}",
        report.text()
    );
    let json = serde_json::to_value(&report).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(json["messages"][0]["bodyTruncated"], true);
    assert_eq!(json["messages"][0]["bodyEncoding"], "hex");
    assert_eq!(json["messages"][0]["bodySize"], BODY_PREVIEW_BYTES + 1);
}

#[test]
fn compressed_bodies_are_shown_inflated_and_records_follow_each_other() {
    let plain = "compress me ".repeat(50);
    let packed = compress(plain.as_bytes()).unwrap_or_else(|| panic!("compressible"));
    let mut body = record("T", &packed, "", ZLIB_SYS_FLAG, 100);
    body.extend(record("U", b"second", "", 0, 300));
    let views = decode_records("b:1", &body, true).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(views.len(), 2);
    assert_eq!(views[0].body, plain);
    assert_eq!(views[0].body_note.as_deref(), Some("decompressed"));
    assert_eq!(
        (views[1].topic.as_str(), views[1].body.as_str()),
        ("U", "second")
    );
    let err = decode_records("b:1", &body[..body.len() - 3], false).unwrap_err();
    assert!(err.contains("record at byte"), "{err}");
}

#[test]
fn bad_ids_are_named() {
    let err = decode_offset_id("nothex").unwrap_err().to_string();
    assert!(err.starts_with("\"nothex\" is not a message id:"), "{err}");
}

fn broker(cluster: &str, name: &str, master: Option<&str>) -> (String, BrokerData) {
    let mut addrs = BTreeMap::new();
    if let Some(m) = master {
        addrs.insert(0, m.to_owned());
    }
    addrs.insert(1, format!("{name}-slave:1"));
    (
        name.to_owned(),
        BrokerData {
            cluster: cluster.into(),
            broker_name: name.into(),
            broker_addrs: addrs,
            ..BrokerData::default()
        },
    )
}

#[test]
fn cluster_masters_are_the_masters_of_that_clusters_brokers() {
    let info = ClusterInfo {
        broker_addr_table: [
            broker("C1", "a", Some("a:1")),
            broker("C1", "b", None),
            broker("C2", "c", Some("c:1")),
        ]
        .into_iter()
        .collect(),
        cluster_addr_table: [
            (
                "C1".to_owned(),
                BTreeSet::from(["a".to_owned(), "b".to_owned()]),
            ),
            ("C2".to_owned(), BTreeSet::from(["c".to_owned()])),
        ]
        .into_iter()
        .collect(),
    };
    let of = |c| cluster_masters(&info, c, "n:1").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(of(Some("C1")), ["a:1"]);
    assert_eq!(of(None), ["a:1", "c:1"]);
    let err = cluster_masters(&info, Some("C9"), "n:1")
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "the name server(s) n:1 know no cluster named C9 (known: C1, C2)"
    );
}

#[test]
fn cluster_topics_keep_the_name_servers_list() {
    let wrapper = TopicConfigSerializeWrapper {
        topic_config_table: ["A", "B"]
            .into_iter()
            .map(|t| {
                (
                    t.to_owned(),
                    TopicConfig {
                        topic_name: t.to_owned(),
                        read_queue_nums: 4,
                        write_queue_nums: 4,
                        perm: 6,
                        ..TopicConfig::default()
                    },
                )
            })
            .collect(),
        ..TopicConfigSerializeWrapper::default()
    };
    let names = BTreeSet::from(["A".to_owned(), "Z".to_owned()]);
    let report = cluster_topics(&names, &[("a:1".to_owned(), wrapper)]);
    let got: Vec<(&str, usize, i64)> = report
        .topics
        .iter()
        .map(|t| (t.topic.as_str(), t.brokers.len(), t.read_queues))
        .collect();
    assert_eq!(got, [("A", 1, 4), ("Z", 0, 0)]);
    let deleted = TopicDeleteReport {
        topic: "A".into(),
        cluster: Some("C1".into()),
        brokers: vec!["a:1".into()],
        name_servers: vec!["n:1".into()],
    };
    let text = deleted.text();
    assert!(
        text.starts_with("deleted topic A from cluster C1\n"),
        "{text}"
    );
    assert!(
        text.contains("DELETE_TOPIC_IN_BROKER") && text.contains("DELETE_TOPIC_IN_NAMESRV"),
        "{text}"
    );
}
