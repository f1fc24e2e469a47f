//! `sluice-admin message get`, `topic delete` and `topic list --cluster`
//! against a real broker in-process with its embedded name server: a sent
//! message read back by its offset id and by CommitLog offset, with its
//! keys, tags, properties and body; messages found by key and by unique
//! key (`QUERY_MESSAGE`); a topic deleted from the broker and the name
//! server; failures that name the broker, the request and the code.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use admin::AdminError;
use producer_client::{Message, Producer, ProducerConfig};
use serde_json::Value;

mod common;
use common::{bounded, poll, TestBroker};

/// The cluster and master address of the only broker, once registered.
async fn registered(b: &TestBroker) -> (String, String) {
    let cluster = poll("the broker registers", || async {
        let c = b.json(&["cluster"]).await.ok()?;
        (!c["brokers"].as_array()?.is_empty()).then_some(c)
    })
    .await;
    let first = &cluster["brokers"][0];
    (
        first["cluster"].as_str().unwrap().to_owned(),
        first["addr"].as_str().unwrap().to_owned(),
    )
}

fn listed(list: &Value, topic: &str) -> bool {
    list["topics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["topic"] == topic)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_get_reads_a_sent_message_by_offset_id_and_by_offset() {
    bounded(async {
        let b = TestBroker::start(&[]).await;
        let (_, master) = registered(&b).await;
        let producer = Producer::start(ProducerConfig::with_namesrv(&b.namesrv))
            .await
            .unwrap();
        let sent = producer
            .send(
                Message::new("ViewTopic", "hello view")
                    .with_tags("TagV")
                    .with_key("order-7")
                    .with_property("color", "blue"),
            )
            .await
            .unwrap();
        let binary = producer
            .send(Message::new("ViewTopic", vec![0xff_u8; 600]))
            .await
            .unwrap();
        producer.shutdown().await;

        let got = b
            .json(&["message", "get", "--id", &sent.offset_msg_id])
            .await
            .unwrap();
        let m = &got["messages"][0];
        assert_eq!(got["messages"].as_array().unwrap().len(), 1, "{got}");
        assert_eq!(m["topic"], "ViewTopic");
        assert_eq!(m["msgId"], sent.offset_msg_id.as_str());
        assert_eq!(m["uniqueKey"], sent.msg_id.as_str());
        assert_eq!(m["queueId"], sent.message_queue.queue_id);
        assert_eq!(m["queueOffset"], sent.queue_offset);
        assert_eq!(m["keys"], "order-7");
        assert_eq!(m["tags"], "TagV");
        assert_eq!(m["properties"]["color"], "blue");
        assert_eq!(m["storeHost"], master.as_str());
        assert!(m["storeTimestamp"].as_i64().unwrap() >= m["bornTimestamp"].as_i64().unwrap());
        assert_eq!(
            (m["bodyEncoding"].as_str(), m["body"].as_str()),
            (Some("utf8"), Some("hello view"))
        );
        assert_eq!(m["bodyTruncated"], false);

        // The same record by its CommitLog offset, as a table.
        let offset = m["commitLogOffset"].as_i64().unwrap().to_string();
        let text = b
            .admin(&[
                "message",
                "get",
                "--offset",
                &offset,
                "--broker",
                &master,
                "--topic",
                "ViewTopic",
            ])
            .await
            .unwrap();
        for want in [
            "ViewTopic",
            "TagV",
            "order-7",
            "color",
            "body (utf8, 10 bytes):\nhello view\n",
        ] {
            assert!(text.contains(want), "{want:?} in {text}");
        }

        // A binary body: hex, cut unless asked for in full.
        let cut = b
            .json(&["message", "get", "--id", &binary.offset_msg_id])
            .await
            .unwrap();
        let m = &cut["messages"][0];
        assert_eq!(
            (m["bodyEncoding"].as_str(), m["bodyTruncated"].as_bool()),
            (Some("hex"), Some(true))
        );
        assert_eq!(m["body"].as_str().unwrap().len(), 1024);
        let full = b
            .json(&[
                "message",
                "get",
                "--id",
                &binary.offset_msg_id,
                "--full-body",
            ])
            .await
            .unwrap();
        assert_eq!(
            full["messages"][0]["body"].as_str().unwrap(),
            "FF".repeat(600)
        );

        // Another topic asked for, an offset with no message, a bad id.
        let err = b
            .admin(&[
                "message",
                "get",
                "--id",
                &sent.offset_msg_id,
                "--topic",
                "Other",
            ])
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::OtherTopic { .. }), "{err}");
        let err = b
            .admin(&[
                "message",
                "get",
                "--offset",
                "999999999",
                "--broker",
                &master,
            ])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&master)
                && err.contains("VIEW_MESSAGE_BY_ID")
                && err.contains("SYSTEM_ERROR (1)"),
            "{err}"
        );
        let err = b
            .admin(&["message", "get", "--id", "XYZ"])
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::NeedsTopic { .. }), "{err}");
        assert!(err.to_string().contains("needs --topic"), "{err}");
        b.broker.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topic_delete_removes_a_topic_from_the_broker_and_the_name_server() {
    bounded(async {
        let b = TestBroker::start(&[]).await;
        let (cluster, master) = registered(&b).await;
        b.admin(&["topic", "create", "--topic", "DoomedTopic", "--queues", "2"])
            .await
            .unwrap();
        b.admin(&["topic", "create", "--topic", "KeptTopic", "--queues", "2"])
            .await
            .unwrap();
        // The name server learns both at the broker's next registration.
        poll("the cluster's topics include both", || async {
            let l = b
                .json(&["topic", "list", "--cluster", &cluster])
                .await
                .ok()?;
            (listed(&l, "DoomedTopic") && listed(&l, "KeptTopic")).then_some(())
        })
        .await;
        let in_cluster = b
            .json(&["topic", "list", "--cluster", &cluster])
            .await
            .unwrap();
        let kept = in_cluster["topics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["topic"] == "KeptTopic")
            .unwrap();
        assert_eq!(kept["brokers"][0], master.as_str(), "{kept}");
        assert_eq!(kept["readQueues"], 2, "{kept}");

        let deleted = b
            .json(&[
                "topic",
                "delete",
                "--topic",
                "DoomedTopic",
                "--cluster",
                &cluster,
            ])
            .await
            .unwrap();
        assert_eq!(deleted["brokers"][0], master.as_str(), "{deleted}");
        assert_eq!(deleted["nameServers"][0], b.namesrv.as_str(), "{deleted}");
        assert_eq!(deleted["cluster"], cluster.as_str());
        // Gone from the broker at once and from the name server, which the
        // broker's later registrations no longer bring it back to.
        let on_broker = b.json(&["topic", "list"]).await.unwrap();
        assert!(!listed(&on_broker, "DoomedTopic"), "{on_broker}");
        assert!(listed(&on_broker, "KeptTopic"), "{on_broker}");
        let in_cluster = b
            .json(&["topic", "list", "--cluster", &cluster])
            .await
            .unwrap();
        assert!(!listed(&in_cluster, "DoomedTopic"), "{in_cluster}");
        assert!(listed(&in_cluster, "KeptTopic"), "{in_cluster}");
        let err = b
            .admin(&["topic", "route", "--topic", "DoomedTopic"])
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::NoRoute { .. }), "{err}");

        let err = b
            .admin(&[
                "topic",
                "delete",
                "--topic",
                "KeptTopic",
                "--cluster",
                "NoSuchCluster",
            ])
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("know no cluster named NoSuchCluster"), "{err}");
        let err = b
            .admin(&["topic", "delete", "--topic", "TBW102"])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&master)
                && err.contains("DELETE_TOPIC_IN_BROKER")
                && err.contains("INVALID_PARAMETER"),
            "{err}"
        );
        b.broker.shutdown().await;
    })
    .await;
}

/// The unique keys of the messages of a `message get --json` answer.
fn unique_keys(got: &Value) -> BTreeSet<String> {
    got["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["uniqueKey"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_get_finds_messages_by_key_and_by_unique_key() {
    bounded(async {
        let b = TestBroker::start(&[]).await;
        registered(&b).await;
        let producer = Producer::start(ProducerConfig::with_namesrv(&b.namesrv))
            .await
            .unwrap();
        let send = |topic: &'static str, body: &'static str, keys: &'static [&'static str]| {
            let producer = &producer;
            async move {
                let mut m = Message::new(topic, body);
                for k in keys {
                    m = m.with_key(*k);
                }
                producer.send(m).await.unwrap().msg_id
            }
        };
        let ab = send("KeyTopic", "a and b", &["a", "b"]).await;
        let a = send("KeyTopic", "only a", &["a"]).await;
        let c = send("KeyTopic", "c", &["c"]).await;
        let elsewhere = send("OtherKeyTopic", "a and b elsewhere", &["a", "b"]).await;
        producer.shutdown().await;
        assert_eq!(
            [&ab, &a, &c, &elsewhere]
                .into_iter()
                .collect::<BTreeSet<_>>()
                .len(),
            4,
            "distinct unique keys"
        );

        // The index is written after the CommitLog: wait until it has both.
        let by_a = poll("key a is indexed", || async {
            let got = b
                .json(&["message", "get", "--key", "a", "--topic", "KeyTopic"])
                .await
                .ok()?;
            (got["messages"].as_array()?.len() == 2).then_some(got)
        })
        .await;
        assert_eq!(
            unique_keys(&by_a),
            BTreeSet::from([ab.clone(), a.clone()]),
            "{by_a}"
        );
        assert!(
            by_a["messages"]
                .as_array()
                .unwrap()
                .iter()
                .all(|m| m["topic"] == "KeyTopic"),
            "{by_a}"
        );
        let by_b = b
            .json(&["message", "get", "--key", "b", "--topic", "KeyTopic"])
            .await
            .unwrap();
        assert_eq!(unique_keys(&by_b), BTreeSet::from([ab.clone()]), "{by_b}");
        assert_eq!(by_b["messages"][0]["keys"], "a b");
        // The window and the count are passed on.
        let capped = b
            .json(&[
                "message", "get", "--key", "a", "--topic", "KeyTopic", "--max", "1",
            ])
            .await
            .unwrap();
        assert_eq!(capped["messages"].as_array().unwrap().len(), 1, "{capped}");
        let err = b
            .admin(&[
                "message", "get", "--key", "a", "--topic", "KeyTopic", "--end", "1",
            ])
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::NoMessage { .. }), "{err}");
        // Several messages print one after another.
        let text = b
            .admin(&["message", "get", "--key", "a", "--topic", "KeyTopic"])
            .await
            .unwrap();
        assert_eq!(text.matches("message from broker").count(), 2, "{text}");
        for want in [ab.as_str(), a.as_str(), "only a", "a and b"] {
            assert!(text.contains(want), "{want:?} in {text}");
        }

        // By unique key: the id does not name a message as an offset id.
        let by_id = poll("the unique key is indexed", || async {
            b.json(&["message", "get", "--id", &c, "--topic", "KeyTopic"])
                .await
                .ok()
        })
        .await;
        assert_eq!(unique_keys(&by_id), BTreeSet::from([c.clone()]), "{by_id}");
        assert_eq!(by_id["messages"][0]["body"], "c");
        let err = b
            .admin(&["message", "get", "--id", &c, "--topic", "OtherKeyTopic"])
            .await
            .unwrap_err();
        assert!(matches!(err, AdminError::NoMessage { .. }), "{err}");
        let err = b
            .admin(&["message", "get", "--id", "not-an-id"])
            .await
            .unwrap_err();
        assert!(err.to_string().contains("needs --topic"), "{err}");

        // An unknown key: an error naming the topic and the key, and a
        // non-zero exit of the tool.
        let err = b
            .admin(&["message", "get", "--key", "nope-42", "--topic", "KeyTopic"])
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no message")
                && err.contains("KeyTopic")
                && err.contains("nope-42")
                && err.contains("QUERY_NOT_FOUND (22)")
                && err.contains(&b.addr),
            "{err}"
        );
        let namesrv = b.namesrv.clone();
        let out = tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_sluice-admin"))
                .args(["--namesrv", &namesrv, "message", "get"])
                .args(["--key", "nope-42", "--topic", "KeyTopic"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{stderr}");
        assert!(
            stderr.contains("nope-42") && stderr.contains("KeyTopic"),
            "{stderr}"
        );
        b.broker.shutdown().await;
    })
    .await;
}
