//! The epoch history of a replicated CommitLog: which master epoch wrote
//! which range of offsets, kept in RocketMQ's `epochFileCheckpoint` file.
//!
//! # File format
//!
//! Text, one item per line (`\n`): the number of entries, the CRC32 of the
//! entry lines (each with its newline) masked to 31 bits (0 means "not
//! checked"), then `epoch-startOffset` per entry, oldest first. Each write
//! goes to `<file>.tmp`, is synced, the old file becomes `<file>.bak`, and
//! the new one takes its name; a reader falls back to `.bak` when the file
//! is missing, empty or damaged.
//!
//! # Invariants
//! - Epochs and start offsets both strictly increase along the history.
//! - An epoch ends where the next starts; the newest has no end.

use std::{
    fs::{self, File},
    io::{self, Write},
    path::{Path, PathBuf},
};

use message_model::record::body_crc;

/// One epoch: the master epoch and the CommitLog offset it starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Epoch {
    /// The master epoch the controller granted.
    pub epoch: i32,
    /// The CommitLog offset of the epoch's first byte.
    pub start_offset: u64,
}

/// The epochs of a CommitLog, oldest first, and the file they persist to.
#[derive(Debug)]
pub struct EpochHistory {
    path: Option<PathBuf>,
    entries: Vec<Epoch>,
}

impl EpochHistory {
    /// A history kept in memory only (for comparing another side's).
    pub fn in_memory(entries: Vec<Epoch>) -> Result<Self, EpochError> {
        check_order(&entries)?;
        Ok(Self {
            path: None,
            entries,
        })
    }

    /// Reads the history at `path` (or its `.bak` copy); an absent file is
    /// an empty history.
    ///
    /// # Errors
    /// Both the file and its copy are unreadable or damaged.
    pub fn open(path: &Path) -> Result<Self, EpochError> {
        let entries = match read(path) {
            Ok(Some(entries)) if !entries.is_empty() => entries,
            first => match (read(&backup(path)), first) {
                (Ok(Some(entries)), _) => entries,
                (Ok(None), Ok(_)) => Vec::new(),
                (Ok(None), Err(e)) | (Err(e), _) => return Err(e),
            },
        };
        check_order(&entries)?;
        Ok(Self {
            path: Some(path.to_owned()),
            entries,
        })
    }

    /// The epochs, oldest first.
    pub fn entries(&self) -> &[Epoch] {
        &self.entries
    }

    /// The newest epoch, if any.
    pub fn last(&self) -> Option<Epoch> {
        self.entries.last().copied()
    }

    /// The newest epoch's number, or -1 without any (as the wire carries it).
    pub fn last_epoch(&self) -> i32 {
        self.last().map_or(-1, |e| e.epoch)
    }

    /// Where `epoch` ends: the next epoch's start, `None` for the newest (or
    /// an unknown epoch).
    pub fn end_of(&self, epoch: i32) -> Option<u64> {
        let i = self.entries.iter().position(|e| e.epoch == epoch)?;
        self.entries.get(i + 1).map(|next| next.start_offset)
    }

    /// The epoch that wrote the byte at `offset`.
    pub fn epoch_at(&self, offset: u64) -> Option<Epoch> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.start_offset <= offset)
            .copied()
    }

    /// The epoch after `epoch`.
    pub fn next_after(&self, epoch: i32) -> Option<Epoch> {
        self.entries.iter().find(|e| e.epoch > epoch).copied()
    }

    /// Starts a new epoch at `start_offset` and persists the history. An
    /// epoch that wrote nothing (starting at the same offset) gives way to
    /// the new one.
    ///
    /// # Errors
    /// The epoch or offset is older than the newest entry's, or the file
    /// cannot be written (the history in memory is unchanged then).
    pub fn append(&mut self, entry: Epoch) -> Result<(), EpochError> {
        let mut next = self.entries.clone();
        if let Some(last) = next.last().copied() {
            if entry.epoch <= last.epoch || entry.start_offset < last.start_offset {
                return Err(EpochError::OutOfOrder {
                    last: last.epoch,
                    last_start: last.start_offset,
                    epoch: entry.epoch,
                    start: entry.start_offset,
                });
            }
            if entry.start_offset == last.start_offset {
                next.pop();
            }
        }
        next.push(entry);
        self.replace(next)
    }

    /// Drops the epochs that start at or after `offset` (the log is cut
    /// there) and persists the history.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn truncate_from(&mut self, offset: u64) -> Result<(), EpochError> {
        let next = self
            .entries
            .iter()
            .copied()
            .filter(|e| e.start_offset < offset)
            .collect();
        self.replace(next)
    }

    /// Drops the epochs that end at or below `offset` (the log's bytes
    /// below it were deleted), keeping the newest, and persists the history.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn forget_before(&mut self, offset: u64) -> Result<(), EpochError> {
        let ends: Vec<Option<u64>> = self.entries.iter().map(|e| self.end_of(e.epoch)).collect();
        let next = self
            .entries
            .iter()
            .zip(ends)
            .filter(|(_, end)| end.is_none_or(|end| end > offset))
            .map(|(e, _)| *e)
            .collect();
        self.replace(next)
    }

    /// Where this log, ending at `local_end`, stops agreeing with another
    /// whose history is `other` and which ends at `other_end`: the end of the
    /// newest epoch both hold with the same start, cut to the shorter of the
    /// two logs. `None` when they share no epoch.
    pub fn consistent_point(&self, local_end: u64, other: &[Epoch], other_end: u64) -> Option<u64> {
        let end_in = |list: &[Epoch], i: usize, log_end: u64| {
            list.get(i + 1).map_or(log_end, |next| next.start_offset)
        };
        self.entries.iter().enumerate().rev().find_map(|(i, mine)| {
            let j = other.iter().position(|o| o.epoch == mine.epoch)?;
            (other[j].start_offset == mine.start_offset)
                .then(|| end_in(&self.entries, i, local_end).min(end_in(other, j, other_end)))
        })
    }

    fn replace(&mut self, next: Vec<Epoch>) -> Result<(), EpochError> {
        if let Some(path) = &self.path {
            write(path, &next).map_err(|e| EpochError::Io {
                path: path.clone(),
                source: e,
            })?;
        }
        self.entries = next;
        Ok(())
    }
}

/// Why an epoch history cannot be read or changed.
#[derive(Debug, thiserror::Error)]
pub enum EpochError {
    /// The file (and its copy) cannot be read or written.
    #[error("epoch file {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
    /// The file's content is not an epoch history.
    #[error("epoch file {}: {reason}", path.display())]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A new epoch is not newer than the last one.
    #[error("epoch {epoch} at {start} is not after epoch {last} at {last_start}")]
    OutOfOrder {
        /// The newest epoch.
        last: i32,
        /// Where it starts.
        last_start: u64,
        /// The refused epoch.
        epoch: i32,
        /// Where it would start.
        start: u64,
    },
}

fn check_order(entries: &[Epoch]) -> Result<(), EpochError> {
    for pair in entries.windows(2) {
        if pair[1].epoch <= pair[0].epoch || pair[1].start_offset <= pair[0].start_offset {
            return Err(EpochError::OutOfOrder {
                last: pair[0].epoch,
                last_start: pair[0].start_offset,
                epoch: pair[1].epoch,
                start: pair[1].start_offset,
            });
        }
    }
    Ok(())
}

fn backup(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".bak");
    PathBuf::from(name)
}

/// The file's text for `entries`.
pub(crate) fn render(entries: &[Epoch]) -> String {
    let lines: String = entries
        .iter()
        .map(|e| format!("{}-{}\n", e.epoch, e.start_offset))
        .collect();
    format!("{}\n{}\n{lines}", entries.len(), body_crc(lines.as_bytes()))
}

/// Reads one file: `None` when it does not exist.
fn read(path: &Path) -> Result<Option<Vec<Epoch>>, EpochError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(EpochError::Io {
                path: path.to_owned(),
                source: e,
            })
        }
    };
    let damaged = |reason: String| EpochError::Damaged {
        path: path.to_owned(),
        reason,
    };
    if text.is_empty() {
        return Ok(Some(Vec::new()));
    }
    let mut lines = text.lines();
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| damaged("the first line is not an entry count".into()))?;
    let crc: i32 = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| damaged("the second line is not a CRC".into()))?;
    let mut body = String::new();
    let mut entries = Vec::new();
    for line in lines {
        body.push_str(line);
        body.push('\n');
        // Lines that are not `epoch-offset` are skipped, as RocketMQ does.
        if let Some((epoch, start)) = line.split_once('-') {
            if let (Ok(epoch), Ok(start_offset)) = (epoch.parse(), start.parse()) {
                entries.push(Epoch {
                    epoch,
                    start_offset,
                });
            }
        }
    }
    if entries.len() != count {
        return Err(damaged(format!(
            "{count} entries announced, {} found",
            entries.len()
        )));
    }
    if crc != 0 && crc != body_crc(body.as_bytes()) {
        return Err(damaged(format!(
            "CRC {crc} does not match the entries' {}",
            body_crc(body.as_bytes())
        )));
    }
    Ok(Some(entries))
}

/// Replaces the file at `path` with `entries`, keeping the old one as
/// `.bak`, durably. An empty history removes nothing and writes nothing but
/// an empty file, which reads as empty.
fn write(path: &Path, entries: &[Epoch]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(render(entries).as_bytes())?;
        f.sync_all()?;
    }
    if path.exists() {
        fs::rename(path, backup(path))?;
    }
    fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(epoch: i32, start_offset: u64) -> Epoch {
        Epoch {
            epoch,
            start_offset,
        }
    }

    #[test]
    fn the_file_is_count_crc_and_lines() {
        // 327520601 is CRC32 of "1-0\n2-1024\n" (0x13859159), whose top bit
        // is already clear.
        assert_eq!(
            render(&[e(1, 0), e(2, 1024)]),
            "2\n327520601\n1-0\n2-1024\n"
        );
    }

    #[test]
    fn appends_persist_and_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("epochFileCheckpoint");
        let mut h = EpochHistory::open(&path).unwrap();
        assert_eq!(h.last_epoch(), -1);
        h.append(e(1, 0)).unwrap();
        h.append(e(2, 500)).unwrap();
        // Older epochs or offsets are refused and change nothing.
        assert!(matches!(
            h.append(e(2, 900)),
            Err(EpochError::OutOfOrder { .. })
        ));
        assert!(h.append(e(3, 400)).is_err());
        // An epoch that wrote nothing gives way.
        h.append(e(3, 500)).unwrap();
        assert_eq!(h.entries(), [e(1, 0), e(3, 500)]);
        let again = EpochHistory::open(&path).unwrap();
        assert_eq!(again.entries(), [e(1, 0), e(3, 500)]);
        assert_eq!(again.end_of(1), Some(500));
        assert_eq!(again.end_of(3), None);
        assert_eq!(again.epoch_at(499), Some(e(1, 0)));
        assert_eq!(again.epoch_at(500), Some(e(3, 500)));
        assert_eq!(again.next_after(1), Some(e(3, 500)));
        assert_eq!(again.next_after(3), None);
    }

    #[test]
    fn a_damaged_file_falls_back_to_its_copy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("epochFileCheckpoint");
        let mut h = EpochHistory::open(&path).unwrap();
        h.append(e(1, 0)).unwrap();
        h.append(e(2, 10)).unwrap();
        // The copy holds the history before the last write.
        fs::write(&path, "2\n12345\n1-0\n2-10\n").unwrap();
        assert_eq!(EpochHistory::open(&path).unwrap().entries(), [e(1, 0)]);
        // A file cut short (fewer entries than announced) too.
        fs::write(&path, "2\n0\n1-0\n").unwrap();
        assert_eq!(EpochHistory::open(&path).unwrap().entries(), [e(1, 0)]);
        // CRC 0 is not checked.
        fs::write(&path, "2\n0\n1-0\n2-10\n").unwrap();
        assert_eq!(
            EpochHistory::open(&path).unwrap().entries(),
            [e(1, 0), e(2, 10)]
        );
        // Both damaged: an error that names the file.
        fs::write(backup(&path), "x").unwrap();
        fs::write(&path, "x").unwrap();
        let err = EpochHistory::open(&path).unwrap_err().to_string();
        assert!(err.contains("epochFileCheckpoint"), "{err}");
    }

    #[test]
    fn the_consistent_point_is_the_end_of_the_newest_shared_epoch() {
        // The slave saw epoch 2 up to 700; the master's epoch 2 ended at
        // 600, where its epoch 3 began.
        let slave = EpochHistory::in_memory(vec![e(1, 0), e(2, 100)]).unwrap();
        let master = [e(1, 0), e(2, 100), e(3, 600)];
        assert_eq!(slave.consistent_point(700, &master, 900), Some(600));
        // The slave is behind within the same epoch: its own end.
        assert_eq!(slave.consistent_point(300, &master, 900), Some(300));
        // The slave's epoch 2 started elsewhere (another master's): only
        // epoch 1 agrees, up to where either's epoch 1 ended.
        let master = [e(1, 0), e(2, 50), e(3, 600)];
        assert_eq!(slave.consistent_point(700, &master, 900), Some(50));
        // Nothing shared.
        let master = [e(5, 0)];
        assert_eq!(slave.consistent_point(700, &master, 900), None);
    }

    #[test]
    fn truncation_drops_whole_epochs_on_either_side() {
        let mut h = EpochHistory::in_memory(vec![e(1, 0), e(2, 100), e(3, 600)]).unwrap();
        h.truncate_from(600).unwrap();
        assert_eq!(h.entries(), [e(1, 0), e(2, 100)]);
        h.forget_before(100).unwrap();
        assert_eq!(h.entries(), [e(2, 100)]);
        // The newest stays whatever the offset.
        h.forget_before(10_000).unwrap();
        assert_eq!(h.entries(), [e(2, 100)]);
    }

    #[test]
    fn out_of_order_histories_are_refused() {
        assert!(EpochHistory::in_memory(vec![e(2, 0), e(1, 10)]).is_err());
        assert!(EpochHistory::in_memory(vec![e(1, 10), e(2, 10)]).is_err());
    }
}
