//! Ordered sends: the caller's selector picks one of the topic's queues and
//! the message goes there in one attempt, never to another broker, so that
//! messages of one key stay in one queue in send order (RocketMQ's
//! `send(msg, MessageQueueSelector, arg)`).

use client_core::Deadline;
use tracing::Instrument;

use crate::{message::Prepared, send::Inner, Message, MessageQueue, ProducerError, SendResult};

/// Picks the queue of an ordered send: returns an index into `queues`, the
/// topic's writable queues grouped by broker in name order (the order of
/// [`crate::Producer::publish_queues`]).
///
/// Implemented for every `Fn(&[MessageQueue], &Message, &A) -> usize`, so a
/// closure or [`select_by_key`] will do.
pub trait MessageQueueSelector<A: ?Sized> {
    /// The index of the queue `msg` goes to, given the caller's `arg`.
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> usize;
}

impl<A: ?Sized, F> MessageQueueSelector<A> for F
where
    F: Fn(&[MessageQueue], &Message, &A) -> usize,
{
    fn select(&self, queues: &[MessageQueue], msg: &Message, arg: &A) -> usize {
        self(queues, msg, arg)
    }
}

/// Selects a queue by a sharding key (an order id, a user id): the same key
/// always gets the same queue while the topic's queues stay the same.
///
/// The hash is Java's `String.hashCode()` of the key (31-based over UTF-16
/// code units, wrapping 32-bit arithmetic), its remainder by the queue count
/// and the remainder's absolute value: exactly RocketMQ's
/// `SelectMessageQueueByHash` with a `String` argument, so Java and Rust
/// producers put a key in the same queue. Adding or removing queues moves
/// keys. Returns 0 for an empty queue list.
pub fn select_by_key(queues: &[MessageQueue], _msg: &Message, key: &str) -> usize {
    let n = i64::try_from(queues.len()).unwrap_or(i64::MAX);
    if n == 0 {
        return 0;
    }
    // `tag_hash` is the 32-bit Java hash sign-extended, so the i64 remainder
    // equals Java's int remainder.
    let rem = remoting_protocol::message::tag_hash(key) % n;
    usize::try_from(rem.unsigned_abs()).unwrap_or(0)
}

/// Sends a prepared message once to the queue `choose` picks from the
/// topic's queues.
pub(crate) async fn send_selected(
    inner: &Inner,
    prep: &Prepared,
    budget: &Deadline,
    choose: impl FnOnce(&[MessageQueue]) -> usize,
) -> Result<SendResult, ProducerError> {
    let info = inner.route(&prep.topic, budget).await?;
    let n = info.queues.len();
    let chosen = choose(&info.queues);
    let Some(queue) = info.queues.get(chosen) else {
        return Err(ProducerError::MessageIllegal {
            reason: format!(
                "the selector chose queue index {chosen} but topic {} has {n} queues",
                prep.topic
            ),
        });
    };
    let span =
        tracing::debug_span!("send", topic = %prep.topic, broker = %queue.broker_name, attempt = 0);
    inner
        .attempt(&info, prep, queue, budget, false)
        .instrument(span)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: u32) -> Vec<MessageQueue> {
        (0..n)
            .map(|queue_id| MessageQueue {
                topic: "T".into(),
                broker_name: "a".into(),
                queue_id,
            })
            .collect()
    }

    #[test]
    fn select_by_key_is_java_string_hash_modulo_the_queue_count() {
        let msg = Message::new("T", "x");
        let eight = queues(8);
        // "order-1".hashCode() in Java is -1207111310; % 8 = -6; abs = 6.
        assert_eq!(select_by_key(&eight, &msg, "order-1"), 6);
        // "abc".hashCode() is 96354; % 8 = 2.
        assert_eq!(select_by_key(&eight, &msg, "abc"), 2);
        for key in ["k", "order-42", "ünïcode", ""] {
            let first = select_by_key(&eight, &msg, key);
            assert!(first < 8);
            assert_eq!(select_by_key(&eight, &msg, key), first, "stable");
        }
        assert_eq!(select_by_key(&[], &msg, "abc"), 0);
    }

    #[test]
    fn closures_are_selectors() {
        let last = |qs: &[MessageQueue], _: &Message, _: &()| qs.len() - 1;
        assert_eq!(last.select(&queues(4), &Message::new("T", "x"), &()), 3);
    }
}
