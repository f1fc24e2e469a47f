//! Transactional messages: [`TransactionProducer`] sends a half message,
//! runs the caller's local transaction and commits or rolls the half back;
//! brokers ask its [`TransactionListener`] about halves whose transaction
//! did not end.

use std::{
    collections::BTreeMap,
    fmt,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
};

use bytes::Bytes;
use client_core::{CallError, Deadline};
use message_model::flags::{
    TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE,
};
use remoting_net::{CancellationToken, ClientOptions};
use remoting_protocol::{RemotingCommand, RequestCode, ResponseCode};
use serde::{Deserialize, Serialize};
use tokio::{sync::mpsc, task::JoinHandle};

use crate::{
    check, message::check_topic, send::Inner, Message, Producer, ProducerConfig, ProducerError,
    SendResult, SendStatus,
};

/// The producer group RocketMQ reserves for producers that name none; a
/// transactional producer needs a group of its own.
const DEFAULT_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";

/// What became of a local transaction: RocketMQ's `LocalTransactionState`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// It committed: the message is delivered (`COMMIT_MESSAGE`).
    Commit,
    /// It rolled back: the message is never delivered (`ROLLBACK_MESSAGE`).
    Rollback,
    /// Not known yet: the half message stays, and its broker asks the
    /// group's [`TransactionListener`] later (`UNKNOW`).
    Unknown,
}

impl LocalTransactionState {
    /// The `commitOrRollback` value of `END_TRANSACTION`: 8 (commit), 12
    /// (rollback) or 0 (unknown).
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::Commit => TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::Rollback => TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => TRANSACTION_NOT_TYPE,
        }
    }
}

/// Answers brokers' checks of half messages whose transaction did not end
/// (the producer stopped before ending it, the end was lost, or the local
/// transaction reported [`LocalTransactionState::Unknown`]): RocketMQ's
/// `TransactionListener.checkLocalTransaction`.
///
/// A check may come to any producer of the group, not only the one that
/// sent the half, so the answer should come from shared state (a database
/// row keyed by [`CheckedMessage::transaction_id`], say). It is called on a
/// blocking thread, at most `checkThreadPoolMaxSize` calls at once, so it
/// may block. A call that panics is not answered; the broker checks again.
///
/// Any `Fn(&CheckedMessage) -> LocalTransactionState + Send + Sync` closure
/// is a listener:
///
/// ```
/// use producer_client::{CheckedMessage, LocalTransactionState, TransactionListener};
///
/// fn takes(_: impl TransactionListener) {}
/// takes(|msg: &CheckedMessage| {
///     if msg.keys.iter().any(|k| k == "paid") {
///         LocalTransactionState::Commit
///     } else {
///         LocalTransactionState::Rollback
///     }
/// });
/// ```
pub trait TransactionListener: Send + Sync + 'static {
    /// The state of the local transaction that sent `msg`.
    fn check_local_transaction(&self, msg: &CheckedMessage) -> LocalTransactionState;
}

impl<F> TransactionListener for F
where
    F: Fn(&CheckedMessage) -> LocalTransactionState + Send + Sync + 'static,
{
    fn check_local_transaction(&self, msg: &CheckedMessage) -> LocalTransactionState {
        self(msg)
    }
}

/// A half message a broker asks about, as the broker stored it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedMessage {
    /// The topic it is for (not the broker's half topic).
    pub topic: String,
    /// The queue it is for.
    pub queue_id: i32,
    /// Payload, decompressed.
    pub body: Bytes,
    /// Tag (property `TAGS`).
    pub tags: Option<String>,
    /// Business keys (property `KEYS`).
    pub keys: Vec<String>,
    /// User flag.
    pub flag: i32,
    /// Every property, the producer's and the broker's included.
    pub properties: BTreeMap<String, String>,
    /// The producer's unique id (`UNIQ_KEY`), as in
    /// [`SendResult::msg_id`].
    pub msg_id: String,
    /// The transaction id the broker gave the half (its unique key on
    /// Sluice).
    pub transaction_id: String,
    /// The half's offset message id, if the broker sent one.
    pub offset_msg_id: Option<String>,
    /// When the producer made the message (ms since the epoch).
    pub born_timestamp: i64,
    /// When the broker stored the half (ms since the epoch).
    pub store_timestamp: i64,
    /// The name of the broker that asks, if it sent one.
    pub broker_name: Option<String>,
    /// The address of the connection the check came on.
    pub broker_addr: String,
}

/// How the end of a transaction fared at the broker.
#[derive(Debug)]
pub enum EndTransactionStatus {
    /// The broker answered `SUCCESS`: the commit or rollback is recorded.
    Recorded,
    /// The outcome was [`LocalTransactionState::Unknown`]: the end (with
    /// `commitOrRollback` 0) was handed to the connection without waiting,
    /// as brokers record nothing for it and RocketMQ's do not answer it.
    /// The broker checks the half later.
    SentOneway,
    /// The end did not reach the broker, or the broker refused it. The
    /// half stays, and the broker asks the group's [`TransactionListener`]
    /// once it is `transactionTimeOut` old.
    Failed(ProducerError),
}

impl EndTransactionStatus {
    /// Reports whether the broker recorded the commit or rollback.
    pub fn is_recorded(&self) -> bool {
        matches!(self, EndTransactionStatus::Recorded)
    }
}

/// The result of [`TransactionProducer::send_in_transaction`].
#[derive(Debug)]
pub struct TransactionSendResult {
    /// Where the half message landed. Its `transaction_id` is what a later
    /// check names.
    pub send_result: SendResult,
    /// The local transaction's outcome; [`LocalTransactionState::Rollback`]
    /// without running it when the half was stored with a shortfall
    /// (`send_result.status` is not `SendOk`), as RocketMQ does.
    pub local_state: LocalTransactionState,
    /// Whether the broker recorded the end.
    pub end: EndTransactionStatus,
}

/// The settings of a [`TransactionProducer`]: a producer's (its heartbeats,
/// `heartbeatBrokerInterval`, included), plus the brokers it registers
/// with from the start and the serving of brokers' checks. Keys
/// deserialize in RocketMQ's camelCase, the producer's under `producer`;
/// unknown keys are refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct TransactionConfig {
    /// The producer's settings. Its `producerGroup` is the group brokers
    /// check transactions with, so it must be set and must not be
    /// `DEFAULT_PRODUCER`.
    pub producer: ProducerConfig,
    /// Most calls of the [`TransactionListener`] at once. Default 1;
    /// 1..=256.
    pub check_thread_pool_max_size: usize,
    /// Most checks waiting for the listener; further ones are dropped (the
    /// broker checks again later). Default 2000; 1..=1000000.
    pub check_request_hold_max: usize,
    /// Topics whose brokers the producer registers with from the start,
    /// besides the auto-create topic's (`createTopicKey`) and the topics
    /// it sends to, so that it answers checks of halves an earlier producer
    /// of the group left behind before it sends anything itself. Default
    /// none.
    pub topics: Vec<String>,
}

impl Default for TransactionConfig {
    fn default() -> Self {
        Self {
            producer: ProducerConfig::default(),
            check_thread_pool_max_size: 1,
            check_request_hold_max: 2000,
            topics: Vec::new(),
        }
    }
}

impl TransactionConfig {
    /// A default configuration with the given name servers and producer
    /// group.
    pub fn new(namesrv_addr: &str, producer_group: impl Into<String>) -> Self {
        Self {
            producer: ProducerConfig {
                producer_group: producer_group.into(),
                ..ProducerConfig::with_namesrv(namesrv_addr)
            },
            ..Self::default()
        }
    }

    /// Checks every value, the producer's included.
    ///
    /// # Errors
    /// [`ProducerError::Config`] naming the key, the value and what is allowed.
    pub fn validate(&self) -> Result<(), ProducerError> {
        self.producer.validate()?;
        let invalid = |key: &'static str, value: String, allowed: &str| {
            Err(ProducerError::Config {
                key,
                value,
                allowed: allowed.to_owned(),
            })
        };
        if self.producer.producer_group == DEFAULT_PRODUCER_GROUP {
            return invalid(
                "producerGroup",
                self.producer.producer_group.clone(),
                "a group of the application's own: brokers check a transaction \
                 with any producer of its group",
            );
        }
        if !(1..=256).contains(&self.check_thread_pool_max_size) {
            return invalid(
                "checkThreadPoolMaxSize",
                self.check_thread_pool_max_size.to_string(),
                "1..=256",
            );
        }
        if !(1..=1_000_000).contains(&self.check_request_hold_max) {
            return invalid(
                "checkRequestHoldMax",
                self.check_request_hold_max.to_string(),
                "1..=1000000",
            );
        }
        for topic in &self.topics {
            if let Err(e) = check_topic(topic, &self.producer.create_topic_key) {
                return invalid("topics", topic.clone(), &e.to_string());
            }
        }
        Ok(())
    }
}

/// A producer of transactional messages: RocketMQ's
/// `TransactionMQProducer`.
///
/// [`TransactionProducer::send_in_transaction`] stores a half message
/// (invisible to consumers), runs the caller's local transaction and then
/// commits the half (the message is delivered) or rolls it back (it never
/// is). When the outcome is unknown, or the producer stops before ending the
/// half, the broker later asks a producer of the same group, whose
/// [`TransactionListener`] decides.
///
/// For that, the producer heartbeats the brokers as every [`Producer`]
/// does (at start, after a route lookup and every
/// `heartbeatBrokerInterval`), and besides: at start, before returning, the
/// brokers of the auto-create topic and of [`TransactionConfig::topics`],
/// and a broker it sends a half to whenever that connection has not
/// carried a heartbeat yet. It answers the brokers'
/// `CHECK_TRANSACTION_STATE` requests with `END_TRANSACTION`. Malformed
/// checks are logged and ignored.
///
/// Cheap to share behind an `Arc`; every method takes `&self`.
pub struct TransactionProducer {
    producer: Producer,
    /// The dispatcher of checks.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    stop: CancellationToken,
}

impl fmt::Debug for TransactionProducer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("producer", &self.producer)
            .field("client_id", &self.producer.client_id())
            .finish_non_exhaustive()
    }
}

impl TransactionProducer {
    /// Starts a transactional producer: checks the configuration, starts
    /// the producer, registers its group with the brokers of the configured
    /// topics and of the auto-create topic, and starts serving checks with
    /// `listener`. Brokers that cannot be reached yet are registered with by
    /// a later heartbeat.
    ///
    /// # Errors
    /// [`ProducerError::Config`] naming a refused value.
    pub async fn start(
        config: TransactionConfig,
        listener: impl TransactionListener,
    ) -> Result<Self, ProducerError> {
        config.validate()?;
        let (queue, checks) = mpsc::channel(config.check_request_hold_max);
        let options = ClientOptions {
            on_request: Some(check::serve(queue)),
            ..ClientOptions::default()
        };
        let mut topics = vec![config.producer.create_topic_key.clone()];
        topics.extend(config.topics.iter().cloned());
        let producer = Producer::start_with(config.producer, options, topics).await?;
        let stop = CancellationToken::new();
        let listener: Arc<dyn TransactionListener> = Arc::new(listener);
        let dispatcher = tokio::spawn(check::dispatch(
            Arc::clone(producer.inner()),
            listener,
            checks,
            config.check_thread_pool_max_size,
            stop.clone(),
        ));
        tracing::debug!(
            group = %producer.config().producer_group,
            client = %producer.client_id(),
            "transactional producer started"
        );
        Ok(Self {
            producer,
            tasks: Mutex::new(vec![dispatcher]),
            stop,
        })
    }

    /// The producer underneath, for sends outside transactions.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The client id the producer registers with brokers under.
    pub fn client_id(&self) -> &str {
        self.producer.client_id()
    }

    /// Sends `msg` as a half message, runs `local_transaction` with the
    /// send's result, and ends the half with the outcome it returns.
    ///
    /// The half is sent as [`Producer::send`] sends (the same budget,
    /// attempts, busy policy and retry budget) except that a half stored
    /// with a flush or replication shortfall is not sent again elsewhere;
    /// in that case the local transaction is not run and the half is rolled
    /// back. A commit or rollback is sent as a request that waits (within
    /// `sendMsgTimeout`) for the broker's answer, reported in
    /// [`TransactionSendResult::end`]; an unknown outcome is sent oneway. A
    /// failed end is not an error of this call: the broker checks the half
    /// later. If `local_transaction` panics, the panic propagates and the
    /// half is left to the check as well.
    ///
    /// Batches cannot be sent in a transaction, and messages with a delay
    /// level are refused.
    ///
    /// ```no_run
    /// # use producer_client::{LocalTransactionState, Message, TransactionProducer};
    /// # async fn demo(producer: &TransactionProducer) -> Result<(), producer_client::ProducerError> {
    /// let done = producer
    ///     .send_in_transaction(Message::new("Orders", "paid"), |sent| async move {
    ///         // Record `sent.msg_id` with the order, in the same database transaction.
    ///         LocalTransactionState::Commit
    ///     })
    ///     .await?;
    /// assert!(done.end.is_recorded());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// The half's send errors, as [`Producer::send`]'s;
    /// [`ProducerError::MessageIllegal`] for a delay level.
    pub async fn send_in_transaction<F, Fut>(
        &self,
        msg: Message,
        local_transaction: F,
    ) -> Result<TransactionSendResult, ProducerError>
    where
        F: FnOnce(SendResult) -> Fut,
        Fut: Future<Output = LocalTransactionState>,
    {
        let inner = self.producer.inner();
        let config = &inner.config;
        let times_total = 1 + config.retry_times_when_send_failed;
        let sent = self
            .producer
            .counted(
                config.send_msg_timeout,
                |inner| inner.prepare_half(&msg),
                |inner, prep, budget| async move {
                    inner.send_with_retries(&prep, &budget, times_total).await
                },
            )
            .await?;
        inner.ensure_registered(&sent.broker_addr).await;
        let local_state = if sent.status == SendStatus::SendOk {
            local_transaction(sent.clone()).await
        } else {
            tracing::warn!(
                msg_id = %sent.msg_id,
                status = ?sent.status,
                "half message stored with a shortfall: rolled back without running the local transaction"
            );
            LocalTransactionState::Rollback
        };
        let end = end(inner, &sent, local_state).await;
        if let EndTransactionStatus::Failed(e) = &end {
            tracing::warn!(
                msg_id = %sent.msg_id,
                state = ?local_state,
                cause = %e,
                "transaction end not recorded; the broker will check the half message"
            );
        }
        Ok(TransactionSendResult {
            send_result: sent,
            local_state,
            end,
        })
    }

    /// Stops the serving of checks (a listener call under way finishes,
    /// unanswered), then shuts the producer down as [`Producer::shutdown`]
    /// does, heartbeats included; closing its connections makes the
    /// brokers forget it. Calling it again does nothing.
    pub async fn shutdown(&self) {
        self.stop.cancel();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
        self.producer.shutdown().await;
    }
}

impl Drop for TransactionProducer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Ends the half `sent` names with `state`, at the broker that stored it.
async fn end(
    inner: &Inner,
    sent: &SendResult,
    state: LocalTransactionState,
) -> EndTransactionStatus {
    if let Err(e) = inner.check_open() {
        return EndTransactionStatus::Failed(e);
    }
    let header = match check::end_header(&inner.config.producer_group, sent, state) {
        Ok(h) => h,
        Err(e) => return EndTransactionStatus::Failed(e),
    };
    let addr = sent.broker_addr.as_str();
    let request = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
    let budget = Deadline::new(inner.config.send_msg_timeout);
    let failed = |e: CallError| EndTransactionStatus::Failed(e.into());
    if state == LocalTransactionState::Unknown {
        let handed = tokio::time::timeout(
            budget.remaining(),
            inner.client.invoke_oneway(addr, request),
        )
        .await;
        return match handed {
            Ok(Ok(())) => EndTransactionStatus::SentOneway,
            Ok(Err(e)) => failed(CallError::from_client(addr, e, budget.timeout_ms())),
            Err(_) => failed(budget.timed_out(Some(addr))),
        };
    }
    let invoked = tokio::time::timeout(
        budget.remaining(),
        inner.client.invoke(addr, request, budget.remaining()),
    )
    .await;
    match invoked {
        Ok(Ok(response)) if response.response_code() == ResponseCode::SUCCESS => {
            EndTransactionStatus::Recorded
        }
        Ok(Ok(response)) => failed(CallError::refused(addr, &response)),
        Ok(Err(e)) => failed(CallError::from_client(addr, e, budget.timeout_ms())),
        Err(_) => failed(budget.timed_out(Some(addr))),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use remoting_protocol::body;

    use super::*;

    #[test]
    fn states_map_to_rocketmq_end_codes() {
        assert_eq!(LocalTransactionState::Commit.commit_or_rollback(), 8);
        assert_eq!(LocalTransactionState::Rollback.commit_or_rollback(), 12);
        assert_eq!(LocalTransactionState::Unknown.commit_or_rollback(), 0);
    }

    #[test]
    fn the_config_needs_a_group_of_its_own() {
        let ok = TransactionConfig::new("n:1", "TXG");
        assert!(ok.validate().is_ok());
        assert_eq!(
            ok.producer.heartbeat_broker_interval,
            Duration::from_secs(30)
        );
        assert_eq!(
            (ok.check_thread_pool_max_size, ok.check_request_hold_max),
            (1, 2000)
        );
        let default_group = TransactionConfig::new("n:1", "DEFAULT_PRODUCER");
        assert!(matches!(
            default_group.validate(),
            Err(ProducerError::Config {
                key: "producerGroup",
                ..
            })
        ));
        for (bad, key) in [
            (
                TransactionConfig {
                    producer: ProducerConfig {
                        heartbeat_broker_interval: Duration::from_millis(5),
                        ..ok.producer.clone()
                    },
                    ..ok.clone()
                },
                "heartbeatBrokerInterval",
            ),
            (
                TransactionConfig {
                    check_thread_pool_max_size: 0,
                    ..ok.clone()
                },
                "checkThreadPoolMaxSize",
            ),
            (
                TransactionConfig {
                    check_request_hold_max: 0,
                    ..ok.clone()
                },
                "checkRequestHoldMax",
            ),
            (
                TransactionConfig {
                    topics: vec!["bad topic".into()],
                    ..ok.clone()
                },
                "topics",
            ),
        ] {
            match bad.validate() {
                Err(ProducerError::Config { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{key}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_config_deserializes_with_the_producer_nested() {
        let text = r#"{"producer":{"namesrvAddr":"a:1","producerGroup":"TXG",
                       "heartbeatBrokerInterval":500},"topics":["Orders"]}"#;
        let c: TransactionConfig = serde_json_like(text);
        assert_eq!(c.producer.producer_group, "TXG");
        assert_eq!(
            c.producer.heartbeat_broker_interval,
            Duration::from_millis(500)
        );
        assert_eq!(c.topics, ["Orders"]);
        assert!(c.validate().is_ok());
        // The interval is the producer's key now, not the transaction's.
        let misplaced = r#"{"producer":{"namesrvAddr":"a:1","producerGroup":"TXG"},
                            "heartbeatBrokerInterval":500}"#;
        let err = body::from_json::<TransactionConfig>(misplaced.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("heartbeatBrokerInterval"), "{err}");
    }

    fn serde_json_like(text: &str) -> TransactionConfig {
        body::from_json(text.as_bytes()).unwrap()
    }
}
