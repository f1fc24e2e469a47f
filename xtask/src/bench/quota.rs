//! The quota phase of `cargo xtask bench overload`: a topic with a quota of
//! a quarter of capacity, offered twice its quota open loop (the accepted
//! rate against the quota), and sent to closed loop by one sender that
//! waits each `[QUOTA]` answer's `retryAfterMs` before sending again, as
//! Sluice's producer does (its rate against the quota, and how many sends
//! were refused again right after their wait: a hint shorter than the real
//! refill). The hints are compared with the time one token takes to refill
//! (the longest a hint should be, up to the whole-millisecond rounding).

use anyhow::Result;
use bench_report::Report;

use super::runner::{load, strings, Broker, Setup};

/// The quota, as a share of capacity: below it, so that the quota and not
/// the store sets the rate.
const QUOTA_SHARE: f64 = 0.25;

/// Runs the phase on a fresh broker and prints its figures.
pub(super) fn run(setup: &Setup, common: &[String], capacity: f64, secs: u64) -> Result<()> {
    let quota = (capacity * QUOTA_SHARE).round().max(1.0) as u64;
    let mut settings = common.to_vec();
    settings.push(format!(
        "topicQuotas=QuotaOpen={quota}/s;QuotaPaced={quota}/s"
    ));
    let broker = Broker::start(setup, "quota", &settings)?;
    let duration = secs.to_string();
    let (_, open) = load(
        setup,
        &broker,
        "quota-open",
        &strings(&[
            "--topic",
            "QuotaOpen",
            "--rate",
            &(2 * quota).to_string(),
            "--duration",
            &duration,
        ]),
    )?;
    let (_, paced) = load(
        setup,
        &broker,
        "quota-paced",
        &strings(&[
            "--topic",
            "QuotaPaced",
            "--in-flight",
            "1",
            "--honour-retry-after",
            "--duration",
            &duration,
        ]),
    )?;
    broker.stop();
    println!("\n{}", summary(quota, &open, &paced));
    Ok(())
}

/// The phase's figures as printed.
fn summary(quota: u64, open: &Report, paced: &Report) -> String {
    // One token refills in 1/quota s; the hint is the wait for the next
    // whole token, in whole milliseconds rounded up, so at most this.
    let refill_ms = 1000.0 / quota as f64;
    let hint = paced.retry_after_ms.map_or_else(
        || "-".to_owned(),
        |h| {
            format!(
                "hints p50 {} ms, max {} ms against {refill_ms:.2} ms for one token to refill, \
                 max/refill {:.2}",
                h.p50,
                h.max,
                h.max as f64 / refill_ms
            )
        },
    );
    format!(
        "quota {quota}/s on a topic (a quarter of capacity), {} s each:\n\
         - offered {}/s open loop: accepted {:.1}/s = {:.3} of the quota, {} refused\n\
         - one sender waiting each hint: {:.1}/s = {:.3} of the quota, {} hinted waits \
         ({hint}); {} refused again right after their wait, {} other failures",
        open.duration_s,
        2 * quota,
        open.ok_per_sec,
        open.ok_per_sec / quota as f64,
        open.failed_total,
        paced.ok_per_sec,
        paced.ok_per_sec / quota as f64,
        paced.hint_waits,
        paced.refused_after_hint,
        paced.failed_total.saturating_sub(paced.hint_waits),
    )
}
