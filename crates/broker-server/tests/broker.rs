//! A real broker on loopback, driven with raw remoting requests: routes from
//! the embedded name server, send, pull, offsets, administration.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::{pull_request, send_request, TestBroker};
use remoting_protocol::{
    body::{self, KvTable, TopicRouteData},
    header::{
        CreateTopicRequestHeader, GetMaxOffsetRequestHeader, GetRouteInfoRequestHeader,
        OffsetResponseHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
        SendMessageResponseHeader, TopicFilterType, UpdateConsumerOffsetRequestHeader,
    },
    message::MessageId,
    RemotingCommand, RequestCode, ResponseCode,
};

async fn route(b: &TestBroker, topic: &str) -> RemotingCommand {
    let req = RemotingCommand::request_with_header(
        RequestCode::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: Some(true),
        },
    );
    b.client
        .invoke(&b.namesrv, req, Duration::from_secs(5))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_to_a_new_topic_creates_it_routes_it_and_reads_it_back() {
    let b = TestBroker::start(&[]).await;
    let template = route(&b, "TBW102").await;
    assert_eq!(
        template.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        template.remark
    );

    let sent = b
        .invoke(send_request(
            "Orders",
            1,
            b"hello sluice",
            "TAGS\u{1}A\u{2}",
        ))
        .await;
    assert_eq!(
        sent.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        sent.remark
    );
    let header: SendMessageResponseHeader = sent.decode_header().unwrap();
    assert_eq!((header.queue_id, header.queue_offset), (1, 0));
    let id = MessageId::decode(&header.msg_id).unwrap();
    assert_eq!(id.store_host.to_string(), b.addr);
    assert_eq!(header.msg_region.as_deref(), Some("DefaultRegion"));

    let deadline = Instant::now() + Duration::from_secs(10);
    let routed = loop {
        let r = route(&b, "Orders").await;
        if r.response_code() == ResponseCode::SUCCESS || Instant::now() > deadline {
            break r;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        routed.response_code(),
        ResponseCode::SUCCESS,
        "new topic routable within 10 s"
    );
    let data: TopicRouteData = body::from_json(&routed.body).unwrap();
    assert_eq!(data.queue_datas[0].write_queue_nums, 4);
    assert_eq!(data.broker_datas[0].master_addr(), Some(b.addr.as_str()));

    let deadline = Instant::now() + Duration::from_secs(10);
    let pulled = loop {
        let p = b.invoke(pull_request("Orders", 1, 0, 32)).await;
        if p.response_code() == ResponseCode::SUCCESS || Instant::now() > deadline {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(
        pulled.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        pulled.remark
    );
    let ph: PullMessageResponseHeader = pulled.decode_header().unwrap();
    assert_eq!((ph.next_begin_offset, ph.max_offset), (1, 1));
    let record = message_model::record::check(&pulled.body, true);
    let message_model::record::Record::Message(m) = record else {
        panic!("pulled a record: {record:?}")
    };
    assert_eq!(m.body, b"hello sluice");
    assert!(m.properties.contains("CLUSTER\u{1}DefaultCluster"));
    assert!(m.properties.contains("UNIQ_KEY\u{1}"));

    let none = b.invoke(pull_request("Orders", 1, 1, 32)).await;
    assert_eq!(none.response_code(), ResponseCode::PULL_NOT_FOUND);
    let moved = b.invoke(pull_request("Orders", 1, 50, 32)).await;
    assert_eq!(moved.response_code(), ResponseCode::PULL_OFFSET_MOVED);
    let missing = b.invoke(pull_request("Nope", 0, 0, 32)).await;
    assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_offsets_are_stored_and_queried() {
    let b = TestBroker::start(&[]).await;
    b.invoke(send_request("Offsets", 0, b"x", "")).await;
    let query = || {
        RemotingCommand::request_with_header(
            RequestCode::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: "G".into(),
                topic: "Offsets".into(),
                queue_id: 0,
                set_zero_if_not_found: Some(false),
                ..QueryConsumerOffsetRequestHeader::default()
            },
        )
    };
    assert_eq!(
        b.invoke(query()).await.response_code(),
        ResponseCode::QUERY_NOT_FOUND
    );
    let update = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: "G".into(),
            topic: "Offsets".into(),
            queue_id: 0,
            commit_offset: 1,
            ..UpdateConsumerOffsetRequestHeader::default()
        },
    );
    assert_eq!(
        b.invoke(update).await.response_code(),
        ResponseCode::SUCCESS
    );
    let got = b.invoke(query()).await;
    assert_eq!(
        got.decode_header::<OffsetResponseHeader>().unwrap().offset,
        1
    );
    // The queue index follows the log asynchronously (within a millisecond or so).
    let deadline = Instant::now() + Duration::from_secs(10);
    let max = loop {
        let max = b
            .invoke(RemotingCommand::request_with_header(
                RequestCode::GET_MAX_OFFSET,
                &GetMaxOffsetRequestHeader {
                    topic: "Offsets".into(),
                    queue_id: 0,
                    ..GetMaxOffsetRequestHeader::default()
                },
            ))
            .await;
        if max.decode_header::<OffsetResponseHeader>().unwrap().offset == 1
            || Instant::now() > deadline
        {
            break max;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert_eq!(
        max.decode_header::<OffsetResponseHeader>().unwrap().offset,
        1
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_requests_create_topics_and_report_runtime_info() {
    let b = TestBroker::start(&[("autoCreateTopicEnable", "false")]).await;
    let refused = b.invoke(send_request("NotYet", 0, b"x", "")).await;
    assert_eq!(refused.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    let create = |topic: &str| {
        RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: topic.into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 2,
                write_queue_nums: 2,
                perm: 6,
                topic_filter_type: TopicFilterType::SingleTag,
                order: false,
                ..CreateTopicRequestHeader::default()
            },
        )
    };
    assert_eq!(
        b.invoke(create("NotYet")).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(
        b.invoke(create("bad topic")).await.response_code(),
        ResponseCode::INVALID_PARAMETER
    );
    let too_many = RemotingCommand::request_with_header(
        RequestCode::UPDATE_AND_CREATE_TOPIC,
        &CreateTopicRequestHeader {
            topic: "Wide".into(),
            default_topic: "TBW102".into(),
            read_queue_nums: 1025,
            write_queue_nums: 1025,
            perm: 6,
            topic_filter_type: TopicFilterType::SingleTag,
            ..CreateTopicRequestHeader::default()
        },
    );
    let too_many = b.invoke(too_many).await;
    assert_eq!(too_many.response_code(), ResponseCode::INVALID_PARAMETER);
    assert_eq!(
        too_many.remark.as_deref(),
        Some("queue counts must be 1..=1024 (read 1025, write 1025)")
    );
    assert_eq!(
        b.invoke(send_request("NotYet", 1, b"x", ""))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    let illegal_queue = b.invoke(send_request("NotYet", 7, b"x", "")).await;
    assert_eq!(illegal_queue.response_code(), ResponseCode::SYSTEM_ERROR);

    let info = b
        .invoke(RemotingCommand::request(
            RequestCode::GET_BROKER_RUNTIME_INFO,
        ))
        .await;
    let table: KvTable = body::from_json(&info.body).unwrap();
    assert_eq!(table.table["sendThreadPoolQueueCapacity"], "10000");
    assert!(table.table.contains_key("pageCacheLockTimeMills"));

    let unknown = b.invoke(RemotingCommand::request(RequestCode(4242))).await;
    assert_eq!(
        unknown.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 4242 not supported")
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codes_without_a_processor_are_refused_on_arrival_without_being_queued() {
    // One send slot, so that a code queued as a send would take it.
    let b = TestBroker::start(&[("sendThreadPoolQueueCapacity", "1")]).await;
    let counters = &b.broker.state().counters;
    for code in [RequestCode::CHECK_TRANSACTION_STATE, RequestCode(4243)] {
        let before = counters.snapshot();
        let answer = b.invoke(RemotingCommand::request(code)).await;
        assert_eq!(
            answer.response_code(),
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
            "{code:?}"
        );
        let after = counters.snapshot();
        assert_eq!(after.accepted, before.accepted, "{code:?} was queued");
        assert_eq!(after.completed, before.completed, "{code:?} was served");
    }
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cpp_client_heartbeat_with_ordinal_enums_registers_its_consumer() {
    let b = TestBroker::start(&[]).await;
    // cpp 2.2.0: enums as ordinals, subVersion as a string, a trailing newline.
    let body = "{\"clientID\":\"10.0.0.7@cpp\",\"consumerDataSet\":[{\"consumeFromWhere\":4,\
                \"consumeType\":1,\"groupName\":\"CppG\",\"messageModel\":1,\
                \"subscriptionDataSet\":[{\"subString\":\"*\",\"subVersion\":\"1700000000000\",\
                \"topic\":\"T\"}]}],\"producerDataSet\":[{\"groupName\":\"PG\"}]}\n";
    let beat = b
        .invoke(
            RemotingCommand::request(RequestCode::HEART_BEAT).with_body(body.as_bytes().to_vec()),
        )
        .await;
    assert_eq!(
        beat.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        beat.remark
    );
    let mut list = RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP);
    list.set_ext("consumerGroup", "CppG");
    let listed = b.invoke(list).await;
    assert_eq!(
        listed.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        listed.remark
    );
    assert!(String::from_utf8_lossy(&listed.body).contains("10.0.0.7@cpp"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_broker_cannot_honour_is_refused_with_rocketmq_codes() {
    let b = TestBroker::start(&[]).await;
    // A half (prepared transaction) message is not stored as a plain one:
    // it waits in the half topic for its commit.
    let half = b
        .invoke(send_request(
            "Refused",
            0,
            b"half",
            "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}PG\u{2}",
        ))
        .await;
    assert_eq!(half.response_code(), ResponseCode::SUCCESS);
    let plain = b.invoke(send_request("Refused", 0, b"plain", "")).await;
    assert_eq!(plain.response_code(), ResponseCode::SUCCESS);
    let stored: SendMessageResponseHeader = plain.decode_header().unwrap();
    assert_eq!(stored.queue_offset, 0, "the half message took no offset");
    // The pulls below read the plain message once it is dispatched.
    b.until_dispatched("Refused", 0, 1).await;

    // SQL92 filtering: pulls and the client's start-up check.
    let mut sql = pull_request("Refused", 0, 0, 32);
    sql.set_ext("expressionType", "SQL92");
    let pulled = b.invoke(sql).await;
    let remark = "The broker does not support consumer to filter message by SQL92";
    assert_eq!(pulled.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(pulled.remark.as_deref(), Some(remark));
    let mut tag = pull_request("Refused", 0, 0, 32);
    tag.set_ext("expressionType", "TAG");
    assert_eq!(b.invoke(tag).await.response_code(), ResponseCode::SUCCESS);
    let check = |expression_type: &str| {
        RemotingCommand::request(RequestCode::CHECK_CLIENT_CONFIG).with_body(
            format!(
                r#"{{"clientId":"c","group":"G","subscriptionData":{{"topic":"Refused","subString":"a > 1","expressionType":"{expression_type}"}}}}"#
            )
            .into_bytes(),
        )
    };
    let refused = b.invoke(check("SQL92")).await;
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(refused.remark.as_deref(), Some(remark));
    assert_eq!(
        b.invoke(check("TAG")).await.response_code(),
        ResponseCode::SUCCESS
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_config_changes_at_run_time_and_refuses_restart_keys() {
    let b = TestBroker::start(&[]).await;
    let update = |text: &str| {
        RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG)
            .with_body(text.as_bytes().to_vec())
    };
    let ok = b
        .invoke(update(
            "waitTimeMillsInSendQueue=1000\nsendThreadPoolQueueCapacity=77\n",
        ))
        .await;
    assert_eq!(ok.response_code(), ResponseCode::SUCCESS, "{:?}", ok.remark);
    let config = b
        .invoke(RemotingCommand::request(RequestCode::GET_BROKER_CONFIG))
        .await;
    let text = body::decode_config_text(&config.body).unwrap();
    assert_eq!(text["waitTimeMillsInSendQueue"], "1000");
    assert_eq!(
        b.broker
            .state()
            .queue(broker_server::request::Family::Send)
            .capacity(),
        77
    );

    let restart = b.invoke(update("listenPort=1234")).await;
    assert_eq!(restart.response_code(), ResponseCode::INVALID_PARAMETER);
    assert!(restart.remark.unwrap().contains("listenPort"));
    let bad = b.invoke(update("waitTimeMillsInSendQueue=soon")).await;
    assert_eq!(bad.response_code(), ResponseCode::INVALID_PARAMETER);
    assert!(bad.remark.unwrap().contains("waitTimeMillsInSendQueue"));
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_close_only_their_own_connection() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let b = TestBroker::start(&[]).await;
    assert_eq!(
        b.invoke(send_request("Good", 0, b"before", ""))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    for garbage in [
        &b"\x7f\xff\xff\xff"[..],
        &b"\0\0\0\x0c\0\0\0\x08{\"code\":"[..],
        &b"\0\0\0\x08\x05\0\0\x04abcd"[..],
    ] {
        let mut bad = tokio::net::TcpStream::connect(&b.addr).await.unwrap();
        bad.write_all(garbage).await.unwrap();
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(Duration::from_secs(5), bad.read(&mut buf))
            .await
            .unwrap();
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "bad connection closed: {read:?}"
        );
    }
    assert_eq!(
        b.invoke(send_request("Good", 0, b"after", ""))
            .await
            .response_code(),
        ResponseCode::SUCCESS
    );
    b.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_bind_to_the_bind_address() {
    let b = TestBroker::start(&[("bindAddress", "127.0.0.1")]).await;
    assert!(b.broker.remoting_addr().ip().is_loopback());
    assert!(b.broker.namesrv_addr().unwrap().ip().is_loopback());
    let sent = b.invoke(send_request("Bound", 0, b"x", "")).await;
    assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
    b.broker.shutdown().await;
    let dir = tempfile::tempdir().unwrap();
    let err = broker_server::testing::start_broker(dir.path(), &[("bindAddress", "nowhere")])
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("bindAddress"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_returns_at_most_the_broker_caps() {
    let b = TestBroker::start(&[]).await;
    for (topic, size) in [("Caps", 10), ("BigCaps", 16 * 1024)] {
        for _ in 0..50 {
            let sent = b
                .invoke(send_request(topic, 0, &vec![b'x'; size], ""))
                .await;
            assert_eq!(sent.response_code(), ResponseCode::SUCCESS);
        }
    }
    b.until_dispatched("BigCaps", 0, 50).await;
    let count = |body: &[u8]| {
        let mut n = 0;
        let mut pos = 0;
        while pos < body.len() {
            let message_model::record::Record::Message(m) =
                message_model::record::check(&body[pos..], false)
            else {
                break;
            };
            n += 1;
            pos += m.total_size;
        }
        n
    };
    // 100 asked: 32 (maxTransferCountOnMessageInMemory) at most.
    let many = b.invoke(pull_request("Caps", 0, 0, 100)).await;
    assert_eq!(many.response_code(), ResponseCode::SUCCESS);
    assert_eq!(count(&many.body), 32);
    // 10 MB asked of 16 KiB messages: 256 KiB (maxTransferBytesOnMessageInMemory) at most.
    let mut big = pull_request("BigCaps", 0, 0, 32);
    big.set_ext("maxMsgBytes", "10000000");
    let capped = b.invoke(big).await;
    assert_eq!(capped.response_code(), ResponseCode::SUCCESS);
    assert!(
        capped.body.len() <= 256 * 1024,
        "{} bytes",
        capped.body.len()
    );
    assert!(
        (1..32).contains(&count(&capped.body)),
        "{}",
        count(&capped.body)
    );
    b.broker.shutdown().await;
}
