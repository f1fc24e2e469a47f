//! Names that peers of the protocol agree on beyond codes and headers.

/// The topic whose route and settings a topic without a route borrows; a
/// broker with `autoCreateTopicEnable` creates the topic from it on the
/// first send (RocketMQ's `TBW102`).
pub const AUTO_CREATE_TOPIC: &str = "TBW102";

/// Ext field of Sluice's busy answers: the back-off it suggests, in ms.
/// Other RocketMQ brokers never send it; other clients ignore it.
pub const RETRY_AFTER_MS: &str = "retryAfterMs";
