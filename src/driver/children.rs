//! The live children: one [`Child`] per spawned generation, and what the loop asks of
//! them — spawn, read, write, signal, observe an exit, reap, release.
//!
//! Every method takes the generation it is about and touches only that child; a
//! generation that is not here (never spawned, or already released) is ignored, so a
//! late readiness event or action can never reach another process.

use std::collections::HashMap;

use mio::Registry;

use super::child::{spawn_request, Child, InputProgress};
use crate::core::{ExitStatus, Scope, SpawnError, SpawnErrorKind, Spec, Stream};
use crate::sys::fd::{read_nonblocking, ReadOutcome};
use crate::sys::process::{Exit, ReaperMode};
use crate::sys::spawn::{spawn, SpawnError as SysSpawnError};

/// The result of one read from a child's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// This many bytes are at the front of the buffer.
    Data(usize),
    /// Nothing more for now.
    WouldBlock,
    /// The stream ended (or failed, which is treated the same); it is closed now.
    Eof,
    /// No such stream: already closed, or the generation is gone.
    Gone,
}

/// What became of a leader the core still thinks is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Still running.
    Running,
    /// Exited (a zombie, not reaped) with this status.
    Exited(ExitStatus),
    /// It can no longer be observed (`waitid` failed, or not our child): report it lost.
    Lost,
}

/// Every spawned, unreleased generation.
#[derive(Debug)]
pub struct Children {
    table: HashMap<u64, Child>,
    reaper: ReaperMode,
    /// Orphans are reparented to us (PID 1 or subreaper) and must be reaped.
    adopts_orphans: bool,
}

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
    /// No children; they will be watched per `reaper`.
    pub fn new(reaper: ReaperMode, adopts_orphans: bool) -> Children {
        Children {
            table: HashMap::new(),
            reaper,
            adopts_orphans,
        }
    }

    /// Starts generation `gen` and registers its descriptors; returns the leader's pid.
    pub fn spawn(&mut self, registry: &Registry, gen: u64, spec: &Spec) -> Result<u32, SpawnError> {
        let spawned = spawn(&spawn_request(spec, self.reaper)).map_err(|e| {
            log::warn!("gen {gen}: spawn failed: {e}");
            let (kind, errno) = match &e {
                SysSpawnError::NotFound { .. } => (SpawnErrorKind::NotFound, libc::ENOENT),
                SysSpawnError::PermissionDenied { .. } => {
                    (SpawnErrorKind::PermissionDenied, libc::EACCES)
                }
                SysSpawnError::Os { errno, .. } => (SpawnErrorKind::Other, *errno),
                SysSpawnError::Invalid(_) => (SpawnErrorKind::Other, libc::EINVAL),
            };
            SpawnError { kind, errno }
        })?;
        let pid = spawned.process.pid();
        self.table.insert(gen, Child::new(gen, spawned, registry));
        Ok(pid as u32)
    }

    /// Reads once from `gen`'s `stream` into `buf`. End of file (or a read error) closes
    /// the stream.
    pub fn read(&mut self, registry: &Registry, gen: u64, stream: Stream, buf: &mut [u8]) -> Read {
        let Some(child) = self.table.get_mut(&gen) else {
            return Read::Gone;
        };
        let Some(fd) = child.output(stream) else {
            return Read::Gone;
        };
        match read_nonblocking(fd, buf) {
            Ok(ReadOutcome::Data(n)) => Read::Data(n),
            Ok(ReadOutcome::WouldBlock) => Read::WouldBlock,
            Ok(ReadOutcome::Eof) => {
                child.close_output(registry, stream);
                Read::Eof
            }
            Err(e) => {
                log::warn!(
                    "gen {gen}: read {}: {e}; treating as end of file",
                    stream.as_str()
                );
                child.close_output(registry, stream);
                Read::Eof
            }
        }
    }

    /// Queues input for `gen`, to be written by [`flush_input`](Self::flush_input).
    pub fn queue_input(&mut self, gen: u64, bytes: &[u8]) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.queue_input(bytes);
        }
    }

    /// Closes `gen`'s input once what is queued is written.
    pub fn close_input_when_written(&mut self, gen: u64) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.close_input_when_written();
        }
    }

    /// Writes `gen`'s queued input as far as its descriptor accepts.
    pub fn flush_input(&mut self, registry: &Registry, gen: u64) -> InputProgress {
        self.table
            .get_mut(&gen)
            .map_or_else(InputProgress::default, |c| c.flush_input(registry))
    }

    /// Sends `signal` to `gen`'s leader or group, through its verified identity.
    pub fn signal(&self, gen: u64, signal: i32, scope: Scope) {
        let Some(child) = self.table.get(&gen) else {
            return;
        };
        let Some(sig) = to_signal(signal) else {
            log::warn!("gen {gen}: signal {signal} is not deliverable");
            return;
        };
        let result = match scope {
            Scope::Leader => child.process().signal(sig),
            Scope::Group => child.process().signal_group(sig),
        };
        match result {
            Ok(()) => log::debug!("gen {gen}: sent signal {signal} to {scope:?}"),
            Err(e) => log::info!("gen {gen}: signal {signal} to {scope:?} not sent: {e}"),
        }
    }

    /// Asks, without reaping, whether `gen`'s leader exited. Only for a leader the core
    /// still thinks is running: a pidfd stays readable after the exit.
    pub fn leader_state(&self, gen: u64) -> LeaderState {
        let Some(child) = self.table.get(&gen) else {
            return LeaderState::Running;
        };
        match child.process().exit_status_nowait() {
            Ok(None) => LeaderState::Running,
            Ok(Some(Exit::Code(c))) => LeaderState::Exited(ExitStatus::Code(c)),
            Ok(Some(Exit::Signal { signal, .. })) => {
                LeaderState::Exited(ExitStatus::Signal(signal))
            }
            Ok(Some(Exit::Unknown)) => {
                // Only for processes that are not our children: no status to read, and
                // never counted as a success.
                log::warn!("gen {gen}: exit status unknown; reporting the generation lost");
                LeaderState::Lost
            }
            Err(e) => {
                // ECHILD and friends: it can no longer be observed or reaped by us.
                log::error!("gen {gen}: waitid: {e}; reporting the generation lost");
                LeaderState::Lost
            }
        }
    }

    /// Generations whose exit is learned from SIGCHLD rather than a watched pidfd.
    pub fn without_pidfd(&self) -> Vec<u64> {
        self.table
            .iter()
            .filter(|(_, c)| !c.pidfd_watched())
            .map(|(g, _)| *g)
            .collect()
    }

    /// Reaps orphaned descendants reparented to us, by pid, leaving our own leaders to
    /// their generations (never `waitpid(-1)`, which would steal them).
    pub fn reap_orphans(&self) {
        if !self.adopts_orphans {
            return;
        }
        let tracked = |pid: i32| self.table.values().any(|c| c.process().pid() == pid);
        match crate::sys::orphans::reap_orphans(tracked) {
            Ok(0) => {}
            Ok(n) => log::debug!("reaped {n} orphaned process(es)"),
            Err(e) => log::warn!("reaping orphans: {e}"),
        }
    }

    /// Reaps `gen`'s leader: after this nothing about it is ever signalled.
    pub fn reap(&mut self, registry: &Registry, gen: u64) {
        let Some(child) = self.table.get_mut(&gen) else {
            return;
        };
        match child.process_mut().reap() {
            Ok(Some(exit)) => log::debug!("gen {gen}: reaped ({exit:?})"),
            Ok(None) => log::warn!("gen {gen}: reap requested but the process has not exited"),
            Err(e) => log::error!("gen {gen}: reap: {e}"),
        }
        child.unwatch_pidfd(registry);
    }

    /// Sets `gen`'s terminal size.
    pub fn resize(&self, gen: u64, rows: u16, cols: u16) {
        let Some(fd) = self.table.get(&gen).and_then(|c| c.output(Stream::Pty)) else {
            return;
        };
        if let Err(e) = crate::sys::pty::resize(fd, rows, cols) {
            log::info!("gen {gen}: resize: {e}");
        }
    }

    /// Closes `gen`'s output streams, returning how many bytes they held unread.
    pub fn close_outputs(&mut self, registry: &Registry, gen: u64) -> u64 {
        self.table
            .get_mut(&gen)
            .map_or(0, |c| c.close_outputs(registry))
    }

    /// Forgets `gen`, closing everything it held.
    pub fn release(&mut self, registry: &Registry, gen: u64) {
        if let Some(child) = self.table.remove(&gen) {
            child.release(registry);
            log::debug!("gen {gen}: released");
        }
    }
}
