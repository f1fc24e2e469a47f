//! Deleting a topic's ConsumeQueues while the store runs.
//!
//! The CommitLog is not touched: the topic's records stay where they are,
//! referenced by nothing, until retention deletes their files. What goes is
//! the index: the topic's queues (files and in-memory state) and its next
//! queue offsets, so that a message sent to the same name afterwards takes
//! queue offset 0.
//!
//! # Records still being indexed
//! Records of the topic appended before the deletion may not be indexed
//! yet; indexing them afterwards would bring the deleted queues back. The
//! deletion therefore
//! 1. takes the dispatch lock, so that no dispatch pass runs meanwhile;
//! 2. under the CommitLog's put lock, forgets the topic's queue offsets and
//!    reads the append end, the topic's *fence*: every record of the former
//!    topic starts below it, every record sent after it at or above it;
//! 3. writes the fences to `<storePathRootDir>/deletedtopics` (durable), so
//!    that a restart that indexes the log again skips the same records;
//! 4. removes the topic's queues from the map and deletes their files.
//!
//! The dispatch skips a record of a fenced topic below its fence. A fence is
//! forgotten once retention has deleted every CommitLog file below it.
//! Should the broker stop between steps 3 and 4, the next start deletes the
//! queues of a fenced topic whose entries lie below the fence.
//!
//! A send racing with the deletion lands either in the former topic (and is
//! deleted with it) or in the new one at queue offset 0.

use std::{
    collections::HashMap,
    fs, io,
    path::{Path, PathBuf},
    sync::{Arc, PoisonError},
};

use crate::{consume_queue::ConsumeQueue, state::Inner};

/// Name of the fence file under the store root.
const FENCE_FILE: &str = "deletedtopics";

/// The fence file of a store root.
pub(crate) fn fence_path(root: &Path) -> PathBuf {
    root.join(FENCE_FILE)
}

/// Reads the fences (`<offset> <topic>` lines); a missing file holds none.
///
/// # Errors
/// The file cannot be read or a line is malformed.
pub(crate) fn load_fences(path: &Path) -> io::Result<HashMap<String, u64>> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e),
    };
    let mut fences = HashMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let parsed = line
            .split_once(' ')
            .and_then(|(offset, topic)| Some((offset.parse::<u64>().ok()?, topic)));
        let Some((offset, topic)) = parsed else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: malformed line {line:?}", path.display()),
            ));
        };
        fences.insert(topic.to_owned(), offset);
    }
    Ok(fences)
}

/// Writes the fences atomically (a temporary file renamed over the file).
fn write_fences(path: &Path, fences: &HashMap<String, u64>) -> io::Result<()> {
    let mut lines: Vec<String> = fences.iter().map(|(t, o)| format!("{o} {t}\n")).collect();
    lines.sort();
    let tmp = path.with_extension("tmp");
    {
        use io::Write;
        let mut file = fs::File::create(&tmp)?;
        file.write_all(lines.concat().as_bytes())?;
        file.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

impl Inner {
    /// Installs the fences read at start: forgets those retention made
    /// moot and deletes queues of a fenced topic left from a deletion that
    /// did not finish. Runs before the first dispatch.
    ///
    /// # Errors
    /// A queue's files cannot be deleted or the fence file rewritten.
    pub(crate) fn install_fences(&self, mut fences: HashMap<String, u64>) -> io::Result<()> {
        let min = self.commit_log.files().min_offset();
        let before = fences.len();
        fences.retain(|_, fence| *fence > min);
        for (topic, &fence) in &fences {
            let stale: Vec<Arc<ConsumeQueue>> = self
                .queues
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .get(topic)
                .map(|by_id| {
                    by_id
                        .values()
                        .filter(|q| {
                            q.get(q.min_offset()).is_some_and(|e| {
                                u64::try_from(e.commit_log_offset).map_or(true, |o| o < fence)
                            })
                        })
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if !stale.is_empty() {
                for q in stale {
                    self.drop_queue(&q)?;
                }
                self.commit_log.forget_topic(topic);
            }
        }
        if fences.len() != before {
            write_fences(&fence_path(&self.config.store_path_root_dir), &fences)?;
        }
        *self.fences.lock().unwrap_or_else(PoisonError::into_inner) = fences;
        Ok(())
    }

    /// Deletes a topic's ConsumeQueues (see the module documentation).
    /// Returns how many queues it had.
    ///
    /// # Errors
    /// The fence file cannot be written (nothing is deleted then), or a
    /// queue file cannot be removed (the topic's queues are gone from the
    /// store's view all the same).
    pub(crate) fn delete_topic(&self, topic: &str) -> io::Result<usize> {
        let _no_dispatch = self
            .dispatch_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let fence = self.commit_log.forget_topic(topic);
        {
            let mut fences = self.fences.lock().unwrap_or_else(PoisonError::into_inner);
            let mut next = fences.clone();
            let min = self.commit_log.files().min_offset();
            next.retain(|_, f| *f > min);
            let slot = next.entry(topic.to_owned()).or_insert(0);
            *slot = (*slot).max(fence);
            write_fences(&fence_path(&self.config.store_path_root_dir), &next)?;
            *fences = next;
        }
        let removed = self
            .queues
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(topic)
            .unwrap_or_default();
        let mut first_error = None;
        for q in removed.values() {
            if let Err(e) = q.destroy_files() {
                first_error.get_or_insert(e);
            }
        }
        let dir = self.config.consume_queue_dir().join(topic);
        match fs::remove_dir_all(&dir) {
            Ok(()) => {
                if let Err(e) =
                    fs::File::open(self.config.consume_queue_dir()).and_then(|d| d.sync_all())
                {
                    first_error.get_or_insert(e);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
        tracing::info!(
            topic,
            queues = removed.len(),
            fence,
            "topic's consume queues deleted"
        );
        match first_error {
            Some(e) => Err(e),
            None => Ok(removed.len()),
        }
    }

    /// Removes one queue from the map and deletes its files.
    fn drop_queue(&self, q: &Arc<ConsumeQueue>) -> io::Result<()> {
        {
            let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
            if let Some(by_id) = queues.get_mut(q.topic()) {
                by_id.remove(&q.queue_id());
                if by_id.is_empty() {
                    queues.remove(q.topic());
                }
            }
        }
        tracing::warn!(
            topic = q.topic(),
            queue_id = q.queue_id(),
            "deleting a consume queue left from an unfinished topic deletion"
        );
        q.destroy_files()?;
        match fs::remove_dir(ConsumeQueue::dir(
            &self.config.consume_queue_dir(),
            q.topic(),
            q.queue_id(),
        )) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}
