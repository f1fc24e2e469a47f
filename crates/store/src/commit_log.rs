//! The CommitLog: every message of every topic, appended under one put lock.
//!
//! # Invariants
//! - The put lock is the only serialisation point of appends; it is held for
//!   the queue-offset assignment and the copy, never for encoding or I/O
//!   other than making a new file when none is ready.
//! - While the lock is held, `lock_since_ns` holds the instant it was taken
//!   (nanoseconds since the log's epoch, plus one); otherwise it is 0.

use std::{
    cell::RefCell,
    collections::HashMap,
    io,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, MutexGuard, PoisonError,
    },
    time::{Duration, Instant},
};

use bytes::Bytes;
use message_model::{
    flags::{transaction_type, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE},
    now_ms,
    record::{self, MessageToStore, BLANK_HEADER_LEN},
};
use spin::mutex::{SpinMutex, SpinMutexGuard};

use crate::{
    error::PutError,
    file_queue::{file_name, FileQueue},
    mmap::{AppendError, MappedFile},
};

mod replica;

/// Where an append landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendResult {
    /// Physical offset of the first message.
    pub physical_offset: u64,
    /// Bytes written for the messages (without any end-of-file filler).
    pub wrote_bytes: usize,
    /// Queue offset of the first message.
    pub queue_offset: i64,
    /// Number of messages.
    pub msg_count: usize,
    /// Store timestamp given to the messages.
    pub store_timestamp: i64,
    /// Physical offset of each message (one entry for a single message).
    pub physical_offsets: Vec<u64>,
}

impl AppendResult {
    /// Offset just after the last appended byte.
    pub fn end_offset(&self) -> u64 {
        self.physical_offset + self.wrote_bytes as u64
    }
}

/// The state that appends change, guarded by the put lock.
#[derive(Debug, Default)]
pub(crate) struct AppendState {
    /// Next queue offset per topic and queue id.
    queue_offsets: HashMap<String, HashMap<i32, i64>>,
    /// The file being appended to, kept here so that an append does not
    /// touch the shared file list.
    current: Option<Arc<MappedFile>>,
}

impl AppendState {
    fn next_queue_offset(&mut self, topic: &str, queue_id: i32) -> i64 {
        match self.queue_offsets.get(topic).and_then(|q| q.get(&queue_id)) {
            Some(&offset) => offset,
            None => 0,
        }
    }

    fn advance(&mut self, topic: &str, queue_id: i32, to: i64) {
        if let Some(queues) = self.queue_offsets.get_mut(topic) {
            queues.insert(queue_id, to);
        } else {
            self.queue_offsets
                .insert(topic.to_owned(), HashMap::from([(queue_id, to)]));
        }
    }
}

/// The put lock: a blocking mutex or a spin lock, by configuration.
#[derive(Debug)]
enum PutLock {
    Blocking(Mutex<AppendState>),
    Spin(SpinMutex<AppendState>),
}

enum PutGuard<'a> {
    Blocking(MutexGuard<'a, AppendState>),
    Spin(SpinMutexGuard<'a, AppendState>),
}

impl std::ops::Deref for PutGuard<'_> {
    type Target = AppendState;
    fn deref(&self) -> &AppendState {
        match self {
            PutGuard::Blocking(g) => g,
            PutGuard::Spin(g) => g,
        }
    }
}

impl std::ops::DerefMut for PutGuard<'_> {
    fn deref_mut(&mut self) -> &mut AppendState {
        match self {
            PutGuard::Blocking(g) => g,
            PutGuard::Spin(g) => g,
        }
    }
}

/// The held put lock; clears the "held since" instant before releasing and
/// records how long it was held.
struct Held<'a> {
    guard: PutGuard<'a>,
    since: &'a AtomicU64,
    taken: Instant,
    hold_time: &'a metrics::Histogram,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.since.store(0, Ordering::Release);
        self.hold_time.record(self.taken.elapsed().as_secs_f64());
    }
}

thread_local! {
    static ENCODE_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// How the CommitLog is set up.
#[derive(Debug, Clone)]
pub struct CommitLogOptions {
    /// Use a blocking mutex (true) or a spin lock (false) as the put lock.
    pub blocking_lock: bool,
    /// Largest message body.
    pub max_message_size: usize,
    /// Put lock held longer than this means the page cache is busy.
    pub busy_threshold_ms: u64,
    /// Fault injection: sleep inside the put lock on every append.
    pub fault_lock_delay_ms: u64,
}

/// The CommitLog.
#[derive(Debug)]
pub struct CommitLog {
    files: FileQueue,
    lock: PutLock,
    epoch: Instant,
    lock_since_ns: AtomicU64,
    busy_threshold_ms: AtomicU64,
    fault_lock_delay_ms: AtomicU64,
    max_message_size: usize,
    disk_full: AtomicBool,
    /// Disk use above `diskSpaceWarningLevelRatio`, with the answer's remark.
    space_full: AtomicBool,
    space_remark: Mutex<String>,
    /// Offset after the last appended byte, published after each append.
    wrote_end: AtomicU64,
    poisoned: Mutex<Option<String>>,
    poisoned_flag: AtomicBool,
    /// Why local appends are refused (a replica takes only its master's
    /// bytes), if they are.
    replica_only: Mutex<Option<String>>,
    replica_only_flag: AtomicBool,
    /// Local appends are refused after this many nanoseconds past
    /// `deadline_base` (0: no deadline): a master's lease.
    local_deadline: AtomicU64,
    deadline_base: std::time::Instant,
    hold_time: metrics::Histogram,
}

impl CommitLog {
    /// A CommitLog over recovered files, with the next queue offset of every
    /// known queue.
    pub fn new(
        files: FileQueue,
        options: &CommitLogOptions,
        queue_offsets: HashMap<(String, i32), i64>,
    ) -> Self {
        let mut state = AppendState::default();
        for ((topic, queue_id), next) in queue_offsets {
            state.advance(&topic, queue_id, next);
        }
        let lock = if options.blocking_lock {
            PutLock::Blocking(Mutex::new(state))
        } else {
            PutLock::Spin(SpinMutex::new(state))
        };
        let wrote_end = files.max_wrote_offset();
        Self {
            wrote_end: AtomicU64::new(wrote_end),
            files,
            lock,
            epoch: Instant::now(),
            lock_since_ns: AtomicU64::new(0),
            busy_threshold_ms: AtomicU64::new(options.busy_threshold_ms),
            fault_lock_delay_ms: AtomicU64::new(options.fault_lock_delay_ms),
            max_message_size: options.max_message_size,
            disk_full: AtomicBool::new(false),
            space_full: AtomicBool::new(false),
            space_remark: Mutex::new(String::new()),
            poisoned: Mutex::new(None),
            poisoned_flag: AtomicBool::new(false),
            replica_only: Mutex::new(None),
            replica_only_flag: AtomicBool::new(false),
            local_deadline: AtomicU64::new(0),
            deadline_base: std::time::Instant::now(),
            hold_time: metrics::histogram!("sluice_store_put_lock_hold_seconds"),
        }
    }

    /// Raises the next queue offset of each queue to at least the given
    /// value (after recovery re-indexed messages the tables did not know).
    pub fn raise_queue_offsets(&self, offsets: impl IntoIterator<Item = (String, i32, i64)>) {
        let mut held = self.lock();
        for (topic, queue_id, next) in offsets {
            if held.guard.next_queue_offset(&topic, queue_id) < next {
                held.guard.advance(&topic, queue_id, next);
            }
        }
    }

    /// Sets the next queue offset of every queue to exactly the given
    /// values, forgetting the others (a replica's log was cut: queue
    /// offsets past the cut are free again).
    pub fn reset_queue_offsets(&self, offsets: impl IntoIterator<Item = (String, i32, i64)>) {
        let mut held = self.lock();
        held.guard.queue_offsets.clear();
        for (topic, queue_id, next) in offsets {
            held.guard.advance(&topic, queue_id, next);
        }
    }

    /// Forgets the next queue offsets of a topic's queues, so that its next
    /// message takes queue offset 0, and returns the offset after the last
    /// appended byte, read under the put lock: every record of the topic
    /// appended before starts below it, every later one at or above it.
    pub fn forget_topic(&self, topic: &str) -> u64 {
        let mut held = self.lock();
        held.guard.queue_offsets.remove(topic);
        self.files.max_wrote_offset()
    }

    /// The files.
    pub fn files(&self) -> &FileQueue {
        &self.files
    }

    /// Appends one message.
    ///
    /// # Errors
    /// [`PutError`] when the message is refused or the store cannot write;
    /// nothing is stored then.
    pub fn put(&self, msg: &MessageToStore) -> Result<AppendResult, PutError> {
        self.check_writable()?;
        self.check_local_appends()?;
        ENCODE_BUF.with(|buf| {
            let mut buf = buf.borrow_mut();
            let len = record::encode(msg, self.max_message_size, &mut buf).map_err(encode_error)?;
            let keeps_offset = !is_half_or_rollback(msg.sys_flag);
            let mut held = self.lock();
            let store_timestamp = now_ms();
            self.fault_delay();
            let queue_offset = if keeps_offset {
                held.guard.next_queue_offset(&msg.topic, msg.queue_id)
            } else {
                0
            };
            let file = Arc::clone(self.file_with_room(&mut held.guard, len)?);
            let physical_offset = file.from_offset() + file.wrote() as u64;
            record::patch(
                &mut buf,
                queue_offset,
                physical_offset as i64,
                store_timestamp,
            );
            self.append_to(&file, &buf)?;
            if keeps_offset {
                held.guard
                    .advance(&msg.topic, msg.queue_id, queue_offset + 1);
            }
            drop(held);
            Ok(AppendResult {
                physical_offset,
                wrote_bytes: len,
                queue_offset,
                msg_count: 1,
                store_timestamp,
                physical_offsets: vec![physical_offset],
            })
        })
    }

    /// Appends messages of one topic and queue back to back, in one file,
    /// with consecutive queue offsets.
    ///
    /// # Errors
    /// As [`CommitLog::put`]; also when the batch is empty, mixes queues, or
    /// is larger than a file.
    pub fn put_batch(&self, msgs: &[MessageToStore]) -> Result<AppendResult, PutError> {
        self.check_writable()?;
        self.check_local_appends()?;
        let Some(first) = msgs.first() else {
            return Err(PutError::MessageIllegal {
                reason: "empty batch".into(),
            });
        };
        if msgs
            .iter()
            .any(|m| m.topic != first.topic || m.queue_id != first.queue_id)
        {
            return Err(PutError::MessageIllegal {
                reason: "a batch must target one topic and queue".into(),
            });
        }
        let mut encoded = Vec::new();
        let mut lens = Vec::with_capacity(msgs.len());
        let mut one = Vec::new();
        for m in msgs {
            lens.push(record::encode(m, self.max_message_size, &mut one).map_err(encode_error)?);
            encoded.extend_from_slice(&one);
        }
        if encoded.len() + BLANK_HEADER_LEN > self.files.file_size() {
            return Err(PutError::MessageIllegal {
                reason: format!(
                    "batch of {} bytes does not fit in one CommitLog file of {} bytes",
                    encoded.len(),
                    self.files.file_size()
                ),
            });
        }
        let mut held = self.lock();
        let store_timestamp = now_ms();
        self.fault_delay();
        let queue_offset = held.guard.next_queue_offset(&first.topic, first.queue_id);
        let file = self.file_with_room(&mut held.guard, encoded.len())?;
        let physical_offset = file.from_offset() + file.wrote() as u64;
        let mut offsets = Vec::with_capacity(msgs.len());
        let mut pos = 0;
        for (i, len) in lens.iter().enumerate() {
            let phys = physical_offset + pos as u64;
            record::patch(
                &mut encoded[pos..pos + len],
                queue_offset + i as i64,
                phys as i64,
                store_timestamp,
            );
            offsets.push(phys);
            pos += len;
        }
        self.append_to(file, &encoded)?;
        held.guard.advance(
            &first.topic,
            first.queue_id,
            queue_offset + msgs.len() as i64,
        );
        drop(held);
        Ok(AppendResult {
            physical_offset,
            wrote_bytes: encoded.len(),
            queue_offset,
            msg_count: msgs.len(),
            store_timestamp,
            physical_offsets: offsets,
        })
    }

    /// Reads `len` committed bytes at a physical offset, without copying.
    pub fn read(&self, offset: u64, len: usize) -> Option<Bytes> {
        let file = self.files.find(offset)?;
        let pos = (offset - file.from_offset()) as usize;
        file.read(pos, len)?;
        Some(Bytes::from_owner(Slice { file, pos, len }))
    }

    /// Reads the whole committed record at a physical offset.
    pub fn read_record(&self, offset: u64) -> Option<Bytes> {
        let file = self.files.find(offset)?;
        let pos = (offset - file.from_offset()) as usize;
        let head = file.read(pos, 4)?;
        let size =
            usize::try_from(i32::from_be_bytes([head[0], head[1], head[2], head[3]])).ok()?;
        self.read(offset, size)
    }

    /// Reports whether the put lock has been held longer than the threshold
    /// (`osPageCacheBusyTimeOutMills`).
    pub fn is_os_page_cache_busy(&self) -> bool {
        self.lock_held_ms() > self.busy_threshold_ms.load(Ordering::Relaxed)
    }

    /// Reports whether nobody holds the put lock at this instant.
    pub fn is_put_lock_free(&self) -> bool {
        self.lock_since_ns.load(Ordering::Acquire) == 0
    }

    /// How long the current holder has held the put lock (0 when free).
    pub fn lock_held_ms(&self) -> u64 {
        let since = self.lock_since_ns.load(Ordering::Acquire);
        if since == 0 {
            return 0;
        }
        let now = self.epoch.elapsed().as_nanos() as u64 + 1;
        now.saturating_sub(since) / 1_000_000
    }

    /// Changes the page-cache-busy threshold at run time.
    pub fn set_busy_threshold_ms(&self, ms: u64) {
        self.busy_threshold_ms.store(ms, Ordering::Relaxed);
    }

    /// Changes the injected put-lock delay at run time (0 turns it off).
    pub fn set_fault_lock_delay_ms(&self, ms: u64) {
        self.fault_lock_delay_ms.store(ms, Ordering::Relaxed);
    }

    /// Stops appends for good after a durability failure.
    pub fn poison(&self, reason: String) {
        tracing::error!(%reason, "commit log refuses further appends");
        *self.poisoned.lock().unwrap_or_else(PoisonError::into_inner) = Some(reason);
        self.poisoned_flag.store(true, Ordering::Release);
    }

    /// Reports whether appends are accepted now.
    pub fn is_writable(&self) -> bool {
        !self.poisoned_flag.load(Ordering::Acquire)
            && !self.disk_full.load(Ordering::Acquire)
            && !self.space_full.load(Ordering::Acquire)
    }

    /// Reports whether appends stopped because disk use passed the warning level.
    pub fn is_space_full(&self) -> bool {
        self.space_full.load(Ordering::Acquire)
    }

    /// Refuses appends with `remark` (disk use above the warning level), or
    /// accepts them again with `None`.
    pub fn set_space_full(&self, remark: Option<String>) {
        let full = remark.is_some();
        if let Some(remark) = remark {
            *self
                .space_remark
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = remark;
        }
        if self.space_full.swap(full, Ordering::AcqRel) != full {
            if full {
                tracing::error!("disk use above diskSpaceWarningLevelRatio: commit log refuses writes until cleaning frees space");
            } else {
                tracing::info!(
                    "disk use back under diskSpaceCleanForciblyRatio: commit log accepts writes"
                );
            }
        }
    }

    /// Reports whether a durability failure stopped appends for good.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned_flag.load(Ordering::Acquire)
    }

    /// Reports whether appends stopped because the disk was full.
    pub fn is_disk_full(&self) -> bool {
        self.disk_full.load(Ordering::Acquire)
    }

    /// Accepts appends again after the disk had room once more.
    pub fn clear_disk_full(&self) {
        if self.disk_full.swap(false, Ordering::AcqRel) {
            tracing::info!("disk has room again; commit log accepts appends");
        }
    }

    /// Refuses local appends with `reason` (the log takes only replicated
    /// bytes), or takes them again with `None`.
    pub fn refuse_local_appends(&self, reason: Option<String>) {
        let refuse = reason.is_some();
        *self
            .replica_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = reason;
        self.replica_only_flag.store(refuse, Ordering::Release);
    }

    /// Refuses local appends from `until` on (a master's lease), checked
    /// at each append; `None` lifts the deadline.
    pub fn set_local_append_deadline(&self, until: Option<std::time::Instant>) {
        let nanos = until.map_or(0, |u| {
            u64::try_from(u.saturating_duration_since(self.deadline_base).as_nanos())
                .unwrap_or(u64::MAX)
                .max(1)
        });
        self.local_deadline.store(nanos, Ordering::Release);
    }

    fn check_local_appends(&self) -> Result<(), PutError> {
        if !self.replica_only_flag.load(Ordering::Acquire) {
            let deadline = self.local_deadline.load(Ordering::Acquire);
            if deadline == 0 {
                return Ok(());
            }
            let now = u64::try_from(self.deadline_base.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if now < deadline {
                return Ok(());
            }
            return Err(PutError::ServiceNotAvailable {
                reason: "this master's lease ran out: it cannot reach the controller leader, \
                         which may elect another master"
                    .to_owned(),
            });
        }
        let reason = self
            .replica_only
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        Err(PutError::ServiceNotAvailable { reason })
    }

    fn check_writable(&self) -> Result<(), PutError> {
        if self.poisoned_flag.load(Ordering::Acquire) {
            let reason = self
                .poisoned
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
                .unwrap_or_default();
            return Err(PutError::ServiceNotAvailable {
                reason: format!("store stopped taking writes after an I/O failure: {reason}"),
            });
        }
        if self.disk_full.load(Ordering::Acquire) {
            return Err(PutError::ServiceNotAvailable {
                reason: "disk full: the store takes no writes until space is freed".into(),
            });
        }
        if self.space_full.load(Ordering::Acquire) {
            let remark = self
                .space_remark
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            return Err(PutError::ServiceNotAvailable { reason: remark });
        }
        Ok(())
    }

    fn lock(&self) -> Held<'_> {
        let guard = match &self.lock {
            PutLock::Blocking(m) => {
                PutGuard::Blocking(m.lock().unwrap_or_else(PoisonError::into_inner))
            }
            PutLock::Spin(m) => PutGuard::Spin(m.lock()),
        };
        let taken = Instant::now();
        let since = taken.duration_since(self.epoch).as_nanos() as u64 + 1;
        self.lock_since_ns.store(since, Ordering::Release);
        Held {
            guard,
            since: &self.lock_since_ns,
            taken,
            hold_time: &self.hold_time,
        }
    }

    fn fault_delay(&self) {
        let ms = self.fault_lock_delay_ms.load(Ordering::Relaxed);
        if ms > 0 {
            std::thread::sleep(Duration::from_millis(ms));
        }
    }

    /// The current file if `len` bytes plus a filler header fit in it;
    /// otherwise ends it with a filler and makes the next one. Called under
    /// the lock.
    fn file_with_room<'s>(
        &self,
        state: &'s mut AppendState,
        len: usize,
    ) -> Result<&'s Arc<MappedFile>, PutError> {
        if state.current.is_none() {
            state.current = self.files.last();
        }
        let fits = state
            .current
            .as_ref()
            .is_some_and(|f| len + BLANK_HEADER_LEN <= f.remaining());
        if !fits {
            if let Some(file) = &state.current {
                if !file.is_full() {
                    let remaining = file.remaining();
                    file.append_blank(&record::blank(remaining))
                        .map_err(|e| append_failed(file, e))?;
                }
            }
            let next = self.files.max_wrote_offset();
            let file = self
                .files
                .create_next(next)
                .map_err(|e| self.creation_failed(next, e))?;
            if len + BLANK_HEADER_LEN > file.remaining() {
                return Err(PutError::MessageIllegal {
                    reason: format!("record of {len} bytes does not fit in a CommitLog file"),
                });
            }
            state.current = Some(file);
        }
        state
            .current
            .as_ref()
            .ok_or_else(|| PutError::CreateMappedFileFailed {
                reason: "no CommitLog file to append to".into(),
            })
    }

    fn append_to(&self, file: &Arc<MappedFile>, data: &[u8]) -> Result<(), PutError> {
        let pos = file.append(data).map_err(|e| append_failed(file, e))?;
        self.wrote_end.store(
            file.from_offset() + (pos + data.len()) as u64,
            Ordering::Release,
        );
        self.files.wrote(file, pos + data.len());
        Ok(())
    }

    /// Offset after the last byte readers may see: what was appended, or,
    /// with pool buffers, what was committed.
    pub fn readable_end(&self) -> u64 {
        if self.files.uses_pool() {
            self.files.committed_where()
        } else {
            self.wrote_end.load(Ordering::Acquire)
        }
    }

    fn creation_failed(&self, offset: u64, e: io::Error) -> PutError {
        let name = file_name(offset);
        match e.kind() {
            io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
                self.disk_full.store(true, Ordering::Release);
                tracing::error!(file = %name, cause = %e, "disk full: commit log stops taking writes until space is freed");
                PutError::ServiceNotAvailable {
                    reason: format!("disk full: cannot create CommitLog file {name}: {e}"),
                }
            }
            _ => {
                tracing::error!(file = %name, cause = %e, "cannot create commit log file");
                PutError::CreateMappedFileFailed {
                    reason: format!("cannot create CommitLog file {name}: {e}"),
                }
            }
        }
    }
}

/// A zero-copy view of committed bytes that keeps its file mapped.
struct Slice {
    file: Arc<MappedFile>,
    pos: usize,
    len: usize,
}

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        // Checked committed when the slice was made; committed bytes stay.
        self.file.read(self.pos, self.len).unwrap_or_default()
    }
}

fn append_failed(file: &MappedFile, e: AppendError) -> PutError {
    PutError::CreateMappedFileFailed {
        reason: format!("append to {} failed: {e:?}", file.path().display()),
    }
}

fn encode_error(e: record::EncodeError) -> PutError {
    match e {
        record::EncodeError::PropertiesTooLong { len } => PutError::PropertiesSizeExceeded { len },
        other => PutError::MessageIllegal {
            reason: other.to_string(),
        },
    }
}

fn is_half_or_rollback(sys_flag: i32) -> bool {
    matches!(
        transaction_type(sys_flag),
        TRANSACTION_PREPARED_TYPE | TRANSACTION_ROLLBACK_TYPE
    )
}
