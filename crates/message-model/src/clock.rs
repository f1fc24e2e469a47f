//! The wall clock that born and store timestamps are read from:
//! milliseconds since the Unix epoch, as RocketMQ's
//! `System.currentTimeMillis()`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; 0 if the clock is before it.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn now_is_in_milliseconds_after_2020() {
        let now = now_ms();
        // 2020-01-01 in ms, and the same instant in µs as an upper bound.
        assert!(now > 1_577_836_800_000, "{now}");
        assert!(now < 1_577_836_800_000_000, "{now}");
    }
}
