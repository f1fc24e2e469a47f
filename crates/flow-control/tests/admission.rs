//! Early admission: a request is refused at once when the queue ahead of it
//! already holds more work than its workers can finish within the limit,
//! and never before a service time has been measured.

use std::time::{Duration, Instant};

use flow_control::{Reason, RequestQueue};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const LIMIT: Duration = Duration::from_millis(200);

/// A queue of capacity 100 with `workers` workers, `queued` tasks and a
/// measured service time of `service`.
fn loaded(queued: u32, workers: usize, service: Duration) -> RequestQueue<u32> {
    let q = RequestQueue::new("send", 100);
    q.set_workers(workers);
    q.record_service_time(service);
    let t0 = Instant::now();
    for i in 0..queued {
        q.try_push(i, t0).expect("capacity 100 holds the backlog");
    }
    q
}

#[test]
fn early_admission_rejects_when_predicted_wait_exceeds_the_limit() {
    // 50 tasks x 10 ms / 2 workers = 250 ms > 200 ms.
    let q = loaded(50, 2, ms(10));
    assert_eq!(q.predicted_wait(), Some(ms(250)));
    let rejected = q
        .try_push_with_admission(999, Instant::now(), LIMIT, true)
        .unwrap_err();
    assert_eq!(rejected.payload, 999);
    assert_eq!(
        rejected.reason,
        Reason::EarlyReject {
            predicted_wait: ms(250),
            limit: LIMIT,
            queue_len: 50
        }
    );
    assert_eq!(q.len(), 50, "the rejected task was not queued");
}

#[test]
fn early_admission_admits_when_the_prediction_fits() {
    // 40 tasks x 10 ms / 2 workers = 200 ms, not more than the limit.
    let q = loaded(40, 2, ms(10));
    q.try_push_with_admission(999, Instant::now(), LIMIT, true)
        .unwrap();
    assert_eq!(q.len(), 41);
}

#[test]
fn more_workers_admit_more() {
    let q = loaded(50, 2, ms(10));
    assert!(q
        .try_push_with_admission(1, Instant::now(), LIMIT, true)
        .is_err());
    q.set_workers(4);
    assert_eq!(q.workers(), 4);
    q.try_push_with_admission(1, Instant::now(), LIMIT, true)
        .unwrap();
}

#[test]
fn early_admission_never_rejects_without_samples() {
    let q = RequestQueue::new("send", 100);
    let t0 = Instant::now();
    for i in 0..99 {
        q.try_push(i, t0).unwrap();
    }
    assert_eq!(q.avg_service_time(), None);
    assert_eq!(q.predicted_wait(), None);
    q.try_push_with_admission(99, t0, Duration::ZERO, true)
        .unwrap();
}

#[test]
fn early_admission_off_behaves_like_try_push() {
    let q = loaded(99, 1, Duration::from_secs(1));
    q.try_push_with_admission(99, Instant::now(), LIMIT, false)
        .unwrap();
    let rejected = q
        .try_push_with_admission(100, Instant::now(), LIMIT, false)
        .unwrap_err();
    assert!(matches!(rejected.reason, Reason::Overload { .. }));
}

#[test]
fn a_full_queue_reports_overload_even_with_early_admission() {
    let q = loaded(100, 1, Duration::from_secs(1));
    let rejected = q
        .try_push_with_admission(100, Instant::now(), LIMIT, true)
        .unwrap_err();
    assert_eq!(
        rejected.reason,
        Reason::Overload {
            queue_len: 100,
            capacity: 100
        }
    );
}

#[test]
fn faster_service_reopens_admission() {
    let q = loaded(50, 1, ms(10));
    assert!(q
        .try_push_with_admission(1, Instant::now(), LIMIT, true)
        .is_err());
    // The store recovers: tasks now take 1 ms, and the estimate follows.
    for _ in 0..40 {
        q.record_service_time(ms(1));
    }
    let avg = q.avg_service_time().unwrap();
    assert!(avg < Duration::from_micros(1200), "{avg:?}");
    q.try_push_with_admission(1, Instant::now(), LIMIT, true)
        .unwrap();
}

#[test]
fn a_closed_queue_reports_shutdown_before_anything_else() {
    let q = loaded(100, 1, Duration::from_secs(1));
    q.close();
    let rejected = q
        .try_push_with_admission(1, Instant::now(), LIMIT, true)
        .unwrap_err();
    assert_eq!(rejected.reason, Reason::ShuttingDown);
}
