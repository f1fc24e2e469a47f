//! The diagnosis: one [`Finding`] per [`Mechanism`] from the figures of a
//! sample, and the verdict over them.

use std::fmt::Write as _;

use super::{
    figures::{bytes_text, percent, refusals_sentence, unknown, with_refusals, NOTHING_TO_DO},
    level, Diagnosis, Figures, Finding, Mechanism, Sample, State, ASSUMED_FLUSH_BYTES_PER_SEC,
};

/// One finding per mechanism from `sample` (refusals counted since
/// `previous` when given), most severe first.
pub fn diagnose(broker: &str, sample: &Sample, previous: Option<&Sample>) -> Diagnosis {
    let f = Figures::new(sample, previous);
    let mut findings: Vec<Finding> = Mechanism::ALL.iter().map(|m| finding(*m, &f)).collect();
    findings.sort_by(|a, b| {
        b.state
            .cmp(&a.state)
            .then_with(|| a.mechanism.cmp(&b.mechanism))
    });
    Diagnosis {
        broker: broker.to_owned(),
        taken_ms: sample.taken_ms,
        window: Some(f.window),
        rejections: f
            .refused
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| (k.clone(), *n))
            .collect(),
        verdict: verdict(&findings),
        findings,
        error: None,
    }
}

/// One sentence naming the mechanisms that refuse or are close to it.
pub fn verdict(findings: &[Finding]) -> String {
    let names = |s: State| -> Vec<&str> {
        findings
            .iter()
            .filter(|f| f.state == s)
            .map(|f| f.title)
            .collect()
    };
    let rejecting = names(State::Rejecting);
    let at_risk = names(State::AtRisk);
    match (rejecting.is_empty(), at_risk.is_empty()) {
        (false, _) => format!("REJECTING: {}.", rejecting.join(", ")),
        (true, false) => format!("AT RISK: {}.", at_risk.join(", ")),
        (true, true) => {
            "OK: no flow-control mechanism is refusing requests or close to it.".to_owned()
        }
    }
}

/// The finding of one mechanism.
pub fn finding(m: Mechanism, f: &Figures<'_>) -> Finding {
    match m {
        Mechanism::PageCache => page_cache(f),
        Mechanism::TransientPool => transient_pool(f),
        Mechanism::SendQueueWait => send_queue_wait(f),
        Mechanism::SendQueueFull => send_queue_full(f),
        Mechanism::Admission => admission(f),
        Mechanism::Quota => quota(f),
        Mechanism::Disk => disk(f),
        Mechanism::Flush => flush(f),
        Mechanism::PullQueue => other_queue(m, f, &PULL),
        Mechanism::HeartbeatQueue => other_queue(m, f, &HEARTBEAT),
        Mechanism::AdminQueue => other_queue(m, f, &ADMIN),
        Mechanism::EndTransactionQueue => other_queue(m, f, &END_TRANSACTION),
    }
}

/// Whether the transient store pool is on and out of buffers.
fn pool_exhausted(f: &Figures<'_>) -> bool {
    let enabled = f.rt_f64("transientStorePoolTotalBuffers").map_or_else(
        || f.cfg_bool("transientStorePoolEnable", false),
        |n| n > 0.0,
    );
    enabled && f.rt_f64("remainTransientStoreBufferNumbs") == Some(0.0)
}

fn page_cache(f: &Figures<'_>) -> Finding {
    let m = Mechanism::PageCache;
    let Some(held) = f.rt_f64("pageCacheLockTimeMills") else {
        return unknown(m, "pageCacheLockTimeMills");
    };
    let limit = f.cfg_f64("osPageCacheBusyTimeOutMills", 1000.0);
    let busy = f.rt_bool("osPageCacheBusy").unwrap_or(false);
    // `[REJECTREQUEST]` is the page cache's unless the pool is out of buffers.
    let labels: &[&str] = if pool_exhausted(f) {
        &["pcbusy_clean_queue", "pc_synchronized"]
    } else {
        &["reject_request", "pcbusy_clean_queue", "pc_synchronized"]
    };
    let refused = f.refused(labels);
    let live = if busy {
        State::Rejecting
    } else {
        level(held, limit)
    };
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "The CommitLog put lock has been held {held:.0} ms, past osPageCacheBusyTimeOutMills \
             ({limit:.0} ms): the page cache counts as busy, so new sends are refused at once \
             ([REJECTREQUEST]) and queued sends are drained ([PCBUSY_CLEAN_QUEUE])."
        ),
        State::AtRisk => format!(
            "The CommitLog put lock has been held {held:.0} ms, more than half of \
             osPageCacheBusyTimeOutMills ({limit:.0} ms); at the limit sends are refused."
        ),
        _ => format!(
            "The CommitLog put lock is held {held:.0} ms, well within \
             osPageCacheBusyTimeOutMills ({limit:.0} ms)."
        ),
    } + &refusals_sentence(refused, f.window);
    let fault = f.cfg_f64("faultPutLockDelayMills", 0.0);
    let action = if fault > 0.0 {
        format!(
            "faultPutLockDelayMills is {fault:.0} ms, a put-lock delay injected on purpose: \
             set it to 0 (broker config set --key faultPutLockDelayMills --value 0)."
        )
    } else if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Find what stalls CommitLog appends (disk latency, flushes, memory pressure) or lower \
         the write load; transientStorePoolEnable=true writes through off-heap buffers; raise \
         osPageCacheBusyTimeOutMills only if such stalls are harmless."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "put lock held {held:.0} ms of {limit:.0} ms{}",
            percent(held, limit)
        ),
        value: Some(held),
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn transient_pool(f: &Figures<'_>) -> Finding {
    let m = Mechanism::TransientPool;
    let total = f
        .rt_f64("transientStorePoolTotalBuffers")
        .unwrap_or_else(|| {
            if f.cfg_bool("transientStorePoolEnable", false) {
                f.cfg_f64("transientStorePoolSize", 5.0)
            } else {
                0.0
            }
        });
    let refused = if pool_exhausted(f) {
        f.refused(&["reject_request"])
    } else {
        None
    };
    if total <= 0.0 {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: "pool off".to_owned(),
            value: None,
            limit: None,
            refused,
            why: "transientStorePoolEnable is false: sends need no pool buffer.".to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let Some(free) = f.rt_f64("remainTransientStoreBufferNumbs") else {
        return unknown(m, "remainTransientStoreBufferNumbs");
    };
    let used = (total - free).max(0.0);
    let live = level(used, total);
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "All {total:.0} transient store pool buffers are in use \
             (remainTransientStoreBufferNumbs is {free:.0}): sends are refused at admission \
             ([REJECTREQUEST]) until the commit thread returns a buffer."
        ),
        State::AtRisk => format!(
            "{used:.0} of the {total:.0} transient store pool buffers are in use; with none \
             free, sends are refused ([REJECTREQUEST])."
        ),
        _ => format!("{free:.0} of the {total:.0} transient store pool buffers are free."),
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Raise transientStorePoolSize (each buffer is one CommitLog file; restart needed) or \
         lower commitIntervalCommitLog so buffers come back sooner; a faster disk helps the \
         commit thread; transientStorePoolEnable=false writes without the pool."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{used:.0} of {total:.0} buffers in use{}",
            percent(used, total)
        ),
        value: Some(used),
        limit: Some(total),
        refused,
        why,
        action,
    }
}

fn send_queue_wait(f: &Figures<'_>) -> Finding {
    let m = Mechanism::SendQueueWait;
    let Some(head) = f.rt_f64("sendThreadPoolQueueHeadWaitTimeMills") else {
        return unknown(m, "sendThreadPoolQueueHeadWaitTimeMills");
    };
    let limit = f.cfg_f64("waitTimeMillsInSendQueue", 200.0);
    let workers = f
        .rt_f64("sendThreadPoolQueueWorkers")
        .unwrap_or_else(|| f.cfg_f64("sendMessageThreadPoolNums", 1.0));
    let refused = f.refused(&["timeout_clean_queue"]);
    let live = level(head, limit);
    let state = with_refusals(live, refused, f.fresh());
    let why = match live {
        State::Rejecting => format!(
            "The oldest queued send has waited {head:.0} ms, past waitTimeMillsInSendQueue \
             ({limit:.0} ms): such sends are answered [TIMEOUT_CLEAN_QUEUE] instead of being \
             served."
        ),
        State::AtRisk => format!(
            "The oldest queued send has waited {head:.0} ms, more than half of \
             waitTimeMillsInSendQueue ({limit:.0} ms)."
        ),
        _ => format!(
            "The oldest queued send has waited {head:.0} ms, well within \
             waitTimeMillsInSendQueue ({limit:.0} ms)."
        ),
    } + &refusals_sentence(refused, f.window)
        + if refused.is_some_and(|n| n > 0) {
            " (The count covers every queue.)"
        } else {
            ""
        };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        format!(
            "Sends arrive faster than the {workers:.0} send worker(s) store them: raise \
             sendMessageThreadPoolNums if appends are slow but the disk is not saturated, else \
             send slower or add brokers; raise waitTimeMillsInSendQueue only if producers can \
             wait longer (their sendMsgTimeout is 3 s)."
        )
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "head wait {head:.0} ms of {limit:.0} ms{}",
            percent(head, limit)
        ),
        value: Some(head),
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn send_queue_full(f: &Figures<'_>) -> Finding {
    let m = Mechanism::SendQueueFull;
    let (Some(len), Some(cap)) = (
        f.rt_f64("sendThreadPoolQueueSize"),
        f.rt_f64("sendThreadPoolQueueCapacity"),
    ) else {
        return unknown(m, "sendThreadPoolQueueSize and sendThreadPoolQueueCapacity");
    };
    let bytes = f.rt_f64("sendThreadPoolQueueBytes");
    let cap_bytes = f.rt_f64("sendThreadPoolQueueCapacityBytes");
    let refused = f.refused(&["overload", "overload_bytes", "share_full"]);
    let by_count = level(len, cap);
    let by_bytes = match (bytes, cap_bytes) {
        (Some(b), Some(c)) => level(b, c),
        _ => State::Ok,
    };
    let bytes_bound = by_bytes > by_count;
    let live = by_count.max(by_bytes);
    let state = with_refusals(live, refused, f.fresh());
    let mut figures = format!("{len:.0} of {cap:.0} queued{}", percent(len, cap));
    if let (Some(b), Some(c)) = (bytes, cap_bytes) {
        let _ = write!(figures, ", {} of {}", bytes_text(b), bytes_text(c));
    }
    let why = match (live, bytes_bound) {
        (State::Rejecting, false) => format!(
            "The send queue holds {len:.0} sends, its sendThreadPoolQueueCapacity \
             ({cap:.0}): new sends are refused at once ([OVERLOAD])."
        ),
        (State::Rejecting, true) => {
            "The sends waiting in the queue hold requestQueueCapacityBytes: new sends are \
             refused at once ([OVERLOAD] ... queued bytes)."
                .to_owned()
        }
        (State::AtRisk, _) => format!(
            "The send queue is more than half full ({len:.0} of {cap:.0}); when full, sends \
             are refused ([OVERLOAD])."
        ),
        _ => format!("The send queue holds {len:.0} of {cap:.0} sends."),
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else if bytes_bound {
        "Large messages arrive faster than the store takes them: send slower or spread the \
         load over more brokers; a larger requestQueueCapacityBytes only moves the wait into \
         the queue."
            .to_owned()
    } else {
        "A larger sendThreadPoolQueueCapacity only moves the wait into the queue (and into \
         [TIMEOUT_CLEAN_QUEUE]): send slower, spread the load over more brokers, or make the \
         store faster (sendMessageThreadPoolNums, disk)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: Some(len),
        limit: Some(cap),
        refused,
        why,
        action,
    }
}

/// The shares of `sendQueueShares` (`key:length:head wait ms:shedding`
/// entries separated by `;`) that are shedding.
pub fn shedding_shares(entries: &str) -> Vec<String> {
    entries
        .split(';')
        .filter_map(|e| {
            let mut parts = e.trim().rsplitn(4, ':');
            let shedding = parts.next()?;
            let _wait = parts.next()?;
            let _len = parts.next()?;
            let key = parts.next()?;
            (shedding == "true").then(|| key.to_owned())
        })
        .collect()
}

fn admission(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Admission;
    let early = f
        .rt_bool("sendQueueEarlyAdmission")
        .unwrap_or_else(|| f.cfg_bool("earlyAdmissionEnable", true));
    let target = f
        .rt_f64("sendQueueAdmissionTargetMills")
        .unwrap_or_else(|| {
            if f.cfg_bool("adaptiveAdmissionEnable", true) {
                f.cfg_f64("admissionTargetMills", 5.0)
            } else {
                0.0
            }
        });
    let limit = f.cfg_f64("waitTimeMillsInSendQueue", 200.0);
    let predicted = f
        .rt_f64("sendThreadPoolQueuePredictedWaitMills")
        .filter(|p| *p >= 0.0);
    let head = f
        .rt_f64("sendThreadPoolQueueHeadWaitTimeMills")
        .unwrap_or(0.0);
    let shedding = shedding_shares(f.rt("sendQueueShares").unwrap_or(""));
    let shedding_count = f
        .rt_f64("sendQueueSheddingShares")
        .unwrap_or(shedding.len() as f64)
        .max(shedding.len() as f64);
    let refused = f.refused(&["early_reject", "standing_queue"]);
    if !early && target <= 0.0 {
        let state = with_refusals(State::Ok, refused, f.fresh());
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state,
            figures: "off".to_owned(),
            value: None,
            limit: None,
            refused,
            why: "earlyAdmissionEnable and adaptiveAdmissionEnable are false: sends are \
                  admitted as RocketMQ does, until the queue is full or they time out."
                .to_owned()
                + &refusals_sentence(refused, f.window),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let by_prediction = match (early, predicted) {
        (true, Some(p)) => level(p, limit),
        _ => State::Ok,
    };
    let by_shedding = if target > 0.0 && shedding_count > 0.0 {
        State::Rejecting
    } else if target > 0.0 && head > target {
        State::AtRisk
    } else {
        State::Ok
    };
    let live = by_prediction.max(by_shedding);
    let state = with_refusals(live, refused, f.fresh());
    let names = if shedding.is_empty() {
        String::new()
    } else {
        format!(" ({})", shedding.join(", "))
    };
    let why = if by_shedding == State::Rejecting {
        format!(
            "Adaptive admission is shedding {shedding_count:.0} share(s){names}: their sends \
             waited longer than admissionTargetMills ({target:.0} ms) for a whole \
             admissionIntervalMills, so sends that would wait longer are refused at once \
             ([EARLY_REJECT] ... standing queue)."
        )
    } else if by_prediction == State::Rejecting {
        format!(
            "The send queue holds about {:.0} ms of work, past waitTimeMillsInSendQueue \
             ({limit:.0} ms): early admission refuses new sends at once ([EARLY_REJECT]) \
             instead of letting them time out.",
            predicted.unwrap_or(0.0)
        )
    } else if live == State::AtRisk {
        format!(
            "Sends wait longer than they should: the oldest has waited {head:.0} ms \
             (admissionTargetMills {target:.0} ms) and the predicted wait is {} ms \
             (waitTimeMillsInSendQueue {limit:.0} ms); a standing queue makes admission shed.",
            predicted.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}"))
        )
    } else {
        "No share is shedding and the predicted wait is well within the limit.".to_owned()
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "The broker is serving at full speed and refusing only the excess: send slower or \
         spread the load over more brokers; adaptiveAdmissionEnable=false and \
         earlyAdmissionEnable=false restore RocketMQ's admission (longer waits, no more \
         throughput)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{shedding_count:.0} share(s) shedding; predicted wait {} of {limit:.0} ms",
            predicted.map_or_else(|| "-".to_owned(), |p| format!("{p:.0}"))
        ),
        value: predicted,
        limit: Some(limit),
        refused,
        why,
        action,
    }
}

fn quota(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Quota;
    let text = |key: &str| {
        f.cfg(key)
            .or_else(|| f.rt(key))
            .unwrap_or("")
            .trim()
            .to_owned()
    };
    let topic = text("topicQuotas");
    let client = text("clientQuotas");
    let refused = f.refused(&["over_quota"]);
    let state = with_refusals(State::Ok, refused, f.fresh());
    let shown = |q: &str| if q.is_empty() { "none" } else { q }.to_owned();
    let figures = format!(
        "topicQuotas {}; clientQuotas {}",
        shown(&topic),
        shown(&client)
    );
    let why = if topic.is_empty() && client.is_empty() {
        "No topicQuotas or clientQuotas are set.".to_owned()
    } else if state == State::Ok {
        "Quotas are set and refused no send in the window.".to_owned()
    } else {
        "Sends over a topic's or client's rate are refused at once ([QUOTA]) until their \
         tokens are back."
            .to_owned()
    } + &refusals_sentence(refused, f.window);
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Send slower, or raise the quota at run time: broker config set --key topicQuotas \
         (or clientQuotas) with a higher N/s or bytes/s limit."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: None,
        limit: None,
        refused,
        why,
        action,
    }
}

fn disk(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Disk;
    let Some(ratio) = f.rt_f64("commitLogDiskRatio").filter(|r| *r >= 0.0) else {
        return unknown(m, "commitLogDiskRatio");
    };
    if f.rt_f64("retentionPasses") == Some(0.0) {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: "not measured yet".to_owned(),
            value: None,
            limit: None,
            refused: None,
            why: "The broker has not measured its disk use yet (no retention pass so far)."
                .to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let used = ratio * 100.0;
    let warning = f.cfg_f64("diskSpaceWarningLevelRatio", 90.0);
    let clean = f.cfg_f64("diskSpaceCleanForciblyRatio", 85.0);
    let state = if used >= warning {
        State::Rejecting
    } else if used >= clean {
        State::AtRisk
    } else {
        State::Ok
    };
    let why = match state {
        State::Rejecting => format!(
            "The CommitLog's disk is {used:.1} % used, past diskSpaceWarningLevelRatio \
             ({warning:.0} %): the store refuses writes (SERVICE_NOT_AVAILABLE) until cleaning \
             brings it down to diskSpaceCleanForciblyRatio ({clean:.0} %)."
        ),
        State::AtRisk => format!(
            "The CommitLog's disk is {used:.1} % used, past diskSpaceCleanForciblyRatio \
             ({clean:.0} %): old files are deleted early; at diskSpaceWarningLevelRatio \
             ({warning:.0} %) writes are refused."
        ),
        _ => format!(
            "The CommitLog's disk is {used:.1} % used, below diskSpaceCleanForciblyRatio \
             ({clean:.0} %)."
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "Free disk space or lower fileReservedTime; DELETE_EXPIRED_COMMITLOG deletes expired \
         files at once."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!("disk {used:.1} % used of {warning:.0} %"),
        value: Some(used),
        limit: Some(warning),
        refused: None,
        why,
        action,
    }
}

fn flush(f: &Figures<'_>) -> Finding {
    let m = Mechanism::Flush;
    let lag = f
        .rt_f64("remainHowManyDataToFlushBytes")
        .or_else(|| f.rt_f64("remainHowManyDataToFlush"));
    let Some(lag) = lag else {
        return unknown(m, "remainHowManyDataToFlushBytes");
    };
    let sync = f.cfg("flushDiskType") == Some("SYNC_FLUSH");
    if !sync {
        return Finding {
            mechanism: m,
            title: m.title(),
            answer: m.answer(),
            state: State::Ok,
            figures: format!("{} unflushed (ASYNC_FLUSH)", bytes_text(lag)),
            value: Some(lag),
            limit: None,
            refused: None,
            why: "flushDiskType is ASYNC_FLUSH: sends do not wait for flushes.".to_owned(),
            action: NOTHING_TO_DO.to_owned(),
        };
    }
    let timeout = f.cfg_f64("syncFlushTimeout", 5000.0);
    let limit = timeout / 1000.0 * ASSUMED_FLUSH_BYTES_PER_SEC as f64;
    let state = level(lag, limit);
    let why = match state {
        State::Ok => format!(
            "Under SYNC_FLUSH, {} wait to be flushed, little against syncFlushTimeout \
             ({timeout:.0} ms).",
            bytes_text(lag)
        ),
        _ => format!(
            "Under SYNC_FLUSH, {} wait to be flushed: more than a disk writing {} per second \
             flushes in {} of syncFlushTimeout ({timeout:.0} ms); sends time out waiting \
             (FLUSH_DISK_TIMEOUT, the message is stored).",
            bytes_text(lag),
            bytes_text(ASSUMED_FLUSH_BYTES_PER_SEC as f64),
            if state == State::Rejecting {
                "all"
            } else {
                "half"
            }
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        "A faster disk or less write load; raise syncFlushTimeout if producers can wait; \
         flushDiskType=ASYNC_FLUSH acknowledges from the page cache (less durable)."
            .to_owned()
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures: format!(
            "{} unflushed of {}{}",
            bytes_text(lag),
            bytes_text(limit),
            percent(lag, limit)
        ),
        value: Some(lag),
        limit: Some(limit),
        refused: None,
        why,
        action,
    }
}

/// The runtime keys and settings of a queue other than the send queue.
#[derive(Debug)]
struct QueueKeys {
    what: &'static str,
    size: &'static str,
    capacity: &'static str,
    head_wait: Option<&'static str>,
    wait_key: Option<(&'static str, f64)>,
    capacity_key: &'static str,
    threads_key: &'static str,
}

const PULL: QueueKeys = QueueKeys {
    what: "pull",
    size: "pullThreadPoolQueueSize",
    capacity: "pullThreadPoolQueueCapacity",
    head_wait: Some("pullThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInPullQueue", 5000.0)),
    capacity_key: "pullThreadPoolQueueCapacity",
    threads_key: "pullMessageThreadPoolNums",
};

const HEARTBEAT: QueueKeys = QueueKeys {
    what: "heartbeat",
    size: "heartbeatThreadPoolQueueSize",
    capacity: "heartbeatThreadPoolQueueCapacity",
    head_wait: Some("heartbeatThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInHeartbeatQueue", 31000.0)),
    capacity_key: "heartbeatThreadPoolQueueCapacity",
    threads_key: "heartbeatThreadPoolNums",
};

const ADMIN: QueueKeys = QueueKeys {
    what: "admin",
    size: "adminBrokerThreadPoolQueueSize",
    capacity: "adminBrokerThreadPoolQueueCapacity",
    head_wait: Some("adminBrokerThreadPoolQueueHeadWaitTimeMills"),
    wait_key: Some(("waitTimeMillsInAdminBrokerQueue", 5000.0)),
    capacity_key: "adminBrokerThreadPoolQueueCapacity",
    threads_key: "adminBrokerThreadPoolNums",
};

const END_TRANSACTION: QueueKeys = QueueKeys {
    what: "end-transaction",
    size: "EndTransactionQueueSize",
    capacity: "EndTransactionThreadPoolQueueCapacity",
    head_wait: None,
    wait_key: None,
    capacity_key: "endTransactionPoolQueueCapacity",
    threads_key: "endTransactionThreadPoolNums",
};

fn other_queue(m: Mechanism, f: &Figures<'_>, k: &QueueKeys) -> Finding {
    let (Some(len), Some(cap)) = (f.rt_f64(k.size), f.rt_f64(k.capacity)) else {
        return unknown(m, k.size);
    };
    let wait = match (k.head_wait.and_then(|h| f.rt_f64(h)), k.wait_key) {
        (Some(head), Some((key, default))) => Some((head, f.cfg_f64(key, default), key)),
        _ => None,
    };
    let by_len = level(len, cap);
    let by_wait = wait.map_or(State::Ok, |(h, l, _)| level(h, l));
    let state = by_len.max(by_wait);
    let what = k.what;
    let mut figures = format!("{len:.0} of {cap:.0} queued{}", percent(len, cap));
    if let Some((h, l, _)) = wait {
        let _ = write!(figures, "; head wait {h:.0} of {l:.0} ms");
    }
    let why = match (state, wait) {
        (State::Ok, _) => format!("The {what} queue is well within its limits."),
        (_, Some((h, l, key))) if by_wait >= by_len => format!(
            "The oldest {what} request has waited {h:.0} ms against {key} ({l:.0} ms); at \
             the limit it is answered [TIMEOUT_CLEAN_QUEUE]."
        ),
        _ => format!(
            "The {what} queue holds {len:.0} of its {cap:.0} ({}); when full, requests are \
             refused [OVERLOAD].",
            k.capacity_key
        ),
    };
    let action = if state == State::Ok {
        NOTHING_TO_DO.to_owned()
    } else {
        format!(
            "Requests arrive faster than the {what} workers serve them: raise {} if the \
             broker has spare CPU, or lower the request rate; a larger {} only moves the wait \
             into the queue.",
            k.threads_key, k.capacity_key
        )
    };
    Finding {
        mechanism: m,
        title: m.title(),
        answer: m.answer(),
        state,
        figures,
        value: Some(len),
        limit: Some(cap),
        refused: None,
        why,
        action,
    }
}
