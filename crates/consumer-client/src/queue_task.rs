//! One owned queue: the pull loop with consumer-side flow control, and the
//! handler calls it starts.

use std::sync::Arc;

use message_model::properties::keys;
use remoting_net::CancellationToken;

use crate::{
    api::PullSpec,
    handler::{ConsumeStatus, MessageHandler},
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
                        None => dispatch(&inner, &handler, &mq, &pq, messages),
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

/// Starts one handler call per batch; each waits for a pool permit.
fn dispatch<H: MessageHandler>(
    inner: &Arc<Inner>,
    handler: &Arc<H>,
    mq: &MessageQueue,
    pq: &Arc<ProcessQueue>,
    mut messages: Vec<MessageExt>,
) {
    let size = inner.config.consume_message_batch_max_size;
    while !messages.is_empty() {
        let rest = messages.split_off(size.min(messages.len()));
        let batch = std::mem::replace(&mut messages, rest);
        // Not joined: the pool semaphore bounds them, and shutdown waits for
        // the running ones by taking every permit.
        tokio::spawn(consume(
            Arc::clone(inner),
            Arc::clone(handler),
            mq.clone(),
            Arc::clone(pq),
            batch,
        ));
    }
}

/// Calls the handler; a batch it fails is sent back to the broker (to come
/// back later through the group's retry topic), and what cannot be sent
/// back is handed to the handler again here after `retryBackoff`. Commits
/// what is safe.
async fn consume<H: MessageHandler>(
    inner: Arc<Inner>,
    handler: Arc<H>,
    mq: MessageQueue,
    pq: Arc<ProcessQueue>,
    mut batch: Vec<MessageExt>,
) {
    loop {
        let Ok(permit) = inner.pool.acquire().await else {
            return;
        };
        if pq.is_dropped() || inner.is_stopping() {
            // Not handled and not committed: the queue's next owner (or this
            // consumer after a restart) gets these messages again.
            return;
        }
        let status = handler.consume(&batch).await;
        drop(permit);
        let done: Vec<u64> = match status {
            ConsumeStatus::Success => {
                Counters::add(&inner.counters.consumed, batch.len());
                let done = batch.iter().map(|m| m.queue_offset).collect();
                batch.clear();
                done
            }
            ConsumeStatus::RetryLater => {
                Counters::add(&inner.counters.retried, batch.len());
                let mut sent = Vec::new();
                let mut dropped = Vec::new();
                let mut kept = Vec::new();
                for mut m in batch {
                    if inner.is_broadcasting() {
                        // No retry topic: retried here, then dropped.
                        if m.reconsume_times >= inner.config.effective_max_reconsume_times() {
                            tracing::warn!(queue = %mq, offset = m.queue_offset, msg_id = %m.msg_id, reconsume_times = m.reconsume_times, "broadcast message failed too often; dropped");
                            dropped.push(m.queue_offset);
                        } else {
                            m.reconsume_times += 1;
                            kept.push(m);
                        }
                        continue;
                    }
                    match inner.send_back(&mq, &m).await {
                        Ok(()) => sent.push(m.queue_offset),
                        Err(e) => {
                            tracing::warn!(queue = %mq, offset = m.queue_offset, cause = %e, "cannot send a failed message back; retrying it here");
                            m.reconsume_times += 1;
                            kept.push(m);
                        }
                    }
                }
                Counters::add(&inner.counters.sent_back, sent.len());
                Counters::add(&inner.counters.dropped, dropped.len());
                batch = kept;
                sent.extend(dropped);
                sent
            }
        };
        if !done.is_empty() {
            if let Some(commit) = pq.remove(done) {
                inner.commit_if_owned(&mq, &pq, commit);
            }
        }
        if batch.is_empty() {
            return;
        }
        tokio::select! {
            () = inner.stop.cancelled() => return,
            () = tokio::time::sleep(inner.config.retry_backoff) => {}
        }
    }
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
