//! The inside of a request queue: one FIFO per share (a topic, a client, a
//! consumer group: whatever key the caller gives), served by deficit round
//! robin, so that a flood on one key only fills its own share.
//!
//! # Scheduling
//! Two lists of shares, as FQ-CoDel keeps them: new and old. A share that
//! gets a task while on neither list joins the back of the new list with a
//! full quantum (its weight; every task costs one). Workers take from the
//! front of the new list, else of the old one. A share whose quantum is
//! spent goes to the back of the old list with a fresh one. A share found
//! empty at the front of the new list moves to the old list; found empty
//! at the front of the old list, it leaves. So a sparse share (a quiet topic whose sends find it
//! empty) is served at the next pop, ahead of the busy shares, while a
//! share can only be new again after a pass through the old list: no share
//! waits more than two turns of each other share (`2 x` the sum of their
//! weights pops), and busy shares get pops in proportion to their weights.
//!
//! # Bounds
//! At most `max_shares` keys have a share of their own. A new key past that
//! takes over a share that is empty and on no list (its key is forgotten);
//! when none is, it goes to the overflow share, slot 0, which is also the
//! share of tasks pushed without a key.

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::{Duration, Instant},
};

use crate::sojourn::Sojourn;

/// The name the overflow share (and the keyless share) reports.
pub const OVERFLOW_SHARE: &str = "";

/// The figures of one share at a moment, for metrics and admin answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareFigures {
    /// The share's key; [`OVERFLOW_SHARE`] for the overflow share.
    pub key: Arc<str>,
    /// Tasks waiting in it.
    pub len: usize,
    /// Bytes of those tasks.
    pub bytes: usize,
    /// How long its oldest task has waited.
    pub head_wait: Option<Duration>,
    /// Its weight (tasks per round).
    pub weight: u32,
    /// Whether adaptive admission is shedding its arrivals.
    pub shedding: bool,
    /// Tasks taken from it by workers since the share was made.
    pub served: u64,
}

/// A queued request and the instant it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Task<T> {
    /// The request.
    pub payload: T,
    /// When the request was pushed.
    pub arrived: Instant,
    /// Its size as given when pushed (0 for tasks pushed without one).
    pub bytes: usize,
}

impl<T> Task<T> {
    /// How long the task has waited at `now` (zero if `now` is earlier than
    /// its arrival).
    pub fn waited(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.arrived)
    }
}

#[derive(Debug)]
pub(crate) struct Share<T> {
    pub key: Arc<str>,
    pub tasks: VecDeque<Task<T>>,
    pub bytes: usize,
    pub weight: u32,
    /// Pops left in the current turn.
    deficit: u32,
    /// On the new or the old list.
    listed: bool,
    pub sojourn: Sojourn,
    pub served: u64,
}

impl<T> Share<T> {
    fn new(key: Arc<str>, weight: u32) -> Self {
        Self {
            key,
            tasks: VecDeque::new(),
            bytes: 0,
            weight: weight.max(1),
            deficit: 0,
            listed: false,
            sojourn: Sojourn::new(),
            served: 0,
        }
    }

    pub fn head_wait(&self, now: Instant) -> Option<Duration> {
        self.tasks.front().map(|t| t.waited(now))
    }
}

/// Every share of a queue, the new and old lists, and the totals.
#[derive(Debug)]
pub(crate) struct Shares<T> {
    slots: Vec<Share<T>>,
    keys: HashMap<Arc<str>, usize>,
    new: VecDeque<usize>,
    old: VecDeque<usize>,
    /// Shares holding tasks.
    nonempty: usize,
    weights: HashMap<Arc<str>, u32>,
    /// The slot `slot_for` returned last.
    last: usize,
    pub max_shares: usize,
    /// Tasks in every share.
    pub len: usize,
    /// Bytes in every share.
    pub bytes: usize,
}

impl<T> Shares<T> {
    pub fn new(max_shares: usize) -> Self {
        Self {
            slots: vec![Share::new(Arc::from(OVERFLOW_SHARE), 1)],
            keys: HashMap::new(),
            new: VecDeque::new(),
            old: VecDeque::new(),
            nonempty: 0,
            weights: HashMap::new(),
            last: 0,
            max_shares,
            len: 0,
            bytes: 0,
        }
    }

    /// The slot of `key`'s share, making one if the bounds allow; slot 0
    /// (the overflow share) otherwise.
    pub fn slot_for(&mut self, key: &str) -> usize {
        if key == OVERFLOW_SHARE {
            return 0;
        }
        // Consecutive requests mostly come from the same key: compare
        // before hashing.
        if *self.slots[self.last].key == *key && self.last != 0 {
            return self.last;
        }
        if let Some(&slot) = self.keys.get(key) {
            self.last = slot;
            return slot;
        }
        let key: Arc<str> = Arc::from(key);
        let weight = self.weights.get(&key).copied().unwrap_or(1);
        if self.keys.len() < self.max_shares {
            self.slots.push(Share::new(Arc::clone(&key), weight));
            let slot = self.slots.len() - 1;
            self.keys.insert(key, slot);
            return slot;
        }
        // Take over an empty share; its key starts afresh when it returns.
        let Some(slot) = (1..self.slots.len())
            .find(|&i| self.slots[i].tasks.is_empty() && !self.slots[i].listed)
        else {
            return 0;
        };
        let old = std::mem::replace(&mut self.slots[slot], Share::new(Arc::clone(&key), weight));
        self.keys.remove(&old.key);
        self.keys.insert(key, slot);
        slot
    }

    pub fn share(&self, slot: usize) -> &Share<T> {
        &self.slots[slot]
    }

    pub fn share_mut(&mut self, slot: usize) -> &mut Share<T> {
        &mut self.slots[slot]
    }

    /// Shares with waiting tasks.
    pub fn active(&self) -> usize {
        self.nonempty
    }

    /// Appends a task to a share.
    pub fn push(&mut self, slot: usize, task: Task<T>) {
        let share = &mut self.slots[slot];
        share.bytes += task.bytes;
        self.bytes += task.bytes;
        self.len += 1;
        if share.tasks.is_empty() {
            self.nonempty += 1;
        }
        share.tasks.push_back(task);
        if !share.listed {
            share.listed = true;
            share.deficit = share.weight;
            self.new.push_back(slot);
        }
    }

    /// Takes the next task in deficit-round-robin order (new list first),
    /// with its slot and whether its share is now empty.
    pub fn pop(&mut self) -> Option<(Task<T>, usize, bool)> {
        loop {
            let (from_new, slot) = match (self.new.front(), self.old.front()) {
                (Some(&slot), _) => (true, slot),
                (None, Some(&slot)) => (false, slot),
                (None, None) => return None,
            };
            let Some(task) = self.take_head(slot) else {
                // Empty: from the new list to the old one, or off the lists.
                self.unlist_front(from_new);
                if from_new {
                    self.old.push_back(slot);
                } else {
                    self.slots[slot].listed = false;
                }
                continue;
            };
            let share = &mut self.slots[slot];
            share.served += 1;
            share.deficit = share.deficit.saturating_sub(1);
            let emptied = share.tasks.is_empty();
            if share.deficit == 0 {
                // Its turn is over: to the back of the old list.
                share.deficit = share.weight;
                self.unlist_front(from_new);
                self.old.push_back(slot);
            }
            return Some((task, slot, emptied));
        }
    }

    fn unlist_front(&mut self, from_new: bool) {
        if from_new {
            self.new.pop_front();
        } else {
            self.old.pop_front();
        }
    }

    /// Takes the head of one share (the sweeper's expiry); the share stays
    /// on its list until the round robin finds it empty.
    pub fn pop_from(&mut self, slot: usize) -> Option<Task<T>> {
        self.take_head(slot)
    }

    fn take_head(&mut self, slot: usize) -> Option<Task<T>> {
        let share = &mut self.slots[slot];
        let task = share.tasks.pop_front()?;
        share.bytes -= task.bytes;
        self.bytes -= task.bytes;
        self.len -= 1;
        if share.tasks.is_empty() {
            self.nonempty -= 1;
        }
        Some(task)
    }

    /// The slots of the shares with waiting tasks, in list order.
    pub fn active_slots(&self) -> Vec<usize> {
        self.new
            .iter()
            .chain(&self.old)
            .copied()
            .filter(|&s| !self.slots[s].tasks.is_empty())
            .collect()
    }

    /// Every task of every share, each share oldest first.
    pub fn drain(&mut self) -> Vec<Task<T>> {
        let mut out = Vec::with_capacity(self.len);
        while let Some((task, _, _)) = self.pop() {
            out.push(task);
        }
        out
    }

    /// The oldest waiting task's wait, over every share.
    pub fn head_wait(&self, now: Instant) -> Option<Duration> {
        self.new
            .iter()
            .chain(&self.old)
            .filter_map(|&s| self.slots[s].head_wait(now))
            .max()
    }

    /// Sets the weights of keys (missing keys weigh 1), for shares now and
    /// later.
    pub fn set_weights(&mut self, weights: HashMap<Arc<str>, u32>) {
        for share in &mut self.slots {
            share.weight = weights.get(&share.key).copied().unwrap_or(1).max(1);
        }
        self.weights = weights;
    }

    pub fn figures(&self, now: Instant, shedding: impl Fn(&Sojourn) -> bool) -> Vec<ShareFigures> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(i, s)| *i == 0 || self.keys.get(&s.key) == Some(i))
            .map(|(_, s)| ShareFigures {
                key: Arc::clone(&s.key),
                len: s.tasks.len(),
                bytes: s.bytes,
                head_wait: s.head_wait(now),
                weight: s.weight,
                shedding: shedding(&s.sojourn),
                served: s.served,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(n: u32, at: Instant) -> Task<u32> {
        Task {
            payload: n,
            arrived: at,
            bytes: 1,
        }
    }

    #[test]
    fn a_share_that_turns_busy_again_is_served_next() {
        let t = Instant::now();
        let mut s = Shares::new(8);
        let (busy, sparse) = (s.slot_for("busy"), s.slot_for("sparse"));
        for n in 0..10 {
            s.push(busy, task(n, t));
        }
        assert_eq!(s.pop().map(|p| p.0.payload), Some(0));
        assert_eq!(s.pop().map(|p| p.0.payload), Some(1));
        s.push(sparse, task(100, t));
        assert_eq!(s.pop().map(|p| p.0.payload), Some(100), "sparse goes first");
        assert_eq!(s.pop().map(|p| p.0.payload), Some(2));
        // Busy again at once: it is served first again, but only after the
        // busy share got its turn in between.
        s.push(sparse, task(101, t));
        assert_eq!(s.pop().map(|p| p.0.payload), Some(101));
        s.push(sparse, task(102, t));
        assert_eq!(s.pop().map(|p| p.0.payload), Some(3));
        assert_eq!(s.pop().map(|p| p.0.payload), Some(102));
    }

    #[test]
    fn shares_are_served_in_turn_and_each_in_order() {
        let t = Instant::now();
        let mut s = Shares::new(8);
        let (a, b) = (s.slot_for("a"), s.slot_for("b"));
        for n in 0..4 {
            s.push(a, task(n, t));
        }
        s.push(b, task(100, t));
        s.push(b, task(101, t));
        let order: Vec<u32> = std::iter::from_fn(|| s.pop().map(|p| p.0.payload)).collect();
        assert_eq!(order, [0, 100, 1, 101, 2, 3]);
        assert_eq!((s.len, s.bytes, s.active()), (0, 0, 0));
    }

    #[test]
    fn past_the_bound_empty_shares_are_taken_over_then_the_overflow_share_is_used() {
        let t = Instant::now();
        let mut s = Shares::new(2);
        let a = s.slot_for("a");
        let b = s.slot_for("b");
        s.push(a, task(1, t));
        let c = s.slot_for("c");
        assert_eq!(c, b, "b was empty and is taken over");
        s.push(c, task(2, t));
        assert_eq!(s.slot_for("d"), 0, "no empty share: overflow");
        assert_eq!(s.slot_for("a"), a);
        let keys: Vec<_> = s
            .figures(t, |_| false)
            .iter()
            .map(|f| f.key.to_string())
            .collect();
        assert_eq!(keys, ["", "a", "c"]);
    }

    #[test]
    fn popping_a_share_head_leaves_the_lists_consistent() {
        let t = Instant::now();
        let mut s = Shares::new(4);
        let (a, b) = (s.slot_for("a"), s.slot_for("b"));
        s.push(a, task(1, t));
        s.push(b, task(2, t));
        assert_eq!(s.pop_from(a).map(|t| t.payload), Some(1));
        assert_eq!(s.active_slots(), [b]);
        assert_eq!(s.pop().map(|p| p.0.payload), Some(2));
        assert!(s.pop().is_none());
    }
}
