//! The broker-wide figures of `GET_BROKER_RUNTIME_INFO`: the put and get
//! rates over the last 10 s, 1 min and 10 min from a snapshot taken every
//! second (`putTps`, `getFoundTps`, `getMissTps`, `getTotalTps`,
//! `getTransferredTps`), and the put and get totals at the last two local
//! midnights (`msgPutTotalTodayMorning`, `msgPutTotalYesterdayMorning`, ...).

use std::collections::VecDeque;

use remoting_protocol::body::java_double;

/// The windows of the rates, in seconds, in the order they are written.
pub const RATE_WINDOWS: [usize; 3] = [10, 60, 600];

/// The broker's counters at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Messages stored.
    pub put: u64,
    /// Reads that found messages.
    pub found: u64,
    /// Reads that found none.
    pub miss: u64,
    /// Messages read.
    pub transferred: u64,
}

/// One-second snapshots of [`Totals`], as many as the longest window needs.
#[derive(Debug, Default)]
pub struct RateSamples {
    ring: VecDeque<(i64, Totals)>,
}

impl RateSamples {
    /// Adds the snapshot of `at_ms`.
    pub fn sample(&mut self, at_ms: i64, totals: Totals) {
        self.ring.push_back((at_ms, totals));
        while self.ring.len() > RATE_WINDOWS[2] + 1 {
            self.ring.pop_front();
        }
    }

    /// The rate of one figure over each window, as RocketMQ writes it: three
    /// doubles separated by a space, a window not filled yet empty.
    pub fn rates(&self, figure: impl Fn(&Totals) -> u64) -> String {
        let mut out = String::new();
        for (n, window) in RATE_WINDOWS.into_iter().enumerate() {
            if n > 0 {
                out.push(' ');
            }
            let (Some(last), true) = (self.ring.back(), self.ring.len() > window) else {
                continue;
            };
            let first = &self.ring[self.ring.len() - (window + 1)];
            let elapsed = last.0 - first.0;
            let delta = figure(&last.1).saturating_sub(figure(&first.1));
            let tps = if elapsed > 0 {
                delta as f64 * 1000.0 / elapsed as f64
            } else {
                0.0
            };
            out.push_str(&java_double(tps));
        }
        out
    }
}

/// Put and get totals (system topics left out) at the last two midnights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Mornings {
    /// The local day (days since the epoch) the figures are of.
    pub day: i64,
    /// Messages put by this morning.
    pub put_today: u64,
    /// Messages got by this morning.
    pub get_today: u64,
    /// Messages put by yesterday morning.
    pub put_yesterday: u64,
    /// Messages got by yesterday morning.
    pub get_yesterday: u64,
}

impl Mornings {
    /// Moves the figures on when `day` is a new day: this morning's become
    /// yesterday's, and `put`, `get` this morning's.
    pub fn roll(&mut self, day: i64, put: u64, get: u64) {
        if day <= self.day {
            return;
        }
        self.put_yesterday = self.put_today;
        self.get_yesterday = self.get_today;
        self.put_today = put;
        self.get_today = get;
        self.day = day;
    }
}

/// The local day of `now_ms` (days since the epoch, in the zone that is
/// `offset_secs` ahead of UTC).
pub fn local_day(now_ms: i64, offset_secs: i64) -> i64 {
    (now_ms.div_euclid(1000) + offset_secs).div_euclid(86_400)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(n: u64) -> Totals {
        Totals {
            put: n,
            ..Totals::default()
        }
    }

    #[test]
    fn rates_fill_window_by_window() {
        let mut s = RateSamples::default();
        assert_eq!(s.rates(|t| t.put), "  ");
        for sec in 0..=10i64 {
            s.sample(sec * 1000, put(sec as u64 * 5));
        }
        assert_eq!(s.rates(|t| t.put), "5.0  ");
        for sec in 11..=700i64 {
            s.sample(
                sec * 1000,
                put(sec as u64 * 5 + if sec > 690 { 100 } else { 0 }),
            );
        }
        // The last 10 s held 100 more than the steady 5 a second.
        assert_eq!(
            s.rates(|t| t.put),
            "15.0 6.666666666666667 5.166666666666667"
        );
        assert_eq!(s.rates(|t| t.miss), "0.0 0.0 0.0");
        assert_eq!(s.ring.len(), 601);
    }

    #[test]
    fn mornings_roll_at_a_new_local_day() {
        let offset = 2 * 3600;
        let day = local_day(1_700_000_000_000, offset);
        let mut m = Mornings {
            day,
            ..Mornings::default()
        };
        m.roll(day, 10, 1);
        assert_eq!(m.put_today, 0, "same day");
        // 22:00 UTC is midnight two hours east.
        let utc_midnight = 1_700_000_000_000 - 1_700_000_000_000 % 86_400_000;
        let ten_pm = utc_midnight + 22 * 3_600_000;
        assert_eq!(local_day(ten_pm, offset), local_day(ten_pm - 1, offset) + 1);
        let next = local_day(1_700_000_000_000 + 86_400_000, offset);
        assert_eq!(next, day + 1);
        m.roll(next, 10, 1);
        m.roll(next + 1, 25, 4);
        assert_eq!(
            (m.put_yesterday, m.get_yesterday, m.put_today, m.get_today),
            (10, 1, 25, 4)
        );
        assert_eq!(local_day(-1, 0), -1);
    }
}
