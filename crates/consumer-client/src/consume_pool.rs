//! The handler calls of a concurrent push consumer: pulled messages cut
//! into batches of `consumeMessageBatchMaxSize`, waiting in one queue per
//! consumer, and up to `consumeThreadMax` workers that take them in order,
//! as RocketMQ's consume thread pool does.
//!
//! # Invariants
//! - At most `consumeThreadMax` workers run, and each calls the handler
//!   under a permit of the consumer's pool, which shutdown takes whole to
//!   wait for the running calls.
//! - A worker is started only when the batches waiting outnumber the
//!   workers not in a handler call, and a worker that finds the queue empty
//!   ends; so no worker idles and a burst never waits for one that does.
//! - What waits is bounded by the queues' caches: a queue task stops
//!   pulling once its cache (every message not yet consumed, waiting here
//!   included) is over its threshold.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
};

use crate::{
    handler::{ConsumeStatus, MessageHandler},
    process_queue::ProcessQueue,
    push::{lock, Inner},
    stats::Counters,
    MessageExt, MessageQueue,
};

/// A queue whose batches wait: its name and its cache.
#[derive(Debug)]
pub(crate) struct QueueRef {
    pub(crate) mq: MessageQueue,
    pub(crate) pq: Arc<ProcessQueue>,
}

/// Messages of one queue for one handler call.
#[derive(Debug)]
struct Batch {
    queue: Arc<QueueRef>,
    messages: Vec<MessageExt>,
}

/// The batches waiting for a worker, and the workers.
#[derive(Debug, Default)]
pub(crate) struct BatchQueue {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    waiting: VecDeque<Batch>,
    /// Workers started and not yet ended.
    workers: usize,
    /// Of those, the ones in a handler call (or about to make one).
    busy: usize,
}

impl BatchQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }
}

/// Cuts `messages` (pulled from `queue`) into batches and queues them,
/// starting workers as needed.
pub(crate) fn submit<H: MessageHandler>(
    inner: &Arc<Inner>,
    handler: &Arc<H>,
    queue: &Arc<QueueRef>,
    messages: Vec<MessageExt>,
) {
    let size = inner.config.consume_message_batch_max_size.max(1);
    let mut messages = messages.into_iter();
    let mut st = inner.batches.lock();
    loop {
        let batch: Vec<MessageExt> = messages.by_ref().take(size).collect();
        if batch.is_empty() {
            break;
        }
        st.waiting.push_back(Batch {
            queue: Arc::clone(queue),
            messages: batch,
        });
    }
    start_workers(inner, handler, &mut st);
}

/// Starts workers until every waiting batch has an idle one, within the
/// pool's size.
fn start_workers<H: MessageHandler>(inner: &Arc<Inner>, handler: &Arc<H>, st: &mut State) {
    let max = inner.config.consume_thread_max.max(1);
    while st.workers < max && st.workers - st.busy < st.waiting.len() {
        st.workers += 1;
        // Not joined: a worker ends when nothing waits, and shutdown waits
        // for the running handler calls by taking every permit.
        tokio::spawn(work(Arc::clone(inner), Arc::clone(handler)));
    }
}

/// A worker: takes the oldest batch and calls the handler with it, until
/// none waits or the consumer stops.
async fn work<H: MessageHandler>(inner: Arc<Inner>, handler: Arc<H>) {
    let mut slot = Slot {
        inner: &inner,
        handler: &handler,
        busy: false,
        ended: false,
    };
    loop {
        let batch = {
            let mut st = inner.batches.lock();
            if slot.busy {
                st.busy -= 1;
                slot.busy = false;
            }
            match st.waiting.pop_front() {
                Some(b) if !inner.is_stopping() => {
                    st.busy += 1;
                    slot.busy = true;
                    b
                }
                // At a stop the batches left are neither handled nor
                // committed: the queues' next owners get them again.
                _ => {
                    // Under the lock that found the queue empty, so that a
                    // batch queued next sees this worker gone and starts one.
                    st.workers -= 1;
                    slot.ended = true;
                    return;
                }
            }
        };
        if let Some(kept) = consume(&inner, handler.as_ref(), batch).await {
            retry_later(&inner, &handler, kept);
        }
    }
}

/// A worker's place in the counts; if the worker ends any other way than by
/// finding nothing to do (its handler panicked), dropping it gives the
/// place back and starts a worker in its stead when batches wait.
struct Slot<'a, H: MessageHandler> {
    inner: &'a Arc<Inner>,
    handler: &'a Arc<H>,
    busy: bool,
    ended: bool,
}

impl<H: MessageHandler> Drop for Slot<'_, H> {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let mut st = self.inner.batches.lock();
        st.workers -= 1;
        if self.busy {
            st.busy -= 1;
        }
        // Also dropped when the runtime shuts down, outside of it perhaps.
        if !self.inner.is_stopping() && tokio::runtime::Handle::try_current().is_ok() {
            start_workers(self.inner, self.handler, &mut st);
        }
    }
}

/// Calls the handler with `batch` under a pool permit and commits what is
/// safe. A batch it fails is sent back to the broker (to come back through
/// the group's retry topic); what cannot be sent back is returned, to be
/// handed to the handler again after `retryBackoff`.
async fn consume<H: MessageHandler>(inner: &Inner, handler: &H, mut batch: Batch) -> Option<Batch> {
    let Ok(permit) = inner.pool.acquire().await else {
        return None;
    };
    let (mq, pq) = (&batch.queue.mq, &batch.queue.pq);
    if pq.is_dropped() || inner.is_stopping() {
        // Not handled and not committed: the queue's next owner (or this
        // consumer after a restart) gets these messages again.
        return None;
    }
    let status = handler.consume(&batch.messages).await;
    drop(permit);
    let done: Vec<u64> = match status {
        ConsumeStatus::Success => {
            Counters::add(&inner.counters.consumed, batch.messages.len());
            batch.messages.drain(..).map(|m| m.queue_offset).collect()
        }
        ConsumeStatus::RetryLater => {
            let messages = std::mem::take(&mut batch.messages);
            let (done, kept) = send_back(inner, mq, messages).await;
            batch.messages = kept;
            done
        }
    };
    if !done.is_empty() {
        if let Some(commit) = pq.remove(done) {
            inner.commit_if_owned(mq, pq, commit);
        }
    }
    (!batch.messages.is_empty()).then_some(batch)
}

/// The failed `messages` of `mq`: sent back to the broker, or (when
/// broadcasting, which has no retry topic) counted for a retry here and
/// dropped after too many. Returns the offsets done with, and the messages
/// to hand to the handler again.
async fn send_back(
    inner: &Inner,
    mq: &MessageQueue,
    messages: Vec<MessageExt>,
) -> (Vec<u64>, Vec<MessageExt>) {
    Counters::add(&inner.counters.retried, messages.len());
    let mut sent = Vec::new();
    let mut dropped = Vec::new();
    let mut kept = Vec::new();
    for mut m in messages {
        if inner.is_broadcasting() {
            if m.reconsume_times >= inner.config.effective_max_reconsume_times() {
                tracing::warn!(queue = %mq, offset = m.queue_offset, msg_id = %m.msg_id, reconsume_times = m.reconsume_times, "broadcast message failed too often; dropped");
                dropped.push(m.queue_offset);
            } else {
                m.reconsume_times += 1;
                kept.push(m);
            }
            continue;
        }
        match inner.send_back(mq, &m).await {
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
    sent.extend(dropped);
    (sent, kept)
}

/// Queues `batch` again after `retryBackoff`, unless the consumer stops
/// first; no worker waits meanwhile.
fn retry_later<H: MessageHandler>(inner: &Arc<Inner>, handler: &Arc<H>, batch: Batch) {
    let (inner, handler) = (Arc::clone(inner), Arc::clone(handler));
    tokio::spawn(async move {
        tokio::select! {
            () = inner.stop.cancelled() => {}
            () = tokio::time::sleep(inner.config.retry_backoff) => {
                let mut st = inner.batches.lock();
                st.waiting.push_back(batch);
                start_workers(&inner, &handler, &mut st);
            }
        }
    });
}
