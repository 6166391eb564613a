//! What failed for want of descriptors (or kernel memory) and must not be dropped: a
//! signal to a generation's tree, a released generation's cgroup to remove. Each is tried
//! again on a short timer ([`RETRY_DELAY`]) until it goes through — never in a loop that
//! holds the turn, and logged once when it is put off, not at every try.
//!
//! Without this, a `stop` met by a descriptor shortage (the soft `RLIMIT_NOFILE` lowered
//! below what the daemon holds) lost its tree's `SIGTERM` and `SIGKILL` for good: the
//! members ran on, unsupervised, in a cgroup nobody removed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::sys::cgroup::GenCgroup;

/// How long after a failed try the next one comes.
pub const RETRY_DELAY: Duration = Duration::from_millis(100);

/// Most signals kept per generation (in order; the oldest go first beyond it).
const MAX_KEPT: usize = 16;

/// The steps put off for a shortage, and when they are next tried.
#[derive(Debug, Default)]
pub struct Retries {
    /// Tree signals not sent yet, per generation, in the order asked.
    signals: BTreeMap<u64, Vec<i32>>,
    /// Cgroups of released generations whose removal failed.
    cgroups: Vec<(u64, GenCgroup)>,
    /// When the next try is due; `None` with nothing put off.
    due: Option<Instant>,
    /// A sweep for orphans failed for a shortage and was logged: not logged again until
    /// one succeeds.
    orphans_logged: bool,
    /// A session walk failed for a shortage and was logged: likewise.
    walks_logged: bool,
}

/// What is due for another try.
#[derive(Debug, Default)]
pub struct Due {
    pub signals: Vec<(u64, Vec<i32>)>,
    pub cgroups: Vec<(u64, GenCgroup)>,
}

impl Retries {
    /// Whether signals to `gen`'s tree are waiting: a later one goes behind them, in order.
    pub fn has_signals(&self, gen: u64) -> bool {
        self.signals.contains_key(&gen)
    }

    /// Puts off `signal` to `gen`'s tree. A `SIGKILL` makes those before it moot, and
    /// nothing after it matters.
    pub fn defer_signal(&mut self, gen: u64, signal: i32, now: Instant) {
        let kept = self.signals.entry(gen).or_default();
        if kept.contains(&libc::SIGKILL) {
            return;
        }
        if signal == libc::SIGKILL {
            kept.clear();
        }
        if kept.last() != Some(&signal) {
            if kept.len() == MAX_KEPT {
                kept.remove(0);
            }
            kept.push(signal);
        }
        self.schedule(now);
    }

    /// Forgets the signals put off for `gen` (released, or killed since).
    pub fn forget_signals(&mut self, gen: u64) {
        self.signals.remove(&gen);
    }

    /// Puts off the removal of `gen`'s cgroup.
    pub fn defer_removal(&mut self, gen: u64, cg: GenCgroup, now: Instant) {
        self.cgroups.push((gen, cg));
        self.schedule(now);
    }

    fn schedule(&mut self, now: Instant) {
        if self.due.is_none() {
            self.due = Some(now + RETRY_DELAY);
        }
    }

    /// When the next try is due.
    pub fn deadline(&self) -> Option<Instant> {
        self.due
    }

    /// Everything put off, if its try is due at `now`: what fails again is put off anew.
    pub fn take_due(&mut self, now: Instant) -> Option<Due> {
        if self.due.is_none_or(|at| at > now) {
            return None;
        }
        self.due = None;
        Some(Due {
            signals: std::mem::take(&mut self.signals).into_iter().collect(),
            cgroups: std::mem::take(&mut self.cgroups),
        })
    }

    /// A sweep for orphans failed for a shortage: whether to log it (the first time).
    pub fn orphans_failed(&mut self) -> bool {
        !std::mem::replace(&mut self.orphans_logged, true)
    }

    /// A sweep for orphans went through: whether one had failed (and was logged).
    pub fn orphans_ok(&mut self) -> bool {
        std::mem::take(&mut self.orphans_logged)
    }

    /// A session walk failed for a shortage: whether to log it (the first time).
    pub fn walk_failed(&mut self) -> bool {
        !std::mem::replace(&mut self.walks_logged, true)
    }

    /// A session walk went through: whether one had failed (and was logged).
    pub fn walk_ok(&mut self) -> bool {
        std::mem::take(&mut self.walks_logged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kill_supersedes_what_was_put_off_before_it_and_nothing_follows_it() {
        let now = Instant::now();
        let mut r = Retries::default();
        r.defer_signal(1, libc::SIGTERM, now);
        r.defer_signal(1, libc::SIGTERM, now);
        r.defer_signal(1, libc::SIGCONT, now);
        r.defer_signal(2, libc::SIGTERM, now);
        r.defer_signal(2, libc::SIGKILL, now);
        r.defer_signal(2, libc::SIGTERM, now);
        assert!(r.take_due(now).is_none(), "tried again at once");
        let due = r.take_due(now + RETRY_DELAY).unwrap();
        assert_eq!(
            due.signals,
            vec![
                (1, vec![libc::SIGTERM, libc::SIGCONT]),
                (2, vec![libc::SIGKILL])
            ]
        );
        assert!(r.deadline().is_none());
        assert!(!r.has_signals(1));
    }

    #[test]
    fn a_lasting_shortage_is_logged_once() {
        let mut r = Retries::default();
        assert!(r.orphans_failed());
        assert!(!r.orphans_failed());
        assert!(r.orphans_ok());
        assert!(!r.orphans_ok());
        assert!(r.orphans_failed());
    }
}
