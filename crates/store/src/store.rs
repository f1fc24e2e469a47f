//! The message store: opens and recovers the files, runs the background
//! threads, and offers appends and reads.

use std::{
    collections::HashMap,
    fs::{self, File, OpenOptions},
    io,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering},
        Arc, Condvar, Mutex, PoisonError, RwLock,
    },
    thread::{self, JoinHandle},
    time::{Duration, Instant},
};

use bytes::Bytes;
use message_model::{
    flags::{transaction_type, TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE},
    record::{self, MessageToStore, Record},
};

use crate::{
    checkpoint::Checkpoint,
    commit_log::{AppendResult, CommitLog, CommitLogOptions},
    config::{FlushDiskType, StoreConfig},
    consume_queue::{ConsumeQueue, CqEntry},
    error::{PutError, StoreError},
    file_queue::{FileFactory, FileQueue},
    pool::TransientStorePool,
    recovery,
    service::{GroupCommit, GroupCommitStats, Signal},
};

/// How an accepted append ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutStatus {
    /// Stored (and, under SYNC_FLUSH, durable).
    Ok,
    /// Stored, but no flush covered it within `syncFlushTimeout`.
    FlushDiskTimeout,
}

/// An accepted append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PutOutcome {
    /// How it ended.
    pub status: PutStatus,
    /// Where it landed.
    pub append: AppendResult,
}

/// An accepted append whose acknowledgement may still depend on a flush.
///
/// Under ASYNC_FLUSH, and for a message whose `WAIT` property is `false`, the
/// append is acknowledged at once: [`FlushTicket::try_complete`] gives its
/// outcome, and [`FlushTicket::on_durable`] runs its completion on the calling
/// thread (no allocation, no hand-off). Under SYNC_FLUSH it is acknowledged
/// once a group commit has flushed past its end offset:
/// [`FlushTicket::on_durable`] hands the completion to the store's flush
/// thread and returns at once, so the caller can serve something else while
/// the flush runs; [`FlushTicket::wait`] blocks for the outcome instead.
///
/// The completion runs exactly once: with [`PutStatus::Ok`] when a flush
/// covered the append, or [`PutStatus::FlushDiskTimeout`] when none did
/// within `syncFlushTimeout` (fired by the store's timer thread even when no
/// further append arrives and while a flush hangs), when flushing failed, or
/// when the store shut down first. Completions of one flush run in offset
/// order on the flush thread; they must be quick (hand the answer to a
/// connection, a channel). At most 16,384 appends wait at once; a caller
/// that would exceed that blocks in [`FlushTicket::on_durable`] until there
/// is room (or its timeout passes), so a stalled disk slows the callers
/// down instead of piling up answers.
///
/// Dropping a ticket leaves the message stored; nobody is told when it
/// becomes durable.
#[must_use = "the append is acknowledged through the ticket"]
pub struct FlushTicket<'a> {
    inner: &'a Inner,
    append: AppendResult,
    wait: bool,
}

impl std::fmt::Debug for FlushTicket<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlushTicket")
            .field("append", &self.append)
            .field("wait", &self.wait)
            .finish()
    }
}

impl FlushTicket<'_> {
    /// Where the append landed.
    pub fn append(&self) -> &AppendResult {
        &self.append
    }

    /// Reports whether the acknowledgement waits for a flush that has not
    /// covered the append yet.
    pub fn must_wait(&self) -> bool {
        self.wait && self.inner.commit_log.files().flushed_where() < self.append.end_offset()
    }

    /// The outcome at once when no flush needs waiting for (ASYNC_FLUSH,
    /// `WAIT=false`, or already flushed); otherwise the ticket back.
    ///
    /// # Errors
    /// The ticket itself when the outcome depends on a flush still to come.
    pub fn try_complete(self) -> Result<PutOutcome, Self> {
        if self.must_wait() {
            return Err(self);
        }
        Ok(PutOutcome {
            status: PutStatus::Ok,
            append: self.append,
        })
    }

    /// Runs `on_durable` once with the outcome: at once on this thread when
    /// no flush needs waiting for, otherwise on the store's flush or timer
    /// thread (see the type's documentation).
    pub fn on_durable<F>(self, on_durable: F)
    where
        F: FnOnce(PutOutcome) + Send + 'static,
    {
        let ticket = match self.try_complete() {
            Ok(outcome) => return on_durable(outcome),
            Err(ticket) => ticket,
        };
        let FlushTicket { inner, append, .. } = ticket;
        let end = append.end_offset();
        let timeout = Duration::from_millis(inner.config.sync_flush_timeout);
        inner.group_commit.register(
            end,
            timeout,
            Box::new(move |result| {
                let status = match result {
                    Ok(()) => PutStatus::Ok,
                    Err(_) => PutStatus::FlushDiskTimeout,
                };
                on_durable(PutOutcome { status, append });
            }),
        );
    }

    /// Blocks until the outcome is known (see the type's documentation).
    pub fn wait(self) -> PutOutcome {
        let ticket = match self.try_complete() {
            Ok(outcome) => return outcome,
            Err(ticket) => ticket,
        };
        let fallback = ticket.append.clone();
        // The completion always comes (timeouts are fired by the timer
        // thread); the bound here only guards against a stuck store.
        let bound =
            Duration::from_millis(ticket.inner.config.sync_flush_timeout) + Duration::from_secs(5);
        let slot = Arc::new((Mutex::new(None::<PutOutcome>), Condvar::new()));
        let filler = Arc::clone(&slot);
        ticket.on_durable(move |outcome| {
            *filler.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
            filler.1.notify_one();
        });
        let deadline = Instant::now() + bound;
        let mut got = slot.0.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if let Some(outcome) = got.take() {
                return outcome;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::error!(
                    offset = fallback.physical_offset,
                    "no flush outcome for a SYNC_FLUSH append; answering FLUSH_DISK_TIMEOUT"
                );
                return PutOutcome {
                    status: PutStatus::FlushDiskTimeout,
                    append: fallback,
                };
            }
            got = slot
                .1
                .wait_timeout(got, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Outcome of a read from a queue, as RocketMQ's `GetMessageStatus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GetStatus {
    /// Messages were found.
    Found,
    /// Entries were found but the filter matched none.
    NoMatchedMessage,
    /// The queue does not exist.
    NoMatchedLogicQueue,
    /// The queue exists but holds nothing.
    NoMessageInQueue,
    /// The offset is below the queue's first entry.
    OffsetTooSmall,
    /// The offset is exactly the queue's end: nothing new yet.
    OffsetOverflowOne,
    /// The offset is beyond the queue's end.
    OffsetOverflowBadly,
    /// The entry's message is no longer in the CommitLog.
    OffsetFoundNull,
}

/// Messages read from a queue.
#[derive(Debug, Clone)]
pub struct GetResult {
    /// Outcome.
    pub status: GetStatus,
    /// Whole stored records, in queue order (zero-copy views of the files).
    pub messages: Vec<Bytes>,
    /// Queue offset to read from next.
    pub next_begin_offset: i64,
    /// The queue's first offset.
    pub min_offset: i64,
    /// The queue's end offset.
    pub max_offset: i64,
}

/// State shared by the store and its threads.
#[derive(Debug)]
struct Inner {
    config: StoreConfig,
    commit_log: CommitLog,
    queues: RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>,
    checkpoint: Checkpoint,
    pool: Option<TransientStorePool>,
    reput_from: AtomicU64,
    last_store_ts: AtomicI64,
    committed_ts: AtomicI64,
    dispatched_ts: AtomicI64,
    group_commit: GroupCommit,
    flush: Signal,
    commit: Signal,
    reput: Signal,
    housekeeping: Signal,
    shutting_down: AtomicBool,
    flush_time: metrics::Histogram,
    arrival: ArrivalSlot,
}

/// The message store.
#[derive(Debug)]
pub struct MessageStore {
    inner: Arc<Inner>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    root: PathBuf,
    _lock: File,
    closed: AtomicBool,
}

impl MessageStore {
    /// Opens the store under `config.store_path_root_dir`, recovering from a
    /// crash if the last run did not shut down cleanly, and starts its threads.
    ///
    /// # Errors
    /// [`StoreError`] for a bad configuration, a store in use by another
    /// process, or files that cannot be read.
    pub fn open(config: StoreConfig) -> Result<Self, StoreError> {
        config.validate()?;
        let root = config.store_path_root_dir.clone();
        fs::create_dir_all(&root).map_err(StoreError::io("create store directory", &root))?;
        let lock = lock_store(&root)?;
        let abort_path = root.join("abort");
        let crashed = abort_path.exists();
        let checkpoint_path = root.join("checkpoint");
        let checkpoint = Checkpoint::open(&checkpoint_path)
            .map_err(StoreError::io("open checkpoint", &checkpoint_path))?;

        let pool = if config.transient_store_pool_enable {
            let pool = TransientStorePool::new(
                config.transient_store_pool_size,
                config.mapped_file_size_commit_log,
                true,
            )
            .map_err(StoreError::io("allocate transient store pool", &root))?;
            Some(pool)
        } else {
            None
        };
        let recovered = recovery::recover(&config, &checkpoint, crashed)?;
        let factory = FileFactory {
            file_size: config.mapped_file_size_commit_log,
            pool: pool.clone(),
            fast_fail_without_buffer: config.fast_fail_if_no_buffer_in_store_pool,
            warm: config.warm_maped_file_enable,
        };
        let files = FileQueue::new(
            &config.commit_log_dir(),
            factory,
            recovered.commit_log_files,
            true,
        );
        let options = CommitLogOptions {
            blocking_lock: config.use_reentrant_lock_when_put_message,
            max_message_size: config.max_message_size,
            busy_threshold_ms: config.os_page_cache_busy_time_out_mills,
            fault_lock_delay_ms: config.fault_put_lock_delay_mills,
        };
        let mut queue_offsets = HashMap::new();
        let mut queues: HashMap<String, HashMap<i32, Arc<ConsumeQueue>>> = HashMap::new();
        for cq in recovered.queues {
            queue_offsets.insert((cq.topic().to_owned(), cq.queue_id()), cq.max_offset());
            queues
                .entry(cq.topic().to_owned())
                .or_default()
                .insert(cq.queue_id(), Arc::new(cq));
        }
        let commit_log = CommitLog::new(files, &options, queue_offsets);
        let end = commit_log.files().max_offset();
        let inner = Arc::new(Inner {
            reput_from: AtomicU64::new(recovered.reput_from.min(end)),
            commit_log,
            queues: RwLock::new(queues),
            checkpoint,
            pool,
            last_store_ts: AtomicI64::new(0),
            committed_ts: AtomicI64::new(0),
            dispatched_ts: AtomicI64::new(0),
            group_commit: GroupCommit::default(),
            flush: Signal::default(),
            commit: Signal::default(),
            reput: Signal::default(),
            housekeeping: Signal::default(),
            shutting_down: AtomicBool::new(false),
            flush_time: metrics::histogram!("sluice_store_flush_seconds"),
            arrival: ArrivalSlot::default(),
            config,
        });
        // Catch the queues up with the log before serving reads, then make
        // sure new appends continue after every message indexed again: a
        // message stored just before a crash may not have reached its queue
        // before, and its queue offset must not be handed out twice.
        inner.dispatch_available();
        let ends: Vec<(String, i32, i64)> = inner
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|q| q.values())
            .map(|q| (q.topic().to_owned(), q.queue_id(), q.max_offset()))
            .collect();
        inner.commit_log.raise_queue_offsets(ends);
        File::create(&abort_path).map_err(StoreError::io("create abort file", &abort_path))?;
        let store = Self {
            threads: Mutex::new(Vec::new()),
            root,
            _lock: lock,
            closed: AtomicBool::new(false),
            inner,
        };
        store.start_threads()?;
        tracing::info!(
            root = %store.root.display(),
            crashed,
            max_offset = store.inner.commit_log.files().max_offset(),
            "message store open"
        );
        Ok(store)
    }

    fn start_threads(&self) -> Result<(), StoreError> {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let spawn = |name: &str, f: fn(&Inner)| -> Result<JoinHandle<()>, StoreError> {
            let inner = Arc::clone(&self.inner);
            thread::Builder::new()
                .name(name.to_owned())
                .spawn(move || f(&inner))
                .map_err(StoreError::io("start thread", name))
        };
        threads.push(spawn("store-flush", Inner::run_flush)?);
        if self.inner.config.flush_disk_type == FlushDiskType::SyncFlush {
            threads.push(spawn("store-flush-timer", Inner::run_flush_timer)?);
        }
        if self.inner.pool.is_some() {
            threads.push(spawn("store-commit", Inner::run_commit)?);
        }
        threads.push(spawn("store-reput", Inner::run_reput)?);
        threads.push(spawn("store-housekeeping", Inner::run_housekeeping)?);
        Ok(())
    }

    /// Appends one message; under SYNC_FLUSH also waits for the flush unless
    /// the message's `WAIT` property is `false`. The same as
    /// [`MessageStore::append_message`] followed by [`FlushTicket::wait`].
    ///
    /// # Errors
    /// [`PutError`] when nothing was stored.
    pub fn put_message(&self, msg: &MessageToStore) -> Result<PutOutcome, PutError> {
        Ok(self.append_message(msg)?.wait())
    }

    /// Appends messages of one topic queue as one unit, waiting as
    /// [`MessageStore::put_message`] does.
    ///
    /// # Errors
    /// [`PutError`] when nothing was stored.
    pub fn put_messages(&self, msgs: &[MessageToStore]) -> Result<PutOutcome, PutError> {
        Ok(self.append_messages(msgs)?.wait())
    }

    /// Appends one message without waiting for any flush; the ticket tells
    /// when it is acknowledged (under SYNC_FLUSH, once a flush covers it,
    /// unless the message's `WAIT` property is `false`).
    ///
    /// # Errors
    /// [`PutError`] when nothing was stored.
    pub fn append_message(&self, msg: &MessageToStore) -> Result<FlushTicket<'_>, PutError> {
        self.inner.before_put()?;
        let append = self.inner.commit_log.put(msg)?;
        Ok(self.inner.after_put(append, wait_store_ok(&msg.properties)))
    }

    /// Appends messages of one topic queue as one unit without waiting for
    /// any flush (see [`MessageStore::append_message`]).
    ///
    /// # Errors
    /// [`PutError`] when nothing was stored.
    pub fn append_messages(&self, msgs: &[MessageToStore]) -> Result<FlushTicket<'_>, PutError> {
        self.inner.before_put()?;
        let append = self.inner.commit_log.put_batch(msgs)?;
        let wait = msgs.first().is_none_or(|m| wait_store_ok(&m.properties));
        Ok(self.inner.after_put(append, wait))
    }

    /// Counters of the SYNC_FLUSH group commit (all zero under ASYNC_FLUSH).
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        self.inner.group_commit.stats()
    }

    /// Reads up to `max_count` messages (and about `max_bytes`) of a queue from
    /// `offset`, keeping only those whose tag hash `filter` accepts.
    pub fn get_messages(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_count: usize,
        max_bytes: usize,
        filter: Option<&dyn Fn(i64) -> bool>,
    ) -> GetResult {
        let Some(cq) = self.inner.queue(topic, queue_id) else {
            return GetResult {
                status: GetStatus::NoMatchedLogicQueue,
                messages: Vec::new(),
                next_begin_offset: 0,
                min_offset: 0,
                max_offset: 0,
            };
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        let result = |status, next| GetResult {
            status,
            messages: Vec::new(),
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
        };
        if max == 0 {
            return result(GetStatus::NoMessageInQueue, 0);
        }
        if offset < min {
            return result(GetStatus::OffsetTooSmall, min);
        }
        if offset == max {
            return result(GetStatus::OffsetOverflowOne, offset);
        }
        if offset > max {
            return result(GetStatus::OffsetOverflowBadly, max);
        }
        let mut messages = Vec::new();
        let mut bytes = 0usize;
        let mut next = offset;
        let mut missing = false;
        while next < max && messages.len() < max_count.max(1) {
            let Some(entry) = cq.get(next) else { break };
            if filter.is_some_and(|f| !f(entry.tags_code)) {
                next += 1;
                continue;
            }
            if !messages.is_empty() && bytes + entry.size as usize > max_bytes {
                break;
            }
            match self
                .inner
                .commit_log
                .read(entry.commit_log_offset as u64, entry.size as usize)
            {
                Some(msg) => {
                    bytes += msg.len();
                    messages.push(msg);
                }
                None => missing = true,
            }
            next += 1;
        }
        let status = if !messages.is_empty() {
            GetStatus::Found
        } else if missing {
            GetStatus::OffsetFoundNull
        } else {
            GetStatus::NoMatchedMessage
        };
        GetResult {
            status,
            messages,
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
        }
    }

    /// Sets the function called (on the dispatch thread) after new messages
    /// of a queue were indexed; it must be quick.
    pub fn set_arrival_listener(&self, listener: Arc<ArrivalListener>) {
        *self
            .inner
            .arrival
            .0
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(listener);
    }

    /// The record at a physical offset.
    pub fn lookup_message(&self, commit_log_offset: u64) -> Option<Bytes> {
        self.inner.commit_log.read_record(commit_log_offset)
    }

    /// Next queue offset of a queue (0 if it does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .queue(topic, queue_id)
            .map_or(0, |q| q.max_offset())
    }

    /// First queue offset of a queue (0 if it does not exist).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner
            .queue(topic, queue_id)
            .map_or(0, |q| q.min_offset())
    }

    /// The queue entry at `queue_offset`.
    pub fn queue_entry(&self, topic: &str, queue_id: i32, queue_offset: i64) -> Option<CqEntry> {
        self.inner.queue(topic, queue_id)?.get(queue_offset)
    }

    /// The first queue offset whose message was stored at or after
    /// `timestamp` (ms); the queue's end when none was.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        let Some(cq) = self.inner.queue(topic, queue_id) else {
            return 0;
        };
        let (mut lo, mut hi) = (cq.min_offset(), cq.max_offset());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ts = cq
                .get(mid)
                .and_then(|e| {
                    self.inner
                        .commit_log
                        .read(e.commit_log_offset as u64, e.size as usize)
                })
                .and_then(|r| record::read_store_timestamp(&r));
            match ts {
                Some(ts) if ts < timestamp => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// Reports whether the put lock has been held past `osPageCacheBusyTimeOutMills`.
    pub fn is_os_page_cache_busy(&self) -> bool {
        self.inner.commit_log.is_os_page_cache_busy()
    }

    /// How long the current put-lock holder has held it (ms, 0 when free).
    pub fn lock_time_mills(&self) -> u64 {
        self.inner.commit_log.lock_held_ms()
    }

    /// RocketMQ's "transient store pool deficient": the pool is enabled and
    /// has no buffer left.
    pub fn is_transient_store_pool_deficient(&self) -> bool {
        self.remain_transient_store_buffer_numbs() == 0
    }

    /// Free pool buffers; `usize::MAX` when the pool is disabled.
    pub fn remain_transient_store_buffer_numbs(&self) -> usize {
        self.inner
            .pool
            .as_ref()
            .map_or(usize::MAX, TransientStorePool::available)
    }

    /// Reports whether appends are accepted (not disk-full, not poisoned, not shut down).
    pub fn is_writable(&self) -> bool {
        self.inner.commit_log.is_writable() && !self.inner.shutting_down.load(Ordering::Acquire)
    }

    /// Changes `osPageCacheBusyTimeOutMills` at run time.
    pub fn set_os_page_cache_busy_timeout_ms(&self, ms: u64) {
        self.inner.commit_log.set_busy_threshold_ms(ms);
    }

    /// Changes the injected put-lock delay at run time.
    pub fn set_fault_put_lock_delay_ms(&self, ms: u64) {
        self.inner.commit_log.set_fault_lock_delay_ms(ms);
    }

    /// Physical offset after the last readable byte.
    pub fn max_physical_offset(&self) -> u64 {
        self.inner.commit_log.files().max_offset()
    }

    /// Physical offset up to which everything is durable.
    pub fn flushed_physical_offset(&self) -> u64 {
        self.inner.commit_log.files().flushed_where()
    }

    /// Bytes of the log not yet indexed into the ConsumeQueues.
    pub fn dispatch_behind_bytes(&self) -> u64 {
        self.max_physical_offset()
            .saturating_sub(self.inner.reput_from.load(Ordering::Acquire))
    }

    /// The configuration the store runs with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Stops the threads after indexing and flushing everything, writes the
    /// checkpoint and removes the abort file. Idempotent; also run on drop.
    pub fn shutdown(&self) {
        if !self.stop_threads() {
            return;
        }
        let inner = &self.inner;
        inner.dispatch_available();
        inner.commit_log.files().commit(0);
        let flushed = inner.commit_log.files().flush(0);
        // Answer every append still waiting: durable if the last flush
        // covered it, FLUSH_DISK_TIMEOUT otherwise.
        inner.group_commit.close(flushed.as_ref().ok().copied());
        let queues_flushed = inner.flush_queues(0);
        let checkpoint = inner.checkpoint.flush();
        let clean = flushed.is_ok()
            && queues_flushed.is_ok()
            && checkpoint.is_ok()
            && !inner.commit_log.is_poisoned();
        if clean {
            if let Err(e) = fs::remove_file(self.root.join("abort")) {
                tracing::warn!(cause = %e, "cannot remove abort file; next start recovers as after a crash");
            }
            tracing::info!(root = %self.root.display(), "message store shut down cleanly");
        } else {
            tracing::error!(
                root = %self.root.display(),
                "message store shut down with errors; next start recovers as after a crash"
            );
        }
    }

    /// Stops the threads without flushing, indexing or removing the abort
    /// file, as if the process had died: the next open recovers as after a
    /// crash. For tests and tools that exercise recovery.
    /// Appends still waiting for a flush are answered
    /// [`PutStatus::FlushDiskTimeout`].
    pub fn abandon(self) {
        self.stop_threads();
        self.inner.group_commit.close(None);
    }

    /// Stops and joins every thread; false if they were already stopped.
    fn stop_threads(&self) -> bool {
        if self.closed.swap(true, Ordering::AcqRel) {
            return false;
        }
        let inner = &self.inner;
        inner.shutting_down.store(true, Ordering::Release);
        for signal in [
            &inner.commit,
            &inner.reput,
            &inner.housekeeping,
            &inner.flush,
        ] {
            signal.stop();
        }
        inner.group_commit.stop();
        for handle in self
            .threads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            let _ = handle.join();
        }
        true
    }
}

impl Drop for MessageStore {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl Inner {
    fn before_put(&self) -> Result<(), PutError> {
        if self.shutting_down.load(Ordering::Acquire) {
            return Err(PutError::ServiceNotAvailable {
                reason: "message store is shutting down".into(),
            });
        }
        let held_ms = self.commit_log.lock_held_ms();
        if self.commit_log.is_os_page_cache_busy() {
            return Err(PutError::OsPageCacheBusy { held_ms });
        }
        Ok(())
    }

    fn after_put(&self, append: AppendResult, wait: bool) -> FlushTicket<'_> {
        self.last_store_ts
            .fetch_max(append.store_timestamp, Ordering::AcqRel);
        if self.pool.is_some() {
            self.commit.wake();
        }
        self.reput.wake();
        FlushTicket {
            inner: self,
            append,
            wait: wait && self.config.flush_disk_type == FlushDiskType::SyncFlush,
        }
    }

    fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)?
            .get(&queue_id)
            .cloned()
    }

    fn queue_or_create(&self, topic: &str, queue_id: i32) -> Arc<ConsumeQueue> {
        if let Some(q) = self.queue(topic, queue_id) {
            return q;
        }
        let mut queues = self.queues.write().unwrap_or_else(PoisonError::into_inner);
        let by_id = queues.entry(topic.to_owned()).or_default();
        Arc::clone(by_id.entry(queue_id).or_insert_with(|| {
            Arc::new(ConsumeQueue::create(
                &self.config.consume_queue_dir(),
                topic,
                queue_id,
                self.config.mapped_file_size_consume_queue,
            ))
        }))
    }

    /// Indexes every readable record after `reput_from`. Returns whether
    /// anything was indexed.
    fn dispatch_available(&self) -> bool {
        let files = self.commit_log.files();
        let mut from = self.reput_from.load(Ordering::Acquire);
        let start = from;
        let mut queues = QueueCache::default();
        'log: while from < self.commit_log.readable_end() {
            let Some(file) = files.find(from) else { break };
            let data = file.committed_bytes();
            let mut pos = (from - file.from_offset()) as usize;
            while pos < data.len() {
                match record::check(&data[pos..], false) {
                    Record::Message(m) => {
                        self.dispatch(&m, &mut queues);
                        pos += m.total_size;
                    }
                    Record::Blank => pos = file.size(),
                    Record::End => break,
                    Record::Invalid(reason) => {
                        let at = file.from_offset() + pos as u64;
                        tracing::error!(
                            offset = at,
                            reason,
                            "cannot index commit log record; dispatch stalls"
                        );
                        self.reput_from.store(at, Ordering::Release);
                        break 'log;
                    }
                }
            }
            let reached = file.from_offset() + pos as u64;
            if reached == from {
                break;
            }
            from = reached;
            self.reput_from.store(from, Ordering::Release);
        }
        if from > start {
            let listener = self
                .arrival
                .0
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some(listener) = listener {
                for q in queues.touched() {
                    listener(q.topic(), q.queue_id(), q.max_offset());
                }
            }
        }
        from > start
    }

    fn dispatch(&self, m: &record::StoredMessage<'_>, queues: &mut QueueCache) {
        if matches!(
            transaction_type(m.sys_flag),
            TRANSACTION_PREPARED_TYPE | TRANSACTION_ROLLBACK_TYPE
        ) {
            return;
        }
        let entry = CqEntry {
            commit_log_offset: m.physical_offset,
            size: m.total_size as i32,
            tags_code: tags_code(m.properties),
        };
        let cq = queues.get(m.topic, m.queue_id, || {
            self.queue_or_create(m.topic, m.queue_id)
        });
        if let Err(e) = cq.put(m.queue_offset, entry) {
            tracing::error!(topic = m.topic, queue_id = m.queue_id, cause = %e, "cannot write consume queue entry");
            self.commit_log
                .poison(format!("consume queue write failed: {e}"));
            return;
        }
        self.dispatched_ts
            .fetch_max(m.store_timestamp, Ordering::AcqRel);
    }

    fn flush_queues(&self, least_pages: usize) -> io::Result<()> {
        let queues: Vec<Arc<ConsumeQueue>> = self
            .queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|q| q.values().cloned())
            .collect();
        for q in queues {
            q.flush(least_pages)?;
        }
        Ok(())
    }

    fn run_reput(&self) {
        while !self.reput.is_stopped() {
            if !self.dispatch_available() {
                self.reput.wait(Duration::from_millis(1));
            }
        }
    }

    fn run_commit(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.commit.is_stopped() {
            self.commit
                .wait(Duration::from_millis(cfg.commit_interval_commit_log));
            let mut least = cfg.commit_commit_log_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.commit_commit_log_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            let ts = self.last_store_ts.load(Ordering::Acquire);
            let before = self.commit_log.files().committed_where();
            if self.commit_log.files().commit(least) > before {
                self.committed_ts.fetch_max(ts, Ordering::AcqRel);
                self.reput.wake();
                self.flush.wake();
            }
        }
    }

    fn run_flush(&self) {
        match self.config.flush_disk_type {
            FlushDiskType::AsyncFlush => self.run_async_flush(),
            FlushDiskType::SyncFlush => self.run_group_commit(),
        }
    }

    fn run_flush_timer(&self) {
        let timeout = self.config.sync_flush_timeout;
        self.group_commit
            .run_timer(Duration::from_millis(timeout), timeout);
    }

    fn run_async_flush(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.flush.is_stopped() {
            self.flush
                .wait(Duration::from_millis(cfg.flush_interval_commit_log));
            let mut least = cfg.flush_commit_log_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.flush_commit_log_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            if !self.flush_once(least) {
                return;
            }
        }
    }

    fn run_group_commit(&self) {
        // The most appends seen waiting at once lately, decaying slowly, so
        // that the gather below knows how many to expect.
        let mut peak = 0.0f64;
        while !self.flush.is_stopped() {
            let waiters = self
                .group_commit
                .next_request(Duration::from_millis(10), &self.flush);
            peak = (peak * 0.99).max(waiters as f64);
            if waiters > 1 {
                self.gather((peak * 0.9).ceil() as usize);
            }
            peak = peak.max(self.group_commit.waiters() as f64);
            if self.pool.is_some() {
                self.commit_log.files().commit(0);
            }
            if !self.flush_once(0) {
                return;
            }
        }
    }

    /// With several appends already waiting, more are usually on their way
    /// (writers just released by the previous flush): wait until about as
    /// many wait as lately did, for at most 500 µs, so that one fsync covers
    /// them all. A lone writer never waits here.
    fn gather(&self, target: usize) {
        let deadline = Instant::now() + Duration::from_micros(500);
        while self.group_commit.waiters() < target && Instant::now() < deadline {
            // Sleep rather than spin: on a small machine the writers we wait
            // for need the CPU.
            thread::sleep(Duration::from_micros(50));
        }
    }

    /// One flush of the log; returns false (and poisons the store) on failure.
    fn flush_once(&self, least_pages: usize) -> bool {
        let delay = self.config.fault_flush_delay_mills;
        if delay > 0 {
            thread::sleep(Duration::from_millis(delay));
        }
        let ts = if self.pool.is_some() {
            self.committed_ts.load(Ordering::Acquire)
        } else {
            self.last_store_ts.load(Ordering::Acquire)
        };
        let before = self.commit_log.files().flushed_where();
        let started = Instant::now();
        let result = self.commit_log.files().flush(least_pages);
        if result.as_ref().is_ok_and(|&flushed| flushed > before) {
            self.flush_time.record(started.elapsed().as_secs_f64());
        }
        match result {
            Ok(flushed) => {
                if flushed > before {
                    self.checkpoint.set_physic_msg_timestamp(ts);
                }
                self.group_commit.flushed(flushed);
                true
            }
            Err(e) => {
                let reason = format!("commit log flush failed: {e}");
                self.commit_log.poison(reason.clone());
                self.group_commit.fail(reason);
                false
            }
        }
    }

    fn run_housekeeping(&self) {
        let cfg = &self.config;
        let mut last_thorough = Instant::now();
        while !self.housekeeping.is_stopped() {
            self.housekeeping
                .wait(Duration::from_millis(cfg.flush_interval_consume_queue));
            let mut least = cfg.flush_consume_queue_least_pages;
            if last_thorough.elapsed()
                >= Duration::from_millis(cfg.flush_consume_queue_thorough_interval)
            {
                last_thorough = Instant::now();
                least = 0;
            }
            let ts = self.dispatched_ts.load(Ordering::Acquire);
            match self.flush_queues(least) {
                Ok(()) => self.checkpoint.set_logics_msg_timestamp(ts),
                Err(e) => self
                    .commit_log
                    .poison(format!("consume queue flush failed: {e}")),
            }
            if let Err(e) = self.checkpoint.flush() {
                tracing::warn!(cause = %e, "cannot write checkpoint");
            }
            self.check_disk_space();
        }
    }

    /// Lets appends resume once the disk has room for two CommitLog files.
    fn check_disk_space(&self) {
        if !self.commit_log.is_disk_full() {
            return;
        }
        let dir = self.config.commit_log_dir();
        match rustix::fs::statvfs(&dir) {
            Ok(st) => {
                let free = st.f_bavail.saturating_mul(st.f_frsize);
                if free >= 2 * self.config.mapped_file_size_commit_log as u64 {
                    self.commit_log.clear_disk_full();
                }
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), cause = %e, "cannot check free disk space")
            }
        }
    }
}

/// The queues one dispatch pass has used, so that consecutive records skip
/// the shared map and arrivals can be announced once per queue per pass.
#[derive(Default)]
struct QueueCache {
    queues: HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>,
}

impl QueueCache {
    fn get(
        &mut self,
        topic: &str,
        queue_id: i32,
        load: impl FnOnce() -> Arc<ConsumeQueue>,
    ) -> Arc<ConsumeQueue> {
        if let Some(q) = self.queues.get(topic).and_then(|m| m.get(&queue_id)) {
            return Arc::clone(q);
        }
        let q = load();
        self.queues
            .entry(topic.to_owned())
            .or_default()
            .insert(queue_id, Arc::clone(&q));
        q
    }

    fn touched(&self) -> impl Iterator<Item = &ConsumeQueue> {
        self.queues.values().flat_map(|q| q.values()).map(|q| &**q)
    }
}

/// Called after new messages were indexed: topic, queue id and the queue's
/// new end offset.
pub type ArrivalListener = dyn Fn(&str, i32, i64) + Send + Sync;

#[derive(Default)]
struct ArrivalSlot(RwLock<Option<Arc<ArrivalListener>>>);

impl std::fmt::Debug for ArrivalSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ArrivalSlot")
    }
}

/// Reports whether a message asks to wait for the flush (`WAIT` is not `false`).
fn wait_store_ok(properties: &str) -> bool {
    !properties.split('\u{2}').any(|p| p == "WAIT\u{1}false")
}

/// The tag hash of a message's `TAGS` property (0 without tags).
pub(crate) fn tags_code(properties: &str) -> i64 {
    properties
        .split('\u{2}')
        .find_map(|p| p.strip_prefix("TAGS\u{1}"))
        .map_or(0, message_model::tag_hash)
}

fn lock_store(root: &Path) -> Result<File, StoreError> {
    let path = root.join("lock");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(StoreError::io("open lock file", &path))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(file),
        Err(rustix::io::Errno::WOULDBLOCK) => Err(StoreError::Locked { path }),
        Err(e) => Err(StoreError::io("lock", &path)(e.into())),
    }
}
