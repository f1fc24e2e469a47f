//! The bodies of `LOCK_BATCH_MQ` (41) and `UNLOCK_BATCH_MQ` (42): an
//! orderly consumer asks a broker for the exclusive right to consume some
//! queues, and gives it back.

use serde::{Deserialize, Serialize};

use super::lenient::{boolean, int, list, string};

/// A queue as these bodies name it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MessageQueueBody {
    /// Topic.
    #[serde(deserialize_with = "string")]
    pub topic: String,
    /// Broker name.
    #[serde(deserialize_with = "string")]
    pub broker_name: String,
    /// Queue id.
    #[serde(deserialize_with = "int")]
    pub queue_id: i32,
}

/// `LOCK_BATCH_MQ` and `UNLOCK_BATCH_MQ` request body.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct LockBatchRequestBody {
    /// Consumer group.
    #[serde(deserialize_with = "string")]
    pub consumer_group: String,
    /// The asking client.
    #[serde(deserialize_with = "string")]
    pub client_id: String,
    /// Lock on this broker only (no replicas).
    #[serde(deserialize_with = "boolean")]
    pub only_this_broker: bool,
    /// The queues.
    #[serde(deserialize_with = "list")]
    pub mq_set: Vec<MessageQueueBody>,
}

/// `LOCK_BATCH_MQ` response body: the queues locked for the client.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LockBatchResponseBody {
    /// The queues the client now holds.
    #[serde(rename = "lockOKMQSet", deserialize_with = "list")]
    pub lock_ok_mq_set: Vec<MessageQueueBody>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::{from_json, to_json};

    #[test]
    fn lock_bodies_read_and_write_as_rocketmq() {
        let req: LockBatchRequestBody = from_json(
            br#"{"consumerGroup":"G","clientId":"c","onlyThisBroker":"false","mqSet":[{"topic":"T","brokerName":"b","queueId":"2"}]}"#,
        )
        .unwrap();
        assert_eq!(req.mq_set[0].queue_id, 2);
        assert!(!req.only_this_broker);
        let resp = LockBatchResponseBody {
            lock_ok_mq_set: req.mq_set,
        };
        assert_eq!(
            String::from_utf8(to_json(&resp)).unwrap(),
            r#"{"lockOKMQSet":[{"topic":"T","brokerName":"b","queueId":2}]}"#
        );
    }
}
