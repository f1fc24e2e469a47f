//! Power-loss testing: a record of what each of the store's syncs made
//! durable, and [`cut_power`], which puts the store's files back to what
//! those syncs covered, as a power cut would leave them. A process killed
//! with SIGKILL keeps its writes in the page cache; a power cut keeps only
//! what was synced, and this is how the tests get the second from the first.
//!
//! When the environment variable `STORE_SYNC_LOG` names a file, the store
//! appends one line to it after each sync has returned (tab-separated, the
//! path last):
//! - `create <path>`: a mapped file was created; none of it is durable
//!   yet. It is recorded while the file is still empty (before it is
//!   sized), so a process killed in between leaves at most an empty file
//!   the log does not name, which recovery removes; a failed creation of
//!   an existing file records nothing.
//! - `sync <len> <path>`: bytes `[0, len)` of a mapped file are durable.
//! - `reset <len> <path>`: recovery made a mapped file's first `len` bytes
//!   its content and synced zeroes after them.
//! - `snap <hex> <path>`: a file rewritten in place (the checkpoint) was
//!   synced with these first bytes.
//!
//! Each line is one `write` to a file opened for appending, so the lines of
//! a process killed at any moment are whole and in order. Without the
//! variable nothing is recorded and nothing is slower.

use std::{
    collections::HashMap,
    fs::{File, OpenOptions},
    io::{self, BufRead, BufReader, Write},
    os::unix::fs::FileExt,
    path::{Path, PathBuf},
    sync::OnceLock,
};

use crate::mmap::OS_PAGE_SIZE;

/// The environment variable that turns recording on.
pub const SYNC_LOG_ENV: &str = "STORE_SYNC_LOG";

fn log_file() -> Option<&'static File> {
    static LOG: OnceLock<Option<File>> = OnceLock::new();
    LOG.get_or_init(|| {
        let path = std::env::var_os(SYNC_LOG_ENV)?;
        match OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => Some(file),
            Err(e) => {
                tracing::error!(path = ?path, cause = %e, "cannot open the sync log; not recording");
                None
            }
        }
    })
    .as_ref()
}

fn record(kind: &str, value: &str, path: &Path) {
    let Some(mut file) = log_file() else {
        return;
    };
    let line = format!("{kind}\t{value}\t{}\n", path.display());
    if let Err(e) = file.write_all(line.as_bytes()) {
        tracing::error!(cause = %e, "cannot append to the sync log");
    }
}

/// Records that a mapped file was created, still empty, at `path`.
pub(crate) fn created(path: &Path) {
    record("create", "-", path);
}

/// Records that the first `len` bytes of the file at `path` are durable.
pub(crate) fn synced(path: &Path, len: usize) {
    record("sync", &len.to_string(), path);
}

/// Records that recovery set the file at `path` to its first `len` bytes
/// followed by zeroes, durably (its length may have moved backwards).
pub(crate) fn reset(path: &Path, len: usize) {
    record("reset", &len.to_string(), path);
}

/// Records that the file at `path`, rewritten in place, starts with `bytes`
/// on disk.
pub(crate) fn snapshot(path: &Path, bytes: &[u8]) {
    if log_file().is_none() {
        return;
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    record("snap", &hex, path);
}

/// What [`cut_power`] did to the files.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PowerCut {
    /// Files whose unsynced tail was dropped.
    pub files_cut: usize,
    /// Files created and never synced, removed as their directory entry
    /// was never made durable.
    pub files_removed: usize,
    /// Files rewritten in place and put back to their last synced bytes.
    pub files_restored: usize,
    /// Bytes past the synced length that were dropped (zeroed).
    pub bytes_dropped: u64,
    /// Pages past the synced length kept, as if the kernel had written
    /// them back before the cut.
    pub pages_kept: u64,
}

#[derive(Default)]
struct Seen {
    /// Position among the log's creations, for a file created while logged.
    created: Option<usize>,
    durable: Option<u64>,
    snap: Option<Vec<u8>>,
}

/// Puts every file the log at `log` names back to what its syncs made
/// durable; run it after the recording process was killed. Past a mapped
/// file's synced length each page is dropped (zeroed) unless `keep_page`
/// says to keep it. Creations are durable in the order they were made, as
/// a journaling filesystem commits them: files created after the last one
/// that kept any byte are removed. Files the log does not name are left
/// alone.
///
/// # Errors
/// The log cannot be read, has a line that is not a record, or a file
/// cannot be changed.
pub fn cut_power(log: &Path, keep_page: &mut dyn FnMut() -> bool) -> io::Result<PowerCut> {
    let mut seen: HashMap<PathBuf, Seen> = HashMap::new();
    let mut creations = 0;
    for line in BufReader::new(File::open(log)?).lines() {
        let line = line?;
        let mut fields = line.splitn(3, '\t');
        let (Some(kind), Some(value), Some(path)) = (fields.next(), fields.next(), fields.next())
        else {
            return Err(bad_record(&line));
        };
        let entry = seen.entry(PathBuf::from(path)).or_default();
        match kind {
            "create" => {
                *entry = Seen {
                    created: Some(creations),
                    ..Seen::default()
                };
                creations += 1;
            }
            "sync" => {
                let len = value.parse::<u64>().map_err(|_| bad_record(&line))?;
                entry.durable = Some(entry.durable.map_or(len, |d| d.max(len)));
            }
            "reset" => {
                entry.durable = Some(value.parse::<u64>().map_err(|_| bad_record(&line))?);
            }
            "snap" => entry.snap = Some(from_hex(value).ok_or_else(|| bad_record(&line))?),
            _ => return Err(bad_record(&line)),
        }
    }
    let mut cut = PowerCut::default();
    // Created files that kept nothing, by creation, and the last creation
    // that kept something.
    let mut empty: Vec<(usize, PathBuf, u64)> = Vec::new();
    let mut last_kept = None;
    for (path, seen) in seen {
        let file = match OpenOptions::new().read(true).write(true).open(&path) {
            Ok(f) => f,
            // Deleted since (retention, recovery, a creation that failed
            // to size it): nothing to put back.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(bytes) = seen.snap {
            file.write_all_at(&bytes, 0)?;
            cut.files_restored += 1;
            continue;
        }
        let len = file.metadata()?.len();
        let durable = seen.durable.unwrap_or(0).min(len);
        let (dropped, kept) = drop_tail(&file, durable, len, keep_page)?;
        cut.files_cut += usize::from(dropped > 0);
        cut.bytes_dropped += dropped;
        cut.pages_kept += kept;
        if let Some(order) = seen.created {
            if seen.durable.is_none() && kept == 0 {
                empty.push((order, path, dropped));
            } else {
                last_kept = last_kept.max(Some(order));
            }
        }
    }
    for (order, path, dropped) in empty {
        if last_kept.is_none_or(|last| order > last) {
            std::fs::remove_file(&path)?;
            cut.files_removed += 1;
            cut.files_cut -= usize::from(dropped > 0);
            cut.bytes_dropped -= dropped;
        }
    }
    Ok(cut)
}

/// Zeroes `[from, len)` of `file` page by page, except the pages
/// `keep_page` keeps; only pages holding a non-zero byte are asked about or
/// written. Returns the bytes zeroed and the pages kept.
fn drop_tail(
    file: &File,
    from: u64,
    len: u64,
    keep_page: &mut dyn FnMut() -> bool,
) -> io::Result<(u64, u64)> {
    const CHUNK: u64 = 256 * OS_PAGE_SIZE as u64;
    let page = OS_PAGE_SIZE as u64;
    let zeros = vec![0u8; OS_PAGE_SIZE];
    let mut buf = vec![0u8; 256 * OS_PAGE_SIZE];
    let (mut dropped, mut kept) = (0, 0);
    let mut chunk_at = from;
    while chunk_at < len {
        // Chunks end on page boundaries, so pages never straddle two.
        let chunk_end = (chunk_at - chunk_at % page + CHUNK).min(len);
        let chunk = &mut buf[..usize::try_from(chunk_end - chunk_at).unwrap_or(0)];
        file.read_exact_at(chunk, chunk_at)?;
        let mut at = chunk_at;
        while at < chunk_end {
            let end = (at - at % page + page).min(chunk_end);
            let range = usize::try_from(at - chunk_at).unwrap_or(0)
                ..usize::try_from(end - chunk_at).unwrap_or(0);
            if chunk[range.clone()].iter().any(|&b| b != 0) {
                if keep_page() {
                    kept += 1;
                } else {
                    file.write_all_at(&zeros[..range.len()], at)?;
                    dropped += end - at;
                }
            }
            at = end;
        }
        chunk_at = chunk_end;
    }
    Ok((dropped, kept))
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn bad_record(line: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("not a sync log record: {line:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_log(dir: &Path, lines: &[String]) -> PathBuf {
        let log = dir.join("sync.log");
        std::fs::write(&log, lines.concat()).unwrap();
        log
    }

    #[test]
    fn drops_what_no_sync_covered_and_restores_snapshots() {
        let dir = tempfile::tempdir().unwrap();
        let synced = dir.path().join("a");
        std::fs::write(&synced, vec![7u8; 3 * OS_PAGE_SIZE]).unwrap();
        let unsynced = dir.path().join("b");
        std::fs::write(&unsynced, vec![1u8; 10]).unwrap();
        let untouched = dir.path().join("c");
        std::fs::write(&untouched, vec![5u8; 10]).unwrap();
        let rewritten = dir.path().join("d");
        std::fs::write(&rewritten, [9u8; 4]).unwrap();
        let log = write_log(
            dir.path(),
            &[
                format!("create\t-\t{}\n", synced.display()),
                format!("sync\t100\t{}\n", synced.display()),
                format!("sync\t50\t{}\n", synced.display()),
                format!("create\t-\t{}\n", unsynced.display()),
                format!("snap\t0102\t{}\n", rewritten.display()),
            ],
        );
        let cut = cut_power(&log, &mut || false).unwrap();
        assert_eq!(
            cut,
            PowerCut {
                files_cut: 1,
                files_removed: 1,
                files_restored: 1,
                bytes_dropped: 3 * OS_PAGE_SIZE as u64 - 100,
                pages_kept: 0,
            }
        );
        let a = std::fs::read(&synced).unwrap();
        assert_eq!(a.len(), 3 * OS_PAGE_SIZE, "length is kept");
        assert!(a[..100].iter().all(|&b| b == 7));
        assert!(a[100..].iter().all(|&b| b == 0));
        assert!(!unsynced.exists());
        assert_eq!(std::fs::read(&untouched).unwrap(), vec![5u8; 10]);
        assert_eq!(std::fs::read(&rewritten).unwrap(), vec![1, 2, 9, 9]);
    }

    #[test]
    fn kept_pages_survive_and_keep_an_unsynced_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a");
        std::fs::write(&file, vec![3u8; 4 * OS_PAGE_SIZE]).unwrap();
        let log = write_log(dir.path(), &[format!("create\t-\t{}\n", file.display())]);
        let mut n = 0;
        let cut = cut_power(&log, &mut || {
            n += 1;
            n == 2
        })
        .unwrap();
        assert_eq!((cut.pages_kept, cut.files_removed), (1, 0));
        let a = std::fs::read(&file).unwrap();
        assert!(a[..OS_PAGE_SIZE].iter().all(|&b| b == 0));
        assert!(a[OS_PAGE_SIZE..2 * OS_PAGE_SIZE].iter().all(|&b| b == 3));
        assert!(a[2 * OS_PAGE_SIZE..].iter().all(|&b| b == 0));
    }

    #[test]
    fn a_malformed_log_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let log = write_log(dir.path(), &["sync\tnot-a-number\t/x\n".to_string()]);
        let err = cut_power(&log, &mut || false).unwrap_err();
        assert!(err.to_string().contains("not a sync log record"), "{err}");
    }
}
