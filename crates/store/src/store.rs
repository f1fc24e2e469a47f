//! The store's facade, [`MessageStore`]: opens and recovers the files,
//! starts and stops the background threads, and offers appends and reads.

use std::{
    fs::{self, File, OpenOptions},
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex, PoisonError,
    },
    thread::JoinHandle,
};

use bytes::Bytes;
use message_model::{
    properties::{self, keys},
    record::{self, MessageToStore},
};

use crate::{
    checkpoint::Checkpoint,
    commit_log::AppendResult,
    config::{FlushDiskType, StoreConfig},
    consume_queue::{CqEntry, ENTRY_SIZE},
    dispatch::{ArrivalListener, ArrivalWatch},
    error::{PutError, StoreError},
    group_commit::{FlushTicket, GroupCommitStats},
    index::{IndexService, QueryResult},
    pool::TransientStorePool,
    recovery,
    retention::{RetentionListener, RetentionStats},
    services,
    state::Inner,
    topic_delete,
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

/// The most ConsumeQueue bytes one read looks at for a tag filter to match
/// (RocketMQ's 16000, that is 800 entries, or the read's message count when
/// larger): a filter that matches nothing on a long queue costs each read
/// this much, and the reader moves on by `next_begin_offset`.
pub const MAX_FILTER_SCAN_BYTES: usize = 16_000;

/// How much one read of a queue returns: RocketMQ's caps for messages
/// still in memory and for messages on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadCaps {
    /// Most messages while they are in memory (`maxTransferCountOnMessageInMemory`
    /// within the request's own maximum).
    pub count_in_memory: usize,
    /// Most bytes while they are in memory.
    pub bytes_in_memory: usize,
    /// Most messages once one is on disk (`maxTransferCountOnMessageInDisk`).
    pub count_on_disk: usize,
    /// Most bytes once one is on disk (`maxTransferBytesOnMessageInDisk`).
    pub bytes_on_disk: usize,
    /// A message this many bytes or more behind the CommitLog's end counts as
    /// on disk (RocketMQ: physical memory × `accessMessageInMemoryMaxRatio`).
    pub memory_bytes: u64,
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
        let mut recovered = recovery::recover(&config, &checkpoint, crashed)?;
        let index_dir = config.index_dir();
        let index = IndexService::load(
            &config,
            checkpoint.index_msg_timestamp(),
            crashed,
            recovered.end,
        )
        .map_err(StoreError::io("load index files", &index_dir))?;
        if let Some(from) = index.dispatch_from.filter(|_| config.message_index_enable) {
            // The IndexFiles dropped after the crash are built again from
            // the CommitLog file that holds the last message still indexed.
            recovered.reput_from = recovered
                .reput_from
                .min(recovery::file_start(&recovered.commit_log_files, from));
        }
        let inner = Arc::new(Inner::new(
            config,
            checkpoint,
            pool,
            recovered,
            index.service,
        ));
        let fence_path = topic_delete::fence_path(&root);
        let fences = topic_delete::load_fences(&fence_path)
            .map_err(StoreError::io("read deleted topics", &fence_path))?;
        inner.install_fences(fences).map_err(StoreError::io(
            "delete queues of deleted topics",
            &fence_path,
        ))?;
        // Catch the queues up with the log before serving reads, then make
        // sure new appends continue after every message indexed again: a
        // message stored just before a crash may not have reached its queue
        // before, and its queue offset must not be handed out twice.
        inner.dispatch_available();
        inner.commit_log.raise_queue_offsets(inner.queue_ends());
        // Queues whose oldest messages were deleted before the last stop
        // start at their first message still kept.
        inner.clean_queues(false);
        // Durable before any append: after a power loss the next start must
        // see it and recover as after a crash.
        File::create(&abort_path)
            .and_then(|f| f.sync_all())
            .and_then(|()| sync_dir(&root))
            .map_err(StoreError::io("create abort file", &abort_path))?;
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
        services::start(&self.inner, &mut threads)
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
        let caps = ReadCaps {
            count_in_memory: max_count,
            bytes_in_memory: max_bytes,
            count_on_disk: max_count,
            bytes_on_disk: max_bytes,
            memory_bytes: u64::MAX,
        };
        self.get_messages_capped(topic, queue_id, offset, &caps, filter)
    }

    /// Like [`MessageStore::get_messages`], with RocketMQ's two sets of
    /// caps: a message more than `caps.memory_bytes` behind the CommitLog's
    /// end is probably no longer in the page cache, and a read that reaches
    /// such messages stops at the smaller on-disk caps. At least one message
    /// is always returned when one matches.
    pub fn get_messages_capped(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        caps: &ReadCaps,
        filter: Option<&dyn Fn(i64) -> bool>,
    ) -> GetResult {
        self.inner.catch_up();
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
        let end = self.inner.commit_log.files().max_offset();
        // However many entries a tag filter skips, one read looks at a
        // bounded number; the reader resumes from `next_begin_offset`.
        let scan_limit = (MAX_FILTER_SCAN_BYTES / ENTRY_SIZE).max(caps.count_in_memory);
        let mut scanned = 0;
        while next < max && messages.len() < caps.count_in_memory.max(1) && scanned < scan_limit {
            scanned += 1;
            let Some(entry) = cq.get(next) else { break };
            if filter.is_some_and(|f| !f(entry.tags_code)) {
                next += 1;
                continue;
            }
            let behind = end.saturating_sub(u64::try_from(entry.commit_log_offset).unwrap_or(0));
            let (count_cap, bytes_cap) = if behind > caps.memory_bytes {
                (caps.count_on_disk, caps.bytes_on_disk)
            } else {
                (caps.count_in_memory, caps.bytes_in_memory)
            };
            if !messages.is_empty()
                && (messages.len() >= count_cap || bytes + entry.size as usize > bytes_cap)
            {
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
        self.inner.arrival.set(listener);
    }

    /// A watch to hold while waiting to hear of new messages: while any is
    /// held, appends are dispatched (and announced) at once rather than
    /// within the dispatch thread's millisecond poll.
    pub fn watch_arrivals(&self) -> ArrivalWatch {
        self.inner.arrival.watch()
    }

    /// Makes the next cleaning passes (RocketMQ's 20) delete expired
    /// CommitLog files at any hour, and runs one soon (the admin request
    /// `DELETE_EXPIRED_COMMITLOG`).
    pub fn trigger_delete_files(&self) {
        self.inner.retention.trigger();
        self.inner.clean.wake();
    }

    /// Sets the function told about each CommitLog file before it is deleted.
    pub fn set_retention_listener(&self, listener: Arc<RetentionListener>) {
        self.inner.retention.set_listener(listener);
    }

    /// Figures of the cleaning thread.
    pub fn retention_stats(&self) -> RetentionStats {
        self.inner.retention.stats()
    }

    /// Physical offset of the first CommitLog byte still kept.
    pub fn min_physical_offset(&self) -> u64 {
        self.inner.commit_log.files().min_offset()
    }

    /// The first queue offset at or after `from` whose message starts at or
    /// after the physical offset `phys` (the queue's end when none does);
    /// `None` for an unknown queue.
    pub fn queue_offset_at_or_after(
        &self,
        topic: &str,
        queue_id: i32,
        from: i64,
        phys: u64,
    ) -> Option<i64> {
        self.inner.catch_up();
        Some(
            self.inner
                .queue(topic, queue_id)?
                .first_offset_at_or_after(from, phys),
        )
    }

    /// The messages of `topic` indexed under `key` (a `KEYS` entry or a
    /// `UNIQ_KEY`) and stored within `[begin_ms, end_ms]`: at most
    /// `max_num`, and never more than `maxMsgsNumBatch`. The IndexFiles are
    /// searched newest first and only the key's hash is compared, so a
    /// record may carry another key of the same hash; records no longer in
    /// the CommitLog are left out.
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> QueryResult {
        self.inner.catch_up();
        self.inner
            .query_message(topic, key, max_num, begin_ms, end_ms)
    }

    /// The record at a physical offset.
    pub fn lookup_message(&self, commit_log_offset: u64) -> Option<Bytes> {
        self.inner.commit_log.read_record(commit_log_offset)
    }

    /// Deletes a topic's ConsumeQueues, files and in-memory state, while the
    /// store runs; the CommitLog keeps its records, referenced by nothing.
    /// Afterwards the topic's queues are empty, and a message sent to the
    /// same topic takes queue offset 0. Records of the topic that were
    /// stored before and not indexed yet are never indexed, also not after
    /// a restart. Returns how many queues the topic had.
    ///
    /// # Errors
    /// The record of the deletion cannot be written (nothing changed), or a
    /// queue file cannot be removed (the queues are gone from the store's
    /// view all the same).
    pub fn delete_topic(&self, topic: &str) -> std::io::Result<usize> {
        self.inner.delete_topic(topic)
    }

    /// Every ConsumeQueue the store has, as `(topic, queue id, next
    /// offset)`.
    pub fn queues(&self) -> Vec<(String, i32, i64)> {
        self.inner.queue_ends()
    }

    /// Next queue offset of a queue (0 if it does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.inner.catch_up();
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
        self.inner.catch_up();
        self.inner.queue(topic, queue_id)?.get(queue_offset)
    }

    /// The first queue offset whose message was stored at or after
    /// `timestamp` (ms); the queue's end when none was.
    pub fn offset_by_time(&self, topic: &str, queue_id: i32, timestamp: i64) -> i64 {
        self.inner.catch_up();
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

    /// Reports whether nobody holds the put lock at this instant.
    pub fn is_put_lock_free(&self) -> bool {
        self.inner.commit_log.is_put_lock_free()
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

    /// Buffers of the transient store pool (`transientStorePoolSize`); 0
    /// when the pool is disabled.
    pub fn transient_store_pool_size(&self) -> usize {
        self.inner.pool.as_ref().map_or(0, TransientStorePool::size)
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
        let index_flushed = inner.index.flush_all(&inner.checkpoint);
        if let Err(e) = &index_flushed {
            tracing::error!(cause = %e, "cannot flush index files");
        }
        let checkpoint = inner.checkpoint.flush();
        let clean = flushed.is_ok()
            && queues_flushed.is_ok()
            && index_flushed.is_ok()
            && checkpoint.is_ok()
            && !inner.commit_log.is_poisoned();
        if clean {
            if let Err(e) =
                fs::remove_file(self.root.join("abort")).and_then(|()| sync_dir(&self.root))
            {
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
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        services::stop(&self.inner, &mut threads);
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
        if let Some(listener) = self.append_listener.get() {
            listener(append.end_offset());
        }
        self.last_store_ts
            .fetch_max(append.store_timestamp, Ordering::AcqRel);
        if self.pool.is_some() {
            self.commit.wake();
        }
        if self.arrival.watched() {
            self.reput.wake();
        }
        FlushTicket::new(
            self,
            append,
            wait && self.config.flush_disk_type == FlushDiskType::SyncFlush,
        )
    }
}

/// Reports whether a message asks to wait for the flush (`WAIT` is not `false`).
fn wait_store_ok(properties: &str) -> bool {
    properties::find(properties, keys::WAIT_STORE_MSG_OK) != Some("false")
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

/// Makes a directory's entries (a created or removed file) durable.
fn sync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

mod replica;
#[cfg(test)]
mod tests;
