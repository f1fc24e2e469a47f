//! Keeping the pages just ahead of the CommitLog's write position faulted
//! in ("store-warm"), so that an append under the put lock does not stop for
//! the kernel to allocate and zero a page.
//!
//! The appender reports how far it wrote; whenever that comes within half a
//! window of what was already asked for, one job for the next window goes
//! to the warming thread. That is one channel message per half window of
//! appended bytes, and the page cache held ahead of the writer is bounded
//! by the window.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        mpsc, Arc,
    },
    thread,
};

use crate::mmap::MappedFile;

/// Faults in the pages ahead of the appender, on a thread of its own.
#[derive(Debug)]
pub(crate) struct WarmAhead {
    window: u64,
    /// Absolute offset up to which pages were asked for.
    asked_to: AtomicU64,
    jobs: mpsc::Sender<Job>,
}

#[derive(Debug)]
struct Job {
    file: Arc<MappedFile>,
    from: usize,
    to: usize,
}

impl WarmAhead {
    /// Starts the warming thread for a window of `window` bytes; `None` when
    /// the window is 0 or the thread cannot be started.
    pub(crate) fn start(window: usize) -> Option<Self> {
        if window == 0 {
            return None;
        }
        let (jobs, rx) = mpsc::channel::<Job>();
        let spawned = thread::Builder::new()
            .name("store-warm".into())
            .spawn(move || {
                for job in rx {
                    if !job.file.prefault(job.from, job.to) {
                        tracing::debug!(
                            path = %job.file.path().display(),
                            "page pre-faulting not supported; appends fault their own pages"
                        );
                        return;
                    }
                }
            });
        if let Err(e) = spawned {
            tracing::warn!(cause = %e, "cannot start the page warming thread; appends fault their own pages");
            return None;
        }
        Some(Self {
            window: window as u64,
            asked_to: AtomicU64::new(0),
            jobs,
        })
    }

    /// Notes that appends to `file` reached position `end`, and asks for the
    /// next window of that file when the appends are within half a window of
    /// what was asked for. Called by the one appender (under the put lock).
    pub(crate) fn wrote(&self, file: &Arc<MappedFile>, end: usize) {
        let base = file.from_offset();
        let at = base + end as u64;
        let asked = self.asked_to.load(Ordering::Relaxed);
        if at + self.window / 2 < asked {
            return;
        }
        let from = asked.max(at);
        let to = (at + self.window).min(base + file.size() as u64);
        if to <= from {
            return;
        }
        self.asked_to.store(to, Ordering::Relaxed);
        // A stopped thread only means appends fault their own pages.
        let _ = self.jobs.send(Job {
            file: Arc::clone(file),
            from: (from - base) as usize,
            to: (to - base) as usize,
        });
    }

    /// Offset up to which pages were asked for.
    #[cfg(test)]
    pub(crate) fn asked_to(&self) -> u64 {
        self.asked_to.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_once_per_half_window_and_never_past_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = Arc::new(MappedFile::create(&dir.path().join("f"), 1 << 20, 64 << 10).unwrap());
        let warm = WarmAhead::start(16 << 10).unwrap();
        warm.wrote(&file, 100);
        assert_eq!(warm.asked_to(), (1 << 20) + 100 + (16 << 10));
        // Still more than half a window ahead: nothing new asked.
        warm.wrote(&file, 100 + (8 << 10) - 1);
        assert_eq!(warm.asked_to(), (1 << 20) + 100 + (16 << 10));
        // Within half a window: the next window from the writer.
        warm.wrote(&file, 100 + (8 << 10));
        assert_eq!(warm.asked_to(), (1 << 20) + 100 + (24 << 10));
        // Near the end of the file: capped at its end.
        warm.wrote(&file, 60 << 10);
        assert_eq!(warm.asked_to(), (1 << 20) + (64 << 10));
        // The next file starts where this one ended.
        let next = Arc::new(
            MappedFile::create(&dir.path().join("g"), (1 << 20) + (64 << 10), 64 << 10).unwrap(),
        );
        warm.wrote(&next, 10);
        assert_eq!(warm.asked_to(), (1 << 20) + (64 << 10) + 10 + (16 << 10));
    }

    #[test]
    fn prefaulted_pages_keep_their_contents_and_read_as_zeros() {
        let dir = tempfile::tempdir().unwrap();
        let file = MappedFile::create(&dir.path().join("f"), 0, 64 << 10).unwrap();
        file.append(b"kept").unwrap();
        assert!(file.prefault(0, 64 << 10));
        assert_eq!(file.read(0, 4), Some(&b"kept"[..]));
        file.append(&[7u8; 8192]).unwrap();
        let on_disk = std::fs::read(dir.path().join("f")).unwrap();
        assert_eq!(&on_disk[..4], b"kept");
        assert!(on_disk[4..4 + 8192].iter().all(|&b| b == 7));
        assert!(on_disk[4 + 8192..].iter().all(|&b| b == 0));
    }
}
