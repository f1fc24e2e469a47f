//! Unit tests of `drain`.

use remoting_protocol::ResponseCode;

use super::*;

fn sluice() -> SluiceTarget {
    SluiceTarget {
        namesrv: "127.0.0.1:9876".into(),
        broker: None,
        topic: "DrainTopic".into(),
        queues: 8,
        fill_batch: DEFAULT_FILL_BATCH,
        pull_batch: None,
        consume_threads: None,
        consume_batch: None,
        credentials: None,
    }
}

fn config(target: Target) -> DrainConfig {
    DrainConfig {
        target,
        phase: Phase::Both,
        messages: 1000,
        body_bytes: 1024,
        in_flight: 16,
        timeout: Duration::from_secs(120),
        progress: false,
    }
}

#[test]
fn batches_add_up_to_the_messages() {
    let sizes: Vec<u32> = batch_sizes(100, 32).collect();
    assert_eq!(sizes, [32, 32, 32, 4]);
    assert_eq!(batch_sizes(64, 32).collect::<Vec<_>>(), [32, 32]);
    assert_eq!(batch_sizes(1, 32).collect::<Vec<_>>(), [1]);
    assert_eq!(batch_sizes(0, 32).count(), 0);
    let total: u64 = batch_sizes(1_000_003, 32).map(u64::from).sum();
    assert_eq!(total, 1_000_003);
}

#[test]
fn a_batch_counts_its_overhead_per_message() {
    assert_eq!(batch_bytes(32, 1024), 32 * (1024 + BATCH_MESSAGE_OVERHEAD));
    assert_eq!(batch_bytes(u32::MAX, usize::MAX), usize::MAX);
    let mut t = sluice();
    assert!(t.validate(1024).is_ok());
    assert!(t.validate(128 * 1024).is_err());
    t.fill_batch = 1;
    assert!(t.validate(MAX_BODY_BYTES - BATCH_MESSAGE_OVERHEAD).is_ok());
    assert!(t.validate(MAX_BODY_BYTES).is_err());
}

#[test]
fn rates_divide_by_the_seconds_and_no_time_is_no_rate() {
    assert!((per_second(1000.0, 2.0) - 500.0).abs() < 1e-9);
    assert_eq!(per_second(1000.0, 0.0), 0.0);
}

#[test]
fn the_report_gives_messages_bytes_and_rates() -> Result<()> {
    let measured = Measured {
        messages: 2048,
        bytes: 2048 * 1024,
        elapsed: Duration::from_millis(500),
        first_message: Some(Duration::from_millis(20)),
        busy_answers: 0,
    };
    let report = DrainReport::new(&config(Target::Sluice(sluice())), Phase::Read, measured);
    assert_eq!(report.system, System::Sluice);
    assert_eq!(report.destination, "DrainTopic");
    assert_eq!(report.server, "127.0.0.1:9876");
    assert!((report.seconds - 0.5).abs() < 1e-9);
    assert!((report.msgs_per_sec - 4096.0).abs() < 1e-9);
    assert!((report.mib_per_sec - 4.0).abs() < 1e-9);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()?)?;
    assert_eq!(json["system"], "sluice");
    assert_eq!(json["phase"], "read");
    assert_eq!(json["messages"], 2048);
    assert_eq!(json["bytes"], 2048 * 1024);
    assert_eq!(json["seconds"], 0.5);
    assert_eq!(json["msgs_per_sec"], 4096.0);
    assert_eq!(json["first_message_seconds"], 0.02);
    let line = report.to_string();
    assert!(line.starts_with("sluice read DrainTopic"), "{line}");
    assert!(line.contains("4096 msgs/s"), "{line}");

    let nats = Target::Nats(NatsTarget {
        server: "127.0.0.1:4222".into(),
        stream: "DRAIN".into(),
        subject: "drain".into(),
        pull_batch: 1000,
    });
    let fill = Measured {
        first_message: None,
        elapsed: Duration::ZERO,
        ..measured
    };
    let report = DrainReport::new(&config(nats), Phase::Fill, fill);
    assert_eq!(report.destination, "DRAIN/drain");
    assert_eq!(report.msgs_per_sec, 0.0);
    let json: serde_json::Value = serde_json::from_str(&report.to_json()?)?;
    assert_eq!(json["system"], "nats");
    assert_eq!(json["phase"], "fill");
    assert!(json["first_message_seconds"].is_null());
    assert_eq!(json["busy_answers"], 0);
    let busy = DrainReport {
        busy_answers: 3,
        ..report
    };
    assert!(busy
        .to_string()
        .ends_with("(3 batches answered busy and sent again)"));
    Ok(())
}

#[test]
fn settings_out_of_range_are_refused() {
    assert!(config(Target::Sluice(sluice())).validate().is_ok());
    let mut c = config(Target::Sluice(sluice()));
    c.messages = 0;
    assert!(c.validate().is_err());
    let mut c = config(Target::Sluice(sluice()));
    c.body_bytes = MAX_BODY_BYTES + 1;
    assert!(c.validate().is_err());
    let mut c = config(Target::Sluice(sluice()));
    c.timeout = Duration::ZERO;
    assert!(c.validate().is_err());
    let mut t = sluice();
    t.namesrv = " ; ".into();
    assert!(config(Target::Sluice(t)).validate().is_err());
    let mut t = sluice();
    t.topic.clear();
    assert!(config(Target::Sluice(t)).validate().is_err());
}

#[test]
fn the_read_starts_at_the_first_offset_with_the_consumer_defaults() {
    let c = sluice().consumer_config("G");
    let defaults = ConsumerConfig::new("127.0.0.1:9876", "G");
    assert_eq!(c.consume_from_where, ConsumeFromWhere::FirstOffset);
    assert_eq!(
        c.subscription.get("DrainTopic").map(String::as_str),
        Some("*")
    );
    assert_eq!(c.pull_batch_size, defaults.pull_batch_size);
    assert_eq!(c.consume_thread_max, defaults.consume_thread_max);
    assert_eq!(
        c.consume_message_batch_max_size,
        defaults.consume_message_batch_max_size
    );
    assert!(c.validate().is_ok());
    assert!(fresh_group().starts_with(&format!("sluice-bench-drain-{}-", std::process::id())));
}

#[test]
fn a_busy_batch_waits_for_the_hint_within_bounds() {
    let busy = |retry_after_ms| ProducerError::Broker {
        addr: "h:1".into(),
        code: ResponseCode::SYSTEM_BUSY,
        remark: String::new(),
        retry_after_ms,
    };
    assert_eq!(busy_pause(&busy(Some(200))), Duration::from_millis(200));
    assert_eq!(busy_pause(&busy(Some(0))), Duration::from_millis(1));
    assert_eq!(busy_pause(&busy(Some(60_000))), BUSY_PAUSE_MAX);
    assert_eq!(busy_pause(&busy(None)), BUSY_PAUSE);
}

#[tokio::test]
async fn the_counter_stops_at_the_target_and_keeps_those_counts() {
    let counter = Counter::new(10);
    assert!(counter.measured().is_none());
    counter.add(4, 400);
    assert!(!counter.is_done());
    counter.add(7, 700);
    // Reached before anyone waited: the wait still ends at once.
    assert!(counter.wait_until(Instant::now()).await);
    counter.add(5, 500);
    let measured = counter.measured();
    assert_eq!(measured.map(|m| (m.messages, m.bytes)), Some((11, 1100)));
    assert!(measured.is_some_and(|m| m.first_message.is_some()));
    assert_eq!(counter.messages(), 16);
}

#[tokio::test]
async fn a_counter_short_of_its_target_says_how_many_came() {
    let counter = Counter::new(10);
    counter.add(3, 300);
    assert!(!counter.wait_until(Instant::now()).await);
    let c = config(Target::Sluice(sluice()));
    let e = counter.shortfall(&c, "topic T").to_string();
    assert!(e.contains("only 3 of 10 messages"), "{e}");
}
