//! A master's review of its in-sync replica set: which slaves the
//! controllers should count, from each slave's last acknowledged offset.
//!
//! A slave joins in two steps: when it is within [`JOIN_LAG`] of the end,
//! the master starts waiting for it (from then on nothing is acknowledged
//! without it); once it holds the end of that moment, it holds everything
//! acknowledged before, and the controllers are asked to count it. A member
//! leaves when it disconnects or has not caught up for
//! `haMaxTimeSlaveNotCatchup` (counted from the first review that sees it,
//! for a member the controllers counted before). A slave has caught up
//! when it holds the end of the log as of the review before: under steady
//! load the end moves on between a send and its acknowledgement, so a
//! healthy slave rarely holds the end of the very moment of a review.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::{Duration, Instant},
};

/// How far behind the master's end a slave may be when the master starts
/// waiting for it (one default transfer batch): closer than this it
/// catches up at once even under load.
pub(super) const JOIN_LAG: u64 = 64 * 1024;

/// A master's view of its slaves between reviews.
#[derive(Debug, Default)]
pub(super) struct Review {
    /// When each slave last caught up.
    caught_up: BTreeMap<i64, Instant>,
    /// Slaves the master waits for already but the controllers do not
    /// count yet, with the end of the master's log when it began to wait:
    /// once a slave holds that, it holds everything acknowledged.
    joining: BTreeMap<i64, u64>,
    /// The end of the master's log at the review before.
    last_end: Option<u64>,
}

impl Review {
    /// The in-sync set to ask for (the master `id` always in it), given the
    /// connected slaves' last acknowledged offsets `acked` (broker id,
    /// offset), the end of the log `end`, the set the controllers count
    /// now, the time of the review and `haMaxTimeSlaveNotCatchup`.
    pub(super) fn desired(
        &mut self,
        id: i64,
        acked: &[(i64, u64)],
        end: u64,
        members: &BTreeSet<i64>,
        now: Instant,
        grace: Duration,
    ) -> BTreeSet<i64> {
        self.joining
            .retain(|slave, _| acked.iter().any(|(r, _)| r == slave));
        let held = self.last_end.map_or(end, |last| last.min(end));
        self.last_end = Some(end);
        let mut desired = BTreeSet::from([id]);
        for &(slave, at) in acked {
            if at >= held {
                self.caught_up.insert(slave, now);
            }
            if members.contains(&slave) {
                // A member first seen now has the whole grace from now.
                let since = *self.caught_up.entry(slave).or_insert(now);
                let recent = now.duration_since(since) <= grace;
                if recent {
                    desired.insert(slave);
                }
                continue;
            }
            let mark = match self.joining.get(&slave) {
                Some(mark) => *mark,
                None if at.saturating_add(JOIN_LAG) >= end => {
                    self.joining.insert(slave, end);
                    end
                }
                None => continue,
            };
            if at >= mark {
                desired.insert(slave);
            }
        }
        desired
    }

    /// Whom the master waits for: the members the controllers count and
    /// the slaves joining.
    pub(super) fn waiting(&self, members: &BTreeSet<i64>) -> BTreeSet<i64> {
        members.iter().chain(self.joining.keys()).copied().collect()
    }

    /// The controllers now count `desired`: its slaves joined.
    pub(super) fn joined(&mut self, desired: &BTreeSet<i64>) {
        for slave in desired {
            self.joining.remove(slave);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(15);
    const MSG: u64 = 1_000;

    fn set(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn a_member_one_send_behind_at_every_review_stays_in_sync() {
        let mut review = Review::default();
        let members = set(&[1, 2]);
        let start = Instant::now();
        let mut end = 10 * MSG;
        // Every half second for a minute: the slave holds all but the send
        // in flight, never the end of the review's own moment.
        for i in 0..120 {
            end += 7 * MSG;
            let now = start + Duration::from_millis(500 * i);
            let desired = review.desired(1, &[(2, end - MSG)], end, &members, now, GRACE);
            assert_eq!(desired, members, "review {i}");
        }
    }

    #[test]
    fn a_member_that_stops_acknowledging_leaves_after_the_grace() {
        let mut review = Review::default();
        let members = set(&[1, 2]);
        let start = Instant::now();
        let stopped_at = 20 * MSG;
        let mut end = stopped_at;
        assert_eq!(
            review.desired(1, &[(2, stopped_at)], end, &members, start, GRACE),
            members
        );
        let mut left = None;
        for i in 1..=40 {
            end += MSG;
            let now = start + Duration::from_millis(500 * i);
            if review.desired(1, &[(2, stopped_at)], end, &members, now, GRACE) == set(&[1]) {
                left = Some(now - start);
                break;
            }
        }
        let left = left.expect("the stalled slave left the set");
        assert!(left > GRACE, "left after {left:?}, before the grace ended");
        assert!(
            left <= GRACE + Duration::from_secs(2),
            "left after {left:?}"
        );
    }

    #[test]
    fn an_idle_member_is_in_sync() {
        let mut review = Review::default();
        let members = set(&[1, 2]);
        let start = Instant::now();
        for i in 0..60 {
            let now = start + Duration::from_secs(i);
            assert_eq!(
                review.desired(1, &[(2, 5 * MSG)], 5 * MSG, &members, now, GRACE),
                members
            );
        }
    }

    #[test]
    fn a_slave_joins_once_it_holds_the_end_of_when_the_master_began_to_wait() {
        let mut review = Review::default();
        let members = set(&[1]);
        let now = Instant::now();
        // Too far behind: not waited for.
        let far = 10 * JOIN_LAG;
        assert_eq!(
            review.desired(1, &[(2, 0)], far, &members, now, GRACE),
            members
        );
        assert_eq!(review.waiting(&members), members);
        // Close: waited for from here, not counted before it holds `end`.
        let end = far + MSG;
        let close = end - JOIN_LAG / 2;
        assert_eq!(
            review.desired(1, &[(2, close)], end, &members, now, GRACE),
            members
        );
        assert_eq!(review.waiting(&members), set(&[1, 2]));
        let desired = review.desired(1, &[(2, end)], end + 9 * MSG, &members, now, GRACE);
        assert_eq!(desired, set(&[1, 2]));
        review.joined(&desired);
        assert_eq!(review.waiting(&desired), set(&[1, 2]));
        // A joining slave that disconnects is no longer waited for.
        let mut review = Review::default();
        review.desired(1, &[(3, close)], end, &members, now, GRACE);
        assert_eq!(review.waiting(&members), set(&[1, 3]));
        review.desired(1, &[], end, &members, now, GRACE);
        assert_eq!(review.waiting(&members), members);
    }
}
