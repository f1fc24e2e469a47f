//! The store's errors.

use std::{io, path::PathBuf};

use thiserror::Error;

use crate::config::ConfigError;

/// Why the store could not be opened, recovered or shut down.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The configuration was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A file operation failed.
    #[error("{action} {}: {source}", path.display())]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Another process holds the store's lock file.
    #[error("store {} is in use by another process (lock file held)", path.display())]
    Locked {
        /// The lock file.
        path: PathBuf,
    },
}

impl StoreError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(io::Error) -> Self {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
}

/// Why an append was refused. Nothing was stored when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PutError {
    /// The message breaks a size or format rule.
    #[error("message illegal: {reason}")]
    MessageIllegal {
        /// Which rule.
        reason: String,
    },
    /// The properties are longer than 32767 bytes.
    #[error("message properties of {len} bytes exceed the 32767-byte limit")]
    PropertiesSizeExceeded {
        /// Properties length.
        len: usize,
    },
    /// The put lock has been held longer than `osPageCacheBusyTimeOutMills`.
    #[error("page cache busy: the put lock has been held for {held_ms} ms")]
    OsPageCacheBusy {
        /// How long the current holder has held it.
        held_ms: u64,
    },
    /// The store does not take writes now (shut down, disk full, poisoned by
    /// an I/O error).
    #[error("service not available: {reason}")]
    ServiceNotAvailable {
        /// Why.
        reason: String,
    },
    /// No new CommitLog file could be made.
    #[error("create mapped file failed: {reason}")]
    CreateMappedFileFailed {
        /// Why.
        reason: String,
    },
}

/// Why a master's CommitLog bytes were not appended on a replica. Nothing
/// was stored when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ReplicaAppendError {
    /// The bytes do not start where this CommitLog ends.
    #[error("replicated bytes start at {got}, but this CommitLog ends at {expected}")]
    NotContiguous {
        /// This CommitLog's end.
        expected: u64,
        /// Where the bytes start.
        got: u64,
    },
    /// The bytes would run past the end of a CommitLog file.
    #[error(
        "{len} replicated bytes at {offset} run past the end of the CommitLog file at {file_start}"
    )]
    CrossesFile {
        /// Where the bytes start.
        offset: u64,
        /// How many there are.
        len: usize,
        /// The file they start in.
        file_start: u64,
    },
    /// The store does not take writes (poisoned, disk full, no file).
    #[error(transparent)]
    Refused(#[from] PutError),
}
