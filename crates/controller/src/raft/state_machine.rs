//! The applied record and its snapshot: the record lives in memory, shared
//! with the request handlers; a snapshot is the record as JSON in
//! `raft-snapshot.json`, replaced atomically and synced.

use std::{
    io::{self, Cursor},
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use openraft::{
    storage::{RaftStateMachine, Snapshot},
    BasicNode, Entry, EntryPayload, LogId, RaftSnapshotBuilder, SnapshotMeta, StorageError,
    StorageIOError, StoredMembership,
};
use serde::{Deserialize, Serialize};

use super::{files, NodeId, TypeConfig};
use crate::model::{Outcome, Record};

const SNAPSHOT_FILE: &str = "raft-snapshot.json";

/// The state machine's contents, as a snapshot holds them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Applied {
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, BasicNode>,
    record: Record,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
struct SnapshotFile {
    meta: SnapshotMeta<NodeId, BasicNode>,
    /// The record, as JSON (what a snapshot transfer carries).
    data: Vec<u8>,
}

/// The state machine: the [`Record`] every applied command changed.
#[derive(Clone, Debug)]
pub struct StateMachine {
    dir: PathBuf,
    applied: Arc<RwLock<Applied>>,
    snapshot: Arc<RwLock<Option<SnapshotFile>>>,
}

/// A read-only view of the applied record, for request handlers.
#[derive(Clone, Debug)]
pub struct RecordView(Arc<RwLock<Applied>>);

impl RecordView {
    /// Calls `f` with the record as applied so far.
    pub fn read<T>(&self, f: impl FnOnce(&Record) -> T) -> T {
        let applied = self
            .0
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&applied.record)
    }
}

fn invalid(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl StateMachine {
    /// Opens the state machine in `dir`, starting from its last snapshot.
    ///
    /// # Errors
    /// When the snapshot file exists but cannot be read or parsed.
    pub fn open(dir: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let snapshot: Option<SnapshotFile> = match files::read_optional(&dir.join(SNAPSHOT_FILE))? {
            Some(bytes) => Some(serde_json::from_slice(&bytes).map_err(invalid)?),
            None => None,
        };
        let applied = match &snapshot {
            Some(s) => Applied {
                last_applied: s.meta.last_log_id,
                membership: s.meta.last_membership.clone(),
                record: serde_json::from_slice(&s.data).map_err(invalid)?,
            },
            None => Applied::default(),
        };
        Ok(Self {
            dir: dir.to_owned(),
            applied: Arc::new(RwLock::new(applied)),
            snapshot: Arc::new(RwLock::new(snapshot)),
        })
    }

    /// A view of the applied record.
    #[must_use]
    pub fn view(&self) -> RecordView {
        RecordView(Arc::clone(&self.applied))
    }

    fn applied(&self) -> std::sync::RwLockReadGuard<'_, Applied> {
        self.applied
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn keep_snapshot(&self, file: SnapshotFile) -> io::Result<()> {
        let bytes = serde_json::to_vec(&file).map_err(invalid)?;
        let path = self.dir.join(SNAPSHOT_FILE);
        tokio::task::spawn_blocking(move || files::replace(&path, &bytes, true))
            .await
            .map_err(|e| io::Error::other(e.to_string()))??;
        *self
            .snapshot
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(file);
        Ok(())
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError<NodeId>> {
        let (meta, data) = {
            let applied = self.applied();
            let data = serde_json::to_vec(&applied.record)
                .map_err(|e| StorageIOError::read_state_machine(&e))?;
            let id = applied.last_applied.map_or_else(
                || "empty".to_owned(),
                |l| format!("{}-{}", l.leader_id, l.index),
            );
            let meta = SnapshotMeta {
                last_log_id: applied.last_applied,
                last_membership: applied.membership.clone(),
                snapshot_id: id,
            };
            (meta, data)
        };
        let file = SnapshotFile {
            meta: meta.clone(),
            data: data.clone(),
        };
        self.keep_snapshot(file)
            .await
            .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(data)),
        })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = Self;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>), StorageError<NodeId>>
    {
        let applied = self.applied();
        Ok((applied.last_applied, applied.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Outcome>, StorageError<NodeId>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let mut applied = self
            .applied
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut outcomes = Vec::new();
        for entry in entries {
            applied.last_applied = Some(entry.log_id);
            outcomes.push(match entry.payload {
                EntryPayload::Blank => Outcome::Applied(None),
                EntryPayload::Normal(command) => applied.record.apply(&command),
                EntryPayload::Membership(m) => {
                    applied.membership = StoredMembership::new(Some(entry.log_id), m);
                    Outcome::Applied(None)
                }
            });
        }
        Ok(outcomes)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(
        &mut self,
    ) -> Result<Box<Cursor<Vec<u8>>>, StorageError<NodeId>> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError<NodeId>> {
        let data = snapshot.into_inner();
        let record: Record = serde_json::from_slice(&data)
            .map_err(|e| StorageIOError::read_snapshot(Some(meta.signature()), &e))?;
        self.keep_snapshot(SnapshotFile {
            meta: meta.clone(),
            data,
        })
        .await
        .map_err(|e| StorageIOError::write_snapshot(Some(meta.signature()), &e))?;
        *self
            .applied
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Applied {
            last_applied: meta.last_log_id,
            membership: meta.last_membership.clone(),
            record,
        };
        Ok(())
    }

    async fn get_current_snapshot(
        &mut self,
    ) -> Result<Option<Snapshot<TypeConfig>>, StorageError<NodeId>> {
        let snapshot = self
            .snapshot
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(snapshot.as_ref().map(|s| Snapshot {
            meta: s.meta.clone(),
            snapshot: Box::new(Cursor::new(s.data.clone())),
        }))
    }
}
