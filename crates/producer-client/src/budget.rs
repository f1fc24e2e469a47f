//! Retries that do not cause storms: the busy-retry budget (a token bucket
//! fed by first attempts) and the jittered exponential back-off.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// Tokens the bucket holds at most, and starts with: the burst of busy
/// retries allowed beyond the steady `budget_ratio` share.
pub const RETRY_BUDGET_CAP_TOKENS: u64 = 10;

/// Fixed-point scale: the bucket counts thousandths of a token.
const MILLI: u64 = 1000;

/// A token bucket: every send deposits `ratio` tokens, every busy retry
/// withdraws one. Busy retries therefore add at most `ratio` extra requests
/// per send in the long run, plus a burst of [`RETRY_BUDGET_CAP_TOKENS`].
#[derive(Debug)]
pub(crate) struct RetryBudget {
    milli_tokens: AtomicU64,
    deposit: u64,
    cap: u64,
}

impl RetryBudget {
    /// A full bucket fed `ratio` tokens per send.
    pub(crate) fn new(ratio: f64) -> Self {
        let cap = RETRY_BUDGET_CAP_TOKENS * MILLI;
        Self {
            milli_tokens: AtomicU64::new(cap),
            // The ratio is validated to 0..=1, so this is 0..=1000.
            deposit: (ratio.clamp(0.0, 1.0) * MILLI as f64).round() as u64,
            cap,
        }
    }

    /// Credits one send.
    pub(crate) fn deposit(&self) {
        let _ = self
            .milli_tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some((t + self.deposit).min(self.cap))
            });
    }

    /// Takes a token for a busy retry; false when the bucket has less than one.
    pub(crate) fn try_withdraw(&self) -> bool {
        self.milli_tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                t.checked_sub(MILLI)
            })
            .is_ok()
    }

    /// Tokens left.
    #[cfg(test)]
    fn tokens(&self) -> f64 {
        self.milli_tokens.load(Ordering::Relaxed) as f64 / MILLI as f64
    }
}

/// The pause before the `retry`-th busy retry (from 0): drawn uniformly from
/// `[0, min(max, base * 2^retry)]` ("full jitter", so that clients that
/// were refused together do not come back together), and never shorter than
/// the broker's hint. `unit` is a uniform random number in `[0, 1)`.
pub(crate) fn backoff(
    base: Duration,
    max: Duration,
    retry: u32,
    hint: Option<Duration>,
    unit: f64,
) -> Duration {
    let ceiling = base
        .checked_mul(1_u32.checked_shl(retry).unwrap_or(u32::MAX))
        .unwrap_or(max)
        .min(max);
    let jittered = ceiling.mul_f64(unit.clamp(0.0, 1.0));
    jittered.max(hint.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_bucket_allows_a_burst_then_the_ratio() {
        let budget = RetryBudget::new(0.1);
        for _ in 0..RETRY_BUDGET_CAP_TOKENS {
            assert!(budget.try_withdraw());
        }
        assert!(!budget.try_withdraw());
        for _ in 0..9 {
            budget.deposit();
        }
        assert!(!budget.try_withdraw(), "0.9 tokens is not a retry");
        budget.deposit();
        assert!(budget.try_withdraw());
        assert!(budget.tokens().abs() < 1e-9);
    }

    #[test]
    fn deposits_stop_at_the_cap() {
        let budget = RetryBudget::new(1.0);
        for _ in 0..100 {
            budget.deposit();
        }
        assert!((budget.tokens() - RETRY_BUDGET_CAP_TOKENS as f64).abs() < 1e-9);
        let none = RetryBudget::new(0.0);
        for _ in 0..RETRY_BUDGET_CAP_TOKENS {
            assert!(none.try_withdraw());
        }
        none.deposit();
        assert!(!none.try_withdraw());
    }

    #[test]
    fn backoff_ceiling_doubles_up_to_the_cap() {
        let base = Duration::from_millis(50);
        let max = Duration::from_secs(2);
        let top = |retry| backoff(base, max, retry, None, 1.0);
        assert_eq!(top(0), Duration::from_millis(50));
        assert_eq!(top(1), Duration::from_millis(100));
        assert_eq!(top(5), Duration::from_millis(1600));
        assert_eq!(top(6), max);
        assert_eq!(top(40), max);
        assert_eq!(backoff(base, max, 3, None, 0.0), Duration::ZERO);
        assert_eq!(backoff(base, max, 3, None, 0.5), Duration::from_millis(200));
    }

    #[test]
    fn the_brokers_hint_is_the_lower_bound() {
        let base = Duration::from_millis(50);
        let max = Duration::from_secs(2);
        let hint = Some(Duration::from_millis(300));
        assert_eq!(backoff(base, max, 0, hint, 0.9), Duration::from_millis(300));
        assert_eq!(backoff(base, max, 4, hint, 0.5), Duration::from_millis(400));
    }
}
