//! Quotas: token buckets that limit a key (a topic, a client) to a rate of
//! messages and of bytes per second, and tell a refused caller when its
//! tokens will be back.
//!
//! A bucket holds at most one second of its rate (its burst) and starts
//! full. A request takes as many tokens as it carries messages (or bytes).
//! One larger than the whole burst is let through once the bucket is full,
//! leaving it in debt, so that no size is refused forever; later requests
//! wait until the debt is paid.
//!
//! Pure policy like the rest of the crate: callers pass the instant.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

/// A rate limit in units per second, with a burst of one second's worth.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl TokenBucket {
    /// A full bucket refilling at `rate_per_sec` (at least one unit per
    /// second).
    pub fn new(rate_per_sec: u64, now: Instant) -> Self {
        let rate = rate_per_sec.max(1) as f64;
        Self {
            rate,
            tokens: rate,
            last: now,
        }
    }

    /// The rate, in units per second.
    pub fn rate(&self) -> u64 {
        self.rate as u64
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.rate);
        self.last = self.last.max(now);
    }

    /// How long until `n` units may be taken: zero when they may be now.
    pub fn wait_for(&mut self, n: u64, now: Instant) -> Duration {
        self.refill(now);
        let needed = (n as f64).min(self.rate);
        if self.tokens >= needed {
            Duration::ZERO
        } else {
            Duration::from_secs_f64((needed - self.tokens) / self.rate)
        }
    }

    /// Takes `n` units; call only after [`TokenBucket::wait_for`] said zero
    /// at the same instant.
    pub fn take(&mut self, n: u64, now: Instant) {
        self.refill(now);
        self.tokens -= n as f64;
    }

    /// Gives back `n` units taken for a request that was refused after all
    /// (the bucket never holds more than one second's worth).
    pub fn give_back(&mut self, n: u64, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens + n as f64).min(self.rate);
    }

    /// Takes `n` units if they may be taken now; otherwise how long until
    /// they may.
    ///
    /// # Errors
    /// The wait, when the bucket has too few tokens now.
    pub fn try_take(&mut self, n: u64, now: Instant) -> Result<(), Duration> {
        match self.wait_for(n, now) {
            Duration::ZERO => {
                self.take(n, now);
                Ok(())
            }
            wait => Err(wait),
        }
    }
}

/// What one key may send: messages and bytes per second, each optional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quota {
    /// Most messages per second.
    pub messages_per_sec: Option<u64>,
    /// Most bytes (bodies and properties) per second.
    pub bytes_per_sec: Option<u64>,
}

/// Which limit of a quota refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaUnit {
    /// The messages-per-second limit.
    Messages,
    /// The bytes-per-second limit.
    Bytes,
}

impl QuotaUnit {
    /// The unit as a remark and metric label write it.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaUnit::Messages => "messages",
            QuotaUnit::Bytes => "bytes",
        }
    }
}

/// Whose quota refused a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QuotaScope {
    /// The topic's (`topicQuotas`).
    Topic,
    /// The sending client's (`clientQuotas`).
    Client,
}

impl QuotaScope {
    /// The scope as a remark and metric label write it.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaScope::Topic => "topic",
            QuotaScope::Client => "client",
        }
    }
}

/// A request over its quota: which limit, its rate, and when the tokens it
/// needs will be back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverQuota {
    /// The limit that refused it.
    pub unit: QuotaUnit,
    /// That limit, per second.
    pub limit: u64,
    /// How long until the request would be let through, in whole
    /// milliseconds rounded up.
    pub retry_after: Duration,
}

#[derive(Debug)]
struct Limiter {
    quota: Quota,
    messages: Option<TokenBucket>,
    bytes: Option<TokenBucket>,
}

impl Limiter {
    fn new(quota: Quota, now: Instant) -> Self {
        Self {
            quota,
            messages: quota.messages_per_sec.map(|r| TokenBucket::new(r, now)),
            bytes: quota.bytes_per_sec.map(|r| TokenBucket::new(r, now)),
        }
    }

    /// Takes from both buckets, or from neither.
    fn admit(&mut self, messages: u64, bytes: u64, now: Instant) -> Result<(), OverQuota> {
        let mut refusal: Option<OverQuota> = None;
        for (bucket, n, unit) in [
            (&mut self.messages, messages, QuotaUnit::Messages),
            (&mut self.bytes, bytes, QuotaUnit::Bytes),
        ] {
            if let Some(b) = bucket {
                let wait = b.wait_for(n, now);
                if wait > refusal.map_or(Duration::ZERO, |r| r.retry_after) {
                    refusal = Some(OverQuota {
                        unit,
                        limit: b.rate(),
                        // In whole milliseconds, rounded up: a caller that
                        // waits what it is told finds its tokens back.
                        retry_after: Duration::from_millis(
                            u64::try_from(wait.as_micros().div_ceil(1000)).unwrap_or(u64::MAX),
                        ),
                    });
                }
            }
        }
        if let Some(r) = refusal {
            return Err(r);
        }
        if let Some(b) = &mut self.messages {
            b.take(messages, now);
        }
        if let Some(b) = &mut self.bytes {
            b.take(bytes, now);
        }
        Ok(())
    }

    fn give_back(&mut self, messages: u64, bytes: u64, now: Instant) {
        if let Some(b) = &mut self.messages {
            b.give_back(messages, now);
        }
        if let Some(b) = &mut self.bytes {
            b.give_back(bytes, now);
        }
    }
}

/// The quotas of many keys (topics, clients), changeable at run time.
#[derive(Debug, Default)]
pub struct Quotas {
    limiters: Mutex<HashMap<String, Limiter>>,
    /// How many keys have a quota, readable without the lock.
    count: AtomicUsize,
}

impl Quotas {
    /// No quotas.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Limiter>> {
        self.limiters.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets (or, with an empty quota, removes) the quota of `key`. A changed
    /// quota starts with full buckets.
    pub fn set(&self, key: &str, quota: Quota, now: Instant) {
        let mut limiters = self.lock();
        set_in(&mut limiters, key, quota, now);
        self.count.store(limiters.len(), Ordering::Release);
    }

    /// Makes `entries` the whole set of quotas: keys not in it lose theirs,
    /// and unchanged quotas keep their buckets.
    pub fn replace(&self, entries: &[(String, Quota)], now: Instant) {
        let mut limiters = self.lock();
        limiters.retain(|k, _| entries.iter().any(|(e, _)| e == k));
        for (key, quota) in entries {
            set_in(&mut limiters, key, *quota, now);
        }
        self.count.store(limiters.len(), Ordering::Release);
    }

    /// The quota of `key`, if it has one.
    pub fn get(&self, key: &str) -> Option<Quota> {
        self.lock().get(key).map(|l| l.quota)
    }

    /// Every key with a quota, and its quota, by key.
    pub fn all(&self) -> Vec<(String, Quota)> {
        let mut out: Vec<(String, Quota)> = self
            .lock()
            .iter()
            .map(|(k, l)| (k.clone(), l.quota))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Whether no key has a quota (the broker's fast path: one atomic
    /// read, no lock).
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Acquire) == 0
    }

    /// Lets a request of `messages` messages and `bytes` bytes for `key`
    /// through, taking its tokens, or says which limit refuses it and for
    /// how long. A key without a quota is always let through.
    ///
    /// # Errors
    /// [`OverQuota`] when the key is over a limit now; nothing is taken.
    pub fn admit(
        &self,
        key: &str,
        messages: u64,
        bytes: u64,
        now: Instant,
    ) -> Result<(), OverQuota> {
        match self.lock().get_mut(key) {
            Some(limiter) => limiter.admit(messages, bytes, now),
            None => Ok(()),
        }
    }

    /// Gives back what [`Quotas::admit`] took for a request that another
    /// limit then refused.
    pub fn give_back(&self, key: &str, messages: u64, bytes: u64, now: Instant) {
        if let Some(limiter) = self.lock().get_mut(key) {
            limiter.give_back(messages, bytes, now);
        }
    }
}

fn set_in(limiters: &mut HashMap<String, Limiter>, key: &str, quota: Quota, now: Instant) {
    if quota == Quota::default() {
        limiters.remove(key);
    } else if limiters.get(key).is_none_or(|l| l.quota != quota) {
        limiters.insert(key.to_owned(), Limiter::new(quota, now));
    }
}

/// Reads a list of quotas: `key=limit[,limit]` entries separated by `;`,
/// where a limit is `N/s` (messages per second) or `N B/s`, `N KiB/s`,
/// `N MiB/s` (bytes per second); spaces are ignored, and an empty text is
/// no quota. Example: `Orders=500/s; Logs=2000/s,4MiB/s`.
///
/// # Errors
/// A text naming the entry that cannot be read and why.
pub fn parse_quotas(text: &str) -> Result<Vec<(String, Quota)>, String> {
    let mut out: Vec<(String, Quota)> = Vec::new();
    for entry in text.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (key, limits) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}` is not key=limit"))?;
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("`{entry}` has no key"));
        }
        if out.iter().any(|(k, _)| k == key) {
            return Err(format!("`{key}` has two quotas"));
        }
        let mut quota = Quota::default();
        for limit in limits.split(',') {
            let compact: String = limit.chars().filter(|c| !c.is_whitespace()).collect();
            let (number, unit) = compact
                .find(|c: char| !c.is_ascii_digit())
                .map_or((compact.as_str(), ""), |at| compact.split_at(at));
            let n: u64 = number.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                format!("`{limit}` in `{entry}` is not a positive number per second")
            })?;
            let (slot, factor) = match unit {
                "/s" => (&mut quota.messages_per_sec, 1),
                "B/s" => (&mut quota.bytes_per_sec, 1),
                "KiB/s" => (&mut quota.bytes_per_sec, 1 << 10),
                "MiB/s" => (&mut quota.bytes_per_sec, 1 << 20),
                _ => {
                    return Err(format!(
                        "`{limit}` in `{entry}`: the unit must be /s, B/s, KiB/s or MiB/s"
                    ))
                }
            };
            if slot.is_some() {
                return Err(format!("`{entry}` sets the same limit twice"));
            }
            *slot = Some(n.saturating_mul(factor));
        }
        out.push((key.to_owned(), quota));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn tokens_given_back_are_available_again_up_to_the_burst() {
        let t0 = Instant::now();
        let q = Quotas::new();
        q.set(
            "T",
            Quota {
                messages_per_sec: Some(2),
                bytes_per_sec: None,
            },
            t0,
        );
        q.admit("T", 2, 0, t0).unwrap();
        assert!(q.admit("T", 1, 0, t0).is_err());
        q.give_back("T", 1, 0, t0);
        q.admit("T", 1, 0, t0).unwrap();
        // Never more than the burst.
        q.give_back("T", 10, 0, t0);
        q.admit("T", 2, 0, t0).unwrap();
        assert!(q.admit("T", 1, 0, t0).is_err());
    }

    #[test]
    fn a_bucket_lets_its_burst_through_then_tells_when_to_come_back() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(100, t0);
        for _ in 0..100 {
            b.try_take(1, t0).unwrap();
        }
        assert_eq!(b.try_take(1, t0), Err(ms(10)));
        // 10 ms later exactly one token is back.
        b.try_take(1, t0 + ms(10)).unwrap();
        assert_eq!(b.try_take(1, t0 + ms(10)), Err(ms(10)));
        // The burst never grows past one second's worth.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..100 {
            b.try_take(1, later).unwrap();
        }
        assert!(b.try_take(1, later).is_err());
    }

    #[test]
    fn a_request_larger_than_the_burst_waits_for_a_full_bucket_then_leaves_debt() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(1000, t0);
        b.try_take(500, t0).unwrap();
        // 3000 needs the whole burst: 500 tokens short.
        assert_eq!(b.try_take(3000, t0), Err(ms(500)));
        b.try_take(3000, t0 + ms(500)).unwrap();
        // 2000 in debt: one unit is 2.001 s away.
        assert_eq!(b.try_take(1, t0 + ms(500)), Err(ms(2001)));
    }

    #[test]
    fn a_quota_takes_from_both_buckets_or_neither_and_names_the_limit() {
        let t0 = Instant::now();
        let quotas = Quotas::new();
        assert!(quotas.is_empty());
        assert_eq!(quotas.admit("T", 1, 10, t0), Ok(()), "no quota, no limit");
        quotas.set(
            "T",
            Quota {
                messages_per_sec: Some(10),
                bytes_per_sec: Some(1000),
            },
            t0,
        );
        // Bytes run out first: 2 messages of 500 bytes.
        quotas.admit("T", 1, 500, t0).unwrap();
        quotas.admit("T", 1, 500, t0).unwrap();
        let refused = quotas.admit("T", 1, 500, t0).unwrap_err();
        assert_eq!(refused.unit, QuotaUnit::Bytes);
        assert_eq!(refused.limit, 1000);
        assert_eq!(refused.retry_after, ms(500));
        // The refusal took no message tokens: 8 one-byte messages still fit.
        for _ in 0..8 {
            quotas.admit("T", 1, 0, t0).unwrap();
        }
        let refused = quotas.admit("T", 1, 0, t0).unwrap_err();
        assert_eq!((refused.unit, refused.limit), (QuotaUnit::Messages, 10));
        assert_eq!(refused.retry_after, ms(100));
        // Removing the quota lets everything through.
        quotas.set("T", Quota::default(), t0);
        assert!(quotas.is_empty());
        assert_eq!(quotas.admit("T", 1000, 1 << 30, t0), Ok(()));
    }

    #[test]
    fn quota_lists_read_as_documented_and_errors_name_the_entry() {
        let q = parse_quotas(" Orders=500/s; Logs = 2000/s, 4 MiB/s ;Raw=100B/s;").unwrap();
        assert_eq!(
            q,
            vec![
                (
                    "Orders".to_owned(),
                    Quota {
                        messages_per_sec: Some(500),
                        bytes_per_sec: None
                    }
                ),
                (
                    "Logs".to_owned(),
                    Quota {
                        messages_per_sec: Some(2000),
                        bytes_per_sec: Some(4 << 20)
                    }
                ),
                (
                    "Raw".to_owned(),
                    Quota {
                        messages_per_sec: None,
                        bytes_per_sec: Some(100)
                    }
                ),
            ]
        );
        assert_eq!(parse_quotas("").unwrap(), vec![]);
        for (bad, says) in [
            ("Orders", "not key=limit"),
            ("=5/s", "no key"),
            ("A=0/s", "positive number"),
            ("A=5/min", "the unit must be"),
            ("A=5/s,6/s", "same limit twice"),
            ("A=5/s;A=6/s", "two quotas"),
        ] {
            let err = parse_quotas(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn replacing_the_quotas_keeps_unchanged_buckets_and_drops_missing_keys() {
        let t0 = Instant::now();
        let quotas = Quotas::new();
        let one = |n| Quota {
            messages_per_sec: Some(n),
            bytes_per_sec: None,
        };
        quotas.replace(&[("A".into(), one(1)), ("B".into(), one(1))], t0);
        quotas.admit("A", 1, 0, t0).unwrap();
        quotas.replace(&[("A".into(), one(1)), ("C".into(), one(5))], t0);
        assert!(
            quotas.admit("A", 1, 0, t0).is_err(),
            "A kept its empty bucket"
        );
        assert_eq!(quotas.get("B"), None);
        assert_eq!(quotas.all().len(), 2);
    }

    proptest! {
        /// Over any span, a bucket admits at most its burst plus its rate
        /// times the span, and a caller that retries exactly when told
        /// is admitted then.
        #[test]
        fn admitted_units_never_exceed_burst_plus_rate(
            rate in 1u64..5_000,
            steps in proptest::collection::vec((0u64..50, 1u64..20), 1..300),
        ) {
            let t0 = Instant::now();
            let mut b = TokenBucket::new(rate, t0);
            let mut now = t0;
            let mut admitted = 0u64;
            for (advance_ms, n) in steps {
                now += ms(advance_ms);
                match b.try_take(n, now) {
                    Ok(()) => admitted += n,
                    Err(wait) => {
                        prop_assert!(wait > Duration::ZERO);
                        // Retrying when told succeeds (float rounding aside).
                        let at = now + wait + Duration::from_micros(1);
                        prop_assert!(b.clone().try_take(n, at).is_ok());
                    }
                }
            }
            let span = now.duration_since(t0).as_secs_f64();
            let bound = rate as f64 + rate as f64 * span + 20.0;
            prop_assert!(admitted as f64 <= bound, "{admitted} > {bound}");
        }
    }
}
