//! Replacing a keeper lost while the daemon runs, as a supervisor replaces what it runs
//! (s6-fdholderd is itself supervised): without one, the next crash of the daemon loses
//! every session's I/O.
//!
//! Nothing here waits. A replacement is started ([`launch`]) when it is due; its link is
//! then watched by the loop (token [`Source::KeeperStart`]) until it says `Ready`
//! ([`KeeperRestarts::ready`]), at most [`READY_PATIENCE`] (a deadline the loop's timers
//! check, [`KeeperRestarts::tick`]). Its first, detaching process is reaped when it has
//! exited — on `SIGCHLD` or along the way ([`KeeperRestarts::reap`]).
//!
//! A keeper that cannot be started, is not ready in time, or dies again soon after it
//! was ([`STABLE`]) is a failure: the next attempt waits 1 s, doubling up to a minute
//! ([`backoff`]) — never a busy loop — and each failure is logged once.
//!
//! [`launch`]: super::keeper_launch::launch
//! [`READY_PATIENCE`]: super::keeper_launch::READY_PATIENCE

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::keeper_launch::{launch, reap_detached, Launch, READY_PATIENCE};
use super::keeper_link::KeeperLink;
use super::token::Source;

/// The first wait after a failure; doubled after each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// A keeper that held for this long before it was lost did its job: its replacement is
/// started at once, the failures forgotten. One lost sooner counts as a failure.
const STABLE: Duration = Duration::from_secs(60);

/// How long to wait before the next attempt after `failures` failures in a row.
pub fn backoff(failures: u32) -> Duration {
    match failures {
        0 => Duration::ZERO,
        n => FIRST_BACKOFF
            .saturating_mul(1u32 << (n - 1).min(16))
            .min(MAX_BACKOFF),
    }
}

/// Where the replacement stands.
#[derive(Debug)]
enum State {
    /// A keeper serves (or none is wanted).
    Idle,
    /// The next attempt starts at this instant.
    Due(Instant),
    /// Started; waiting for its `Ready` until the deadline.
    Starting { launch: Launch, deadline: Instant },
}

/// The replacement of a lost keeper: when to try, what is being started, and the first
/// processes still to be reaped.
#[derive(Debug)]
pub struct KeeperRestarts {
    state: State,
    /// Failures in a row (see [`backoff`]).
    failures: u32,
    /// When the keeper serving now was started by this, if it was (the one the daemon
    /// found or started at its own start is taken as stable).
    since: Option<Instant>,
    /// First processes of keepers that detached, not yet seen to exit.
    detaching: Vec<Child>,
}

impl Default for KeeperRestarts {
    fn default() -> Self {
        KeeperRestarts {
            state: State::Idle,
            failures: 0,
            since: None,
            detaching: Vec::new(),
        }
    }
}

impl KeeperRestarts {
    /// The keeper's link was lost at `now`: a replacement is due, at once unless that
    /// keeper was itself a replacement lost soon after it was ready. Returns the wait,
    /// for the caller's one line about the loss.
    pub fn lost(&mut self, now: Instant) -> Duration {
        if self
            .since
            .take()
            .is_some_and(|since| now.saturating_duration_since(since) < STABLE)
        {
            self.failures = self.failures.saturating_add(1);
        } else {
            self.failures = 0;
        }
        self.schedule(now)
    }

    /// No keeper could be had at the daemon's start (logged by the start): one is tried
    /// again after a while.
    pub fn none_at_start(&mut self, now: Instant) {
        self.failures = 1;
        self.schedule(now);
    }

    /// After an upgrade that carried no keeper link (none served, or one was being
    /// started): a keeper is started at once.
    pub fn none_after_upgrade(&mut self, now: Instant) {
        self.schedule(now);
    }

    fn schedule(&mut self, now: Instant) -> Duration {
        let wait = backoff(self.failures);
        self.state = State::Due(now + wait);
        wait
    }

    /// When the loop must call [`KeeperRestarts::tick`] next.
    pub fn deadline(&self) -> Option<Instant> {
        match &self.state {
            State::Idle => None,
            State::Due(at) => Some(*at),
            State::Starting { deadline, .. } => Some(*deadline),
        }
    }

    /// Starts the attempt that is due, or gives up the one not ready in time (and
    /// schedules the next). Never waits.
    pub fn tick(&mut self, registry: &Registry, state_dir: &Path, hold: Duration, now: Instant) {
        match &self.state {
            State::Due(at) if *at <= now => self.start(registry, state_dir, hold, now),
            State::Starting { deadline, .. } if *deadline <= now => {
                let why = io::Error::other(format!(
                    "it was not ready within {} s",
                    READY_PATIENCE.as_secs()
                ));
                self.fail(registry, &why, now);
            }
            _ => {}
        }
    }

    fn start(&mut self, registry: &Registry, state_dir: &Path, hold: Duration, now: Instant) {
        let started = launch(state_dir, hold).and_then(|launch| {
            let raw = launch.link_fd().as_raw_fd();
            let registered = match Source::KeeperStart.token() {
                Some(token) => registry.register(&mut SourceFd(&raw), token, Interest::READABLE),
                None => Err(io::Error::other("no poll token for it")),
            };
            match registered {
                Ok(()) => Ok(launch),
                Err(e) => {
                    self.detaching.extend(launch.abandon());
                    Err(e)
                }
            }
        });
        match started {
            Ok(launch) => {
                self.state = State::Starting {
                    launch,
                    deadline: now + READY_PATIENCE,
                }
            }
            Err(e) => {
                self.state = State::Idle;
                self.failed(&e, now);
            }
        }
    }

    /// The keeper being started said something (or closed its link): its link, once it
    /// is `Ready` — registered with the loop, ready for the caller to hand it what it is
    /// to hold — else `None` (not yet, or a failure, logged and retried later).
    pub fn ready(&mut self, registry: &Registry, now: Instant) -> Option<(KeeperLink, u64)> {
        let State::Starting { launch, .. } = &mut self.state else {
            return None;
        };
        let ready = launch.reap_first().and_then(|()| launch.try_ready());
        let pid = match ready {
            Ok(None) => return None,
            Ok(Some(pid)) => pid,
            Err(e) => {
                self.fail(registry, &e, now);
                return None;
            }
        };
        let State::Starting { launch, .. } = std::mem::replace(&mut self.state, State::Idle) else {
            return None;
        };
        let _ = registry.deregister(&mut SourceFd(&launch.link_fd().as_raw_fd()));
        let linked = launch.into_link().and_then(|(mut link, first)| {
            self.detaching.extend(first);
            link.register(registry).map(|()| link)
        });
        match linked {
            Ok(link) => {
                self.since = Some(now);
                Some((link, pid))
            }
            Err(e) => {
                self.failed(&e, now);
                None
            }
        }
    }

    /// Gives up the keeper being started, counting a failure.
    fn fail(&mut self, registry: &Registry, e: &io::Error, now: Instant) {
        self.cancel(registry);
        self.failed(e, now);
    }

    /// One line per failure, with when the next attempt is.
    fn failed(&mut self, e: &io::Error, now: Instant) {
        self.failures = self.failures.saturating_add(1);
        let wait = self.schedule(now);
        log::error!(
            "keeper could not be started ({e}); trying again in {} s — until then a crash loses the sessions' I/O",
            wait.as_secs()
        );
    }

    /// Stops trying: the keeper being started, if any, is let go of (told `Bye`, never
    /// waited for). For a shutdown, an upgrade, or a failure.
    pub fn cancel(&mut self, registry: &Registry) {
        if let State::Starting { launch, .. } = std::mem::replace(&mut self.state, State::Idle) {
            let _ = registry.deregister(&mut SourceFd(&launch.link_fd().as_raw_fd()));
            self.detaching.extend(launch.abandon());
        }
    }

    /// Reaps the first processes that have exited (on `SIGCHLD`), the one of the keeper
    /// being started included; never waits. A failed one is a failed start.
    pub fn reap(&mut self, registry: &Registry, now: Instant) {
        self.detaching.retain_mut(|first| !reap_detached(first));
        if let State::Starting { launch, .. } = &mut self.state {
            if let Err(e) = launch.reap_first() {
                self.fail(registry, &e, now);
            }
        }
    }

    /// Waits for the first processes still to be reaped: before the daemon executes
    /// another program (an upgrade), which would not know them. Each exits right after
    /// its `fork`, so this is short.
    pub fn reap_before_exec(&mut self) {
        for mut first in self.detaching.drain(..) {
            if first.wait().is_ok() {
                crate::sys::reaped::note(first.id() as i32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_a_second_up_to_a_minute() {
        let waits: Vec<u64> = (0..9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(waits, [0, 1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn a_replacement_lost_soon_waits_and_one_that_held_long_does_not() {
        let mut r = KeeperRestarts::default();
        let t0 = Instant::now();
        // The keeper of the daemon's start: replaced at once.
        r.lost(t0);
        assert_eq!(r.deadline(), Some(t0));
        // A replacement lost soon after it was ready: a failure, the next one waits.
        r.state = State::Idle;
        r.since = Some(t0);
        r.lost(t0 + Duration::from_secs(1));
        assert_eq!(r.deadline(), Some(t0 + Duration::from_secs(2)));
        r.state = State::Idle;
        r.since = Some(t0);
        r.lost(t0 + Duration::from_secs(2));
        assert_eq!(r.deadline(), Some(t0 + Duration::from_secs(4)));
        // One that held for long: at once again, the failures forgotten.
        r.state = State::Idle;
        r.since = Some(t0);
        let later = t0 + STABLE;
        r.lost(later);
        assert_eq!(r.deadline(), Some(later));
        assert_eq!(r.failures, 0);
    }
}
