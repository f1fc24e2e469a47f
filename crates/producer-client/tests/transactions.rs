//! Transactional sends against a real broker in-process: a commit is
//! delivered once, a rollback never; an unknown outcome is settled by the
//! broker's check through the group's listener; a half left by a producer
//! that stopped is settled through another producer of its group; halves
//! follow the busy policy; the group is registered by heartbeat; delays
//! and the default group are refused.
#![allow(clippy::unwrap_used)]

mod common;

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use common::{bounded, config, Behaviour, FakeBroker, Pulled, TestBroker};
use message_model::{
    flags::{transaction_type, TRANSACTION_COMMIT_TYPE},
    properties::{keys, Properties},
    record::{self, Record},
};
use producer_client::{
    CheckedMessage, EndTransactionStatus, LocalTransactionState, Message, ProducerConfig,
    ProducerError, SendResult, TransactionConfig, TransactionProducer,
};

const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";

/// Broker settings under which a half nobody ended is checked within about
/// a second, and not discarded while no producer of its group is connected.
const QUICK_CHECKS: &[(&str, &str)] = &[
    ("transactionTimeOut", "1000"),
    ("transactionCheckInterval", "200"),
    ("transactionCheckMax", "1000"),
];

/// A transactional producer configuration for tests: the test producer
/// settings (quick back-offs) in group `group`.
fn tx_config(namesrv: &str, group: &str) -> TransactionConfig {
    TransactionConfig {
        producer: ProducerConfig {
            producer_group: group.into(),
            ..config(namesrv)
        },
        ..TransactionConfig::default()
    }
}

/// A listener for producers that should never be asked: it panics, which
/// leaves the check unanswered.
fn no_checks() -> impl Fn(&CheckedMessage) -> LocalTransactionState + Send + Sync + 'static {
    |msg: &CheckedMessage| panic!("unexpected check of {}", msg.msg_id)
}

/// A listener that records the checks it answers and answers `decide`.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<CheckedMessage>>>,
}

impl Recorder {
    fn listener(
        &self,
        decide: impl Fn(&CheckedMessage) -> LocalTransactionState + Send + Sync + 'static,
    ) -> impl Fn(&CheckedMessage) -> LocalTransactionState + Send + Sync + 'static {
        let seen = Arc::clone(&self.seen);
        move |msg: &CheckedMessage| {
            seen.lock().unwrap().push(msg.clone());
            decide(msg)
        }
    }

    fn seen(&self) -> Vec<CheckedMessage> {
        self.seen.lock().unwrap().clone()
    }
}

/// Polls `condition` every 20 ms until it holds; fails naming `what` after
/// `secs` seconds.
async fn wait_until(secs: u64, what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether the broker recorded the end of the half at `half_offset`.
fn half_ended(b: &TestBroker, half_offset: u64) -> bool {
    let offset = i64::try_from(half_offset).unwrap();
    b.broker.state().transactions.lock().contains(offset)
}

fn unique_key(p: &Pulled) -> Option<String> {
    Properties::decode(&p.properties)
        .get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        .map(str::to_owned)
}

/// Everything the sent message's queue holds, up to a marker sent to it
/// now (excluded): what a consumer of that queue would have been given.
async fn queue_contents(
    b: &TestBroker,
    producer: &TransactionProducer,
    of: &SendResult,
) -> Vec<Pulled> {
    let queue = &of.message_queue;
    let marker = producer
        .producer()
        .send_to_queue(Message::new(queue.topic.clone(), "marker"), queue)
        .await
        .unwrap();
    let upto = usize::try_from(marker.queue_offset).unwrap() + 1;
    let qid = i32::try_from(queue.queue_id).unwrap();
    let mut pulled = b.pull(&queue.topic, qid, 0, upto).await;
    let last = pulled.pop().unwrap();
    assert_eq!(last.body, b"marker");
    assert_eq!(unique_key(&last).as_deref(), Some(marker.msg_id.as_str()));
    pulled
}

async fn start_broker_with_topic(topic: &str, overrides: &[(&str, &str)]) -> TestBroker {
    let b = TestBroker::start(overrides).await;
    b.create_topic(topic).await;
    common::wait_for_route(b.namesrv(), topic, 1).await;
    b
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_transaction_is_delivered_once() {
    bounded(30, async {
        let b = start_broker_with_topic("TxCommit", &[]).await;
        let producer =
            TransactionProducer::start(tx_config(b.namesrv(), "TXG_COMMIT"), no_checks())
                .await
                .unwrap();
        let given: Arc<Mutex<Option<SendResult>>> = Arc::default();
        let seen = Arc::clone(&given);
        let msg = Message::new("TxCommit", "order paid")
            .with_tags("Paid")
            .with_key("order-1");
        let done = producer
            .send_in_transaction(msg, |sent| async move {
                *seen.lock().unwrap() = Some(sent);
                LocalTransactionState::Commit
            })
            .await
            .unwrap();
        let sent = &done.send_result;
        assert_eq!(
            given.lock().unwrap().as_ref(),
            Some(sent),
            "the local transaction got the send result"
        );
        assert_eq!(done.local_state, LocalTransactionState::Commit);
        assert!(
            matches!(done.end, EndTransactionStatus::Recorded),
            "{:?}",
            done.end
        );
        assert_eq!(sent.message_queue.topic, "TxCommit");
        assert_eq!(sent.transaction_id.as_deref(), Some(sent.msg_id.as_str()));

        // The half as stored: in the half topic, marked with the producer
        // group, once the store has dispatched it.
        let offset = i64::try_from(sent.queue_offset).unwrap();
        wait_until(10, "the half message's dispatch", || {
            b.broker.state().store.max_offset_in_queue(HALF_TOPIC, 0) > offset
        })
        .await;
        let half = b.broker.state().store.get_messages(
            HALF_TOPIC,
            0,
            i64::try_from(sent.queue_offset).unwrap(),
            1,
            usize::MAX,
            None,
        );
        let Record::Message(stored) = record::check(&half.messages[0], false) else {
            panic!("no half message at {}", sent.queue_offset);
        };
        let props = Properties::decode(stored.properties);
        assert_eq!(props.get(keys::TRANSACTION_PREPARED), Some("true"));
        assert_eq!(props.get(keys::PRODUCER_GROUP), Some("TXG_COMMIT"));
        assert_eq!(
            props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            Some(sent.msg_id.as_str())
        );
        assert!(half_ended(&b, sent.queue_offset));

        let delivered = queue_contents(&b, &producer, sent).await;
        assert_eq!(delivered.len(), 1, "{delivered:?}");
        assert_eq!(delivered[0].body, b"order paid");
        assert_eq!(
            unique_key(&delivered[0]).as_deref(),
            Some(sent.msg_id.as_str())
        );
        assert_eq!(
            transaction_type(delivered[0].sys_flag),
            TRANSACTION_COMMIT_TYPE
        );
        let props = Properties::decode(&delivered[0].properties);
        assert_eq!(props.get(keys::TAGS), Some("Paid"));
        assert_eq!(props.get(keys::KEYS), Some("order-1"));

        // The end is idempotent at the broker: nothing is delivered twice.
        let again = queue_contents(&b, &producer, sent).await;
        assert_eq!(
            again
                .iter()
                .filter(|p| unique_key(p).as_deref() == Some(sent.msg_id.as_str()))
                .count(),
            1
        );
        let stats = producer.producer().stats();
        assert_eq!(stats.succeeded, 3, "the half and two markers");
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolled_back_transaction_is_never_delivered() {
    bounded(30, async {
        let b = start_broker_with_topic("TxRollback", &[]).await;
        let producer =
            TransactionProducer::start(tx_config(b.namesrv(), "TXG_ROLLBACK"), no_checks())
                .await
                .unwrap();
        let done = producer
            .send_in_transaction(Message::new("TxRollback", "cancelled"), |_| async {
                LocalTransactionState::Rollback
            })
            .await
            .unwrap();
        assert_eq!(done.local_state, LocalTransactionState::Rollback);
        assert!(done.end.is_recorded(), "{:?}", done.end);
        assert!(half_ended(&b, done.send_result.queue_offset));
        let delivered = queue_contents(&b, &producer, &done.send_result).await;
        assert!(delivered.is_empty(), "{delivered:?}");
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_outcome_is_settled_by_the_check_listener() {
    bounded(60, async {
        let b = start_broker_with_topic("TxUnknown", QUICK_CHECKS).await;
        let recorder = Recorder::default();
        let listener = recorder.listener(|msg| {
            if msg.keys.iter().any(|k| k == "commit-me") {
                LocalTransactionState::Commit
            } else {
                LocalTransactionState::Rollback
            }
        });
        let producer = TransactionProducer::start(tx_config(b.namesrv(), "TXG_UNKNOWN"), listener)
            .await
            .unwrap();
        let mut sent = Vec::new();
        for (body, key) in [("to commit", "commit-me"), ("to roll back", "roll-me-back")] {
            let done = producer
                .send_in_transaction(Message::new("TxUnknown", body).with_key(key), |_| async {
                    LocalTransactionState::Unknown
                })
                .await
                .unwrap();
            assert_eq!(done.local_state, LocalTransactionState::Unknown);
            assert!(
                matches!(done.end, EndTransactionStatus::SentOneway),
                "{:?}",
                done.end
            );
            assert!(!half_ended(&b, done.send_result.queue_offset));
            sent.push(done.send_result);
        }
        let (commit, rollback) = (&sent[0], &sent[1]);
        wait_until(30, "the checks to end both halves", || {
            half_ended(&b, commit.queue_offset) && half_ended(&b, rollback.queue_offset)
        })
        .await;

        let seen = recorder.seen();
        for (s, body) in [(commit, "to commit"), (rollback, "to roll back")] {
            let check = seen
                .iter()
                .find(|c| c.msg_id == s.msg_id)
                .unwrap_or_else(|| panic!("no check of {}: {seen:?}", s.msg_id));
            assert_eq!(check.topic, "TxUnknown");
            assert_eq!(
                check.queue_id,
                i32::try_from(s.message_queue.queue_id).unwrap()
            );
            assert_eq!(&check.body[..], body.as_bytes());
            assert_eq!(
                Some(check.transaction_id.as_str()),
                s.transaction_id.as_deref()
            );
            assert_eq!(
                check.properties.get("PGROUP").map(String::as_str),
                Some("TXG_UNKNOWN")
            );
            assert_eq!(check.broker_name.as_deref(), Some("broker-a"));
            assert_eq!(check.broker_addr, b.addr);
        }

        let delivered = queue_contents(&b, &producer, commit).await;
        let committed: Vec<&Pulled> = delivered
            .iter()
            .filter(|p| unique_key(p).as_deref() == Some(commit.msg_id.as_str()))
            .collect();
        assert_eq!(committed.len(), 1, "{delivered:?}");
        assert_eq!(committed[0].body, b"to commit");
        let around_rollback = queue_contents(&b, &producer, rollback).await;
        assert!(
            around_rollback
                .iter()
                .all(|p| unique_key(p).as_deref() != Some(rollback.msg_id.as_str())),
            "{around_rollback:?}"
        );
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_left_by_a_stopped_producer_is_settled_through_another_of_its_group() {
    bounded(60, async {
        let b = start_broker_with_topic("TxOrphan", QUICK_CHECKS).await;
        let first = TransactionProducer::start(tx_config(b.namesrv(), "TXG_ORPHAN"), no_checks())
            .await
            .unwrap();
        let stopping = &first;
        // The producer stops while its local transaction runs: the commit
        // cannot be sent, and the half is left to the broker's check.
        let done = first
            .send_in_transaction(
                Message::new("TxOrphan", "orphan").with_key("o-1"),
                |_| async move {
                    stopping.shutdown().await;
                    LocalTransactionState::Commit
                },
            )
            .await
            .unwrap();
        assert!(
            matches!(
                done.end,
                EndTransactionStatus::Failed(ProducerError::Shutdown)
            ),
            "{:?}",
            done.end
        );
        let orphan = done.send_result;
        assert!(!half_ended(&b, orphan.queue_offset));
        wait_until(
            10,
            "the first producer's connection to be forgotten",
            || {
                b.broker
                    .state()
                    .clients
                    .producer_connections("TXG_ORPHAN")
                    .is_empty()
            },
        )
        .await;

        let recorder = Recorder::default();
        let second = TransactionProducer::start(
            TransactionConfig {
                topics: vec!["TxOrphan".into()],
                ..tx_config(b.namesrv(), "TXG_ORPHAN")
            },
            recorder.listener(|_| LocalTransactionState::Commit),
        )
        .await
        .unwrap();
        assert_ne!(second.client_id(), first.client_id());
        assert_eq!(
            b.broker
                .state()
                .clients
                .producer_connections("TXG_ORPHAN")
                .len(),
            1,
            "the second producer registered its group at start"
        );
        wait_until(30, "the second producer to commit the orphan", || {
            half_ended(&b, orphan.queue_offset)
        })
        .await;
        let seen = recorder.seen();
        assert!(seen.iter().any(|c| c.msg_id == orphan.msg_id), "{seen:?}");
        assert!(seen.iter().all(|c| c.keys == ["o-1"]), "{seen:?}");

        let delivered = queue_contents(&b, &second, &orphan).await;
        assert_eq!(delivered.len(), 1, "{delivered:?}");
        assert_eq!(delivered[0].body, b"orphan");
        assert_eq!(
            unique_key(&delivered[0]).as_deref(),
            Some(orphan.msg_id.as_str())
        );
        second.shutdown().await;
        wait_until(10, "the group to be forgotten after shutdown", || {
            b.broker
                .state()
                .clients
                .producer_connections("TXG_ORPHAN")
                .is_empty()
        })
        .await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn halves_follow_the_busy_policy_to_the_broker_that_is_not_busy() {
    bounded(30, async {
        let healthy = TestBroker::start(&[("brokerName", "broker-b")]).await;
        let _busy = FakeBroker::start(
            Behaviour::Busy {
                retry_after_ms: Some(2),
            },
            healthy.namesrv(),
            "broker-a",
            &["TxSpread"],
        )
        .await;
        healthy.create_topic("TxSpread").await;
        common::wait_for_route(healthy.namesrv(), "TxSpread", 2).await;
        let producer =
            TransactionProducer::start(tx_config(healthy.namesrv(), "TXG_SPREAD"), no_checks())
                .await
                .unwrap();
        for i in 0..10 {
            let done = producer
                .send_in_transaction(Message::new("TxSpread", format!("t{i}")), |_| async {
                    LocalTransactionState::Commit
                })
                .await
                .unwrap();
            assert_eq!(done.send_result.message_queue.broker_name, "broker-b");
            assert!(done.end.is_recorded(), "{:?}", done.end);
        }
        let stats = producer.producer().stats();
        assert!(
            stats.busy_retries >= 1,
            "round robin reached the busy broker: {stats:?}"
        );
        assert_eq!((stats.succeeded, stats.failed_busy), (10, 0));
        producer.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delays_and_the_default_group_are_refused() {
    bounded(30, async {
        let b = start_broker_with_topic("TxRefused", &[]).await;
        let default_group = TransactionProducer::start(
            TransactionConfig::new(b.namesrv(), "DEFAULT_PRODUCER"),
            no_checks(),
        )
        .await;
        assert!(matches!(
            default_group,
            Err(ProducerError::Config {
                key: "producerGroup",
                ..
            })
        ));

        let producer =
            TransactionProducer::start(tx_config(b.namesrv(), "TXG_REFUSED"), no_checks())
                .await
                .unwrap();
        let ran = Arc::new(Mutex::new(false));
        let flag = Arc::clone(&ran);
        let refused = producer
            .send_in_transaction(
                Message::new("TxRefused", "later").with_delay_level(3),
                |_| async move {
                    *flag.lock().unwrap() = true;
                    LocalTransactionState::Commit
                },
            )
            .await;
        match refused {
            Err(ProducerError::MessageIllegal { reason }) => {
                assert!(reason.contains("delay level 3"), "{reason}");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert!(!*ran.lock().unwrap(), "the local transaction did not run");
        let half_end = b.broker.state().store.max_offset_in_queue(HALF_TOPIC, 0);
        assert!(half_end <= 0, "no half was stored");
        let stats = producer.producer().stats();
        assert_eq!((stats.attempts, stats.failed_illegal), (0, 1), "{stats:?}");
        producer.shutdown().await;
    })
    .await;
}
