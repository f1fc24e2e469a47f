//! One queue of a topic on one broker.

use std::fmt;

/// One queue of a topic on one broker.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageQueue {
    /// Topic.
    pub topic: String,
    /// Broker name (not address: a name may have a master and slaves).
    pub broker_name: String,
    /// Queue id on that broker.
    pub queue_id: u32,
}

impl MessageQueue {
    /// Queue `queue_id` of `topic` on the broker named `broker_name`.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: u32) -> Self {
        Self {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }

    /// The queue id as Java's `int` on the wire; ids come from routes, so
    /// they fit.
    pub fn wire_queue_id(&self) -> i32 {
        i32::try_from(self.queue_id).unwrap_or(i32::MAX)
    }
}

impl fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}#{}", self.topic, self.broker_name, self.queue_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_print_topic_broker_and_id() {
        let q = MessageQueue::new("T", "broker-a", 3);
        assert_eq!(q.to_string(), "T@broker-a#3");
        assert_eq!(q.wire_queue_id(), 3);
    }
}
