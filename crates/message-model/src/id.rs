//! Message ids: the broker's offset id and the client's unique key.
//!
//! The offset id (`msgId` in a send response) is the store host's address and
//! port followed by the message's physical CommitLog offset. The unique key
//! (property `UNIQ_KEY`) is made by the producer from its address, process id,
//! a per-process discriminator, the time since the start of the month and a
//! counter. Both render as uppercase hexadecimal.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::atomic::{AtomicU32, Ordering},
};

use thiserror::Error;

/// Why an id string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum IdError {
    /// The string had neither the IPv4 nor the IPv6 length.
    #[error(
        "message id {id:?} has {len} characters; expected {ipv4} (IPv4 host) or {ipv6} (IPv6 host)"
    )]
    BadLength {
        /// The offending id.
        id: String,
        /// Its length.
        len: usize,
        /// Length for an IPv4 host.
        ipv4: usize,
        /// Length for an IPv6 host.
        ipv6: usize,
    },
    /// The string was not hexadecimal.
    #[error("message id {id:?} is not hexadecimal")]
    NotHex {
        /// The offending id.
        id: String,
    },
}

/// The broker's message id: where the message is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MessageId {
    /// Address of the broker that stored the message.
    pub store_host: SocketAddr,
    /// Physical offset of the message in that broker's CommitLog.
    pub commit_log_offset: i64,
}

impl MessageId {
    /// Encoded length for an IPv4 store host.
    pub const IPV4_LEN: usize = 32;
    /// Encoded length for an IPv6 store host.
    pub const IPV6_LEN: usize = 56;

    /// Creates an id.
    pub fn new(store_host: SocketAddr, commit_log_offset: i64) -> Self {
        Self {
            store_host,
            commit_log_offset,
        }
    }

    /// Renders the id as uppercase hexadecimal.
    pub fn encode(&self) -> String {
        let mut raw = Vec::with_capacity(28);
        push_ip(&mut raw, self.store_host.ip());
        raw.extend_from_slice(&i32::from(self.store_host.port()).to_be_bytes());
        raw.extend_from_slice(&self.commit_log_offset.to_be_bytes());
        hex::encode_upper(raw)
    }

    /// Parses an id; the host's address family is taken from the length.
    ///
    /// # Errors
    /// [`IdError`] when the length or the digits are wrong.
    pub fn decode(id: &str) -> Result<Self, IdError> {
        let raw = decode_hex(id, Self::IPV4_LEN, Self::IPV6_LEN)?;
        let ip_len = raw.len() - 12;
        let ip = read_ip(&raw[..ip_len]);
        let port = i32::from_be_bytes(array(&raw[ip_len..ip_len + 4]));
        let offset = i64::from_be_bytes(array(&raw[ip_len + 4..]));
        Ok(Self {
            // The port travels as an i32; only its low 16 bits are a port.
            store_host: SocketAddr::new(ip, port as u16),
            commit_log_offset: offset,
        })
    }
}

impl std::fmt::Display for MessageId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encode())
    }
}

/// The producer's unique message id (property `UNIQ_KEY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UniqueKey {
    /// Address of the producer's host.
    pub ip: IpAddr,
    /// Low 16 bits of the producer's process id.
    pub pid: i16,
    /// A per-process value that tells apart producers in one process.
    pub discriminator: i32,
    /// Milliseconds since the start of the month (UTC) when the id was made.
    pub millis_in_month: i32,
    /// Per-process counter.
    pub counter: i16,
}

impl UniqueKey {
    /// Encoded length for an IPv4 host.
    pub const IPV4_LEN: usize = 32;
    /// Encoded length for an IPv6 host.
    pub const IPV6_LEN: usize = 56;

    /// Renders the key as uppercase hexadecimal.
    pub fn encode(&self) -> String {
        let mut raw = Vec::with_capacity(28);
        push_ip(&mut raw, self.ip);
        raw.extend_from_slice(&self.pid.to_be_bytes());
        raw.extend_from_slice(&self.discriminator.to_be_bytes());
        raw.extend_from_slice(&self.millis_in_month.to_be_bytes());
        raw.extend_from_slice(&self.counter.to_be_bytes());
        hex::encode_upper(raw)
    }

    /// Parses a key; the host's address family is taken from the length.
    ///
    /// # Errors
    /// [`IdError`] when the length or the digits are wrong.
    pub fn decode(id: &str) -> Result<Self, IdError> {
        let raw = decode_hex(id, Self::IPV4_LEN, Self::IPV6_LEN)?;
        let ip_len = raw.len() - 12;
        let rest = &raw[ip_len..];
        Ok(Self {
            ip: read_ip(&raw[..ip_len]),
            pid: i16::from_be_bytes(array(&rest[0..2])),
            discriminator: i32::from_be_bytes(array(&rest[2..6])),
            millis_in_month: i32::from_be_bytes(array(&rest[6..10])),
            counter: i16::from_be_bytes(array(&rest[10..12])),
        })
    }
}

impl std::fmt::Display for UniqueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.encode())
    }
}

/// Makes [`UniqueKey`]s for one process; safe to share between threads.
#[derive(Debug)]
pub struct UniqueIdGenerator {
    ip: IpAddr,
    pid: i16,
    discriminator: i32,
    counter: AtomicU32,
}

impl UniqueIdGenerator {
    /// Creates a generator for a host address, a process id and a value that
    /// tells this generator apart from others in the same process.
    pub fn new(ip: IpAddr, pid: u32, discriminator: i32) -> Self {
        Self {
            ip,
            // Only the low 16 bits of the pid fit in the id.
            pid: pid as u16 as i16,
            discriminator,
            counter: AtomicU32::new(0),
        }
    }

    /// Makes the next key, stamped with the current time.
    pub fn next_key(&self) -> UniqueKey {
        self.next_key_at(u64::try_from(crate::now_ms()).unwrap_or(0))
    }

    /// Makes the next key, stamped with `now_ms` (milliseconds since the Unix epoch).
    pub fn next_key_at(&self, now_ms: u64) -> UniqueKey {
        let counter = self.counter.fetch_add(1, Ordering::Relaxed);
        UniqueKey {
            ip: self.ip,
            pid: self.pid,
            discriminator: self.discriminator,
            // A month has at most 31 days = 2_678_400_000 ms, which wraps an
            // i32 exactly as the Java implementation does.
            millis_in_month: (now_ms - start_of_month_ms(now_ms)) as u32 as i32,
            counter: counter as u16 as i16,
        }
    }
}

/// Returns the instant (ms since the Unix epoch) at which the UTC month
/// containing `now_ms` began.
pub fn start_of_month_ms(now_ms: u64) -> u64 {
    const DAY_MS: u64 = 86_400_000;
    let days = now_ms / DAY_MS;
    let (_, _, day) = civil_from_days(days);
    (days - (day - 1)) * DAY_MS
}

/// Converts days since 1970-01-01 to a (year, month, day) civil date.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

fn push_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => out.extend_from_slice(&v4.octets()),
        IpAddr::V6(v6) => out.extend_from_slice(&v6.octets()),
    }
}

fn read_ip(raw: &[u8]) -> IpAddr {
    match raw.len() {
        4 => IpAddr::V4(Ipv4Addr::from(array::<4>(raw))),
        _ => IpAddr::V6(Ipv6Addr::from(array::<16>(raw))),
    }
}

fn decode_hex(id: &str, ipv4: usize, ipv6: usize) -> Result<Vec<u8>, IdError> {
    if id.len() != ipv4 && id.len() != ipv6 {
        return Err(IdError::BadLength {
            id: id.to_owned(),
            len: id.len(),
            ipv4,
            ipv6,
        });
    }
    hex::decode(id).map_err(|_| IdError::NotHex { id: id.to_owned() })
}

/// Copies a slice whose length the caller has already checked.
fn array<const N: usize>(raw: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&raw[..N]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn offset_id_layout_matches_rocketmq() {
        let id = MessageId::new("10.0.0.1:10911".parse().unwrap(), 0x1234);
        // 0A000001 (ip) 00002A9F (port 10911) 0000000000001234 (offset)
        assert_eq!(id.encode(), "0A00000100002A9F0000000000001234");
        assert_eq!(MessageId::decode(&id.encode()).unwrap(), id);
    }

    #[test]
    fn offset_id_for_ipv6_host_is_56_characters() {
        let id = MessageId::new("[::1]:10911".parse().unwrap(), 7);
        assert_eq!(id.encode().len(), MessageId::IPV6_LEN);
        assert_eq!(MessageId::decode(&id.encode()).unwrap(), id);
    }

    #[test]
    fn bad_ids_are_refused_with_a_reason() {
        assert!(matches!(
            MessageId::decode("ABC"),
            Err(IdError::BadLength { len: 3, .. })
        ));
        let not_hex = "Z".repeat(32);
        assert!(matches!(
            MessageId::decode(&not_hex),
            Err(IdError::NotHex { .. })
        ));
    }

    #[test]
    fn unique_key_layout_matches_rocketmq() {
        let key = UniqueKey {
            ip: "192.168.1.2".parse().unwrap(),
            pid: 0x1234,
            discriminator: 0x0BADBEEF,
            millis_in_month: 1000,
            counter: 5,
        };
        assert_eq!(key.encode(), "C0A8010212340BADBEEF000003E80005");
        assert_eq!(UniqueKey::decode(&key.encode()).unwrap(), key);
    }

    #[test]
    fn start_of_month_is_midnight_of_day_one() {
        // 2026-12-01T02:04:25Z and 2024-02-29T12:00:00Z.
        assert_eq!(start_of_month_ms(1_796_091_865_000), 1_796_083_200_000);
        assert_eq!(start_of_month_ms(1_709_208_000_000), 1_706_745_600_000);
    }

    #[test]
    fn generator_counts_and_stamps_time_in_month() {
        let g = UniqueIdGenerator::new(Ipv4Addr::LOCALHOST.into(), 0x1_0042, 9);
        let a = g.next_key_at(1_796_083_200_000 + 1500);
        let b = g.next_key_at(1_796_083_200_000 + 1500);
        assert_eq!(a.pid, 0x42);
        assert_eq!(a.millis_in_month, 1500);
        assert_eq!(b.counter, a.counter + 1);
        assert_ne!(a.encode(), b.encode());
    }

    proptest! {
        #[test]
        fn ids_round_trip(ip in any::<IpAddr>(), port in any::<u16>(), off in any::<i64>(),
                          pid in any::<i16>(), d in any::<i32>(), t in any::<i32>(), c in any::<i16>()) {
            let id = MessageId::new(SocketAddr::new(ip, port), off);
            prop_assert_eq!(MessageId::decode(&id.encode()).unwrap(), id);
            let key = UniqueKey { ip, pid, discriminator: d, millis_in_month: t, counter: c };
            prop_assert_eq!(UniqueKey::decode(&key.encode()).unwrap(), key);
        }
    }
}
