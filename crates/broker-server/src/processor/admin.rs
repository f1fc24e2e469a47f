//! Administration: `UPDATE_AND_CREATE_TOPIC`, `GET_BROKER_CONFIG`,
//! `UPDATE_BROKER_CONFIG` (flow-control limits and `brokerPermission`
//! change at run time),
//! `GET_BROKER_RUNTIME_INFO`, `VIEW_BROKER_STATS_DATA` and
//! `VIEW_MESSAGE_BY_ID`.

use std::{collections::BTreeMap, time::Instant};

use remoting_protocol::{
    body::{self, DataVersion, KvTable, TopicConfig},
    command::CURRENT_VERSION,
    header::{CreateTopicRequestHeader, GetBrokerConfigResponseHeader, TopicFilterType},
    RemotingCommand, ResponseCode,
};

use crate::{
    config::BrokerConfig,
    metrics::share_label,
    processor::bad_header,
    request::Family,
    state::{configure_queues, max_wait_ms, queue_capacity, BrokerState},
    topics::validate_topic_name,
};

/// One statistic's last minute, hour and day (`statsName`, `statsKey`), as
/// RocketMQ's `BrokerStatsData`; an unknown one is a `SYSTEM_ERROR`.
pub(crate) fn view_stats(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let (Some(name), Some(key)) = (req.ext("statsName"), req.ext("statsKey")) else {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("required header fields `statsName` and `statsKey` are missing".into()),
        );
    };
    match state.stats.view(name, key, message_model::now_ms()) {
        Some(data) => req
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(data.encode()),
        None => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("The stats <{name}> <{key}> not exist")),
        ),
    }
}

/// Keys that `UPDATE_BROKER_CONFIG` may change on a running broker.
pub const RUNTIME_KEYS: &[&str] = &[
    "brokerFastFailureEnable",
    "waitTimeMillsInSendQueue",
    "waitTimeMillsInPullQueue",
    "waitTimeMillsInHeartbeatQueue",
    "waitTimeMillsInAdminBrokerQueue",
    "sendThreadPoolQueueCapacity",
    "pullThreadPoolQueueCapacity",
    "heartbeatThreadPoolQueueCapacity",
    "adminBrokerThreadPoolQueueCapacity",
    "endTransactionPoolQueueCapacity",
    "waitTimeMillsInTransactionQueue",
    "consumerManagerThreadPoolQueueCapacity",
    "requestQueueCapacityBytes",
    "earlyAdmissionEnable",
    "inlineServeEnable",
    "inlineServeMaxMicros",
    "busyRetryHintEnable",
    "topicQuotas",
    "clientQuotas",
    "adaptiveAdmissionEnable",
    "admissionTargetMills",
    "admissionIntervalMills",
    "sendShareKey",
    "pullShareKey",
    "maxSharesPerQueue",
    "shareWeights",
    "osPageCacheBusyTimeOutMills",
    "faultPutLockDelayMills",
    "brokerPermission",
];

/// Creates or updates a topic and registers the change at once.
pub(crate) fn create_topic(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let h: CreateTopicRequestHeader = match req.decode_header() {
        Ok(h) => h,
        Err(e) => return bad_header(req, &e),
    };
    if let Err(why) = validate_topic_name(&h.topic) {
        return req.response_to(ResponseCode::INVALID_PARAMETER, Some(why));
    }
    if h.read_queue_nums < 1
        || h.write_queue_nums < 1
        || h.read_queue_nums > 1024
        || h.write_queue_nums > 1024
    {
        return req.response_to(
            ResponseCode::INVALID_PARAMETER,
            Some(format!(
                "queue counts must be 1..=1024 (read {}, write {})",
                h.read_queue_nums, h.write_queue_nums
            )),
        );
    }
    let config = TopicConfig {
        topic_name: h.topic.clone(),
        read_queue_nums: h.read_queue_nums,
        write_queue_nums: h.write_queue_nums,
        perm: h.perm,
        topic_filter_type: match h.topic_filter_type {
            TopicFilterType::SingleTag => "SINGLE_TAG".into(),
            TopicFilterType::MultiTag => "MULTI_TAG".into(),
        },
        topic_sys_flag: h.topic_sys_flag.unwrap_or(0),
        order: h.order,
        ..TopicConfig::default()
    };
    match state.topics.put(config) {
        Ok(changed) => {
            if changed {
                state.topics_changed.notify_one();
            }
            req.response_to(ResponseCode::SUCCESS, None)
        }
        Err(e) => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!(
                "topic[{}] cannot be created or updated: {e}",
                h.topic
            )),
        ),
    }
}

/// The configuration in force as `key=value` lines.
pub(crate) fn get_config(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let cfg = state.config();
    let map = match cfg.to_public_map() {
        Ok(m) => m,
        Err(e) => return req.response_to(ResponseCode::SYSTEM_ERROR, Some(e.to_string())),
    };
    let lines: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| (k.clone(), value_text(v)))
        .collect();
    let text = body::encode_config_text(lines.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let version = DataVersion {
        timestamp: state.boot_timestamp,
        ..DataVersion::default()
    };
    req.response_to(ResponseCode::SUCCESS, None)
        .with_header(&GetBrokerConfigResponseHeader {
            version: String::from_utf8_lossy(&body::to_json(&version)).into_owned(),
        })
        .with_body(text.into_bytes())
}

/// `NOTIFY_BROKER_ROLE_CHANGED` (1008): the controllers elected a master;
/// a broker in controller mode asks them for its role at once.
pub(crate) fn role_changed(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    if !state.ha.controlled() {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("this request only for controllerMode".into()),
        );
    }
    state.ha.poke();
    req.response_to(ResponseCode::SUCCESS, None)
}

/// Applies `key=value` lines to the running broker. Only the keys in
/// [`RUNTIME_KEYS`] may change; anything else, or a bad value, refuses the
/// whole update and changes nothing.
pub(crate) fn update_config(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let entries = match body::decode_config_text(&req.body) {
        Ok(e) => e,
        Err(e) => return req.response_to(ResponseCode::INVALID_PARAMETER, Some(e.to_string())),
    };
    let not_runtime: Vec<&str> = entries
        .keys()
        .map(String::as_str)
        .filter(|k| !RUNTIME_KEYS.contains(k))
        .collect();
    if !not_runtime.is_empty() {
        return req.response_to(
            ResponseCode::INVALID_PARAMETER,
            Some(format!(
                "these keys cannot change while the broker runs (set them in the config file and restart): {}; \
                 keys that can: {}",
                not_runtime.join(", "),
                RUNTIME_KEYS.join(", ")
            )),
        );
    }
    let overrides: Vec<(String, String)> = entries.into_iter().collect();
    let current = state.config();
    let updated = match current.with_overrides(&overrides) {
        Ok(c) => c,
        Err(e) => return req.response_to(ResponseCode::INVALID_PARAMETER, Some(e.to_string())),
    };
    apply_runtime(state, &updated);
    tracing::info!(changes = ?overrides, "configuration updated at run time");
    let permission_changed = updated.broker.broker_permission != current.broker.broker_permission;
    *state
        .config
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = std::sync::Arc::new(updated);
    if permission_changed {
        // The topic perms registered follow `brokerPermission`: register
        // again now so that the name servers' routes change at once.
        state.topics_changed.notify_one();
    }
    req.response_to(ResponseCode::SUCCESS, None)
}

/// Pushes the run-time keys of `cfg` into the queues, the sweeper and the store.
pub(crate) fn apply_runtime(state: &BrokerState, cfg: &BrokerConfig) {
    let f = &cfg.flow;
    let ms = std::time::Duration::from_millis;
    state.fast_failure.set_enabled(f.broker_fast_failure_enable);
    for family in Family::ALL {
        let queue = state.queue(family);
        queue.set_capacity(queue_capacity(cfg, family));
        if let Some(wait) = max_wait_ms(cfg, family) {
            let _ = state.fast_failure.set_max_wait(queue.name(), ms(wait));
        }
    }
    configure_queues(&state.queues, f);
    state.share_keys.set(f);
    state.early_admission.store(
        f.early_admission_enable,
        std::sync::atomic::Ordering::Relaxed,
    );
    state
        .inline_serve
        .store(f.inline_serve_enable, std::sync::atomic::Ordering::Relaxed);
    state.inline_serve_max_micros.store(
        f.inline_serve_max_micros,
        std::sync::atomic::Ordering::Relaxed,
    );
    state.retry_hint.store(
        f.busy_retry_hint_enable,
        std::sync::atomic::Ordering::Relaxed,
    );
    state
        .quotas
        .replace(&f.topic_quota_list(), std::time::Instant::now());
    state
        .client_quotas
        .replace(&f.client_quota_list(), std::time::Instant::now());
    state
        .store
        .set_os_page_cache_busy_timeout_ms(cfg.store.os_page_cache_busy_time_out_mills);
    state
        .store
        .set_fault_put_lock_delay_ms(cfg.store.fault_put_lock_delay_mills);
}

/// Live figures as RocketMQ's runtime-info table, plus Sluice's counters.
pub(crate) fn runtime_info(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    /// A byte count as RocketMQ's `MixAll.humanReadableByteCount(bytes, false)`
    /// writes it: `512 B`, `1.5 KiB`, `2.0 MiB`.
    fn human_readable_bytes(bytes: u64) -> String {
        const UNIT: u64 = 1024;
        if bytes < UNIT {
            return format!("{bytes} B");
        }
        let mut exp = 0usize;
        let mut scaled = bytes as f64;
        while scaled >= UNIT as f64 && exp < 6 {
            scaled /= UNIT as f64;
            exp += 1;
        }
        let prefix = ["K", "M", "G", "T", "P", "E"][exp - 1];
        format!("{scaled:.1} {prefix}iB")
    }

    let now = Instant::now();
    let mut table = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        table.insert(k.to_owned(), v);
    };
    put(
        "brokerVersionDesc",
        format!("Sluice {}", env!("CARGO_PKG_VERSION")),
    );
    put("brokerVersion", CURRENT_VERSION.to_string());
    put("bootTimestamp", state.boot_timestamp.to_string());
    rate_keys(state, &mut put);
    put(
        "pageCacheLockTimeMills",
        state.store.lock_time_mills().to_string(),
    );
    let remain = state.store.remain_transient_store_buffer_numbs();
    put(
        "remainTransientStoreBufferNumbs",
        if remain == usize::MAX {
            i32::MAX.to_string()
        } else {
            remain.to_string()
        },
    );
    let cfg = state.config();
    put(
        "transientStorePoolTotalBuffers",
        if remain == usize::MAX {
            0
        } else {
            cfg.store.transient_store_pool_size
        }
        .to_string(),
    );
    put(
        "transientStorePoolDeficient",
        state.store.is_transient_store_pool_deficient().to_string(),
    );
    put(
        "osPageCacheBusy",
        state.store.is_os_page_cache_busy().to_string(),
    );
    for (family, prefix) in [
        (Family::Send, "send"),
        (Family::Pull, "pull"),
        (Family::Heartbeat, "heartbeat"),
        (Family::Admin, "adminBroker"),
    ] {
        let q = state.queue(family);
        put(&format!("{prefix}ThreadPoolQueueSize"), q.len().to_string());
        put(
            &format!("{prefix}ThreadPoolQueueCapacity"),
            q.capacity().to_string(),
        );
        put(
            &format!("{prefix}ThreadPoolQueueHeadWaitTimeMills"),
            q.head_wait(now).map_or(0, |d| d.as_millis()).to_string(),
        );
        put(
            &format!("{prefix}ThreadPoolQueueBytes"),
            q.bytes().to_string(),
        );
        put(
            &format!("{prefix}ThreadPoolQueueCapacityBytes"),
            q.capacity_bytes().to_string(),
        );
        put(
            &format!("{prefix}ThreadPoolQueueWorkers"),
            q.workers().to_string(),
        );
        // -1 until a service time has been measured.
        put(
            &format!("{prefix}ThreadPoolQueueAvgServiceMicros"),
            q.avg_service_time()
                .map_or(-1, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
                .to_string(),
        );
        put(
            &format!("{prefix}ThreadPoolQueuePredictedWaitMills"),
            q.predicted_wait()
                .map_or(-1, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
                .to_string(),
        );
    }
    let send = state.queue(Family::Send);
    put(
        "sendQueueEarlyAdmission",
        state
            .early_admission
            .load(std::sync::atomic::Ordering::Relaxed)
            .to_string(),
    );
    put(
        "sendQueueAdmissionTargetMills",
        send.sojourn_control()
            .map_or(0, |c| c.target.as_millis())
            .to_string(),
    );
    put(
        "sendQueueSheddingShares",
        send.shares(now)
            .iter()
            .filter(|f| f.shedding)
            .count()
            .to_string(),
    );
    let ends = state.queue(Family::Transaction);
    put("EndTransactionQueueSize", ends.len().to_string());
    put(
        "EndTransactionThreadPoolQueueCapacity",
        ends.capacity().to_string(),
    );
    put("pullHoldRequests", state.pull_hold.len().to_string());
    put("transactionHalfPending", state.half_pending().to_string());
    for (family, key) in [
        (Family::Send, "sendQueueShares"),
        (Family::Pull, "pullQueueShares"),
    ] {
        let shares: Vec<String> = state
            .queue(family)
            .shares(now)
            .into_iter()
            .filter(|f| f.len > 0)
            .map(|f| {
                format!(
                    "{}:{}:{}:{}",
                    share_label(&f.key),
                    f.len,
                    f.head_wait.map_or(0, |d| d.as_millis()),
                    f.shedding
                )
            })
            .collect();
        put(key, shares.join(";"));
    }
    put("topicQuotas", state.config().flow.topic_quotas.clone());
    put("clientQuotas", state.config().flow.client_quotas.clone());
    put(
        "commitLogMaxOffset",
        state.store.max_physical_offset().to_string(),
    );
    put(
        "commitLogMinOffset",
        state.store.min_physical_offset().to_string(),
    );
    let retention = state.store.retention_stats();
    put(
        "commitLogDiskRatio",
        format!("{}", retention.commit_log_disk_ratio),
    );
    put(
        "consumeQueueDiskRatio",
        format!("{}", retention.consume_queue_disk_ratio),
    );
    put("retentionPasses", retention.passes.to_string());
    put(
        "retentionDeletedCommitLogFiles",
        retention.commit_log_files_deleted.to_string(),
    );
    put(
        "retentionDeletedConsumeQueueFiles",
        retention.consume_queue_files_deleted.to_string(),
    );
    put(
        "dispatchBehindBytes",
        state.store.dispatch_behind_bytes().to_string(),
    );
    let unflushed = state
        .store
        .max_physical_offset()
        .saturating_sub(state.store.flushed_physical_offset());
    put("remainHowManyDataToFlush", human_readable_bytes(unflushed));
    put("remainHowManyDataToFlushBytes", unflushed.to_string());
    let timers = state.timers.stats();
    put("timerPending", timers.pending.to_string());
    put("timerDelivered", timers.delivered.to_string());
    put("timerLatenessP50Ms", timers.lateness_p50_ms.to_string());
    put("timerLatenessP99Ms", timers.lateness_p99_ms.to_string());
    put("timerLatenessMaxMs", timers.lateness_max_ms.to_string());
    put("scheduleDelivered", state.schedule.delivered().to_string());
    let snapshot = state.counters.snapshot();
    put("requestsAccepted", snapshot.accepted.to_string());
    put("requestsCompleted", snapshot.completed.to_string());
    put("requestsServedInline", snapshot.served_inline.to_string());
    for (label, count) in &snapshot.rejected {
        put(&format!("rejected_{label}"), count.to_string());
    }
    let body = body::to_json(&KvTable { table });
    req.response_to(ResponseCode::SUCCESS, None).with_body(body)
}

/// The rates and totals of RocketMQ's store statistics: `putTps`,
/// `get*Tps` (10 s, 1 min, 10 min), the put and get totals of today and at
/// the last two midnights, `runtime`, `earliestMessageTimeStamp`.
fn rate_keys(state: &BrokerState, put: &mut impl FnMut(&str, String)) {
    let stats = &state.stats;
    put("putTps", stats.rates(|t| t.put));
    put("getFoundTps", stats.rates(|t| t.found));
    put("getMissTps", stats.rates(|t| t.miss));
    put("getTotalTps", stats.rates(|t| t.found + t.miss));
    put("getTransferredTps", stats.rates(|t| t.transferred));
    let (put_now, get_now) = stats.non_system_totals();
    let mornings = stats.mornings();
    put("msgPutTotalTodayNow", put_now.to_string());
    put("msgGetTotalTodayNow", get_now.to_string());
    put("msgPutTotalTodayMorning", mornings.put_today.to_string());
    put("msgGetTotalTodayMorning", mornings.get_today.to_string());
    put(
        "msgPutTotalYesterdayMorning",
        mornings.put_yesterday.to_string(),
    );
    put(
        "msgGetTotalYesterdayMorning",
        mornings.get_yesterday.to_string(),
    );
    let totals = stats.totals();
    put("putMessageTimesTotal", totals.put.to_string());
    put(
        "getMessageTransferredMsgCount",
        totals.transferred.to_string(),
    );
    put("brokerActive", "true".to_owned());
    put(
        "earliestMessageTimeStamp",
        state.earliest_store_time().unwrap_or(0).to_string(),
    );
    let up = (message_model::now_ms() - state.boot_timestamp).max(0) / 1000;
    put(
        "runtime",
        format!(
            "[ {} days, {} hours, {} minutes, {} seconds ]",
            up / 86_400,
            up % 86_400 / 3600,
            up % 3600 / 60,
            up % 60
        ),
    );
}

/// Makes the store delete expired CommitLog files at once, whatever the
/// hour (mqadmin `deleteExpiredCommitLog`).
pub(crate) fn delete_expired_commit_log(
    state: &BrokerState,
    req: &RemotingCommand,
) -> RemotingCommand {
    tracing::info!("deletion of expired CommitLog files requested");
    state.store.trigger_delete_files();
    req.response_to(ResponseCode::SUCCESS, None)
}

/// The record at a physical offset.
pub(crate) fn view_message(state: &BrokerState, req: &RemotingCommand) -> RemotingCommand {
    let Some(offset) = req.ext("offset").and_then(|o| o.parse::<u64>().ok()) else {
        return req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some("required header field `offset` is missing or not a number".into()),
        );
    };
    match state.store.lookup_message(offset) {
        Some(record) => req
            .response_to(ResponseCode::SUCCESS, None)
            .with_body(record),
        None => req.response_to(
            ResponseCode::SYSTEM_ERROR,
            Some(format!("can not find message by the offset, {offset}")),
        ),
    }
}

fn value_text(v: &figment::value::Value) -> String {
    match v {
        figment::value::Value::String(_, s) => s.clone(),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}
