//! RocketMQ's `AllocateMessageQueueAveragely`: which queues a consumer owns.

/// The share of `queues` that consumer `me` owns among `consumers`.
///
/// Both lists must be sorted the same way by every member of the group.
/// Queues are split into contiguous ranges as evenly as possible; the first
/// `queues % consumers` consumers get one extra. A consumer missing from the
/// list owns nothing; with more consumers than queues the last ones own
/// nothing.
pub fn allocate_averagely<T: Clone>(queues: &[T], consumers: &[String], me: &str) -> Vec<T> {
    let Some(index) = consumers.iter().position(|c| c == me) else {
        return Vec::new();
    };
    let (q, c) = (queues.len(), consumers.len());
    if q == 0 {
        return Vec::new();
    }
    let rem = q % c;
    let average = if q <= c {
        1
    } else if rem > 0 && index < rem {
        q / c + 1
    } else {
        q / c
    };
    let start = if rem > 0 && index < rem {
        index * average
    } else {
        index * average + rem
    };
    let range = average.min(q.saturating_sub(start));
    (0..range)
        .filter_map(|i| queues.get((start + i) % q).cloned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("c{i}")).collect()
    }

    #[test]
    fn eight_queues_split_evenly_between_two_consumers() {
        let queues: Vec<u32> = (0..8).collect();
        assert_eq!(allocate_averagely(&queues, &ids(2), "c0"), [0, 1, 2, 3]);
        assert_eq!(allocate_averagely(&queues, &ids(2), "c1"), [4, 5, 6, 7]);
    }

    #[test]
    fn the_first_consumers_get_the_remainder() {
        let queues: Vec<u32> = (0..8).collect();
        let cids = ids(3);
        assert_eq!(allocate_averagely(&queues, &cids, "c0"), [0, 1, 2]);
        assert_eq!(allocate_averagely(&queues, &cids, "c1"), [3, 4, 5]);
        assert_eq!(allocate_averagely(&queues, &cids, "c2"), [6, 7]);
    }

    #[test]
    fn every_queue_is_owned_exactly_once_for_any_sizes() {
        for q in 0..20usize {
            for c in 1..12usize {
                let queues: Vec<usize> = (0..q).collect();
                let cids = ids(c);
                let mut all: Vec<usize> = cids
                    .iter()
                    .flat_map(|me| allocate_averagely(&queues, &cids, me))
                    .collect();
                all.sort_unstable();
                assert_eq!(all, queues, "{q} queues, {c} consumers");
            }
        }
    }

    #[test]
    fn a_consumer_not_in_the_list_owns_nothing() {
        assert!(allocate_averagely(&[1, 2], &ids(2), "other").is_empty());
    }
}
