//! Waiting, without blocking, for the exit status of an adopted process that has exited,
//! and for the end of one that nothing announces.
//!
//! A process taken back after a restart is not our child: its real parent (init, or a
//! subreaper) reaps it, and only then does the kernel publish its status for pidfds
//! (`PIDFD_INFO_EXIT`, see `sys::pidfd_ext`). Its pidfd becomes readable at the exit,
//! which may be a moment before that reap. So the driver asks again on a timer that starts
//! at [`FIRST_LOOK`] and doubles up to [`MAX_LOOK`], and gives up after [`GIVE_UP`] (a
//! parent that never reaps): the generation is then reported `lost`, as on a kernel that
//! keeps no status at all. Only generations waiting here are ever looked at again.
//!
//! Without a pidfd (the fallback reaper) nothing announces an adopted process's end at
//! all: it is not our child, so no SIGCHLD comes. Its identity is read again
//! ([`Rechecks`]) on a timer that starts at [`FIRST_RECHECK`] and doubles up to
//! [`MAX_RECHECK`] for as long as it is tracked, from the first look again after each
//! signal sent to it, and at once when a signal found it gone. Each look reads one small
//! `/proc` file: it never blocks the loop, and never comes more often than the timer.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The first look again after the status was found missing.
pub const FIRST_LOOK: Duration = Duration::from_millis(5);
/// Longest time between looks.
pub const MAX_LOOK: Duration = Duration::from_millis(500);
/// How long after the exit was seen the status may take before the generation is lost.
pub const GIVE_UP: Duration = Duration::from_secs(5);

/// The first look again at an adopted process without a pidfd, after its adoption or a
/// signal sent to it.
pub const FIRST_RECHECK: Duration = Duration::from_millis(10);
/// Longest time between looks at an adopted process without a pidfd: how late its end may
/// be seen when nothing was sent to it.
pub const MAX_RECHECK: Duration = Duration::from_secs(1);

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

/// When to look again at an adopted process without a pidfd.
#[derive(Debug, Clone, Copy)]
struct Look {
    next: Instant,
    delay: Duration,
}

/// The adopted generations whose end nothing announces (no pidfd): each is looked at
/// again on its own backed-off timer until it is forgotten.
#[derive(Debug, Default)]
pub struct Rechecks {
    looks: HashMap<u64, Look>,
}

impl Rechecks {
    /// Looks at `gen` again from [`FIRST_RECHECK`] after `now` (it was just adopted, or a
    /// signal may end it), then less and less often.
    pub fn watch(&mut self, gen: u64, now: Instant) {
        let look = Look {
            next: now + FIRST_RECHECK,
            delay: FIRST_RECHECK,
        };
        self.looks.insert(gen, look);
    }

    /// Looks at `gen` at once (a signal found it gone), if it is watched.
    pub fn now(&mut self, gen: u64, now: Instant) {
        if let Some(look) = self.looks.get_mut(&gen) {
            look.next = now;
            look.delay = FIRST_RECHECK;
        }
    }

    /// `gen` was looked at, at `now`, and is still there (or cannot be told): the next
    /// look comes after twice the last wait, at most [`MAX_RECHECK`].
    pub fn looked(&mut self, gen: u64, now: Instant) {
        if let Some(look) = self.looks.get_mut(&gen) {
            if look.next <= now {
                look.delay = (look.delay * 2).min(MAX_RECHECK);
            }
            look.next = now + look.delay;
        }
    }

    /// Whether `gen` is watched.
    pub fn is_watched(&self, gen: u64) -> bool {
        self.looks.contains_key(&gen)
    }

    /// Stops looking at `gen` (it ended, or it is released).
    pub fn forget(&mut self, gen: u64) {
        if self.looks.remove(&gen).is_some() && self.looks.is_empty() {
            self.looks.shrink_to_fit();
        }
    }

    /// The soonest look due; `None` when nothing is watched.
    pub fn deadline(&self) -> Option<Instant> {
        self.looks.values().map(|l| l.next).min()
    }

    /// The generations whose look is due at `now`, in order.
    pub fn due(&self, now: Instant) -> Vec<u64> {
        if self.looks.is_empty() {
            return Vec::new();
        }
        let mut due: Vec<u64> = self
            .looks
            .iter()
            .filter(|(_, l)| l.next <= now)
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

    #[test]
    fn rechecks_back_off_to_a_cap_and_never_stop_while_watched() {
        let start = Instant::now();
        let mut r = Rechecks::default();
        assert_eq!(r.deadline(), None);
        r.looked(1, start); // not watched: nothing
        r.now(1, start);
        assert_eq!(r.deadline(), None);
        r.watch(1, start);
        assert!(r.is_watched(1));
        assert_eq!(r.deadline(), Some(start + FIRST_RECHECK));
        assert!(r.due(start).is_empty());
        let mut now = start;
        let mut last = Duration::ZERO;
        for _ in 0..100 {
            now = r.deadline().unwrap();
            assert_eq!(r.due(now), vec![1]);
            r.looked(1, now);
            let wait = r.deadline().unwrap() - now;
            assert!(wait >= last && wait <= MAX_RECHECK && !wait.is_zero());
            last = wait;
        }
        assert_eq!(last, MAX_RECHECK);
        // A look before it was due (a SIGCHLD, say) does not hasten the back-off.
        r.looked(1, now + Duration::from_millis(1));
        assert_eq!(
            r.deadline(),
            Some(now + Duration::from_millis(1) + MAX_RECHECK)
        );
        // A signal found it gone: looked at at once, and soon again if still there.
        r.now(1, now);
        assert_eq!(r.due(now), vec![1]);
        r.looked(1, now);
        assert_eq!(r.deadline(), Some(now + FIRST_RECHECK * 2));
        // A signal sent: from the first look again.
        r.watch(1, now);
        assert_eq!(r.deadline(), Some(now + FIRST_RECHECK));
        r.forget(1);
        r.forget(1);
        assert!(!r.is_watched(1));
        assert_eq!(r.deadline(), None);
        assert!(r.due(now + MAX_RECHECK).is_empty());
    }
}
