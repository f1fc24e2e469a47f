//! Workers and the sweeper race for the same queue on real threads: every
//! task must be served exactly once or answered busy exactly once, never
//! both and never neither.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering},
        Arc,
    },
    thread,
    time::{Duration, Instant},
};

use flow_control::{FastFailure, Reason, RequestQueue};

const TASKS: usize = 20_000;
const WORKERS: usize = 3;

#[test]
fn a_task_removed_by_the_sweeper_is_never_popped() {
    let queue: Arc<RequestQueue<usize>> = Arc::new(RequestQueue::new("send", TASKS));
    let mut sweeper = FastFailure::new(Arc::clone(&queue), Duration::from_millis(2));
    let other = Arc::new(RequestQueue::new("pull", 10));
    sweeper.watch(Arc::clone(&other), Duration::from_secs(5));
    let seen: Arc<Vec<AtomicU8>> = Arc::new((0..TASKS).map(|_| AtomicU8::new(0)).collect());
    let popped = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    // The producer flips this now and then to exercise the busy drain too.
    let page_cache_busy = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (queue, seen, popped) =
                (Arc::clone(&queue), Arc::clone(&seen), Arc::clone(&popped));
            thread::spawn(move || loop {
                match queue.pop(Duration::from_millis(10)) {
                    Some(task) => {
                        seen[task.payload].fetch_add(1, Ordering::SeqCst);
                        popped.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_micros(100));
                    }
                    None if queue.is_closed() => break,
                    None => {}
                }
            })
        })
        .collect();

    let sweeping = {
        let (seen, stop, busy) = (
            Arc::clone(&seen),
            Arc::clone(&stop),
            Arc::clone(&page_cache_busy),
        );
        thread::spawn(move || {
            let mut by_reason = [0usize; 2];
            while !stop.load(Ordering::SeqCst) {
                for (task, reason) in sweeper.sweep(Instant::now(), || busy.load(Ordering::SeqCst))
                {
                    seen[task.payload].fetch_add(1, Ordering::SeqCst);
                    match reason {
                        Reason::PcBusyCleanQueue { .. } => by_reason[0] += 1,
                        Reason::TimeoutCleanQueue { waited, .. } => {
                            assert!(waited >= Duration::from_millis(2), "{waited:?}");
                            by_reason[1] += 1;
                        }
                        other => panic!("unexpected reason {other:?}"),
                    }
                }
                thread::sleep(Duration::from_micros(200));
            }
            by_reason
        })
    };

    for burst in 0..TASKS / 500 {
        for i in burst * 500..(burst + 1) * 500 {
            queue.try_push(i, Instant::now()).unwrap();
        }
        page_cache_busy.store(burst % 10 == 5, Ordering::SeqCst);
        thread::sleep(Duration::from_millis(1));
    }
    page_cache_busy.store(false, Ordering::SeqCst);
    queue.close();
    for w in workers {
        w.join().unwrap();
    }
    stop.store(true, Ordering::SeqCst);
    let [pcbusy, timed_out] = sweeping.join().unwrap();
    for task in queue.drain() {
        seen[task.payload].fetch_add(1, Ordering::SeqCst);
    }

    let popped = popped.load(Ordering::SeqCst);
    eprintln!("popped {popped}, pcbusy {pcbusy}, timed out {timed_out}");
    assert_eq!(popped + pcbusy + timed_out, TASKS);
    let wrong: Vec<_> = seen
        .iter()
        .enumerate()
        .filter(|(_, n)| n.load(Ordering::SeqCst) != 1)
        .map(|(i, n)| (i, n.load(Ordering::SeqCst)))
        .collect();
    assert!(wrong.is_empty(), "tasks not seen exactly once: {wrong:?}");
    assert!(popped > 0, "workers served nothing");
    assert!(timed_out > 0, "the sweeper expired nothing");
}
