//! The other busy answers of the flow-control family, each provoked on a
//! real broker process: `[OVERLOAD]` from a full send queue,
//! `[REJECTREQUEST]` and `[PCBUSY_CLEAN_QUEUE]` from a put lock held past
//! `osPageCacheBusyTimeOutMills`, `[REJECTREQUEST]` from an exhausted
//! transient store pool, and the producer's own in-flight limit
//! (`TooManyRequests`, RocketMQ's `RemotingTooMuchRequestException`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use e2e_tests::{burst, figure, runtime_figure, unique, E2eEnv, OwnBroker};
use producer_client::{BusyPolicy, Message, Producer, ProducerConfig, ProducerError};
use remoting_net::{ClientOptions, RemotingClient};
use remoting_protocol::ResponseCode;

const OVERLOAD: &str = "[OVERLOAD]system busy, start flow control for a while";
const REJECT: &str = "[REJECTREQUEST]system busy, start flow control for a while";
const PCBUSY: &str =
    "[PCBUSY_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ";

fn client() -> Arc<RemotingClient> {
    Arc::new(RemotingClient::new(ClientOptions::default()))
}

/// Mechanism: the send queue is bounded (`sendThreadPoolQueueCapacity`);
/// a send arriving when it is full is refused at once with `[OVERLOAD]`
/// (RocketMQ's `RejectedExecutionException` path), the queued ones are
/// served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_send_queue_answers_overload() {
    let Some(env) = E2eEnv::from_env("busy kinds: OVERLOAD") else {
        return;
    };
    let mut broker = OwnBroker::start(
        &env,
        "overload",
        &[
            "sendMessageThreadPoolNums=1",
            "sendThreadPoolQueueCapacity=2",
            "faultPutLockDelayMills=100",
            "waitTimeMillsInSendQueue=60000",
            "earlyAdmissionEnable=false",
            "adaptiveAdmissionEnable=false",
        ],
    )
    .unwrap();
    let client = client();
    let topic = unique("Overload");
    let outcomes = burst(&client, &broker.addr, &topic, 12).await.unwrap();
    let overload = outcomes
        .iter()
        .filter(|(c, r)| *c == ResponseCode::SYSTEM_BUSY && r == OVERLOAD)
        .count();
    let ok = outcomes
        .iter()
        .filter(|(c, _)| *c == ResponseCode::SUCCESS)
        .count();
    println!("OVERLOAD: {overload} of 12 refused, {ok} stored");
    assert!(overload > 0, "{outcomes:?}");
    assert!(ok > 0, "queued sends are served: {outcomes:?}");
    assert_eq!(overload + ok, 12, "no other outcome: {outcomes:?}");
    assert!(broker.is_running());
}

/// Mechanism: one put holds the CommitLog lock for 600 ms, longer than
/// `osPageCacheBusyTimeOutMills` (100 ms). New sends are refused at the
/// door with `[REJECTREQUEST]`, and the sweeper answers the ones already
/// queued with `[PCBUSY_CLEAN_QUEUE]` and their period in queue. The lock
/// holder itself completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_held_put_lock_rejects_new_sends_and_drains_the_queue() {
    let Some(env) = E2eEnv::from_env("busy kinds: PCBUSY and REJECTREQUEST") else {
        return;
    };
    let mut broker = OwnBroker::start(
        &env,
        "pcbusy",
        &[
            "sendMessageThreadPoolNums=1",
            "faultPutLockDelayMills=600",
            "osPageCacheBusyTimeOutMills=100",
            "waitTimeMillsInSendQueue=60000",
            "earlyAdmissionEnable=false",
            "adaptiveAdmissionEnable=false",
        ],
    )
    .unwrap();
    let client = client();
    let topic = unique("PcBusy");
    // Create the topic first (its send holds the lock 600 ms too).
    assert_eq!(
        burst(&client, &broker.addr, &topic, 1).await.unwrap()[0].0,
        ResponseCode::SUCCESS
    );
    let queued = {
        let (client, addr, topic) = (Arc::clone(&client), broker.addr.clone(), topic.clone());
        tokio::spawn(async move { burst(&client, &addr, &topic, 4).await })
    };
    // Wait (up to 10 s) until the lock has been held past the busy limit.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut held = 0;
    while Instant::now() < deadline {
        held = runtime_figure(&client, &broker.addr, "pageCacheLockTimeMills")
            .await
            .unwrap();
        if held >= 150 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        held >= 150,
        "the put lock was never held 150 ms ({held} ms)"
    );
    let late = burst(&client, &broker.addr, &topic, 1).await.unwrap();
    assert_eq!(late[0], (ResponseCode::SYSTEM_BUSY, REJECT.to_owned()));
    let outcomes = queued.await.unwrap().unwrap();
    let drained: Vec<&String> = outcomes
        .iter()
        .filter(|(c, r)| *c == ResponseCode::SYSTEM_BUSY && r.starts_with(PCBUSY))
        .map(|(_, r)| r)
        .collect();
    println!("PCBUSY: late send {:?}; queued {outcomes:?}", late[0].1);
    assert!(!drained.is_empty(), "{outcomes:?}");
    for remark in &drained {
        assert!(
            figure(remark, "period in queue: ").is_some(),
            "period in {remark}"
        );
    }
    assert!(
        outcomes.iter().any(|(c, _)| *c == ResponseCode::SUCCESS),
        "the lock holder completes: {outcomes:?}"
    );
    assert!(broker.is_running());
}

/// Mechanism: with `transientStorePoolEnable`, every CommitLog file needs
/// a buffer from the pool; with a pool of one buffer, the first file takes
/// it and the broker refuses further sends with `[REJECTREQUEST]` at
/// admission (`isTransientStorePoolDeficient`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exhausted_transient_store_pool_rejects_sends() {
    let Some(env) = E2eEnv::from_env("busy kinds: pool REJECTREQUEST") else {
        return;
    };
    let mut broker = OwnBroker::start(
        &env,
        "pool",
        &["transientStorePoolEnable=true", "transientStorePoolSize=1"],
    )
    .unwrap();
    let client = client();
    let topic = unique("Pool");
    let first = burst(&client, &broker.addr, &topic, 1).await.unwrap();
    assert_eq!(first[0].0, ResponseCode::SUCCESS, "{first:?}");
    let refused = burst(&client, &broker.addr, &topic, 3).await.unwrap();
    println!("pool: after the first send {refused:?}");
    assert!(
        refused
            .iter()
            .all(|o| *o == (ResponseCode::SYSTEM_BUSY, REJECT.to_owned())),
        "{refused:?}"
    );
    assert!(broker.is_running());
}

/// Mechanism: the producer allows `clientAsyncSemaphoreValue` asynchronous
/// sends in flight; against a slow broker, an asynchronous send that gets no
/// permit within its `sendMsgTimeout` fails on the client with
/// `TooManyRequests` without reaching the broker, and is not retried.
///
/// One permit: a send with a 10 s budget takes it and keeps it while the
/// broker sleeps 2 s on its put lock; seven asynchronous sends with a 500 ms
/// budget start after it and all give up long before the permit comes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_producer_in_flight_limit_fails_fast_on_the_client() {
    const WAITERS: u64 = 7;
    let Some(env) = E2eEnv::from_env("busy kinds: client TooManyRequests") else {
        return;
    };
    let mut broker = OwnBroker::start(
        &env,
        "too-many",
        &[
            "sendMessageThreadPoolNums=1",
            "faultPutLockDelayMills=2000",
            "waitTimeMillsInSendQueue=60000",
            "earlyAdmissionEnable=false",
            "adaptiveAdmissionEnable=false",
        ],
    )
    .unwrap();
    let topic = unique("TooMany");
    assert_eq!(
        burst(&client(), &broker.addr, &topic, 1).await.unwrap()[0].0,
        ResponseCode::SUCCESS
    );
    let producer = Arc::new(
        Producer::start(ProducerConfig {
            client_async_semaphore_value: 1,
            send_msg_timeout: Duration::from_millis(500),
            busy_policy: BusyPolicy::Never,
            ..ProducerConfig::with_namesrv(&broker.namesrv)
        })
        .await
        .unwrap(),
    );
    // With the route cached, nothing before the permit needs to wait.
    producer.publish_queues(&topic).await.unwrap();
    // Polled first, the holder takes the permit before any waiter starts.
    let holder = producer.send_with_timeout(
        Message::new(&topic, b"holder".to_vec()),
        Duration::from_secs(10),
    );
    let waiters = async {
        let sends: Vec<_> = (0..WAITERS)
            .map(|i| {
                let (producer, topic) = (Arc::clone(&producer), topic.clone());
                tokio::spawn(async move {
                    let msg = Message::new(&topic, format!("m{i}").into_bytes());
                    match producer.send_async(msg).await {
                        Ok(handle) => handle.await,
                        Err(e) => Err(e),
                    }
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for s in sends {
            outcomes.push(s.await.unwrap());
        }
        outcomes
    };
    let (held, outcomes) = tokio::join!(holder, waiters);
    let (mut too_many, mut other) = (0, Vec::new());
    for outcome in outcomes {
        match outcome {
            Err(ProducerError::TooManyRequests {
                in_flight,
                limit,
                waited_ms,
            }) => {
                // Counted when the send gave up, so a permit released just
                // after cannot show here.
                assert_eq!(
                    (in_flight, limit),
                    (1, 1),
                    "refused with its one permit held"
                );
                assert!(waited_ms >= 500, "gave up before its budget: {waited_ms}");
                too_many += 1;
            }
            other_outcome => other.push(format!("{other_outcome:?}")),
        }
    }
    let stats = producer.stats();
    producer.shutdown().await;
    println!(
        "TooManyRequests: holder {:?}, {too_many} of {WAITERS} refused on the client; {stats:?}",
        held.as_ref().map(|r| r.queue_offset)
    );
    assert!(held.is_ok(), "the permit holder was served: {held:?}");
    assert!(other.is_empty(), "every waiter was refused: {other:?}");
    assert_eq!(too_many, WAITERS);
    assert_eq!(stats.failed_too_many_requests, WAITERS);
    assert_eq!(
        stats.attempts, 1,
        "only the holder reached the broker: {stats:?}"
    );
    assert!(broker.is_running());
}
