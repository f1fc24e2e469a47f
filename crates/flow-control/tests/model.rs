//! Property test: any sequence of pushes, pops, expiry and busy drains gives
//! the same results as a plain `VecDeque` model of RocketMQ's semantics.

use std::{
    collections::VecDeque,
    time::{Duration, Instant},
};

use flow_control::{Reason, RequestQueue};
use proptest::prelude::*;

const CAPACITY: usize = 8;

#[derive(Debug, Clone)]
enum Op {
    /// Advance the clock by this many ms, then push.
    Push(u64),
    Pop,
    /// Remove heads that waited at least this many ms.
    Expire(u64),
    /// Drain while busy, busy for this many questions.
    Drain(usize),
    SetCapacity(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..50).prop_map(Op::Push),
        2 => Just(Op::Pop),
        2 => (0u64..200).prop_map(Op::Expire),
        1 => (0usize..4).prop_map(Op::Drain),
        1 => (0usize..CAPACITY * 2).prop_map(Op::SetCapacity),
    ]
}

proptest! {
    #[test]
    fn queue_matches_a_fifo_model(ops in prop::collection::vec(op(), 1..200)) {
        let t0 = Instant::now();
        let mut now = t0;
        let q = RequestQueue::new("send", CAPACITY);
        let mut model: VecDeque<(u32, Instant)> = VecDeque::new();
        let mut capacity = CAPACITY;
        let mut next_id = 0u32;
        for op in ops {
            match op {
                Op::Push(advance) => {
                    now += Duration::from_millis(advance);
                    let id = next_id;
                    next_id += 1;
                    match q.try_push(id, now) {
                        Ok(()) => {
                            prop_assert!(model.len() < capacity);
                            model.push_back((id, now));
                        }
                        Err(rejected) => {
                            prop_assert_eq!(rejected.payload, id);
                            prop_assert_eq!(
                                rejected.reason,
                                Reason::Overload { queue_len: model.len(), capacity }
                            );
                        }
                    }
                }
                Op::Pop => {
                    let got = q.try_pop().map(|t| (t.payload, t.arrived));
                    prop_assert_eq!(got, model.pop_front());
                }
                Op::Expire(limit) => {
                    let limit = Duration::from_millis(limit);
                    let got: Vec<_> = q
                        .remove_expired(now, limit)
                        .into_iter()
                        .map(|e| (e.task.payload, e.waited, e.queue_len))
                        .collect();
                    let mut want = Vec::new();
                    while let Some(&(id, arrived)) = model.front() {
                        if now - arrived < limit {
                            break;
                        }
                        model.pop_front();
                        want.push((id, now - arrived, model.len()));
                    }
                    prop_assert_eq!(got, want);
                    if let Some(head_wait) = q.head_wait(now) {
                        prop_assert!(head_wait < limit);
                    }
                }
                Op::Drain(busy_for) => {
                    let asked = std::cell::Cell::new(0);
                    let got: Vec<_> = q
                        .drain_while(now, || {
                            asked.set(asked.get() + 1);
                            asked.get() <= busy_for
                        })
                        .into_iter()
                        .map(|e| (e.task.payload, e.queue_len))
                        .collect();
                    let mut want = Vec::new();
                    for _ in 0..busy_for {
                        let Some((id, _)) = model.pop_front() else { break };
                        want.push((id, model.len()));
                    }
                    prop_assert_eq!(got, want);
                }
                Op::SetCapacity(c) => {
                    q.set_capacity(c);
                    capacity = c;
                }
            }
            prop_assert_eq!(q.len(), model.len());
        }
    }
}
