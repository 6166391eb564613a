//! The live children: one [`Child`] per spawned generation, and what the loop asks of
//! them — spawn, read, write, signal, observe an exit, reap, release.
//!
//! Every method takes the generation it is about and touches only that child; a
//! generation that is not here (never spawned, or already released) is ignored, so a
//! late readiness event or action can never reach another process.
//!
//! Starting is in `starts.rs`, signals and whether a tree emptied in `trees.rs`, whether
//! a leader exited in `leaders.rs`, what a shortage of descriptors put off (to be tried
//! again) in `retries.rs`; reading, writing, reaping and releasing here.

mod after_records;
mod leaders;
mod retries;
pub(crate) mod starts;
mod trees;

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use mio::Registry;

use super::backlog::BULK_SLICE;
use super::cgroup_pool::CgroupPool;
use super::child::{Child, InputProgress};
use super::containment::{clear_abandoned, predecessor_cgroup, recorded_cgroup, Predecessors};
use super::descriptors::Descriptors;
use super::exits::{PendingExits, Rechecks};
use super::launch::Launch;
use super::probe_identities::ProbeIdentities;
use super::upgrade::state::ChildImage;
use crate::core::{Containment, Stream};
use crate::proto::error::ProtoError;
use crate::sys::cgroup::{CgroupRoot, GenCgroup};
use crate::sys::fd::{queued_bytes, read_nonblocking, ReadOutcome};
use crate::sys::process::{Process, ReaperMode};
use crate::sys::spare_fd::SpareFd;
use crate::sys::tree::{EscapeeLedger, OwnChildren, SessionWatch};

pub use leaders::LeaderState;
pub(crate) use starts::daemon_failure;
pub use starts::{spawn_request, HelperStart};

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

/// Every spawned, unreleased generation, and those still starting.
#[derive(Debug)]
pub struct Children {
    table: HashMap<u64, Child>,
    launching: HashMap<u64, Launch>,
    reaper: ReaperMode,
    /// Descriptors the children in `table` held when taken in (see
    /// [`Child::count_descriptors`]).
    held: usize,
    /// The daemon's descriptor budget: a spawn that would eat into the reserve is refused.
    budget: Descriptors,
    /// Orphans are reparented to us (PID 1 or subreaper) and must be reaped.
    adopts_orphans: bool,
    /// When our children are next looked through for orphans (a `SIGCHLD` came).
    orphan_sweep: Option<Instant>,
    /// The generations whose exit is learned on `SIGCHLD` rather than from a watched
    /// pidfd: kept as they come and go, so a `SIGCHLD` costs nothing per running child.
    on_sigchld: HashSet<u64>,
    /// Where generations get cgroups of their own, when the daemon may create them.
    cgroups: Option<CgroupRoot>,
    /// Emptied cgroups kept for generations without limits.
    pool: CgroupPool,
    /// The cgroup subtrees earlier daemons on this state directory left that still hold
    /// a process: looked at again when a generation taken back ends.
    predecessors: Predecessors,
    /// A leader exited this turn: look at the trees before sleeping.
    look_soon: bool,
    /// The generations whose session is watched: the loop asks for the soonest look on
    /// every turn, and only these can want one.
    watched: HashSet<u64>,
    /// Watched generations whose watch descriptor was readable this turn.
    woken: HashSet<u64>,
    /// Generations whose leader's exit was seen this turn: their session is looked at.
    leaders_ended: HashSet<u64>,
    /// Descriptors the session watches hold (an epoll instance and member pidfds each).
    watch_fds: usize,
    /// The escapees already reported.
    escapees: EscapeeLedger,
    /// Our own list of children as the last look at it left it: told of every reap here.
    own_children: OwnChildren,
    /// The state directory's id, in every child's `GENWARD_GEN`.
    dir_id: String,
    /// Adopted generations that exited, waiting for their status.
    exits: PendingExits,
    /// Adopted generations without a pidfd, whose end nothing announces: looked at again
    /// on a timer.
    rechecks: Rechecks,
    /// Whom probe commands of generations whose start took a lookup run as.
    probe_identities: ProbeIdentities,
    /// Tree signals and cgroup removals put off for a shortage of descriptors.
    retries: retries::Retries,
    /// A descriptor held back for a cgroup's `cgroup.kill` (see `sys::spare_fd`).
    spare: SpareFd,
    /// Signals waiting for the records that describe them (see `after_records.rs`).
    after_records: after_records::AfterRecords,
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
        // Only what is there: a read finding nothing would wait for the terminal's worker.
        let queued = match queued_bytes(fd) {
            Ok(0) | Err(_) => break,
            Ok(q) => q,
        };
        match read_nonblocking(fd, &mut buf[n..limit.min(n + queued)]) {
            Ok(ReadOutcome::Data(m)) => n += m,
            _ => break,
        }
    }
    n
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
            held: 0,
            budget: Descriptors::unmeasured(),
            reaper,
            adopts_orphans,
            orphan_sweep: None,
            on_sigchld: HashSet::new(),
            cgroups,
            pool: CgroupPool::default(),
            predecessors: Predecessors::default(),
            look_soon: false,
            watched: HashSet::new(),
            woken: HashSet::new(),
            leaders_ended: HashSet::new(),
            watch_fds: 0,
            escapees: EscapeeLedger::default(),
            own_children: OwnChildren::default(),
            dir_id,
            exits: PendingExits::default(),
            rechecks: Rechecks::default(),
            probe_identities: ProbeIdentities::default(),
            retries: retries::Retries::default(),
            spare: SpareFd::new(),
            after_records: Default::default(),
        }
    }

    /// Descriptors held by children, counted from above: what each held when taken in,
    /// and the most a child still starting may hold.
    pub fn descriptors(&self) -> usize {
        self.held
            + self.watch_fds
            + self.launching.len() * super::descriptors::LAUNCH_HELD
            + self.pool.descriptors()
    }

    /// Removes the emptied cgroups kept for reuse (before the daemon re-executes itself:
    /// its successor would not know them).
    pub fn empty_pool(&mut self) {
        self.pool.clear();
    }

    /// Removes what the cgroup subtrees of earlier daemons on this state directory hold
    /// that no process is in, and keeps the rest in view (see [`Predecessors`]); removes
    /// the empty subtrees of other directories' daemons verified gone (see
    /// [`clear_abandoned`]). Called once the previous daemon's generations are taken back.
    pub fn clear_predecessors(&mut self) {
        if let Some(root) = &self.cgroups {
            self.predecessors = Predecessors::find(root, &self.dir_id);
            clear_abandoned(root, &self.dir_id);
        }
    }

    /// Measures the descriptor budget once everything the daemon starts with is open, with
    /// `connections` clients connected.
    pub fn measure_descriptors(&mut self, connections: usize) {
        // Kept for the whole run, so counted among the daemon's own.
        crate::sys::spawn::keep_descriptor_bands();
        self.budget = Descriptors::measure(self.descriptors() + connections);
    }

    /// Whether one more spawn leaves the descriptors kept in reserve (see
    /// `driver::descriptors`) with `connections` clients connected; if not, the `limit`
    /// error that says so. Emptied cgroups kept for reuse give their descriptors back
    /// first, as many as it takes: a cache never costs a spawn.
    pub fn admit_spawn(&mut self, connections: usize) -> Result<(), ProtoError> {
        loop {
            match self.budget.admit_spawn(self.descriptors() + connections) {
                Err(_) if self.pool.shed_one() => continue,
                admitted => return admitted,
            }
        }
    }

    /// How many more connections fit in the descriptor budget with `connections` already
    /// connected (see `driver::descriptors`).
    pub fn connection_room(&self, connections: usize) -> usize {
        self.budget
            .connection_room(self.descriptors() + connections)
    }

    /// Takes in `child`, counting its descriptors.
    fn insert(&mut self, gen: u64, mut child: Child) {
        self.held += child.count_descriptors();
        if !child.pidfd_watched() {
            self.on_sigchld.insert(gen);
        }
        if let Some(old) = self.table.insert(gen, child) {
            // Not expected (a generation is taken in once), but its count goes with it.
            self.held -= old.counted();
        }
    }

    /// `gen`'s leader exited: its tree is looked at the end of this turn.
    pub fn look_soon(&mut self, gen: u64) {
        self.leaders_ended.insert(gen);
        self.look_soon = true;
    }

    /// `gen`'s session watch descriptor is readable (a watched member exited): the watch
    /// is drained, and looked at if it wants, at the end of this turn.
    pub fn wake_watch(&mut self, gen: u64) {
        self.woken.insert(gen);
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
    pub fn adopt(
        &mut self,
        registry: &Registry,
        gen: u64,
        process: Process,
        cgroup: Option<GenCgroup>,
    ) {
        let child = Child::adopted(gen, process, cgroup, registry);
        if !child.pidfd_watched() {
            self.rechecks.watch(gen, Instant::now());
        }
        self.insert(gen, child);
    }

    /// The cgroup an earlier daemon on this state directory made for the generation whose
    /// leader, `pid`, is being taken back (see [`predecessor_cgroup`]); `None` without
    /// cgroups here, or when it is not in one.
    pub fn predecessor_cgroup(&self, pid: u32) -> Option<GenCgroup> {
        predecessor_cgroup(self.cgroups.as_ref()?, &self.dir_id, pid)
    }

    /// The cgroup an earlier daemon on this state directory made for a generation, by
    /// the name its descriptor recorded (see [`recorded_cgroup`]), whether or not its
    /// leader still runs; `None` without cgroups here, or for a name that is not one of
    /// those cgroups.
    pub fn recorded_cgroup(&self, name: &str) -> Option<GenCgroup> {
        recorded_cgroup(self.cgroups.as_ref()?, &self.dir_id, name)
    }

    /// Takes back the tree a previous daemon's generation `gen` left in its cgroup, its
    /// leader `pid` gone (ended while no daemon ran, or before the crash): held like an
    /// adopted child whose leader was seen gone — nothing is ever sent to that pid — so
    /// that its cgroup is killed, watched for emptiness, and goes once it is released.
    pub fn adopt_tree(&mut self, registry: &Registry, gen: u64, pid: u32, cgroup: GenCgroup) {
        let Some(process) = Process::gone(pid as i32) else {
            return;
        };
        let child = Child::adopted(gen, process, Some(cgroup), registry);
        self.insert(gen, child);
        // Its emptiness is looked at by the end of this turn, whatever the events say.
        self.look_soon = true;
    }

    /// How to start a helper process of this daemon's (see [`HelperStart`]).
    pub fn helper_start(&self) -> HelperStart {
        HelperStart::new(self.reaper, &self.dir_id)
    }

    /// Whether a start is in flight.
    pub fn is_launching(&self) -> bool {
        !self.launching.is_empty()
    }

    /// Whether `gen`'s start is in flight (its result not yet told).
    pub fn is_starting(&self, gen: u64) -> bool {
        self.launching.contains_key(&gen)
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
            self.insert(gen, child);
        }
        self.look_soon = true;
    }

    /// What the lookup found for `gen`'s start, for its probe commands (`None`: its start
    /// took no lookup, or it has no probe command).
    pub fn probe_identity(&self, gen: u64) -> Option<&crate::lookup::answer::Found> {
        self.probe_identities.get(gen)
    }

    /// The probe identities, for an upgrade image.
    pub fn export_probe_identities(&self) -> Vec<(u64, Vec<u8>)> {
        self.probe_identities.export()
    }

    /// Takes back an upgrade image's probe identities.
    pub fn resume_probe_identities(&mut self, images: Vec<(u64, Vec<u8>)>) {
        self.probe_identities.resume(images);
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
        cgroup: Option<GenCgroup>,
        outputs: [Option<std::os::fd::OwnedFd>; 3],
        stdin: Option<std::os::fd::OwnedFd>,
    ) {
        let child = Child::adopted_with_io(gen, process, cgroup, outputs, stdin, registry);
        if !child.pidfd_watched() {
            self.rechecks.watch(gen, Instant::now());
        }
        self.insert(gen, child);
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

    /// What a descriptor of `gen` records: its process, whether it has a terminal, and
    /// the name of its cgroup (cgroup containment).
    pub fn describe(&self, gen: u64) -> Option<(&Process, bool, Option<&str>)> {
        let child = self.table.get(&gen)?;
        let cgroup = child.cgroup().map(GenCgroup::name_in_hierarchy);
        Some((child.process(), child.pty().is_some(), cgroup))
    }

    /// What holds each generation's tree.
    pub fn containment(&self) -> Containment {
        match self.cgroups {
            Some(_) => Containment::Cgroup,
            None => Containment::Session,
        }
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
        // A terminal with nothing queued is not read (see `queued_bytes`) unless its other
        // side has closed: then the read reports the end.
        if stream == Stream::Pty && !child.pty_hangup_seen() && matches!(queued_bytes(fd), Ok(0)) {
            return Read::WouldBlock;
        }
        match read_nonblocking(fd, buf) {
            // A keystroke's echo is not coalesced: only a bulk-sized read (a terminal that
            // floods hands out its line discipline's buffer per read) asks whether more is
            // there — a `FIONREAD` per key saved.
            Ok(ReadOutcome::Data(n)) if stream == Stream::Pty && n >= BULK_SLICE => {
                Read::Data(coalesce_pty(fd, buf, n))
            }
            Ok(ReadOutcome::Data(n)) if stream == Stream::Pty => Read::Data(n),
            Ok(ReadOutcome::Data(n)) => {
                child.grow_on_data(stream);
                Read::Data(n)
            }
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

    /// Notes that `gen`'s PTY master reported a hang-up.
    pub fn saw_pty_hangup(&mut self, gen: u64) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.saw_pty_hangup();
        }
    }

    /// Notes that `gen`'s stdin pipe reported an error (its last reader is gone): the
    /// next [`flush_input`](Self::flush_input) closes it and reports the input broken.
    pub fn saw_stdin_reader_gone(&mut self, gen: u64) {
        if let Some(c) = self.table.get_mut(&gen) {
            c.saw_stdin_reader_gone();
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

    /// Reaps `gen`'s leader: after this nothing about it is ever signalled.
    pub fn reap(&mut self, registry: &Registry, gen: u64) {
        let Some(child) = self.table.get_mut(&gen) else {
            return;
        };
        // A reap notes its pid for our copy of the list of children (`sys::reaped`).
        match child.process_mut().reap() {
            Ok(Some(exit)) => log::debug!("gen {gen}: reaped ({exit:?})"),
            Ok(None) => log::warn!("gen {gen}: reap requested but the process has not exited"),
            Err(e) => log::error!("gen {gen}: reap: {e}"),
        }
        child.unwatch_pidfd(registry);
        self.on_sigchld.remove(&gen);
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
        self.woken.remove(&gen);
        self.leaders_ended.remove(&gen);
        self.on_sigchld.remove(&gen);
        self.exits.forget(gen);
        self.rechecks.forget(gen);
        self.probe_identities.forget(gen);
        self.retries.forget_signals(gen);
        if let Some(child) = self.table.remove(&gen) {
            self.held -= child.counted();
            let held = child.watch().map_or(0, SessionWatch::descriptors);
            self.recount_watch(held, 0);
            let adopted = !child.process().is_child();
            if let Some(cg) = child.release(registry) {
                if let Some(cg) = self.pool.give(gen, cg) {
                    // Not removed for want of descriptors: tried again until it is.
                    self.retries.defer_removal(gen, cg, Instant::now());
                }
            }
            // A generation taken back ran in an earlier daemon's subtree: its cgroup,
            // and the subtree with it, may be empty now.
            if adopted && !self.predecessors.is_empty() {
                self.predecessors.prune();
            }
            log::debug!("gen {gen}: released");
        }
    }
}

impl Drop for Children {
    /// The subtrees of earlier daemons that emptied meanwhile go with this daemon (what
    /// escaped a taken-back generation may have ended since it ended).
    fn drop(&mut self) {
        if !self.predecessors.is_empty() {
            self.predecessors.prune();
        }
    }
}
