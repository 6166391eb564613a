//! What of a session outlives the daemon, as plain data: the state directory writes a
//! [`SessionRecord`] for every session and a restarted daemon rebuilds its table from them.
//!
//! Only data lives here (the core stays free of I/O): the store encodes and decodes these
//! types, the driver converts between them and the table. Time is wall-clock Unix
//! milliseconds here, never [`Time`](super::Time): the core's clock starts with each
//! daemon, so a monotonic instant would mean nothing to the next one.

use std::sync::Arc;

use super::action::Event;
use super::restart::Rest;
use super::snapshot::LastEnd;
use super::spec::Spec;

/// One session as it is kept on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session's name (also its file name).
    pub name: Arc<str>,
    /// What it runs, its restart policy included.
    pub spec: Spec,
    /// What its clients last asked for.
    pub desired: Desired,
    /// Its state when nothing runs and no restart is pending.
    pub rest: RestState,
    /// Consecutive automatic restarts so far.
    pub restarts: u32,
    /// When a pending restart fires (the end of a backoff), Unix milliseconds.
    pub restart_at_unix_ms: Option<u64>,
    /// The generation commands addressed when this was written.
    pub current: Option<u64>,
    /// The last generation that was current.
    pub last_gen: Option<u64>,
    /// How the last current generation ended.
    pub last_end: Option<LastEnd>,
    /// Terminal events (`exited`, `spawn_failed`) of its latest ended generations, oldest
    /// first, at most [`RECENT_ENDS`](super::RECENT_ENDS): what a `wait` for a generation
    /// that already ended is answered with, across a restart too.
    pub recent_ends: Vec<Event>,
}

/// What a session's clients last asked for: whether anything may start it again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Desired {
    /// Running (spawned or restarted, and not stopped since): a restart policy applies.
    Up,
    /// Stopped by request: nothing restarts it until a client spawns or restarts it.
    Down,
    /// Being removed: it disappears once its generations are gone.
    Removing,
}

/// The state of a session with no current generation and no pending restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestState {
    /// Stopped by request, or never started.
    Stopped,
    /// Its process exited with code 0 and no restart applies.
    Exited,
    /// It ended badly and no restart applies (or restarts ran out).
    Failed,
}

impl From<Rest> for RestState {
    fn from(rest: Rest) -> RestState {
        match rest {
            Rest::Stopped => RestState::Stopped,
            Rest::Exited => RestState::Exited,
            Rest::Failed => RestState::Failed,
        }
    }
}

impl From<RestState> for Rest {
    fn from(rest: RestState) -> Rest {
        match rest {
            RestState::Stopped => Rest::Stopped,
            RestState::Exited => Rest::Exited,
            RestState::Failed => Rest::Failed,
        }
    }
}
