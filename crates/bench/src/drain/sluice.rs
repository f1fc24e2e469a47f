//! The Sluice side of `drain`: filling a topic with batches and reading it
//! back with a push consumer.

#[allow(clippy::wildcard_imports)]
use super::*;

/// The push consumer's handler: counts, nothing else.
struct CountingHandler(Arc<Counter>);

impl MessageHandler for CountingHandler {
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        let bytes = messages.iter().map(|m| m.body.len() as u64).sum();
        self.0.add(messages.len() as u64, bytes);
        std::future::ready(ConsumeStatus::Success)
    }
}

pub(super) async fn read_sluice(
    t: &SluiceTarget,
    config: &DrainConfig,
    counter: &Arc<Counter>,
    deadline: Instant,
) -> Result<()> {
    let group = fresh_group();
    let consumer = PushConsumer::start(
        t.consumer_config(&group),
        CountingHandler(Arc::clone(counter)),
    )
    .await
    .with_context(|| {
        format!(
            "start a push consumer of group {group} on topic {}",
            t.topic
        )
    })?;
    let reached = counter.wait_until(deadline).await;
    consumer.shutdown().await;
    if !reached {
        return Err(counter.shortfall(config, &format!("topic {}, group {group}", t.topic)));
    }
    Ok(())
}

pub(super) async fn fill_sluice(
    t: &SluiceTarget,
    config: &DrainConfig,
    stored: &Arc<AtomicU64>,
    deadline: Instant,
) -> Result<Measured> {
    make_topic(t, deadline).await?;
    let (access_key, secret_key) = keys_of(t.credentials.as_ref());
    let producer = Producer::start(ProducerConfig {
        send_msg_timeout: SEND_TIMEOUT,
        retry_times_when_send_failed: 0,
        retry_times_when_send_async_failed: 0,
        busy_policy: BusyPolicy::Never,
        access_key,
        secret_key,
        ..ProducerConfig::with_namesrv(&t.namesrv)
    })
    .await
    .context("start the producer")?;
    let producer = Arc::new(producer);
    let body = Bytes::from(vec![b'x'; config.body_bytes]);
    let started = Instant::now();
    let sent =
        tokio::time::timeout_at(deadline, send_all(&producer, t, config, body, stored)).await;
    let elapsed = started.elapsed();
    producer.shutdown().await;
    let busy_answers = match sent {
        Ok(sent) => sent?,
        Err(_) => return Err(fill_timeout(config, stored)),
    };
    let messages = stored.load(Ordering::Relaxed);
    Ok(Measured {
        messages,
        bytes: messages.saturating_mul(config.body_bytes as u64),
        elapsed,
        first_message: None,
        busy_answers,
    })
}

/// Sends every batch, `in_flight` at once; how many sends were answered
/// busy.
async fn send_all(
    producer: &Arc<Producer>,
    t: &SluiceTarget,
    config: &DrainConfig,
    body: Bytes,
    stored: &Arc<AtomicU64>,
) -> Result<u64> {
    let in_flight = usize::try_from(config.in_flight).unwrap_or(usize::MAX);
    let mut batches = batch_sizes(config.messages, t.fill_batch);
    let mut tasks = JoinSet::new();
    let mut busy = 0u64;
    loop {
        while tasks.len() < in_flight {
            let Some(n) = batches.next() else { break };
            let (producer, stored) = (Arc::clone(producer), Arc::clone(stored));
            let (topic, body) = (t.topic.clone(), body.clone());
            tasks.spawn(async move {
                let busy = send_until_stored(&producer, &topic, &body, n).await?;
                stored.fetch_add(u64::from(n), Ordering::Relaxed);
                Ok::<_, anyhow::Error>(busy)
            });
        }
        match tasks.join_next().await {
            None => return Ok(busy),
            Some(joined) => busy += joined.context("a send task ended abnormally")??,
        }
    }
}

/// Sends one batch of `n` messages, again after each busy answer (which
/// stored nothing); the caller bounds the time. Returns the busy answers.
async fn send_until_stored(producer: &Producer, topic: &str, body: &Bytes, n: u32) -> Result<u64> {
    let mut busy = 0;
    loop {
        let batch = (0..n).map(|_| Message::new(topic, body.clone())).collect();
        match producer.send_batch(batch).await {
            Ok(_) => return Ok(busy),
            Err(e) if e.is_busy() => {
                busy += 1;
                tokio::time::sleep(busy_pause(&e)).await;
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("send a batch of {n} messages to topic {topic}"))
            }
        }
    }
}

/// How long to wait before sending a batch again after the busy answer `e`:
/// the broker's `retryAfterMs`, within bounds.
pub fn busy_pause(e: &ProducerError) -> Duration {
    match e {
        ProducerError::Broker {
            retry_after_ms: Some(ms),
            ..
        } => Duration::from_millis(*ms).clamp(Duration::from_millis(1), BUSY_PAUSE_MAX),
        _ => BUSY_PAUSE,
    }
}

/// Creates the topic on its brokers and waits until the name server lists
/// its queues.
async fn make_topic(t: &SluiceTarget, deadline: Instant) -> Result<()> {
    let brokers = match &t.broker {
        Some(broker) => vec![broker.clone()],
        None => {
            let namesrv = split_addrs(&t.namesrv)
                .into_iter()
                .next()
                .context("no name server given")?;
            let credentials = t.credentials.as_ref();
            let mut addrs: Vec<String> =
                route::lookup(&namesrv, &t.topic, t.queues, ADMIN_TIMEOUT, credentials)
                    .await
                    .with_context(|| format!("find the brokers for topic {}", t.topic))?
                    .into_iter()
                    .map(|d| d.addr)
                    .collect();
            addrs.sort();
            addrs.dedup();
            addrs
        }
    };
    for broker in &brokers {
        route::create_topic(
            broker,
            &t.topic,
            t.queues,
            ADMIN_TIMEOUT,
            t.credentials.as_ref(),
        )
        .await?;
    }
    let want = brokers
        .len()
        .saturating_mul(usize::try_from(t.queues).unwrap_or(usize::MAX));
    wait_for_route(t, want, deadline).await
}

/// Asks the name server until it lists at least `want` writable queues of
/// the topic, or `deadline`.
async fn wait_for_route(t: &SluiceTarget, want: usize, deadline: Instant) -> Result<()> {
    let client = RemotingClient::new(route::signed_by(t.credentials.as_ref()));
    let name_servers = NameServers::new(split_addrs(&t.namesrv));
    let outcome = async {
        loop {
            let found = client_core::route::query(
                &client,
                &name_servers,
                &t.topic,
                ADMIN_TIMEOUT,
                &Deadline::new(ADMIN_TIMEOUT),
            )
            .await
            .with_context(|| format!("ask {} for the route of {}", t.namesrv, t.topic))?;
            let have = found.map_or(0, |r| route::writable_queues(&t.topic, &r, None).len());
            if have >= want {
                return Ok(());
            }
            if Instant::now() + ROUTE_POLL >= deadline {
                bail!(
                    "name server {} lists {have} of the {want} writable queues of topic {} \
                     created on its brokers",
                    t.namesrv,
                    t.topic
                );
            }
            tokio::time::sleep(ROUTE_POLL).await;
        }
    }
    .await;
    client.close_all().await;
    outcome
}
