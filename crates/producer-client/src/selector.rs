//! A topic's writable queues and the choice of one per attempt: round robin,
//! away from the broker that failed last, and (when latency fault tolerance
//! is on) away from brokers in a fault window (RocketMQ ≥ 5.1.4,
//! `TopicPublishInfo.selectOneMessageQueue` with `MQFaultStrategy`).

use std::time::Instant;

use client_core::PublishRoute;

use crate::{fault::FaultTable, MessageQueue};

/// The next queue of `route`: the first one, from its round-robin position
/// on, that is not on `last_broker` (and, with `faults`, whose broker is
/// available, else merely reachable); plain round robin when none
/// qualifies. `None` for a route without queues.
pub(crate) fn select(
    route: &PublishRoute,
    last_broker: Option<&str>,
    faults: Option<&FaultTable>,
    now: Instant,
) -> Option<MessageQueue> {
    let queues = &route.queues;
    let n = queues.len();
    if n == 0 {
        return None;
    }
    let start = route.next_position();
    let nth = |i: usize| &queues[(start.wrapping_add(i)) % n];
    let pick = |ok: &dyn Fn(&MessageQueue) -> bool| (0..n).map(nth).find(|q| ok(q));
    let not_last = |q: &MessageQueue| last_broker != Some(q.broker_name.as_str());
    let chosen = match faults {
        Some(f) => pick(&|q| not_last(q) && f.is_available(&q.broker_name, now))
            .or_else(|| pick(&|q| not_last(q) && f.is_reachable(&q.broker_name))),
        None => pick(&not_last),
    };
    Some(chosen.unwrap_or_else(|| nth(0)).clone())
}

#[cfg(test)]
mod tests {
    use std::{collections::HashMap, time::Duration};

    use super::*;

    fn info(brokers: &[(&str, u32)]) -> PublishRoute {
        let mut queues = Vec::new();
        let mut addrs = HashMap::new();
        for (name, n) in brokers {
            for queue_id in 0..*n {
                queues.push(MessageQueue {
                    topic: "T".into(),
                    broker_name: (*name).into(),
                    queue_id,
                });
            }
            addrs.insert((*name).to_owned(), format!("{name}:1"));
        }
        PublishRoute::from_parts(queues, addrs, false)
    }

    #[test]
    fn round_robin_visits_every_queue() {
        let info = info(&[("a", 2), ("b", 2)]);
        let now = Instant::now();
        let mut seen: Vec<_> = (0..4)
            .map(|_| select(&info, None, None, now).unwrap())
            .collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 4);
    }

    #[test]
    fn a_retry_avoids_the_broker_that_failed_last() {
        let info = info(&[("a", 4), ("b", 1)]);
        let now = Instant::now();
        for _ in 0..10 {
            assert_eq!(
                select(&info, Some("a"), None, now).unwrap().broker_name,
                "b"
            );
        }
        let single = self::info(&[("a", 2)]);
        assert_eq!(
            select(&single, Some("a"), None, now).unwrap().broker_name,
            "a",
            "with no other broker, round robin falls back to the same one"
        );
    }

    #[test]
    fn brokers_in_a_fault_window_are_skipped_until_it_ends() {
        let info = info(&[("a", 2), ("b", 2)]);
        let faults = FaultTable::default();
        let t0 = Instant::now();
        faults.update("a", Duration::ZERO, true, true, t0);
        for _ in 0..8 {
            let q = select(&info, None, Some(&faults), t0).unwrap();
            assert_eq!(q.broker_name, "b");
        }
        let later = t0 + Duration::from_secs(10);
        let brokers: Vec<_> = (0..4)
            .map(|_| {
                select(&info, None, Some(&faults), later)
                    .unwrap()
                    .broker_name
            })
            .collect();
        assert!(brokers.iter().any(|b| b == "a"), "{brokers:?}");
    }

    #[test]
    fn when_every_broker_is_faulty_selection_still_answers() {
        let info = info(&[("a", 1), ("b", 1)]);
        let faults = FaultTable::default();
        let t0 = Instant::now();
        faults.update("a", Duration::ZERO, true, false, t0);
        faults.update("b", Duration::ZERO, true, false, t0);
        assert!(select(&info, Some("a"), Some(&faults), t0).is_some());
        assert!(select(&info, None, None, t0).is_some());
        assert!(select(&self::info(&[]), None, None, t0).is_none());
    }
}
