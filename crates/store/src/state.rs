//! The state that the store's facade and its background threads share: the
//! CommitLog, the ConsumeQueue map, the checkpoint, the transient store pool,
//! the IndexFiles, the group commit, one wake-up signal per thread and the
//! timestamps that the checkpoint records.

use std::{
    collections::HashMap,
    io,
    sync::{
        atomic::{AtomicBool, AtomicI64, AtomicU64},
        Arc, Mutex, PoisonError, RwLock,
    },
};

use crate::{
    checkpoint::Checkpoint,
    commit_log::{CommitLog, CommitLogOptions},
    config::StoreConfig,
    consume_queue::ConsumeQueue,
    dispatch::ArrivalSlot,
    file_queue::{FileFactory, FileQueue},
    group_commit::GroupCommit,
    index::IndexService,
    pool::TransientStorePool,
    recovery::Recovered,
    retention::Retention,
    services::Signal,
};

/// The ConsumeQueues by topic and queue id.
/// Told the CommitLog's end after every local append (a master's
/// replication wakes its senders with it).
pub type AppendListener = dyn Fn(u64) + Send + Sync;

/// Where the append listener is kept (empty until one is set).
#[derive(Default)]
pub(crate) struct AppendSlot(std::sync::OnceLock<Arc<AppendListener>>);

impl AppendSlot {
    pub(crate) fn get(&self) -> Option<&Arc<AppendListener>> {
        self.0.get()
    }

    pub(crate) fn set(&self, listener: Arc<AppendListener>) -> bool {
        self.0.set(listener).is_ok()
    }
}

impl std::fmt::Debug for AppendSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.get().is_some() {
            "AppendSlot(set)"
        } else {
            "AppendSlot(empty)"
        })
    }
}

pub(crate) type QueueMap = HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>;

/// State shared by the store and its threads.
#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: StoreConfig,
    /// `messageDelayLevel` in ms, level 1 first.
    pub(crate) delay_levels_ms: Vec<u64>,
    pub(crate) commit_log: CommitLog,
    pub(crate) queues: RwLock<QueueMap>,
    /// The IndexFiles (query by key).
    pub(crate) index: IndexService,
    pub(crate) checkpoint: Checkpoint,
    pub(crate) pool: Option<TransientStorePool>,
    /// Where the dispatch resumes: everything before it is indexed.
    pub(crate) reput_from: AtomicU64,
    /// Dispatch (what consumers see) stops here: the replication confirm
    /// offset, or `u64::MAX` when the CommitLog is not replicated.
    pub(crate) confirm_offset: AtomicU64,
    pub(crate) last_store_ts: AtomicI64,
    pub(crate) committed_ts: AtomicI64,
    pub(crate) dispatched_ts: AtomicI64,
    pub(crate) group_commit: GroupCommit,
    pub(crate) flush: Signal,
    pub(crate) commit: Signal,
    pub(crate) reput: Signal,
    pub(crate) housekeeping: Signal,
    pub(crate) clean: Signal,
    pub(crate) retention: Retention,
    pub(crate) shutting_down: AtomicBool,
    pub(crate) flush_time: metrics::Histogram,
    pub(crate) arrival: ArrivalSlot,
    /// Told the CommitLog's end after every local append, once set.
    pub(crate) append_listener: AppendSlot,
    /// Held by each dispatch pass and by a topic deletion, so that a
    /// deletion happens between passes.
    pub(crate) dispatch_lock: Mutex<()>,
    /// Deleted topics: records of the topic below the offset are of the
    /// deleted incarnation and are not indexed. Changed only under
    /// `dispatch_lock`.
    pub(crate) fences: Mutex<HashMap<String, u64>>,
}

impl Inner {
    /// Assembles the state from what recovery found; nothing runs yet.
    pub(crate) fn new(
        config: StoreConfig,
        checkpoint: Checkpoint,
        pool: Option<TransientStorePool>,
        recovered: Recovered,
        index: IndexService,
    ) -> Self {
        let factory = FileFactory {
            file_size: config.mapped_file_size_commit_log,
            pool: pool.clone(),
            fast_fail_without_buffer: config.fast_fail_if_no_buffer_in_store_pool,
            warm: config.warm_maped_file_enable,
            warm_ahead: config.warm_ahead_bytes_commit_log,
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
        let mut queues: QueueMap = HashMap::new();
        for cq in recovered.queues {
            queue_offsets.insert((cq.topic().to_owned(), cq.queue_id()), cq.max_offset());
            queues
                .entry(cq.topic().to_owned())
                .or_default()
                .insert(cq.queue_id(), Arc::new(cq));
        }
        let commit_log = CommitLog::new(files, &options, queue_offsets);
        let end = commit_log.files().max_offset();
        Self {
            // Validated when the store was opened.
            delay_levels_ms: config.delay_levels_ms().unwrap_or_default(),
            reput_from: AtomicU64::new(recovered.reput_from.min(end)),
            confirm_offset: AtomicU64::new(if config.replicated {
                u64::try_from(checkpoint.confirm_phy_offset())
                    .unwrap_or(0)
                    .min(end)
            } else {
                u64::MAX
            }),
            commit_log,
            queues: RwLock::new(queues),
            index,
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
            clean: Signal::default(),
            retention: Retention::default(),
            shutting_down: AtomicBool::new(false),
            flush_time: metrics::histogram!("sluice_store_flush_seconds"),
            arrival: ArrivalSlot::default(),
            append_listener: AppendSlot::default(),
            dispatch_lock: Mutex::new(()),
            fences: Mutex::new(HashMap::new()),
            config,
        }
    }

    /// The ConsumeQueue of a topic queue, if it exists.
    pub(crate) fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)?
            .get(&queue_id)
            .cloned()
    }

    /// The ConsumeQueue of a topic queue, created empty if it does not exist.
    pub(crate) fn queue_or_create(&self, topic: &str, queue_id: i32) -> Arc<ConsumeQueue> {
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

    /// The end offset of every ConsumeQueue, as `(topic, queue id, end)`.
    pub(crate) fn queue_ends(&self) -> Vec<(String, i32, i64)> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|q| q.values())
            .map(|q| (q.topic().to_owned(), q.queue_id(), q.max_offset()))
            .collect()
    }

    /// Flushes every ConsumeQueue; see [`MappedFile::flush`] for
    /// `least_pages`.
    ///
    /// [`MappedFile::flush`]: crate::mmap::MappedFile::flush
    pub(crate) fn flush_queues(&self, least_pages: usize) -> io::Result<()> {
        for q in self.all_queues() {
            q.flush(least_pages)?;
        }
        Ok(())
    }

    /// Every ConsumeQueue.
    pub(crate) fn all_queues(&self) -> Vec<Arc<ConsumeQueue>> {
        self.queues
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .flat_map(|q| q.values().cloned())
            .collect()
    }
}
