//! Messages between the gRPC shape and the stored shape: properties of a
//! produced message (client id as `UNIQ_KEY`, tag, keys, group, user
//! properties) and the reserved property names that are never user
//! properties.

use std::collections::HashMap;

use grpc_protocol::v2::{Code, Message, MessageType};
use message_model::properties::{keys, Properties};

use crate::transaction::CHECK_IMMUNITY;

/// Property holding the producer's `born_host` text, so that it is delivered
/// as sent.
pub const BORN_HOST_TEXT: &str = keys::BORN_HOST;

/// Property names RocketMQ reserves: refused as user properties on send and
/// never delivered as user properties.
pub const RESERVED_KEYS: &[&str] = &[
    keys::KEYS,
    keys::TAGS,
    keys::WAIT_STORE_MSG_OK,
    keys::DELAY_TIME_LEVEL,
    keys::RETRY_TOPIC,
    keys::REAL_TOPIC,
    keys::REAL_QUEUE_ID,
    keys::TRANSACTION_PREPARED,
    keys::PRODUCER_GROUP,
    keys::MIN_OFFSET,
    keys::MAX_OFFSET,
    keys::BUYER_ID,
    keys::ORIGIN_MESSAGE_ID,
    keys::TRANSFER_FLAG,
    keys::CORRECTION_FLAG,
    keys::MSG_REGION,
    keys::TRACE_SWITCH,
    keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    keys::MAX_RECONSUME_TIMES,
    keys::RECONSUME_TIME,
    keys::CLUSTER,
    keys::INSTANCE_ID,
    keys::TRANSACTION_ID,
    keys::SHARDING_KEY,
    keys::MESSAGE_TYPE,
    keys::TIMER_DELAY_SEC,
    keys::TIMER_DELIVER_MS,
    keys::INNER_NUM,
    keys::INNER_BASE,
    keys::CRC32,
    keys::BORN_TIMESTAMP,
    keys::BORN_HOST,
    keys::CONSUME_START_TIMESTAMP,
    "POP_CK",
    "POP_CK_OFFSET",
    "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET",
    "TRANSACTION_CHECK_TIMES",
    "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "SHARDING_KEY",
    "TIMER_OUT_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "TIMER_DEL_UNIQKEY",
    "UNIQ_KEY",
    "EXTEND_UNIQ_INFO",
    "TRACE_CONTEXT",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
];

/// Whether a property name is reserved (see [`RESERVED_KEYS`]).
pub fn is_reserved(name: &str) -> bool {
    RESERVED_KEYS.contains(&name)
}

/// The application properties of a stored message: every property that is
/// not reserved.
pub fn user_properties(props: &Properties) -> HashMap<String, String> {
    props
        .iter()
        .filter(|(k, _)| !is_reserved(k))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// A time in ms since the epoch as a protobuf timestamp.
pub fn timestamp(ms: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    }
}

/// The business keys of a stored message (its space-separated `KEYS`).
pub fn stored_keys(props: &Properties) -> Vec<String> {
    props
        .get(keys::KEYS)
        .map(|k| {
            k.split(' ')
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Why a produced message was refused before it reached the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The business code.
    pub code: Code,
    /// What is wrong.
    pub message: String,
}

fn refused(code: Code, message: String) -> Refused {
    Refused { code, message }
}

/// Farthest `delivery_timestamp` accepted, from now (the RocketMQ proxy's
/// default `maxDelayTimeMills`, one day).
pub const MAX_DELIVERY_DELAY_MS: i64 = 86_400_000;

/// Checks a produced message and encodes its stored properties; a DELAY
/// message's `delivery_timestamp` becomes `TIMER_DELIVER_MS`.
///
/// # Errors
/// [`Refused`] naming the field at fault.
pub fn properties_for_send(message: &Message, max_body: usize) -> Result<String, Refused> {
    let sys = message.system_properties.clone().unwrap_or_default();
    if sys.message_id.trim().is_empty() {
        return Err(refused(
            Code::IllegalMessageId,
            "system_properties.message_id is empty; every message needs a client-generated id"
                .into(),
        ));
    }
    if message.body.is_empty() {
        return Err(refused(
            Code::MessageBodyEmpty,
            "message body is empty".into(),
        ));
    }
    if message.body.len() > max_body {
        return Err(refused(
            Code::MessageBodyTooLarge,
            format!(
                "message body of {} bytes exceeds the limit of {max_body} bytes (maxMessageSize)",
                message.body.len()
            ),
        ));
    }
    let mut delivery_ms = None;
    let mut transaction = false;
    match MessageType::try_from(sys.message_type).unwrap_or(MessageType::Unspecified) {
        MessageType::Unspecified | MessageType::Normal | MessageType::Fifo => {}
        MessageType::Transaction => transaction = true,
        MessageType::Delay => {
            let due = sys
                .delivery_timestamp
                .as_ref()
                .map_or(0, |t| t.seconds * 1000 + i64::from(t.nanos) / 1_000_000);
            if due - message_model::now_ms() > MAX_DELIVERY_DELAY_MS {
                return Err(refused(
                    Code::IllegalDeliveryTime,
                    format!("the max delay time of message is too large, max is {MAX_DELIVERY_DELAY_MS}"),
                ));
            }
            delivery_ms = Some(due);
        }
        other => {
            return Err(refused(
                Code::Unsupported,
                format!(
                    "{} messages are not supported by this broker; send NORMAL, FIFO, DELAY or \
                     TRANSACTION messages",
                    other.as_str_name()
                ),
            ))
        }
    }
    let mut props = Properties::new();
    let bad = |name: &str, e: &dyn std::fmt::Display| {
        refused(
            Code::IllegalMessagePropertyKey,
            format!("property {name:?} cannot be stored: {e}"),
        )
    };
    let mut user: Vec<(&String, &String)> = message.user_properties.iter().collect();
    user.sort();
    for (k, v) in user {
        if is_reserved(k) {
            return Err(refused(
                Code::IllegalMessagePropertyKey,
                format!("user property {k:?} is a reserved property name"),
            ));
        }
        props
            .insert(k.as_str(), v.as_str())
            .map_err(|e| bad(k, &e))?;
    }
    let mut put = |name: &str, value: &str| -> Result<(), Refused> {
        if value.is_empty() {
            return Ok(());
        }
        props
            .insert(name, value)
            .map(|_| ())
            .map_err(|e| bad(name, &e))
    };
    put(keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &sys.message_id)?;
    if let Some(tag) = sys.tag.as_deref() {
        if tag.contains('|') {
            return Err(refused(
                Code::IllegalMessageTag,
                format!("tag {tag:?} must not contain '|'"),
            ));
        }
        put(keys::TAGS, tag.trim())?;
    }
    let keys_joined = sys
        .keys
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    put(keys::KEYS, &keys_joined)?;
    if let Some(group) = sys.message_group.as_deref() {
        put(keys::SHARDING_KEY, group)?;
    }
    put(BORN_HOST_TEXT, &sys.born_host)?;
    if let Some(due) = delivery_ms {
        // A timer message (or, when already due, a plain one).
        put(keys::TIMER_DELIVER_MS, &due.to_string())?;
    }
    if transaction {
        // A half message, whose producer group is its topic (as the
        // RocketMQ proxy has it): the broker checks it with the producers
        // publishing to the topic.
        put(keys::TRANSACTION_PREPARED, "true")?;
        let topic = message.topic.as_ref().map_or("", |t| t.name.as_str());
        put(keys::PRODUCER_GROUP, topic)?;
        if let Some(d) = sys.orphaned_transaction_recovery_duration.as_ref() {
            let seconds = d.seconds + i64::from(d.nanos > 0);
            if seconds > 0 {
                put(CHECK_IMMUNITY, &seconds.to_string())?;
            }
        }
    }
    put(keys::WAIT_STORE_MSG_OK, "true")?;
    Ok(props.encode())
}

#[cfg(test)]
mod tests {
    use grpc_protocol::v2::SystemProperties;

    use super::*;

    fn message(id: &str) -> Message {
        Message {
            topic: None,
            user_properties: [("color".to_owned(), "red".to_owned())].into(),
            system_properties: Some(SystemProperties {
                message_id: id.into(),
                tag: Some("TagA".into()),
                keys: vec!["k1".into(), "k2".into()],
                born_host: "host-1".into(),
                ..SystemProperties::default()
            }),
            body: b"hello".to_vec(),
        }
    }

    #[test]
    fn send_properties_carry_id_tag_keys_and_user_properties() {
        let text = properties_for_send(&message("01ABC"), 1024).unwrap();
        let props = Properties::decode(&text);
        assert_eq!(props.get("UNIQ_KEY"), Some("01ABC"));
        assert_eq!(props.get("TAGS"), Some("TagA"));
        assert_eq!(props.get("KEYS"), Some("k1 k2"));
        assert_eq!(props.get("color"), Some("red"));
        let user = user_properties(&props);
        assert_eq!(user.len(), 1, "{user:?}");
        assert_eq!(user.get("color").map(String::as_str), Some("red"));
    }

    #[test]
    fn a_transaction_message_is_a_half_of_its_topics_group() {
        let mut m = message("TX1");
        m.topic = Some(grpc_protocol::v2::Resource {
            resource_namespace: String::new(),
            name: "Orders".into(),
        });
        let sys = m.system_properties.as_mut().unwrap();
        sys.message_type = MessageType::Transaction as i32;
        sys.orphaned_transaction_recovery_duration = Some(prost_types::Duration {
            seconds: 4,
            nanos: 1,
        });
        let props = Properties::decode(&properties_for_send(&m, 1024).unwrap());
        assert_eq!(props.get(keys::TRANSACTION_PREPARED), Some("true"));
        assert_eq!(props.get(keys::PRODUCER_GROUP), Some("Orders"));
        assert_eq!(props.get(CHECK_IMMUNITY), Some("5"));
        let plain = Properties::decode(&properties_for_send(&message("N1"), 1024).unwrap());
        assert_eq!(plain.get(keys::TRANSACTION_PREPARED), None);
    }

    #[test]
    fn bad_messages_are_refused_with_their_code() {
        let err = properties_for_send(&message(""), 1024).unwrap_err();
        assert_eq!(err.code, Code::IllegalMessageId);
        let mut big = message("a");
        big.body = vec![0; 2048];
        let err = properties_for_send(&big, 1024).unwrap_err();
        assert_eq!(err.code, Code::MessageBodyTooLarge);
        let mut reserved = message("a");
        reserved
            .user_properties
            .insert("UNIQ_KEY".into(), "x".into());
        let err = properties_for_send(&reserved, 1024).unwrap_err();
        assert_eq!(err.code, Code::IllegalMessagePropertyKey);
    }
}
