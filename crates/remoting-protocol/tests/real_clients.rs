//! What Apache's C++ 2.x and Go clients actually send, decoded as RocketMQ's
//! Java broker decodes it: ints as JSON numbers inside `extFields`, `0`/`1`
//! booleans, enums as ordinals, `subVersion` as a string, `codeSet`
//! elements as strings, omitted empty sets, a header ending in a newline.
//! Then a property test: every representation a real client uses for one
//! heartbeat decodes to the same value.
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use remoting_protocol::{
    body::{from_json, HeartbeatData, CONSUME_FROM_WHERE, CONSUME_TYPES, MESSAGE_MODELS},
    decode_frame,
    header::{PullMessageRequestHeader, SendMessageRequestHeader},
    LanguageCode, RemotingCommand, RequestCode, DEFAULT_MAX_FRAME_LEN,
};

/// A JSON frame as the clients lay it out.
fn json_frame(header: &str, body: &[u8]) -> RemotingCommand {
    let mut out = Vec::new();
    out.extend_from_slice(&((4 + header.len() + body.len()) as u32).to_be_bytes());
    out.push(0);
    out.extend_from_slice(&(header.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    let mut buf = bytes::BytesMut::from(&out[..]);
    decode_frame(&mut buf, DEFAULT_MAX_FRAME_LEN)
        .unwrap()
        .unwrap()
}

#[test]
fn a_cpp_send_decodes_with_numbers_in_ext_fields_and_zero_one_booleans() {
    // cpp 2.2.0 SendMessageRequestHeaderV2: ints as JSON numbers, `l` always
    // 16, `k` and `m` as "0"/"1", jsoncpp's trailing newline.
    let header =
        "{\"code\":310,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"\",\"Signature\":\"\",\
                  \"a\":\"PG\",\"b\":\"TopicTest\",\"c\":\"TBW102\",\"d\":4,\"e\":2,\"f\":0,\
                  \"g\":\"1700000000000\",\"h\":0,\"i\":\"TAGS\\u0001A\\u0002\",\"j\":\"0\",\
                  \"k\":\"0\",\"l\":16,\"m\":\"1\"},\"flag\":0,\"language\":\"CPP\",\"opaque\":7,\
                  \"remark\":\"\",\"version\":333}\n";
    let cmd = json_frame(header, b"body");
    assert_eq!(cmd.request_code(), RequestCode::SEND_MESSAGE_V2);
    assert_eq!(cmd.language, LanguageCode::Cpp);
    let h = SendMessageRequestHeader::from_command(&cmd).unwrap();
    assert_eq!(h.topic, "TopicTest");
    assert_eq!((h.default_topic_queue_nums, h.queue_id), (4, 2));
    assert_eq!(h.born_timestamp, 1_700_000_000_000);
    assert_eq!(h.max_reconsume_times, Some(16));
    assert_eq!(h.unit_mode, Some(false));
    assert_eq!(h.batch, Some(true), "the C++ client's \"1\" means a batch");
    assert!(h.is_batch());
}

#[test]
fn a_cpp_pull_decodes_without_an_expression_type() {
    let header =
        "{\"code\":11,\"extFields\":{\"AccessKey\":\"\",\"OnsChannel\":\"\",\"Signature\":\"\",\
                  \"commitOffset\":\"0\",\"consumerGroup\":\"G\",\"maxMsgNums\":32,\"queueId\":1,\
                  \"queueOffset\":\"5\",\"subVersion\":\"1700000000000\",\"subscription\":\"*\",\
                  \"suspendTimeoutMillis\":\"15000\",\"sysFlag\":6,\"topic\":\"TopicTest\"},\
                  \"flag\":0,\"language\":\"CPP\",\"opaque\":8,\"remark\":\"\",\"version\":333}\n";
    let cmd = json_frame(header, b"");
    let h: PullMessageRequestHeader = cmd.decode_header().unwrap();
    assert_eq!((h.queue_id, h.queue_offset, h.max_msg_nums), (1, 5, 32));
    assert_eq!((h.sys_flag, h.suspend_timeout_millis), (6, 15_000));
    assert_eq!(h.sub_version, 1_700_000_000_000);
    assert_eq!(h.expression_type, None);
}

#[test]
fn a_go_send_decodes_with_v1_names_and_string_booleans() {
    let header = r#"{"code":10,"language":"GO","version":317,"opaque":9,"flag":0,"remark":"","extFields":{"producerGroup":"PG","topic":"T","defaultTopic":"TBW102","defaultTopicQueueNums":"4","queueId":"1","sysFlag":"0","bornTimestamp":"1700000000000","flag":"0","properties":"","reconsumeTimes":"0","unitMode":"false","maxReconsumeTimes":"0","batch":"false","bname":""}}"#;
    let cmd = json_frame(header, b"x");
    let h = SendMessageRequestHeader::from_command(&cmd).unwrap();
    assert_eq!((h.topic.as_str(), h.queue_id), ("T", 1));
    assert_eq!((h.unit_mode, h.batch), (Some(false), Some(false)));
}

#[test]
fn a_cpp_heartbeat_decodes_with_ordinals_and_a_string_sub_version() {
    let body = "{\"clientID\":\"10.0.0.7@4242\",\"consumerDataSet\":[{\"consumeFromWhere\":4,\
                \"consumeType\":1,\"groupName\":\"G\",\"messageModel\":1,\
                \"subscriptionDataSet\":[{\"codeSet\":[65],\"subString\":\"A\",\
                \"subVersion\":\"1700000000000\",\"tagsSet\":[\"A\"],\"topic\":\"T\"}]}],\
                \"producerDataSet\":[{\"groupName\":\"PG\"}]}\n";
    let hb: HeartbeatData = from_json(body.as_bytes()).unwrap();
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.consume_type, "CONSUME_PASSIVELY");
    assert_eq!(c.message_model, "CLUSTERING");
    assert_eq!(c.consume_from_where, "CONSUME_FROM_FIRST_OFFSET");
    assert!(!c.unit_mode);
    let s = &c.subscription_data_set[0];
    assert_eq!(s.sub_version, 1_700_000_000_000);
    assert_eq!(s.code_set, [65]);
    assert_eq!(s.expression_type, "", "absent: TAG by default");
    assert_eq!(hb.producer_data_set[0].group_name, "PG");
}

#[test]
fn a_go_heartbeat_decodes_with_string_codes_and_an_unknown_start() {
    let body = r#"{"clientID":"10.0.0.8@go","producerDataSet":[],"consumerDataSet":[{"groupName":"G","consumeType":"CONSUME_PASSIVELY","messageModel":"BROADCASTING","consumeFromWhere":"UNKNOWN","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"A || B","tagsSet":["A","B"],"codeSet":["65","66"],"subVersion":1700000000000000000,"expressionType":"TAG"}],"unitMode":false}]}"#;
    let hb: HeartbeatData = from_json(body.as_bytes()).unwrap();
    let c = &hb.consumer_data_set[0];
    assert_eq!(c.message_model, "BROADCASTING");
    assert_eq!(c.consume_from_where, "", "an unknown constant is absent");
    assert_eq!(c.subscription_data_set[0].code_set, [65, 66]);
}

/// One consumer group of a heartbeat, written the three ways clients write it.
#[derive(Debug, Clone)]
struct Group {
    name: String,
    consume_type: usize,
    model: usize,
    from: usize,
    codes: Vec<i32>,
    sub_version: i64,
    unit_mode: bool,
}

fn java(g: &Group) -> String {
    format!(
        r#"{{"clientID":"c","consumerDataSet":[{{"groupName":"{}","consumeType":"{}","messageModel":"{}","consumeFromWhere":"{}","subscriptionDataSet":[{{"classFilterMode":false,"topic":"T","subString":"*","tagsSet":[],"codeSet":{:?},"subVersion":{},"expressionType":"TAG"}}],"unitMode":{}}}],"producerDataSet":[],"heartbeatFingerprint":0,"withoutSub":false}}"#,
        g.name,
        CONSUME_TYPES[g.consume_type],
        MESSAGE_MODELS[g.model],
        CONSUME_FROM_WHERE[g.from],
        g.codes,
        g.sub_version,
        g.unit_mode
    )
}

fn cpp(g: &Group) -> String {
    let codes = if g.codes.is_empty() {
        String::new()
    } else {
        format!(r#""codeSet":{:?},"#, g.codes)
    };
    // No unitMode (its default, false, is all the C++ client has).
    format!(
        "{{\"clientID\":\"c\",\"consumerDataSet\":[{{\"consumeFromWhere\":{},\"consumeType\":{},\"groupName\":\"{}\",\"messageModel\":{},\"subscriptionDataSet\":[{{{codes}\"subString\":\"*\",\"subVersion\":\"{}\",\"topic\":\"T\"}}]}}]}}\n",
        g.from, g.consume_type, g.name, g.model, g.sub_version
    )
}

fn go(g: &Group) -> String {
    let codes: Vec<String> = g.codes.iter().map(|c| format!("\"{c}\"")).collect();
    format!(
        r#"{{"clientID":"c","producerDataSet":[],"consumerDataSet":[{{"groupName":"{}","consumeType":"{}","messageModel":"{}","consumeFromWhere":"{}","subscriptionDataSet":[{{"classFilterMode":false,"topic":"T","subString":"*","tagsSet":[],"codeSet":[{}],"subVersion":{},"expressionType":"TAG"}}],"unitMode":{}}}]}}"#,
        g.name,
        CONSUME_TYPES[g.consume_type].to_ascii_lowercase(),
        MESSAGE_MODELS[g.model],
        CONSUME_FROM_WHERE[g.from],
        codes.join(","),
        g.sub_version,
        g.unit_mode
    )
}

proptest! {
    #[test]
    fn every_clients_heartbeat_decodes_to_the_same_groups(
        name in "[A-Za-z0-9_%-]{1,20}",
        consume_type in 0..CONSUME_TYPES.len(),
        model in 0..MESSAGE_MODELS.len(),
        from in 0..CONSUME_FROM_WHERE.len(),
        codes in proptest::collection::vec(any::<i32>(), 0..4),
        sub_version in 0..i64::MAX,
    ) {
        let group = Group { name, consume_type, model, from, codes, sub_version, unit_mode: false };
        let decode = |text: String| {
            let hb: HeartbeatData = from_json(text.as_bytes()).unwrap();
            let c = hb.consumer_data_set[0].clone();
            (c.group_name, c.consume_type, c.message_model, c.consume_from_where,
             c.subscription_data_set[0].code_set.clone(), c.subscription_data_set[0].sub_version,
             c.unit_mode)
        };
        let from_java = decode(java(&group));
        prop_assert_eq!(&from_java.1, CONSUME_TYPES[consume_type]);
        prop_assert_eq!(&from_java, &decode(cpp(&group)));
        prop_assert_eq!(&from_java, &decode(go(&group)));
    }
}
