//! The stored-message record, RocketMQ's CommitLog layout field by field.
//!
//! ```text
//!  0 TOTALSIZE i32        4 MAGICCODE i32      8 BODYCRC i32
//! 12 QUEUEID i32         16 FLAG i32          20 QUEUEOFFSET i64
//! 28 PHYSICALOFFSET i64  36 SYSFLAG i32       40 BORNTIMESTAMP i64
//! 48 BORNHOST 8|20       .. STORETIMESTAMP i64 .. STOREHOST 8|20
//! .. RECONSUMETIMES i32  .. PREPARED_TX_OFFSET i64
//! .. BODYLEN i32 + body  .. TOPICLEN i8|i16 + topic  .. PROPLEN i16 + properties
//! ```
//!
//! Hosts are IPv4 (4 bytes + i32 port) unless the sysFlag's IPv6 bits say
//! otherwise (16 bytes + port). The topic length is one byte under magic V1
//! and two under V2, which is used for topics longer than 127 bytes. A file's
//! unused tail starts with `[remaining i32, BLANK_MAGIC i32]`.
//!
//! The store writes records with [`encode`] and [`patch`] and reads them back
//! with [`check`]; pull clients parse the records a broker sends with the
//! same [`check`], so the layout has one home.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use bytes::Bytes;

use crate::flags::{BORNHOST_V6, STOREHOST_V6};

/// Magic of a record whose topic length is one byte.
pub const MAGIC_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic of a record whose topic length is two bytes.
pub const MAGIC_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic of the filler that ends a file.
pub const BLANK_MAGIC: i32 = 0xCBD4_3194_u32 as i32;
/// Bytes of the end-of-file filler header.
pub const BLANK_HEADER_LEN: usize = 8;
/// Largest encoded properties (the length is an i16).
pub const MAX_PROPERTIES_LEN: usize = crate::properties::MAX_PROPERTIES_LEN;
/// Largest topic under magic V1.
pub const MAX_TOPIC_LEN_V1: usize = 127;
/// Largest topic under magic V2.
pub const MAX_TOPIC_LEN_V2: usize = 255;

const POS_QUEUE_OFFSET: usize = 20;
const POS_PHYSICAL_OFFSET: usize = 28;
const POS_SYS_FLAG: usize = 36;
const POS_BORN_HOST: usize = 48;

/// A message as handed to the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageToStore {
    /// Topic.
    pub topic: String,
    /// Queue within the topic.
    pub queue_id: i32,
    /// User flag.
    pub flag: i32,
    /// System flag; the store sets the IPv6 host bits itself.
    pub sys_flag: i32,
    /// When the producer made the message (ms since the epoch).
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// This broker's address, as it appears in message ids.
    pub store_host: SocketAddr,
    /// Redeliveries so far.
    pub reconsume_times: i32,
    /// Offset of the prepared message of a transaction.
    pub prepared_transaction_offset: i64,
    /// Body.
    pub body: Bytes,
    /// Encoded properties.
    pub properties: String,
}

/// Why a message cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The body is larger than the configured maximum.
    #[error("message body of {len} bytes exceeds maxMessageSize ({max} bytes)")]
    BodyTooLarge {
        /// Body length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The properties are longer than 32767 bytes.
    #[error("message properties of {len} bytes exceed the 32767-byte limit")]
    PropertiesTooLong {
        /// Properties length.
        len: usize,
    },
    /// The topic is empty or longer than 255 bytes.
    #[error("topic of {len} bytes is not allowed (1..=255 bytes)")]
    BadTopic {
        /// Topic length.
        len: usize,
    },
}

/// Encodes `msg` into `out` (cleared first) with zero queue offset, physical
/// offset and store timestamp, which [`patch`] fills in under the put lock.
/// Returns the record length.
///
/// # Errors
/// [`EncodeError`] when a limit is exceeded.
pub fn encode(
    msg: &MessageToStore,
    max_body: usize,
    out: &mut Vec<u8>,
) -> Result<usize, EncodeError> {
    if msg.body.len() > max_body {
        return Err(EncodeError::BodyTooLarge {
            len: msg.body.len(),
            max: max_body,
        });
    }
    // Every entry ends with 0x02, the last included; recovery relies on it
    // to detect a write torn inside the properties, so a missing final
    // separator is added here.
    let missing_separator = !msg.properties.is_empty() && !msg.properties.ends_with('\u{2}');
    let props_len = msg.properties.len() + usize::from(missing_separator);
    if props_len > MAX_PROPERTIES_LEN {
        return Err(EncodeError::PropertiesTooLong { len: props_len });
    }
    let topic = msg.topic.as_bytes();
    if topic.is_empty() || topic.len() > MAX_TOPIC_LEN_V2 {
        return Err(EncodeError::BadTopic { len: topic.len() });
    }
    let v2 = topic.len() > MAX_TOPIC_LEN_V1;
    let mut sys_flag = msg.sys_flag & !(BORNHOST_V6 | STOREHOST_V6);
    if msg.born_host.is_ipv6() {
        sys_flag |= BORNHOST_V6;
    }
    if msg.store_host.is_ipv6() {
        sys_flag |= STOREHOST_V6;
    }
    let len = record_len(sys_flag, msg.body.len(), topic.len(), props_len);
    out.clear();
    out.reserve(len);
    put_i32(out, len as i32);
    put_i32(out, if v2 { MAGIC_V2 } else { MAGIC_V1 });
    put_i32(out, body_crc(&msg.body));
    put_i32(out, msg.queue_id);
    put_i32(out, msg.flag);
    put_i64(out, 0);
    put_i64(out, 0);
    put_i32(out, sys_flag);
    put_i64(out, msg.born_timestamp);
    put_host(out, msg.born_host);
    put_i64(out, 0);
    put_host(out, msg.store_host);
    put_i32(out, msg.reconsume_times);
    put_i64(out, msg.prepared_transaction_offset);
    put_i32(out, msg.body.len() as i32);
    out.extend_from_slice(&msg.body);
    if v2 {
        out.extend_from_slice(&(topic.len() as i16).to_be_bytes());
    } else {
        out.push(topic.len() as u8);
    }
    out.extend_from_slice(topic);
    out.extend_from_slice(&(props_len as i16).to_be_bytes());
    out.extend_from_slice(msg.properties.as_bytes());
    if missing_separator {
        out.push(2);
    }
    debug_assert_eq!(out.len(), len);
    Ok(len)
}

/// Fills in the fields known only under the put lock.
pub fn patch(record: &mut [u8], queue_offset: i64, physical_offset: i64, store_timestamp: i64) {
    record[POS_QUEUE_OFFSET..POS_QUEUE_OFFSET + 8].copy_from_slice(&queue_offset.to_be_bytes());
    record[POS_PHYSICAL_OFFSET..POS_PHYSICAL_OFFSET + 8]
        .copy_from_slice(&physical_offset.to_be_bytes());
    let sys_flag = read_i32(record, POS_SYS_FLAG);
    let pos = store_timestamp_pos(sys_flag);
    record[pos..pos + 8].copy_from_slice(&store_timestamp.to_be_bytes());
}

/// Length of a record with these parts.
pub fn record_len(sys_flag: i32, body: usize, topic: usize, properties: usize) -> usize {
    let born = host_len(sys_flag & BORNHOST_V6 != 0);
    let store = host_len(sys_flag & STOREHOST_V6 != 0);
    let topic_len_len = if topic > MAX_TOPIC_LEN_V1 { 2 } else { 1 };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born
        + 8
        + store
        + 4
        + 8
        + 4
        + body
        + topic_len_len
        + topic
        + 2
        + properties
}

/// RocketMQ's body CRC: CRC32 masked to 31 bits.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// The end-of-file filler header for `remaining` bytes.
pub fn blank(remaining: usize) -> [u8; BLANK_HEADER_LEN] {
    let mut out = [0u8; BLANK_HEADER_LEN];
    out[..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    out[4..].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
    out
}

/// A decoded record, borrowing from the bytes it was read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredMessage<'a> {
    /// Whole record length.
    pub total_size: usize,
    /// Magic code.
    pub magic: i32,
    /// Body CRC as stored.
    pub body_crc: i32,
    /// Queue id.
    pub queue_id: i32,
    /// User flag.
    pub flag: i32,
    /// Queue offset.
    pub queue_offset: i64,
    /// Physical offset in the CommitLog.
    pub physical_offset: i64,
    /// System flag.
    pub sys_flag: i32,
    /// Born timestamp.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Store timestamp.
    pub store_timestamp: i64,
    /// Broker address.
    pub store_host: SocketAddr,
    /// Redeliveries so far.
    pub reconsume_times: i32,
    /// Prepared transaction offset.
    pub prepared_transaction_offset: i64,
    /// Body.
    pub body: &'a [u8],
    /// Topic.
    pub topic: &'a str,
    /// Encoded properties.
    pub properties: &'a str,
}

/// What is found at a position of a CommitLog file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<'a> {
    /// A whole, valid message.
    Message(StoredMessage<'a>),
    /// The end-of-file filler: nothing more in this file.
    Blank,
    /// Zeroes: the end of the written data.
    End,
    /// A torn or corrupt record.
    Invalid(&'static str),
}

/// Reads the record at the start of `buf` (the rest of the file), checking
/// its magic, its declared and actual size, and (if asked) its body CRC.
pub fn check(buf: &[u8], check_crc: bool) -> Record<'_> {
    if buf.len() < 8 {
        return if buf.iter().all(|&b| b == 0) {
            Record::End
        } else {
            Record::Invalid("fewer than 8 bytes left")
        };
    }
    let total = read_i32(buf, 0);
    let magic = read_i32(buf, 4);
    match magic {
        BLANK_MAGIC => return Record::Blank,
        MAGIC_V1 | MAGIC_V2 => {}
        0 if total == 0 => return Record::End,
        _ => return Record::Invalid("bad magic code"),
    }
    let Ok(total) = usize::try_from(total) else {
        return Record::Invalid("negative size");
    };
    if total > buf.len() {
        return Record::Invalid("size runs past the end of the file");
    }
    match parse(&buf[..total], magic) {
        Some(msg) => {
            if check_crc && body_crc(msg.body) != msg.body_crc {
                return Record::Invalid("body CRC mismatch");
            }
            // Every property entry, the last included, ends with 0x02; a
            // write torn inside the record's tail leaves zeroes there, which
            // no CRC covers.
            if check_crc && !msg.properties.is_empty() && !msg.properties.ends_with('\u{2}') {
                return Record::Invalid("properties do not end with their separator (torn write)");
            }
            Record::Message(msg)
        }
        None => Record::Invalid("fields do not add up to the record size"),
    }
}

/// Parses one whole record; `None` if its fields do not add up to its length.
fn parse(rec: &[u8], magic: i32) -> Option<StoredMessage<'_>> {
    let mut r = Cursor { buf: rec, pos: 8 };
    let body_crc = r.i32()?;
    let queue_id = r.i32()?;
    let flag = r.i32()?;
    let queue_offset = r.i64()?;
    let physical_offset = r.i64()?;
    let sys_flag = r.i32()?;
    let born_timestamp = r.i64()?;
    let born_host = r.host(sys_flag & BORNHOST_V6 != 0)?;
    let store_timestamp = r.i64()?;
    let store_host = r.host(sys_flag & STOREHOST_V6 != 0)?;
    let reconsume_times = r.i32()?;
    let prepared_transaction_offset = r.i64()?;
    let body_len = usize::try_from(r.i32()?).ok()?;
    let body = r.take(body_len)?;
    let topic_len = if magic == MAGIC_V2 {
        usize::try_from(i16::from_be_bytes(r.array()?)).ok()?
    } else {
        usize::from(r.array::<1>()?[0])
    };
    let topic = std::str::from_utf8(r.take(topic_len)?).ok()?;
    let prop_len = usize::try_from(i16::from_be_bytes(r.array()?)).ok()?;
    let properties = std::str::from_utf8(r.take(prop_len)?).ok()?;
    if r.pos != rec.len() {
        return None;
    }
    Some(StoredMessage {
        total_size: rec.len(),
        magic,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

/// Position of the store timestamp for a sysFlag.
pub fn store_timestamp_pos(sys_flag: i32) -> usize {
    POS_BORN_HOST + host_len(sys_flag & BORNHOST_V6 != 0)
}

/// Reads the store timestamp of a record.
pub fn read_store_timestamp(record: &[u8]) -> Option<i64> {
    let sys_flag = i32::from_be_bytes(
        record
            .get(POS_SYS_FLAG..POS_SYS_FLAG + 4)?
            .try_into()
            .ok()?,
    );
    let pos = store_timestamp_pos(sys_flag);
    Some(i64::from_be_bytes(
        record.get(pos..pos + 8)?.try_into().ok()?,
    ))
}

fn host_len(v6: bool) -> usize {
    if v6 {
        20
    } else {
        8
    }
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_host(out: &mut Vec<u8>, addr: SocketAddr) {
    match addr.ip() {
        IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
    }
    put_i32(out, i32::from(addr.port()));
}

fn read_i32(buf: &[u8], pos: usize) -> i32 {
    i32::from_be_bytes([buf[pos], buf[pos + 1], buf[pos + 2], buf[pos + 3]])
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let out = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.array()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.array()?))
    }

    fn host(&mut self, v6: bool) -> Option<SocketAddr> {
        let ip = if v6 {
            IpAddr::V6(Ipv6Addr::from(self.array::<16>()?))
        } else {
            IpAddr::V4(Ipv4Addr::from(self.array::<4>()?))
        };
        // The port travels as an i32; only its low 16 bits are a port.
        Some(SocketAddr::new(ip, self.i32()? as u16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn sample(body: &[u8], topic: &str) -> MessageToStore {
        MessageToStore {
            topic: topic.into(),
            queue_id: 3,
            flag: 5,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: "10.0.0.9:50000".parse().unwrap(),
            store_host: "10.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Bytes::copy_from_slice(body),
            properties: "TAGS\u{1}A\u{2}".into(),
        }
    }

    #[test]
    fn layout_matches_rocketmq_offsets() {
        let mut buf = Vec::new();
        let len = encode(&sample(b"hello", "T"), 1024, &mut buf).unwrap();
        // 91 + body + topic + properties for IPv4 hosts and magic V1.
        assert_eq!(len, 91 + 5 + 1 + 7);
        patch(&mut buf, 7, 4096, 1_700_000_000_123);
        assert_eq!(read_i32(&buf, 4), MAGIC_V1);
        assert_eq!(&buf[20..28], &7i64.to_be_bytes());
        assert_eq!(&buf[28..36], &4096i64.to_be_bytes());
        assert_eq!(&buf[56..64], &1_700_000_000_123i64.to_be_bytes());
        assert_eq!(&buf[84..88], &5i32.to_be_bytes());
        assert_eq!(&buf[88..93], b"hello");
        assert_eq!(read_store_timestamp(&buf), Some(1_700_000_000_123));
    }

    #[test]
    fn long_topics_use_magic_v2_and_ipv6_hosts_set_flags() {
        let mut msg = sample(b"x", &"t".repeat(200));
        msg.born_host = "[::1]:1".parse().unwrap();
        let mut buf = Vec::new();
        let len = encode(&msg, 1024, &mut buf).unwrap();
        assert_eq!(len, 91 + 12 + 1 + 1 + 200 + 7);
        let Record::Message(m) = check(&buf, true) else {
            panic!("valid record")
        };
        assert_eq!(m.magic, MAGIC_V2);
        assert_eq!(m.sys_flag & BORNHOST_V6, BORNHOST_V6);
        assert_eq!(m.born_host, msg.born_host);
        assert_eq!(m.topic.len(), 200);
    }

    #[test]
    fn limits_are_enforced() {
        let mut buf = Vec::new();
        assert!(matches!(
            encode(&sample(&[0; 11], "T"), 10, &mut buf),
            Err(EncodeError::BodyTooLarge { len: 11, max: 10 })
        ));
        let mut msg = sample(b"", "T");
        msg.properties = "x".repeat(40_000);
        assert!(matches!(
            encode(&msg, 10, &mut buf),
            Err(EncodeError::PropertiesTooLong { .. })
        ));
        assert!(matches!(
            encode(&sample(b"", ""), 10, &mut buf),
            Err(EncodeError::BadTopic { len: 0 })
        ));
    }

    #[test]
    fn blank_end_and_garbage_are_told_apart() {
        assert_eq!(check(&blank(100), true), Record::Blank);
        assert_eq!(check(&[0u8; 100], true), Record::End);
        assert_eq!(check(&[0u8; 3], true), Record::End);
        assert!(matches!(check(&[1u8; 100], true), Record::Invalid(_)));
    }

    #[test]
    fn a_write_torn_inside_the_properties_is_detected() {
        let mut buf = Vec::new();
        encode(&sample(b"hello", "T"), 1024, &mut buf).unwrap();
        let len = buf.len();
        buf[len - 2..].fill(0);
        assert!(matches!(check(&buf, true), Record::Invalid(_)));
        assert!(
            matches!(check(&buf, false), Record::Message(_)),
            "only recovery checks it"
        );
    }

    #[test]
    fn corrupt_body_fails_crc_check() {
        let mut buf = Vec::new();
        encode(&sample(b"hello", "T"), 1024, &mut buf).unwrap();
        buf[90] ^= 1;
        assert_eq!(check(&buf, true), Record::Invalid("body CRC mismatch"));
        assert!(matches!(check(&buf, false), Record::Message(_)));
    }

    /// Addresses as the layout carries them: IP and port, no IPv6 scope.
    fn addr() -> impl Strategy<Value = SocketAddr> {
        (any::<IpAddr>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::new(ip, port))
    }

    proptest! {
        #[test]
        fn any_message_round_trips(
            body in proptest::collection::vec(any::<u8>(), 0..300),
            topic in "[a-zA-Z0-9_%|-]{1,255}",
            props in "[a-z\u{1}\u{2}]{0,60}",
            queue_id in any::<i32>(), flag in any::<i32>(), sys in any::<i32>(),
            born in any::<i64>(), store_ts in any::<i64>(), qo in any::<i64>(), po in any::<i64>(),
            born_host in addr(), store_host in addr(),
            reconsume in any::<i32>(), prepared in any::<i64>(),
        ) {
            let msg = MessageToStore {
                topic, queue_id, flag, sys_flag: sys, born_timestamp: born, born_host, store_host,
                reconsume_times: reconsume, prepared_transaction_offset: prepared,
                body: body.into(), properties: props,
            };
            let mut buf = Vec::new();
            let len = encode(&msg, 1 << 20, &mut buf).unwrap();
            patch(&mut buf, qo, po, store_ts);
            let Record::Message(m) = check(&buf, true) else { panic!("valid record") };
            prop_assert_eq!(m.total_size, len);
            prop_assert_eq!(m.topic, msg.topic.as_str());
            prop_assert_eq!(m.body, &msg.body[..]);
            let mut expected = msg.properties.clone();
            if !expected.is_empty() && !expected.ends_with('\u{2}') {
                expected.push('\u{2}');
            }
            prop_assert_eq!(m.properties, expected.as_str());
            prop_assert_eq!((m.queue_id, m.flag, m.born_timestamp), (queue_id, flag, born));
            prop_assert_eq!((m.queue_offset, m.physical_offset, m.store_timestamp), (qo, po, store_ts));
            prop_assert_eq!((m.born_host, m.store_host), (born_host, store_host));
            prop_assert_eq!((m.reconsume_times, m.prepared_transaction_offset), (reconsume, prepared));
            prop_assert_eq!(m.sys_flag & !(BORNHOST_V6 | STOREHOST_V6), sys & !(BORNHOST_V6 | STOREHOST_V6));
        }

        #[test]
        fn check_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), crc in any::<bool>()) {
            let _ = check(&bytes, crc);
        }
    }
}
