//! The path of one send inside the producer: validation, the in-flight
//! permit, the attempt loop with its retry rules, and the request and
//! response of one attempt.

use std::{
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use client_core::{CallError, Deadline, PublishRoute, RouteCache};
use message_model::{flags::TRANSACTION_PREPARED_TYPE, properties::keys};
use remoting_net::RemotingClient;
use remoting_protocol::message::compression::{compress, ZLIB_SYS_FLAG};
use remoting_protocol::{
    body::{encode_batch, BatchEntry},
    message::UniqueIdGenerator,
    ResponseCode,
};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::{
    budget::{backoff, RetryBudget},
    fault::FaultTable,
    heartbeat::Registration,
    message::{check_body, check_topic, encode_properties, encode_properties_with, Prepared},
    selector::select,
    stats::Counters,
    wire::{parse_response, send_request},
    BusyPolicy, Message, MessageQueue, ProducerConfig, ProducerError, SendResult, SendStatus,
};

/// Broker answers after which a send moves on to another broker: RocketMQ's
/// `retryResponseCodes` (4.9.4 to 5.2) plus `GO_AWAY` (a broker shutting
/// down, 5.3.1). `SYSTEM_BUSY` is governed by the [`BusyPolicy`] instead.
pub const RETRYABLE_CODES: &[ResponseCode] = &[
    ResponseCode::TOPIC_NOT_EXIST,
    ResponseCode::SERVICE_NOT_AVAILABLE,
    ResponseCode::SYSTEM_ERROR,
    ResponseCode::NO_PERMISSION,
    ResponseCode::NO_BUYER_ID,
    ResponseCode::NOT_IN_CURRENT_UNIT,
    ResponseCode::GO_AWAY,
];

/// Everything the producer's tasks share.
#[derive(Debug)]
pub(crate) struct Inner {
    pub config: ProducerConfig,
    pub client: RemotingClient,
    pub routes: RouteCache,
    pub faults: Option<FaultTable>,
    pub budget: Option<RetryBudget>,
    pub async_permits: Arc<Semaphore>,
    pub oneway_permits: Arc<Semaphore>,
    pub ids: UniqueIdGenerator,
    pub counters: Counters,
    pub closed: AtomicBool,
    pub registration: Registration,
}

/// What to do after a failed attempt.
enum Next {
    Retry,
    Busy,
    GiveUp,
}

/// How long a broker's `[QUOTA]` answer says to wait before the send is
/// let through; `None` for any other outcome.
fn quota_wait(e: &ProducerError) -> Option<Duration> {
    match e {
        ProducerError::Broker {
            code,
            remark,
            retry_after_ms: Some(ms),
            ..
        } if *code == ResponseCode::SYSTEM_BUSY && remark.starts_with("[QUOTA]") => {
            // Never less than a millisecond, whatever a broker says.
            Some(Duration::from_millis((*ms).max(1)))
        }
        _ => None,
    }
}

fn next_after(e: &ProducerError) -> Next {
    match e {
        _ if e.is_busy() => Next::Busy,
        ProducerError::Broker { code, .. } if RETRYABLE_CODES.contains(code) => Next::Retry,
        ProducerError::Connection { .. } | ProducerError::Timeout { .. } => Next::Retry,
        _ => Next::GiveUp,
    }
}

impl Inner {
    pub(crate) fn check_open(&self) -> Result<(), ProducerError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ProducerError::Shutdown);
        }
        Ok(())
    }

    /// Validates a message and gives it a unique key.
    pub(crate) fn prepare(&self, msg: &Message) -> Result<Prepared, ProducerError> {
        self.prepare_with(msg, &[])
    }

    /// Validates a message for a transaction and makes it a half message:
    /// `TRAN_MSG=true`, `PGROUP` and the prepared sysFlag. Delay levels are
    /// refused: a half is delivered when it is committed.
    pub(crate) fn prepare_half(&self, msg: &Message) -> Result<Prepared, ProducerError> {
        if let Some(level) = msg.delay_level {
            return Err(ProducerError::MessageIllegal {
                reason: format!(
                    "delay level {level} on a transactional message: a half message is \
                     delivered when its transaction commits and cannot be delayed"
                ),
            });
        }
        let mut prep = self.prepare_with(
            msg,
            &[
                (keys::TRANSACTION_PREPARED, "true"),
                (keys::PRODUCER_GROUP, &self.config.producer_group),
            ],
        )?;
        prep.sys_flag |= TRANSACTION_PREPARED_TYPE;
        Ok(prep)
    }

    /// [`Inner::prepare`] with properties the producer adds (`extra`).
    fn prepare_with(
        &self,
        msg: &Message,
        extra: &[(&str, &str)],
    ) -> Result<Prepared, ProducerError> {
        check_topic(&msg.topic, &self.config.create_topic_key)?;
        check_body(msg.body.len(), self.config.max_message_size)?;
        let key = self.ids.next_key().encode();
        let properties = encode_properties_with(msg, &key, extra)?;
        // The size limit applies to the body as given, as in the Java client.
        let compressed = (msg.body.len() > self.config.compress_msg_body_over_howmuch)
            .then(|| compress(&msg.body))
            .flatten();
        let (body, sys_flag) = match compressed {
            Some(packed) => (packed, ZLIB_SYS_FLAG),
            None => (msg.body.clone(), 0),
        };
        Ok(Prepared {
            topic: msg.topic.clone(),
            body,
            flag: msg.flag,
            sys_flag,
            properties,
            msg_id: key,
            batch: false,
        })
    }

    /// Validates a batch (one topic, no delays) and encodes its body.
    pub(crate) fn prepare_batch(&self, msgs: &[Message]) -> Result<Prepared, ProducerError> {
        let illegal = |reason: String| ProducerError::MessageIllegal { reason };
        let Some(first) = msgs.first() else {
            return Err(illegal("the batch is empty".into()));
        };
        check_topic(&first.topic, &self.config.create_topic_key)?;
        let mut entries = Vec::with_capacity(msgs.len());
        let mut keys = Vec::with_capacity(msgs.len());
        for m in msgs {
            if m.topic != first.topic {
                return Err(illegal(format!(
                    "all messages of a batch must have one topic; found {} and {}",
                    first.topic, m.topic
                )));
            }
            if m.delay_level.is_some() {
                return Err(illegal("delayed messages cannot be batched".into()));
            }
            check_body(m.body.len(), self.config.max_message_size)?;
            let key = self.ids.next_key().encode();
            entries.push(BatchEntry {
                flag: m.flag,
                body: m.body.clone(),
                properties: encode_properties(m, &key)?,
            });
            keys.push(key);
        }
        let body = encode_batch(&entries).map_err(|e| illegal(e.to_string()))?;
        if body.len() > self.config.max_message_size {
            return Err(illegal(format!(
                "the encoded batch is {} bytes; maxMessageSize is {}",
                body.len(),
                self.config.max_message_size
            )));
        }
        Ok(Prepared {
            topic: first.topic.clone(),
            body,
            flag: 0,
            // Batches are never compressed, as in RocketMQ.
            sys_flag: 0,
            properties: String::new(),
            msg_id: keys.join(","),
            batch: true,
        })
    }

    /// Takes an in-flight permit, waiting at most until the deadline.
    pub(crate) async fn acquire(
        &self,
        permits: &Arc<Semaphore>,
        limit: usize,
        budget: &Deadline,
    ) -> Result<OwnedSemaphorePermit, ProducerError> {
        if let Ok(p) = Arc::clone(permits).try_acquire_owned() {
            return Ok(p);
        }
        let wait = budget.remaining();
        let acquire = Arc::clone(permits).acquire_owned();
        tokio::pin!(acquire);
        match tokio::time::timeout(wait, &mut acquire).await {
            Ok(Ok(p)) => Ok(p),
            Ok(Err(_)) => Err(ProducerError::Shutdown),
            // Counted while this send still waits in the semaphore's queue,
            // before dropping its place: a permit released since the timer
            // fired goes to the queue, not back to the pool, so the count is
            // what the send gave up on rather than a later moment's.
            Err(_) => Err(ProducerError::TooManyRequests {
                in_flight: limit.saturating_sub(permits.available_permits()),
                limit,
                waited_ms: budget.elapsed_ms(),
            }),
        }
    }

    /// The topic's publish route. A lookup that had to wait (it went to
    /// the name servers) wakes the heartbeat task, which registers the
    /// producer with the route's new brokers; a cached route is returned
    /// on the first poll and costs nothing more.
    pub(crate) async fn route(
        &self,
        topic: &str,
        budget: &Deadline,
    ) -> Result<Arc<PublishRoute>, ProducerError> {
        let mut lookup = std::pin::pin!(self.routes.get(&self.client, topic, budget));
        let mut waited = false;
        let route = std::future::poll_fn(|cx| {
            let poll = lookup.as_mut().poll(cx);
            waited |= poll.is_pending();
            poll
        })
        .await?;
        if waited {
            self.registration.route_fetched();
        }
        Ok(route)
    }

    /// Sends with up to `times_total` attempts, moving to another broker
    /// after a retryable failure and treating `SYSTEM_BUSY` by the policy.
    pub(crate) async fn send_with_retries(
        &self,
        prep: &Prepared,
        budget: &Deadline,
        times_total: u32,
    ) -> Result<SendResult, ProducerError> {
        let info = self.route(&prep.topic, budget).await?;
        if let Some(b) = &self.budget {
            b.deposit();
        }
        let span = tracing::debug_span!(
            "send",
            topic = %prep.topic,
            broker = tracing::field::Empty,
            attempt = tracing::field::Empty
        );
        let mut last_broker: Option<String> = None;
        let mut last_err: Option<ProducerError> = None;
        let mut not_ok: Option<SendResult> = None;
        let mut busy_retries = 0_u32;
        let mut attempt = 0_u32;
        // Waits for a quota are bounded by the send timeout, not counted as
        // attempts: each lasts at least the broker's shortest hint.
        while attempt < times_total {
            if budget.remaining().is_zero() {
                break;
            }
            let faults = self.faults.as_ref();
            let Some(mq) = select(&info, last_broker.as_deref(), faults, Instant::now()) else {
                break;
            };
            span.record("broker", mq.broker_name.as_str());
            span.record("attempt", attempt);
            let outcome = self
                .attempt(&info, prep, &mq, budget, attempt > 0)
                .instrument(span.clone())
                .await;
            let e = match outcome {
                Ok(result)
                    // A half stored with a shortfall stays where it is:
                    // another copy elsewhere would be a second transaction
                    // with the same key.
                    if result.status != SendStatus::SendOk
                        && self.config.retry_another_broker_when_not_store_ok
                        && !prep.is_half()
                        && attempt + 1 < times_total =>
                {
                    last_broker = Some(mq.broker_name);
                    not_ok = Some(result);
                    attempt += 1;
                    continue;
                }
                Ok(result) => return Ok(result),
                Err(e) => e,
            };
            let give_up = |e| not_ok.clone().ok_or(e);
            if let Some(wait) = quota_wait(&e) {
                // Over a quota: the broker said when the tokens are back.
                // Waiting that long is what the quota asks for, so it spends
                // neither an attempt nor the retry budget.
                if wait >= budget.remaining() {
                    return give_up(e);
                }
                self.counters.quota_wait();
                tracing::debug!(parent: &span, wait_ms = millis(wait), "over a quota; waiting for its tokens");
                tokio::time::sleep(wait).await;
                last_err = Some(e);
                continue;
            }
            attempt += 1;
            match next_after(&e) {
                Next::GiveUp => return give_up(e),
                Next::Retry => {
                    // The broker refused, went away or stopped answering
                    // (a master that died or froze): the next attempt, and
                    // the next send, read the route again at once, so they
                    // find a newly elected master without waiting for the
                    // periodic refresh.
                    if matches!(
                        e,
                        ProducerError::Broker { .. }
                            | ProducerError::Connection { .. }
                            | ProducerError::Timeout { .. }
                    ) {
                        self.routes.mark_stale(&prep.topic);
                    }
                }
                Next::Busy => {
                    let BusyPolicy::RetryWithBackoff { base, max, .. } = self.config.busy_policy
                    else {
                        return give_up(e);
                    };
                    if attempt >= times_total {
                        return give_up(e);
                    }
                    let hint = match &e {
                        ProducerError::Broker { retry_after_ms, .. } => {
                            retry_after_ms.map(Duration::from_millis)
                        }
                        _ => None,
                    };
                    let pause = backoff(base, max, busy_retries, hint, fastrand::f64());
                    if pause >= budget.remaining() {
                        return give_up(e);
                    }
                    if !self.budget.as_ref().is_some_and(RetryBudget::try_withdraw) {
                        self.counters.budget_exhausted();
                        tracing::debug!(parent: &span, "retry budget exhausted; busy answer returned");
                        return give_up(e);
                    }
                    busy_retries += 1;
                    self.counters.busy_retry();
                    tracing::debug!(parent: &span, pause_ms = millis(pause), "broker busy; retrying after a pause");
                    tokio::time::sleep(pause).await;
                }
            }
            last_broker = Some(mq.broker_name);
            last_err = Some(e);
        }
        match (not_ok, last_err) {
            (Some(result), _) => Ok(result),
            (None, Some(e)) => Err(e),
            (None, None) => Err(budget.timed_out(None).into()),
        }
    }

    /// One attempt on one queue; updates the fault table.
    pub(crate) async fn attempt(
        &self,
        info: &PublishRoute,
        prep: &Prepared,
        mq: &MessageQueue,
        budget: &Deadline,
        retry: bool,
    ) -> Result<SendResult, ProducerError> {
        let addr = master_addr(info, mq)?;
        self.counters.attempt(retry);
        let began = Instant::now();
        let remaining = budget.remaining();
        let request = send_request(&self.config, prep, mq);
        let invoked = tokio::time::timeout(remaining, self.client.invoke(addr, request, remaining));
        let result = match invoked.await {
            Ok(Ok(response)) => parse_response(response, prep, mq, addr),
            Ok(Err(e)) => Err(CallError::from_client(addr, e, budget.timeout_ms()).into()),
            Err(_) => Err(budget.timed_out(Some(addr)).into()),
        };
        if let Some(faults) = &self.faults {
            let failed = result.is_err();
            faults.update(
                &mq.broker_name,
                began.elapsed(),
                failed,
                !failed,
                Instant::now(),
            );
        }
        if let Err(e) = &result {
            tracing::debug!(broker_addr = addr, cause = %e, "send attempt failed");
        }
        result
    }

    /// A oneway send: one attempt, handed to the connection, no answer.
    pub(crate) async fn oneway(
        &self,
        prep: &Prepared,
        budget: &Deadline,
    ) -> Result<(), ProducerError> {
        let info = self.route(&prep.topic, budget).await?;
        let mq = select(&info, None, self.faults.as_ref(), Instant::now()).ok_or_else(|| {
            ProducerError::NoRoute {
                topic: prep.topic.clone(),
            }
        })?;
        let addr = master_addr(&info, &mq)?;
        self.counters.attempt(false);
        let request = send_request(&self.config, prep, &mq);
        let span = tracing::debug_span!("send_oneway", topic = %prep.topic, broker = %mq.broker_name, attempt = 0);
        let sent =
            tokio::time::timeout(budget.remaining(), self.client.invoke_oneway(addr, request))
                .instrument(span)
                .await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(CallError::from_client(addr, e, budget.timeout_ms()).into()),
            Err(_) => Err(budget.timed_out(Some(addr)).into()),
        }
    }
}

/// Sends a prepared message once to one queue (`send_to_queue`).
pub(crate) async fn send_once(
    inner: &Inner,
    prep: &Prepared,
    queue: &MessageQueue,
    budget: &Deadline,
) -> Result<SendResult, ProducerError> {
    let info = inner.route(&prep.topic, budget).await?;
    let span =
        tracing::debug_span!("send", topic = %prep.topic, broker = %queue.broker_name, attempt = 0);
    inner
        .attempt(&info, prep, queue, budget, false)
        .instrument(span)
        .await
}

/// The master address of the queue's broker in the route.
fn master_addr<'a>(route: &'a PublishRoute, mq: &MessageQueue) -> Result<&'a str, ProducerError> {
    route
        .master_addr(&mq.broker_name)
        .ok_or_else(|| ProducerError::NoBroker {
            broker_name: mq.broker_name.clone(),
        })
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use client_core::NameServers;
    use remoting_protocol::{header::SendMessageRequestHeader, message::properties::Properties};

    use super::*;
    use crate::wire::send_request;

    fn inner(group: &str) -> Inner {
        let config = ProducerConfig {
            producer_group: group.into(),
            compress_msg_body_over_howmuch: 8,
            ..ProducerConfig::with_namesrv("n:1")
        };
        Inner {
            client: RemotingClient::default(),
            routes: RouteCache::new(
                NameServers::new(config.namesrv_addr.clone()),
                config.create_topic_key.clone(),
                4,
                Duration::from_secs(1),
                Duration::from_secs(30),
            ),
            faults: None,
            budget: None,
            async_permits: Arc::new(Semaphore::new(1)),
            oneway_permits: Arc::new(Semaphore::new(1)),
            ids: UniqueIdGenerator::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 1, 1),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            registration: Registration::new(IpAddr::V4(Ipv4Addr::LOCALHOST), group, Vec::new()),
            config,
        }
    }

    #[test]
    fn a_half_carries_the_transaction_property_group_and_prepared_flag() {
        let inner = inner("TXG");
        let msg = Message::new("T", "b")
            .with_tags("A")
            .with_property("PGROUP", "someone-else");
        let half = inner.prepare_half(&msg).unwrap();
        assert!(half.is_half() && !half.batch);
        assert_eq!(half.sys_flag, TRANSACTION_PREPARED_TYPE);
        let props = Properties::decode(&half.properties);
        assert_eq!(props.get(keys::TRANSACTION_PREPARED), Some("true"));
        assert_eq!(props.get(keys::PRODUCER_GROUP), Some("TXG"));
        assert_eq!(props.get(keys::TAGS), Some("A"));
        assert_eq!(
            props.get(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            Some(half.msg_id.as_str())
        );
        let mq = MessageQueue {
            topic: "T".into(),
            broker_name: "a".into(),
            queue_id: 1,
        };
        let header =
            SendMessageRequestHeader::from_command(&send_request(&inner.config, &half, &mq))
                .unwrap();
        assert_eq!(header.sys_flag, TRANSACTION_PREPARED_TYPE);
        assert_eq!(header.producer_group, "TXG");

        let big = inner
            .prepare_half(&Message::new("T", "a body longer than eight bytes"))
            .unwrap();
        assert_eq!(big.sys_flag, TRANSACTION_PREPARED_TYPE | ZLIB_SYS_FLAG);
        let plain = inner.prepare(&Message::new("T", "b")).unwrap();
        assert!(!plain.is_half());
        assert_eq!(
            Properties::decode(&plain.properties).get(keys::TRANSACTION_PREPARED),
            None
        );
    }

    #[test]
    fn a_half_with_a_delay_level_is_refused() {
        let err = inner("TXG")
            .prepare_half(&Message::new("T", "b").with_delay_level(2))
            .unwrap_err();
        assert!(
            matches!(&err, ProducerError::MessageIllegal { reason } if reason.contains("delay level 2")),
            "{err}"
        );
    }

    #[test]
    fn retry_rules_follow_rocketmq_with_busy_apart() {
        let broker = |code| ProducerError::Broker {
            addr: "b".into(),
            code: ResponseCode(code),
            remark: String::new(),
            retry_after_ms: None,
        };
        assert!(matches!(next_after(&broker(17)), Next::Retry));
        assert!(matches!(next_after(&broker(1)), Next::Retry));
        assert!(matches!(next_after(&broker(1500)), Next::Retry));
        assert!(matches!(next_after(&broker(2)), Next::Busy));
        assert!(matches!(next_after(&broker(13)), Next::GiveUp));
        assert!(matches!(
            next_after(&ProducerError::Timeout {
                timeout_ms: 1,
                addr: None
            }),
            Next::Retry
        ));
        assert!(matches!(
            next_after(&ProducerError::Protocol {
                addr: "b".into(),
                reason: String::new()
            }),
            Next::GiveUp
        ));
    }
}
