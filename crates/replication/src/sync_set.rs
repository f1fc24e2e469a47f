//! The master's view of its replicas: which are in sync, how far each has
//! acknowledged, and the confirm offset that follows from both.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{Mutex, PoisonError},
    time::Duration,
};

use tokio::sync::watch;

/// The in-sync replica set of a master and its replicas' acknowledgements.
#[derive(Debug)]
pub struct SyncSet {
    master_id: i64,
    inner: Mutex<Inner>,
    confirm: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Broker ids in sync, the master's included.
    members: BTreeSet<i64>,
    /// The highest offset each replica acknowledged (survives its
    /// disconnection).
    acks: BTreeMap<i64, u64>,
    /// The master's own CommitLog end.
    master_end: u64,
}

impl SyncSet {
    /// A set holding only the master `master_id`, whose log ends at `end`.
    pub fn new(master_id: i64, end: u64) -> Self {
        let (confirm, _) = watch::channel(end);
        Self {
            master_id,
            inner: Mutex::new(Inner {
                members: BTreeSet::from([master_id]),
                acks: BTreeMap::new(),
                master_end: end,
            }),
            confirm,
        }
    }

    /// The master's broker id.
    pub fn master_id(&self) -> i64 {
        self.master_id
    }

    /// Replaces the members (the master always stays one); the confirm
    /// offset is recomputed.
    pub fn set_members(&self, members: impl IntoIterator<Item = i64>) {
        let mut inner = self.lock();
        inner.members = members.into_iter().collect();
        inner.members.insert(self.master_id);
        self.recompute(&inner);
    }

    /// Adds `replica` to the members.
    pub fn add_member(&self, replica: i64) {
        let mut inner = self.lock();
        if inner.members.insert(replica) {
            self.recompute(&inner);
        }
    }

    /// Takes `replica` out of the members (never the master).
    pub fn remove_member(&self, replica: i64) {
        let mut inner = self.lock();
        if replica != self.master_id && inner.members.remove(&replica) {
            self.recompute(&inner);
        }
    }

    /// Whether `replica` is a member.
    pub fn is_member(&self, replica: i64) -> bool {
        self.lock().members.contains(&replica)
    }

    /// Whether any replica besides the master is a member.
    pub fn has_replicas(&self) -> bool {
        self.lock().members.len() > 1
    }

    /// The members, the master's included.
    pub fn members(&self) -> BTreeSet<i64> {
        self.lock().members.clone()
    }

    /// The offset `replica` acknowledged last, if any.
    pub fn ack_of(&self, replica: i64) -> Option<u64> {
        self.lock().acks.get(&replica).copied()
    }

    /// Records that `replica` holds everything below `offset`.
    pub fn acknowledge(&self, replica: i64, offset: u64) {
        let mut inner = self.lock();
        let ack = inner.acks.entry(replica).or_insert(0);
        *ack = (*ack).max(offset);
        self.recompute(&inner);
    }

    /// Records the master's own end after appends.
    pub fn master_wrote(&self, end: u64) {
        let mut inner = self.lock();
        inner.master_end = inner.master_end.max(end);
        self.recompute(&inner);
    }

    /// Forgets what a replica acknowledged (it was cut below it).
    pub fn reset_ack(&self, replica: i64, offset: u64) {
        let mut inner = self.lock();
        inner.acks.insert(replica, offset);
        self.recompute(&inner);
    }

    /// The confirm offset: every byte below it is on every member.
    pub fn confirm_offset(&self) -> u64 {
        *self.confirm.borrow()
    }

    /// Waits until the confirm offset reaches `offset`; false after
    /// `timeout`.
    pub async fn wait_confirmed(&self, offset: u64, timeout: Duration) -> bool {
        let mut rx = self.confirm.subscribe();
        let reached = tokio::time::timeout(timeout, rx.wait_for(|&c| c >= offset))
            .await
            .is_ok_and(|r| r.is_ok());
        reached
    }

    /// A receiver of every change of the confirm offset.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.confirm.subscribe()
    }

    fn recompute(&self, inner: &Inner) {
        let confirm = inner
            .members
            .iter()
            .filter(|&&id| id != self.master_id)
            .map(|id| inner.acks.get(id).copied().unwrap_or(0))
            .fold(inner.master_end, u64::min);
        self.confirm.send_if_modified(|c| {
            let changed = *c != confirm;
            *c = confirm;
            changed
        });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_confirm_offset_is_the_lowest_member_ack() {
        let set = SyncSet::new(0, 100);
        // Alone: everything the master wrote.
        assert_eq!(set.confirm_offset(), 100);
        set.set_members([0, 1, 2]);
        assert_eq!(set.confirm_offset(), 0);
        set.acknowledge(1, 80);
        set.acknowledge(2, 60);
        assert_eq!(set.confirm_offset(), 60);
        set.acknowledge(2, 120);
        assert_eq!(set.confirm_offset(), 80);
        // An older acknowledgement changes nothing.
        set.acknowledge(1, 10);
        assert_eq!(set.confirm_offset(), 80);
        // Capped by the master's end.
        set.acknowledge(1, 200);
        assert_eq!(set.confirm_offset(), 100);
        set.master_wrote(150);
        assert_eq!(set.confirm_offset(), 120);
        // A replica that leaves the set no longer holds it back; a
        // non-member's acknowledgement counts for nothing.
        set.set_members([0, 1]);
        assert_eq!(set.confirm_offset(), 150);
        set.acknowledge(3, 1);
        assert_eq!(set.confirm_offset(), 150);
    }

    #[tokio::test]
    async fn waiting_ends_when_the_offset_is_confirmed_or_time_is_up() {
        let set = std::sync::Arc::new(SyncSet::new(0, 0));
        set.set_members([0, 1]);
        set.master_wrote(50);
        assert!(!set.wait_confirmed(50, Duration::from_millis(20)).await);
        let waiter = {
            let set = std::sync::Arc::clone(&set);
            tokio::spawn(async move { set.wait_confirmed(50, Duration::from_secs(30)).await })
        };
        set.acknowledge(1, 50);
        assert!(waiter.await.unwrap());
    }
}
