//! `cargo xtask bench overload`: the broker's sustainable rate closed loop,
//! then twice that offered open loop under each admission setting (adaptive
//! admission, the default; early admission alone; both off, RocketMQ's
//! behaviour), each on a fresh broker; the table, `overload.json` and
//! `overload.png` come from `sluice-bench overload-report`.

use std::process::Command;

use anyhow::{bail, Context, Result};

use super::{
    quota,
    runner::{load, strings, Broker, Setup},
    two_topics, Bound, Options,
};

/// The send queue's wait limit the overload experiment uses, ms.
const WAIT_LIMIT_MS: u64 = 200;
/// Offered load of the overload experiment, as a multiple of capacity.
const OVERLOAD_FACTOR: f64 = 2.0;

/// The admission settings compared: label, file name, adaptive admission,
/// early admission.
const SETTINGS: [(&str, &str, bool, bool); 3] = [
    ("adaptive (default)", "adaptive", true, true),
    ("early admission only", "early", false, true),
    ("RocketMQ (both off)", "off", false, false),
];

/// Runs the experiment.
pub(super) fn run(setup: &Setup, options: &Options) -> Result<()> {
    let (capacity_secs, overload_secs) = if options.quick { (2, 3) } else { (8, 20) };
    let mut common = vec![format!("waitTimeMillsInSendQueue={WAIT_LIMIT_MS}")];
    let (bound_text, in_flight, connections) = match options.bound {
        Bound::Fault(ms) => {
            common.push(format!("faultPutLockDelayMills={ms}"));
            // The lock serializes appends: a second worker would only hold
            // one more request waiting at the lock, outside the queue.
            common.push("sendMessageThreadPoolNums=1".to_owned());
            (
                format!(
                    "faultPutLockDelayMills={ms}: every append sleeps {ms} ms holding the put lock \
                     (fault injection), so capacity is set by the lock, not by CPU; one send worker"
                ),
                // Enough to keep the lock busy, too few to wait past the limit.
                16,
                options.connections.unwrap_or(1),
            )
        }
        Bound::Cpu => (
            "CPU and disk (no fault injected); the load tool shares the CPUs".to_owned(),
            64,
            options.connections.unwrap_or(2),
        ),
    };
    let conns = connections.to_string();
    let mut capacity_file = None;
    let mut capacity = 0.0;
    let mut runs = Vec::new();
    for (label, name, adaptive, early) in SETTINGS {
        let mut settings = common.clone();
        settings.push(format!("adaptiveAdmissionEnable={adaptive}"));
        settings.push(format!("earlyAdmissionEnable={early}"));
        let broker = Broker::start(setup, &format!("broker-{name}"), &settings)?;
        if capacity_file.is_none() {
            let (file, report) = load(
                setup,
                &broker,
                "capacity",
                &strings(&[
                    "--in-flight",
                    &in_flight.to_string(),
                    "--connections",
                    &conns,
                    "--duration",
                    &capacity_secs.to_string(),
                ]),
            )?;
            capacity = report.ok_per_sec;
            if capacity <= 0.0 {
                bail!(
                    "the capacity run had no successful send; see {}",
                    file.display()
                );
            }
            eprintln!("bench: sustainable rate {capacity:.1} msgs/s ({bound_text})");
            capacity_file = Some(file);
        }
        let rate = (capacity * OVERLOAD_FACTOR).round();
        let (file, _) = load(
            setup,
            &broker,
            &format!("overload-{name}"),
            &strings(&[
                "--rate",
                &format!("{rate}"),
                "--connections",
                &conns,
                "--duration",
                &overload_secs.to_string(),
            ]),
        )?;
        broker.stop();
        runs.push(format!("{label}={}", file.display()));
    }
    let capacity_file = capacity_file.context("no capacity run")?;
    let mut report = Command::new(&setup.bench);
    report
        .arg("overload-report")
        .arg("--capacity")
        .arg(&capacity_file)
        .args(["--limit-ms", &WAIT_LIMIT_MS.to_string()])
        .args(["--bound", &bound_text])
        .arg("--out")
        .arg(&setup.out);
    for r in &runs {
        report.arg("--run").arg(r);
    }
    println!(
        "overload experiment: capacity measured closed loop, then {OVERLOAD_FACTOR}x offered open \
         loop for {overload_secs} s, 1 KiB messages, one fresh broker per setting{}",
        options.settings_note(";")
    );
    crate::run(report)?;
    quota::run(setup, &common, capacity, overload_secs)?;
    two_topics::run(
        setup,
        &two_topics::Phase {
            common: &common,
            capacity_file: &capacity_file,
            capacity,
            secs: overload_secs,
            connections,
            bound_text: &bound_text,
            limit_ms: WAIT_LIMIT_MS,
        },
    )
}
