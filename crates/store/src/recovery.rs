//! Recovery: finds where the valid CommitLog ends, truncates what follows,
//! and loads the ConsumeQueues without entries past that end.
//!
//! After a clean shutdown (no abort file) the scan starts at the newest file
//! that holds a valid first record. After a crash it starts at the newest file
//! whose first record is older than the checkpoint's bound, validating every
//! record (magic, size, physical offset, and body CRC when
//! `checkCRCOnRecover`), and everything from that file on is indexed again
//! (from an earlier file when the IndexFiles need it: the store moves the
//! start back with [`file_start`]).

use std::{fs, path::Path, time::Instant};

use message_model::record::{self, Record};

use crate::{
    checkpoint::Checkpoint, config::StoreConfig, consume_queue::ConsumeQueue, error::StoreError,
    file_queue::FileQueue, mmap::MappedFile,
};

/// What recovery hands to the store.
#[derive(Debug)]
pub(crate) struct Recovered {
    /// CommitLog files, positioned at the valid end.
    pub commit_log_files: Vec<MappedFile>,
    /// ConsumeQueues, without entries past the valid end.
    pub queues: Vec<ConsumeQueue>,
    /// Where indexing resumes.
    pub reput_from: u64,
    /// Physical offset after the last valid record.
    pub end: u64,
}

/// Recovers the CommitLog and the ConsumeQueues.
pub(crate) fn recover(
    config: &StoreConfig,
    checkpoint: &Checkpoint,
    crashed: bool,
) -> Result<Recovered, StoreError> {
    let started = Instant::now();
    let dir = config.commit_log_dir();
    let mut files = FileQueue::load_files(&dir, config.mapped_file_size_commit_log)
        .map_err(StoreError::io("load commit log files", &dir))?;
    for file in &mut files {
        let size = file.size();
        let path = file.path().to_path_buf();
        file.set_positions(size)
            .map_err(StoreError::io("sync commit log file", path))?;
    }
    let start = if crashed {
        abnormal_start(&files, checkpoint.min_timestamp())
    } else {
        normal_start(&files)
    };
    let (end_index, end_pos, messages) = scan(&files, start, config.check_crc_on_recover);
    let mut deleted = false;
    while files.len() > end_index + 1 {
        if let Some(file) = files.pop() {
            let path = file.path().to_path_buf();
            file.destroy()
                .map_err(StoreError::io("delete commit log file past the end", path))?;
            deleted = true;
        }
    }
    if deleted {
        // A deleted file must not come back after a power cut, under new
        // appends that took its name.
        std::fs::File::open(&dir)
            .and_then(|d| d.sync_all())
            .map_err(StoreError::io("sync commit log directory", &dir))?;
    }
    if let Some(file) = files.get_mut(end_index) {
        let path = file.path().to_path_buf();
        file.set_positions(end_pos)
            .map_err(StoreError::io("truncate commit log file", path))?;
    }
    let end = files
        .last()
        .map_or(0, |f| f.from_offset() + f.wrote() as u64);
    let queues = recover_queues(config, end)?;
    let first = files.first().map_or(0, MappedFile::from_offset);
    let reput_from = if crashed {
        files.get(start).map_or(0, MappedFile::from_offset)
    } else {
        queues
            .iter()
            .filter_map(ConsumeQueue::last_commit_log_end)
            .max()
            .unwrap_or(first)
    };
    // A queue that lost files to a power cut is dispatched again from its
    // last entry (the dispatch skips entries a queue or index already has).
    let reput_from = queues
        .iter()
        .filter(|q| q.cut_at_gap())
        .map(|q| q.last_commit_log_end().unwrap_or(first).max(first))
        .fold(reput_from, u64::min);
    tracing::info!(
        crashed,
        files = files.len(),
        scanned_from = files.get(start).map_or(0, MappedFile::from_offset),
        messages,
        end,
        queues = queues.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "commit log recovered"
    );
    Ok(Recovered {
        commit_log_files: files,
        queues,
        reput_from,
        end,
    })
}

/// The start of the file that holds `offset` (the first file's start when
/// `offset` is below it, 0 without files): a record boundary from which a
/// dispatch can run.
pub(crate) fn file_start(files: &[MappedFile], offset: u64) -> u64 {
    files
        .iter()
        .rev()
        .find(|f| f.from_offset() <= offset)
        .or(files.first())
        .map_or(0, MappedFile::from_offset)
}

/// The newest file whose first record is a valid message (0 if none).
fn normal_start(files: &[MappedFile]) -> usize {
    (0..files.len())
        .rev()
        .find(|&i| matches!(first_record(&files[i]), Record::Message(_)))
        .unwrap_or(0)
}

/// The newest file whose first record is valid and stored no later than
/// `min_timestamp` (0 if none).
fn abnormal_start(files: &[MappedFile], min_timestamp: i64) -> usize {
    (0..files.len())
        .rev()
        .find(|&i| matches!(first_record(&files[i]), Record::Message(m) if m.store_timestamp <= min_timestamp))
        .unwrap_or(0)
}

fn first_record(file: &MappedFile) -> Record<'_> {
    record::check(file.committed_bytes(), true)
}

/// Scans from file `start` and returns the index of the file where the valid
/// data ends, the position in it, and the number of valid messages seen.
fn scan(files: &[MappedFile], start: usize, check_crc: bool) -> (usize, usize, u64) {
    let mut messages = 0;
    let mut end = (start, 0);
    for (i, file) in files.iter().enumerate().skip(start) {
        let data = file.committed_bytes();
        let mut pos = 0;
        loop {
            match record::check(&data[pos..], check_crc) {
                Record::Message(m)
                    if m.physical_offset == (file.from_offset() + pos as u64) as i64 =>
                {
                    pos += m.total_size;
                    messages += 1;
                    end = (i, pos);
                }
                Record::Blank => {
                    end = (i, file.size());
                    break;
                }
                Record::End => return (end.0, end.1, messages),
                Record::Message(m) => {
                    tracing::warn!(
                        offset = file.from_offset() + pos as u64,
                        recorded = m.physical_offset,
                        "stale record in commit log; truncating here"
                    );
                    return (end.0, end.1, messages);
                }
                Record::Invalid(reason) => {
                    tracing::warn!(
                        file = %file.path().display(),
                        offset = file.from_offset() + pos as u64,
                        reason,
                        "torn or corrupt record in commit log; truncating here"
                    );
                    return (end.0, end.1, messages);
                }
            }
        }
        // A file that ends with a filler continues in the next one; if there
        // is no next one, the end is the end of this file.
    }
    (end.0, end.1, messages)
}

fn recover_queues(
    config: &StoreConfig,
    commit_log_end: u64,
) -> Result<Vec<ConsumeQueue>, StoreError> {
    let root = config.consume_queue_dir();
    let mut queues = Vec::new();
    if !root.exists() {
        return Ok(queues);
    }
    for topic_dir in read_dirs(&root)? {
        let Some(topic) = topic_dir
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_owned)
        else {
            continue;
        };
        for queue_dir in read_dirs(&topic_dir)? {
            let Some(queue_id) = queue_dir
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
            let cq = ConsumeQueue::recover(
                &root,
                &topic,
                queue_id,
                config.mapped_file_size_consume_queue,
                commit_log_end,
            )
            .map_err(StoreError::io("recover consume queue", &queue_dir))?;
            queues.push(cq);
        }
    }
    Ok(queues)
}

fn read_dirs(dir: &Path) -> Result<Vec<std::path::PathBuf>, StoreError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).map_err(StoreError::io("list directory", dir))? {
        let path = entry.map_err(StoreError::io("list directory", dir))?.path();
        if path.is_dir() {
            out.push(path);
        }
    }
    out.sort();
    Ok(out)
}
