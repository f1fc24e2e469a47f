//! [`Producer`]: start, the send methods, statistics and shutdown.

use std::{
    future::Future,
    net::{IpAddr, Ipv4Addr},
    pin::Pin,
    sync::{atomic::AtomicBool, Arc, Mutex, PoisonError},
    task::{Context, Poll},
    time::Duration,
};

use client_core::{Deadline, NameServers, RouteCache};
use remoting_net::{CancellationToken, ClientOptions, RemotingClient};
use remoting_protocol::message::UniqueIdGenerator;
use tokio::{sync::Semaphore, task::JoinHandle};

use crate::{
    budget::RetryBudget,
    fault::FaultTable,
    heartbeat::{heartbeat_loop, Registration},
    ordered::{send_selected, MessageQueueSelector},
    send::{send_once, Inner},
    stats::Counters,
    BusyPolicy, Message, MessageQueue, ProducerConfig, ProducerError, ProducerStats, SendResult,
};

/// A producer: sends messages to the brokers that serve their topics.
///
/// It registers its group with the brokers of its routes by `HEART_BEAT`
/// under its [`Producer::client_id`]: soon after a send looks a topic's
/// route up, and every `heartbeatBrokerInterval`.
///
/// Cheap to share behind an `Arc`; every method takes `&self`. Dropping the
/// producer stops its route refresher and heartbeats; [`Producer::shutdown`]
/// also waits for sends under way and closes the connections.
#[derive(Debug)]
pub struct Producer {
    inner: Arc<Inner>,
    /// The route refresher and the heartbeat task.
    tasks: Mutex<Vec<JoinHandle<()>>>,
    stop: CancellationToken,
}

impl Producer {
    /// Starts a producer: checks the configuration and starts the tasks that
    /// refresh cached routes every `pollNameServerInterval` and heartbeat
    /// the brokers. Routes are fetched on first use, so the name servers
    /// need not be up yet.
    ///
    /// # Errors
    /// [`ProducerError::Config`] naming a refused value.
    pub async fn start(config: ProducerConfig) -> Result<Self, ProducerError> {
        Self::start_with(config, ClientOptions::default(), Vec::new()).await
    }

    /// [`Producer::start`] with the connections' settings, such as the
    /// server of brokers' requests, and topics whose brokers are registered
    /// with from the start: their routes are looked up and every broker of
    /// a cached route heartbeaten before this returns. The configuration's
    /// credentials, if any, sign every request, and its TLS settings, if
    /// `useTLS`, secure every connection.
    pub(crate) async fn start_with(
        config: ProducerConfig,
        mut options: ClientOptions,
        registration_topics: Vec<String>,
    ) -> Result<Self, ProducerError> {
        config.validate()?;
        options.credentials = config.credentials()?;
        options.tls = config.tls()?;
        let ip = local_ip(&config.namesrv_addr[0]).await;
        let budget = match config.busy_policy {
            BusyPolicy::Never => None,
            BusyPolicy::RetryWithBackoff { budget_ratio, .. } => {
                Some(RetryBudget::new(budget_ratio))
            }
        };
        let inner = Arc::new(Inner {
            client: RemotingClient::new(options),
            routes: RouteCache::new(
                NameServers::new(config.namesrv_addr.clone()),
                config.create_topic_key.clone(),
                // Validated to 1..=1024.
                u32::try_from(config.default_topic_queue_nums).unwrap_or(1),
                config.mq_client_api_timeout,
                config.poll_name_server_interval,
            ),
            faults: config.send_latency_fault_enable.then(FaultTable::default),
            budget,
            async_permits: Arc::new(Semaphore::new(config.client_async_semaphore_value)),
            oneway_permits: Arc::new(Semaphore::new(config.client_oneway_semaphore_value)),
            ids: UniqueIdGenerator::new(ip, std::process::id(), fastrand::i32(..)),
            counters: Counters::default(),
            closed: AtomicBool::new(false),
            registration: Registration::new(ip, &config.producer_group, registration_topics),
            config,
        });
        inner.heartbeat_all().await;
        let stop = CancellationToken::new();
        let tasks = vec![
            tokio::spawn(refresh_routes(Arc::clone(&inner), stop.clone())),
            tokio::spawn(heartbeat_loop(Arc::clone(&inner), stop.clone())),
        ];
        tracing::debug!(
            group = %inner.config.producer_group,
            client = %inner.registration.client_id(),
            namesrv = ?inner.config.namesrv_addr,
            "producer started"
        );
        Ok(Self {
            inner,
            tasks: Mutex::new(tasks),
            stop,
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &ProducerConfig {
        &self.inner.config
    }

    /// The client id the producer registers with brokers under, in
    /// RocketMQ's form `ip@pid#n`: unique among the producers of this
    /// process.
    pub fn client_id(&self) -> &str {
        self.inner.registration.client_id()
    }

    /// Sends a message and waits for the broker's answer, within
    /// `sendMsgTimeout`, with up to `1 + retryTimesWhenSendFailed` attempts.
    ///
    /// # Errors
    /// See [`ProducerError`]; after retries, the last attempt's error.
    pub async fn send(&self, msg: Message) -> Result<SendResult, ProducerError> {
        self.send_with_timeout(msg, self.inner.config.send_msg_timeout)
            .await
    }

    /// [`Producer::send`] with its own time budget instead of `sendMsgTimeout`.
    ///
    /// # Errors
    /// As [`Producer::send`].
    pub async fn send_with_timeout(
        &self,
        msg: Message,
        timeout: Duration,
    ) -> Result<SendResult, ProducerError> {
        let times_total = 1 + self.inner.config.retry_times_when_send_failed;
        self.counted(
            timeout,
            |inner| inner.prepare(&msg),
            |inner, prep, budget| async move {
                inner.send_with_retries(&prep, &budget, times_total).await
            },
        )
        .await
    }

    /// Starts an asynchronous send and returns a handle to its result.
    ///
    /// Awaiting this method waits only for an in-flight permit
    /// (`clientAsyncSemaphoreValue`), which is the producer's back-pressure;
    /// awaiting the [`SendHandle`] waits for the answer. The send has its
    /// own budget (`sendMsgTimeout`) and up to
    /// `1 + retryTimesWhenSendAsyncFailed` attempts under the same retry
    /// rules as [`Producer::send`] (RocketMQ never retries broker answers of
    /// asynchronous sends). Dropping the handle does not cancel the send.
    ///
    /// By default the budget counts from this call and a send that gets no
    /// permit within it fails with [`ProducerError::TooManyRequests`]. With
    /// `enableBackpressureForAsyncMode` the call waits for a permit as long
    /// as it takes and the budget counts from when it has one, so a fast
    /// loop of `send_async` simply slows to the pace the brokers answer.
    ///
    /// # Errors
    /// [`ProducerError::MessageIllegal`], [`ProducerError::TooManyRequests`]
    /// (only without back-pressure mode) or [`ProducerError::Shutdown`]
    /// before the send starts; the send's own errors come from the handle.
    pub async fn send_async(&self, msg: Message) -> Result<SendHandle, ProducerError> {
        let inner = &self.inner;
        inner.counters.send_started();
        let budget = Deadline::new(inner.config.send_msg_timeout);
        let started = async {
            inner.check_open()?;
            let prep = inner.prepare(&msg)?;
            if inner.config.enable_backpressure_for_async_mode {
                let Ok(permit) = Arc::clone(&inner.async_permits).acquire_owned().await else {
                    // Only a closed semaphore refuses: the producer shut down.
                    return Err(ProducerError::Shutdown);
                };
                return Ok((prep, permit, Deadline::new(inner.config.send_msg_timeout)));
            }
            let permit = inner
                .acquire(
                    &inner.async_permits,
                    inner.config.client_async_semaphore_value,
                    &budget,
                )
                .await?;
            Ok((prep, permit, budget))
        }
        .await;
        let (prep, permit, budget) = match started {
            Ok(s) => s,
            Err(e) => {
                inner.counters.failure(&e);
                return Err(e);
            }
        };
        let inner = Arc::clone(&self.inner);
        let times_total = 1 + inner.config.retry_times_when_send_async_failed;
        let task = tokio::spawn(async move {
            let result = inner.send_with_retries(&prep, &budget, times_total).await;
            drop(permit);
            inner.counters.outcome(&result);
            result
        });
        Ok(SendHandle { task })
    }

    /// Sends a message without waiting for an answer: one attempt, no
    /// retries. Succeeds once the request is handed to the connection.
    ///
    /// The oneway permit (`clientOnewaySemaphoreValue`) is held until then;
    /// the transport does not report when the bytes are written, so the
    /// limit bounds concurrent callers rather than unwritten bytes.
    ///
    /// # Errors
    /// Validation, permit, route and connection errors.
    pub async fn send_oneway(&self, msg: Message) -> Result<(), ProducerError> {
        let inner = &self.inner;
        inner.counters.send_started();
        let budget = Deadline::new(inner.config.send_msg_timeout);
        let result = async {
            inner.check_open()?;
            let prep = inner.prepare(&msg)?;
            let _permit = inner
                .acquire(
                    &inner.oneway_permits,
                    inner.config.client_oneway_semaphore_value,
                    &budget,
                )
                .await?;
            inner.oneway(&prep, &budget).await
        }
        .await;
        inner.counters.outcome(&result);
        result
    }

    /// Sends a message to one queue: one attempt, no retries, as RocketMQ's
    /// `send(msg, mq)`.
    ///
    /// # Errors
    /// [`ProducerError::MessageIllegal`] when the queue's topic is not the
    /// message's, [`ProducerError::NoRoute`] when its broker is not in the
    /// topic's route, and the errors of [`Producer::send`].
    pub async fn send_to_queue(
        &self,
        msg: Message,
        queue: &MessageQueue,
    ) -> Result<SendResult, ProducerError> {
        self.counted(
            self.inner.config.send_msg_timeout,
            |inner| {
                if msg.topic != queue.topic {
                    return Err(ProducerError::MessageIllegal {
                        reason: format!(
                            "the message's topic {} is not the queue's topic {}",
                            msg.topic, queue.topic
                        ),
                    });
                }
                inner.prepare(&msg)
            },
            |inner, prep, budget| async move { send_once(inner, &prep, queue, &budget).await },
        )
        .await
    }

    /// Sends messages of one topic as one `SEND_BATCH_MESSAGE` request: they
    /// land in one queue with consecutive offsets. Retries as
    /// [`Producer::send`]. The encoded batch must fit `maxMessageSize`.
    ///
    /// # Errors
    /// [`ProducerError::MessageIllegal`] for an empty batch, mixed topics, a
    /// delay level, or a size over the limit; else as [`Producer::send`].
    pub async fn send_batch(&self, msgs: Vec<Message>) -> Result<SendResult, ProducerError> {
        let times_total = 1 + self.inner.config.retry_times_when_send_failed;
        self.counted(
            self.inner.config.send_msg_timeout,
            |inner| inner.prepare_batch(&msgs),
            |inner, prep, budget| async move {
                inner.send_with_retries(&prep, &budget, times_total).await
            },
        )
        .await
    }

    /// Sends a message to the queue `selector` picks from the topic's queues
    /// ([`Producer::publish_queues`]), given `arg`: RocketMQ's ordered send
    /// `send(msg, selector, arg)`. Messages for which the selector picks
    /// the same queue are stored in it in the order their sends complete, so
    /// sending one key's messages one after another keeps their order.
    ///
    /// One attempt and no retry: moving a message to another queue would
    /// break its order, so a failure (a busy broker included) is returned to
    /// the caller whatever the [`BusyPolicy`].
    ///
    /// ```no_run
    /// # use producer_client::{select_by_key, Message, Producer};
    /// # async fn demo(producer: &Producer) -> Result<(), producer_client::ProducerError> {
    /// let msg = Message::new("Orders", "paid");
    /// producer.send_with_selector(msg, select_by_key, "order-42").await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`ProducerError::MessageIllegal`] when the selector's index is out of
    /// range; else as [`Producer::send_to_queue`].
    pub async fn send_with_selector<A, S>(
        &self,
        msg: Message,
        selector: S,
        arg: &A,
    ) -> Result<SendResult, ProducerError>
    where
        A: ?Sized,
        S: MessageQueueSelector<A>,
    {
        let prep = self.inner.prepare(&msg);
        self.send_to_selected(prep, |queues| selector.select(queues, &msg, arg))
            .await
    }

    /// Sends a batch (as [`Producer::send_batch`]) to the queue `selector`
    /// picks for its first message: one attempt, no retry, and the batch's
    /// messages take consecutive offsets in that queue in batch order.
    ///
    /// # Errors
    /// As [`Producer::send_batch`] and [`Producer::send_with_selector`].
    pub async fn send_batch_with_selector<A, S>(
        &self,
        msgs: Vec<Message>,
        selector: S,
        arg: &A,
    ) -> Result<SendResult, ProducerError>
    where
        A: ?Sized,
        S: MessageQueueSelector<A>,
    {
        let prep = self.inner.prepare_batch(&msgs);
        self.send_to_selected(prep, |queues| match msgs.first() {
            Some(first) => selector.select(queues, first, arg),
            None => 0,
        })
        .await
    }

    /// The request a send of `msg` to `queue` would write, built as every
    /// send builds it (validation, a fresh `UNIQ_KEY`, the properties,
    /// compression, the `SEND_MESSAGE_V2` header) but not sent: what the
    /// client-cost benchmark measures. Only with the `bench-internals`
    /// feature, which is not part of the producer's API.
    ///
    /// # Errors
    /// [`ProducerError::MessageIllegal`] as for [`Producer::send`].
    #[cfg(feature = "bench-internals")]
    pub fn request_for(
        &self,
        msg: &Message,
        queue: &MessageQueue,
    ) -> Result<remoting_protocol::RemotingCommand, ProducerError> {
        let prep = self.inner.prepare(msg)?;
        Ok(crate::wire::send_request(&self.inner.config, &prep, queue))
    }

    /// The queues a topic's messages can go to (RocketMQ's
    /// `fetchPublishMessageQueues`), from the cache or the name servers.
    ///
    /// # Errors
    /// [`ProducerError::NoRoute`], or the name servers' transport error.
    pub async fn publish_queues(&self, topic: &str) -> Result<Vec<MessageQueue>, ProducerError> {
        self.inner.check_open()?;
        let budget = Deadline::new(self.inner.config.mq_client_api_timeout);
        Ok(self.inner.route(topic, &budget).await?.queues.clone())
    }

    /// The producer's counters.
    pub fn stats(&self) -> ProducerStats {
        self.inner.counters.snapshot()
    }

    /// Refuses new sends, waits up to `sendMsgTimeout` for sends under way,
    /// stops the route refresher and the heartbeats and closes every
    /// connection, which makes the brokers forget the producer. Calling it
    /// again does nothing.
    pub async fn shutdown(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, std::sync::atomic::Ordering::AcqRel) {
            return;
        }
        self.stop.cancel();
        let all = u32::try_from(inner.config.client_async_semaphore_value).unwrap_or(u32::MAX);
        let drained = tokio::time::timeout(
            inner.config.send_msg_timeout,
            inner.async_permits.acquire_many(all),
        )
        .await;
        if drained.is_err() {
            tracing::warn!("producer shutting down with sends still under way");
        }
        drop(drained);
        inner.async_permits.close();
        inner.oneway_permits.close();
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner));
        for task in tasks {
            let _ = task.await;
        }
        inner.client.close_all().await;
        tracing::debug!(group = %inner.config.producer_group, "producer shut down");
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Producer {
    /// One attempt on the queue `choose` picks, with the usual permit,
    /// budget and counting.
    async fn send_to_selected(
        &self,
        prep: Result<crate::message::Prepared, ProducerError>,
        choose: impl FnOnce(&[MessageQueue]) -> usize,
    ) -> Result<SendResult, ProducerError> {
        self.counted(
            self.inner.config.send_msg_timeout,
            |_| prep,
            |inner, prep, budget| async move { send_selected(inner, &prep, &budget, choose).await },
        )
        .await
    }

    /// What the producer's tasks share.
    pub(crate) fn inner(&self) -> &Arc<Inner> {
        &self.inner
    }

    /// Counts one send and runs it: the open check, `prepare`, an async
    /// permit within a budget of `timeout`, then `attempt`.
    pub(crate) async fn counted<'a, Fut>(
        &'a self,
        timeout: Duration,
        prepare: impl FnOnce(&Inner) -> Result<crate::message::Prepared, ProducerError>,
        attempt: impl FnOnce(&'a Inner, crate::message::Prepared, Deadline) -> Fut,
    ) -> Result<SendResult, ProducerError>
    where
        Fut: Future<Output = Result<SendResult, ProducerError>> + 'a,
    {
        let inner = &*self.inner;
        inner.counters.send_started();
        let budget = Deadline::new(timeout);
        let result = async {
            inner.check_open()?;
            let prep = prepare(inner)?;
            let _permit = inner
                .acquire(
                    &inner.async_permits,
                    inner.config.client_async_semaphore_value,
                    &budget,
                )
                .await?;
            attempt(inner, prep, budget).await
        }
        .await;
        inner.counters.outcome(&result);
        result
    }
}

/// The result of an asynchronous send; await it.
#[derive(Debug)]
pub struct SendHandle {
    task: JoinHandle<Result<SendResult, ProducerError>>,
}

impl SendHandle {
    /// Reports whether the send has finished.
    pub fn is_finished(&self) -> bool {
        self.task.is_finished()
    }
}

impl Future for SendHandle {
    type Output = Result<SendResult, ProducerError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.task)
            .poll(cx)
            .map(|joined| match joined {
                Ok(result) => result,
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                // The runtime dropped the task: it is shutting down.
                Err(_) => Err(ProducerError::Shutdown),
            })
    }
}

/// Refreshes cached routes every `pollNameServerInterval`, and a route with
/// a broker between masters when its check is due, until stopped.
async fn refresh_routes(inner: Arc<Inner>, stop: CancellationToken) {
    let period = inner.config.poll_name_server_interval;
    let mut full = tokio::time::Instant::now() + period;
    loop {
        let wake = inner
            .routes
            .next_headless_check()
            .map_or(full, |at| full.min(at.into()));
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep_until(wake) => {}
            // A headless route stored meanwhile: its check may be earlier.
            () = inner.routes.became_headless() => continue,
        }
        let now = tokio::time::Instant::now();
        let refresh = async {
            if now >= full {
                full = now + period;
                inner.routes.refresh_all(&inner.client).await;
            } else {
                inner
                    .routes
                    .refresh_headless(&inner.client, now.into())
                    .await;
            }
        };
        tokio::select! {
            () = stop.cancelled() => return,
            () = refresh => {}
        }
    }
}

/// The address this host reaches the name server from, for unique keys:
/// connecting a UDP socket sends nothing but picks the outgoing interface.
/// Loopback when that fails.
pub(crate) async fn local_ip(namesrv: &str) -> IpAddr {
    let probe = async {
        let socket = tokio::net::UdpSocket::bind("0.0.0.0:0").await.ok()?;
        socket.connect(namesrv).await.ok()?;
        socket.local_addr().ok().map(|a| a.ip())
    };
    match tokio::time::timeout(Duration::from_secs(1), probe).await {
        Ok(Some(ip)) if !ip.is_unspecified() => ip,
        _ => IpAddr::V4(Ipv4Addr::LOCALHOST),
    }
}
