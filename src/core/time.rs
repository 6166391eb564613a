//! Time as an input: the core never reads a clock, the caller passes `now`.

use std::time::Duration;

/// A point in time, in milliseconds since an arbitrary epoch chosen by the caller.
///
/// The core only compares and adds; it never asks what the epoch is. The caller must pass
/// a monotonic clock (e.g. `CLOCK_MONOTONIC`), so that wall-clock jumps cannot fire or
/// starve deadlines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Time(u64);

impl Time {
    /// The epoch itself.
    pub const ZERO: Time = Time(0);

    /// A time `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Time {
        Time(ms)
    }

    /// Milliseconds since the epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// `self + d`, saturating: a huge grace period means "never", not an overflow. A
    /// fraction of a millisecond rounds up, so a grace of 900 µs is not "no grace".
    pub fn saturating_add(self, d: Duration) -> Time {
        let whole = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let ms = whole.saturating_add(u64::from(d.subsec_nanos() % 1_000_000 != 0));
        Time(self.0.saturating_add(ms))
    }

    /// The time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Time) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}
