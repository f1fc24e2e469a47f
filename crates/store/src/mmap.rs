//! Memory-mapped files and off-heap buffers: the only module that uses
//! `unsafe`, behind a safe, bounds-checked API.
//!
//! # Invariants
//! - Bytes below a file's committed position are never written again while
//!   the file is shared; readers get plain slices of them. Moving positions
//!   backwards (recovery) needs `&mut self`.
//! - At most one append and at most one commit run on a file at a time,
//!   enforced with a flag per role. An append writes at or above the written
//!   position; a commit reads below it.
//! - A file keeps its length while mapped: it is created at full size and
//!   its blocks are allocated up front, so a store into the mapping can never
//!   hit a hole on a full disk (which would be SIGBUS instead of an error).
#![allow(unsafe_code)]

use std::{
    fs::{File, OpenOptions},
    io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Arc, Mutex, PoisonError,
    },
};

use memmap2::{Advice, MmapOptions, MmapRaw};

use crate::{pool::PooledBuffer, sync_log};

/// Size of an OS page, the unit of "least pages" flush and commit rules.
pub const OS_PAGE_SIZE: usize = 4096;

static FLUSH_CALLS: AtomicU64 = AtomicU64::new(0);

/// Number of `msync` calls that mapped files of this process have made.
pub fn flush_calls() -> u64 {
    FLUSH_CALLS.load(Ordering::Relaxed)
}

/// Why bytes could not be appended to a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendError {
    /// The bytes do not fit in the space left.
    Full {
        /// Bytes left in the file.
        remaining: usize,
    },
    /// Another append to this file is in progress.
    Contended,
    /// The position is below what was already written.
    Overlap {
        /// The current write position.
        wrote: usize,
    },
}

/// A fixed-size file mapped into memory and filled front to back.
#[derive(Debug)]
pub struct MappedFile {
    path: PathBuf,
    /// Held open for as long as the mapping lives.
    _file: File,
    map: MmapRaw,
    from_offset: u64,
    size: usize,
    wrote: AtomicUsize,
    committed: AtomicUsize,
    flushed: AtomicUsize,
    appending: AtomicBool,
    committing: AtomicBool,
    buffer: Mutex<Option<Arc<PooledBuffer>>>,
}

impl MappedFile {
    /// Creates a new file of `size` bytes with its disk blocks allocated, and
    /// maps it.
    ///
    /// # Errors
    /// The file exists, the disk is full (`StorageFull`), or mapping fails.
    pub fn create(path: &Path, from_offset: u64, size: usize) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        // Recorded before the file has any length: a process killed before
        // this line leaves an empty file, which recovery removes.
        sync_log::created(path);
        let allocated =
            rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, size as u64);
        if let Err(e) = allocated {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(e.into());
        }
        Self::map(path, file, from_offset, size)
    }

    /// Maps an existing file, which must be exactly `size` bytes long. All
    /// positions start at 0; recovery sets them with [`MappedFile::set_positions`].
    ///
    /// # Errors
    /// The file cannot be opened, has another length, or cannot be mapped.
    pub fn open(path: &Path, from_offset: u64, size: usize) -> io::Result<Self> {
        let file = open_exactly(path, size)?;
        Self::map(path, file, from_offset, size)
    }

    fn map(path: &Path, file: File, from_offset: u64, size: usize) -> io::Result<Self> {
        let map = MmapOptions::new().len(size).map_raw(&file)?;
        Ok(Self {
            path: path.to_path_buf(),
            _file: file,
            map,
            from_offset,
            size,
            wrote: AtomicUsize::new(0),
            committed: AtomicUsize::new(0),
            flushed: AtomicUsize::new(0),
            appending: AtomicBool::new(false),
            committing: AtomicBool::new(false),
            buffer: Mutex::new(None),
        })
    }

    /// Routes appends through an off-heap buffer that [`MappedFile::commit`]
    /// copies into the file. Only for a file nothing was written to yet.
    pub fn attach_buffer(&mut self, buffer: Arc<PooledBuffer>) {
        debug_assert_eq!(*self.wrote.get_mut(), 0);
        *self
            .buffer
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = Some(buffer);
    }

    /// Reports whether appends still go through a pool buffer.
    #[cfg(test)]
    pub fn has_buffer(&self) -> bool {
        self.current_buffer().is_some()
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset (in the whole log) of the file's first byte, RocketMQ's
    /// `fileFromOffset`.
    #[allow(clippy::wrong_self_convention)] // RocketMQ's name, not a conversion.
    pub fn from_offset(&self) -> u64 {
        self.from_offset
    }

    /// Size of the file in bytes.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes appended so far.
    pub fn wrote(&self) -> usize {
        self.wrote.load(Ordering::Acquire)
    }

    /// Bytes in the file itself, readable by readers.
    pub fn committed(&self) -> usize {
        self.committed.load(Ordering::Acquire)
    }

    /// Bytes made durable.
    pub fn flushed(&self) -> usize {
        self.flushed.load(Ordering::Acquire)
    }

    /// Bytes left for appends.
    pub fn remaining(&self) -> usize {
        self.size - self.wrote()
    }

    /// Reports whether every byte has been appended.
    pub fn is_full(&self) -> bool {
        self.wrote() == self.size
    }

    /// Appends `data` at the write position and returns that position.
    ///
    /// # Errors
    /// [`AppendError::Full`] when it does not fit, [`AppendError::Contended`]
    /// when another append to this file is running.
    pub fn append(&self, data: &[u8]) -> Result<usize, AppendError> {
        let _guard = self.begin_append()?;
        let pos = self.wrote.load(Ordering::Acquire);
        self.write_unpublished(pos, data)?;
        Ok(pos)
    }

    /// Writes `data` at `pos`, which must not be below the write position;
    /// bytes between the write position and `pos` stay as they are (zero in
    /// a new file).
    ///
    /// # Errors
    /// [`AppendError::Overlap`] when `pos` is below the write position, and
    /// the errors of [`MappedFile::append`].
    pub fn write_at(&self, pos: usize, data: &[u8]) -> Result<(), AppendError> {
        let _guard = self.begin_append()?;
        let wrote = self.wrote.load(Ordering::Acquire);
        if pos < wrote {
            return Err(AppendError::Overlap { wrote });
        }
        self.write_unpublished(pos, data)
    }

    fn begin_append(&self) -> Result<FlagGuard<'_>, AppendError> {
        FlagGuard::take(&self.appending).ok_or(AppendError::Contended)
    }

    /// Copies `data` to `pos` (at or above the write position; the caller
    /// holds the append flag) and publishes the new write position.
    fn write_unpublished(&self, pos: usize, data: &[u8]) -> Result<(), AppendError> {
        let end = pos
            .checked_add(data.len())
            .filter(|&end| end <= self.size)
            .ok_or(AppendError::Full {
                remaining: self.size.saturating_sub(pos),
            })?;
        match self.current_buffer() {
            Some(buffer) => {
                // SAFETY: [pos, end) is within the buffer (same size as the
                // file), at or above `wrote`, so no reader or committer reads
                // it, and the append flag excludes other writers.
                unsafe { buffer.anon().copy_in(pos, data) };
                self.wrote.store(end, Ordering::Release);
            }
            None => {
                // SAFETY: [pos, end) is within the mapping and at or above
                // `wrote` == `committed`, so no reader has been handed it,
                // and the append flag excludes other writers.
                unsafe { copy_to(self.map.as_mut_ptr(), pos, data) };
                self.wrote.store(end, Ordering::Release);
                self.committed.store(end, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Writes the end-of-file filler header at the write position and marks
    /// the rest of the file as written.
    ///
    /// # Errors
    /// As [`MappedFile::append`].
    pub fn append_blank(&self, header: &[u8]) -> Result<usize, AppendError> {
        let _guard = self.begin_append()?;
        let pos = self.wrote.load(Ordering::Acquire);
        self.write_unpublished(pos, header)?;
        // The bytes after the header are zero (a new file, or zeroed by
        // recovery); publishing them as written only moves the positions.
        self.wrote.store(self.size, Ordering::Release);
        if self.current_buffer().is_none() {
            self.committed.store(self.size, Ordering::Release);
        }
        Ok(pos)
    }

    /// Returns `len` bytes at `pos` if they are all committed.
    pub fn read(&self, pos: usize, len: usize) -> Option<&[u8]> {
        let end = pos.checked_add(len)?;
        if end > self.committed() {
            return None;
        }
        // SAFETY: [pos, end) is below `committed`, which only grows while the
        // file is shared, and committed bytes are never written again; the
        // mapping lives as long as `self`.
        Some(unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(pos), len) })
    }

    /// Every committed byte.
    pub fn committed_bytes(&self) -> &[u8] {
        let committed = self.committed();
        self.read(0, committed).unwrap_or_default()
    }

    /// Copies appended bytes from the pool buffer into the file when at least
    /// `least_pages` whole pages are waiting (any amount when 0, and always
    /// when the file is full). Releases the buffer once the whole file is
    /// committed. Returns the committed position.
    pub fn commit(&self, least_pages: usize) -> usize {
        let Some(_guard) = FlagGuard::take(&self.committing) else {
            return self.committed();
        };
        let Some(buffer) = self.current_buffer() else {
            return self.committed();
        };
        let committed = self.committed();
        let wrote = self.wrote();
        if enough_pages(committed, wrote, self.size, least_pages) {
            // SAFETY: [committed, wrote) is below `wrote`, so the writer no
            // longer touches it in the buffer, and at or above `committed`,
            // so no reader has been handed it in the mapping; the commit flag
            // excludes other committers.
            unsafe {
                let src = buffer.anon().slice(committed, wrote - committed);
                copy_to(self.map.as_mut_ptr(), committed, src);
            }
            self.committed.store(wrote, Ordering::Release);
        }
        if self.committed() == self.size {
            *self.buffer.lock().unwrap_or_else(PoisonError::into_inner) = None;
        }
        self.committed()
    }

    /// Makes committed bytes durable when at least `least_pages` whole pages
    /// are dirty (any amount when 0, and always when the file is full).
    /// Returns the flushed position.
    ///
    /// # Errors
    /// The error of `msync`; the caller must treat the store as poisoned.
    pub fn flush(&self, least_pages: usize) -> io::Result<usize> {
        let flushed = self.flushed();
        let committed = self.committed();
        if enough_pages(flushed, committed, self.size, least_pages) {
            let start = flushed - flushed % OS_PAGE_SIZE;
            self.map.flush_range(start, committed - start)?;
            FLUSH_CALLS.fetch_add(1, Ordering::Relaxed);
            sync_log::synced(&self.path, committed);
            self.flushed.fetch_max(committed, Ordering::AcqRel);
        }
        Ok(self.flushed())
    }

    /// Asks the kernel to fault every page in now (read faults: the page
    /// cache pages are allocated and zeroed here, but stay clean, so no
    /// zeros are written back to disk), so that later appends do not pay
    /// for the allocation and zeroing.
    pub fn warm(&self) {
        if let Err(e) = self.map.advise(Advice::PopulateRead) {
            tracing::debug!(path = %self.path.display(), cause = %e, "pre-touch not supported");
        }
    }

    /// Faults the pages of `[from, to)` in with read faults: they are
    /// allocated and zeroed here, and stay clean (nothing is written back
    /// for them), so the appends that reach them only mark them dirty.
    /// Returns false when the kernel does not support it; the pages are
    /// then left to the appends.
    pub fn prefault(&self, from: usize, to: usize) -> bool {
        let to = to.min(self.size);
        if from >= to {
            return true;
        }
        self.map
            .advise_range(Advice::PopulateRead, from, to - from)
            .is_ok()
    }

    /// Sets every position to `pos` (recovery) and zeroes every non-zero
    /// byte after it, to the end of the file, so that records beyond a torn
    /// tail can never be read back later. A power cut can keep any subset
    /// of the pages written after the last sync, so stale pages may follow
    /// an all-zero one: the whole rest of the file is looked at, skipping
    /// only the ranges the filesystem reports as holes. The zeroes are
    /// synced before this returns: otherwise a power cut could bring the
    /// stale records back under bytes appended after recovery.
    ///
    /// # Errors
    /// The error of `msync`.
    pub fn set_positions(&mut self, pos: usize) -> io::Result<()> {
        let pos = pos.min(self.size);
        let mut zeroed: Option<(usize, usize)> = None;
        let mut at = pos;
        while at < self.size {
            let (data_from, data_to) = self.data_range(at);
            let mut start = data_from;
            while start < data_to {
                let end = (start - start % OS_PAGE_SIZE + OS_PAGE_SIZE).min(data_to);
                // SAFETY: `&mut self` means no reader or writer shares the
                // file; [start, end) is within the mapping.
                let page = unsafe {
                    std::slice::from_raw_parts_mut(self.map.as_mut_ptr().add(start), end - start)
                };
                if page.iter().any(|&b| b != 0) {
                    page.fill(0);
                    zeroed = Some(zeroed.map_or((start, end), |(first, _)| (first, end)));
                }
                start = end;
            }
            at = data_to;
        }
        if let Some((first, end)) = zeroed {
            let from = first - first % OS_PAGE_SIZE;
            self.map.flush_range(from, end - from)?;
        }
        sync_log::reset(&self.path, pos);
        *self.wrote.get_mut() = pos;
        *self.committed.get_mut() = pos;
        *self.flushed.get_mut() = pos;
        Ok(())
    }

    /// The next range at or after `at` that may hold data: what the
    /// filesystem does not report as a hole (which reads as zeroes), or the
    /// rest of the file where it cannot tell. Empty at the end of the file.
    fn data_range(&self, at: usize) -> (usize, usize) {
        use rustix::fs::{seek, SeekFrom};
        let size = self.size;
        let from = match seek(&self._file, SeekFrom::Data(at as u64)) {
            Ok(from) => usize::try_from(from).map_or(size, |f| f.clamp(at, size)),
            Err(rustix::io::Errno::NXIO) => return (size, size),
            Err(_) => return (at, size),
        };
        let to = match seek(&self._file, SeekFrom::Hole(from as u64)) {
            Ok(to) => usize::try_from(to).map_or(size, |t| t.clamp(from, size)),
            Err(_) => size,
        };
        // A hole that starts where the data does would stop the caller.
        (from, if to > from { to } else { size })
    }

    /// Removes the file's name from its directory. The mapping stays valid;
    /// the disk blocks return once the last holder drops the file.
    ///
    /// # Errors
    /// The error of removing the name.
    pub fn unlink(&self) -> io::Result<()> {
        std::fs::remove_file(&self.path)
    }

    /// Deletes the file from disk.
    ///
    /// # Errors
    /// The error of removing the file.
    pub fn destroy(self) -> io::Result<()> {
        let path = self.path.clone();
        drop(self);
        std::fs::remove_file(path)
    }

    fn current_buffer(&self) -> Option<Arc<PooledBuffer>> {
        self.buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Reports whether `[from, to)` spans at least `least_pages` page boundaries,
/// or any byte when `least_pages` is 0, or anything at all once `to` is the end.
fn enough_pages(from: usize, to: usize, size: usize, least_pages: usize) -> bool {
    if to <= from {
        return false;
    }
    if to == size || least_pages == 0 {
        return true;
    }
    to / OS_PAGE_SIZE - from / OS_PAGE_SIZE >= least_pages
}

/// A file mapped for reading and writing anywhere in it (an IndexFile).
/// Writing takes `&mut self`, so a holder that shares it behind a lock
/// gives readers a plain slice. The file is sparse: blocks are allocated
/// with [`RandomAccessFile::allocate`] before their bytes are written, so
/// that a store into the mapping never hits a hole on a full disk.
#[derive(Debug)]
pub struct RandomAccessFile {
    path: PathBuf,
    file: File,
    map: memmap2::MmapMut,
}

impl RandomAccessFile {
    /// Creates a new sparse file of `size` bytes and maps it; nothing is
    /// allocated yet.
    ///
    /// # Errors
    /// The file exists or cannot be sized or mapped.
    pub fn create(path: &Path, size: usize) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)?;
        // As for a mapped file: recorded while still empty.
        sync_log::created(path);
        if let Err(e) = file.set_len(size as u64) {
            drop(file);
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Self::map(path, file, size)
    }

    /// Maps an existing file, which must be exactly `size` bytes long.
    ///
    /// # Errors
    /// The file cannot be opened, has another length, or cannot be mapped.
    pub fn open(path: &Path, size: usize) -> io::Result<Self> {
        let file = open_exactly(path, size)?;
        Self::map(path, file, size)
    }

    fn map(path: &Path, file: File, size: usize) -> io::Result<Self> {
        // SAFETY: the store maps each of its files once, and nothing in this
        // process writes the file other than through this mapping; as for
        // every mapped store file, a change by another process is outside
        // what the store guards against (the store directory is locked).
        let map = unsafe { MmapOptions::new().len(size).map_mut(&file)? };
        Ok(Self {
            path: path.to_path_buf(),
            file,
            map,
        })
    }

    /// The whole mapping.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The whole mapping, for writing. Only allocated ranges may be written.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Allocates the disk blocks of `[from, from + len)`.
    ///
    /// # Errors
    /// The disk is full (`StorageFull`) or the filesystem refuses.
    pub fn allocate(&self, from: usize, len: usize) -> io::Result<()> {
        rustix::fs::fallocate(
            &self.file,
            rustix::fs::FallocateFlags::empty(),
            from as u64,
            len as u64,
        )
        .map_err(io::Error::from)
    }

    /// Makes the whole file durable.
    ///
    /// # Errors
    /// The error of `msync`.
    pub fn flush(&self) -> io::Result<()> {
        self.map.flush()?;
        FLUSH_CALLS.fetch_add(1, Ordering::Relaxed);
        sync_log::synced(&self.path, self.map.len());
        Ok(())
    }
}

/// Anonymous (off-heap) memory of a fixed size, used as a write buffer.
#[derive(Debug)]
pub struct AnonBuffer {
    map: MmapRaw,
}

impl AnonBuffer {
    /// Allocates `size` zeroed bytes, optionally locked into RAM.
    ///
    /// # Errors
    /// Mapping fails.
    pub fn new(size: usize, lock: bool) -> io::Result<Self> {
        let map: MmapRaw = MmapOptions::new().len(size).map_anon()?.into();
        if lock {
            if let Err(e) = map.lock() {
                tracing::warn!(bytes = size, cause = %e, "could not lock a transient store pool buffer in memory");
            }
        }
        Ok(Self { map })
    }

    /// # Safety
    /// `[pos, pos + data.len())` must be within the buffer, and nothing may
    /// read or write that range concurrently.
    unsafe fn copy_in(&self, pos: usize, data: &[u8]) {
        copy_to(self.map.as_mut_ptr(), pos, data);
    }

    /// # Safety
    /// `[pos, pos + len)` must be within the buffer, and nothing may write
    /// that range while the slice lives.
    unsafe fn slice(&self, pos: usize, len: usize) -> &[u8] {
        std::slice::from_raw_parts(self.map.as_ptr().add(pos), len)
    }
}

impl PooledBuffer {
    fn anon(&self) -> &AnonBuffer {
        self.buffer()
    }
}

/// # Safety
/// `[pos, pos + data.len())` must lie within the allocation at `base`, and
/// nothing may access that range concurrently.
unsafe fn copy_to(base: *mut u8, pos: usize, data: &[u8]) {
    std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(pos), data.len());
}

/// Holds an atomic flag set for as long as it lives.
struct FlagGuard<'a>(&'a AtomicBool);

impl<'a> FlagGuard<'a> {
    fn take(flag: &'a AtomicBool) -> Option<Self> {
        flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| Self(flag))
    }
}

impl Drop for FlagGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Opens an existing store file for reading and writing, refusing one that
/// is not exactly `size` bytes long.
fn open_exactly(path: &Path, size: usize) -> io::Result<File> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len();
    if len != size as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} is {len} bytes long, expected {size}", path.display()),
        ));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::TransientStorePool;

    fn file(dir: &Path, size: usize) -> MappedFile {
        MappedFile::create(&dir.join("00000000000000000000"), 0, size).unwrap()
    }

    #[test]
    fn appends_are_readable_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(dir.path(), 64);
        assert_eq!(f.append(b"hello").unwrap(), 0);
        assert_eq!(f.append(b"world").unwrap(), 5);
        assert_eq!(f.read(0, 10).unwrap(), b"helloworld");
        assert_eq!(f.read(5, 6), None);
        assert_eq!(
            f.append(&[0u8; 60]),
            Err(AppendError::Full { remaining: 54 })
        );
        assert_eq!(f.wrote(), 10);
    }

    #[test]
    fn write_at_refuses_to_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(dir.path(), 64);
        f.write_at(20, b"x").unwrap();
        assert_eq!(f.wrote(), 21);
        assert_eq!(f.read(0, 21).unwrap()[..20], [0u8; 20]);
        assert_eq!(f.write_at(3, b"y"), Err(AppendError::Overlap { wrote: 21 }));
    }

    #[test]
    fn pooled_appends_become_readable_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let pool = TransientStorePool::new(1, 3 * OS_PAGE_SIZE, false).unwrap();
        let mut f = file(dir.path(), 3 * OS_PAGE_SIZE);
        f.attach_buffer(pool.borrow().unwrap());
        assert!(pool.is_deficient());
        f.append(&[1u8; 100]).unwrap();
        assert_eq!(f.read(0, 100), None);
        assert_eq!(f.commit(1), 0, "less than a page waits");
        assert_eq!(f.commit(0), 100);
        assert_eq!(f.read(0, 100).unwrap(), &[1u8; 100][..]);
        f.append(&vec![2u8; 3 * OS_PAGE_SIZE - 100]).unwrap();
        assert_eq!(f.commit(4), 3 * OS_PAGE_SIZE, "a full file always commits");
        assert!(!f.has_buffer());
        assert!(!pool.is_deficient(), "the buffer went back to the pool");
    }

    #[test]
    fn flush_honours_least_pages() {
        let dir = tempfile::tempdir().unwrap();
        let f = file(dir.path(), 16 * OS_PAGE_SIZE);
        f.append(&[7u8; 100]).unwrap();
        assert_eq!(f.flush(1).unwrap(), 0);
        assert_eq!(f.flush(0).unwrap(), 100);
        f.append(&vec![7u8; 2 * OS_PAGE_SIZE]).unwrap();
        assert_eq!(f.flush(4).unwrap(), 100);
        assert_eq!(f.flush(2).unwrap(), 100 + 2 * OS_PAGE_SIZE);
    }

    #[test]
    fn reopened_file_keeps_bytes_and_set_positions_zeroes_stale_tail() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000");
        {
            let f = MappedFile::create(&path, 0, 3 * OS_PAGE_SIZE).unwrap();
            f.append(&vec![9u8; OS_PAGE_SIZE + 10]).unwrap();
        }
        let mut f = MappedFile::open(&path, 0, 3 * OS_PAGE_SIZE).unwrap();
        assert_eq!(f.read(0, 1), None, "nothing is readable before recovery");
        f.set_positions(OS_PAGE_SIZE + 10).unwrap();
        assert_eq!(f.read(OS_PAGE_SIZE, 10).unwrap(), &[9u8; 10][..]);
        f.set_positions(5).unwrap();
        assert_eq!(f.read(0, 5).unwrap(), &[9u8; 5][..]);
        f.set_positions(OS_PAGE_SIZE + 10).unwrap();
        assert!(f.read(5, OS_PAGE_SIZE + 5).unwrap().iter().all(|&b| b == 0));
        assert!(
            MappedFile::open(&path, 0, 4096).is_err(),
            "wrong size is refused"
        );
    }

    #[test]
    fn set_positions_zeroes_stale_pages_beyond_an_all_zero_page() {
        // What a power cut can leave: the synced prefix, a page that was
        // never written back, then pages that were.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("00000000000000000000");
        let size = 8 * OS_PAGE_SIZE;
        {
            let f = MappedFile::create(&path, 0, size).unwrap();
            f.append(&vec![5u8; size]).unwrap();
            f.flush(0).unwrap();
        }
        {
            use std::os::unix::fs::FileExt;
            let file = OpenOptions::new().write(true).open(&path).unwrap();
            file.write_all_at(&vec![0u8; OS_PAGE_SIZE], 2 * OS_PAGE_SIZE as u64)
                .unwrap();
            file.write_all_at(&vec![0u8; 2 * OS_PAGE_SIZE], 5 * OS_PAGE_SIZE as u64)
                .unwrap();
        }
        let mut f = MappedFile::open(&path, 0, size).unwrap();
        f.set_positions(OS_PAGE_SIZE + 7).unwrap();
        f.set_positions(size).unwrap();
        let bytes = f.read(0, size).unwrap();
        assert!(bytes[..OS_PAGE_SIZE + 7].iter().all(|&b| b == 5));
        let stale = bytes[OS_PAGE_SIZE + 7..].iter().position(|&b| b != 0);
        assert_eq!(stale, None, "a stale byte survived past the position");
        drop(f);
        let on_disk = std::fs::read(&path).unwrap();
        assert!(on_disk[OS_PAGE_SIZE + 7..].iter().all(|&b| b == 0));
    }
}
