//! Whom to elect: among the live in-sync replicas, the old master if it is
//! still alive, else the one whose log is furthest ahead (highest epoch,
//! then highest offset), then the lowest election priority, then the lowest
//! id. Only with unclean elections enabled may a member outside the in-sync
//! set be chosen, and only when no in-sync replica is alive.

use std::{cmp::Reverse, time::Instant};

use crate::{
    liveness::{Beat, Liveness},
    model::Group,
};

/// The broker to elect in `group` at `now`, if any; `prefer` is a broker an
/// operator designated (then only it can be chosen).
#[must_use]
pub fn choose(
    group: &Group,
    liveness: &Liveness,
    now: Instant,
    unclean: bool,
    prefer: Option<u64>,
) -> Option<u64> {
    let from_set = try_among(
        group,
        group.sync_state_set.iter().copied(),
        liveness,
        now,
        prefer,
    );
    if from_set.is_some() || !unclean {
        return from_set;
    }
    try_among(group, group.members.keys().copied(), liveness, now, prefer)
}

fn try_among(
    group: &Group,
    ids: impl Iterator<Item = u64>,
    liveness: &Liveness,
    now: Instant,
    prefer: Option<u64>,
) -> Option<u64> {
    let name = &group.broker_name;
    let alive: Vec<(u64, &Beat)> = ids
        .filter_map(|id| {
            let key = (name.clone(), id);
            liveness
                .is_alive(&key, now)
                .then(|| liveness.last_beat(&key).map(|b| (id, b)))
                .flatten()
        })
        .collect();
    if let Some(old) = group.master {
        if alive.iter().any(|(id, _)| *id == old) && prefer.is_none_or(|p| p == old) {
            return Some(old);
        }
    }
    if let Some(p) = prefer {
        return alive.iter().any(|(id, _)| *id == p).then_some(p);
    }
    alive
        .iter()
        .min_by_key(|(id, b)| (Reverse(b.epoch), Reverse(b.max_offset), b.priority, *id))
        .map(|(id, _)| *id)
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, time::Duration};

    use super::*;
    use crate::model::Member;

    fn group(master: Option<u64>, set: &[u64]) -> Group {
        Group {
            broker_name: "b".into(),
            members: (1..=4).map(|id| (id, Member::default())).collect(),
            master,
            sync_state_set: set.iter().copied().collect::<BTreeSet<_>>(),
            ..Group::default()
        }
    }

    fn beat(l: &mut Liveness, id: u64, epoch: i32, max_offset: i64, priority: i32, now: Instant) {
        l.beat(
            ("b".into(), id),
            Beat {
                addr: format!("h:{id}"),
                timeout: Duration::from_secs(3),
                epoch,
                max_offset,
                confirm_offset: 0,
                priority,
            },
            now,
            None,
        );
    }

    #[test]
    fn the_live_old_master_stays_else_the_furthest_in_sync_replica_wins() {
        let now = Instant::now();
        let mut l = Liveness::default();
        beat(&mut l, 1, 3, 100, 0, now);
        beat(&mut l, 2, 3, 300, 5, now);
        beat(&mut l, 3, 3, 300, 1, now);
        beat(&mut l, 4, 9, 999, 0, now);
        let g = group(Some(1), &[1, 2, 3]);
        assert_eq!(choose(&g, &l, now, false, None), Some(1));
        // The old master is gone: furthest ahead, then the lower priority;
        // broker 4 is ahead but outside the set.
        let later = now + Duration::from_secs(4);
        beat(&mut l, 2, 3, 300, 5, later);
        beat(&mut l, 3, 3, 300, 1, later);
        beat(&mut l, 4, 9, 999, 0, later);
        assert_eq!(choose(&g, &l, later, false, None), Some(3));
        // A higher epoch beats a longer log.
        beat(&mut l, 2, 4, 10, 5, later);
        assert_eq!(choose(&g, &l, later, false, None), Some(2));
        // A designated broker, or nobody.
        assert_eq!(choose(&g, &l, later, false, Some(3)), Some(3));
        assert_eq!(choose(&g, &l, later, false, Some(4)), None);
        // No in-sync replica alive: nobody, unless unclean elections are on.
        let only_dead = group(Some(1), &[1]);
        assert_eq!(choose(&only_dead, &l, later, false, None), None);
        assert_eq!(choose(&only_dead, &l, later, true, None), Some(4));
    }
}
