//! The time budget of one call, however many requests it makes.

use std::time::{Duration, Instant};

use crate::CallError;

/// When a call started, when it must end, and its whole budget.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    /// When the budget started.
    pub start: Instant,
    /// When it runs out.
    pub at: Instant,
    /// The whole budget.
    pub timeout: Duration,
}

impl Deadline {
    /// A budget of `timeout` from now.
    pub fn new(timeout: Duration) -> Self {
        let start = Instant::now();
        Self {
            start,
            at: start + timeout,
            timeout,
        }
    }

    /// What is left of the budget (zero once it ran out).
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// The whole budget in ms.
    pub fn timeout_ms(&self) -> u64 {
        millis(self.timeout)
    }

    /// How long the call has taken so far, in ms.
    pub fn elapsed_ms(&self) -> u64 {
        millis(self.start.elapsed())
    }

    /// The error of a call whose budget ran out, waiting on `addr` if a
    /// request was under way.
    pub fn timed_out(&self, addr: Option<&str>) -> CallError {
        CallError::Timeout {
            timeout_ms: self.timeout_ms(),
            addr: addr.map(str::to_owned),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expired_budget_has_nothing_left_and_names_its_size() {
        let d = Deadline::new(Duration::ZERO);
        assert_eq!(d.remaining(), Duration::ZERO);
        let e = d.timed_out(Some("h:1"));
        assert!(matches!(
            e,
            CallError::Timeout { timeout_ms: 0, addr: Some(ref a) } if a == "h:1"
        ));
        assert!(Deadline::new(Duration::from_secs(60)).remaining() > Duration::from_secs(59));
    }
}
