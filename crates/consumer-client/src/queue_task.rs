//! One owned queue: the pull loop with consumer-side flow control, which
//! hands what it pulls to the consumer's handler pool (or, when orderly, to
//! the queue's own consume task).

use std::sync::Arc;

use message_model::properties::keys;
use remoting_net::CancellationToken;

use crate::{
    api::PullSpec,
    consume_pool::{self, QueueRef},
    handler::MessageHandler,
    orderly::OrderlyQueue,
    process_queue::ProcessQueue,
    push::Inner,
    stats::Counters,
    ConsumeFromWhere, ConsumerError, MessageExt, MessageQueue, PullStatus,
};

/// Pulls `mq` until `stop` fires.
pub(crate) async fn run<H: MessageHandler>(
    inner: Arc<Inner>,
    handler: Arc<H>,
    mq: MessageQueue,
    pq: Arc<ProcessQueue>,
    orderly: Option<Arc<OrderlyQueue>>,
    stop: CancellationToken,
) {
    let cfg = &inner.config;
    let mut offset = loop {
        match start_offset(&inner, &mq).await {
            Ok(o) => break o,
            Err(e) => {
                tracing::warn!(queue = %mq, cause = %e, "cannot find where to start");
                if pause(&stop, cfg.pull_time_delay_when_exception).await {
                    return;
                }
            }
        }
    };
    tracing::debug!(queue = %mq, offset, "pulling");
    let expression = inner
        .subscription(&mq.topic)
        .unwrap_or_else(|| "*".to_owned());
    let mut paused_logged = 0u64;
    let queue = Arc::new(QueueRef {
        mq: mq.clone(),
        pq: Arc::clone(&pq),
    });
    loop {
        if stop.is_cancelled() {
            return;
        }
        if orderly
            .as_ref()
            .is_some_and(|oq| !oq.is_locked(std::time::Instant::now()))
        {
            // Not pulled while another consumer may hold the queue.
            if pause(&stop, cfg.pull_time_delay_when_exception).await {
                return;
            }
            continue;
        }
        let (count, bytes) = pq.size();
        if count > cfg.pull_threshold_for_queue || bytes > cfg.pull_threshold_size_for_queue_bytes()
        {
            let total = Counters::add(&inner.counters.flow_control_pauses, 1);
            // Rate-limited like RocketMQ: the first pause, then every 1000th.
            if paused_logged == 0 || total / 1000 > paused_logged / 1000 {
                tracing::warn!(
                    queue = %mq, cached = count, cached_bytes = bytes, pauses = total,
                    "queue cache over its threshold; pulling paused"
                );
                paused_logged = total;
            }
            if pause(&stop, cfg.pull_time_delay_when_flow_control).await {
                return;
            }
            continue;
        }
        let spec = PullSpec {
            group: &cfg.consumer_group,
            offset,
            max: cfg.pull_batch_size,
            expression: &expression,
            suspend: Some(cfg.broker_suspend_max_time),
            // An orderly queue's offset travels only in waited updates, so
            // that its next owner never reads one older than the last sent;
            // a broadcasting member keeps its offsets to itself.
            commit_offset: if orderly.is_some() || inner.is_broadcasting() {
                None
            } else {
                inner.consumed_offset(&mq)
            },
            timeout: cfg.consumer_timeout_when_suspend,
        };
        let result = tokio::select! {
            () = stop.cancelled() => return,
            r = inner.api.pull(&mq, &spec) => r,
        };
        match result {
            Ok(r) => match r.status {
                PullStatus::Found => {
                    offset = r.next_begin_offset;
                    Counters::add(&inner.counters.pulled, r.messages.len());
                    let mut messages = r.messages;
                    if mq.topic == inner.retry_topic {
                        restore_topics(&mut messages);
                    }
                    pq.put(&messages);
                    match &orderly {
                        Some(oq) => oq.put(&messages),
                        None => consume_pool::submit(&inner, &handler, &queue, messages),
                    }
                }
                PullStatus::NoNewMsg | PullStatus::NoMatchedMsg => offset = r.next_begin_offset,
                PullStatus::OffsetIllegal => {
                    tracing::warn!(queue = %mq, offset, next = r.next_begin_offset, "offset outside the queue; moving on");
                    offset = r.next_begin_offset;
                    if pq.size().0 == 0 {
                        inner.commit_if_owned(&mq, &pq, offset);
                    }
                }
            },
            Err(e) => {
                Counters::add(&inner.counters.pull_errors, 1);
                tracing::warn!(queue = %mq, cause = %e, "pull failed");
                // The broker may have been replaced (a new master elected):
                // read the route again now rather than at the next
                // rebalance, so the next pull goes where the queue is.
                if let Err(e) = inner.api.topic_queues(&mq.topic).await {
                    tracing::debug!(topic = %mq.topic, cause = %e, "route lookup after a failed pull");
                }
                if pause(&stop, cfg.pull_time_delay_when_exception).await {
                    return;
                }
            }
        }
    }
}

/// The committed offset (the broker's, or the local file's when
/// broadcasting), else the end or the start of the queue.
async fn start_offset(inner: &Inner, mq: &MessageQueue) -> Result<u64, ConsumerError> {
    let committed = if inner.is_broadcasting() {
        inner.stored_offset(mq)
    } else {
        inner
            .api
            .query_offset(&inner.config.consumer_group, mq)
            .await?
    };
    if let Some(o) = committed {
        return Ok(o);
    }
    let last = inner.config.consume_from_where == ConsumeFromWhere::LastOffset;
    inner.api.queue_offset(mq, last).await
}

/// Messages pulled from the group's retry topic are handed over under the
/// topic they were first sent to (`RETRY_TOPIC`), as RocketMQ's clients do.
fn restore_topics(messages: &mut [MessageExt]) {
    for m in messages {
        if let Some(topic) = m.properties.get(keys::RETRY_TOPIC) {
            m.topic.clone_from(topic);
        }
    }
}

/// Sleeps unless `stop` fires first; returns whether it fired.
async fn pause(stop: &CancellationToken, d: std::time::Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => true,
        () = tokio::time::sleep(d) => false,
    }
}
