//! The core's whole state as plain data, for an upgrade by re-exec: the old daemon exports
//! a [`CoreImage`] between two turns, the store encodes it into the memfd the new binary
//! inherits, and the new daemon imports it and carries on exactly where the old one
//! stopped — every session, every generation with its phase, timers and counters, the
//! shutdown stage, the dirty set and the announced states.
//!
//! Unlike [`SessionRecord`](super::SessionRecord) (what survives a crash), an image keeps
//! [`Time`] values as they are: the driver keeps the core's clock continuous across the
//! exec (the new process's clock continues the old one's), so no deadline is rebased.
//!
//! The types mirror the core's private ones field for field, with public enums where the
//! core's are private ([`PhaseImage`], [`GroupImage`], [`ShutdownImage`]). They carry no
//! invariant of their own: [`Core::import_image`](super::Core::import_image) checks every
//! one before a core is built from them, so a corrupted image is refused whole.

mod export;
mod import;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::action::{Event, ExitCause, SessionState};
use super::input::{Containment, ExitStatus};
use super::persist::RestState;
use super::snapshot::{LastEnd, StopReason, StopStage};
use super::spec::Spec;
use super::time::Time;

/// Everything a [`Core`](super::Core) holds but its [`Config`](super::Config) (the new
/// daemon supplies its own) and its action queue (empty whenever an image is taken).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CoreImage {
    /// The latest instant the core was fed: a `now` before it is clamped to it.
    pub now: Time,
    /// The next generation number to allocate; every generation named is below it.
    pub next_gen: u64,
    /// How far a shutdown got.
    pub shutdown: ShutdownImage,
    /// Every session, in name order.
    pub sessions: Vec<SessionImage>,
    /// Every tracked generation, in number order.
    pub generations: Vec<GenerationImage>,
    /// Sessions whose record changed since the driver last took them, in name order
    /// (sessions removed since then included: their files are still to be removed).
    pub dirty: Vec<Arc<str>>,
}

/// How far the daemon's shutdown got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShutdownImage {
    /// No shutdown asked.
    Running,
    /// Every generation is walking its stop sequence.
    Stopping,
    /// Asked twice: everything is killed at once.
    Killing,
}

/// One session, as the core holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionImage {
    /// Its name.
    pub name: Arc<str>,
    /// The spec a restart starts again (a generation may run an older one).
    pub spec: Arc<Spec>,
    /// Who started it.
    pub origin: super::Origin,
    /// The generation commands address.
    pub current: Option<u64>,
    /// The last generation that was current.
    pub last_gen: Option<u64>,
    /// False after a stop or remove: nothing may restart it.
    pub want_up: bool,
    /// Being removed: it goes once its generations are gone.
    pub removing: bool,
    /// The generation being stopped only because its I/O died with an earlier daemon.
    pub recovery_stop: Option<u64>,
    /// A session of the config the daemon's end left down (stopped by a shutdown, or its
    /// generation lost with a crash): the config starts it again at its next load.
    pub stopped_by_shutdown: bool,
    /// Consecutive automatic restarts so far.
    pub restarts: u32,
    /// When a pending restart fires.
    pub restart_at: Option<Time>,
    /// The pending restart retries a start the daemon was short of resources for: it
    /// does not add to `restarts` when it happens.
    pub restart_uncounted: bool,
    /// Its state when nothing runs and no restart is pending.
    pub rest: RestState,
    /// How the last current generation ended.
    pub last_end: Option<LastEnd>,
    /// Terminal events of its latest ended generations, oldest first, at most
    /// [`RECENT_ENDS`](super::RECENT_ENDS).
    pub recent_ends: Vec<Event>,
    /// The state last announced with a `state` event.
    pub announced: Option<SessionState>,
}

/// One generation, as the core holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationImage {
    /// Its number.
    pub gen: u64,
    /// Its session.
    pub session: Arc<str>,
    /// What it runs: its session's spec when it was allocated, which a later `spawn` of
    /// the session may have replaced since.
    pub spec: Arc<Spec>,
    /// Where it is, with what only that phase has.
    pub phase: PhaseImage,
    /// When it entered its phase.
    pub since: Time,
    /// When it started running (or was adopted).
    pub started: Option<Time>,
    /// Why it is being stopped.
    pub stop: Option<StopReason>,
    /// The grace a stop asked for instead of the spec's.
    pub grace: Option<Duration>,
    /// Its stop sequence sent SIGKILL.
    pub sent_kill: bool,
    /// Stopped while starting: when its start is given up.
    pub cancel_at: Option<Time>,
    /// What holds its process tree, once it runs.
    pub containment: Option<Containment>,
    /// Bytes delivered per stream: stdout, stderr, pty.
    pub offsets: [u64; 3],
    /// Which streams reached end of file: stdout, stderr, pty.
    pub eof: [bool; 3],
    /// Output bytes refused.
    pub discarded: u64,
    /// The rest of its process group after the leader exited.
    pub group: GroupImage,
    /// Input bytes handed to the driver and not yet confirmed written.
    pub pending_input: usize,
    /// Its stdin is closed: no more writes.
    pub input_closed: bool,
    /// How its leader exited, and the cause its end is reported with.
    pub exit: Option<(ExitStatus, ExitCause)>,
    /// When its leader exited (its allocation time until then).
    pub exited_at: Time,
    /// Taken back from a previous daemon at this instant.
    pub adopted: Option<Time>,
    /// Adopted with its I/O (a keeper held it across the crash).
    pub io_kept: bool,
    /// Adopted: when it started, in Unix milliseconds, as its descriptor recorded.
    pub started_unix_ms: Option<u64>,
    /// Adopted with its identity unverified, and not verified since.
    pub unverified: bool,
    /// Its leader is known to have exited and its status is awaited.
    pub leader_gone: bool,
    /// Whether it is ready, with its readiness deadlines.
    pub readiness: super::readiness::Readiness,
    /// Its liveness probe schedule.
    pub liveness: super::liveness::Liveness,
    /// Spawned with `on_busy: overlap` (it may start beside an older generation).
    pub overlap: bool,
}

/// Where a generation is (the core's lifecycle, with each phase's data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseImage {
    /// Waiting for older generations of its session to be gone.
    Pending,
    /// Spawn asked, result not in yet.
    Starting,
    /// Leader alive.
    Running { pid: u32 },
    /// Leader alive, stop sequence at `stage`; `until` is the next escalation.
    Stopping {
        pid: u32,
        stage: StopStage,
        until: Option<Time>,
    },
    /// Leader exited; output draining until EOF or `until` (`None`: the streams were
    /// asked closed and the answer is awaited).
    Draining { pid: u32, until: Option<Time> },
    /// Exit reported; waiting for the group, then reaped.
    Reported { pid: u32 },
    /// Reaped and released. Never found in an image: such a record is dropped within the
    /// turn that made it so.
    Gone,
}

/// The rest of a generation's process group after its leader exited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupImage {
    /// The leader has not exited yet.
    Alive,
    /// SIGTERM sent to the group; SIGKILL at `until`.
    Term { until: Time },
    /// SIGKILL sent to the group; reported `unkillable` at `until` if not empty by then.
    Killed { until: Time },
    /// SIGKILL sent, `kill_grace` passed, the group not empty: reported `unkillable`.
    Unkillable,
    /// Nothing more to do for the group.
    Done,
}

/// Why an image was not taken or not accepted: one sentence naming what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageError {
    message: String,
}

impl ImageError {
    pub(crate) fn new(message: impl Into<String>) -> ImageError {
        ImageError {
            message: message.into(),
        }
    }

    /// What is wrong, for the log.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ImageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "core image: {}", self.message)
    }
}

impl std::error::Error for ImageError {}
