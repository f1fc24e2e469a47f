//! The Raft log and vote on disk: `raft-log` holds the entries as
//! checksummed records, each append synced before it is acknowledged;
//! `raft-meta.json` holds the vote (synced), the last purged entry (synced)
//! and the committed entry (a hint, not synced).

use std::{
    collections::BTreeMap,
    fmt::Debug,
    fs::File,
    io::{self, Write},
    ops::RangeBounds,
    path::{Path, PathBuf},
    sync::Arc,
};

use openraft::{
    storage::{LogFlushed, LogState, RaftLogStorage},
    Entry, LogId, RaftLogReader, StorageError, StorageIOError, Vote,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Mutex;

use super::{files, NodeId, TypeConfig};

const LOG_FILE: &str = "raft-log";
const META_FILE: &str = "raft-meta.json";

/// What the log keeps beside its entries.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Meta {
    vote: Option<Vote<NodeId>>,
    committed: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
}

struct Inner {
    dir: PathBuf,
    file: Arc<std::sync::Mutex<File>>,
    entries: BTreeMap<u64, Entry<TypeConfig>>,
    meta: Meta,
}

/// The controller's Raft log, kept in a directory of its own.
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Mutex<Inner>>,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").finish_non_exhaustive()
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl LogStore {
    /// Opens the log in `dir` (created if absent), dropping a torn last
    /// record.
    ///
    /// # Errors
    /// When the directory or its files cannot be read, or a record that
    /// passed its checksum does not parse.
    pub fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let meta: Meta = match files::read_optional(&dir.join(META_FILE))? {
            Some(bytes) => serde_json::from_slice(&bytes).map_err(invalid)?,
            None => Meta::default(),
        };
        let path = dir.join(LOG_FILE);
        let (records, intact) = files::read_records(&path)?;
        let on_disk = std::fs::metadata(&path).map_or(0, |m| m.len());
        if on_disk != intact {
            tracing::warn!(
                path = %path.display(),
                kept = intact,
                dropped = on_disk - intact,
                "controller log: dropping a torn last record"
            );
        }
        let mut entries = BTreeMap::new();
        for record in records {
            let entry: Entry<TypeConfig> = serde_json::from_slice(&record).map_err(invalid)?;
            if meta
                .last_purged
                .is_some_and(|p| entry.log_id.index <= p.index)
            {
                continue;
            }
            entries.insert(entry.log_id.index, entry);
        }
        let file = files::open_for_append(&path, intact)?;
        Ok(Self {
            inner: Arc::new(Mutex::new(Inner {
                dir: dir.to_owned(),
                file: Arc::new(std::sync::Mutex::new(file)),
                entries,
                meta,
            })),
        })
    }
}

impl Inner {
    /// Writes the meta file; synced when `durable`.
    async fn save_meta(&self, durable: bool) -> io::Result<()> {
        let bytes = serde_json::to_vec(&self.meta).map_err(invalid)?;
        let path = self.dir.join(META_FILE);
        blocking(move || files::replace(&path, &bytes, durable)).await
    }

    /// Rewrites the log file from the entries held, atomically.
    async fn rewrite_log(&mut self) -> io::Result<()> {
        let mut bytes = Vec::new();
        for entry in self.entries.values() {
            let payload = serde_json::to_vec(entry).map_err(invalid)?;
            files::encode_record(&payload, &mut bytes);
        }
        let path = self.dir.join(LOG_FILE);
        let len = bytes.len() as u64;
        let file = blocking(move || {
            files::replace(&path, &bytes, true)?;
            files::open_for_append(&path, len)
        })
        .await?;
        self.file = Arc::new(std::sync::Mutex::new(file));
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| io::Error::other(e.to_string()))?
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        Ok(inner.entries.range(range).map(|(_, e)| e.clone()).collect())
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError<NodeId>> {
        let inner = self.inner.lock().await;
        let last = inner
            .entries
            .values()
            .next_back()
            .map(|e| e.log_id)
            .or(inner.meta.last_purged);
        Ok(LogState {
            last_purged_log_id: inner.meta.last_purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.meta.vote = Some(*vote);
        inner
            .save_meta(true)
            .await
            .map_err(|e| StorageIOError::write_vote(&e).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.meta.vote)
    }

    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.meta.committed = committed;
        inner
            .save_meta(false)
            .await
            .map_err(|e| StorageIOError::write(&e).into())
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError<NodeId>> {
        Ok(self.inner.lock().await.meta.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut inner = self.inner.lock().await;
        let mut bytes = Vec::new();
        let mut added = Vec::new();
        for entry in entries {
            let payload = serde_json::to_vec(&entry).map_err(|e| StorageIOError::write_logs(&e))?;
            files::encode_record(&payload, &mut bytes);
            added.push(entry);
        }
        let file = Arc::clone(&inner.file);
        let written = blocking(move || {
            let mut f = file
                .lock()
                .map_err(|_| io::Error::other("log file lock poisoned"))?;
            f.write_all(&bytes)?;
            f.sync_data()
        })
        .await;
        match written {
            Ok(()) => {
                for entry in added {
                    inner.entries.insert(entry.log_id.index, entry);
                }
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                let error = StorageIOError::write_logs(&e);
                callback.log_io_completed(Err(e));
                Err(error.into())
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.entries.retain(|index, _| *index < log_id.index);
        inner
            .rewrite_log()
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError<NodeId>> {
        let mut inner = self.inner.lock().await;
        inner.meta.last_purged = Some(log_id);
        inner
            .save_meta(true)
            .await
            .map_err(|e| StorageIOError::write_logs(&e))?;
        inner.entries.retain(|index, _| *index > log_id.index);
        inner
            .rewrite_log()
            .await
            .map_err(|e| StorageIOError::write_logs(&e).into())
    }
}
