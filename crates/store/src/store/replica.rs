//! The store's side of replication: a replica's appends of its master's
//! bytes and cuts of its own, the confirm offset that holds consumers back,
//! and taking up appends after replication.

use std::sync::{atomic::Ordering, Arc};

use bytes::Bytes;

use super::MessageStore;
use crate::{
    error::{PutError, ReplicaAppendError},
    state::AppendListener,
};

impl MessageStore {
    /// Appends CommitLog bytes a master sent, verbatim, at `offset` (this
    /// log's end); they become visible to consumers once below the confirm
    /// offset. Returns the new end.
    ///
    /// # Errors
    /// [`ReplicaAppendError`]; nothing is stored then.
    pub fn append_replicated(&self, offset: u64, data: &[u8]) -> Result<u64, ReplicaAppendError> {
        if !self.inner.config.replicated {
            return Err(ReplicaAppendError::Refused(PutError::ServiceNotAvailable {
                reason: "this store is not replicated".into(),
            }));
        }
        if self.inner.shutting_down.load(Ordering::Acquire) {
            return Err(ReplicaAppendError::Refused(PutError::ServiceNotAvailable {
                reason: "message store is shutting down".into(),
            }));
        }
        let end = self.inner.commit_log.append_replicated(offset, data)?;
        if self.inner.pool.is_some() {
            self.inner.commit.wake();
        }
        if self.inner.arrival.watched() {
            self.inner.reput.wake();
        }
        Ok(end)
    }

    /// Up to `max` readable CommitLog bytes from `offset`, never past the
    /// end of the file holding it (what a master sends a replica); `None`
    /// when nothing is readable there.
    pub fn commit_log_bytes(&self, offset: u64, max: usize) -> Option<Bytes> {
        let files = self.inner.commit_log.files();
        let file = files.find(offset)?;
        let pos = usize::try_from(offset - file.from_offset()).ok()?;
        let len = file.committed().checked_sub(pos)?.min(max);
        if len == 0 {
            return None;
        }
        self.inner.commit_log.read(offset, len)
    }

    /// Cuts a replica's CommitLog at `offset` (bytes at and after it go),
    /// where it stops agreeing with its master's. Messages already given
    /// to consumers past the cut leave the ConsumeQueues and IndexFiles
    /// too (their consumers were shown messages the group lost), and the
    /// queues' next offsets go back. Returns the new end.
    ///
    /// # Errors
    /// The store is not replicated, or the cut failed.
    pub fn truncate_replicated(&self, offset: u64) -> Result<u64, PutError> {
        if !self.inner.config.replicated {
            return Err(PutError::ServiceNotAvailable {
                reason: "this store is not replicated".into(),
            });
        }
        let _pass = self
            .inner
            .dispatch_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dispatched = self.inner.reput_from.load(Ordering::Acquire);
        if dispatched > offset {
            let cut_failed = |e: std::io::Error| PutError::ServiceNotAvailable {
                reason: format!("cannot cut the ConsumeQueues at {offset}: {e}"),
            };
            let mut queues = 0;
            for q in self.inner.all_queues() {
                if q.cut_at(offset).map_err(cut_failed)? {
                    queues += 1;
                }
            }
            // IndexFiles past the cut go whole; what they held below it is
            // indexed again by the dispatch, which starts over from there
            // (ConsumeQueue entries it writes again are skipped).
            let redo = self
                .inner
                .index
                .cut_at(offset)
                .unwrap_or(offset)
                .min(offset)
                .max(self.inner.commit_log.files().min_offset());
            self.inner.reput_from.store(redo, Ordering::Release);
            self.inner
                .commit_log
                .reset_queue_offsets(self.inner.queue_ends());
            tracing::warn!(
                cut = offset,
                dispatched,
                queues,
                reindex_from = redo,
                "consumers were shown messages past the cut: they leave the consume queues and indexes"
            );
        }
        let end = self.inner.commit_log.truncate(offset)?;
        self.inner.confirm_offset.fetch_min(end, Ordering::AcqRel);
        self.inner.checkpoint.set_confirm_phy_offset(
            i64::try_from(self.inner.confirm_offset.load(Ordering::Acquire)).unwrap_or(i64::MAX),
        );
        Ok(end)
    }

    /// Makes a replica ready to take appends of its own (it becomes the
    /// master): an incomplete record at the end is cut and each queue's
    /// next offset follows the records replication wrote. Returns the log's
    /// end.
    ///
    /// # Errors
    /// As [`MessageStore::truncate_replicated`].
    pub fn resume_appends(&self) -> Result<u64, PutError> {
        let _pass = self
            .inner
            .dispatch_lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Queues hold the dispatched records; the scan covers the rest.
        self.inner
            .commit_log
            .raise_queue_offsets(self.inner.queue_ends());
        let from = self.inner.reput_from.load(Ordering::Acquire);
        let fences = self
            .inner
            .fences
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let end = self.inner.commit_log.resume_appends(from, &fences)?;
        self.inner.confirm_offset.fetch_min(end, Ordering::AcqRel);
        Ok(end)
    }

    /// Sets the listener told the CommitLog's end after every local append;
    /// false (and nothing changes) when one is set already.
    pub fn set_append_listener(&self, listener: Arc<AppendListener>) -> bool {
        self.inner.append_listener.set(listener)
    }

    /// Refuses local appends with `reason` (this store is a replica and
    /// takes only its master's bytes), or takes them again with `None`.
    pub fn refuse_local_appends(&self, reason: Option<String>) {
        self.inner.commit_log.refuse_local_appends(reason);
    }

    /// Refuses local appends from `until` on, checked at each append (a
    /// master's lease); `None` lifts the deadline.
    pub fn set_local_append_deadline(&self, until: Option<std::time::Instant>) {
        self.inner.commit_log.set_local_append_deadline(until);
    }

    /// The replication confirm offset (what consumers may see), `None`
    /// when the store is not replicated.
    pub fn confirm_offset(&self) -> Option<u64> {
        self.inner
            .config
            .replicated
            .then(|| self.inner.confirm_offset.load(Ordering::Acquire))
    }

    /// Moves the confirm offset, capped at the log's end, and lets dispatch
    /// go up to it; kept in the checkpoint. Does nothing on a store that is
    /// not replicated.
    pub fn set_confirm_offset(&self, offset: u64) {
        if !self.inner.config.replicated {
            return;
        }
        let capped = offset.min(self.inner.commit_log.files().max_wrote_offset());
        let before = self.inner.confirm_offset.swap(capped, Ordering::AcqRel);
        self.inner
            .checkpoint
            .set_confirm_phy_offset(i64::try_from(capped).unwrap_or(i64::MAX));
        if capped > before {
            self.inner.reput.wake();
        }
    }
}
