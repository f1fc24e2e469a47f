//! The producer's counters: sends, outcomes by kind, retries and the retry
//! budget's refusals. Atomics only, so counting costs no lock.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ProducerError;

/// A snapshot of the producer's counters since it started.
///
/// Outcomes are counted once per send (a batch is one send), by the error
/// the caller got; `attempts` and the retry counters count every request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Sends started (sync, async, oneway, to a queue, batch).
    pub sends: u64,
    /// Requests written to brokers, retries included.
    pub attempts: u64,
    /// Sends that succeeded (for oneway: were handed to the connection).
    pub succeeded: u64,
    /// Sends that failed with [`ProducerError::Timeout`].
    pub failed_timeout: u64,
    /// Sends that failed with [`ProducerError::TooManyRequests`].
    pub failed_too_many_requests: u64,
    /// Sends that failed with a `SYSTEM_BUSY` answer.
    pub failed_busy: u64,
    /// Sends that failed with any other broker answer.
    pub failed_broker: u64,
    /// Sends that failed on the connection.
    pub failed_connection: u64,
    /// Sends that failed for want of a route.
    pub failed_no_route: u64,
    /// Sends refused before sending ([`ProducerError::MessageIllegal`]).
    pub failed_illegal: u64,
    /// Sends that failed in other ways (shutdown, bad answers).
    pub failed_other: u64,
    /// Attempts after the first, for any reason.
    pub retries: u64,
    /// Retries after `SYSTEM_BUSY` (each spent a budget token).
    pub busy_retries: u64,
    /// Busy answers returned because the retry budget had no token.
    pub budget_exhausted: u64,
    /// Waits for a topic's or client's quota (`[QUOTA]` answers): each waited what the
    /// broker said and spent neither an attempt nor a budget token.
    pub quota_waits: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    sends: AtomicU64,
    attempts: AtomicU64,
    succeeded: AtomicU64,
    failed_timeout: AtomicU64,
    failed_too_many_requests: AtomicU64,
    failed_busy: AtomicU64,
    failed_broker: AtomicU64,
    failed_connection: AtomicU64,
    failed_no_route: AtomicU64,
    failed_illegal: AtomicU64,
    failed_other: AtomicU64,
    retries: AtomicU64,
    busy_retries: AtomicU64,
    budget_exhausted: AtomicU64,
    quota_waits: AtomicU64,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

impl Counters {
    pub(crate) fn send_started(&self) {
        bump(&self.sends);
    }

    pub(crate) fn attempt(&self, retry: bool) {
        bump(&self.attempts);
        if retry {
            bump(&self.retries);
        }
    }

    pub(crate) fn busy_retry(&self) {
        bump(&self.busy_retries);
    }

    pub(crate) fn budget_exhausted(&self) {
        bump(&self.budget_exhausted);
    }

    pub(crate) fn quota_wait(&self) {
        bump(&self.quota_waits);
    }

    pub(crate) fn outcome<T>(&self, result: &Result<T, ProducerError>) {
        match result {
            Ok(_) => bump(&self.succeeded),
            Err(e) => self.failure(e),
        }
    }

    pub(crate) fn failure(&self, e: &ProducerError) {
        let counter = match e {
            _ if e.is_busy() => &self.failed_busy,
            ProducerError::Broker { .. } => &self.failed_broker,
            ProducerError::Timeout { .. } => &self.failed_timeout,
            ProducerError::TooManyRequests { .. } => &self.failed_too_many_requests,
            ProducerError::Connection { .. } => &self.failed_connection,
            ProducerError::NoRoute { .. } => &self.failed_no_route,
            ProducerError::MessageIllegal { .. } => &self.failed_illegal,
            _ => &self.failed_other,
        };
        bump(counter);
    }

    pub(crate) fn snapshot(&self) -> ProducerStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ProducerStats {
            sends: get(&self.sends),
            attempts: get(&self.attempts),
            succeeded: get(&self.succeeded),
            failed_timeout: get(&self.failed_timeout),
            failed_too_many_requests: get(&self.failed_too_many_requests),
            failed_busy: get(&self.failed_busy),
            failed_broker: get(&self.failed_broker),
            failed_connection: get(&self.failed_connection),
            failed_no_route: get(&self.failed_no_route),
            failed_illegal: get(&self.failed_illegal),
            failed_other: get(&self.failed_other),
            retries: get(&self.retries),
            busy_retries: get(&self.busy_retries),
            budget_exhausted: get(&self.budget_exhausted),
            quota_waits: get(&self.quota_waits),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_are_counted_by_kind() {
        let c = Counters::default();
        c.send_started();
        c.attempt(false);
        c.attempt(true);
        c.outcome::<()>(&Err(ProducerError::Broker {
            code: remoting_protocol::ResponseCode::SYSTEM_BUSY,
            remark: String::new(),
            addr: "b".into(),
            retry_after_ms: None,
        }));
        c.outcome::<()>(&Err(ProducerError::Shutdown));
        c.outcome(&Ok(()));
        let s = c.snapshot();
        assert_eq!((s.sends, s.attempts, s.retries), (1, 2, 1));
        assert_eq!((s.failed_busy, s.failed_other, s.succeeded), (1, 1, 1));
        assert_eq!(s.failed_broker, 0);
    }
}
