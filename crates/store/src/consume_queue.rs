//! The ConsumeQueue: per topic and queue, one 20-byte entry per message
//! (`commitLogOffset i64 | size i32 | tagsCode i64`), entry `n` at byte `n * 20`.
//!
//! # Invariants
//! - One writer (the dispatch thread, or recovery before sharing).
//! - An entry is written at the position of its queue offset, so
//!   dispatching the same message twice changes nothing.

use std::{
    io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicI64, Ordering},
        Arc,
    },
};

use crate::{
    file_queue::{FileFactory, FileQueue},
    mmap::{AppendError, MappedFile},
};

/// Size of one entry.
pub const ENTRY_SIZE: usize = 20;

/// One ConsumeQueue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    /// Physical offset of the message in the CommitLog.
    pub commit_log_offset: i64,
    /// Size of the message record.
    pub size: i32,
    /// Tag hash (or a delivery time for scheduled messages).
    pub tags_code: i64,
}

impl CqEntry {
    /// RocketMQ's validity rule: a non-negative offset and a positive size.
    pub fn is_valid(&self) -> bool {
        self.commit_log_offset >= 0 && self.size > 0
    }

    fn encode(&self) -> [u8; ENTRY_SIZE] {
        let mut out = [0u8; ENTRY_SIZE];
        out[..8].copy_from_slice(&self.commit_log_offset.to_be_bytes());
        out[8..12].copy_from_slice(&self.size.to_be_bytes());
        out[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        out
    }

    fn decode(b: &[u8]) -> Self {
        let mut off = [0u8; 8];
        off.copy_from_slice(&b[..8]);
        let mut size = [0u8; 4];
        size.copy_from_slice(&b[8..12]);
        let mut tags = [0u8; 8];
        tags.copy_from_slice(&b[12..20]);
        Self {
            commit_log_offset: i64::from_be_bytes(off),
            size: i32::from_be_bytes(size),
            tags_code: i64::from_be_bytes(tags),
        }
    }
}

/// The index of one topic queue.
#[derive(Debug)]
pub struct ConsumeQueue {
    topic: String,
    queue_id: i32,
    dir: PathBuf,
    files: FileQueue,
    /// Entry count (the next queue offset).
    max_offset: AtomicI64,
    /// First entry whose message is still in the CommitLog (entries before
    /// it point at deleted files); only grows.
    min_logic: AtomicI64,
    /// Recovery removed files after a missing one: the entries past its
    /// end must be dispatched again.
    cut_at_gap: bool,
}

impl ConsumeQueue {
    /// The directory of a queue: `<root>/<topic>/<queueId>`.
    pub fn dir(root: &Path, topic: &str, queue_id: i32) -> PathBuf {
        root.join(topic).join(queue_id.to_string())
    }

    /// Loads a queue's files and sets their positions at the first invalid
    /// entry, dropping entries that point at or beyond `commit_log_end`.
    ///
    /// # Errors
    /// The files cannot be read.
    pub fn recover(
        root: &Path,
        topic: &str,
        queue_id: i32,
        file_size: usize,
        commit_log_end: u64,
    ) -> io::Result<Self> {
        let dir = Self::dir(root, topic, queue_id);
        let (mut files, cut_at_gap) = FileQueue::load_files_to_gap(&dir, file_size)?;
        let mut end: Option<(usize, usize)> = None;
        'files: for (i, file) in files.iter_mut().enumerate() {
            let size = file.size();
            file.set_positions(size)?;
            let data = file.committed_bytes();
            let mut pos = 0;
            while pos + ENTRY_SIZE <= data.len() {
                let entry = CqEntry::decode(&data[pos..pos + ENTRY_SIZE]);
                let in_log = u64::try_from(entry.commit_log_offset)
                    .ok()
                    .and_then(|o| o.checked_add(u64::try_from(entry.size).ok()?))
                    .is_some_and(|e| e <= commit_log_end);
                if !entry.is_valid() || !in_log {
                    end = Some((i, pos));
                    break 'files;
                }
                pos += ENTRY_SIZE;
            }
        }
        let (last, pos) = end.unwrap_or((files.len().saturating_sub(1), file_size));
        for (i, file) in files.iter_mut().enumerate() {
            let size = file.size();
            match i.cmp(&last) {
                std::cmp::Ordering::Less => file.set_positions(size)?,
                std::cmp::Ordering::Equal => file.set_positions(pos)?,
                std::cmp::Ordering::Greater => file.set_positions(0)?,
            }
        }
        // Files entirely past the end hold nothing valid.
        if files.len() > last + 1 {
            while files.len() > last + 1 {
                if let Some(file) = files.pop() {
                    file.destroy()?;
                }
            }
            std::fs::File::open(&dir)?.sync_all()?;
        }
        let max = files
            .last()
            .map_or(0, |f| (f.from_offset() as usize + f.wrote()) / ENTRY_SIZE)
            as i64;
        Ok(Self {
            topic: topic.to_owned(),
            queue_id,
            files: FileQueue::new(&dir, FileFactory::plain(file_size), files, false),
            dir,
            max_offset: AtomicI64::new(max),
            min_logic: AtomicI64::new(0),
            cut_at_gap,
        })
    }

    /// A new, empty queue (its directory is made on the first entry).
    pub fn create(root: &Path, topic: &str, queue_id: i32, file_size: usize) -> Self {
        let dir = Self::dir(root, topic, queue_id);
        Self {
            topic: topic.to_owned(),
            queue_id,
            files: FileQueue::new(&dir, FileFactory::plain(file_size), Vec::new(), false),
            dir,
            max_offset: AtomicI64::new(0),
            min_logic: AtomicI64::new(0),
            cut_at_gap: false,
        }
    }

    /// Whether recovery removed files of this queue after a missing one
    /// (a power cut), so that its entries past [`ConsumeQueue::last_commit_log_end`]
    /// must be dispatched again.
    pub fn cut_at_gap(&self) -> bool {
        self.cut_at_gap
    }

    /// Topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Queue id.
    pub fn queue_id(&self) -> i32 {
        self.queue_id
    }

    /// Writes the entry of the message with `queue_offset`; does nothing if
    /// that entry is already there.
    ///
    /// # Errors
    /// A file cannot be created or written.
    pub fn put(&self, queue_offset: i64, entry: CqEntry) -> io::Result<()> {
        let Ok(qo) = u64::try_from(queue_offset) else {
            return Ok(());
        };
        let pos = qo * ENTRY_SIZE as u64;
        let file_size = self.files.file_size() as u64;
        if (queue_offset) < self.max_offset.load(Ordering::Acquire) {
            return Ok(());
        }
        let start = pos - pos % file_size;
        let file = match self.files.find(pos) {
            Some(f) => f,
            None => self.make_files_up_to(start)?,
        };
        match file.write_at((pos - file.from_offset()) as usize, &entry.encode()) {
            Ok(()) | Err(AppendError::Overlap { .. }) => {}
            Err(e) => {
                return Err(io::Error::other(format!(
                    "consume queue {}: {e:?}",
                    self.dir.display()
                )))
            }
        }
        self.max_offset
            .fetch_max(queue_offset + 1, Ordering::AcqRel);
        self.files.sync_committed();
        Ok(())
    }

    fn make_files_up_to(&self, start: u64) -> io::Result<Arc<MappedFile>> {
        std::fs::create_dir_all(&self.dir)?;
        let mut next = match self.files.last() {
            Some(last) => last.from_offset() + self.files.file_size() as u64,
            // A queue whose first entries were never written (its files were
            // lost) starts at the file of its first entry.
            None => start,
        };
        loop {
            let file = self.files.create_next(next)?;
            if next >= start {
                return Ok(file);
            }
            next += self.files.file_size() as u64;
        }
    }

    /// Entry at `queue_offset`, if written and its message still kept.
    pub fn get(&self, queue_offset: i64) -> Option<CqEntry> {
        if queue_offset < self.min_offset() {
            return None;
        }
        self.entry_at(queue_offset)
    }

    /// Entry at `queue_offset` if its file is still there, whether or not
    /// its message is.
    fn entry_at(&self, queue_offset: i64) -> Option<CqEntry> {
        if queue_offset < 0 || queue_offset >= self.max_offset() {
            return None;
        }
        let pos = queue_offset as u64 * ENTRY_SIZE as u64;
        let file = self.files.find(pos)?;
        let bytes = file.read((pos - file.from_offset()) as usize, ENTRY_SIZE)?;
        Some(CqEntry::decode(bytes))
    }

    /// Next queue offset (entry count).
    pub fn max_offset(&self) -> i64 {
        self.max_offset.load(Ordering::Acquire)
    }

    /// First queue offset whose message is still kept.
    pub fn min_offset(&self) -> i64 {
        let first_file = (self.files.min_offset() / ENTRY_SIZE as u64) as i64;
        first_file.max(self.min_logic.load(Ordering::Acquire))
    }

    /// The first queue offset at or after `from` whose message starts at or
    /// after the physical offset `phys` (the end offset when none does).
    /// Entries point at increasing physical offsets, so this is a binary
    /// search.
    pub fn first_offset_at_or_after(&self, from: i64, phys: u64) -> i64 {
        let (mut lo, mut hi) = (from.max(self.min_offset()), self.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let below = self
                .entry_at(mid)
                .is_none_or(|e| u64::try_from(e.commit_log_offset).map_or(true, |o| o < phys));
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Takes out the entries of messages at or past the physical offset
    /// `phys` (a replica's CommitLog was cut there): the queue ends before
    /// the first such entry. Returns whether entries went.
    ///
    /// # Errors
    /// A file cannot be cut; the queue may then end earlier than it should,
    /// never later.
    pub fn cut_at(&self, phys: u64) -> io::Result<bool> {
        let max = self.max_offset();
        let past = self
            .entry_at(max - 1)
            .is_some_and(|e| u64::try_from(e.commit_log_offset).is_ok_and(|o| o >= phys));
        if max == 0 || !past {
            return Ok(false);
        }
        let keep = self.first_offset_at_or_after(0, phys);
        self.files
            .truncate(u64::try_from(keep).unwrap_or(0) * ENTRY_SIZE as u64)?;
        self.max_offset.store(keep, Ordering::Release);
        Ok(true)
    }

    /// Deletes the files (never the last) whose every entry points below
    /// `min_phys`, the CommitLog's first kept byte, then moves the minimum
    /// offset to the first entry at or after it. Returns the files deleted.
    ///
    /// # Errors
    /// A file name cannot be removed; the queue is still consistent.
    pub fn delete_expired(&self, min_phys: u64) -> io::Result<usize> {
        let mut deleted = 0;
        while self.files.count() > 1 {
            let Some(first) = self.files.first() else {
                break;
            };
            let last_entry = first
                .read(first.size() - ENTRY_SIZE, ENTRY_SIZE)
                .map(CqEntry::decode);
            let expired = last_entry
                .is_some_and(|e| u64::try_from(e.commit_log_offset).map_or(true, |o| o < min_phys));
            if !expired || !self.files.remove_first(&first) {
                break;
            }
            let after = (first.from_offset() + first.size() as u64) / ENTRY_SIZE as u64;
            self.min_logic.fetch_max(after as i64, Ordering::AcqRel);
            first.unlink()?;
            deleted += 1;
        }
        let first_kept = self.first_offset_at_or_after(0, min_phys);
        self.min_logic.fetch_max(first_kept, Ordering::AcqRel);
        Ok(deleted)
    }

    /// Deletes the queue's files from disk, leaving it empty: readers that
    /// still hold it find no entry, and what they already read stays
    /// mapped until dropped. A file already gone counts as deleted.
    ///
    /// # Errors
    /// A file name cannot be removed.
    pub fn destroy_files(&self) -> io::Result<()> {
        self.max_offset.store(0, Ordering::Release);
        for file in self.files.take_all() {
            match file.unlink() {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Makes written entries durable.
    ///
    /// # Errors
    /// The flush error.
    pub fn flush(&self, least_pages: usize) -> io::Result<u64> {
        self.files.flush(least_pages)
    }

    /// Physical offset just after the last message this queue indexes.
    pub fn last_commit_log_end(&self) -> Option<u64> {
        let last = self.get(self.max_offset() - 1)?;
        Some(last.commit_log_offset as u64 + last.size as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(o: i64) -> CqEntry {
        CqEntry {
            commit_log_offset: o,
            size: 100,
            tags_code: 7,
        }
    }

    #[test]
    fn entries_are_placed_by_queue_offset_and_idempotent() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::create(dir.path(), "T", 0, 3 * ENTRY_SIZE);
        for i in 0..5 {
            cq.put(i, entry(i * 100)).unwrap();
        }
        cq.put(2, entry(999)).unwrap();
        assert_eq!(cq.max_offset(), 5);
        assert_eq!(cq.get(2), Some(entry(200)));
        assert_eq!(cq.get(5), None);
        assert!(dir.path().join("T/0/00000000000000000060").exists());
    }

    #[test]
    fn expired_files_go_and_the_minimum_follows_the_commit_log() {
        let dir = tempfile::tempdir().unwrap();
        let cq = ConsumeQueue::create(dir.path(), "T", 0, 3 * ENTRY_SIZE);
        for i in 0..8 {
            cq.put(i, entry(i * 100)).unwrap();
        }
        assert_eq!(cq.first_offset_at_or_after(0, 250), 3);
        assert_eq!(cq.first_offset_at_or_after(5, 250), 5);
        assert_eq!(cq.first_offset_at_or_after(0, 10_000), 8);
        // Messages below 450 are gone: the file of entries 0..3 goes, the
        // next one stays (entry 5 is still kept) and the minimum is 5.
        assert_eq!(cq.delete_expired(450).unwrap(), 1);
        assert!(!dir.path().join("T/0/00000000000000000000").exists());
        assert_eq!(cq.min_offset(), 5);
        assert_eq!(cq.get(4), None);
        assert_eq!(cq.get(5), Some(entry(500)));
        // Everything gone: the last file stays, the queue is empty at 8.
        assert_eq!(cq.delete_expired(10_000).unwrap(), 1);
        assert_eq!((cq.min_offset(), cq.max_offset()), (8, 8));
        cq.put(8, entry(800)).unwrap();
        assert_eq!(cq.get(8), Some(entry(800)));
    }

    #[test]
    fn recovery_stops_at_first_invalid_entry_and_at_log_end() {
        let dir = tempfile::tempdir().unwrap();
        {
            let cq = ConsumeQueue::create(dir.path(), "T", 1, 4 * ENTRY_SIZE);
            for i in 0..6 {
                cq.put(i, entry(i * 100)).unwrap();
            }
        }
        let cq = ConsumeQueue::recover(dir.path(), "T", 1, 4 * ENTRY_SIZE, u64::MAX).unwrap();
        assert_eq!(cq.max_offset(), 6);
        assert_eq!(cq.last_commit_log_end(), Some(600));
        drop(cq);
        // The log only holds the first three messages now.
        let cq = ConsumeQueue::recover(dir.path(), "T", 1, 4 * ENTRY_SIZE, 300).unwrap();
        assert_eq!(cq.max_offset(), 3);
        cq.put(3, entry(300)).unwrap();
        assert_eq!(cq.get(3), Some(entry(300)));
    }
}
