//! Long polling: a pull that finds nothing new is parked until a message
//! arrives in its queue or its hold time passes, then served again (without
//! parking) and answered.
//!
//! Bounded three ways: at most `max` pulls are parked in all, at most
//! `max_per_connection` of one connection, and none longer than
//! [`MAX_HOLD`]; a connection's parked pulls are dropped when it closes.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use store::ArrivalWatch;

use crate::request::Job;

/// A parked pull.
#[derive(Debug)]
struct Parked {
    job: Job,
    offset: i64,
    deadline: Instant,
    /// Keeps appends dispatched at once while the pull waits.
    _watch: ArrivalWatch,
}

/// Longest a pull is held, whatever it asks for: longer than any client
/// waits for its answer (RocketMQ's clients wait 30 s).
pub const MAX_HOLD: Duration = Duration::from_secs(60);

/// Pulls waiting for messages, by topic and queue.
#[derive(Debug)]
pub struct PullHold {
    parked: Mutex<HashMap<(String, i32), Vec<Parked>>>,
    /// Parked pulls per remoting connection.
    per_connection: Mutex<HashMap<u64, usize>>,
    count: AtomicUsize,
    max: usize,
    max_per_connection: usize,
}

impl PullHold {
    /// A table holding at most `max` pulls at once, at most
    /// `max_per_connection` of them from one connection.
    pub fn new(max: usize, max_per_connection: usize) -> Self {
        Self {
            parked: Mutex::new(HashMap::new()),
            per_connection: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            max,
            max_per_connection,
        }
    }

    /// Parks a pull that waits for `offset` in a queue for up to `hold`
    /// (at most [`MAX_HOLD`]), holding `watch` (from the store's
    /// `watch_arrivals`) while it waits. Gives the job back when the table,
    /// or its connection's share of it, is full.
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
        watch: ArrivalWatch,
    ) -> Result<(), Box<Job>> {
        if self.count.load(Ordering::Relaxed) >= self.max {
            return Err(Box::new(job));
        }
        if let Some(conn) = job.reply.connection_id() {
            let mut per = self.per_connection();
            let n = per.entry(conn).or_default();
            if *n >= self.max_per_connection {
                return Err(Box::new(job));
            }
            *n += 1;
        }
        let parked = Parked {
            job,
            offset,
            deadline: Instant::now() + hold.min(MAX_HOLD),
            _watch: watch,
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
        drop(table);
        self.count.fetch_sub(ready.len(), Ordering::Relaxed);
        self.released(ready.iter().map(|p| &p.job));
        ready.into_iter().map(|p| p.job).collect()
    }

    /// Drops the pulls parked by a closed connection: nobody reads their
    /// answers. Returns how many there were.
    pub fn connection_closed(&self, conn_id: u64) -> usize {
        if self.per_connection().remove(&conn_id).is_none() {
            return 0;
        }
        let mut dropped = 0;
        self.lock().retain(|_, list| {
            let before = list.len();
            list.retain(|p| p.job.reply.connection_id() != Some(conn_id));
            dropped += before - list.len();
            !list.is_empty()
        });
        self.count.fetch_sub(dropped, Ordering::Relaxed);
        dropped
    }

    /// Parked pulls of one connection.
    pub fn of_connection(&self, conn_id: u64) -> usize {
        self.per_connection().get(&conn_id).copied().unwrap_or(0)
    }

    fn released<'a>(&self, jobs: impl Iterator<Item = &'a Job>) {
        let mut per = self.per_connection();
        for job in jobs {
            if let Some(conn) = job.reply.connection_id() {
                if let Some(n) = per.get_mut(&conn) {
                    *n -= 1;
                    if *n == 0 {
                        per.remove(&conn);
                    }
                }
            }
        }
    }

    fn per_connection(&self) -> std::sync::MutexGuard<'_, HashMap<u64, usize>> {
        self.per_connection
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
        drop(table);
        self.count.fetch_sub(out.len(), Ordering::Relaxed);
        self.released(out.iter());
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
        self.per_connection().clear();
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
