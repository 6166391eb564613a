//! The live children: one [`Child`] per spawned generation, and what the loop asks of
//! them — spawn, read, write, signal, observe an exit, reap, release.
//!
//! Every method takes the generation it is about and touches only that child; a
//! generation that is not here (never spawned, or already released) is ignored, so a
//! late readiness event or action can never reach another process.

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::Instant;

use mio::Registry;

use super::child::{spawn_request, Child, InputProgress};
use super::exits::{PendingExits, Rechecks};
use super::launch::Launch;
use super::upgrade::state::ChildImage;
use crate::core::{
    Containment, ExitStatus, ResourceLimits, Scope, SpawnError, SpawnErrorKind, Spec, Started,
    Stream,
};
use crate::sys::cgroup::{self, CgroupRoot, GenCgroup};
use crate::sys::fd::{read_nonblocking, ReadOutcome};
use crate::sys::pidfd_ext::ExitInfo;
use crate::sys::process::{Exit, Process, ReaperMode, SignalError};
use crate::sys::spawn::{start_in, SpawnError as SysSpawnError};
use crate::sys::tree;

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

/// Every spawned, unreleased generation, and those still starting.
#[derive(Debug)]
pub struct Children {
    table: HashMap<u64, Child>,
    launching: HashMap<u64, Launch>,
    reaper: ReaperMode,
    /// Orphans are reparented to us (PID 1 or subreaper) and must be reaped.
    adopts_orphans: bool,
    /// Where generations get cgroups of their own, when the daemon may create them.
    cgroups: Option<CgroupRoot>,
    /// A leader exited this turn: look at the trees before sleeping.
    look_soon: bool,
    /// The generations whose session is watched: the loop asks for the soonest look on
    /// every turn, and only these can want one.
    watched: HashSet<u64>,
    /// The state directory's id, in every child's `GENWARD_GEN`.
    dir_id: String,
    /// Adopted generations that exited, waiting for their status.
    exits: PendingExits,
    /// Adopted generations without a pidfd, whose end nothing announces: looked at again
    /// on a timer.
    rechecks: Rechecks,
}

/// A spec's limits in the cgroup layer's terms.
fn cgroup_limits(l: &ResourceLimits) -> cgroup::Limits {
    cgroup::Limits {
        memory_max: l.memory_max,
        pids_max: l.pids_max,
        cpu_max: l.cpu_max.map(|c| cgroup::CpuMax {
            quota_us: c.quota_us,
            period_us: c.period_us,
        }),
    }
}

/// The core's view of a failed start: the class and errno clients act on. The step and
/// path are logged here.
fn spawn_error(gen: u64, e: &SysSpawnError) -> SpawnError {
    log::warn!("gen {gen}: spawn failed: {e}");
    let (kind, errno) = match e {
        SysSpawnError::NotFound { .. } => (SpawnErrorKind::NotFound, libc::ENOENT),
        SysSpawnError::PermissionDenied { .. } => (SpawnErrorKind::PermissionDenied, libc::EACCES),
        other => (SpawnErrorKind::Other, other.errno().unwrap_or(libc::EINVAL)),
    };
    SpawnError::new(kind, errno).with_message(e.to_string())
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

/// Bytes of PTY output gathered into one record when they are already there: a terminal
/// hands out at most a line discipline's buffer (about 4 KiB) per read, and a frame per
/// 4 KiB would cost a header, a journal record and a delivery each.
const PTY_COALESCE: usize = 64 * 1024;

/// Reads on from a PTY master after a read that returned `n` bytes, while more is there at
/// once and fewer than [`PTY_COALESCE`] are gathered; returns how many `buf` holds. Never
/// waits: what is not there yet comes with the next readiness. An end of file or error met
/// here is met again by the next read, which reports it.
fn coalesce_pty(fd: std::os::fd::BorrowedFd<'_>, buf: &mut [u8], mut n: usize) -> usize {
    let limit = buf.len().min(PTY_COALESCE);
    while n < limit {
        match read_nonblocking(fd, &mut buf[n..limit]) {
            Ok(ReadOutcome::Data(m)) => n += m,
            _ => break,
        }
    }
    n
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
    /// No children; they will be watched per `reaper`, each in a cgroup of its own under
    /// `cgroups` when given.
    pub fn new(
        reaper: ReaperMode,
        adopts_orphans: bool,
        cgroups: Option<CgroupRoot>,
        dir_id: String,
    ) -> Children {
        Children {
            table: HashMap::new(),
            launching: HashMap::new(),
            reaper,
            adopts_orphans,
            cgroups,
            look_soon: false,
            watched: HashSet::new(),
            dir_id,
            exits: PendingExits::default(),
            rechecks: Rechecks::default(),
        }
    }

    /// A leader exited: its tree is looked at the end of this turn.
    pub fn look_soon(&mut self) {
        self.look_soon = true;
    }

    /// Whether a look is asked for this turn.
    pub fn look_due_now(&self) -> bool {
        self.look_soon
    }

    /// Takes the request for a look.
    pub fn take_look_soon(&mut self) -> bool {
        std::mem::take(&mut self.look_soon)
    }

    /// Takes back a process a previous daemon started (verified: see
    /// `sys::identity::adopt`): it is watched through its pidfd, has no streams, and is
    /// signalled only through its handle. Without a pidfd (the fallback reaper) nothing
    /// announces its end: it is looked at again on a timer (see [`Rechecks`]).
    pub fn adopt(&mut self, registry: &Registry, gen: u64, process: Process) {
        let child = Child::adopted(gen, process, registry);
        if !child.pidfd_watched() {
            self.rechecks.watch(gen, Instant::now());
        }
        self.table.insert(gen, child);
    }

    /// Whether a generation is still starting: an upgrade waits for none to be (a start
    /// in flight is a forked process between `fork` and `execve`, which no image holds).
    pub fn is_launching(&self) -> bool {
        !self.launching.is_empty()
    }

    /// The name of the cgroup subtree generations get cgroups in, if there is one.
    pub fn cgroup_root_name(&self) -> Option<String> {
        self.cgroups.as_ref()?.name().map(str::to_owned)
    }

    /// Every child, for an upgrade image.
    pub fn export(&self) -> Vec<ChildImage> {
        let mut images: Vec<ChildImage> = self
            .table
            .values()
            .map(|c| {
                let mut image = c.export();
                image.awaits_status = self.exits.is_waiting(image.gen);
                image
            })
            .collect();
        images.sort_by_key(|c| c.gen);
        images
    }

    /// Takes back the children of an upgrade image (descriptors checked): each
    /// registered again, an adopted one without a pidfd looked at on its timer, one whose
    /// status was awaited awaited still; every tree is looked at on the first turn.
    pub fn resume(&mut self, images: Vec<ChildImage>, registry: &Registry) {
        let now = Instant::now();
        for image in images {
            let gen = image.gen;
            let awaits = image.awaits_status;
            let child = Child::resumed(image, registry);
            if !child.process().is_child() && !child.pidfd_watched() {
                self.rechecks.watch(gen, now);
            }
            if awaits {
                self.exits.missed(gen, now);
            }
            self.table.insert(gen, child);
        }
        self.look_soon = true;
    }

    /// The generations held, for a look at each after an upgrade.
    pub fn gens(&self) -> Vec<u64> {
        let mut gens: Vec<u64> = self.table.keys().copied().collect();
        gens.sort_unstable();
        gens
    }

    /// Takes back a process a previous daemon started with the descriptors a keeper held
    /// for it (see [`Child::adopted_with_io`]): read and written like a spawned child.
    pub fn adopt_with_io(
        &mut self,
        registry: &Registry,
        gen: u64,
        process: Process,
        outputs: [Option<std::os::fd::OwnedFd>; 3],
        stdin: Option<std::os::fd::OwnedFd>,
    ) {
        let child = Child::adopted_with_io(gen, process, outputs, stdin, registry);
        if !child.pidfd_watched() {
            self.rechecks.watch(gen, Instant::now());
        }
        self.table.insert(gen, child);
    }

    /// The descriptors of `gen` a keeper is to hold (see [`Child::keepable`]).
    pub fn keepable(
        &self,
        gen: u64,
    ) -> Option<(crate::keeper::wire::Roles, Vec<std::os::fd::BorrowedFd<'_>>)> {
        self.table.get(&gen).map(Child::keepable)
    }

    /// The descriptors of `gen` closed since the last call (see [`Child::take_closed`]).
    pub fn take_closed(&mut self, gen: u64) -> crate::keeper::wire::Roles {
        self.table
            .get_mut(&gen)
            .map_or(crate::keeper::wire::Roles::NONE, Child::take_closed)
    }

    /// Whether `gen` is a process taken back after a restart (not our child).
    pub fn is_adopted(&self, gen: u64) -> bool {
        self.table
            .get(&gen)
            .is_some_and(|c| !c.process().is_child())
    }

    /// What a descriptor of `gen` records: its process, and whether it has a terminal.
    pub fn describe(&self, gen: u64) -> Option<(&Process, bool)> {
        let child = self.table.get(&gen)?;
        Some((child.process(), child.pty().is_some()))
    }

    /// What holds each generation's tree.
    pub fn containment(&self) -> Containment {
        match self.cgroups {
            Some(_) => Containment::Cgroup,
            None => Containment::Session,
        }
    }

    /// A cgroup of its own for `gen`, with `limits` set; none under session containment,
    /// where limits cannot be enforced and are refused.
    fn cgroup_for(
        &self,
        gen: u64,
        limits: &ResourceLimits,
    ) -> Result<Option<GenCgroup>, SpawnError> {
        let fail = |message: String| {
            log::warn!("gen {gen}: {message}");
            SpawnError::new(SpawnErrorKind::Other, 0).with_message(message)
        };
        let Some(root) = &self.cgroups else {
            if limits.is_empty() {
                return Ok(None);
            }
            return Err(fail(
                "limits need cgroup containment, which this daemon does not have (see `hello`)"
                    .into(),
            ));
        };
        let limits = cgroup_limits(limits);
        root.check_limits(&limits)
            .map_err(|e| fail(e.to_string()))?;
        let cg = root
            .create_generation(gen)
            .map_err(|e| fail(format!("creating its cgroup: {e}")))?;
        if !limits.is_empty() {
            cg.set_limits(&limits).map_err(|e| fail(e.to_string()))?;
        }
        Ok(Some(cg))
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

    /// Starts generation `gen` without waiting for it to exec: its result comes through
    /// [`launched`](Self::launched) when the status pipe is readable.
    pub fn start(&mut self, registry: &Registry, gen: u64, spec: &Spec) -> Result<(), SpawnError> {
        let cgroup = self.cgroup_for(gen, &spec.limits)?;
        let request = spawn_request(gen, spec, self.reaper, &self.dir_id);
        let starting = start_in(&request, cgroup.as_ref().map(GenCgroup::dir))
            .map_err(|e| spawn_error(gen, &e))?;
        let launch = Launch::new(gen, starting, cgroup, registry).map_err(|e| {
            log::error!("gen {gen}: watch spawn status: {e}");
            SpawnError::new(SpawnErrorKind::Other, e.raw_os_error().unwrap_or(libc::EIO))
                .with_message(format!("watching the start: {e}"))
        })?;
        self.launching.insert(gen, launch);
        Ok(())
    }

    /// The exec result of `gen`, if it is known now: the leader's pid, its descriptors
    /// registered, what was held for it handed over.
    pub fn launched(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        let ready = self.launching.get_mut(&gen)?.ready();
        ready.then(|| self.finish_launch(registry, gen))?
    }

    /// Gives up starting `gen`: the process if it already runs our program (it is then
    /// stopped like any other), else `cancelled`. `None` if `gen` is not starting.
    pub fn cancel_launch(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        if self.launching.get_mut(&gen)?.ready() {
            return self.finish_launch(registry, gen);
        }
        self.take_launch(gen)?.abandon(registry);
        log::info!("gen {gen}: start cancelled before exec");
        let why = "stopped before it started (its start did not finish within the stop's grace)";
        Some(Err(
            SpawnError::new(SpawnErrorKind::Cancelled, 0).with_message(why)
        ))
    }

    /// Takes a start out of the table, which gives its memory back once no start is left
    /// (a burst of spawns would otherwise keep its peak for good).
    fn take_launch(&mut self, gen: u64) -> Option<Launch> {
        let launch = self.launching.remove(&gen);
        if self.launching.is_empty() {
            self.launching.shrink_to_fit();
        }
        launch
    }

    fn finish_launch(
        &mut self,
        registry: &Registry,
        gen: u64,
    ) -> Option<Result<Started, SpawnError>> {
        let (result, held) = self.take_launch(gen)?.finish(registry);
        let spawned = match result {
            Ok(spawned) => spawned,
            Err(e) => return Some(Err(spawn_error(gen, &e))),
        };
        let pid = spawned.process.pid();
        let containment = match held.cgroup {
            Some(_) => Containment::Cgroup,
            None => Containment::Session,
        };
        let mut child = Child::new(gen, spawned, held.cgroup, registry);
        child.queue_input(&held.input);
        if held.close_input {
            child.close_input_when_written();
        }
        self.table.insert(gen, child);
        if let Some((rows, cols)) = held.size {
            self.resize(gen, rows, cols);
        }
        for (signal, scope) in held.signals {
            self.signal(registry, gen, signal, scope);
        }
        Some(Ok(Started {
            pid: pid as u32,
            containment,
        }))
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
            Ok(ReadOutcome::Data(n)) if stream == Stream::Pty => {
                Read::Data(coalesce_pty(fd, buf, n))
            }
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

    /// Queues input for `gen`, to be written by [`flush_input`](Self::flush_input) (or
    /// held until it runs).
    pub fn queue_input(&mut self, gen: u64, bytes: &[u8]) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.queue_input(bytes);
        } else if let Some(l) = self.launching.get_mut(&gen) {
            l.input.extend_from_slice(bytes);
        }
    }

    /// Closes `gen`'s input once what is queued is written.
    pub fn close_input_when_written(&mut self, gen: u64) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.close_input_when_written();
        } else if let Some(l) = self.launching.get_mut(&gen) {
            l.close_input = true;
        }
    }

    /// Writes `gen`'s queued input as far as its descriptor accepts.
    pub fn flush_input(&mut self, registry: &Registry, gen: u64) -> InputProgress {
        self.table
            .get_mut(&gen)
            .map_or_else(InputProgress::default, |c| c.flush_input(registry))
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
        let others = match scope {
            Scope::Leader => Vec::new(),
            Scope::Tree | Scope::Foreground => self.others(gen),
        };
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
    /// without a pidfd, whether it still runs.
    pub fn status_deadline(&self) -> Option<Instant> {
        [self.exits.deadline(), self.rechecks.deadline()]
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
        let tracked = |pid: i32| {
            self.table.values().any(|c| c.process().pid() == pid)
                || self.launching.values().any(|l| l.pid() == pid)
        };
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

    /// Sets `gen`'s terminal size (or holds it until it runs).
    pub fn resize(&mut self, gen: u64, rows: u16, cols: u16) {
        if let Some(l) = self.launching.get_mut(&gen) {
            l.size = Some((rows, cols));
            return;
        }
        let Some(fd) = self.table.get(&gen).and_then(Child::pty) else {
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
        if let Some(launch) = self.take_launch(gen) {
            launch.abandon(registry);
        }
        self.watched.remove(&gen);
        self.exits.forget(gen);
        self.rechecks.forget(gen);
        if let Some(child) = self.table.remove(&gen) {
            child.release(registry);
            log::debug!("gen {gen}: released");
        }
    }
}
