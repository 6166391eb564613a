//! A session's record: its spec, which generation is current, and its restart state.

use std::collections::VecDeque;
use std::sync::Arc;

use super::action::{Event, ExitCause, SessionState};
use super::reload::Origin;
use super::restart::Rest;
use super::snapshot::LastEnd;
use super::spec::Spec;
use super::time::Time;

/// Terminal events remembered per session for late `wait`s: enough for a client to wait
/// for a generation it just replaced, small enough to keep an idle session cheap.
pub const RECENT_ENDS: usize = 8;

/// Generations one session may track at once (its current one and those still ending):
/// each is listed in the session's entry of `list` and `get`, which must stay a bounded
/// line however often a session was replaced or overlapped while its predecessors took
/// long to stop. A start beyond it is refused with `limit` (a restart its policy asks
/// for waits in backoff), as for the daemon-wide `--max-running`.
pub const MAX_LIVE_GENERATIONS: usize = 64;

/// One session. It outlives its generations; a removed one stays until they are gone, so
/// a re-created session of the same name never runs next to its predecessor.
#[derive(Debug)]
pub(crate) struct Session {
    pub name: Arc<str>,
    pub spec: Arc<Spec>,
    /// Who started it: a reload touches only the config's sessions.
    pub origin: Origin,
    /// The generation commands address, until its own terminal event or a newer spawn.
    pub current: Option<u64>,
    /// The last generation that was current, for `State` events.
    pub last_gen: Option<u64>,
    /// False after a stop or remove: nothing may restart it (the pm2#1043 trap).
    pub want_up: bool,
    /// A session of the config that the daemon's end left down, not a client: stopped by
    /// its shutdown (running, or a restart due, when it began), or found down after a
    /// crash (its process lost with the daemon — a container's PID 1 killed takes every
    /// process with it — and no restart due). The config starts it again at the next start
    /// (see [`super::Plan`]), as at a first one. Never one that ended on its own and rests
    /// `exited` or `failed` (a one-shot done, restarts run out): a restart leaves it as a
    /// reload would.
    pub stopped_by_shutdown: bool,
    pub removing: bool,
    /// The generation a restarted daemon is stopping because its input and output died
    /// with the daemon before (`on_recover: stop`): its end is not a stop anyone asked
    /// for, so the restart policy follows it (until a client's stop says otherwise).
    pub recovery_stop: Option<u64>,
    /// During a start-up only (between restore and resume): a generation older than the
    /// recorded current one was taken back, even if found gone at once — so the current
    /// one, if nothing describes it, was a replacement waiting for it.
    pub older_taken_back: bool,
    /// During a start-up only (between restore and resume): the record named a current
    /// generation, so a lost end found at resume is the crash's doing, not an earlier one.
    pub taken_back_current: bool,
    /// During a start-up only: the recorded current generation was spawned with
    /// `on_busy: overlap` (see [`super::SessionRecord::current_overlaps`]).
    pub current_overlaps: bool,
    /// Consecutive automatic restarts made: counted as each restart's generation is
    /// created (see [`Session::restart_uncounted`]), never when one is only scheduled.
    pub restarts: u32,
    pub restart_at: Option<Time>,
    /// The pending restart (`restart_at`) tries again a start the daemon was short of
    /// resources for: not the session's failure, so it does not add to `restarts`. Kept
    /// across a crash and an upgrade (a record or image without it: the restart counts).
    pub restart_uncounted: bool,
    /// State when nothing runs and no restart is pending.
    pub rest: Rest,
    pub last_end: Option<LastEnd>,
    /// The terminal events of its latest ended generations (superseded ones included),
    /// newest last: what a `wait` for a generation that already ended is answered with.
    pub(super) recent_ends: VecDeque<Event>,
    /// The last state announced, so each change is emitted once.
    pub announced: Option<SessionState>,
}

impl Session {
    pub fn new(name: Arc<str>, spec: Arc<Spec>) -> Session {
        Session {
            name,
            spec,
            origin: Origin::Client,
            current: None,
            last_gen: None,
            want_up: true,
            stopped_by_shutdown: false,
            removing: false,
            recovery_stop: None,
            older_taken_back: false,
            taken_back_current: false,
            current_overlaps: false,
            restarts: 0,
            restart_at: None,
            restart_uncounted: false,
            rest: Rest::Stopped,
            last_end: None,
            recent_ends: VecDeque::new(),
            announced: None,
        }
    }

    /// Remembers a generation's terminal event, forgetting the oldest beyond
    /// [`RECENT_ENDS`].
    pub fn remember_end(&mut self, event: Event) {
        if self.recent_ends.len() >= RECENT_ENDS {
            self.recent_ends.pop_front();
        }
        self.recent_ends.push_back(event);
    }

    /// The remembered terminal events, oldest first.
    pub fn recent_ends(&self) -> impl Iterator<Item = &Event> {
        self.recent_ends.iter()
    }

    /// The terminal event of `gen`, if it is among the remembered ones.
    pub fn recent_end(&self, gen: u64) -> Option<&Event> {
        self.recent_ends.iter().rev().find(|e| e.gen() == Some(gen))
    }

    /// Whether resting as `rest` after `last_end` may be the daemon's doing (its shutdown
    /// or a crash): stopped, or its last generation lost with the daemon. One that rests
    /// `exited` or `failed` by an end of its own was not left down by anyone, whatever an
    /// older daemon's record says (older daemons flagged those too).
    pub fn down_by_daemon(rest: Rest, last_end: Option<&LastEnd>) -> bool {
        rest == Rest::Stopped
            || matches!(
                last_end,
                Some(LastEnd::Exited {
                    cause: ExitCause::Lost,
                    ..
                })
            )
    }

    /// Validates a session name: `[A-Za-z0-9._-]{1,64}`, not starting with `.` (so it is
    /// safe as a file name in the state directory).
    pub fn valid_name(name: &str) -> bool {
        Session::name_problem(name).is_none()
    }

    /// What is wrong with `name`, said precisely for an error message.
    pub fn name_problem(name: &str) -> Option<String> {
        if name.is_empty() {
            return Some("session name is empty".into());
        }
        if name.len() > 64 {
            return Some(format!("session name is {} bytes, limit 64", name.len()));
        }
        if name.starts_with('.') {
            return Some("session name may not start with `.`".into());
        }
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        name.chars().find(|&c| !ok(c)).map(|c| {
            format!("session name contains {c:?}; allowed: letters, digits, `.`, `_`, `-`")
        })
    }
}

impl Rest {
    pub fn state(self) -> SessionState {
        match self {
            Rest::Stopped => SessionState::Stopped,
            Rest::Exited => SessionState::Exited,
            Rest::Failed => SessionState::Failed,
        }
    }
}
