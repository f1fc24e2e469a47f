//! Tests of the broker's statistics: what each record counts, what
//! `VIEW_BROKER_STATS_DATA` answers, the snapshot schedule and the rates,
//! all on times the tests choose.

use super::*;

fn stats(now_ms: i64) -> BrokerStats {
    BrokerStats::new(
        CommonLabels {
            cluster: "C".into(),
            node_id: "b".into(),
        },
        now_ms,
        0,
    )
}

#[test]
fn puts_and_gets_are_counted_per_topic_group_and_broker() {
    let s = stats(0);
    s.record_put("T", 3, 300, MessageType::Normal);
    s.record_put("T", 1, 50, MessageType::Delay);
    s.record_put("%RETRY%G", 1, 10, MessageType::Normal);
    s.record_put("SCHEDULE_TOPIC_XXXX", 2, 20, MessageType::Normal);
    s.record_get("G", "T", 1, 2, 200, 7);
    s.record_miss();

    let t = s.view(TOPIC_PUT_NUMS, "T", 10_000).unwrap().stats_minute;
    assert_eq!(t.sum, 4);
    assert!((t.tps - 0.4).abs() < 1e-9, "{t:?}");
    assert!((t.avgpt - 2.0).abs() < 1e-9, "two sends: {t:?}");
    assert_eq!(
        s.view(TOPIC_PUT_SIZE, "T", 10_000).unwrap().stats_day.sum,
        350
    );
    assert_eq!(
        s.view(GROUP_GET_NUMS, "T@G", 10_000)
            .unwrap()
            .stats_hour
            .sum,
        2
    );
    assert_eq!(
        s.view(GROUP_GET_SIZE, "T@G", 10_000)
            .unwrap()
            .stats_hour
            .sum,
        200
    );
    assert_eq!(
        s.view(BROKER_PUT_NUMS, "C", 10_000)
            .unwrap()
            .stats_minute
            .sum,
        7
    );
    assert_eq!(
        s.view(BROKER_GET_NUMS, "C", 10_000)
            .unwrap()
            .stats_minute
            .sum,
        2
    );
    assert!(s.view(TOPIC_PUT_NUMS, "Other", 10_000).is_none());
    assert!(s.view(BROKER_PUT_NUMS, "NotTheCluster", 10_000).is_none());
    assert!(s.view("NO_SUCH_STATS", "T", 10_000).is_none());
    assert!(
        s.view(GROUP_GET_NUMS, "G@T", 10_000).is_none(),
        "topic@group"
    );

    assert_eq!(s.pulled("G", "T", 1), Some(7));
    assert_eq!(s.pulled("G", "T", 0), None);
    assert_eq!(
        s.totals(),
        Totals {
            put: 7,
            found: 1,
            miss: 1,
            transferred: 2
        }
    );
    // The schedule topic is a system topic: out of the daily totals.
    assert_eq!(s.non_system_totals(), (5, 2));
    assert!(s.group_get_tps("G", "T", 10_000) > 0.0);
    assert_eq!(s.group_get_tps("G", "Other", 10_000), 0.0);
}

#[test]
fn windows_are_snapshotted_on_their_periods() {
    let s = stats(0);
    s.record_put("T", 1, 1, MessageType::Normal);
    // Every second for two minutes, ten puts a second.
    for sec in 1..=120i64 {
        s.record_put("T", 10, 10, MessageType::Normal);
        s.tick(sec * 1000, 0);
    }
    let now = 120_000;
    let data = s.view(TOPIC_PUT_NUMS, "T", now).unwrap();
    // The minute runs from its oldest snapshot (60 s ago): 600 puts.
    assert_eq!(data.stats_minute.sum, 600);
    assert!((data.stats_minute.tps - 10.0).abs() < 1e-9);
    // No ten-minute snapshot yet: the hour and day run from the start.
    assert_eq!(data.stats_hour.sum, 1201);
    assert_eq!(data.stats_day.sum, 1201);
    assert!((s.topic_put_tps("T", now) - 10.0).abs() < 1e-9);
    // The rates: 10 s and 1 min filled, 10 min not yet.
    assert_eq!(s.rates(|t| t.put), "10.0 10.0 ");
    assert_eq!(s.rates(|t| t.found), "0.0 0.0 ");
}

#[test]
fn daily_totals_roll_on_a_new_day() {
    let s = stats(0);
    s.record_put("T", 5, 5, MessageType::Normal);
    s.record_get("G", "T", 0, 3, 3, 3);
    s.tick(1000, 0);
    assert_eq!(s.mornings().put_today, 0);
    s.tick(2000, 1);
    s.record_put("T", 2, 2, MessageType::Normal);
    s.tick(3000, 2);
    let m = s.mornings();
    assert_eq!(
        (m.put_yesterday, m.get_yesterday, m.put_today, m.get_today),
        (5, 3, 7, 3)
    );
}

#[test]
fn message_types_follow_rocketmq_precedence() {
    assert_eq!(MessageType::of("", false), MessageType::Normal);
    assert_eq!(MessageType::of("", true), MessageType::Transaction);
    assert_eq!(
        MessageType::of("DELAY\u{1}3\u{2}", false),
        MessageType::Delay
    );
    assert_eq!(
        MessageType::of("DELAY\u{1}0\u{2}", false),
        MessageType::Normal
    );
    assert_eq!(
        MessageType::of("TIMER_DELAY_SEC\u{1}5\u{2}__SHARDINGKEY\u{1}k\u{2}", false),
        MessageType::Delay
    );
    assert_eq!(
        MessageType::of("__SHARDINGKEY\u{1}k\u{2}", false),
        MessageType::Fifo
    );
    assert!(is_system_topic("rmq_sys_wheel_timer"));
    assert!(is_system_topic("RMQ_SYS_TRANS_HALF_TOPIC"));
    assert!(!is_system_topic("%RETRY%G"));
    assert!(is_retry_or_dlq("%DLQ%G") && is_retry_or_dlq("%RETRY%G"));
    assert!(is_system_group("CID_RMQ_SYS_TRANS") && !is_system_group("G"));
}

#[test]
fn a_deleted_topic_forgets_its_statistics() {
    let s = stats(0);
    s.record_put("T", 1, 1, MessageType::Normal);
    s.record_get("G", "T", 0, 1, 1, 1);
    s.record_get("G", "T2", 0, 1, 1, 1);
    s.remove_topic("T");
    assert!(s.view(TOPIC_PUT_NUMS, "T", 1).is_none());
    assert!(s.view(GROUP_GET_NUMS, "T@G", 1).is_none());
    assert!(s.view(GROUP_GET_NUMS, "T2@G", 1).is_some());
}
