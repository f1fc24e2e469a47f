//! The request queue's contract: FIFO order, bounded capacity that can change
//! at run time, blocking pops that wake on push and on close, and head-only
//! removal by wait time or while the page cache is busy.

use std::{
    cell::Cell,
    sync::Arc,
    thread,
    time::{Duration, Instant},
};

use flow_control::{Reason, RequestQueue};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A queue holding `payloads`, the i-th arriving at `t0 + i ms`.
fn queue_with(payloads: &[u32], t0: Instant) -> RequestQueue<u32> {
    let q = RequestQueue::new("send", 100);
    for (i, p) in payloads.iter().enumerate() {
        q.try_push(*p, t0 + ms(i as u64))
            .expect("capacity 100 holds the test's tasks");
    }
    q
}

#[test]
fn tasks_leave_in_arrival_order() {
    let t0 = Instant::now();
    let q = queue_with(&[7, 3, 9, 1], t0);
    assert_eq!(q.name(), "send");
    assert_eq!(q.len(), 4);
    let out: Vec<_> = std::iter::from_fn(|| q.try_pop()).collect();
    assert_eq!(
        out.iter().map(|t| t.payload).collect::<Vec<_>>(),
        [7, 3, 9, 1]
    );
    assert_eq!(out[2].arrived, t0 + ms(2));
    assert!(q.is_empty());
}

#[test]
fn task_reports_how_long_it_waited() {
    let t0 = Instant::now();
    let q = queue_with(&[1], t0);
    let task = q.try_pop().unwrap();
    assert_eq!(task.waited(t0 + ms(42)), ms(42));
    assert_eq!(task.waited(t0), Duration::ZERO);
}

#[test]
fn full_queue_rejects_with_overload_and_returns_the_payload() {
    let t0 = Instant::now();
    let q = RequestQueue::new("send", 2);
    q.try_push("a", t0).unwrap();
    q.try_push("b", t0).unwrap();
    let rejected = q.try_push("c", t0).unwrap_err();
    assert_eq!(rejected.payload, "c");
    assert_eq!(
        rejected.reason,
        Reason::Overload {
            queue_len: 2,
            capacity: 2
        }
    );
    assert_eq!(q.len(), 2);
}

#[test]
fn a_queue_is_bounded_in_bytes_and_every_way_out_returns_them() {
    let t0 = Instant::now();
    let q = RequestQueue::new("send", 100);
    q.set_capacity_bytes(1000);
    // One task alone is taken whatever its size.
    q.try_push_sized(100, 5000, t0, None).unwrap();
    let refused = q.try_push_sized(101, 1, t0, None).unwrap_err();
    assert_eq!(
        refused.reason,
        Reason::OverloadBytes {
            queued_bytes: 5000,
            capacity_bytes: 1000
        }
    );
    assert_eq!(q.try_pop().unwrap().bytes, 5000);
    assert_eq!(q.bytes(), 0);
    for (i, size) in [400, 400, 200].into_iter().enumerate() {
        q.try_push_sized(i, size, t0 + ms(i as u64), None).unwrap();
    }
    assert_eq!(q.bytes(), 1000);
    assert!(q.try_push_sized(9, 1, t0, None).is_err(), "full in bytes");
    assert_eq!(q.len(), 3, "not full in count");
    // Expiry, the busy drain, pops and drain all give the bytes back.
    assert_eq!(q.remove_expired(t0 + ms(100), ms(100)).len(), 1);
    assert_eq!(q.bytes(), 600);
    let once = Cell::new(true);
    assert_eq!(q.drain_while(t0, || once.replace(false)).len(), 1);
    assert_eq!(q.bytes(), 200);
    q.try_push_sized(3, 700, t0, None).unwrap();
    assert_eq!(q.pop(ms(0)).unwrap().bytes, 200);
    assert_eq!(q.drain().len(), 1);
    assert_eq!(q.bytes(), 0);
    // Tasks pushed without a size never count.
    q.set_capacity_bytes(0);
    q.try_push(1, t0).unwrap();
    q.try_push(2, t0).unwrap();
    assert_eq!(q.bytes(), 0);
}

#[test]
fn capacity_changes_at_run_time_without_dropping_tasks() {
    let t0 = Instant::now();
    let q = queue_with(&[1, 2, 3, 4], t0);
    q.set_capacity(2);
    assert_eq!(q.capacity(), 2);
    assert_eq!(q.len(), 4, "shrinking keeps queued tasks");
    assert!(matches!(
        q.try_push(5, t0).unwrap_err().reason,
        Reason::Overload {
            queue_len: 4,
            capacity: 2
        }
    ));
    q.try_pop().unwrap();
    q.try_pop().unwrap();
    assert!(q.try_push(5, t0).is_err(), "still at the new capacity");
    q.try_pop().unwrap();
    q.try_push(5, t0).unwrap();
    q.set_capacity(10);
    q.try_push(6, t0).unwrap();
    assert_eq!(q.len(), 3);
}

#[test]
fn pop_times_out_on_an_empty_queue() {
    let q: RequestQueue<u32> = RequestQueue::new("send", 10);
    let start = Instant::now();
    assert!(q.pop(ms(20)).is_none());
    assert!(start.elapsed() >= ms(20));
}

#[test]
fn pop_blocks_until_a_task_is_pushed() {
    let q = Arc::new(RequestQueue::new("send", 10));
    let worker = {
        let q = Arc::clone(&q);
        thread::spawn(move || q.pop(Duration::from_secs(30)))
    };
    thread::sleep(ms(50));
    assert!(!worker.is_finished(), "pop returned before any push");
    q.try_push(11u32, Instant::now()).unwrap();
    let task = worker.join().unwrap().unwrap();
    assert_eq!(task.payload, 11);
}

#[test]
fn each_push_wakes_one_of_many_blocked_pops() {
    let q = Arc::new(RequestQueue::new("send", 10));
    let start = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop(Duration::from_secs(30)))
        })
        .collect();
    thread::sleep(ms(50));
    for i in 0..4u32 {
        q.try_push(i, Instant::now()).unwrap();
    }
    let mut got: Vec<_> = workers
        .into_iter()
        .map(|w| w.join().unwrap().unwrap().payload)
        .collect();
    got.sort_unstable();
    assert_eq!(got, [0, 1, 2, 3]);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "a wake-up was lost"
    );
}

#[test]
fn close_wakes_every_blocked_pop() {
    let q: Arc<RequestQueue<u32>> = Arc::new(RequestQueue::new("send", 10));
    let start = Instant::now();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let q = Arc::clone(&q);
            thread::spawn(move || q.pop(Duration::from_secs(30)))
        })
        .collect();
    thread::sleep(ms(50));
    q.close();
    for w in workers {
        assert!(w.join().unwrap().is_none());
    }
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(q.is_closed());
}

#[test]
fn closed_queue_refuses_pushes_but_hands_out_what_it_holds() {
    let t0 = Instant::now();
    let q = queue_with(&[1, 2], t0);
    q.close();
    let rejected = q.try_push(3, t0).unwrap_err();
    assert_eq!(rejected.payload, 3);
    assert_eq!(rejected.reason, Reason::ShuttingDown);
    assert_eq!(q.pop(ms(1)).unwrap().payload, 1);
    assert_eq!(q.drain().iter().map(|t| t.payload).collect::<Vec<_>>(), [2]);
    assert!(q.pop(Duration::from_secs(30)).is_none());
}

#[test]
fn head_wait_is_the_age_of_the_oldest_task() {
    let t0 = Instant::now();
    let q = RequestQueue::new("send", 10);
    assert_eq!(q.head_wait(t0), None);
    q.try_push(1u32, t0).unwrap();
    q.try_push(2, t0 + ms(30)).unwrap();
    assert_eq!(q.head_wait(t0 + ms(100)), Some(ms(100)));
}

#[test]
fn remove_expired_takes_only_heads_that_waited_the_limit() {
    let t0 = Instant::now();
    let q = RequestQueue::new("send", 10);
    q.try_push(1u32, t0).unwrap();
    q.try_push(2, t0 + ms(50)).unwrap();
    q.try_push(3, t0 + ms(150)).unwrap();
    q.try_push(4, t0 + ms(60)).unwrap(); // old, but behind a young head
    let expired = q.remove_expired(t0 + ms(250), ms(200));
    let got: Vec<_> = expired
        .iter()
        .map(|e| (e.task.payload, e.waited, e.queue_len))
        .collect();
    assert_eq!(got, [(1, ms(250), 3), (2, ms(200), 2)]);
    assert_eq!(q.len(), 2);
    assert_eq!(q.try_pop().unwrap().payload, 3);
}

#[test]
fn remove_expired_stops_at_a_young_head() {
    let t0 = Instant::now();
    let q = queue_with(&[1, 2], t0 + ms(100));
    assert!(q.remove_expired(t0 + ms(299), ms(200)).is_empty());
    assert_eq!(q.len(), 2);
    assert!(
        q.remove_expired(t0, ms(0)).len() == 2,
        "zero limit expires all"
    );
}

#[test]
fn drain_while_stops_when_busy_turns_false() {
    let t0 = Instant::now();
    let q = queue_with(&[1, 2, 3, 4, 5], t0);
    let asked = Cell::new(0);
    let drained = q.drain_while(t0 + ms(10), || {
        asked.set(asked.get() + 1);
        asked.get() <= 2
    });
    let got: Vec<_> = drained
        .iter()
        .map(|e| (e.task.payload, e.waited, e.queue_len))
        .collect();
    assert_eq!(got, [(1, ms(10), 4), (2, ms(9), 3)]);
    assert_eq!(asked.get(), 3, "busy is asked before every removal");
    assert_eq!(q.len(), 3);
}

#[test]
fn drain_while_stops_when_the_queue_is_empty() {
    let t0 = Instant::now();
    let q = queue_with(&[1, 2], t0);
    let drained = q.drain_while(t0, || true);
    assert_eq!(drained.len(), 2);
    assert_eq!(drained[1].queue_len, 0);
    assert!(q.is_empty());
}

/// Waits (bounded) until `n` workers sit idle in `pop`.
fn until_idle(q: &RequestQueue<u32>, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while q.idle_workers() != n {
        assert!(Instant::now() < deadline, "{n} idle workers never showed");
        thread::yield_now();
    }
}

#[test]
fn an_idle_turn_is_claimed_only_from_an_idle_worker_of_an_empty_open_queue() {
    let q = Arc::new(RequestQueue::<u32>::new("send", 10));
    assert!(q.try_claim_idle().is_none(), "no worker waits");
    let worker = {
        let q = Arc::clone(&q);
        thread::spawn(move || q.pop(Duration::from_secs(30)))
    };
    until_idle(&q, 1);
    let turn = q.try_claim_idle().expect("one worker idle");
    assert_eq!(q.idle_workers(), 0);
    assert!(q.try_claim_idle().is_none(), "its turn is taken");
    drop(turn);
    assert_eq!(q.idle_workers(), 1, "given back when dropped");

    // A waiting task goes first: no turn while the queue holds one.
    let busy = RequestQueue::<u32>::new("send", 10);
    busy.try_push(1, Instant::now()).unwrap();
    assert!(busy.try_claim_idle().is_none());

    // While its turn is claimed, the idle worker leaves a new task queued;
    // giving the turn back lets it take the task.
    let turn = q.try_claim_idle().expect("one worker idle");
    q.try_push(7, Instant::now()).unwrap();
    assert_eq!(q.len(), 1, "the worker whose turn is claimed waits");
    drop(turn);
    assert_eq!(worker.join().unwrap().map(|t| t.payload), Some(7));
    let worker = {
        let q = Arc::clone(&q);
        thread::spawn(move || q.pop(Duration::from_secs(30)))
    };
    until_idle(&q, 1);
    q.close();
    assert!(q.try_claim_idle().is_none(), "a closed queue gives none");
    assert!(worker.join().unwrap().is_none());
}
