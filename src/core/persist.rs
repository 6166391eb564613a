//! What of a session outlives the daemon, as plain data: the state directory writes a
//! [`SessionRecord`] for every session and a restarted daemon rebuilds its table from them.
//!
//! Only data lives here (the core stays free of I/O): the store encodes and decodes these
//! types; the core exports them ([`Core::session_record`](super::Core::session_record),
//! with [`Core::take_dirty_sessions`](super::Core::take_dirty_sessions) saying which
//! changed) and rebuilds its table from them ([`Core::restore`](super::Core::restore)).
//! Time is wall-clock Unix milliseconds here, never [`Time`]: the core's clock starts with
//! each daemon, so a monotonic instant would mean nothing to the next one. [`WallClock`]
//! converts.

use std::sync::Arc;
use std::time::Duration;

use super::action::Event;
use super::error::Error;
use super::restart::Rest;
use super::snapshot::{LastEnd, StopReason, StopStage};
use super::spec::Spec;
use super::time::Time;

/// One session as it is kept on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session's name (also its file name).
    pub name: Arc<str>,
    /// What it runs, its restart policy included.
    pub spec: Spec,
    /// Who started it: the config's sessions are reconciled with the config at start.
    pub origin: super::Origin,
    /// What its clients last asked for.
    pub desired: Desired,
    /// Its state when nothing runs and no restart is pending.
    pub rest: RestState,
    /// Consecutive automatic restarts so far.
    pub restarts: u32,
    /// When a pending restart fires (the end of a backoff), Unix milliseconds: converted
    /// from and to the core's clock with a [`WallClock`] read at export and at restore.
    pub restart_at_unix_ms: Option<u64>,
    /// The pending restart retries a start the daemon was short of resources for: it does
    /// not add to `restarts` when it happens.
    pub restart_uncounted: bool,
    /// The generation commands addressed when this was written.
    pub current: Option<u64>,
    /// `current` was spawned with `on_busy: overlap`: if a crash caught it in its start,
    /// what takes its place starts beside the older generations too, not after them.
    pub current_overlaps: bool,
    /// A session of the config that the daemon's shutdown stopped (`desired` is `down`):
    /// the config starts it again when the next daemon starts, as a service manager's
    /// restart expects; one a client stopped stays stopped. Also set, with `desired`
    /// `up`, on one a crash left down (its generation lost), until the config's first
    /// load. Never on one that ended on its own: restored only with `rest` `stopped` or a
    /// `lost` last end, as older daemons also flagged a session done or `failed`.
    pub stopped_by_shutdown: bool,
    /// The last generation that was current.
    pub last_gen: Option<u64>,
    /// How the last current generation ended.
    pub last_end: Option<LastEnd>,
    /// Terminal events (`exited`, `spawn_failed`) of its latest ended generations, oldest
    /// first, at most [`RECENT_ENDS`](super::RECENT_ENDS): what a `wait` for a generation
    /// that already ended is answered with, across a restart too.
    pub recent_ends: Vec<Event>,
    /// Its generations with a stop under way, or whose tree is still being emptied after
    /// their leader's end, in number order: what a daemon taking them back after a crash
    /// needs to carry on where the stop was — its own grace and deadlines, no signal sent
    /// twice, the cause of a SIGKILL it sent. Empty in the records of earlier daemons
    /// (their stops begin again, as they did).
    pub stops: Vec<StopRecord>,
}

/// How far a generation's stop, or the emptying of its tree, got when its session's
/// record was written. Instants are Unix milliseconds (see [`WallClock`]): after a crash
/// only what was left of a deadline remains.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopRecord {
    /// The generation.
    pub gen: u64,
    /// Why it is being stopped; `None` when nothing stopped it (its leader ended on its
    /// own, and only what it left is being emptied).
    pub reason: Option<StopReason>,
    /// The grace a stop asked for instead of its spec's (the shortest one asked).
    pub grace: Option<Duration>,
    /// Where its leader's stop sequence was, while the leader ran: the stage (its signal
    /// sent) and the instant of its next step; `None` once the leader ended, or before
    /// anything was sent to it.
    pub leader: Option<LeaderStop>,
    /// SIGKILL was sent to its leader by the stop: a SIGKILL end is then `killed`.
    pub sent_kill: bool,
    /// Its tree after the leader's end: signalled, and until when.
    pub tree: Option<TreeStop>,
}

/// A leader's stop sequence, as a record keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderStop {
    /// How far it got: its signal was sent.
    pub stage: StopStage,
    /// When its next step is due (SIGKILL after `graceful`, `unkillable` after `kill`);
    /// `None` for `unkillable`.
    pub until_unix_ms: Option<u64>,
}

/// A tree being emptied after its leader's end, as a record keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeStop {
    /// SIGTERM sent to the tree; SIGKILL due then.
    Term { until_unix_ms: u64 },
    /// SIGKILL sent to the tree; `unkillable` if not empty by then.
    Killed { until_unix_ms: u64 },
    /// SIGKILL sent and `kill_grace` passed with a member still there.
    Unkillable,
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

/// The core's clock paired with the wall clock read at the same moment: how an instant of
/// the core ([`Time`], milliseconds since this daemon started) becomes the Unix
/// milliseconds a record holds, and back.
///
/// The driver reads both clocks together (`CLOCK_MONOTONIC` as it feeds the core, and
/// `CLOCK_REALTIME`) whenever it exports or restores records. A pending restart is saved
/// as `unix_ms + (restart_at - now)`, and restored as `now + (restart_at_unix_ms -
/// unix_ms)`: only the remaining backoff crosses the restart, and a wall-clock step while
/// no daemon ran moves it by the step, never by more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WallClock {
    /// The core's instant.
    pub now: Time,
    /// Unix milliseconds at that instant.
    pub unix_ms: u64,
}

impl WallClock {
    /// The Unix milliseconds of the core's instant `t`.
    pub fn unix_ms_of(self, t: Time) -> u64 {
        let (t, now) = (t.as_millis(), self.now.as_millis());
        if t >= now {
            self.unix_ms.saturating_add(t - now)
        } else {
            self.unix_ms.saturating_sub(now - t)
        }
    }

    /// The core's instant at Unix milliseconds `unix_ms`; one already past is `now`'s or
    /// earlier (so it is due at once).
    pub fn time_of(self, unix_ms: u64) -> Time {
        let now = self.now.as_millis();
        if unix_ms >= self.unix_ms {
            Time::from_millis(now.saturating_add(unix_ms - self.unix_ms))
        } else {
            Time::from_millis(now.saturating_sub(self.unix_ms - unix_ms))
        }
    }
}

/// Why one record was not restored (the others were).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RestoreProblem {
    /// The record's session.
    pub session: Arc<str>,
    /// What is wrong with it, for the log.
    pub error: Error,
}
