//! The loop of the broker's delivery threads (delay levels, timers): do the
//! due work, then sleep until the next due instant (at most an idle
//! period) or until woken or stopped; write progress periodically and once
//! more at the end.

use std::{
    sync::{Condvar, Mutex, PoisonError},
    time::{Duration, Instant},
};

/// A stoppable, wakeable service loop.
#[derive(Debug, Default)]
pub struct ServiceLoop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl ServiceLoop {
    /// Runs until [`ServiceLoop::stop`]: `step` gets the time (ms since the
    /// epoch) and returns when it next has work, if it knows; `persist` runs
    /// every `persist_every` and once after the loop ends.
    pub fn run(
        &self,
        idle: Duration,
        persist_every: Duration,
        mut step: impl FnMut(i64) -> Option<i64>,
        mut persist: impl FnMut(),
    ) {
        let mut persisted = Instant::now();
        loop {
            let next = step(message_model::now_ms());
            if persisted.elapsed() >= persist_every {
                persisted = Instant::now();
                persist();
            }
            let idle_ms = i64::try_from(idle.as_millis()).unwrap_or(i64::MAX);
            let wait = next.map_or(idle, |due| {
                let ms = (due - message_model::now_ms()).clamp(0, idle_ms);
                Duration::from_millis(u64::try_from(ms).unwrap_or(0))
            });
            let stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
            if *stopped {
                break;
            }
            let (stopped, _) = self
                .wake
                .wait_timeout(stopped, wait)
                .unwrap_or_else(PoisonError::into_inner);
            if *stopped {
                break;
            }
        }
        persist();
    }

    /// Sleeps for `d` unless stopped first; true when stopped.
    pub fn pause(&self, d: Duration) -> bool {
        let stopped = self.stopped.lock().unwrap_or_else(PoisonError::into_inner);
        if *stopped {
            return true;
        }
        let (stopped, _) = self
            .wake
            .wait_timeout_while(stopped, d, |stopped| !*stopped)
            .unwrap_or_else(PoisonError::into_inner);
        *stopped
    }

    /// Ends the current sleep early: new work arrived.
    pub fn wake(&self) {
        self.wake.notify_all();
    }

    /// Ends [`ServiceLoop::run`] (at once if it sleeps).
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };

    #[test]
    fn a_pause_ends_when_stopped_and_says_so() {
        let service = Arc::new(ServiceLoop::default());
        assert!(!service.pause(Duration::from_millis(1)), "not stopped yet");
        let sleeper = {
            let service = Arc::clone(&service);
            // An hour-long pause: only stop() ends it.
            std::thread::spawn(move || service.pause(Duration::from_secs(3600)))
        };
        service.stop();
        assert!(sleeper.join().unwrap());
        assert!(
            service.pause(Duration::from_secs(3600)),
            "at once once stopped"
        );
    }

    #[test]
    fn it_steps_until_stopped_and_persists_at_the_end() {
        let service = Arc::new(ServiceLoop::default());
        let steps = Arc::new(AtomicUsize::new(0));
        let persists = Arc::new(AtomicUsize::new(0));
        let runner = {
            let (service, steps, persists) = (
                Arc::clone(&service),
                Arc::clone(&steps),
                Arc::clone(&persists),
            );
            std::thread::spawn(move || {
                service.run(
                    Duration::from_secs(3600),
                    Duration::from_secs(3600),
                    |_| {
                        steps.fetch_add(1, Ordering::SeqCst);
                        None
                    },
                    || {
                        persists.fetch_add(1, Ordering::SeqCst);
                    },
                );
            })
        };
        // An hour-long sleep: only stop() ends it.
        service.stop();
        runner.join().unwrap();
        assert!(steps.load(Ordering::SeqCst) >= 1);
        assert_eq!(persists.load(Ordering::SeqCst), 1, "once, at the end");
    }
}
