//! The CommitLog's side of replication: a master's bytes appended
//! verbatim, a divergent tail cut, and queue offsets taken up after
//! replication wrote the log.

use std::{
    collections::HashMap,
    sync::{atomic::Ordering, Arc},
};

use message_model::record;

use super::{is_half_or_rollback, CommitLog};
use crate::error::{PutError, ReplicaAppendError};

impl CommitLog {
    /// Appends bytes a master sent, verbatim, at `offset`, which must be
    /// this log's end (or, for an empty log, the start of a file). The
    /// bytes may end inside a record; they must not cross a file's end.
    /// Returns the new end.
    ///
    /// # Errors
    /// [`ReplicaAppendError`]; nothing is stored then.
    pub fn append_replicated(&self, offset: u64, data: &[u8]) -> Result<u64, ReplicaAppendError> {
        self.check_writable()?;
        let mut held = self.lock();
        let state = &mut held.guard;
        let end = self.files.max_wrote_offset();
        let size = self.files.file_size() as u64;
        let empty = self.files.count() == 0;
        if offset != end && !(empty && offset.is_multiple_of(size)) {
            return Err(ReplicaAppendError::NotContiguous {
                expected: end,
                got: offset,
            });
        }
        if data.is_empty() {
            return Ok(offset);
        }
        if state.current.is_none() {
            state.current = self.files.last();
        }
        let has_room = state.current.as_ref().is_some_and(|f| !f.is_full());
        if !has_room {
            let file = self
                .files
                .create_next(offset)
                .map_err(|e| self.creation_failed(offset, e))?;
            state.current = Some(file);
        }
        let file = state
            .current
            .as_ref()
            .ok_or_else(|| PutError::CreateMappedFileFailed {
                reason: "no CommitLog file to append to".into(),
            })?;
        if data.len() > file.remaining() {
            return Err(ReplicaAppendError::CrossesFile {
                offset,
                len: data.len(),
                file_start: file.from_offset(),
            });
        }
        let file = Arc::clone(file);
        self.append_to(&file, data)?;
        Ok(offset + data.len() as u64)
    }

    /// Cuts the log at `offset` (bytes at and after it go), keeping appends
    /// out meanwhile. Returns the new end.
    ///
    /// # Errors
    /// The log uses pool buffers, or a file cannot be cut (appends stop
    /// then, as after any failed write).
    pub fn truncate(&self, offset: u64) -> Result<u64, PutError> {
        let mut held = self.lock();
        if self.files.uses_pool() {
            return Err(PutError::ServiceNotAvailable {
                reason: "a CommitLog with transientStorePoolEnable cannot be truncated".into(),
            });
        }
        let end = self.files.max_wrote_offset();
        if offset >= end {
            return Ok(end);
        }
        held.guard.current = None;
        if let Err(e) = self.files.truncate(offset) {
            let reason = format!("cannot cut the CommitLog at {offset}: {e}");
            self.poison(reason.clone());
            return Err(PutError::ServiceNotAvailable { reason });
        }
        let end = self.files.max_wrote_offset();
        self.wrote_end.store(end, Ordering::Release);
        Ok(end)
    }

    /// Takes up appends after replication wrote the log: cuts a record left
    /// incomplete at the end, and sets each queue's next offset past the
    /// records from `from` (a record boundary, where the ConsumeQueues
    /// stop) on, except records of deleted topics below their `fences`.
    /// Returns the log's end.
    ///
    /// # Errors
    /// As [`CommitLog::truncate`].
    pub fn resume_appends(
        &self,
        from: u64,
        fences: &HashMap<String, u64>,
    ) -> Result<u64, PutError> {
        let mut complete_to = from;
        {
            let mut held = self.lock();
            let mut at = from;
            'files: while let Some(file) = self.files.find(at) {
                let data = file.committed_bytes();
                let mut pos = usize::try_from(at - file.from_offset()).unwrap_or(usize::MAX);
                while pos < data.len() {
                    match record::check(&data[pos..], false) {
                        record::Record::Message(m) => {
                            // A deleted topic's former records hold no offsets.
                            let fenced = fences.get(m.topic).is_some_and(|&f| {
                                u64::try_from(m.physical_offset).map_or(true, |o| o < f)
                            });
                            if !fenced
                                && !is_half_or_rollback(m.sys_flag)
                                && held.guard.next_queue_offset(m.topic, m.queue_id)
                                    <= m.queue_offset
                            {
                                held.guard.advance(m.topic, m.queue_id, m.queue_offset + 1);
                            }
                            pos += m.total_size;
                            complete_to = file.from_offset() + pos as u64;
                        }
                        record::Record::Blank => {
                            complete_to = file.from_offset() + file.size() as u64;
                            at = complete_to;
                            continue 'files;
                        }
                        record::Record::End | record::Record::Invalid(_) => break 'files,
                    }
                }
                if pos < file.size() {
                    break;
                }
                at = file.from_offset() + file.size() as u64;
            }
        }
        let end = self.files.max_wrote_offset();
        if complete_to < end {
            tracing::warn!(
                from = complete_to,
                to = end,
                "cutting an incomplete record at the end of the replicated CommitLog"
            );
            return self.truncate(complete_to);
        }
        Ok(end)
    }
}
