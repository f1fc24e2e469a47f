//! Adaptive admission: keeps a queue's sojourn time (how long its tasks
//! wait before a worker takes them) near a small target, so that a queue
//! under sustained overload holds just enough work to keep its workers busy
//! instead of a standing queue that only adds delay.
//!
//! # The control law (after CoDel)
//! Two parameters: the `target` sojourn and the `interval`.
//! 1. Every task a worker takes reports its sojourn ([`Sojourn::on_dequeue`]).
//!    A sojourn at or below the target, or a dequeue that leaves the share
//!    empty, means there is no standing queue: the above-target clock stops.
//! 2. When sojourns stay above the target for a whole interval (every
//!    dequeue in between above it), the queue has a standing queue, and the
//!    share starts shedding for one interval.
//! 3. While shedding, a new task is refused at admission when it would wait
//!    longer than the target: when the share's oldest task has already
//!    waited longer, or when the work ahead of it (the queue's service-time
//!    estimate) would take longer ([`Sojourn::refuses`]). Otherwise it is
//!    taken. So the queue drains to about one target's worth of work and
//!    stays there while arrivals exceed what the workers serve: the
//!    workers never run dry, and an accepted task waits about the target.
//!    The oldest task's wait is measured, so a wrong estimate can at worst
//!    let the queue reach about two targets' worth.
//! 4. While shedding, each dequeue whose sojourn is above half the target
//!    extends the shedding to one interval after it: a queue held at the
//!    target under overload has sojourns just below the target, and must
//!    not lose its shedding to them (it would build a standing queue again
//!    for an interval). When overload ends, the queue drains, sojourns fall
//!    below half the target and shedding lapses one interval later.
//!
//! A burst shorter than the interval is queued in full (up to the queue's
//! capacity and the fast-failure limit, which stay as the backstop): a
//! queue absorbs bursts; it only refuses to keep a standing queue.

use std::time::{Duration, Instant};

/// The parameters of the control law.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SojournControl {
    /// The sojourn the queue is kept near under overload.
    pub target: Duration,
    /// How long sojourns must stay above the target before shedding starts,
    /// and how long shedding lasts after the last sojourn above it.
    pub interval: Duration,
}

/// Default [`SojournControl::target`] (chosen by the overload benchmark).
pub const DEFAULT_TARGET: Duration = Duration::from_millis(5);

/// Default [`SojournControl::interval`].
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(50);

impl Default for SojournControl {
    fn default() -> Self {
        Self {
            target: DEFAULT_TARGET,
            interval: DEFAULT_INTERVAL,
        }
    }
}

/// The control state of one queue share.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sojourn {
    /// When sojourns that stay above the target make the share shed.
    above_until: Option<Instant>,
    /// Shedding lasts until then.
    shedding_until: Option<Instant>,
}

impl Sojourn {
    /// Fresh state: not shedding, no sojourn above the target yet.
    pub const fn new() -> Self {
        Self {
            above_until: None,
            shedding_until: None,
        }
    }

    /// Takes the sojourn of a task a worker took at `now`; `emptied` says
    /// that it was the share's last task.
    pub fn on_dequeue(
        &mut self,
        control: &SojournControl,
        sojourn: Duration,
        emptied: bool,
        now: Instant,
    ) {
        if self.is_shedding(now) {
            if sojourn > control.target / 2 {
                self.shedding_until = Some(now + control.interval);
            }
            return;
        }
        if sojourn <= control.target {
            self.above_until = None;
            return;
        }
        match self.above_until {
            None => self.above_until = Some(now + control.interval),
            Some(until) if now >= until => {
                self.above_until = None;
                self.shedding_until = Some(now + control.interval);
            }
            Some(_) => {}
        }
        if emptied {
            self.above_until = None;
        }
    }

    /// Whether the share is shedding at `now`.
    pub fn is_shedding(&self, now: Instant) -> bool {
        self.shedding_until.is_some_and(|until| now < until)
    }

    /// Whether a task arriving at `now` is refused, given how long the
    /// share's oldest task has waited (`None`: the share is empty) and the
    /// wait predicted for the newcomer (`None`: no estimate yet).
    pub fn refuses(
        &self,
        control: &SojournControl,
        head_wait: Option<Duration>,
        predicted_wait: Option<Duration>,
        now: Instant,
    ) -> bool {
        self.is_shedding(now)
            && head_wait.is_some_and(|head| {
                head > control.target || predicted_wait.is_some_and(|p| p > control.target)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    const C: SojournControl = SojournControl {
        target: Duration::from_millis(5),
        interval: Duration::from_millis(100),
    };

    #[test]
    fn sojourns_above_target_for_a_whole_interval_start_shedding() {
        let t0 = Instant::now();
        let mut s = Sojourn::new();
        s.on_dequeue(&C, ms(20), false, t0);
        s.on_dequeue(&C, ms(30), false, t0 + ms(99));
        assert!(!s.is_shedding(t0 + ms(99)), "not a whole interval yet");
        s.on_dequeue(&C, ms(30), false, t0 + ms(100));
        assert!(s.is_shedding(t0 + ms(100)));
        assert!(s.refuses(&C, Some(ms(6)), None, t0 + ms(101)));
        assert!(
            !s.refuses(&C, Some(ms(5)), None, t0 + ms(101)),
            "head at target"
        );
        assert!(
            s.refuses(&C, Some(ms(1)), Some(ms(6)), t0 + ms(101)),
            "predicted"
        );
        assert!(!s.refuses(&C, Some(ms(1)), Some(ms(4)), t0 + ms(101)));
        assert!(
            !s.refuses(&C, None, Some(ms(9)), t0 + ms(101)),
            "an empty share takes work"
        );
    }

    #[test]
    fn one_sojourn_at_target_restarts_the_clock() {
        let t0 = Instant::now();
        let mut s = Sojourn::new();
        s.on_dequeue(&C, ms(20), false, t0);
        s.on_dequeue(&C, ms(5), false, t0 + ms(50));
        s.on_dequeue(&C, ms(20), false, t0 + ms(60));
        s.on_dequeue(&C, ms(20), false, t0 + ms(120));
        assert!(!s.is_shedding(t0 + ms(120)));
        s.on_dequeue(&C, ms(20), false, t0 + ms(160));
        assert!(s.is_shedding(t0 + ms(160)));
    }

    #[test]
    fn an_emptied_share_has_no_standing_queue() {
        let t0 = Instant::now();
        let mut s = Sojourn::new();
        s.on_dequeue(&C, ms(20), true, t0);
        s.on_dequeue(&C, ms(20), false, t0 + ms(100));
        assert!(
            !s.is_shedding(t0 + ms(100)),
            "the clock restarted at t0 + 100"
        );
        s.on_dequeue(&C, ms(20), false, t0 + ms(200));
        assert!(s.is_shedding(t0 + ms(200)));
    }

    #[test]
    fn shedding_lasts_one_interval_after_the_last_sojourn_above_target() {
        let t0 = Instant::now();
        let mut s = Sojourn::new();
        s.on_dequeue(&C, ms(20), false, t0);
        s.on_dequeue(&C, ms(20), false, t0 + ms(100));
        s.on_dequeue(&C, Duration::from_micros(2600), false, t0 + ms(180));
        assert!(
            s.is_shedding(t0 + ms(279)),
            "above half the target extends it"
        );
        s.on_dequeue(&C, ms(2), false, t0 + ms(250));
        assert!(
            s.is_shedding(t0 + ms(279)),
            "a short sojourn does not end it"
        );
        assert!(!s.is_shedding(t0 + ms(280)));
        assert!(!s.refuses(&C, Some(ms(50)), None, t0 + ms(280)));
    }
}
