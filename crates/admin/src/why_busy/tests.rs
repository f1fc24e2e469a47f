//! Unit tests of the diagnosis, one mechanism at a time, and of the report.

use super::{figures::NOTHING_TO_DO, *};

/// A Sluice broker's figures at rest, with default settings.
fn idle() -> Sample {
    let runtime = [
        ("bootTimestamp", "1000"),
        ("pageCacheLockTimeMills", "0"),
        ("osPageCacheBusy", "false"),
        ("remainTransientStoreBufferNumbs", "2147483647"),
        ("transientStorePoolTotalBuffers", "0"),
        ("sendThreadPoolQueueSize", "0"),
        ("sendThreadPoolQueueCapacity", "10000"),
        ("sendThreadPoolQueueHeadWaitTimeMills", "0"),
        ("sendThreadPoolQueueBytes", "0"),
        ("sendThreadPoolQueueCapacityBytes", "268435456"),
        ("sendThreadPoolQueueWorkers", "2"),
        ("sendThreadPoolQueuePredictedWaitMills", "-1"),
        ("sendQueueEarlyAdmission", "true"),
        ("sendQueueAdmissionTargetMills", "5"),
        ("sendQueueSheddingShares", "0"),
        ("sendQueueShares", ""),
        ("pullThreadPoolQueueSize", "0"),
        ("pullThreadPoolQueueCapacity", "100000"),
        ("pullThreadPoolQueueHeadWaitTimeMills", "0"),
        ("heartbeatThreadPoolQueueSize", "0"),
        ("heartbeatThreadPoolQueueCapacity", "50000"),
        ("heartbeatThreadPoolQueueHeadWaitTimeMills", "0"),
        ("adminBrokerThreadPoolQueueSize", "0"),
        ("adminBrokerThreadPoolQueueCapacity", "10000"),
        ("adminBrokerThreadPoolQueueHeadWaitTimeMills", "0"),
        ("EndTransactionQueueSize", "0"),
        ("EndTransactionThreadPoolQueueCapacity", "100000"),
        ("commitLogDiskRatio", "0.42"),
        ("retentionPasses", "3"),
        ("remainHowManyDataToFlush", "0 B"),
        ("remainHowManyDataToFlushBytes", "0"),
        ("topicQuotas", ""),
        ("clientQuotas", ""),
        ("rejected_reject_request", "0"),
        ("rejected_overload", "0"),
        ("rejected_pcbusy_clean_queue", "0"),
        ("rejected_timeout_clean_queue", "0"),
        ("rejected_pc_synchronized", "0"),
        ("rejected_early_reject", "0"),
        ("rejected_overload_bytes", "0"),
        ("rejected_over_quota", "0"),
        ("rejected_share_full", "0"),
        ("rejected_standing_queue", "0"),
    ];
    let config = [
        ("osPageCacheBusyTimeOutMills", "1000"),
        ("faultPutLockDelayMills", "0"),
        ("transientStorePoolEnable", "false"),
        ("transientStorePoolSize", "5"),
        ("waitTimeMillsInSendQueue", "200"),
        ("waitTimeMillsInPullQueue", "5000"),
        ("sendMessageThreadPoolNums", "2"),
        ("earlyAdmissionEnable", "true"),
        ("adaptiveAdmissionEnable", "true"),
        ("admissionTargetMills", "5"),
        ("diskSpaceWarningLevelRatio", "90"),
        ("diskSpaceCleanForciblyRatio", "85"),
        ("flushDiskType", "ASYNC_FLUSH"),
        ("syncFlushTimeout", "5000"),
        ("topicQuotas", ""),
        ("clientQuotas", ""),
    ];
    Sample {
        taken_ms: 10_000,
        runtime: runtime
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        config: config
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    }
}

fn with(mut s: Sample, runtime: &[(&str, &str)], config: &[(&str, &str)]) -> Sample {
    for (k, v) in runtime {
        s.runtime.insert((*k).to_owned(), (*v).to_owned());
    }
    for (k, v) in config {
        s.config.insert((*k).to_owned(), (*v).to_owned());
    }
    s
}

fn find(sample: &Sample, previous: Option<&Sample>, m: Mechanism) -> Finding {
    finding(m, &Figures::new(sample, previous))
}

/// Checks the state of `m` under `runtime` and `config`, and that its
/// advice names `setting` unless the state is OK.
fn check(
    m: Mechanism,
    runtime: &[(&str, &str)],
    config: &[(&str, &str)],
    state: State,
    setting: &str,
) -> Finding {
    let s = with(idle(), runtime, config);
    let got = find(&s, None, m);
    assert_eq!(got.state, state, "{m:?} {runtime:?} {config:?}: {got:#?}");
    if state != State::Ok {
        assert!(
            got.action.contains(setting),
            "{m:?}: the advice should name {setting}: {}",
            got.action
        );
    } else {
        assert_eq!(got.action, NOTHING_TO_DO, "{got:#?}");
    }
    got
}

#[test]
fn an_idle_broker_is_ok_everywhere() {
    let d = diagnose("b:1", &idle(), None);
    assert_eq!(d.findings.len(), Mechanism::ALL.len());
    for f in &d.findings {
        assert_eq!(f.state, State::Ok, "{f:#?}");
    }
    assert!(d.verdict.starts_with("OK:"), "{}", d.verdict);
    assert_eq!(d.window, Some(Window::SinceBoot));
    assert!(d.rejections.is_empty());
}

#[test]
fn levels_split_at_the_limit_and_half_of_it() {
    assert_eq!(level(200.0, 200.0), State::Rejecting);
    assert_eq!(level(101.0, 200.0), State::AtRisk);
    assert_eq!(level(100.0, 200.0), State::Ok);
    assert_eq!(level(5.0, 0.0), State::Ok);
}

#[test]
fn page_cache_follows_the_lock_against_the_busy_limit() {
    let busy = check(
        Mechanism::PageCache,
        &[
            ("pageCacheLockTimeMills", "1200"),
            ("osPageCacheBusy", "true"),
        ],
        &[],
        State::Rejecting,
        "osPageCacheBusyTimeOutMills",
    );
    assert_eq!(busy.figures, "put lock held 1200 ms of 1000 ms (120 %)");
    assert!(busy.why.contains("[REJECTREQUEST]"), "{}", busy.why);
    check(
        Mechanism::PageCache,
        &[("pageCacheLockTimeMills", "600")],
        &[],
        State::AtRisk,
        "osPageCacheBusyTimeOutMills",
    );
    check(
        Mechanism::PageCache,
        &[("pageCacheLockTimeMills", "12")],
        &[],
        State::Ok,
        "",
    );
    // An injected delay is named as the thing to undo.
    check(
        Mechanism::PageCache,
        &[("pageCacheLockTimeMills", "150")],
        &[
            ("osPageCacheBusyTimeOutMills", "100"),
            ("faultPutLockDelayMills", "400"),
        ],
        State::Rejecting,
        "faultPutLockDelayMills",
    );
}

#[test]
fn transient_pool_follows_its_free_buffers() {
    let on = [("transientStorePoolTotalBuffers", "4")];
    let out = check(
        Mechanism::TransientPool,
        &[on[0], ("remainTransientStoreBufferNumbs", "0")],
        &[("transientStorePoolEnable", "true")],
        State::Rejecting,
        "transientStorePoolSize",
    );
    assert_eq!(out.figures, "4 of 4 buffers in use (100 %)");
    check(
        Mechanism::TransientPool,
        &[on[0], ("remainTransientStoreBufferNumbs", "1")],
        &[("transientStorePoolEnable", "true")],
        State::AtRisk,
        "transientStorePoolSize",
    );
    check(
        Mechanism::TransientPool,
        &[on[0], ("remainTransientStoreBufferNumbs", "3")],
        &[("transientStorePoolEnable", "true")],
        State::Ok,
        "",
    );
    // Off: nothing to run out of.
    check(Mechanism::TransientPool, &[], &[], State::Ok, "");
}

#[test]
fn an_empty_pool_takes_the_reject_request_count_from_the_page_cache() {
    let s = with(
        idle(),
        &[
            ("transientStorePoolTotalBuffers", "1"),
            ("remainTransientStoreBufferNumbs", "0"),
            ("rejected_reject_request", "7"),
        ],
        &[],
    );
    assert_eq!(
        find(&s, None, Mechanism::TransientPool).refused,
        Some(7),
        "the pool refused them"
    );
    let page = find(&s, None, Mechanism::PageCache);
    assert_eq!(page.refused, Some(0));
    assert_eq!(page.state, State::Ok);
    let pool_free = with(s, &[("remainTransientStoreBufferNumbs", "1")], &[]);
    let page = find(&pool_free, None, Mechanism::PageCache);
    assert_eq!(page.refused, Some(7));
    assert_eq!(page.state, State::AtRisk, "refused since boot");
}

#[test]
fn send_queue_wait_follows_the_head_against_the_wait_limit() {
    let late = check(
        Mechanism::SendQueueWait,
        &[("sendThreadPoolQueueHeadWaitTimeMills", "250")],
        &[],
        State::Rejecting,
        "waitTimeMillsInSendQueue",
    );
    assert!(late.action.contains("sendMessageThreadPoolNums"));
    assert!(late.why.contains("[TIMEOUT_CLEAN_QUEUE]"));
    check(
        Mechanism::SendQueueWait,
        &[("sendThreadPoolQueueHeadWaitTimeMills", "150")],
        &[],
        State::AtRisk,
        "waitTimeMillsInSendQueue",
    );
    check(
        Mechanism::SendQueueWait,
        &[("sendThreadPoolQueueHeadWaitTimeMills", "20")],
        &[],
        State::Ok,
        "",
    );
}

#[test]
fn send_queue_full_follows_length_and_bytes_against_capacity() {
    let full = check(
        Mechanism::SendQueueFull,
        &[
            ("sendThreadPoolQueueSize", "2"),
            ("sendThreadPoolQueueCapacity", "2"),
        ],
        &[],
        State::Rejecting,
        "sendThreadPoolQueueCapacity",
    );
    assert!(full.figures.starts_with("2 of 2 queued (100 %)"));
    check(
        Mechanism::SendQueueFull,
        &[("sendThreadPoolQueueSize", "6000")],
        &[],
        State::AtRisk,
        "sendThreadPoolQueueCapacity",
    );
    check(
        Mechanism::SendQueueFull,
        &[("sendThreadPoolQueueBytes", "268435456")],
        &[],
        State::Rejecting,
        "requestQueueCapacityBytes",
    );
    check(
        Mechanism::SendQueueFull,
        &[("sendThreadPoolQueueSize", "10")],
        &[],
        State::Ok,
        "",
    );
}

#[test]
fn admission_follows_shedding_shares_and_the_predicted_wait() {
    let shed = check(
        Mechanism::Admission,
        &[
            ("sendQueueSheddingShares", "1"),
            ("sendQueueShares", "Orders:40:30:true;Logs:1:0:false"),
        ],
        &[],
        State::Rejecting,
        "adaptiveAdmissionEnable",
    );
    assert!(shed.why.contains("(Orders)"), "{}", shed.why);
    check(
        Mechanism::Admission,
        &[("sendThreadPoolQueuePredictedWaitMills", "240")],
        &[],
        State::Rejecting,
        "earlyAdmissionEnable",
    );
    check(
        Mechanism::Admission,
        &[("sendThreadPoolQueuePredictedWaitMills", "120")],
        &[],
        State::AtRisk,
        "adaptiveAdmissionEnable",
    );
    check(
        Mechanism::Admission,
        &[("sendThreadPoolQueueHeadWaitTimeMills", "9")],
        &[],
        State::AtRisk,
        "adaptiveAdmissionEnable",
    );
    check(
        Mechanism::Admission,
        &[("sendThreadPoolQueuePredictedWaitMills", "3")],
        &[],
        State::Ok,
        "",
    );
    // Off: it cannot refuse.
    check(
        Mechanism::Admission,
        &[
            ("sendQueueEarlyAdmission", "false"),
            ("sendQueueAdmissionTargetMills", "0"),
            ("sendThreadPoolQueuePredictedWaitMills", "900"),
        ],
        &[],
        State::Ok,
        "",
    );
}

#[test]
fn shedding_shares_are_read_from_the_right() {
    assert_eq!(
        shedding_shares("a:b:3:10:true;c:0:0:false; d:1:2:true"),
        vec!["a:b".to_owned(), "d".to_owned()]
    );
    assert!(shedding_shares("").is_empty());
}

#[test]
fn quotas_follow_their_refusals() {
    let quotas = [("topicQuotas", "Orders=5/s")];
    let before = with(idle(), &[], &quotas);
    let now = with(before.clone(), &[("rejected_over_quota", "3")], &[]);
    let fresh = find(&now, Some(&before), Mechanism::Quota);
    assert_eq!(fresh.state, State::Rejecting);
    assert_eq!(fresh.refused, Some(3));
    assert!(fresh.action.contains("topicQuotas"), "{}", fresh.action);
    assert!(fresh.figures.contains("Orders=5/s"));
    check(
        Mechanism::Quota,
        &[("rejected_over_quota", "3")],
        &quotas,
        State::AtRisk,
        "topicQuotas",
    );
    check(Mechanism::Quota, &[], &quotas, State::Ok, "");
    // Nothing new since the previous look.
    assert_eq!(find(&now, Some(&now), Mechanism::Quota).state, State::Ok);
}

#[test]
fn disk_follows_the_warning_and_clean_ratios() {
    check(
        Mechanism::Disk,
        &[("commitLogDiskRatio", "0.93")],
        &[],
        State::Rejecting,
        "fileReservedTime",
    );
    check(
        Mechanism::Disk,
        &[("commitLogDiskRatio", "0.87")],
        &[],
        State::AtRisk,
        "fileReservedTime",
    );
    check(
        Mechanism::Disk,
        &[("commitLogDiskRatio", "0.5")],
        &[],
        State::Ok,
        "",
    );
    check(
        Mechanism::Disk,
        &[("commitLogDiskRatio", "-1")],
        &[],
        State::Unknown,
        "",
    );
    let unmeasured = check(
        Mechanism::Disk,
        &[("commitLogDiskRatio", "0"), ("retentionPasses", "0")],
        &[],
        State::Ok,
        "",
    );
    assert_eq!(unmeasured.figures, "not measured yet");
}

#[test]
fn flush_lag_matters_only_under_sync_flush() {
    let sync = [
        ("flushDiskType", "SYNC_FLUSH"),
        ("syncFlushTimeout", "1000"),
    ];
    let mib = 1024 * 1024;
    check(
        Mechanism::Flush,
        &[("remainHowManyDataToFlushBytes", &(200 * mib).to_string())],
        &sync,
        State::Rejecting,
        "syncFlushTimeout",
    );
    check(
        Mechanism::Flush,
        &[("remainHowManyDataToFlushBytes", &(60 * mib).to_string())],
        &sync,
        State::AtRisk,
        "syncFlushTimeout",
    );
    check(
        Mechanism::Flush,
        &[("remainHowManyDataToFlushBytes", "4096")],
        &sync,
        State::Ok,
        "",
    );
    check(
        Mechanism::Flush,
        &[("remainHowManyDataToFlushBytes", &(900 * mib).to_string())],
        &[],
        State::Ok,
        "",
    );
}

#[test]
fn other_queues_follow_length_and_head_wait() {
    check(
        Mechanism::PullQueue,
        &[("pullThreadPoolQueueHeadWaitTimeMills", "6000")],
        &[],
        State::Rejecting,
        "pullMessageThreadPoolNums",
    );
    check(
        Mechanism::PullQueue,
        &[("pullThreadPoolQueueSize", "60000")],
        &[],
        State::AtRisk,
        "pullThreadPoolQueueCapacity",
    );
    check(
        Mechanism::HeartbeatQueue,
        &[("heartbeatThreadPoolQueueSize", "50000")],
        &[],
        State::Rejecting,
        "heartbeatThreadPoolQueueCapacity",
    );
    check(
        Mechanism::AdminQueue,
        &[("adminBrokerThreadPoolQueueHeadWaitTimeMills", "3000")],
        &[],
        State::AtRisk,
        "adminBrokerThreadPoolNums",
    );
    check(
        Mechanism::EndTransactionQueue,
        &[("EndTransactionQueueSize", "100000")],
        &[],
        State::Rejecting,
        "endTransactionPoolQueueCapacity",
    );
    check(Mechanism::PullQueue, &[], &[], State::Ok, "");
    let rocketmq = Sample {
        runtime: BTreeMap::from([("pageCacheLockTimeMills".to_owned(), "0".to_owned())]),
        ..Sample::default()
    };
    assert_eq!(
        find(&rocketmq, None, Mechanism::HeartbeatQueue).state,
        State::Unknown
    );
}

#[test]
fn refusals_count_since_the_previous_look_of_the_same_run() {
    let before = idle();
    let mut now = with(
        before.clone(),
        &[
            ("rejected_overload", "5"),
            ("rejected_timeout_clean_queue", "2"),
        ],
        &[],
    );
    now.taken_ms = before.taken_ms + 2500;
    let d = diagnose("b:1", &now, Some(&before));
    assert_eq!(d.window, Some(Window::SincePreviousLook { seconds: 2.5 }));
    assert_eq!(d.rejections.get("overload"), Some(&5));
    // Most severe first: the two mechanisms that refused lead.
    assert_eq!(d.findings[0].mechanism, Mechanism::SendQueueWait);
    assert_eq!(d.findings[0].state, State::Rejecting);
    assert_eq!(d.findings[1].mechanism, Mechanism::SendQueueFull);
    assert_eq!(d.findings[1].refused, Some(5));
    assert_eq!(d.verdict, "REJECTING: send queue wait, send queue full.");
    // A restart resets the counters: count since boot again.
    let restarted = with(now.clone(), &[("bootTimestamp", "99")], &[]);
    let d = diagnose("b:1", &restarted, Some(&before));
    assert_eq!(d.window, Some(Window::SinceBoot));
    assert_eq!(d.findings[0].state, State::AtRisk);
}

#[test]
fn text_names_the_state_figures_why_and_what_to_do() {
    let s = with(
        idle(),
        &[("sendThreadPoolQueueHeadWaitTimeMills", "250")],
        &[],
    );
    let report = WhyBusyReport {
        refresh: Some(2),
        brokers: vec![diagnose("b:1", &s, None)],
    };
    let text = report.text();
    assert!(text.contains("broker b:1 at "), "{text}");
    assert!(text.contains("(refresh 2)"), "{text}");
    assert!(text.contains("REJECTING: send queue wait."), "{text}");
    assert!(
        text.contains("REJECTING  send queue wait"),
        "table row: {text}"
    );
    assert!(
        text.contains("head wait 250 ms of 200 ms (125 %)"),
        "{text}"
    );
    assert!(text.contains("  why: The oldest queued send"), "{text}");
    assert!(text.contains("  do:  Sends arrive faster"), "{text}");
    assert!(text.contains("(refused: since boot)"), "{text}");
    let json: serde_json::Value = serde_json::from_str(&crate::render::render(&report, true))
        .unwrap_or_else(|e| panic!("{e}"));
    let first = &json["brokers"][0]["findings"][0];
    assert_eq!(first["mechanism"], "send_queue_wait");
    assert_eq!(first["state"], "REJECTING");
    assert_eq!(first["value"], 250.0);
    assert_eq!(json["brokers"][0]["window"]["kind"], "sinceBoot");
}
