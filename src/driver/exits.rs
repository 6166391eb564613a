//! Waiting, without blocking, for the exit status of an adopted process that has exited.
//!
//! A process taken back after a restart is not our child: its real parent (init, or a
//! subreaper) reaps it, and only then does the kernel publish its status for pidfds
//! (`PIDFD_INFO_EXIT`, see `sys::pidfd_ext`). Its pidfd becomes readable at the exit,
//! which may be a moment before that reap. So the driver asks again on a timer that starts
//! at [`FIRST_LOOK`] and doubles up to [`MAX_LOOK`], and gives up after [`GIVE_UP`] (a
//! parent that never reaps): the generation is then reported `lost`, as on a kernel that
//! keeps no status at all. Only generations waiting here are ever looked at again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The first look again after the status was found missing.
pub const FIRST_LOOK: Duration = Duration::from_millis(5);
/// Longest time between looks.
pub const MAX_LOOK: Duration = Duration::from_millis(500);
/// How long after the exit was seen the status may take before the generation is lost.
pub const GIVE_UP: Duration = Duration::from_secs(5);

/// One generation waiting for its status.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    next: Instant,
    delay: Duration,
    give_up: Instant,
}

/// The adopted generations whose leader exited and whose status is not published yet.
#[derive(Debug, Default)]
pub struct PendingExits {
    waiting: HashMap<u64, Waiting>,
}

impl PendingExits {
    /// `gen`'s status was not there at `now`: whether to look again (at
    /// [`deadline`](Self::deadline)); `false` once [`GIVE_UP`] has passed since the first
    /// miss, and `gen` is then forgotten.
    pub fn missed(&mut self, gen: u64, now: Instant) -> bool {
        let Some(w) = self.waiting.get_mut(&gen) else {
            let first = Waiting {
                next: now + FIRST_LOOK,
                delay: FIRST_LOOK,
                give_up: now + GIVE_UP,
            };
            self.waiting.insert(gen, first);
            return true;
        };
        if now >= w.give_up {
            self.forget(gen);
            return false;
        }
        w.delay = (w.delay * 2).min(MAX_LOOK);
        w.next = (now + w.delay).min(w.give_up);
        true
    }

    /// Whether `gen` is waiting for its status (its exit was seen already).
    pub fn is_waiting(&self, gen: u64) -> bool {
        self.waiting.contains_key(&gen)
    }

    /// Stops waiting for `gen` (its status came, it was lost, or it is released).
    pub fn forget(&mut self, gen: u64) {
        if self.waiting.remove(&gen).is_some() && self.waiting.is_empty() {
            self.waiting.shrink_to_fit();
        }
    }

    /// The soonest look due; `None` when nothing waits (then nothing is ever scanned).
    pub fn deadline(&self) -> Option<Instant> {
        self.waiting.values().map(|w| w.next).min()
    }

    /// The generations whose look is due at `now`.
    pub fn due(&self, now: Instant) -> Vec<u64> {
        if self.waiting.is_empty() {
            return Vec::new();
        }
        let mut due: Vec<u64> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.next <= now)
            .map(|(gen, _)| *gen)
            .collect();
        due.sort_unstable();
        due
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_back_off_then_give_up() {
        let start = Instant::now();
        let mut p = PendingExits::default();
        assert_eq!(p.deadline(), None);
        assert!(p.missed(3, start));
        assert!(p.is_waiting(3));
        assert_eq!(p.deadline(), Some(start + FIRST_LOOK));
        assert!(p.due(start).is_empty());
        assert_eq!(p.due(start + FIRST_LOOK), vec![3]);
        // Each miss doubles the wait, up to the cap, never past the give-up time.
        let mut now = start + FIRST_LOOK;
        let mut last = FIRST_LOOK;
        while now < start + GIVE_UP {
            assert!(p.missed(3, now));
            let next = p.deadline().unwrap();
            let wait = next - now;
            assert!(wait <= MAX_LOOK && (wait >= last || next == start + GIVE_UP));
            last = wait;
            now = next;
        }
        assert!(!p.missed(3, now), "still waiting after {GIVE_UP:?}");
        assert!(!p.is_waiting(3));
        assert_eq!(p.deadline(), None);
    }

    #[test]
    fn generations_wait_apart() {
        let start = Instant::now();
        let mut p = PendingExits::default();
        assert!(p.missed(1, start));
        assert!(p.missed(2, start + MAX_LOOK));
        assert_eq!(p.due(start + FIRST_LOOK), vec![1]);
        assert_eq!(p.due(start + MAX_LOOK + FIRST_LOOK), vec![1, 2]);
        p.forget(1);
        assert_eq!(p.due(start + MAX_LOOK + FIRST_LOOK), vec![2]);
        p.forget(2);
        p.forget(2);
        assert_eq!(p.deadline(), None);
    }
}
