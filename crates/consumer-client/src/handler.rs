//! What a push consumer hands messages to.

use std::future::Future;

use crate::MessageExt;

/// What the handler decided about a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumeStatus {
    /// Consumed; the offsets may be committed.
    Success,
    /// Not consumed; hand the batch over again after the retry back-off.
    RetryLater,
}

/// Consumes batches of messages (at most `consume_batch_max_size` each).
///
/// Calls run concurrently, up to `consume_thread_max` at once, so a handler
/// sees messages of one queue out of order.
pub trait MessageHandler: Send + Sync + 'static {
    /// Consumes a batch.
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send;
}

/// A [`MessageHandler`] made from an async closure that takes its batch by
/// value.
#[derive(Debug, Clone)]
pub struct FnHandler<F>(pub F);

impl<F, Fut> MessageHandler for FnHandler<F>
where
    F: Fn(Vec<MessageExt>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ConsumeStatus> + Send,
{
    fn consume(&self, messages: &[MessageExt]) -> impl Future<Output = ConsumeStatus> + Send {
        (self.0)(messages.to_vec())
    }
}
