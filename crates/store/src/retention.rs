//! Retention: the `store-clean` thread deletes CommitLog files that have
//! expired (`fileReservedTime`) at the `deleteWhen` hours, at any hour when
//! disk use passes `diskMaxUsedSpaceRatio`, whatever their age past
//! `diskSpaceCleanForciblyRatio`, and on request; it refuses writes past
//! `diskSpaceWarningLevelRatio` until cleaning brings use back to the
//! forcible ratio. Then it deletes the ConsumeQueue files whose messages
//! are gone and moves every queue's minimum offset forward, and the
//! IndexFiles (oldest first, never the newest) whose messages are all gone.
//!
//! # Invariants
//! - The last (active) CommitLog file is never deleted, nor a file that is
//!   not yet wholly flushed and indexed; deletion goes oldest first and stops
//!   at the first file that must stay, so the log never has a hole.
//! - Deleting never takes the put lock: a file leaves the file list under
//!   that list's write lock (a `Vec` removal), and its name is removed
//!   afterwards. A reader that holds the file keeps a valid mapping; the
//!   disk blocks return when the last holder lets go.

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
        Arc, Mutex, PoisonError, RwLock, Weak,
    },
    time::{Duration, Instant, SystemTime},
};

use chrono::Timelike;

use crate::{mmap::MappedFile, state::Inner};

/// A CommitLog file about to be deleted, as told to the retention listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expiring {
    /// The file.
    pub file: PathBuf,
    /// Physical offset of its first byte.
    pub from: u64,
    /// Physical offset after its last byte.
    pub to: u64,
    /// Deleted before its reserved time because the disk is nearly full.
    pub forced: bool,
}

/// Called on the cleaning thread before each CommitLog file is deleted; it
/// must be quick.
pub type RetentionListener = dyn Fn(&Expiring) + Send + Sync;

/// Figures of the cleaning thread.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RetentionStats {
    /// Cleaning passes run.
    pub passes: u64,
    /// CommitLog files deleted.
    pub commit_log_files_deleted: u64,
    /// ConsumeQueue files deleted.
    pub consume_queue_files_deleted: u64,
    /// Deleted files that a reader still maps.
    pub still_mapped: usize,
    /// Used fraction of the CommitLog's filesystem at the last pass (-1 if
    /// it could not be read).
    pub commit_log_disk_ratio: f64,
    /// Used fraction of the ConsumeQueues' filesystem at the last pass.
    pub consume_queue_disk_ratio: f64,
}

/// Passes that a manual trigger runs regardless of the hour (RocketMQ's
/// `manualDeleteFileSeveralTimes`).
const MANUAL_PASSES: u32 = 20;

/// The cleaner's shared state.
#[derive(Default)]
pub(crate) struct Retention {
    manual: AtomicU32,
    /// A manual request not yet answered by a pass.
    requested: AtomicBool,
    listener: RwLock<Option<Arc<RetentionListener>>>,
    released: Mutex<Vec<Released>>,
    passes: AtomicU64,
    commit_log_deleted: AtomicU64,
    queue_files_deleted: AtomicU64,
    commit_log_ratio: AtomicU64,
    queue_ratio: AtomicU64,
    /// The CommitLog minimum offset the queues were last cleaned for.
    queues_cleaned_for: AtomicU64,
}

impl std::fmt::Debug for Retention {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Retention")
            .field("manual", &self.manual)
            .field("passes", &self.passes)
            .finish_non_exhaustive()
    }
}

/// A deleted file whose mapping a reader may still hold.
struct Released {
    file: Weak<MappedFile>,
    path: PathBuf,
    since: Instant,
    reported: bool,
}

impl Retention {
    /// Sets (or replaces) the listener.
    pub(crate) fn set_listener(&self, listener: Arc<RetentionListener>) {
        *self
            .listener
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    /// Makes the next passes delete expired files at any hour.
    pub(crate) fn trigger(&self) {
        self.manual.store(MANUAL_PASSES, Ordering::Release);
        self.requested.store(true, Ordering::Release);
    }

    fn take_manual(&self) -> bool {
        self.manual
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    pub(crate) fn stats(&self) -> RetentionStats {
        RetentionStats {
            passes: self.passes.load(Ordering::Relaxed),
            commit_log_files_deleted: self.commit_log_deleted.load(Ordering::Relaxed),
            consume_queue_files_deleted: self.queue_files_deleted.load(Ordering::Relaxed),
            still_mapped: self
                .released
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            commit_log_disk_ratio: f64::from_bits(self.commit_log_ratio.load(Ordering::Relaxed)),
            consume_queue_disk_ratio: f64::from_bits(self.queue_ratio.load(Ordering::Relaxed)),
        }
    }

    fn notify(&self, expiring: &Expiring) {
        let listener = self
            .listener
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(listener) = listener {
            listener(expiring);
        }
    }

    /// Remembers a deleted file until its last reader lets go; reports the
    /// ones held past `forced_after`.
    fn retire(&self, deleted: Option<&Arc<MappedFile>>, forced_after: Duration) {
        let mut released = self.released.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(file) = deleted {
            released.push(Released {
                file: Arc::downgrade(file),
                path: file.path().to_path_buf(),
                since: Instant::now(),
                reported: false,
            });
        }
        released.retain_mut(|r| {
            if r.file.strong_count() == 0 {
                return false;
            }
            if !r.reported && r.since.elapsed() >= forced_after {
                r.reported = true;
                tracing::warn!(
                    file = %r.path.display(),
                    held_s = r.since.elapsed().as_secs(),
                    "a deleted CommitLog file is still mapped by a reader (a response not yet \
                     written out); its disk space returns when that connection drains or closes"
                );
            }
            true
        });
        metrics::gauge!("sluice_store_deleted_files_still_mapped").set(released.len() as f64);
    }
}

impl Inner {
    /// The `store-clean` thread: one pass every `cleanResourceInterval`,
    /// and at once when a check of the disk every 100 ms finds it above
    /// `diskSpaceCleanForciblyRatio` (a small disk fills between two passes)
    /// or a file could not be made for lack of space.
    pub(crate) fn run_clean(&self) {
        let interval = Duration::from_millis(self.config.clean_resource_interval);
        let check = interval.min(Duration::from_millis(100));
        let mut last_pass = Instant::now();
        while !self.clean.is_stopped() {
            self.clean.wait(check);
            if self.clean.is_stopped() {
                break;
            }
            if last_pass.elapsed() >= interval
                || self.retention.requested.swap(false, Ordering::AcqRel)
                || self.disk_needs_cleaning()
            {
                last_pass = Instant::now();
                self.clean_pass();
            }
        }
    }

    /// Whether the disk is past the forcible ratio, a file did not fit, or
    /// writes are refused (a pass lets them resume once there is room).
    fn disk_needs_cleaning(&self) -> bool {
        let cfg = &self.config;
        let root = &cfg.store_path_root_dir;
        let forcibly = f64::from(cfg.disk_space_clean_forcibly_ratio) / 100.0;
        self.commit_log.is_disk_full()
            || self.commit_log.is_space_full()
            || used_ratio(&cfg.commit_log_dir(), root) > forcibly
            || used_ratio(&cfg.consume_queue_dir(), root) > forcibly
    }

    /// One cleaning pass: checks the disk, deletes CommitLog files if it is
    /// time, then the ConsumeQueue files they leave pointing nowhere.
    pub(crate) fn clean_pass(&self) {
        let cfg = &self.config;
        let retention = &self.retention;
        retention.passes.fetch_add(1, Ordering::Relaxed);
        let root = &cfg.store_path_root_dir;
        let cl = used_ratio(&cfg.commit_log_dir(), root);
        let cq = used_ratio(&cfg.consume_queue_dir(), root);
        retention
            .commit_log_ratio
            .store(cl.to_bits(), Ordering::Relaxed);
        retention.queue_ratio.store(cq.to_bits(), Ordering::Relaxed);
        metrics::gauge!("sluice_store_disk_used_ratio", "dir" => "commitlog").set(cl);
        metrics::gauge!("sluice_store_disk_used_ratio", "dir" => "consumequeue").set(cq);

        let percent = |p: u32| f64::from(p) / 100.0;
        let worst = cl.max(cq);
        // A file that could not be made for lack of space counts as over the
        // warning level whatever the ratio says (one file can be a large
        // share of a small disk).
        let mut at_once = self.commit_log.is_disk_full();
        if worst > percent(cfg.disk_space_warning_level_ratio) {
            let index = used_ratio(root, root);
            self.commit_log.set_space_full(Some(format!(
                "the broker's disk is full [CL: {cl:5.2} CQ: {cq:5.2} INDEX: {index:5.2}]: disk \
                 use passed diskSpaceWarningLevelRatio ({}%); writes resume by themselves once \
                 cleaning brings it to diskSpaceCleanForciblyRatio ({}%)",
                cfg.disk_space_warning_level_ratio, cfg.disk_space_clean_forcibly_ratio
            )));
            at_once = true;
        } else if worst > percent(cfg.disk_space_clean_forcibly_ratio) {
            at_once = true;
        } else {
            self.commit_log.set_space_full(None);
        }
        let space = at_once || worst > percent(cfg.disk_max_used_space_ratio);
        let manual = retention.take_manual();
        let timed = is_delete_hour(cfg);
        if space || manual || timed {
            self.delete_commit_log_files(cfg.clean_file_forcibly_enable && at_once);
        }
        retention.retire(
            None,
            Duration::from_millis(cfg.destroy_maped_file_interval_forcibly),
        );
        self.clean_queues(true);
    }

    /// Deletes expired CommitLog files (any, oldest first, with `at_once`),
    /// up to `deleteFileBatchMax`.
    fn delete_commit_log_files(&self, at_once: bool) {
        let cfg = &self.config;
        let files = self.commit_log.files();
        let reserved = Duration::from_secs(cfg.file_reserved_time.saturating_mul(3600));
        let pause = Duration::from_millis(cfg.delete_commit_log_files_interval);
        let forced_after = Duration::from_millis(cfg.destroy_maped_file_interval_forcibly);
        let mut deleted = 0;
        while deleted < cfg.delete_file_batch_max && !self.clean.is_stopped() {
            let Some(first) = files.first() else { break };
            if files.count() < 2 {
                break;
            }
            let from = first.from_offset();
            let to = from + first.size() as u64;
            // Everything in it must be durable and indexed first.
            let settled = self
                .reput_from
                .load(Ordering::Acquire)
                .min(files.flushed_where());
            if to > settled {
                break;
            }
            let expired = at_once || age(first.path()) >= reserved;
            if !expired {
                break;
            }
            let expiring = Expiring {
                file: first.path().to_path_buf(),
                from,
                to,
                forced: at_once,
            };
            self.retention.notify(&expiring);
            if !files.remove_first(&first) {
                break;
            }
            if let Err(e) = first.unlink() {
                tracing::warn!(file = %first.path().display(), cause = %e, "cannot remove a deleted CommitLog file's name");
            }
            tracing::info!(
                file = %first.path().display(),
                forced = at_once,
                min_offset = to,
                "deleted CommitLog file"
            );
            self.retention
                .commit_log_deleted
                .fetch_add(1, Ordering::Relaxed);
            metrics::counter!("sluice_store_retention_deleted_files_total", "kind" => "commitlog")
                .increment(1);
            self.retention.retire(Some(&first), forced_after);
            deleted += 1;
            if !pause.is_zero() && deleted < cfg.delete_file_batch_max {
                self.clean.wait(pause);
            }
        }
    }

    /// Once the CommitLog's minimum moved: deletes the ConsumeQueue files
    /// whose entries all point below it and moves each queue's minimum, then
    /// the IndexFiles whose entries all point below it,
    /// pausing `deleteConsumeQueueFilesInterval` after each queue that lost
    /// files when `paced`.
    pub(crate) fn clean_queues(&self, paced: bool) {
        let min = self.commit_log.files().min_offset();
        if min <= self.retention.queues_cleaned_for.load(Ordering::Acquire) {
            return;
        }
        let pause = if paced {
            Duration::from_millis(self.config.delete_consume_queue_files_interval)
        } else {
            Duration::ZERO
        };
        for cq in self.all_queues() {
            match cq.delete_expired(min) {
                Ok(0) => {}
                Ok(n) => {
                    self.retention
                        .queue_files_deleted
                        .fetch_add(n as u64, Ordering::Relaxed);
                    metrics::counter!("sluice_store_retention_deleted_files_total", "kind" => "consumequeue")
                        .increment(n as u64);
                    if !pause.is_zero() {
                        self.clean.wait(pause);
                    }
                }
                Err(e) => tracing::warn!(
                    topic = cq.topic(),
                    queue_id = cq.queue_id(),
                    cause = %e,
                    "cannot delete an expired ConsumeQueue file"
                ),
            }
            if self.clean.is_stopped() {
                return;
            }
        }
        let index_files = self.index.delete_expired(min);
        if index_files > 0 {
            metrics::counter!("sluice_store_retention_deleted_files_total", "kind" => "index")
                .increment(index_files as u64);
        }
        self.retention
            .queues_cleaned_for
            .store(min, Ordering::Release);
    }
}

/// How long ago a file was last written (zero if unknown or in the future).
fn age(path: &Path) -> Duration {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default()
}

/// The used fraction of the filesystem holding `path` (or `fallback` when
/// `path` does not exist yet), as `df` counts it; -1 when unreadable.
fn used_ratio(path: &Path, fallback: &Path) -> f64 {
    let at = if path.exists() { path } else { fallback };
    match rustix::fs::statvfs(at) {
        Ok(st) => {
            let used = st.f_blocks.saturating_sub(st.f_bfree);
            let total = used + st.f_bavail;
            if total == 0 {
                -1.0
            } else {
                used as f64 / total as f64
            }
        }
        Err(e) => {
            tracing::warn!(dir = %at.display(), cause = %e, "cannot read disk use");
            -1.0
        }
    }
}

/// Reports whether the local hour is one of `deleteWhen`'s.
fn is_delete_hour(cfg: &crate::StoreConfig) -> bool {
    let hour = chrono::Local::now().hour();
    cfg.delete_hours().is_ok_and(|hours| hours.contains(&hour))
}
