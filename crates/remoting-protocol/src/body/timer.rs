//! The body of `GET_TIMER_CHECK_POINT` (60): the timer wheel's progress, in
//! the binary layout of RocketMQ's `timercheck` file, which a slave copies
//! from its master so that, elected master, it does not deliver again the
//! timer messages its master delivered.

use super::DataVersion;

/// A timer wheel's checkpoint: seven big-endian `i64`s (56 bytes), the last
/// three of them (the data version) absent in older writers' 32-byte form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TimerCheckpoint {
    /// Timers due at or before this instant (ms since the epoch) were
    /// delivered (`lastReadTimeMs`).
    pub last_read_time_ms: i64,
    /// How far the timer log was flushed (`lastTimerLogFlushPos`); Sluice's
    /// wheel keeps no timer log and sends 0.
    pub last_timer_log_flush_pos: i64,
    /// The timer queue offset a rebuilt wheel reads from
    /// (`lastTimerQueueOffset`): no entry below it is still pending.
    pub last_timer_queue_offset: i64,
    /// The timer queue offset the master had read up to
    /// (`masterTimerQueueOffset`).
    pub master_timer_queue_offset: i64,
    /// The checkpoint's version stamp.
    pub data_version: DataVersion,
}

/// Bytes of the full layout.
const FULL: usize = 56;
/// Bytes of the layout without the data version.
const SHORT: usize = 32;

impl TimerCheckpoint {
    /// The 56-byte body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FULL);
        for value in [
            self.last_read_time_ms,
            self.last_timer_log_flush_pos,
            self.last_timer_queue_offset,
            self.master_timer_queue_offset,
            self.data_version.state_version,
            self.data_version.timestamp,
            self.data_version.counter,
        ] {
            out.extend_from_slice(&value.to_be_bytes());
        }
        out
    }

    /// Reads a body of 56 bytes, or of 32 (no data version).
    ///
    /// # Errors
    /// The body has another length; the error names it.
    pub fn decode(body: &[u8]) -> Result<Self, String> {
        if body.len() != FULL && body.len() != SHORT {
            return Err(format!(
                "a timer checkpoint is {FULL} bytes (or {SHORT} without its data version), not {}",
                body.len()
            ));
        }
        let mut values = body.chunks_exact(8).map(|c| {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            i64::from_be_bytes(b)
        });
        let mut next = || values.next().unwrap_or(0);
        Ok(Self {
            last_read_time_ms: next(),
            last_timer_log_flush_pos: next(),
            last_timer_queue_offset: next(),
            master_timer_queue_offset: next(),
            data_version: DataVersion {
                state_version: next(),
                timestamp: next(),
                counter: next(),
            },
        })
    }
}
