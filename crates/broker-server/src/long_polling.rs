//! Long polling: a pull that finds nothing new is parked until a message
//! arrives in its queue or its hold time passes, then served again (without
//! parking) and answered.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use crate::request::Job;

/// A parked pull.
#[derive(Debug)]
struct Parked {
    job: Job,
    offset: i64,
    deadline: Instant,
}

/// Pulls waiting for messages, by topic and queue.
#[derive(Debug)]
pub struct PullHold {
    parked: Mutex<HashMap<(String, i32), Vec<Parked>>>,
    count: AtomicUsize,
    max: usize,
}

impl PullHold {
    /// A table holding at most `max` pulls at once.
    pub fn new(max: usize) -> Self {
        Self {
            parked: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            max,
        }
    }

    /// Parks a pull that waits for `offset` in a queue for up to `hold`.
    /// Gives the job back when the table is full.
    ///
    /// # Errors
    /// The job, when no more pulls may wait.
    pub fn park(
        &self,
        job: Job,
        topic: &str,
        queue_id: i32,
        offset: i64,
        hold: Duration,
    ) -> Result<(), Box<Job>> {
        if self.count.load(Ordering::Relaxed) >= self.max {
            return Err(Box::new(job));
        }
        let parked = Parked {
            job,
            offset,
            deadline: Instant::now() + hold,
        };
        self.lock()
            .entry((topic.to_owned(), queue_id))
            .or_default()
            .push(parked);
        self.count.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Takes the pulls of a queue that a new end offset can now serve.
    pub fn arrived(&self, topic: &str, queue_id: i32, max_offset: i64) -> Vec<Job> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let mut table = self.lock();
        let key = (topic.to_owned(), queue_id);
        let Some(list) = table.get_mut(&key) else {
            return Vec::new();
        };
        let (ready, waiting): (Vec<Parked>, Vec<Parked>) =
            list.drain(..).partition(|p| p.offset < max_offset);
        *list = waiting;
        if list.is_empty() {
            table.remove(&key);
        }
        self.count.fetch_sub(ready.len(), Ordering::Relaxed);
        ready.into_iter().map(|p| p.job).collect()
    }

    /// Takes the pulls whose hold time has passed.
    pub fn expired(&self, now: Instant) -> Vec<Job> {
        if self.count.load(Ordering::Relaxed) == 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        let mut table = self.lock();
        table.retain(|_, list| {
            let (done, waiting): (Vec<Parked>, Vec<Parked>) =
                list.drain(..).partition(|p| p.deadline <= now);
            out.extend(done.into_iter().map(|p| p.job));
            *list = waiting;
            !list.is_empty()
        });
        self.count.fetch_sub(out.len(), Ordering::Relaxed);
        out
    }

    /// Takes every parked pull (shutdown).
    pub fn drain(&self) -> Vec<Job> {
        let mut table = self.lock();
        let out: Vec<Job> = table
            .drain()
            .flat_map(|(_, l)| l.into_iter().map(|p| p.job))
            .collect();
        self.count.store(0, Ordering::Relaxed);
        out
    }

    /// Number of parked pulls.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Reports whether no pull is parked.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, i32), Vec<Parked>>> {
        self.parked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
