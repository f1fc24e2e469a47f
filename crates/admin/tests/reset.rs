//! `sluice-admin group reset-offset` against a real broker in-process with
//! its embedded name server: messages stored at known times, the group's
//! offsets moved to the end, to a date and to a time in the middle, and the
//! group's next pull sent to where the last reset put it; refusals name the
//! broker, the request and the code.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use admin::AdminError;
use producer_client::{Message, Producer, ProducerConfig};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::{
    header::{
        PullMessageRequestHeader, PullMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
    },
    message::record::{check, Record},
    RemotingCommand, RequestCode, ResponseCode,
};

mod common;
use common::{poll, TestBroker};

const TOPIC: &str = "ResetTopic";
const GROUP: &str = "ResetGroup";

/// Waits until the millisecond clock has moved past the current one.
async fn next_millisecond() {
    let now = now_ms();
    while now_ms() <= now {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// Pulls queue 0 as `group` from `offset`.
async fn pull(
    client: &RemotingClient,
    broker: &str,
    group: &str,
    offset: i64,
) -> (ResponseCode, PullMessageResponseHeader, Vec<i64>) {
    let request = RemotingCommand::request_with_header(
        RequestCode::PULL_MESSAGE,
        &PullMessageRequestHeader {
            consumer_group: group.into(),
            topic: TOPIC.into(),
            queue_id: 0,
            queue_offset: offset,
            max_msg_nums: 32,
            subscription: Some("*".into()),
            ..PullMessageRequestHeader::default()
        },
    );
    let answer = client
        .invoke(broker, request, Duration::from_secs(3))
        .await
        .unwrap();
    let mut times = Vec::new();
    let mut rest = &answer.body[..];
    while !rest.is_empty() {
        let Record::Message(m) = check(rest, false) else {
            panic!("the pull body holds a bad record");
        };
        times.push(m.store_timestamp);
        rest = &rest[m.total_size..];
    }
    (
        answer.response_code(),
        answer.decode_header().unwrap(),
        times,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_offset_moves_the_groups_next_pull() {
    tokio::time::timeout(Duration::from_secs(60), async {
        let b = TestBroker::start(&[("brokerName", "reset-broker")]).await;
        let master = poll("the broker registers", || async {
            let c = b.json(&["cluster"]).await.ok()?;
            c["brokers"][0]["addr"].as_str().map(str::to_owned)
        })
        .await;
        b.admin(&["topic", "create", "--topic", TOPIC, "--queues", "1"])
            .await
            .unwrap();
        b.admin(&["group", "create", "--group", GROUP])
            .await
            .unwrap();
        poll("the topic has a route", || async {
            b.json(&["topic", "route", "--topic", TOPIC]).await.ok()
        })
        .await;

        // Four messages, each stored in a later millisecond.
        let producer = Producer::start(ProducerConfig::with_namesrv(&b.namesrv))
            .await
            .unwrap();
        for i in 0..4 {
            producer
                .send(Message::new(TOPIC, format!("m{i}")))
                .await
                .unwrap();
            next_millisecond().await;
        }
        producer.shutdown().await;
        let client = RemotingClient::new(ClientOptions::default());
        let times = poll("every message is indexed", || async {
            let (code, _, times) = pull(&client, &master, "Reader", 0).await;
            (code == ResponseCode::SUCCESS && times.len() == 4).then_some(times)
        })
        .await;
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{times:?}");

        // The group has consumed everything.
        let commit = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: GROUP.into(),
                topic: TOPIC.into(),
                queue_id: 0,
                commit_offset: 4,
                broker_name: None,
            },
        );
        let answer = client
            .invoke(&master, commit, Duration::from_secs(3))
            .await
            .unwrap();
        assert_eq!(answer.response_code(), ResponseCode::SUCCESS);

        let reset = |to: Vec<String>| {
            let mut args = vec![
                "group".to_owned(),
                "reset-offset".into(),
                "--group".into(),
                GROUP.into(),
                "--topic".into(),
                TOPIC.into(),
            ];
            args.extend(to);
            args
        };
        let latest = reset(vec!["--to-latest".into()]);
        let report = b
            .json(&latest.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(report["queues"][0]["offset"], 4, "{report}");
        assert_eq!(report["queues"][0]["brokerAddr"], master.as_str());

        let long_ago = reset(vec!["--datetime".into(), "2000-01-01 00:00:00".into()]);
        let text = b
            .admin(&long_ago.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .unwrap();
        assert!(
            text.starts_with(
                "Broker        Queue  NewOffset  Address\nreset-broker      0          0  "
            ),
            "{text}"
        );
        assert!(
            text.contains("1 queue(s) reset to 2000-01-01 00:00:00.000 UTC"),
            "{text}"
        );

        // The time of the third message: the group reads it and the fourth
        // again.
        let middle = reset(vec!["--timestamp".into(), times[2].to_string()]);
        let report = b
            .json(&middle.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .unwrap();
        assert_eq!(report["queues"][0]["offset"], 2, "{report}");
        assert_eq!(report["queues"].as_array().unwrap().len(), 1);

        let (code, header, _) = pull(&client, &master, GROUP, 4).await;
        assert_eq!(code, ResponseCode::PULL_OFFSET_MOVED);
        assert_eq!(header.next_begin_offset, 2);
        let (code, header, read) = pull(&client, &master, GROUP, header.next_begin_offset).await;
        assert_eq!(code, ResponseCode::SUCCESS);
        assert_eq!(read, times[2..]);
        assert_eq!(header.next_begin_offset, 4);

        // Refusals name the broker, the request, the code and the remark.
        let err = b
            .admin(&[
                "group",
                "reset-offset",
                "--group",
                "NoSuchGroup",
                "--topic",
                TOPIC,
                "--to-earliest",
            ])
            .await
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "broker {master} refused INVOKE_BROKER_TO_RESET_OFFSET: \
                 SUBSCRIPTION_GROUP_NOT_EXIST (26): Group NoSuchGroup does not exist"
            )
        );
        let err = b
            .admin(&[
                "group",
                "reset-offset",
                "--group",
                GROUP,
                "--topic",
                "NoSuchTopic",
                "--to-earliest",
            ])
            .await
            .unwrap_err();
        assert!(
            matches!(err, AdminError::NoRoute { ref topic, .. } if topic == "NoSuchTopic"),
            "{err}"
        );
        client.close_all().await;
    })
    .await
    .expect("test took too long");
}
