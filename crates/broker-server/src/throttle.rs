//! Rate limits for warnings that could otherwise flood the log.

use std::sync::atomic::{AtomicU64, Ordering};

/// Whether a log line limited to one a second may be written now; `slot`
/// holds when (ms since the epoch) the last one was, and is claimed by the
/// caller that gets `true`.
pub(crate) fn once_a_second(slot: &AtomicU64) -> bool {
    let now = message_model::now_ms() as u64;
    let last = slot.load(Ordering::Relaxed);
    now.saturating_sub(last) >= 1000
        && slot
            .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
}
