//! Transaction ends on the `/metrics` endpoint: counted by outcome and by
//! who decided (the producer after its local transaction, or its answer to
//! a check). Its own test binary: the metrics recorder is installed once
//! per process.
#![allow(clippy::unwrap_used)]

mod common;

use common::{sample, scrape, send_request, TestBroker};
use message_model::MessageId;
use remoting_protocol::{
    header::{EndTransactionRequestHeader, SendMessageResponseHeader},
    RemotingCommand, RequestCode, ResponseCode,
};

const PROPS: &str = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}TxMetered\u{2}";

/// Sends a half and ends it with `outcome`, as a check's answer or not.
async fn half_then_end(b: &TestBroker, outcome: i32, from_check: bool) {
    let answer = b.invoke(send_request("TxMetered", 0, b"m", PROPS)).await;
    assert_eq!(answer.response_code(), ResponseCode::SUCCESS);
    let h: SendMessageResponseHeader = answer.decode_header().unwrap();
    let end = RemotingCommand::request_with_header(
        RequestCode::END_TRANSACTION,
        &EndTransactionRequestHeader {
            producer_group: "TxMetered".into(),
            tran_state_table_offset: h.queue_offset,
            commit_log_offset: MessageId::decode(&h.msg_id).unwrap().commit_log_offset,
            commit_or_rollback: outcome,
            from_transaction_check: Some(from_check),
            msg_id: h.transaction_id.clone().unwrap_or_default(),
            ..EndTransactionRequestHeader::default()
        },
    );
    let r = b.invoke(end).await;
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ends_are_counted_by_outcome_and_source() {
    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    let b = TestBroker::start(&[("metricsListenPort", port_text.as_str())]).await;
    half_then_end(&b, 8, false).await;
    half_then_end(&b, 8, false).await;
    half_then_end(&b, 12, true).await;
    half_then_end(&b, 0, true).await;

    let text = scrape(port).await;
    let ended = |outcome: &str, source: &str| {
        sample(
            &text,
            &[
                "sluice_transactions_ended_total{",
                &format!("outcome=\"{outcome}\""),
                &format!("source=\"{source}\""),
            ],
        )
    };
    assert_eq!(ended("commit", "producer"), Some(2.0), "{text}");
    assert_eq!(ended("rollback", "check"), Some(1.0), "{text}");
    assert_eq!(ended("unknown", "check"), Some(1.0), "{text}");
    assert_eq!(ended("rollback", "producer"), None, "{text}");
    b.broker.shutdown().await;
}
