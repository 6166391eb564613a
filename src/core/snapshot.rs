//! Read-only views for `list` and `get`. Building one never fails: a failed session or an
//! unkillable generation is just a value in the list (invariant 6).

use std::sync::Arc;

use super::action::{ExitCause, SessionState};
use super::input::{Containment, SpawnError};
use super::spec::{Spec, Stream};
use super::time::Time;

/// One session as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionSnapshot {
    pub name: Arc<str>,
    pub state: SessionState,
    /// The generation commands address now.
    pub current: Option<u64>,
    /// Consecutive automatic restarts so far.
    pub restarts: u32,
    /// When a pending restart fires.
    pub restart_at: Option<Time>,
    /// How the last current generation ended.
    pub last_end: Option<LastEnd>,
    /// Every live generation, superseded ones included, oldest first.
    pub generations: Vec<GenerationSnapshot>,
    /// What only `get` shows: the spec and the latest ends.
    pub detail: Option<SessionDetail>,
    /// Why its current generation has not started: a dependency it waits for
    /// (`waiting for db to be ready`, `db: no such session`).
    pub waiting: Option<String>,
}

/// The parts of a session `get` shows and `list` leaves out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionDetail {
    /// The spec a restart (automatic or asked for) starts again.
    pub spec: Arc<Spec>,
    /// How its latest generations ended (superseded ones included), oldest first.
    pub recent_ends: Vec<LastEnd>,
}

/// How a session's last current generation ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LastEnd {
    /// It ran and exited.
    Exited {
        gen: u64,
        /// Code (128 + signal when signalled); `None` when lost.
        code: Option<i32>,
        signal: Option<i32>,
        cause: ExitCause,
    },
    /// It never ran.
    SpawnFailed { gen: u64, error: SpawnError },
}

impl LastEnd {
    /// The generation that ended.
    pub fn gen(&self) -> u64 {
        match self {
            LastEnd::Exited { gen, .. } | LastEnd::SpawnFailed { gen, .. } => *gen,
        }
    }
}

/// One live generation as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationSnapshot {
    pub gen: u64,
    /// Leader pid once spawned.
    pub pid: Option<u32>,
    /// Where it is.
    pub lifecycle: Lifecycle,
    /// When it entered that lifecycle step.
    pub since: Time,
    /// When it entered that lifecycle step in Unix milliseconds, where that was before
    /// this daemon's clock began (a generation taken back running: when it started), in
    /// place of `since`.
    pub since_unix_ms: Option<u64>,
    /// Whether a newer generation replaced it: one is current, or it was stopped for one.
    pub superseded: bool,
    /// Why it is being stopped, if it is.
    pub stop: Option<StopReason>,
    /// The cause its exit will be (or was) reported with, once the leader exited.
    pub cause: Option<ExitCause>,
    /// Whether it is ready (see the spec's `ready`).
    pub ready: super::readiness::ReadyState,
    /// Bytes emitted so far per stream.
    pub offsets: Vec<(Stream, u64)>,
    /// Output bytes refused (closed stream or after the report).
    pub discarded: u64,
    /// Input bytes queued but not yet written.
    pub pending_input: usize,
    /// The earliest instant this generation wants a timeout call, if any.
    pub deadline: Option<Time>,
    /// What holds its process tree, once it runs.
    pub containment: Option<Containment>,
    /// Whether it was taken back from a previous daemon, when, whether its identity is
    /// verified, and whether its output and input were lost with that daemon.
    pub adopted: Option<Adopted>,
}

/// How a generation was taken back from a previous daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// When.
    pub since: Time,
    /// Whether its process is verified to be the one the previous daemon started. While
    /// not, it is kept and listed but never signalled; its identity is checked again.
    pub verified: bool,
    /// Whether its output and input were lost with the previous daemon (no keeper held
    /// them); otherwise they are read and written as a spawned child's.
    pub io_lost: bool,
}

/// The lifecycle of a generation (see the design's diagram).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// Allocated, waiting for its predecessor to be gone.
    Pending,
    /// Spawn asked, result not yet in.
    Starting,
    /// Leader alive.
    Running,
    /// Leader alive, stop sequence at this stage.
    Stopping(StopStage),
    /// Leader exited (a zombie, unreaped); output draining.
    Draining,
    /// Exit reported; waiting for the group to empty, then reaped.
    Reported,
    /// Leader exited (draining or reported), and the rest of its tree survived SIGKILL for
    /// `kill_grace`: listed `unkillable`, as a stuck leader is, until the tree empties.
    TreeUnkillable,
    /// Reaped and released.
    Gone,
}

impl Lifecycle {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Pending => "pending",
            Lifecycle::Starting => "starting",
            Lifecycle::Running => "running",
            Lifecycle::Stopping(StopStage::Graceful) => "stopping",
            Lifecycle::Stopping(StopStage::Kill) => "killing",
            Lifecycle::Stopping(StopStage::Unkillable) | Lifecycle::TreeUnkillable => "unkillable",
            Lifecycle::Draining => "exited",
            Lifecycle::Reported => "reported",
            Lifecycle::Gone => "gone",
        }
    }
}

/// How far a stop sequence got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopStage {
    /// `stop_signal` sent; waiting `grace`.
    Graceful,
    /// SIGKILL sent; waiting `kill_grace`.
    Kill,
    /// Survived SIGKILL for `kill_grace`: reported, still watched.
    Unkillable,
}

/// Why a generation is being stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A client asked (stop or remove).
    Requested,
    /// A newer generation replaced it.
    Superseded,
}
