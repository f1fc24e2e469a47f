//! The IndexFiles of a store: loading them (and, after a crash, dropping
//! those that may be incomplete), indexing a dispatched message, rolling to
//! a new file when one is full, flushing full files for the checkpoint,
//! queries and deletion of files whose messages are gone.

use std::{
    fs, io,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError, RwLock},
    time::{Duration, Instant},
};

use message_model::{
    properties::{self, keys},
    record::StoredMessage,
};

use super::file::{key_hash, Geometry, Hit, IndexFile, IndexHeader, Lookup, PutError};
use crate::{checkpoint::Checkpoint, config::StoreConfig};

/// How long after a failed file creation the next one is tried.
const CREATE_RETRY: Duration = Duration::from_secs(1);

/// The separator of the keys in a message's `KEYS` property.
const KEY_SEPARATOR: char = ' ';

/// The IndexFiles, oldest first.
#[derive(Debug)]
pub(crate) struct IndexService {
    dir: PathBuf,
    geometry: Geometry,
    enabled: bool,
    files: RwLock<Vec<Arc<IndexFile>>>,
    /// Full files not flushed yet; the housekeeping thread flushes them and
    /// records the newest one's end time in the checkpoint.
    unflushed: Mutex<Vec<Arc<IndexFile>>>,
    /// When making a file last failed (the dispatch skips indexing until
    /// [`CREATE_RETRY`] has passed).
    create_failed: Mutex<Option<Instant>>,
}

/// What loading found.
#[derive(Debug)]
pub(crate) struct Loaded {
    /// The files.
    pub service: IndexService,
    /// After a crash: the CommitLog offset from which messages must be
    /// dispatched again for the index to be complete (the last message the
    /// files kept have indexed, or 0 when none was kept).
    pub dispatch_from: Option<u64>,
}

impl IndexService {
    /// Loads the files under `<storePathRootDir>/index` in name order.
    /// After a crash (`crashed`), the files from the first one that may be
    /// incomplete on are deleted: one not wholly flushed (its end time is
    /// after the checkpoint's `index_ts`), one whose header was never
    /// written, or one that indexes messages at or past the recovered
    /// CommitLog end `log_end`.
    ///
    /// # Errors
    /// The directory cannot be read, or a file cannot be opened (a length
    /// that does not fit `maxHashSlotNum` and `maxIndexNum` says so) or
    /// deleted.
    pub(crate) fn load(
        config: &StoreConfig,
        index_ts: i64,
        crashed: bool,
        log_end: u64,
    ) -> io::Result<Loaded> {
        let dir = config.index_dir();
        let geometry = Geometry {
            slots: config.max_hash_slot_num,
            entries: config.max_index_num,
        };
        let mut files = Vec::new();
        for path in file_names(&dir)? {
            let file = IndexFile::open(&path, geometry).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!(
                        "index file {}: {e} (files are sized by maxHashSlotNum {} and \
                         maxIndexNum {}: start with the values it was made with, or remove it)",
                        path.display(),
                        geometry.slots,
                        geometry.entries
                    ),
                )
            })?;
            files.push(Arc::new(file));
        }
        let mut dispatch_from = None;
        if crashed {
            let kept = files
                .iter()
                .position(|f| !settled(&f.header(), index_ts, log_end))
                .unwrap_or(files.len());
            if kept < files.len() {
                for file in files.drain(kept..) {
                    tracing::info!(file = %file.path().display(), "deleting index file that may be incomplete after a crash; it is rebuilt");
                    file.unlink()?;
                }
                // Gone before anything is indexed again, also after a power cut.
                sync_dir(&dir)?;
            }
            dispatch_from = Some(
                files
                    .last()
                    .map_or(0, |f| u64::try_from(f.header().end_phy_offset).unwrap_or(0)),
            );
        }
        Ok(Loaded {
            service: Self {
                dir,
                geometry,
                enabled: config.message_index_enable,
                files: RwLock::new(files),
                unflushed: Mutex::new(Vec::new()),
                create_failed: Mutex::new(None),
            },
            dispatch_from,
        })
    }

    /// Whether messages are indexed (`messageIndexEnable`).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// The files, oldest first.
    pub(crate) fn files(&self) -> Vec<Arc<IndexFile>> {
        self.files
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn last(&self) -> Option<Arc<IndexFile>> {
        self.files
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .last()
            .cloned()
    }

    /// Indexes a dispatched message: its `UNIQ_KEY`, then each key of its
    /// `KEYS`, under `topic#key`. A message at or below what the newest
    /// file has indexed is skipped (dispatched again after a crash). All
    /// keys of a message go into one file: a file without room for all of
    /// them is left for a new one, so a message is never split over two.
    pub(crate) fn build(&self, m: &StoredMessage<'_>) {
        let uniq = properties::find(m.properties, keys::UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
        let key_list = properties::find(m.properties, keys::KEYS);
        let tokens = || {
            key_list
                .into_iter()
                .flat_map(|k| k.split(KEY_SEPARATOR))
                .filter(|k| !k.is_empty())
        };
        let count = usize::from(uniq.is_some()) + tokens().count();
        if count == 0 {
            return;
        }
        let Some(mut file) = self.last().or_else(|| self.roll(None)) else {
            return;
        };
        let mut writer = file.writer();
        let h = *writer.header();
        if m.physical_offset < h.end_phy_offset
            || (m.physical_offset == h.end_phy_offset && h.has_indexed())
        {
            return;
        }
        // A fresh file takes whatever fits (a message with more keys than
        // a file holds would never fit anywhere).
        let fresh = h.index_count <= 1;
        if writer.room() < count && !fresh {
            drop(writer);
            let Some(next) = self.roll(Some((&file, h))) else {
                return;
            };
            file = next;
            writer = file.writer();
        }
        let hashes = uniq
            .into_iter()
            .chain(tokens())
            .map(|k| key_hash(m.topic, k));
        for hash in hashes {
            match writer.put(hash, m.physical_offset, m.store_timestamp) {
                Ok(()) => {}
                Err(PutError::Full) => break,
                Err(PutError::Io(e)) => {
                    tracing::error!(file = %file.path().display(), offset = m.physical_offset, cause = %e, "cannot allocate index entries; message not indexed by all its keys");
                    break;
                }
            }
        }
    }

    /// Makes a new newest file following `full` (whose header is given),
    /// which goes to the flush list. `None` while making files fails.
    fn roll(&self, full: Option<(&Arc<IndexFile>, IndexHeader)>) -> Option<Arc<IndexFile>> {
        let mut failed = self
            .create_failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if failed.is_some_and(|at| at.elapsed() < CREATE_RETRY) {
            return None;
        }
        let last_name = full.map(|(f, _)| f.name().to_owned());
        let path = self.dir.join(next_name(last_name.as_deref()));
        let made = fs::create_dir_all(&self.dir)
            .and_then(|()| IndexFile::create(&path, self.geometry, full.as_ref().map(|(_, h)| h)));
        match made {
            Ok(file) => {
                *failed = None;
                let file = Arc::new(file);
                self.files
                    .write()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Arc::clone(&file));
                if let Some((full, _)) = full {
                    self.unflushed
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Arc::clone(full));
                }
                tracing::info!(file = %path.display(), "new index file");
                Some(file)
            }
            Err(e) => {
                *failed = Some(Instant::now());
                tracing::error!(file = %path.display(), cause = %e, "cannot make an index file; messages are not indexed until one can be made");
                None
            }
        }
    }

    /// Flushes the full files not flushed yet and records the newest end
    /// time among them in the checkpoint (the caller writes it). A file
    /// that fails stays for the next call.
    pub(crate) fn flush_full(&self, checkpoint: &Checkpoint) {
        let pending = std::mem::take(
            &mut *self
                .unflushed
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let mut failed = Vec::new();
        for (i, file) in pending.iter().enumerate() {
            match file.flush() {
                Ok(()) => checkpoint.set_index_msg_timestamp(file.header().end_timestamp),
                Err(e) => {
                    tracing::error!(file = %file.path().display(), cause = %e, "cannot flush a full index file");
                    // Later files must not move the checkpoint past this one.
                    failed.extend(pending[i..].iter().cloned());
                    break;
                }
            }
        }
        if !failed.is_empty() {
            let mut unflushed = self
                .unflushed
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            failed.append(&mut unflushed);
            *unflushed = failed;
        }
    }

    /// Flushes every file (at shutdown), the full ones first for the
    /// checkpoint.
    ///
    /// # Errors
    /// The first flush error.
    pub(crate) fn flush_all(&self, checkpoint: &Checkpoint) -> io::Result<()> {
        self.flush_full(checkpoint);
        if !self
            .unflushed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_empty()
        {
            return Err(io::Error::other("a full index file could not be flushed"));
        }
        match self.last() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }

    /// Deletes the files, newest first, that index a message at or past
    /// `phys` (a replica's CommitLog was cut there). Returns where the
    /// earliest deleted file began, from which the messages it also
    /// indexed (below `phys`) must be indexed again; `None` when nothing
    /// went.
    pub(crate) fn cut_at(&self, phys: u64) -> Option<u64> {
        let phys = i64::try_from(phys).unwrap_or(i64::MAX);
        let mut redo: Option<u64> = None;
        loop {
            let file = {
                let mut files = self.files.write().unwrap_or_else(PoisonError::into_inner);
                match files.last() {
                    Some(f) if f.header().end_phy_offset >= phys && f.header().has_indexed() => {}
                    _ => break,
                }
                files.pop()?
            };
            let begin = u64::try_from(file.header().begin_phy_offset).unwrap_or(0);
            redo = Some(redo.map_or(begin, |r| r.min(begin)));
            match file.unlink() {
                Ok(()) => {
                    tracing::warn!(file = %file.path().display(), "deleted an index file past a CommitLog cut")
                }
                Err(e) => {
                    tracing::warn!(file = %file.path().display(), cause = %e, "cannot remove an index file past a CommitLog cut")
                }
            }
        }
        redo
    }

    /// Deletes files, oldest first and never the newest, while every
    /// message they index lies below the CommitLog's minimum offset
    /// `min_phy_offset`. Returns how many went.
    pub(crate) fn delete_expired(&self, min_phy_offset: u64) -> usize {
        let min = i64::try_from(min_phy_offset).unwrap_or(i64::MAX);
        let mut deleted = 0;
        loop {
            let file = {
                let mut files = self.files.write().unwrap_or_else(PoisonError::into_inner);
                if files.len() < 2 || files[0].header().end_phy_offset >= min {
                    break;
                }
                files.remove(0)
            };
            match file.unlink() {
                Ok(()) => tracing::info!(file = %file.path().display(), "deleted index file"),
                Err(e) => {
                    tracing::warn!(file = %file.path().display(), cause = %e, "cannot remove a deleted index file's name");
                }
            }
            deleted += 1;
        }
        deleted
    }

    /// The CommitLog offsets of messages whose `topic#key` hashes as
    /// `key`'s does, stored within `[begin, end]` (ms) and not below
    /// `min_phy_offset`: at most `max`, newest files first. Also the newest
    /// file's end time and end offset (0 without files).
    pub(crate) fn query(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        (begin, end): (i64, i64),
        min_phy_offset: u64,
    ) -> (Vec<Hit>, i64, i64) {
        let files = self.files();
        let newest = files.last().map(|f| f.header());
        let mut hits = Vec::new();
        let lookup = Lookup {
            hash: key_hash(topic, key),
            begin,
            end,
            min_phy_offset: i64::try_from(min_phy_offset).unwrap_or(i64::MAX),
            max,
        };
        for file in files.iter().rev() {
            let h = file.header();
            if h.overlaps(begin, end) {
                file.select(&lookup, &mut hits);
            }
            if h.begin_timestamp < begin || hits.len() >= max {
                break;
            }
        }
        (
            hits,
            newest.map_or(0, |h| h.end_timestamp),
            newest.map_or(0, |h| h.end_phy_offset),
        )
    }
}

/// Whether a file found after a crash can be kept: wholly flushed as the
/// checkpoint says, its header written, and nothing in it past the log.
fn settled(h: &IndexHeader, index_ts: i64, log_end: u64) -> bool {
    h.index_count >= 1
        && h.end_timestamp <= index_ts
        && u64::try_from(h.end_phy_offset).is_ok_and(|o| o < log_end || (o == 0 && log_end == 0))
}

/// The regular files of `dir` in name order (none when it does not exist).
fn file_names(dir: &Path) -> io::Result<Vec<PathBuf>> {
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}

/// The name of a new file: the local time now, `yyyyMMddHHmmssSSS`, or one
/// more than the newest file's name when that is not later (two files made
/// within one millisecond, or a clock that went back), so that name order
/// stays creation order.
fn next_name(after: Option<&str>) -> String {
    let now = chrono::Local::now().format("%Y%m%d%H%M%S%3f").to_string();
    match after.and_then(|a| a.parse::<u64>().ok()) {
        Some(last) if now.parse::<u64>().is_ok_and(|n| n <= last) => format!("{:017}", last + 1),
        _ => now,
    }
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    fs::File::open(dir)?.sync_all()
}
