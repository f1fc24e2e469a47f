//! A sequence of equally sized mapped files that together form one log,
//! each named by the 20-digit offset of its first byte.
//!
//! # Invariants
//! - Files are contiguous: file `i` starts at `first + i * file_size`.
//! - Only the last file is appended to.

use std::{
    collections::HashMap,
    fs, io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Arc, Condvar, Mutex, PoisonError, RwLock,
    },
    thread,
    time::Duration,
};

use crate::{mmap::MappedFile, pool::TransientStorePool, warm::WarmAhead};

/// How new files of a queue are made.
#[derive(Debug, Clone)]
pub struct FileFactory {
    /// Size of every file.
    pub file_size: usize,
    /// Pool whose buffers new files borrow (CommitLog with the pool enabled).
    pub pool: Option<TransientStorePool>,
    /// Refuse to create a file when the pool has no buffer.
    pub fast_fail_without_buffer: bool,
    /// Pre-touch the pages of new files.
    pub warm: bool,
    /// Bytes ahead of the write position kept faulted in (0: none); new
    /// files are made with their first this many bytes faulted in.
    pub warm_ahead: usize,
}

impl FileFactory {
    /// A factory for plain files of `file_size` bytes.
    pub fn plain(file_size: usize) -> Self {
        Self {
            file_size,
            pool: None,
            fast_fail_without_buffer: false,
            warm: false,
            warm_ahead: 0,
        }
    }

    /// Creates the file that starts at `offset` in `dir`.
    ///
    /// # Errors
    /// The file cannot be created (disk full, I/O error), or the pool has no
    /// buffer and fast failure is on (`WouldBlock`).
    pub fn create(&self, dir: &Path, offset: u64) -> io::Result<MappedFile> {
        let buffer = match &self.pool {
            Some(pool) => match pool.borrow() {
                Some(buffer) => Some(buffer),
                None if self.fast_fail_without_buffer => {
                    return Err(io::Error::new(
                        io::ErrorKind::WouldBlock,
                        "no free buffer in the transient store pool",
                    ))
                }
                None => None,
            },
            None => None,
        };
        let mut file = MappedFile::create(&dir.join(file_name(offset)), offset, self.file_size)?;
        if let Some(buffer) = buffer {
            file.attach_buffer(buffer);
        }
        if self.warm {
            file.warm();
        } else if self.warm_ahead > 0 && self.pool.is_none() {
            file.prefault(0, self.warm_ahead);
        }
        Ok(file)
    }
}

/// The 20-digit, zero-padded name of the file starting at `offset`.
pub fn file_name(offset: u64) -> String {
    format!("{offset:020}")
}

/// A log made of mapped files.
#[derive(Debug)]
pub struct FileQueue {
    dir: PathBuf,
    factory: FileFactory,
    files: RwLock<Vec<Arc<MappedFile>>>,
    flushed_where: AtomicU64,
    committed_where: AtomicU64,
    /// Held by a flush and by a truncation, so that a flush that began
    /// before a truncation cannot move the flushed offset past the new end.
    flushing: Mutex<()>,
    allocator: Option<Allocator>,
    warm_ahead: Option<WarmAhead>,
}

/// The index of the first of `offsets` (sorted) that does not follow the
/// one before it by `file_size`: where a file is missing.
fn first_gap(offsets: &[u64], file_size: usize) -> Option<usize> {
    (1..offsets.len()).find(|&i| offsets[i] != offsets[i - 1] + file_size as u64)
}

impl FileQueue {
    /// Opens the files found in `dir` (created if missing) without setting
    /// any position; recovery does that on the returned files before
    /// [`FileQueue::new`] takes them.
    ///
    /// # Errors
    /// The directory cannot be read, a file name is not an offset, a file has
    /// the wrong size, or the files are not contiguous. An empty last file
    /// (its creation was interrupted, nothing was written to it) is removed
    /// instead.
    pub fn load_files(dir: &Path, file_size: usize) -> io::Result<Vec<MappedFile>> {
        Self::load(dir, file_size, false).map(|(files, _)| files)
    }

    /// [`FileQueue::load_files`] for a log that can be rebuilt (a
    /// ConsumeQueue): where a file is missing (a power cut lost its
    /// directory entry), the files after the gap are removed instead of
    /// refused. Returns the files and whether any were removed so.
    ///
    /// # Errors
    /// As [`FileQueue::load_files`], gaps aside.
    pub fn load_files_to_gap(dir: &Path, file_size: usize) -> io::Result<(Vec<MappedFile>, bool)> {
        Self::load(dir, file_size, true)
    }

    fn load(dir: &Path, file_size: usize, cut_at_gap: bool) -> io::Result<(Vec<MappedFile>, bool)> {
        fs::create_dir_all(dir)?;
        let mut offsets = Vec::new();
        for entry in fs::read_dir(dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.len() == 20 && name.bytes().all(|b| b.is_ascii_digit()) {
                offsets.push(name.parse::<u64>().map_err(invalid)?);
            }
        }
        offsets.sort_unstable();
        if cut_at_gap {
            if let Some(gap) = first_gap(&offsets, file_size) {
                for &offset in &offsets[gap..] {
                    let path = dir.join(file_name(offset));
                    tracing::warn!(
                        path = %path.display(),
                        "removing a queue file past a missing one; its entries are dispatched again from the CommitLog"
                    );
                    fs::remove_file(&path)?;
                }
                fs::File::open(dir)?.sync_all()?;
                offsets.truncate(gap);
                return Self::open_all(dir, file_size, &offsets).map(|files| (files, true));
            }
        }
        Self::open_all(dir, file_size, &offsets).map(|files| (files, false))
    }

    /// Opens the files at `offsets` (sorted), removing an empty last file,
    /// refusing a gap.
    fn open_all(dir: &Path, file_size: usize, offsets: &[u64]) -> io::Result<Vec<MappedFile>> {
        let mut offsets = offsets;
        if let Some((&last, before)) = offsets.split_last() {
            let path = dir.join(file_name(last));
            if fs::metadata(&path)?.len() == 0 {
                // A file is sized (fallocate, all at once) right after it is
                // created and only then written, so an empty last file is a
                // creation that a crash interrupted: nothing was stored in
                // it. Removed before the files are checked for gaps: a power
                // cut may have lost the entry of the file before it, made
                // just before. A file of another non-zero size stays an
                // error (say, a changed file size setting).
                tracing::warn!(
                    path = %path.display(),
                    expected = file_size,
                    "removing a CommitLog/queue file whose creation was interrupted"
                );
                fs::remove_file(&path)?;
                offsets = before;
            }
        }
        if let Some(gap) = first_gap(offsets, file_size) {
            return Err(invalid(format!(
                "{} is not contiguous with the file before it (file size {file_size})",
                dir.join(file_name(offsets[gap])).display()
            )));
        }
        offsets
            .iter()
            .map(|&offset| MappedFile::open(&dir.join(file_name(offset)), offset, file_size))
            .collect()
    }

    /// A queue over already recovered files. With `preallocate`, a
    /// background thread makes the next file before it is needed (the
    /// first one at once when there is none and no pool), and, with the factory's
    /// `warm_ahead`, another keeps the pages ahead of the appends faulted
    /// in (not for pool-buffered files, whose appends touch only the
    /// buffer).
    pub fn new(
        dir: &Path,
        factory: FileFactory,
        files: Vec<MappedFile>,
        preallocate: bool,
    ) -> Self {
        let flushed = files
            .last()
            .map_or(0, |f| f.from_offset() + f.flushed() as u64);
        let committed = files
            .last()
            .map_or(0, |f| f.from_offset() + f.committed() as u64);
        let allocator = preallocate.then(|| Allocator::start(dir.to_path_buf(), factory.clone()));
        // Pool buffers are only taken for a file an append asks for: one
        // made ahead at open would show the pool as short before any write.
        if let Some(allocator) = &allocator {
            if files.is_empty() && factory.pool.is_none() {
                allocator.request(0);
            }
        }
        let warm_ahead = (preallocate && factory.pool.is_none() && !factory.warm)
            .then(|| WarmAhead::start(factory.warm_ahead))
            .flatten();
        Self {
            dir: dir.to_path_buf(),
            factory,
            files: RwLock::new(files.into_iter().map(Arc::new).collect()),
            flushed_where: AtomicU64::new(flushed),
            committed_where: AtomicU64::new(committed),
            flushing: Mutex::new(()),
            allocator,
            warm_ahead,
        }
    }

    /// Notes that appends to `file` reached position `end`, so that the
    /// pages ahead of them are faulted in before they get there. Called by
    /// the one appender.
    pub fn wrote(&self, file: &Arc<MappedFile>, end: usize) {
        if let Some(warm) = &self.warm_ahead {
            warm.wrote(file, end);
        }
    }

    /// Reports whether new files borrow transient store pool buffers.
    pub fn uses_pool(&self) -> bool {
        self.factory.pool.is_some()
    }

    /// Size of each file.
    pub fn file_size(&self) -> usize {
        self.factory.file_size
    }

    /// The newest file.
    pub fn last(&self) -> Option<Arc<MappedFile>> {
        self.read_files().last().cloned()
    }

    /// The oldest file.
    pub fn first(&self) -> Option<Arc<MappedFile>> {
        self.read_files().first().cloned()
    }

    /// Number of files.
    pub fn count(&self) -> usize {
        self.read_files().len()
    }

    /// Takes `file` out of the queue if it is still the oldest and not the
    /// only one (the last file is never removed). Readers that already hold
    /// it keep a valid mapping.
    pub fn remove_first(&self, file: &Arc<MappedFile>) -> bool {
        let mut files = self.files.write().unwrap_or_else(PoisonError::into_inner);
        if files.len() < 2 || !files.first().is_some_and(|f| Arc::ptr_eq(f, file)) {
            return false;
        }
        files.remove(0);
        true
    }

    /// Every file, oldest first.
    #[cfg(test)]
    pub fn files(&self) -> Vec<Arc<MappedFile>> {
        self.read_files().clone()
    }

    /// Takes every file out of the queue, oldest first; the queue is empty
    /// afterwards. The files stay mapped while anyone holds them.
    pub fn take_all(&self) -> Vec<Arc<MappedFile>> {
        std::mem::take(&mut *self.files.write().unwrap_or_else(PoisonError::into_inner))
    }

    /// The file holding `offset`.
    pub fn find(&self, offset: u64) -> Option<Arc<MappedFile>> {
        let files = self.read_files();
        let first = files.first()?.from_offset();
        let index =
            usize::try_from(offset.checked_sub(first)? / self.factory.file_size as u64).ok()?;
        files.get(index).cloned()
    }

    /// Appends a new last file starting at `offset` (taken from the
    /// background allocator when it has it ready) and asks for the one after.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create_next(&self, offset: u64) -> io::Result<Arc<MappedFile>> {
        let file = match &self.allocator {
            Some(allocator) => allocator.take(offset, &self.dir, &self.factory)?,
            None => self.factory.create(&self.dir, offset)?,
        };
        let file = Arc::new(file);
        self.files
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Arc::clone(&file));
        if let Some(allocator) = &self.allocator {
            allocator.request(offset + self.factory.file_size as u64);
        }
        Ok(file)
    }

    /// Offset of the first byte kept.
    pub fn min_offset(&self) -> u64 {
        self.first().map_or(0, |f| f.from_offset())
    }

    /// Offset after the last committed (readable) byte.
    pub fn max_offset(&self) -> u64 {
        self.last()
            .map_or(0, |f| f.from_offset() + f.committed() as u64)
    }

    /// Offset after the last appended byte.
    pub fn max_wrote_offset(&self) -> u64 {
        self.last()
            .map_or(0, |f| f.from_offset() + f.wrote() as u64)
    }

    /// Offset up to which everything is durable.
    pub fn flushed_where(&self) -> u64 {
        self.flushed_where.load(Ordering::Acquire)
    }

    /// Offset up to which everything is readable.
    pub fn committed_where(&self) -> u64 {
        self.committed_where.load(Ordering::Acquire)
    }

    /// Flushes the files from the one holding the flushed offset onwards;
    /// see [`MappedFile::flush`] for `least_pages`. Returns the new flushed
    /// offset.
    ///
    /// # Errors
    /// The first flush error; the store must then refuse further appends.
    pub fn flush(&self, least_pages: usize) -> io::Result<u64> {
        let _flushing = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        let from = self.flushed_where();
        let mut reached = from;
        for file in self.files_from(from) {
            let flushed = file.flush(least_pages)?;
            reached = file.from_offset() + flushed as u64;
            if flushed < file.size() {
                break;
            }
        }
        self.flushed_where.fetch_max(reached, Ordering::AcqRel);
        Ok(self.flushed_where())
    }

    /// Commits pool buffers into the files from the one holding the committed
    /// offset onwards. Returns the new committed offset.
    pub fn commit(&self, least_pages: usize) -> u64 {
        let from = self.committed_where();
        let mut reached = from;
        for file in self.files_from(from) {
            let committed = file.commit(least_pages);
            reached = file.from_offset() + committed as u64;
            if committed < file.size() {
                break;
            }
        }
        self.committed_where.fetch_max(reached, Ordering::AcqRel);
        self.committed_where()
    }

    /// Cuts the log at `offset`: files that start at or after it are
    /// removed, and the file holding it is replaced by a copy of its bytes
    /// below `offset` (readers that hold the old file keep their bytes).
    /// The caller keeps appends out; not for pool-buffered files.
    ///
    /// # Errors
    /// A file cannot be removed, written or synced; the queue may then hold
    /// fewer files than before but never a file with bytes past `offset`.
    pub fn truncate(&self, offset: u64) -> io::Result<()> {
        let _flushing = self.flushing.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(allocator) = &self.allocator {
            allocator.discard_all();
        }
        let last = {
            let mut files = self.files.write().unwrap_or_else(PoisonError::into_inner);
            while let Some(file) = files.pop_if(|f| f.from_offset() >= offset) {
                file.unlink()?;
                tracing::warn!(file = %file.path().display(), "removed a CommitLog file past the truncation point");
            }
            files.last().cloned()
        };
        if let Some(last) = last {
            let pos = usize::try_from(offset - last.from_offset()).unwrap_or(usize::MAX);
            if pos < last.wrote() {
                let copy = Arc::new(rewrite_prefix(&last, pos)?);
                let mut files = self.files.write().unwrap_or_else(PoisonError::into_inner);
                if let Some(slot) = files.last_mut() {
                    *slot = copy;
                }
            }
        }
        fs::File::open(&self.dir)?.sync_all()?;
        self.flushed_where.fetch_min(offset, Ordering::AcqRel);
        self.committed_where.fetch_min(offset, Ordering::AcqRel);
        Ok(())
    }

    /// Marks everything up to the committed end as committed, for queues
    /// whose appends are readable at once (no pool buffers).
    pub fn sync_committed(&self) {
        let end = self.max_offset();
        self.committed_where.fetch_max(end, Ordering::AcqRel);
    }

    /// Bytes appended but not yet flushed.
    #[cfg(test)]
    pub fn unflushed_bytes(&self) -> u64 {
        self.max_wrote_offset().saturating_sub(self.flushed_where())
    }

    fn files_from(&self, offset: u64) -> Vec<Arc<MappedFile>> {
        let files = self.read_files();
        let Some(first) = files.first() else {
            return Vec::new();
        };
        let index =
            (offset.saturating_sub(first.from_offset()) / self.factory.file_size as u64) as usize;
        files
            .get(index.min(files.len().saturating_sub(1))..)
            .unwrap_or_default()
            .to_vec()
    }

    fn read_files(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<MappedFile>>> {
        self.files.read().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A new file under `file`'s name holding its first `pos` bytes, synced;
/// the old file stays mapped for whoever holds it.
fn rewrite_prefix(file: &MappedFile, pos: usize) -> io::Result<MappedFile> {
    use std::os::unix::fs::FileExt;
    let path = file.path();
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".truncated");
    let tmp = PathBuf::from(tmp);
    let _ = fs::remove_file(&tmp);
    let bytes = file.read(0, pos).ok_or_else(|| {
        invalid(format!(
            "{} has fewer than {pos} readable bytes",
            path.display()
        ))
    })?;
    {
        let out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)?;
        rustix::fs::fallocate(
            &out,
            rustix::fs::FallocateFlags::empty(),
            0,
            file.size() as u64,
        )?;
        out.write_all_at(bytes, 0)?;
        out.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    let mut copy = MappedFile::open(path, file.from_offset(), file.size())?;
    copy.set_positions(pos)?;
    tracing::warn!(file = %path.display(), kept = pos, "cut a CommitLog file at the truncation point");
    Ok(copy)
}

fn invalid(msg: impl ToString) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// The background maker of the next file ("store-alloc").
#[derive(Debug)]
struct Allocator {
    state: Arc<(Mutex<AllocState>, Condvar)>,
    requests: mpsc::Sender<(u64, u64)>,
}

#[derive(Debug, Default)]
struct AllocState {
    in_progress: Option<u64>,
    ready: HashMap<u64, io::Result<MappedFile>>,
    /// Raised by [`Allocator::discard_all`]: requests made before it are
    /// stale and files made for them are removed.
    generation: u64,
}

impl Allocator {
    fn start(dir: PathBuf, factory: FileFactory) -> Self {
        let state = Arc::new((Mutex::new(AllocState::default()), Condvar::new()));
        let (requests, rx) = mpsc::channel::<(u64, u64)>();
        let worker_state = Arc::clone(&state);
        let spawned = thread::Builder::new()
            .name("store-alloc".into())
            .spawn(move || {
                let (lock, cv) = &*worker_state;
                for (generation, offset) in rx {
                    {
                        let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
                        if st.generation != generation
                            || st.ready.contains_key(&offset)
                            || dir.join(file_name(offset)).exists()
                        {
                            continue;
                        }
                        st.in_progress = Some(offset);
                    }
                    let made = factory.create(&dir, offset);
                    let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
                    st.in_progress = None;
                    if st.generation == generation {
                        st.ready.insert(offset, made);
                    } else if let Ok(file) = made {
                        let _ = file.destroy();
                    }
                    cv.notify_all();
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(cause = %e, "cannot start the file pre-allocation thread; files will be made on demand");
        }
        Self { state, requests }
    }

    /// Removes every file made ahead and forgets the requests not served
    /// yet; returns once no file is being made (or after 5 s).
    fn discard_all(&self) {
        let (lock, cv) = &*self.state;
        let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
        st.generation += 1;
        for (_, made) in st.ready.drain() {
            if let Ok(file) = made {
                let _ = file.destroy();
            }
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while st.in_progress.is_some() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                tracing::warn!("a CommitLog file made ahead is still being made after 5 s");
                break;
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    fn request(&self, offset: u64) {
        let generation = self
            .state
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .generation;
        // A stopped allocator only means files are made on demand.
        let _ = self.requests.send((generation, offset));
    }

    /// Takes the file for `offset`, waiting for it if it is being made, or
    /// makes it now.
    fn take(&self, offset: u64, dir: &Path, factory: &FileFactory) -> io::Result<MappedFile> {
        let (lock, cv) = &*self.state;
        let mut st = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while st.in_progress == Some(offset) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("pre-allocation of {} took over 5 s", file_name(offset)),
                ));
            }
            st = cv
                .wait_timeout(st, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
        // Files made for other offsets are stale (the log moved on); drop them.
        let ready = std::mem::take(&mut st.ready);
        drop(st);
        let mut found = None;
        for (at, made) in ready {
            match made {
                Ok(file) if at == offset => found = Some(file),
                Ok(file) => {
                    let _ = file.destroy();
                }
                Err(e) if at == offset => {
                    tracing::warn!(file = %file_name(at), cause = %e, "pre-allocation failed; retrying on demand")
                }
                Err(_) => {}
            }
        }
        match found {
            Some(file) => Ok(file),
            None => factory.create(dir, offset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_named_by_offset_and_found_by_offset() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), false);
        q.create_next(0).unwrap();
        q.create_next(4096).unwrap();
        assert!(dir.path().join("00000000000000004096").exists());
        assert_eq!(q.find(5000).unwrap().from_offset(), 4096);
        assert_eq!(q.find(4095).unwrap().from_offset(), 0);
        assert!(q.find(8192).is_none());
        q.last().unwrap().append(b"abc").unwrap();
        assert_eq!(q.max_offset(), 4099);
        let reloaded = FileQueue::load_files(dir.path(), 4096).unwrap();
        assert_eq!(reloaded.len(), 2);
        assert!(
            FileQueue::load_files(dir.path(), 8192).is_err(),
            "size mismatch is refused"
        );
    }

    #[test]
    fn an_empty_last_file_is_an_interrupted_creation_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), false);
        q.create_next(0).unwrap();
        q.last().unwrap().append(b"abc").unwrap();
        drop(q);
        let empty = dir.path().join(file_name(4096));
        fs::File::create(&empty).unwrap();
        let files = FileQueue::load_files(dir.path(), 4096).unwrap();
        assert_eq!(files.len(), 1);
        assert!(!empty.exists(), "the empty file is gone");
        // A short file that is not empty is not explained by a crash.
        fs::write(&empty, b"xyz").unwrap();
        assert!(FileQueue::load_files(dir.path(), 4096).is_err());
        // Nor is an empty file before the last one.
        fs::write(&empty, vec![0; 4096]).unwrap();
        fs::File::create(dir.path().join(file_name(0))).unwrap();
        assert!(FileQueue::load_files(dir.path(), 4096).is_err());
    }

    #[test]
    fn a_rebuildable_queue_drops_the_files_after_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), false);
        for offset in [0, 4096, 8192, 12288] {
            q.create_next(offset).unwrap();
        }
        drop(q);
        fs::remove_file(dir.path().join(file_name(4096))).unwrap();
        assert!(
            FileQueue::load_files(dir.path(), 4096).is_err(),
            "a CommitLog with a gap is refused"
        );
        let (files, cut) = FileQueue::load_files_to_gap(dir.path(), 4096).unwrap();
        assert!(cut);
        assert_eq!(files.len(), 1);
        assert!(!dir.path().join(file_name(8192)).exists());
        assert!(!dir.path().join(file_name(12288)).exists());
        let (files, cut) = FileQueue::load_files_to_gap(dir.path(), 4096).unwrap();
        assert_eq!((files.len(), cut), (1, false), "nothing more to cut");
    }

    #[test]
    fn an_empty_last_file_past_a_missing_one_is_removed_not_refused() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), false);
        for offset in [0, 4096] {
            q.create_next(offset).unwrap();
        }
        drop(q);
        // A power cut lost the second file's entry; the third's creation
        // was interrupted before it was sized.
        fs::remove_file(dir.path().join(file_name(4096))).unwrap();
        fs::File::create(dir.path().join(file_name(8192))).unwrap();
        let files = FileQueue::load_files(dir.path(), 4096).unwrap();
        assert_eq!(files.len(), 1);
        assert!(!dir.path().join(file_name(8192)).exists());
    }

    #[test]
    fn an_empty_queue_makes_its_first_file_before_any_append() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), true);
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !dir.path().join(file_name(0)).exists() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            dir.path().join(file_name(0)).exists(),
            "first file made in the background"
        );
        assert_eq!(q.count(), 0, "not part of the queue before an append");
        assert_eq!(q.create_next(0).unwrap().from_offset(), 0);
        assert_eq!(q.count(), 1);
    }

    #[test]
    fn preallocated_next_file_is_taken_when_needed() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), true);
        q.create_next(0).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !dir.path().join(file_name(4096)).exists() && std::time::Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert!(
            dir.path().join(file_name(4096)).exists(),
            "next file made in the background"
        );
        assert_eq!(q.create_next(4096).unwrap().from_offset(), 4096);
        assert_eq!(q.files().len(), 2);
    }

    #[test]
    fn flush_moves_across_full_files() {
        let dir = tempfile::tempdir().unwrap();
        let q = FileQueue::new(dir.path(), FileFactory::plain(4096), Vec::new(), false);
        q.create_next(0).unwrap().append(&[1u8; 4096]).unwrap();
        q.create_next(4096).unwrap().append(&[2u8; 10]).unwrap();
        assert_eq!(q.flush(0).unwrap(), 4106);
        assert_eq!(q.unflushed_bytes(), 0);
    }
}
