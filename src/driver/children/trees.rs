//! A generation's process tree: signals to its leader, its whole tree (cgroup, adopted
//! process group, or session) or its terminal's foreground group — never to a process
//! whose identity was not verified — and whether the tree has emptied.

use std::io;
use std::time::Instant;

use mio::Registry;

use super::Children;
use crate::core::Scope;
use crate::driver::launch::Launch;
use crate::sys::process::SignalError;
use crate::sys::tree;

/// `Signal::from_named_raw` covers the named signals; real-time ones are valid too.
fn to_signal(sig: i32) -> Option<rustix::process::Signal> {
    if let Some(s) = rustix::process::Signal::from_named_raw(sig) {
        return Some(s);
    }
    if (libc::SIGRTMIN()..=libc::SIGRTMAX()).contains(&sig) {
        // SAFETY: `sig` is a real-time signal number in the range the C library reports as
        // usable by applications, so it is a valid signal and not one libc reserves.
        return Some(unsafe { rustix::process::Signal::from_raw_unchecked(sig) });
    }
    None
}

impl Children {
    /// Sends `signal` to `gen`'s leader, tree or terminal's foreground group, never to a
    /// process whose identity was not verified.
    pub fn signal(&mut self, registry: &Registry, gen: u64, signal: i32, scope: Scope) {
        if let Some(launch) = self.launching.get_mut(&gen) {
            launch.hold_signal(signal, scope);
            return;
        }
        let Some(sig) = to_signal(signal) else {
            log::warn!("gen {gen}: signal {signal} is not deliverable");
            return;
        };
        // Only a walk of a session or a foreground group needs them (a cgroup does not).
        let walks = match scope {
            Scope::Leader => false,
            Scope::Tree => self.table.get(&gen).is_some_and(|c| c.cgroup().is_none()),
            Scope::Foreground => true,
        };
        let others = if walks { self.others(gen) } else { Vec::new() };
        let Some(child) = self.table.get_mut(&gen) else {
            // No process held (released, or taken back unverified): a pid alone is never
            // signalled.
            log::debug!("gen {gen}: no process held; signal {signal} not sent");
            return;
        };
        let result = match (scope, child.cgroup()) {
            (Scope::Leader, _) => child.process().signal(sig),
            // The whole cgroup, escaped processes included: SIGKILL at once through
            // `cgroup.kill`, any other signal to each member through a verified pidfd.
            (Scope::Tree, Some(cg)) if signal == libc::SIGKILL => {
                cg.kill().map_err(SignalError::Os)
            }
            (Scope::Tree, Some(cg)) => cg.signal(sig).map(|_| ()).map_err(SignalError::Os),
            // Taken back after a restart: its process group, leader included, through its
            // pidfd while it runs (one call, no scan of the host; its session's other
            // groups, a job-control shell's jobs, are found by their marker when it ends).
            (Scope::Tree, None) if !child.process().is_child() => {
                child.process().signal_adopted_group(sig)
            }
            // The session: its members, watched until it is empty, and the leader.
            (Scope::Tree, None) => {
                self.watched.insert(gen);
                child.signal_session(registry, &others, sig).and_then(|()| {
                    match child.process().signal(sig) {
                        // Already exited (the usual case at its exit): its members matter.
                        Err(SignalError::Exited) => Ok(()),
                        other => other,
                    }
                })
            }
            (Scope::Foreground, _) => match child.pty() {
                Some(tty) => tree::signal_foreground(child.process(), tty, &others, sig).map(drop),
                None => Err(SignalError::Os(io::Error::from_raw_os_error(libc::ENOTTY))),
            },
        };
        match &result {
            Ok(()) => log::debug!("gen {gen}: sent signal {signal} to {scope:?}"),
            Err(e) => log::info!("gen {gen}: signal {signal} to {scope:?} not sent: {e}"),
        }
        // An adopted process without a pidfd: a signal may end it, so it is looked at
        // again soon; one that found another process (or none) on its pid, at once.
        if self.rechecks.is_watched(gen) {
            match result {
                Ok(()) => self.rechecks.watch(gen, Instant::now()),
                Err(SignalError::Mismatch | SignalError::Exited) => {
                    self.rechecks.now(gen, Instant::now())
                }
                Err(_) => {}
            }
        }
    }

    /// Under session containment: whether `gen`'s session is proven empty (its leader
    /// aside); `None` for a generation with a cgroup, or gone.
    pub fn session_empty(&mut self, registry: &Registry, gen: u64) -> Option<bool> {
        if self.table.get(&gen)?.cgroup().is_some() {
            return None;
        }
        let others = self.others(gen);
        let empty = self.table.get_mut(&gen)?.session_empty(registry, &others);
        self.watched.insert(gen);
        Some(empty)
    }

    /// The soonest a session watch wants to look again.
    pub fn watch_deadline(&self) -> Option<std::time::Instant> {
        self.watched
            .iter()
            .filter_map(|gen| self.table.get(gen)?.watch_deadline())
            .min()
    }

    /// Whether `gen`'s cgroup still holds a process; `None` without a cgroup. Reading it
    /// also re-arms the kernel's notification.
    pub fn cgroup_populated(&self, gen: u64) -> Option<bool> {
        let cg = self.table.get(&gen)?.cgroup()?;
        match cg.is_populated() {
            Ok(populated) => Some(populated),
            Err(e) => {
                log::warn!("gen {gen}: reading cgroup.events: {e}");
                Some(true)
            }
        }
    }

    /// The leaders of every other generation not reaped yet (and of those starting):
    /// a walk of one generation's session need not enter theirs.
    fn others(&self, gen: u64) -> Vec<i32> {
        let running = self
            .table
            .iter()
            .filter(|(g, c)| **g != gen && !c.process().is_reaped())
            .map(|(_, c)| c.process().pid());
        running
            .chain(self.launching.values().map(Launch::pid))
            .collect()
    }
}
