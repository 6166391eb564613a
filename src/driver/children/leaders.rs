//! Whether a leader the core thinks is running has exited, asked without reaping it (its
//! unreaped zombie pins its group): from our child's pidfd or `waitid`, or, for a process
//! taken back after a restart, from the status the kernel keeps once its real parent
//! reaped it (see `exits.rs`).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use super::Children;
use crate::core::ExitStatus;
use crate::driver::child::Child;
use crate::driver::launch::Launch;
use crate::sys::pidfd_ext::ExitInfo;
use crate::sys::process::{Exit, Process};
use crate::sys::spare_fd::is_shortage;

/// How long after a `SIGCHLD` our children are looked through for orphans (see
/// [`Children::orphans_may_have_exited`]): a burst of exits is one look.
pub const ORPHAN_SWEEP_DELAY: std::time::Duration = std::time::Duration::from_millis(100);

/// What became of a leader the core still thinks is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Still running.
    Running,
    /// Exited (a zombie, not reaped) with this status; for an adopted process, reaped by
    /// its real parent, with the status the kernel kept.
    Exited(ExitStatus),
    /// An adopted process exited, and its status is not published yet (its real parent
    /// has not reaped it): asked again at [`Children::status_deadline`].
    Waiting,
    /// It can no longer be observed (`waitid` failed, or not our child and no status to
    /// be had): report it lost.
    Lost,
}

/// A status read from the process as the core's [`ExitStatus`]; an unreadable one is lost.
fn exited(gen: u64, exit: Exit) -> LeaderState {
    match exit {
        Exit::Code(c) => LeaderState::Exited(ExitStatus::Code(c)),
        Exit::Signal { signal, .. } => LeaderState::Exited(ExitStatus::Signal(signal)),
        Exit::Unknown => {
            // Never counted as a success.
            log::warn!("gen {gen}: exit status unknown; reporting the generation lost");
            LeaderState::Lost
        }
    }
}

/// The status of an exited process that is not our child, as the kernel keeps it once its
/// real parent reaped it.
fn published(gen: u64, process: &Process) -> LeaderState {
    match process.published_exit() {
        Ok(ExitInfo::Exited(exit)) => exited(gen, exit),
        Ok(ExitInfo::NotYet) => LeaderState::Waiting,
        Ok(ExitInfo::Unsupported) => {
            log::warn!("gen {gen}: exit status not kept by this system; reporting it lost");
            LeaderState::Lost
        }
        Err(e) => {
            log::warn!("gen {gen}: reading its exit status: {e}; reporting it lost");
            LeaderState::Lost
        }
    }
}

impl Children {
    /// Asks, without reaping, whether `gen`'s leader exited. Only for a leader the core
    /// still thinks is running: a pidfd stays readable after the exit.
    ///
    /// An adopted leader's status is asked of the kernel (see [`Process::published_exit`]);
    /// while it is not published the answer is [`LeaderState::Waiting`], until [`GIVE_UP`]
    /// after the exit was first seen, when it is [`LeaderState::Lost`].
    ///
    /// [`GIVE_UP`]: super::exits::GIVE_UP
    pub fn leader_state(&mut self, gen: u64, now: Instant) -> LeaderState {
        let Some(child) = self.table.get(&gen) else {
            return LeaderState::Running;
        };
        let state = match child.process().exit_status_nowait() {
            Ok(None) => LeaderState::Running,
            Ok(Some(Exit::Unknown)) if child.process().pidfd().is_none() => {
                log::info!(
                    "gen {gen}: no longer runs (its pid is free, another process's, or a zombie's); without a pidfd its status cannot be had: lost"
                );
                LeaderState::Lost
            }
            Ok(Some(Exit::Unknown)) => published(gen, child.process()),
            Ok(Some(exit)) => exited(gen, exit),
            Err(e) => {
                // ECHILD and friends: it can no longer be observed or reaped by us.
                log::error!("gen {gen}: waitid: {e}; reporting the generation lost");
                LeaderState::Lost
            }
        };
        if self.rechecks.is_watched(gen) {
            match state {
                LeaderState::Running => self.rechecks.looked(gen, now),
                _ => self.rechecks.forget(gen),
            }
        }
        match state {
            LeaderState::Waiting if !self.exits.missed(gen, now) => {
                log::warn!("gen {gen}: its parent did not reap it in time; reporting it lost");
                LeaderState::Lost
            }
            LeaderState::Waiting | LeaderState::Running => state,
            LeaderState::Exited(_) | LeaderState::Lost => {
                self.exits.forget(gen);
                state
            }
        }
    }

    /// Whether `gen`'s leader has begun to end, its exit perhaps not visible yet (see
    /// [`Process::is_exiting`]).
    pub fn leader_exiting(&self, gen: u64) -> bool {
        self.table
            .get(&gen)
            .is_some_and(|c| c.process().is_exiting())
    }

    /// Whether `gen`'s exit was seen and its status is awaited (see [`LeaderState::Waiting`]).
    pub fn awaits_status(&self, gen: u64) -> bool {
        self.exits.is_waiting(gen)
    }

    /// Stops waiting for `gen`'s status or end: the core no longer waits for its exit.
    pub fn forget_status(&mut self, gen: u64) {
        self.exits.forget(gen);
        self.rechecks.forget(gen);
    }

    /// When an adopted process is to be asked again for its status (it exited), or, one
    /// without a pidfd, whether it still runs; or our children looked through for orphans;
    /// or what a shortage put off tried again (see [`Children::retry_shortages`]).
    pub fn status_deadline(&self) -> Option<Instant> {
        [
            self.exits.deadline(),
            self.rechecks.deadline(),
            self.orphan_sweep,
            self.retries.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The generations to be asked again at `now` (see [`status_deadline`]).
    ///
    /// [`status_deadline`]: Self::status_deadline
    pub fn status_due(&self, now: Instant) -> Vec<u64> {
        let mut due = self.exits.due(now);
        due.extend(self.rechecks.due(now));
        due.sort_unstable();
        due.dedup();
        due
    }

    /// Generations whose exit is learned from SIGCHLD rather than a watched pidfd (not
    /// reaped yet).
    pub fn without_pidfd(&self) -> Vec<u64> {
        self.on_sigchld.iter().copied().collect()
    }

    /// A `SIGCHLD` came: our children are looked through for orphans to reap within
    /// [`ORPHAN_SWEEP_DELAY`], once however many more come meanwhile.
    ///
    /// The look costs time linear in our children (every running generation's leader is
    /// one); taken on every `SIGCHLD` it made each spawn's cost grow with the running
    /// sessions. An orphan is a zombie until then, holding nothing but its pid.
    pub fn orphans_may_have_exited(&mut self, now: Instant) {
        if self.adopts_orphans && self.orphan_sweep.is_none() {
            self.orphan_sweep = Some(now + ORPHAN_SWEEP_DELAY);
        }
    }

    /// Reaps orphaned descendants reparented to us, by pid, leaving our own leaders to
    /// their generations (never `waitpid(-1)`, which would steal them), if a look is due
    /// at `now`.
    ///
    /// With as many of our children listed as there are running generations, the tracked
    /// pids are gathered once, so a look costs time linear in the children, not their
    /// square.
    pub fn sweep_orphans(&mut self, now: Instant) {
        if self.orphan_sweep.is_none_or(|at| at > now) {
            return;
        }
        self.orphan_sweep = None;
        let mut pids = None;
        let (table, launching) = (&self.table, &self.launching);
        let tracked = |pid: i32| {
            let pids: &HashSet<i32> = pids.get_or_insert_with(|| tracked_pids(table, launching));
            pids.contains(&pid)
        };
        let result = crate::sys::orphans::reap_orphans(tracked, &mut self.own_children);
        if result.is_ok() && self.retries.orphans_ok() {
            log::info!("reaping orphans again");
        }
        match result {
            Ok(0) => {}
            Ok(n) => log::debug!("reaped {n} orphaned process(es)"),
            // Descriptors or memory short: looked again shortly, logged once.
            Err(e) if is_shortage(&e) => {
                if self.retries.orphans_failed() {
                    log::warn!("reaping orphans: {e}; tried again until it goes through");
                }
                self.orphan_sweep = Some(now + super::retries::RETRY_DELAY);
            }
            Err(e) => log::warn!("reaping orphans: {e}"),
        }
    }
}

/// The pids of every process we track: leaders of spawned generations and children still
/// starting. Those this program started are also in [`crate::sys::started`]; leaders a
/// previous program started before an `upgrade` are ours only through this table.
fn tracked_pids(table: &HashMap<u64, Child>, launching: &HashMap<u64, Launch>) -> HashSet<i32> {
    let table = table.values().map(|c| c.process().pid());
    let launching = launching.values().map(|l| l.pid());
    table.chain(launching).collect()
}
