//! The open-loop schedule: request `i` is due `i / rate` seconds after the
//! start, whatever became of the requests before it.

use std::time::Duration;

use tokio::time::Instant;

/// Fixed-interval send times from a start instant.
#[derive(Debug, Clone, Copy)]
pub struct Schedule {
    start: Instant,
    rate_per_sec: f64,
}

impl Schedule {
    /// A schedule of `rate_per_sec` requests a second from `start`; the
    /// rate must be finite and above zero (see [`crate::Mode::validate`]).
    pub fn new(start: Instant, rate_per_sec: f64) -> Self {
        Self {
            start,
            rate_per_sec,
        }
    }

    /// When request `index` is due, or `None` if that lies beyond what an
    /// `Instant` can hold (it is never due).
    pub fn at(&self, index: u64) -> Option<Instant> {
        self.start.checked_add(offset(index, self.rate_per_sec))
    }
}

/// How long after the start request `index` is due at `rate_per_sec`.
/// Computed from the index, not by adding intervals, so rounding does not
/// accumulate over a long run.
pub fn offset(index: u64, rate_per_sec: f64) -> Duration {
    let secs = index as f64 / rate_per_sec;
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_spaced_by_the_inverse_of_the_rate() {
        assert_eq!(offset(0, 1000.0), Duration::ZERO);
        assert_eq!(offset(1, 1000.0), Duration::from_millis(1));
        assert_eq!(offset(2500, 1000.0), Duration::from_millis(2500));
        assert_eq!(offset(1, 0.5), Duration::from_secs(2));
        assert_eq!(offset(3, 4.0), Duration::from_millis(750));
    }

    #[test]
    fn offsets_do_not_drift_over_a_long_run() {
        // A day at 100k/s: adding 10 µs steps would be off by far more.
        let index = 100_000 * 86_400;
        let drift = offset(index, 100_000.0).abs_diff(Duration::from_secs(86_400));
        assert!(drift < Duration::from_micros(1), "drift {drift:?}");
    }

    #[test]
    fn schedule_times_count_from_its_start() {
        let start = Instant::now();
        let schedule = Schedule::new(start, 200.0);
        assert_eq!(schedule.at(0), Some(start));
        assert_eq!(
            schedule.at(3).map(|t| t - start),
            Some(Duration::from_millis(15))
        );
    }

    #[test]
    fn an_unreachable_index_saturates_instead_of_panicking() {
        assert_eq!(offset(u64::MAX, 1e-300), Duration::MAX);
        assert_eq!(Schedule::new(Instant::now(), 1e-300).at(u64::MAX), None);
    }
}
