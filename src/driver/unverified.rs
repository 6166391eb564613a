//! Generations taken back after a restart whose identity could not be verified
//! (`unverifiable`: no token was recorded, or it could not be read or compared): the
//! driver holds no process for them, so nothing is ever sent to their pid. Each is checked
//! again on its own backed-off timer — [`FIRST_CHECK`] after it was taken back, doubling
//! up to [`MAX_CHECK`] — until a check says `match` (it becomes an adopted child like any
//! other) or `mismatch` (it is reported lost and its descriptor goes). Only generations
//! kept here are ever looked at again; none costs anything between its checks.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::upgrade::state::KeptImage;

/// The first check again after a generation was kept unverified.
pub const FIRST_CHECK: Duration = Duration::from_secs(1);
/// Longest time between checks: how late a process that became verifiable (or went) is
/// seen.
pub const MAX_CHECK: Duration = Duration::from_secs(60);

/// One unverified generation: what its descriptor recorded, and when to check it again.
#[derive(Debug, Clone)]
pub struct Kept {
    /// Its session, for the log.
    pub session: Arc<str>,
    /// The recorded pid.
    pub pid: u32,
    /// The recorded identity token (empty when none was recorded).
    pub token: String,
    next: Instant,
    delay: Duration,
}

/// The unverified generations, each with its next check.
#[derive(Debug, Default)]
pub struct Unverified {
    kept: HashMap<u64, Kept>,
}

impl Unverified {
    /// Every generation kept, for an upgrade image (checked again soon after it).
    pub fn export(&self) -> Vec<KeptImage> {
        let mut kept: Vec<KeptImage> = self
            .kept
            .iter()
            .map(|(&gen, k)| KeptImage {
                gen,
                session: k.session.to_string(),
                pid: k.pid,
                token: k.token.clone(),
            })
            .collect();
        kept.sort_by_key(|k| k.gen);
        kept
    }

    /// Keeps `gen` (its process recorded as `pid` with `token`), first checked again
    /// [`FIRST_CHECK`] after `now`.
    pub fn keep(&mut self, gen: u64, session: Arc<str>, pid: u32, token: String, now: Instant) {
        let kept = Kept {
            session,
            pid,
            token,
            next: now + FIRST_CHECK,
            delay: FIRST_CHECK,
        };
        self.kept.insert(gen, kept);
    }

    /// What `gen`'s descriptor recorded, if it is kept.
    pub fn get(&self, gen: u64) -> Option<&Kept> {
        self.kept.get(&gen)
    }

    /// `gen` was checked at `now` and still cannot be verified: the next check comes after
    /// twice the last wait, at most [`MAX_CHECK`].
    pub fn checked(&mut self, gen: u64, now: Instant) {
        if let Some(k) = self.kept.get_mut(&gen) {
            k.delay = (k.delay * 2).min(MAX_CHECK);
            k.next = now + k.delay;
        }
    }

    /// Stops checking `gen` (verified, mismatched, or no longer tracked).
    pub fn forget(&mut self, gen: u64) {
        if self.kept.remove(&gen).is_some() && self.kept.is_empty() {
            self.kept.shrink_to_fit();
        }
    }

    /// The soonest check due; `None` when nothing is kept (then nothing is ever checked).
    pub fn deadline(&self) -> Option<Instant> {
        self.kept.values().map(|k| k.next).min()
    }

    /// Up to `max` generations whose check is due at `now`, the longest overdue first.
    pub fn due(&self, now: Instant, max: usize) -> Vec<u64> {
        if self.kept.is_empty() {
            return Vec::new();
        }
        let mut due: Vec<(Instant, u64)> = self
            .kept
            .iter()
            .filter(|(_, k)| k.next <= now)
            .map(|(gen, k)| (k.next, *gen))
            .collect();
        due.sort_unstable();
        due.into_iter().take(max).map(|(_, gen)| gen).collect()
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checks_back_off_to_the_cap_and_stop_when_forgotten() {
        let start = Instant::now();
        let mut u = Unverified::default();
        assert_eq!(u.deadline(), None);
        assert!(u.due(start + MAX_CHECK * 10, 8).is_empty());
        u.keep(7, "a".into(), 42, String::new(), start);
        assert_eq!(u.get(7).map(|k| k.pid), Some(42));
        assert_eq!(u.deadline(), Some(start + FIRST_CHECK));
        assert!(u.due(start, 8).is_empty());
        assert_eq!(u.due(start + FIRST_CHECK, 8), vec![7]);
        let mut now = start + FIRST_CHECK;
        let mut last = FIRST_CHECK;
        for _ in 0..12 {
            u.checked(7, now);
            let next = u.deadline().unwrap();
            let wait = next - now;
            assert_eq!(wait, (last * 2).min(MAX_CHECK));
            assert!(u.due(next - Duration::from_millis(1), 8).is_empty());
            last = wait;
            now = next;
        }
        assert_eq!(last, MAX_CHECK);
        u.forget(7);
        assert_eq!(u.len(), 0);
        assert_eq!(u.deadline(), None);
    }

    #[test]
    fn due_is_bounded_and_oldest_first() {
        let start = Instant::now();
        let mut u = Unverified::default();
        for gen in [5, 3, 9] {
            u.keep(gen, "a".into(), 1, String::new(), start);
        }
        u.checked(5, start); // next at start + 2 s
        let later = start + Duration::from_secs(5);
        assert_eq!(u.due(later, 8), vec![3, 9, 5]);
        assert_eq!(u.due(later, 2), vec![3, 9]);
        assert_eq!(u.len(), 3);
    }
}
