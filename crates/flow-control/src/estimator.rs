//! The recent service time of a queue's tasks, and the queue wait it
//! predicts for a newcomer.
//!
//! # The estimate
//! An exponentially weighted moving average with weight [`ALPHA_DENOM`]⁻¹
//! (1/8) for each new sample: `avg += (sample - avg) / 8`. With that weight a
//! sample's influence halves after about five further samples, so the
//! estimate follows a slowing store within tens of tasks yet one stray slow
//! task moves it by only an eighth. The first sample is taken as the average
//! itself, so there is no warm-up bias towards zero.
//!
//! Service times are heavy-tailed: an append that creates a CommitLog file
//! or meets a page fault storm takes milliseconds where the usual one takes
//! microseconds. Taken at face value, one such sample would multiply the
//! average a hundredfold and, with the queue that built up during the stall,
//! predict waits of hundreds of milliseconds that the queue actually drains
//! in a few: early admission would refuse sends it could serve. So a sample
//! counts as at most [`GROWTH_CAP`] times the current average (the average
//! then grows by at most 3/8 per sample, and follows a store that really
//! slowed down a hundredfold within about fifteen tasks), and never more
//! than [`MAX_SAMPLE`].
//!
//! Updates are lock-free (a compare-and-swap on one `AtomicU64` of
//! nanoseconds), so workers can record after every task.

use std::{
    sync::atomic::{AtomicU64, Ordering},
    time::Duration,
};

/// The inverse of the smoothing weight given to each new sample.
pub const ALPHA_DENOM: u64 = 8;

/// Samples longer than this count as this long.
pub const MAX_SAMPLE: Duration = Duration::from_secs(10);

/// A sample counts as at most this many times the current average.
pub const GROWTH_CAP: u64 = 4;

/// Stored value meaning "no sample yet"; a real average is stored as at
/// least 1 ns.
const NONE: u64 = 0;

/// A moving average of how long a task takes to serve.
#[derive(Debug, Default)]
pub struct ServiceTimeEstimator {
    avg_nanos: AtomicU64,
}

impl ServiceTimeEstimator {
    /// An estimator without samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds one measured service time into the average.
    pub fn record(&self, sample: Duration) {
        let sample = nanos(sample.min(MAX_SAMPLE)).max(1);
        // The closure always returns Some, so fetch_update cannot fail.
        let _ = self
            .avg_nanos
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                Some(if old == NONE {
                    sample
                } else {
                    blend(old, sample.min(old.saturating_mul(GROWTH_CAP)))
                })
            });
    }

    /// The current average, or `None` before the first sample.
    pub fn average(&self) -> Option<Duration> {
        match self.avg_nanos.load(Ordering::Relaxed) {
            NONE => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// The wait a task joining a queue of `queue_len` tasks served by
    /// `workers` threads can expect: `queue_len * average / workers`.
    ///
    /// `None` before the first sample. Zero workers count as one, so a
    /// misconfigured pool yields a finite prediction rather than refusing
    /// everything.
    pub fn predict_wait(&self, queue_len: usize, workers: usize) -> Option<Duration> {
        let avg = u128::from(self.avg_nanos.load(Ordering::Relaxed));
        if avg == u128::from(NONE) {
            return None;
        }
        let workers = workers.max(1) as u128;
        let wait = (queue_len as u128).saturating_mul(avg) / workers;
        Some(Duration::from_nanos(
            u64::try_from(wait).unwrap_or(u64::MAX),
        ))
    }
}

/// `old + (sample - old) / ALPHA_DENOM`, in integers, never below 1 ns.
fn blend(old: u64, sample: u64) -> u64 {
    let old = i128::from(old);
    let next = old + (i128::from(sample) - old) / i128::from(ALPHA_DENOM);
    u64::try_from(next.max(1)).unwrap_or(u64::MAX)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn no_samples_means_no_estimate_and_no_prediction() {
        let e = ServiceTimeEstimator::new();
        assert_eq!(e.average(), None);
        assert_eq!(e.predict_wait(10_000, 1), None);
    }

    #[test]
    fn first_sample_becomes_the_average() {
        let e = ServiceTimeEstimator::new();
        e.record(us(80));
        assert_eq!(e.average(), Some(us(80)));
    }

    #[test]
    fn average_moves_an_eighth_towards_each_sample() {
        let e = ServiceTimeEstimator::new();
        e.record(us(100));
        e.record(us(180));
        assert_eq!(e.average(), Some(us(110)));
    }

    #[test]
    fn average_converges_to_a_steady_service_time() {
        let e = ServiceTimeEstimator::new();
        e.record(us(1));
        for _ in 0..200 {
            e.record(us(500));
        }
        let avg = e.average().unwrap();
        assert!(avg > us(499) && avg <= us(500), "{avg:?}");
    }

    #[test]
    fn one_absurd_sample_is_clamped() {
        let e = ServiceTimeEstimator::new();
        e.record(Duration::from_secs(1));
        e.record(Duration::from_secs(3600));
        let avg = e.average().unwrap();
        assert!(avg <= Duration::from_secs(1) + MAX_SAMPLE / 8, "{avg:?}");
    }

    #[test]
    fn one_stall_moves_the_average_by_at_most_three_eighths() {
        let e = ServiceTimeEstimator::new();
        e.record(us(16));
        e.record(Duration::from_millis(20));
        assert_eq!(e.average(), Some(us(16 + 6)));
        // The queue that built up during the stall is predicted to drain
        // in milliseconds, not refused.
        assert!(e.predict_wait(400, 2).unwrap() < Duration::from_millis(5));
    }

    #[test]
    fn a_store_that_really_slowed_is_followed_within_tens_of_tasks() {
        let e = ServiceTimeEstimator::new();
        e.record(us(10));
        let mut tasks = 0;
        while e.average().unwrap() < us(900) {
            e.record(us(1000));
            tasks += 1;
            assert!(tasks <= 40, "still {:?} after {tasks}", e.average());
        }
        assert!(tasks >= 10, "grew too fast: {tasks} tasks");
    }

    #[test]
    fn a_zero_sample_still_counts_as_an_estimate() {
        let e = ServiceTimeEstimator::new();
        e.record(Duration::ZERO);
        assert_eq!(e.average(), Some(Duration::from_nanos(1)));
    }

    #[test]
    fn prediction_is_length_times_average_over_workers() {
        let e = ServiceTimeEstimator::new();
        e.record(us(100));
        assert_eq!(e.predict_wait(4000, 4), Some(Duration::from_millis(100)));
        assert_eq!(e.predict_wait(0, 4), Some(Duration::ZERO));
        assert_eq!(e.predict_wait(10, 0), Some(Duration::from_millis(1)));
    }
}
