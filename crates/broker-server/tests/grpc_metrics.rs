//! gRPC calls on the `/metrics` endpoint: counted by RPC and business code,
//! timed by RPC. Its own test binary: the metrics recorder is installed
//! once per process.
#![allow(clippy::unwrap_used)]

mod common;

use common::{sample, scrape, TestBroker};
use grpc_protocol::{
    v2::{Code, QueryRouteRequest, Resource, SendMessageRequest},
    MessagingServiceClient,
};
use tonic::Request;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_are_counted_by_rpc_and_code_and_timed() {
    let port = proc_harness::free_port().unwrap();
    let port_text = port.to_string();
    let b = TestBroker::start(&[("metricsListenPort", port_text.as_str())]).await;
    let grpc = b.broker.grpc_addr().unwrap().port();
    let mut c = MessagingServiceClient::connect(format!("http://127.0.0.1:{grpc}"))
        .await
        .unwrap();
    for _ in 0..2 {
        let mut r = Request::new(QueryRouteRequest {
            topic: Some(Resource {
                resource_namespace: String::new(),
                name: "Metered".into(),
            }),
            endpoints: None,
        });
        r.metadata_mut()
            .insert("x-mq-client-id", "m@1".parse().unwrap());
        let st = c.query_route(r).await.unwrap().into_inner().status.unwrap();
        assert_eq!(st.code, Code::Ok as i32);
    }
    let refused = c
        .send_message(Request::new(SendMessageRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(refused.status.unwrap().code, Code::ClientIdRequired as i32);

    let text = scrape(port).await;
    assert_eq!(
        sample(
            &text,
            &[
                "sluice_grpc_requests_total{",
                "rpc=\"QueryRoute\"",
                "code=\"OK\""
            ]
        ),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &[
                "sluice_grpc_requests_total{",
                "rpc=\"SendMessage\"",
                "code=\"CLIENT_ID_REQUIRED\""
            ]
        ),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            &["sluice_grpc_request_seconds_count{", "rpc=\"QueryRoute\""]
        ),
        Some(2.0),
        "{text}"
    );
    b.broker.shutdown().await;
}
