//! Message properties and their string encoding.
//!
//! A property string is `name 0x01 value 0x02` for every entry, the last one
//! included. Decoding follows RocketMQ: segments split on `0x02`, a segment
//! counts only if it has a non-empty name and a non-empty value around its
//! first `0x01`; anything else is skipped, never an error. A repeated name
//! keeps its last value. [`find`] reads one value the same way without
//! decoding the rest.

use thiserror::Error;

/// Separates a property's name from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends every property entry.
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Largest encoded property string a stored message can hold (its length is an i16).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;

/// Well-known property names, as RocketMQ's clients and brokers use them.
pub mod keys {
    /// Space-separated business keys.
    pub const KEYS: &str = "KEYS";
    /// The message tag (or tags).
    pub const TAGS: &str = "TAGS";
    /// `"false"` lets a SYNC_FLUSH broker answer before the flush.
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    /// Delay level of a scheduled message.
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    /// Original topic of a retried message.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Real topic of a scheduled or transactional message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Real queue id of a scheduled or transactional message.
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    /// Marks a transactional half message.
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    /// Producer group of a transactional message.
    pub const PRODUCER_GROUP: &str = "PGROUP";
    /// Minimum queue offset, added by clients to pulled messages.
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Maximum queue offset, added by clients to pulled messages.
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Buyer id.
    pub const BUYER_ID: &str = "BUYER_ID";
    /// Id of the message a retry was made from.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// Transfer flag.
    pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
    /// Correction flag.
    pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
    /// Broker region, set by the broker on send responses.
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Whether message tracing is on.
    pub const TRACE_SWITCH: &str = "TRACE_ON";
    /// The client-made unique message id.
    pub const UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &str = "UNIQ_KEY";
    /// Maximum number of redeliveries.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Number of redeliveries so far.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// Cluster name, added by the broker.
    pub const CLUSTER: &str = "CLUSTER";
    /// Instance id.
    pub const INSTANCE_ID: &str = "INSTANCE_ID";
    /// Transaction id.
    pub const TRANSACTION_ID: &str = "__transactionId__";
    /// Sharding key of an ordered message.
    pub const SHARDING_KEY: &str = "__SHARDINGKEY";
    /// Message type.
    pub const MESSAGE_TYPE: &str = "MSG_TYPE";
    /// Timer delay in seconds.
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// Timer delivery instant in epoch milliseconds.
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// Timer message: delay in milliseconds from the store time.
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Timer message: when the broker delivers it (ms since the epoch).
    pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
    /// Timer message: when the broker moved it to its topic.
    pub const TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
    /// Number of messages in an inner batch.
    pub const INNER_NUM: &str = "INNER_NUM";
    /// Base queue offset of an inner batch.
    pub const INNER_BASE: &str = "INNER_BASE";
    /// Property CRC entry appended by the broker when enabled.
    pub const CRC32: &str = "__CRC32#";
    /// Born timestamp.
    pub const BORN_TIMESTAMP: &str = "BORN_TIMESTAMP";
    /// Born host.
    pub const BORN_HOST: &str = "__BORNHOST";
    /// Instant a consumer started to consume the message.
    pub const CONSUME_START_TIMESTAMP: &str = "CONSUME_START_TIME";
}

/// Why a property could not be set or a property string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PropertiesError {
    /// A property name was empty.
    #[error("property name is empty")]
    EmptyName,
    /// A property value was empty; RocketMQ drops such entries on decode.
    #[error("property {name:?} has an empty value")]
    EmptyValue {
        /// The property's name.
        name: String,
    },
    /// A name or value contained one of the two separator characters.
    #[error("property {name:?} contains a reserved separator character (U+0001 or U+0002)")]
    ReservedCharacter {
        /// The property's name.
        name: String,
    },
    /// The encoded bytes were not UTF-8.
    #[error("property string is not valid UTF-8 (first bad byte at {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
}

/// An ordered set of message properties; names are unique, and insertion
/// order is kept so that an encoded string decodes and re-encodes to the same
/// bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Properties {
    entries: Vec<(String, String)>,
}

impl Properties {
    /// Creates an empty property set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of properties.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Reports whether there are no properties.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Returns the value of a property.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets a property, replacing (in place) any earlier value, and returns
    /// the earlier value.
    ///
    /// # Errors
    /// Refuses empty names and values and the two separator characters,
    /// because none of them would survive an encode/decode round trip.
    pub fn insert(
        &mut self,
        name: impl Into<String>,
        value: impl Into<String>,
    ) -> Result<Option<String>, PropertiesError> {
        let name = name.into();
        let value = value.into();
        if name.is_empty() {
            return Err(PropertiesError::EmptyName);
        }
        if value.is_empty() {
            return Err(PropertiesError::EmptyValue { name });
        }
        if has_separator(&name) || has_separator(&value) {
            return Err(PropertiesError::ReservedCharacter { name });
        }
        Ok(self.insert_unchecked(name, value))
    }

    /// Removes a property and returns its value.
    pub fn remove(&mut self, name: &str) -> Option<String> {
        let pos = self.entries.iter().position(|(k, _)| k == name)?;
        Some(self.entries.remove(pos).1)
    }

    /// Iterates over `(name, value)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Length in bytes of [`Properties::encode`]'s output.
    pub fn encoded_len(&self) -> usize {
        self.entries
            .iter()
            .map(|(k, v)| k.len() + v.len() + 2)
            .sum()
    }

    /// Encodes the properties as a RocketMQ property string.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(self.encoded_len());
        self.encode_into(&mut out);
        out
    }

    /// Appends the RocketMQ property string to `out`.
    pub fn encode_into(&self, out: &mut String) {
        for (k, v) in &self.entries {
            out.push_str(k);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(v);
            out.push(PROPERTY_SEPARATOR);
        }
    }

    /// Decodes a property string the way RocketMQ does: malformed segments
    /// are skipped and a repeated name keeps its last value.
    pub fn decode(text: &str) -> Self {
        let mut props = Self::new();
        for segment in text.split(PROPERTY_SEPARATOR) {
            if let Some((name, value)) = segment.split_once(NAME_VALUE_SEPARATOR) {
                if !name.is_empty() && !value.is_empty() {
                    props.insert_unchecked(name.to_owned(), value.to_owned());
                }
            }
        }
        props
    }

    /// Decodes a property string from bytes.
    ///
    /// # Errors
    /// [`PropertiesError::InvalidUtf8`] when the bytes are not UTF-8.
    pub fn decode_bytes(bytes: &[u8]) -> Result<Self, PropertiesError> {
        let text = std::str::from_utf8(bytes).map_err(|e| PropertiesError::InvalidUtf8 {
            valid_up_to: e.valid_up_to(),
        })?;
        Ok(Self::decode(text))
    }

    fn insert_unchecked(&mut self, name: String, value: String) -> Option<String> {
        match self.entries.iter_mut().find(|(k, _)| *k == name) {
            Some((_, old)) => Some(std::mem::replace(old, value)),
            None => {
                self.entries.push((name, value));
                None
            }
        }
    }
}

/// The entries, names and values moved out, in insertion order.
impl IntoIterator for Properties {
    type Item = (String, String);
    type IntoIter = std::vec::IntoIter<(String, String)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

/// The value of property `name` in an encoded property string, borrowed from
/// it: the same as `Properties::decode(encoded).get(name)` for every input
/// (the last entry of a repeated name wins, malformed segments are skipped),
/// without allocating.
pub fn find<'a>(encoded: &'a str, name: &str) -> Option<&'a str> {
    // Decoded names are never empty and never hold a separator.
    if name.is_empty() || has_separator(name) {
        return None;
    }
    // One forward pass, keeping the last match: a segment whose name is
    // `name` starts with `name` and the name-value separator, since `name`
    // holds no separator of its own.
    let mut found = None;
    for segment in encoded.split(PROPERTY_SEPARATOR) {
        if let Some(value) = segment
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(NAME_VALUE_SEPARATOR))
        {
            if !value.is_empty() {
                found = Some(value);
            }
        }
    }
    found
}

impl<'a> IntoIterator for &'a Properties {
    type Item = (&'a str, &'a str);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, &'a str)> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

fn has_separator(s: &str) -> bool {
    s.contains([NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn encodes_each_entry_with_both_separators() {
        let mut p = Properties::new();
        p.insert(keys::TAGS, "TagA").unwrap();
        p.insert(keys::KEYS, "k1 k2").unwrap();
        assert_eq!(p.encode(), "TAGS\u{1}TagA\u{2}KEYS\u{1}k1 k2\u{2}");
        assert_eq!(p.encoded_len(), p.encode().len());
    }

    #[test]
    fn decode_skips_malformed_segments_like_rocketmq() {
        let p =
            Properties::decode("A\u{1}1\u{2}\u{1}x\u{2}B\u{1}\u{2}noseparator\u{2}C\u{1}a\u{1}b");
        assert_eq!(p.get("A"), Some("1"));
        assert_eq!(p.get("B"), None);
        assert_eq!(p.get("C"), Some("a\u{1}b"));
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn repeated_name_keeps_last_value() {
        let p = Properties::decode("A\u{1}1\u{2}A\u{1}2\u{2}");
        assert_eq!(p.get("A"), Some("2"));
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn find_reads_one_value_as_decode_does() {
        let text = "A\u{1}1\u{2}B\u{1}\u{2}A\u{1}2\u{2}\u{1}x\u{2}C\u{1}a\u{1}b";
        assert_eq!(find(text, "A"), Some("2"), "the last of a repeated name");
        assert_eq!(find(text, "B"), None, "an empty value is skipped");
        assert_eq!(
            find(text, "C"),
            Some("a\u{1}b"),
            "no final separator needed"
        );
        assert_eq!(find(text, ""), None, "an empty name is skipped");
        assert_eq!(find("A\u{1}1\u{2}A\u{1}\u{2}", "A"), Some("1"));
        assert_eq!(find("", "A"), None);
    }

    #[test]
    fn insert_refuses_what_cannot_round_trip() {
        let mut p = Properties::new();
        assert_eq!(p.insert("", "v"), Err(PropertiesError::EmptyName));
        assert!(matches!(
            p.insert("k", ""),
            Err(PropertiesError::EmptyValue { .. })
        ));
        assert!(matches!(
            p.insert("k", "a\u{2}b"),
            Err(PropertiesError::ReservedCharacter { .. })
        ));
        assert!(p.is_empty());
    }

    #[test]
    fn invalid_utf8_is_reported_with_position() {
        assert_eq!(
            Properties::decode_bytes(b"A\x01\xff\x02"),
            Err(PropertiesError::InvalidUtf8 { valid_up_to: 2 })
        );
    }

    proptest! {
        #[test]
        fn any_valid_properties_round_trip(
            entries in proptest::collection::vec(("[^\u{1}\u{2}]{1,12}", "[^\u{1}\u{2}]{1,24}"), 0..8)
        ) {
            let mut p = Properties::new();
            for (k, v) in entries {
                p.insert(k, v).unwrap();
            }
            let text = p.encode();
            prop_assert_eq!(Properties::decode(&text), p.clone());
            prop_assert_eq!(Properties::decode_bytes(text.as_bytes()).unwrap().encode(), text);
        }

        #[test]
        fn decode_never_panics(text in ".*") {
            let _ = Properties::decode(&text);
        }

        #[test]
        fn find_agrees_with_decode(
            text in "[ab\u{1}\u{2}]{0,40}",
            name in "[ab]{0,2}|[ab\u{1}\u{2}]{0,3}",
        ) {
            let decoded = Properties::decode(&text);
            prop_assert_eq!(find(&text, &name), decoded.get(&name));
        }

        #[test]
        fn find_agrees_with_decode_on_any_text(text in ".*", name in ".{0,4}") {
            let decoded = Properties::decode(&text);
            prop_assert_eq!(find(&text, &name), decoded.get(&name));
        }

        #[test]
        fn find_agrees_with_decode_for_every_name_in_the_text(text in "[ab\u{1}\u{2}]{0,40}") {
            let decoded = Properties::decode(&text);
            for segment in text.split(PROPERTY_SEPARATOR) {
                let name = segment.split_once(NAME_VALUE_SEPARATOR).map_or(segment, |(n, _)| n);
                prop_assert_eq!(find(&text, name), decoded.get(name));
            }
        }
    }
}
