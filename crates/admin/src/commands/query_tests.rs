//! Unit tests of `message get --key` / `--id <unique key>`: the request,
//! the defaults, the filter of hash collisions, the addresses asked and
//! the error when nothing is left.

use std::collections::BTreeMap;

use remoting_protocol::{
    body::{BrokerData, TopicRouteData},
    header::QueryMessageRequestHeader,
};

use super::*;

fn message(topic: &str, keys: Option<&str>, unique_key: Option<&str>) -> MessageView {
    MessageView {
        msg_id: "7F00000100002A9F0000000000000000".into(),
        topic: topic.into(),
        keys: keys.map(str::to_owned),
        unique_key: unique_key.map(str::to_owned),
        ..MessageView::default()
    }
}

#[test]
fn a_key_query_has_mqadmin_defaults_and_says_it_is_not_by_unique_key() {
    let q = KeyQuery::by_key("T", "k", None, None, None);
    assert_eq!((q.max_num, q.begin_ms, q.end_ms), (64, 0, i64::MAX));
    assert!(!q.unique);
    let r = q.request();
    assert_eq!(
        r.request_code(),
        remoting_protocol::RequestCode::QUERY_MESSAGE
    );
    assert_eq!(r.ext("_UNIQUE_KEY_QUERY"), Some("false"));
    let h: QueryMessageRequestHeader = r.decode_header().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((h.topic.as_str(), h.key.as_str()), ("T", "k"));
    assert_eq!(
        (h.max_num, h.begin_timestamp, h.end_timestamp),
        (64, 0, i64::MAX)
    );
    let q = KeyQuery::by_key("T", "k", Some(5), Some(10), Some(20));
    assert_eq!((q.max_num, q.begin_ms, q.end_ms), (5, 10, 20));
}

#[test]
fn a_unique_key_query_looks_three_days_back_for_32() {
    let now = 1_714_564_800_000;
    let q = KeyQuery::by_unique_key("T", "U", now);
    assert!(q.unique);
    assert_eq!(
        (q.max_num, q.begin_ms, q.end_ms),
        (32, now - 3 * 24 * 3600 * 1000, i64::MAX)
    );
    assert_eq!(q.request().ext("_UNIQUE_KEY_QUERY"), Some("true"));
    assert_eq!(
        KeyQuery::by_unique_key("T", "U", 5).begin_ms,
        5 - UNIQUE_KEY_WINDOW_MS
    );
}

#[test]
fn the_key_filter_keeps_whole_keys_of_the_topic_only() {
    let q = KeyQuery::by_key("T", "a", None, None, None);
    assert!(q.matches(&message("T", Some("a b"), None)));
    assert!(q.matches(&message("T", Some("b a"), None)));
    assert!(q.matches(&message("T", Some("a"), None)));
    assert!(
        !q.matches(&message("T", Some("ab"), None)),
        "a prefix is not the key"
    );
    assert!(!q.matches(&message("T", Some("b c"), None)));
    assert!(
        !q.matches(&message("T", None, Some("a"))),
        "the unique key is not a key"
    );
    assert!(
        !q.matches(&message("Other", Some("a b"), None)),
        "another topic"
    );
}

#[test]
fn the_unique_key_filter_compares_the_unique_key_else_the_id() {
    let q = KeyQuery::by_unique_key("T", "U1", 0);
    assert!(q.matches(&message("T", None, Some("U1"))));
    assert!(!q.matches(&message("T", Some("U1"), Some("U2"))));
    assert!(!q.matches(&message("T", None, None)));
    let by_id = KeyQuery::by_unique_key("T", "7F00000100002A9F0000000000000000", 0);
    assert!(
        by_id.matches(&message("T", None, None)),
        "no UNIQ_KEY: the offset id"
    );
}

#[test]
fn collisions_are_dropped_and_brokers_keep_their_order() {
    let q = KeyQuery::by_key("T", "a", None, None, None);
    let answers = vec![
        (
            "b1:1".to_owned(),
            BrokerAnswer::Found(vec![
                message("T", Some("a b"), Some("U1")),
                message("T", Some("zz"), Some("U2")),
            ]),
        ),
        ("b2:1".to_owned(), BrokerAnswer::NotFound("none".into())),
        (
            "b3:1".to_owned(),
            BrokerAnswer::Found(vec![message("T", Some("a"), Some("U3"))]),
        ),
    ];
    let kept = filter_answers(&q, answers).unwrap_or_else(|e| panic!("{e}"));
    let ids: Vec<_> = kept.iter().map(|m| m.unique_key.as_deref()).collect();
    assert_eq!(ids, [Some("U1"), Some("U3")]);
}

#[test]
fn nothing_left_is_an_error_naming_topic_key_and_each_answer() {
    let q = KeyQuery::by_key("Orders", "k9", None, None, None);
    let answers = vec![
        (
            "127.0.0.1:10911".to_owned(),
            BrokerAnswer::NotFound("can not find message, maybe time range not correct".into()),
        ),
        (
            "127.0.0.1:10921".to_owned(),
            BrokerAnswer::Found(vec![message("Orders", Some("other"), None)]),
        ),
    ];
    let e = filter_answers(&q, answers).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, AdminError::NoMessage { .. }), "{text}");
    for want in [
        "query message by key finished, but no message",
        "topic Orders",
        "\"k9\"",
        "at any time",
        "QUERY_MESSAGE",
        "127.0.0.1:10911: QUERY_NOT_FOUND (22) can not find message",
        "127.0.0.1:10921: 1 found, 1 of them under another key of the same hash",
    ] {
        assert!(text.contains(want), "{want:?} in {text}");
    }
    let e = filter_answers(
        &KeyQuery::by_unique_key("Orders", "U", 1_714_564_800_000),
        vec![],
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("by unique key") && e.contains("since 2024-04-28 12:00:00.000 UTC"),
        "{e}"
    );
}

#[test]
fn each_broker_is_asked_at_its_master_else_a_replica() {
    let broker = |name: &str, addrs: &[(i64, &str)]| BrokerData {
        broker_name: name.into(),
        broker_addrs: addrs
            .iter()
            .map(|(id, a)| (*id, (*a).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        ..BrokerData::default()
    };
    let route = TopicRouteData {
        broker_datas: vec![
            broker("b", &[(1, "b-slave:1")]),
            broker("a", &[(0, "a-master:1"), (1, "a-slave:1")]),
            broker("c", &[]),
        ],
        ..TopicRouteData::default()
    };
    assert_eq!(query_addrs(&route), ["a-master:1", "b-slave:1"]);
}

#[tokio::test]
async fn join_all_runs_the_calls_together_and_keeps_their_order() {
    let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
    // The first waits for the second: one after the other would never end.
    let first = async move { rx.await.unwrap_or(0) + 1 };
    let second = async move {
        let _ = tx.send(41);
        0
    };
    let both: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = u32>>>> =
        vec![Box::pin(first), Box::pin(second)];
    let out = tokio::time::timeout(std::time::Duration::from_secs(5), join_all(both))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out, [42, 0]);
}
