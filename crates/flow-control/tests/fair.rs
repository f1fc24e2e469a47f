//! Fair shares and adaptive admission, against made-up clocks:
//! - the round robin starves no share and serves busy shares in proportion
//!   to their weights;
//! - a flooding share cannot lock a quiet one out of a full queue;
//! - under sustained overload adaptive admission keeps the worker busy and
//!   accepted tasks' sojourn near the target, where plain admission keeps
//!   a standing queue up to the wait limit.

use std::{
    collections::HashMap,
    sync::Arc,
    time::{Duration, Instant},
};

use flow_control::{Admission, Reason, RequestQueue, SojournControl};
use proptest::prelude::*;

fn push(q: &RequestQueue<(usize, u64)>, share: usize, id: u64, now: Instant) -> Result<(), Reason> {
    let key = format!("s{share}");
    let admission = Admission {
        share: &key,
        ..Admission::default()
    };
    q.push((share, id), now, admission).map_err(|r| r.reason)
}

proptest! {
    /// Every share with waiting tasks is served within twice the sum of
    /// the other shares' weights, whatever the arrivals; each share in
    /// order.
    #[test]
    fn no_share_waits_more_than_two_rounds(
        weights in prop::collection::vec(1u32..5, 1..6),
        ops in prop::collection::vec((0usize..6, 0u8..3), 1..400),
    ) {
        let q = RequestQueue::new("send", 100_000);
        let w: HashMap<Arc<str>, u32> = weights
            .iter()
            .enumerate()
            .map(|(i, &w)| (Arc::from(format!("s{i}").as_str()), w))
            .collect();
        q.set_share_weights(w);
        let total: u32 = weights.iter().sum();
        let now = Instant::now();
        let n = weights.len();
        // Pops since each share last got one while waiting, and the next id
        // each share hands out and expects.
        let mut since = vec![0u32; n];
        let mut next_in = vec![0u64; n];
        let mut next_out = vec![0u64; n];
        let mut waiting = vec![0usize; n];
        for (share, pops) in ops {
            let share = share % n;
            push(&q, share, next_in[share], now).unwrap();
            next_in[share] += 1;
            waiting[share] += 1;
            for _ in 0..pops {
                let Some(task) = q.try_pop_at(now) else { break };
                let (s, id) = task.payload;
                prop_assert_eq!(id, next_out[s], "share {} out of order", s);
                next_out[s] += 1;
                waiting[s] -= 1;
                for (i, c) in since.iter_mut().enumerate() {
                    if i == s || waiting[i] == 0 {
                        *c = 0;
                    } else {
                        *c += 1;
                        prop_assert!(
                            *c <= 2 * (total - weights[i]),
                            "share {} waited {} pops (weights {:?})", i, *c, weights
                        );
                    }
                }
            }
        }
    }

    /// Shares that always have work get pops in proportion to their weights.
    #[test]
    fn busy_shares_get_pops_in_proportion_to_their_weights(
        weights in prop::collection::vec(1u32..8, 2..5),
    ) {
        let q = RequestQueue::new("send", 1_000_000);
        q.set_share_weights(
            weights
                .iter()
                .enumerate()
                .map(|(i, &w)| (Arc::from(format!("s{i}").as_str()), w))
                .collect(),
        );
        let now = Instant::now();
        let total: u32 = weights.iter().sum();
        let rounds = 50;
        for (i, &w) in weights.iter().enumerate() {
            for id in 0..u64::from(w * (rounds + 1)) {
                push(&q, i, id, now).unwrap();
            }
        }
        let mut served = vec![0u32; weights.len()];
        for _ in 0..total * rounds {
            served[q.try_pop_at(now).unwrap().payload.0] += 1;
        }
        for (i, &w) in weights.iter().enumerate() {
            prop_assert_eq!(served[i], w * rounds, "weights {:?}", &weights);
        }
    }
}

#[test]
fn a_flooding_share_cannot_lock_a_quiet_one_out_of_a_full_queue() {
    let q = RequestQueue::new("send", 100);
    let now = Instant::now();
    for id in 0..100 {
        push(&q, 0, id, now).unwrap();
    }
    assert!(matches!(
        push(&q, 0, 100, now),
        Err(Reason::Overload {
            queue_len: 100,
            capacity: 100
        })
    ));
    // The quiet share gets in, up to its fair part of the capacity.
    for id in 0..50 {
        push(&q, 1, id, now).unwrap();
    }
    assert_eq!(
        push(&q, 1, 50, now),
        Err(Reason::ShareFull {
            share_len: 50,
            share_capacity: 50,
            shares: 2
        })
    );
    assert!(matches!(
        push(&q, 0, 101, now),
        Err(Reason::ShareFull { .. })
    ));
    // And it is served at once: one task of each share in turn.
    let first: Vec<usize> = (0..4)
        .map(|_| q.try_pop_at(now).unwrap().payload.0)
        .collect();
    assert_eq!(first, [0, 1, 0, 1]);
}

proptest! {
    /// However many shares join a full queue one after the other, it never
    /// holds twice its capacity.
    #[test]
    fn shares_joining_a_full_queue_never_take_it_past_twice_its_capacity(
        capacity in 1usize..200,
        shares in 2usize..64,
    ) {
        let q = RequestQueue::new("send", capacity);
        let now = Instant::now();
        for share in 0..shares {
            let mut id = 0;
            while push(&q, share, id, now).is_ok() {
                id += 1;
                prop_assert!(id <= 2 * capacity as u64, "share {} never refused", share);
            }
            prop_assert!(q.len() <= 2 * capacity, "{} queued of {}", q.len(), capacity);
        }
    }
}

#[test]
fn each_share_expires_from_its_own_head() {
    let q = RequestQueue::new("send", 100);
    let t0 = Instant::now();
    push(&q, 0, 0, t0).unwrap();
    push(&q, 1, 0, t0 + Duration::from_millis(150)).unwrap();
    push(&q, 0, 1, t0 + Duration::from_millis(160)).unwrap();
    let expired = q.remove_expired(t0 + Duration::from_millis(200), Duration::from_millis(45));
    let ids: Vec<_> = expired.iter().map(|e| e.task.payload).collect();
    assert_eq!(ids, [(0, 0), (1, 0)], "share 0's second task is younger");
    assert_eq!(q.len(), 1);
}

/// What a single-worker simulation of a queue under a steady overload saw
/// after its first `warmup`.
#[derive(Debug)]
struct Run {
    /// Fraction of the time the worker had nothing to do.
    idle: f64,
    /// The 99th percentile sojourn of tasks accepted after the warm-up.
    p99_sojourn: Duration,
    /// Tasks refused after the warm-up, by reason label.
    refused: HashMap<&'static str, u64>,
}

/// Arrivals every `gap`, served one at a time in `service` each, for
/// `length`; early admission at 200 ms as the broker has it.
fn simulate(
    control: Option<SojournControl>,
    gap: Duration,
    service: Duration,
    length: Duration,
) -> Run {
    let warmup = Duration::from_millis(500);
    let q = RequestQueue::new("send", 100_000);
    q.set_sojourn_control(control);
    q.record_service_time(service);
    let t0 = Instant::now();
    let (mut next_arrival, mut worker_free) = (t0, t0);
    let (mut idle, mut sojourns, mut refused) = (Duration::ZERO, Vec::new(), HashMap::new());
    let end = t0 + length;
    let mut id = 0;
    while next_arrival < end || worker_free < end {
        if next_arrival <= worker_free && next_arrival < end {
            let admission = Admission {
                max_wait: Some(Duration::from_millis(200)),
                ..Admission::default()
            };
            if let Err(r) = q.push((0, id), next_arrival, admission) {
                if next_arrival >= t0 + warmup {
                    *refused.entry(r.reason.label()).or_insert(0) += 1;
                }
            }
            id += 1;
            next_arrival += gap;
            continue;
        }
        if worker_free >= end {
            break;
        }
        match q.try_pop_at(worker_free) {
            Some(task) => {
                if task.arrived >= t0 + warmup {
                    sojourns.push(task.waited(worker_free));
                }
                worker_free += service;
            }
            None => {
                let until = next_arrival.min(end);
                if worker_free >= t0 + warmup {
                    idle += until - worker_free;
                }
                worker_free = until;
            }
        }
    }
    sojourns.sort();
    Run {
        idle: idle.as_secs_f64() / (length - warmup).as_secs_f64(),
        p99_sojourn: sojourns[sojourns.len() * 99 / 100],
        refused,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// At 1.5x to 4x overload, with any service time from 20 µs to 1 ms,
    /// adaptive admission keeps the worker busy (goodput at least 99 %)
    /// and the accepted tasks' p99 sojourn within a few targets, where the
    /// same run without it queues up to the 200 ms limit.
    #[test]
    fn adaptive_admission_keeps_goodput_and_drops_the_standing_queue(
        service_us in 20u64..1000,
        overload_pct in 150u64..400,
    ) {
        let service = Duration::from_micros(service_us);
        let gap = service * 100 / u32::try_from(overload_pct).unwrap();
        let length = Duration::from_secs(3);
        let control = SojournControl::default();
        let adaptive = simulate(Some(control), gap, service, length);
        let plain = simulate(None, gap, service, length);
        prop_assert!(adaptive.idle < 0.01, "{adaptive:?}");
        prop_assert!(
            adaptive.p99_sojourn <= control.target + service * 2,
            "{adaptive:?}"
        );
        prop_assert!(adaptive.refused.contains_key("standing_queue"), "{adaptive:?}");
        prop_assert!(plain.p99_sojourn >= Duration::from_millis(150), "{plain:?}");
    }
}
