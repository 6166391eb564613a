//! The sans-IO supervisor core: no syscalls, no clock, no randomness.
//!
//! [`Core`] is a deterministic state machine in the style of quinn-proto: the caller feeds
//! it `(now, Input)` and pulls [`Action`]s; time only enters as an argument. This is what
//! the tests and the fuzzer drive with arbitrary orderings of events, and what the driver
//! executes against the operating system.

mod action;
mod blocked;
#[cfg(any(test, feature = "testkit"))]
pub mod check;
mod commands;
mod config;
mod deadlines;
pub mod depends;
mod durable;
mod error;
mod generation;
mod image;
mod input;
pub mod liveness;
mod log_spec;
mod order;
mod persist;
pub mod readiness;
mod reload;
mod restart;
mod run_as;
mod session;
pub mod signal;
mod snapshot;
mod spec;
mod time;
mod timers;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Arc;

pub use action::{Action, Event, ExitCause, OutputAt, Response, Scope, SessionState};
pub use config::Config;
pub use depends::{DependOn, Dependencies};
pub use error::{Error, ErrorCode};
pub use image::{
    CoreImage, GenerationImage, GroupImage, ImageError, PhaseImage, SessionImage, ShutdownImage,
};
pub use input::{
    AdoptedIo, Command, Containment, ExitStatus, Input, SpawnError, SpawnErrorKind, Started,
};
pub use liveness::{LiveCheck, Liveness};
pub use log_spec::LogFile;
pub use persist::{
    Desired, LeaderStop, RestState, RestoreProblem, SessionRecord, StopRecord, TreeStop, WallClock,
};
pub use readiness::{Readiness, ReadyCheck, ReadyHow, ReadySignal, ReadyState};
pub use reload::{ConfigSession, Origin, Plan};
pub use run_as::{check_id_name, Rlimit, RlimitBound, RlimitValue, RunAs, MAX_GROUPS};
pub use session::{MAX_LIVE_GENERATIONS, RECENT_ENDS};
pub use snapshot::{
    Adopted, GenerationSnapshot, LastEnd, Lifecycle, SessionDetail, SessionSnapshot, StopReason,
    StopStage,
};
pub use spec::{
    CpuQuota, Env, IoMode, OnBusy, OnExit, OnRecover, ResourceLimits, Restart, RestartPolicy, Spec,
    Stderr, Stream,
};
pub use time::Time;

use generation::{Ended, GenInput, Generation, Outcome, Phase};
use restart::{Decision, Rest};
use session::Session;

/// Generation numbers are below this (2^59): the loop names each generation's
/// descriptors by its number in a 64-bit poll token beside the descriptor's kind, so a
/// larger one could be allocated but never watched. A counter that starts at 1 never gets
/// here; a number on disk that does (a damaged record) is refused when it is read.
pub const GEN_LIMIT: u64 = 1 << 59;

/// Whether `name` is a valid session name: `[A-Za-z0-9._-]{1,64}`, not starting with `.`
/// (so it is safe as a file name in the state directory). The protocol layer can check
/// early; the core checks again on every command.
pub fn is_valid_session_name(name: &str) -> bool {
    Session::valid_name(name)
}

/// Checks a session name, saying precisely what is wrong with it.
pub fn check_session_name(name: &str) -> Result<(), String> {
    Session::name_problem(name).map_or(Ok(()), Err)
}

/// The supervisor's whole decision state: sessions, generations, timers.
///
/// # Call contract
///
/// - After every [`handle`](Core::handle) or [`handle_timeout`](Core::handle_timeout),
///   drain [`poll_action`](Core::poll_action) until `None` and execute the actions in
///   order, then re-read [`next_deadline`](Core::next_deadline) and arm the poll timeout
///   with it. Each call queues a bounded number of actions (a few per generation of the
///   sessions it touches), so draining after every call keeps the queue bounded.
/// - `now` must come from a monotonic clock and never go backwards. A smaller `now` than
///   one seen before is treated as the latest one seen (clamped), so a misbehaving clock
///   can delay deadlines but never reorder them.
/// - Call `handle_timeout` when the deadline passes. A spare or early call is harmless: it
///   only acts on deadlines that are due.
/// - Inputs about a generation may arrive late, twice, or for one already gone: they are
///   applied to that generation only, or ignored. Nothing about one generation ever
///   changes another.
/// - State that outlives the daemon: after every call, write the records of the sessions
///   [`take_dirty_sessions`](Core::take_dirty_sessions) names; a new daemon rebuilds the
///   table with [`restore`](Core::restore) (whose docs give the whole start-up), `Adopt`
///   and [`resume`](Core::resume).
/// - An upgrade by re-exec keeps everything instead: between turns (actions drained),
///   [`export_image`](Core::export_image) gives the whole state as a [`CoreImage`]; the
///   new binary, its clock continuing the old one's, builds its core with
///   [`import_image`](Core::import_image) and carries on as if nothing happened.
///
/// # Examples
///
/// ```
/// use genward::core::{Action, Command, Config, Core, Input, OnBusy, Response, Spec, Started, Time};
///
/// let mut core = Core::new(Config::default(), 1);
/// let spec = Box::new(Spec::new(vec![b"make".to_vec()]));
/// let command = Command::Spawn {
///     session: "build".into(),
///     if_gen: None,
///     spec,
///     on_busy: OnBusy::Replace,
/// };
/// core.handle(Time::ZERO, Input::Command { request: 7, command });
/// let mut spawned = None;
/// while let Some(action) = core.poll_action() {
///     match action {
///         // The driver forks and execs here, then answers with Input::SpawnResult.
///         Action::Spawn { gen, .. } => spawned = Some(gen),
///         Action::Reply { request, result } => assert_eq!((request, result), (7, Ok(Response::Gen(1)))),
///         _ => {}
///     }
/// }
/// assert_eq!(spawned, Some(1));
/// let started = Ok(Started::in_session(4242));
/// core.handle(Time::from_millis(3), Input::SpawnResult { gen: 1, result: started });
/// assert!(core.poll_action().is_some()); // the `spawned` event, then more
/// ```
#[derive(Debug)]
pub struct Core {
    config: Config,
    now: Time,
    next_gen: u64,
    sessions: BTreeMap<Arc<str>, Session>,
    gens: BTreeMap<u64, Generation>,
    actions: VecDeque<Action>,
    shutdown: Shutdown,
    /// Sessions whose record changed since [`take_dirty_sessions`](Core::take_dirty_sessions).
    dirty: BTreeSet<Arc<str>>,
    /// Every pending deadline in time order: what a loop turn reads instead of a scan.
    deadlines: deadlines::Deadlines,
    /// Sessions a generation input reached since the last announcement of states.
    touched: BTreeSet<Arc<str>>,
    /// Every tracked generation under its session's name, so one session's generations
    /// are found without a scan of the whole table (`get`, a start, a remove).
    by_session: BTreeSet<(Arc<str>, u64)>,
    /// Sessions whose Pending current generation waits for its dependencies, indexed by
    /// what they wait on.
    blocked: blocked::Blocked,
    /// Generations the shutdown stops only once the sessions depending on theirs ended.
    deferred_stops: BTreeSet<u64>,
    /// Between [`restore`](Core::restore) and [`resume`](Core::resume): the stops the
    /// records say were under way, by generation, for the generations taken back.
    taken_stops: BTreeMap<u64, generation::DurableStop>,
    /// Between `restore` and `resume`: the generations taken back for their tree
    /// ([`Input::AdoptTree`]), whose tree `resume` kills.
    trees_taken: BTreeSet<u64>,
}

/// How far the daemon's shutdown got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shutdown {
    Running,
    /// Every generation is walking its stop sequence.
    Stopping,
    /// Asked twice: everything is killed at once.
    Killing,
}

/// What a `wait` is answered with (see [`Core::wait_for`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitFor {
    /// The generation already ended: its terminal event.
    Ended(Event),
    /// The generation is live: answer with its terminal event when it is emitted.
    Live(u64),
}

impl Core {
    /// A core with no sessions whose first generation will be `first_gen` (at least 1).
    /// After a restart, pass the persisted [`next_generation`](Core::next_generation) so
    /// numbers are never reused.
    pub fn new(config: Config, first_gen: u64) -> Core {
        Core {
            config,
            now: Time::ZERO,
            next_gen: first_gen.max(1),
            sessions: BTreeMap::new(),
            gens: BTreeMap::new(),
            actions: VecDeque::new(),
            shutdown: Shutdown::Running,
            dirty: BTreeSet::new(),
            deadlines: deadlines::Deadlines::default(),
            touched: BTreeSet::new(),
            by_session: BTreeSet::new(),
            blocked: Default::default(),
            deferred_stops: BTreeSet::new(),
            taken_stops: BTreeMap::new(),
            trees_taken: BTreeSet::new(),
        }
    }

    /// The next generation number to be allocated: the high-water mark the store persists
    /// (every allocated number is below it).
    pub fn next_generation(&self) -> u64 {
        self.next_gen
    }

    /// The limits in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Feeds one input at `now`.
    pub fn handle(&mut self, now: Time, input: Input) {
        self.advance_clock(now);
        let (gen, gen_input) = match input {
            Input::Command { request, command } => {
                self.mark_commanded(&command);
                let result = self.command(command);
                self.actions.push_back(Action::Reply { request, result });
                self.follow_order();
                self.announce_states();
                return;
            }
            Input::SpawnResult {
                gen,
                result: Ok(started),
            } => (gen, GenInput::SpawnOk(started)),
            Input::SpawnResult {
                gen,
                result: Err(e),
            } => (gen, GenInput::SpawnErr(e)),
            Input::Eof { gen, stream } => (gen, GenInput::Eof(stream)),
            Input::OutputClosed { gen, unread } => (gen, GenInput::OutputClosed { unread }),
            Input::LeaderExited { gen, status } => (gen, GenInput::LeaderExited(status)),
            Input::LeaderGone { gen } => (gen, GenInput::LeaderGone),
            Input::GroupEmpty { gen } => (gen, GenInput::GroupEmpty),
            Input::Lost { gen } => (gen, GenInput::Lost),
            Input::Adopt {
                gen,
                session,
                pid,
                containment,
                verified,
                io,
                started_unix_ms,
            } => {
                let started = Started { pid, containment };
                self.adopt(gen, &session, started, verified, io, started_unix_ms);
                self.follow_order();
                self.announce_states();
                return;
            }
            Input::AdoptTree { gen, session, pid } => {
                self.adopt_tree(gen, &session, pid);
                self.announce_states();
                return;
            }
            Input::Verified { gen } => (gen, GenInput::Verified),
            Input::Readiness { gen, signal } => (gen, GenInput::Readiness(signal)),
            Input::Liveness { gen, probe, ok } => (gen, GenInput::Liveness { probe, ok }),
            Input::InputWritten { gen, len } => {
                if let Some(g) = self.gens.get_mut(&gen) {
                    g.input.pending = g.input.pending.saturating_sub(len);
                }
                return;
            }
            Input::InputError { gen } => {
                if let Some(g) = self.gens.get_mut(&gen) {
                    // Announced once, only for a generation that ran, and never after its
                    // terminal event.
                    let announce = !g.input.closed
                        && matches!(
                            g.phase,
                            Phase::Running { .. } | Phase::Stopping { .. } | Phase::Draining { .. }
                        );
                    g.input = generation::InputState {
                        pending: 0,
                        closed: true,
                    };
                    if announce {
                        self.actions.push_back(Action::Emit(Event::InputClosed {
                            session: g.session.clone(),
                            gen,
                        }));
                    }
                }
                return;
            }
        };
        self.dispatch(gen, gen_input);
        self.follow_order();
        self.announce_states();
    }

    /// After an input: blocked sessions whose dependencies are met start, and deferred
    /// shutdown stops whose dependents ended begin.
    fn follow_order(&mut self) {
        self.retry_blocked();
        self.release_deferred_stops();
    }

    /// `len` bytes were read from `gen`'s `stream`: where they belong, or `None` when the
    /// generation may not deliver them (not running yet, exit already reported, streams
    /// closed, a stream it does not have, or gone), and then they are counted as discarded.
    ///
    /// The hot path: it changes nothing but the generation's offsets and queues no action,
    /// so the caller frames the bytes it holds right away.
    pub fn output(&mut self, gen: u64, stream: Stream, len: usize) -> Option<OutputAt> {
        let g = self.gens.get_mut(&gen)?;
        let offset = g.output(stream, len)?;
        Some(OutputAt {
            session: g.session.clone(),
            offset,
        })
    }

    /// Whether a keeper is to hold `gen`'s descriptors: one this daemon (or one it was
    /// upgraded from) spawned, or one taken back with its I/O — never one taken back
    /// without it, which a keeper's copies would make look resumable after a next crash.
    pub fn keeper_holds(&self, gen: u64) -> bool {
        self.gens
            .get(&gen)
            .is_some_and(|g| g.adopted.is_none() || g.io_kept)
    }

    /// The session `gen` belongs to, while the core knows `gen`.
    pub fn session_of(&self, gen: u64) -> Option<Arc<str>> {
        self.gens.get(&gen).map(|g| g.session.clone())
    }

    /// Whether `gen`'s spec leaves what its leader started when the leader exits
    /// (`on_exit: leave`), while the core knows `gen`.
    pub fn leaves_group(&self, gen: u64) -> bool {
        self.gens
            .get(&gen)
            .is_some_and(|g| g.spec.on_exit == OnExit::Leave)
    }

    /// Whether `gen` was spawned and its leader's end has not been told yet (its exit
    /// with a status, or `Lost`; after `LeaderGone` the status is still awaited): the
    /// driver asks the process only then (a pidfd stays readable after the exit, and
    /// SIGCHLD does not say whose).
    pub fn awaits_exit(&self, gen: u64) -> bool {
        self.gens.get(&gen).is_some_and(Generation::is_live_leader)
    }

    /// The generations of `session` whose leader's end is still awaited (see
    /// [`Core::awaits_exit`]). Before a command that ends them, the driver asks each
    /// whether it exited already: an exit that came first is then told first, and keeps
    /// its own cause rather than the stop's.
    pub fn awaiting_exit_in(&self, session: &str) -> Vec<u64> {
        let name: Arc<str> = Arc::from(session);
        self.gens_of(&name)
            .filter(|gen| self.awaits_exit(*gen))
            .collect()
    }

    /// Every generation whose leader's end is still awaited, for a command that may end
    /// any of them (a shutdown, a reload): see [`Core::awaiting_exit_in`].
    pub fn awaiting_exit(&self) -> Vec<u64> {
        self.gens
            .values()
            .filter(|g| g.is_live_leader())
            .map(|g| g.gen)
            .collect()
    }

    /// Whether output read from `gen` now would still be delivered (see
    /// [`Core::output`]): until its exit is reported or its drain deadline passed. Only
    /// then may a reader hold it back.
    pub fn delivers_output(&self, gen: u64) -> bool {
        self.gens.get(&gen).is_some_and(Generation::delivers_output)
    }

    /// Generations whose leader exited and whose process group may still hold members
    /// that were sent SIGTERM, each with its group id (the leader's pid): the driver
    /// looks for the group to empty and answers with `Input::GroupEmpty`.
    pub fn groups_awaited(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.gens
            .values()
            .filter_map(|g| g.awaited_group().map(|pgid| (g.gen, pgid)))
    }

    /// Which end a `wait` for `gen` of `session` (default: the current generation, or the
    /// last one that ended) is answered with: one already emitted, or the terminal event
    /// of a generation still live.
    pub fn wait_for(&self, session: &str, gen: Option<u64>) -> Result<WaitFor, Error> {
        let s = self.session(session)?;
        let last = s.last_end.as_ref().map(LastEnd::gen);
        let Some(g) = gen.or(s.current).or(last) else {
            let what = format!("session `{session}` has no generation to wait for");
            return Err(Error::new(ErrorCode::NotRunning, what));
        };
        if let Some(end) = s.recent_end(g) {
            return Ok(WaitFor::Ended(end.clone()));
        }
        if self.gens.get(&g).is_some_and(|x| x.session == s.name) {
            return Ok(WaitFor::Live(g));
        }
        let what = format!("{session} gen {g}: not known (ended long ago, or never existed)");
        Err(Error::new(ErrorCode::NotRunning, what))
    }

    /// What a `wait` for the readiness of `gen` of `session` (default: the current
    /// generation, or the last one that ended) is answered with: its `ready` or
    /// `ready_failed` event when decided, its terminal event when it ended first (at once,
    /// or once reported), or the generation to watch. A generation without a `ready` check
    /// is ready once spawned.
    pub fn wait_ready(&self, session: &str, gen: Option<u64>) -> Result<WaitFor, Error> {
        let target = self.wait_for(session, gen)?;
        let WaitFor::Live(g) = target else {
            return Ok(target);
        };
        let decided = self.ready_event(g).filter(Event::settles_ready_wait);
        Ok(decided.map_or(WaitFor::Live(g), WaitFor::Ended))
    }

    /// Every generation whose leader runs, with its spec and whether its readiness is
    /// still awaited: what a driver that lost its run-time state (an upgrade) needs to go
    /// on with their `ready` and `live` checks.
    pub fn running_checks(&self) -> impl Iterator<Item = (u64, Arc<Spec>, bool)> + '_ {
        self.gens
            .values()
            .filter(|g| g.is_live_leader() && (g.spec.ready.is_some() || g.spec.live.is_some()))
            .map(|g| {
                let waiting = matches!(g.readiness, readiness::Readiness::Waiting { .. });
                (g.gen, g.spec.clone(), waiting)
            })
    }

    /// The event saying `gen`'s readiness is decided (`ready` / `ready_failed`), if it is.
    pub fn ready_event(&self, gen: u64) -> Option<Event> {
        let g = self.gens.get(&gen)?;
        let session = g.session.clone();
        match &g.readiness {
            readiness::Readiness::Ready => Some(Event::Ready { session, gen }),
            readiness::Readiness::Failed(why) => Some(Event::ReadyFailed {
                session,
                gen,
                reason: why.clone(),
            }),
            _ => None,
        }
    }

    /// Whether a shutdown was asked for (it may still be stopping generations).
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown != Shutdown::Running
    }

    /// Whether a shutdown was asked for and nothing more can be done: every generation is
    /// gone, or survived SIGKILL for its `kill_grace` (`unkillable`: a process stuck in the
    /// kernel outlives any supervisor; the daemon says so and exits rather than hang).
    ///
    /// A generation adopted unverified and never verified does not hold the daemon up
    /// either: it was never signalled, so its stop never began; it stays described on
    /// disk for the next daemon.
    pub fn is_shut_down(&self) -> bool {
        self.shutdown != Shutdown::Running
            && self
                .gens
                .values()
                .all(|g| g.is_unkillable() || g.is_unverified())
    }

    /// The next action for the driver, in order.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Actions queued and not yet polled.
    pub fn queued_actions(&self) -> usize {
        self.actions.len()
    }

    /// Snapshots of every session, each with all its live generations. Never fails.
    pub fn list(&self) -> Vec<SessionSnapshot> {
        self.sessions.values().map(|s| self.snapshot(s)).collect()
    }

    /// Up to `limit` sessions whose names come after `after` (all from the first when
    /// `None`), in name (byte) order, and whether more follow. Only those sessions'
    /// snapshots are built, so a client reading a large table page by page costs the
    /// daemon one page of memory at a time; keyed by name rather than by position, a page
    /// needs no state kept between requests, and a session created or removed meanwhile
    /// can never make another appear twice.
    pub fn list_page(&self, after: Option<&str>, limit: usize) -> (Vec<SessionSnapshot>, bool) {
        let start = match after {
            Some(name) => Bound::Excluded(name),
            None => Bound::Unbounded,
        };
        let mut range = self
            .sessions
            .range::<str, _>((start, Bound::Unbounded))
            .map(|(_, s)| s);
        let page: Vec<SessionSnapshot> = range
            .by_ref()
            .take(limit)
            .map(|s| self.snapshot(s))
            .collect();
        (page, range.next().is_some())
    }

    /// Whether session `session` exists (without building its snapshot).
    pub fn has_session(&self, session: &str) -> bool {
        self.sessions.contains_key(session)
    }

    /// The replay log size session `session`'s spec asks for (its `buffer`).
    pub fn buffer_bytes(&self, session: &str) -> Option<usize> {
        self.sessions.get(session).map(|s| s.spec.buffer_bytes)
    }

    /// The snapshot of session `session`, if there is one.
    pub fn get(&self, session: &str) -> Option<SessionSnapshot> {
        self.sessions.get(session).map(|s| self.snapshot(s))
    }

    /// Generations tracked right now (pending through reported).
    pub fn generation_count(&self) -> usize {
        self.gens.len()
    }

    /// Whether `session`'s current generation has started (a pending one, waiting for its
    /// dependencies or for the generations it replaces, has not): what `on_busy: reject`
    /// leaves as it is.
    fn runs_its_current(&self, session: &Session) -> bool {
        session
            .current
            .and_then(|gen| self.gens.get(&gen))
            .is_some_and(|g| !matches!(g.phase, generation::Phase::Pending))
    }

    /// Sessions in the table, removing ones included.
    pub fn session_count(&self) -> usize {
        self.sessions.len()
    }

    /// Marks what a command may change in the records, before it runs: the session it
    /// names, or every session for a shutdown (a refused command marks a record that did
    /// not change: a spare write, never a missed one). Commands that only address a process (`write`, `signal`,
    /// ...) or only read change no record.
    fn mark_commanded(&mut self, command: &Command) {
        let name = match command {
            Command::Spawn { session, .. }
            | Command::Stop { session, .. }
            | Command::Restart { session, .. }
            | Command::Remove { session } => session,
            Command::Shutdown => {
                let all: Vec<Arc<str>> = self.sessions.keys().cloned().collect();
                all.into_iter().for_each(|name| self.mark_dirty(name));
                return;
            }
            Command::Write { .. }
            | Command::CloseInput { .. }
            | Command::Resize { .. }
            | Command::Signal { .. }
            | Command::List
            | Command::Get { .. } => return,
        };
        // Only an existing session (or one the command creates, marked by `spawn`): a
        // refused command naming nothing must not grow the set.
        if let Some((key, _)) = self.sessions.get_key_value(name.as_str()) {
            self.mark_dirty(key.clone());
        }
    }

    fn advance_clock(&mut self, now: Time) {
        self.now = self.now.max(now);
    }

    fn snapshot(&self, s: &Session) -> SessionSnapshot {
        let generations = self
            .gens_of(&s.name)
            .filter_map(|gen| self.gens.get(&gen))
            .map(|g| g.snapshot(s.current.is_some_and(|c| c > g.gen)))
            .collect();
        SessionSnapshot {
            name: s.name.clone(),
            state: self.state_of(s),
            current: s.current,
            restarts: s.restarts,
            restart_at: s.restart_at,
            last_end: s.last_end.clone(),
            generations,
            detail: None,
            waiting: self.waiting_reason(s),
        }
    }

    /// A session as `get` shows it: its snapshot with its spec and latest ends.
    fn detailed_snapshot(&self, s: &Session) -> SessionSnapshot {
        let recent_ends = s
            .recent_ends()
            .filter_map(|e| match e {
                Event::Exited {
                    gen,
                    code,
                    signal,
                    cause,
                    ..
                } => Some(LastEnd::Exited {
                    gen: *gen,
                    code: *code,
                    signal: *signal,
                    cause: *cause,
                }),
                Event::SpawnFailed { gen, error, .. } => Some(LastEnd::SpawnFailed {
                    gen: *gen,
                    error: error.clone(),
                }),
                _ => None,
            })
            .collect();
        SessionSnapshot {
            detail: Some(SessionDetail {
                spec: s.spec.clone(),
                recent_ends,
            }),
            ..self.snapshot(s)
        }
    }

    /// The numbers of `name`'s tracked generations, oldest first, from the index.
    fn gens_of(&self, name: &Arc<str>) -> impl Iterator<Item = u64> + '_ {
        let span = (name.clone(), 0)..=(name.clone(), u64::MAX);
        self.by_session.range(span).map(|(_, gen)| *gen)
    }

    /// Whether the per-session index of generations equals a scan of the table: the
    /// oracle of the invariant checker.
    pub fn generation_index_is_exact(&self) -> bool {
        let scan: BTreeSet<(Arc<str>, u64)> = self
            .gens
            .values()
            .map(|g| (g.session.clone(), g.gen))
            .collect();
        scan == self.by_session
    }

    /// Sessions whose state changed and was not announced, by a scan of the table: the
    /// oracle of the invariant checker (always 0 between calls).
    pub fn unannounced_states(&self) -> usize {
        let stale = |s: &&Session| s.announced != Some(self.state_of(s));
        self.sessions.values().filter(stale).count()
    }

    fn state_of(&self, s: &Session) -> SessionState {
        if s.removing {
            return SessionState::Removing;
        }
        let current = s.current.and_then(|g| self.gens.get(&g));
        match current.map(|g| g.phase) {
            // A stop that arrived while spawning runs as soon as the spawn is confirmed.
            Some(Phase::Starting) if current.is_some_and(|g| g.stop.is_some()) => {
                SessionState::Stopping
            }
            Some(Phase::Pending | Phase::Starting) => SessionState::Starting,
            // Likewise a stop of a process whose identity is not verified yet.
            Some(Phase::Running { .. })
                if current.is_some_and(|g| g.is_unverified() && g.stop.is_some()) =>
            {
                SessionState::Stopping
            }
            Some(Phase::Running { .. }) => SessionState::Running,
            Some(Phase::Stopping { .. }) => SessionState::Stopping,
            Some(Phase::Draining { .. } | Phase::Reported { .. }) => SessionState::Exiting,
            Some(Phase::Gone) | None if s.restart_at.is_some() => SessionState::Backoff,
            Some(Phase::Gone) | None => s.rest.state(),
        }
    }

    /// A session's record changed: the driver writes it at its next sync
    /// ([`take_dirty_sessions`](Core::take_dirty_sessions)), and the next announcement
    /// and look at blocked sessions consider it. (The two sets are kept apart: the driver
    /// may write a slice of requests' records together, and a set that only grew until
    /// then must not be scanned after each request.)
    fn mark_dirty(&mut self, name: Arc<str>) {
        self.touched.insert(name.clone());
        self.dirty.insert(name);
    }

    /// Emits a `State` event for every session whose state changed since last announced.
    /// Only sessions touched since the last call are looked at — those a generation input
    /// reached, and those whose record changed — so an input costs the same with one
    /// session or 100,000; the order is the table's (by name), as a scan would give.
    fn announce_states(&mut self) {
        let names = std::mem::take(&mut self.touched);
        let changed: Vec<(Arc<str>, Option<u64>, SessionState)> = names
            .iter()
            .filter_map(|n| self.sessions.get(n))
            .filter_map(|s| {
                let state = self.state_of(s);
                (s.announced != Some(state))
                    .then(|| (s.name.clone(), s.current.or(s.last_gen), state))
            })
            .collect();
        for (name, gen, state) in changed {
            if let Some(s) = self.sessions.get_mut(&name) {
                s.announced = Some(state);
            }
            self.actions.push_back(Action::Emit(Event::State {
                session: name,
                gen,
                state,
            }));
        }
    }

    /// Applies `input` to generation `gen` only, then lets its session react to the
    /// outcome. Unknown generations (gone, or never allocated) are ignored.
    fn dispatch(&mut self, gen: u64, input: GenInput) {
        let Some(g) = self.gens.get_mut(&gen) else {
            return;
        };
        // Once everything is being killed (a second shutdown), a generation that could not
        // be killed yet is as soon as it can: once it runs, once it is verified, and once
        // its leader exited (the rest of its group, which the exit only sent TERM).
        let kill_after = self.shutdown == Shutdown::Killing
            && matches!(
                input,
                GenInput::SpawnOk(_) | GenInput::Verified | GenInput::LeaderExited(_)
            );
        let session = g.session.clone();
        let stop_before = g.durable_stop();
        let outcome = g.on(self.now, input, &mut self.actions);
        // A stop that began or moved on (or a tree being emptied) is in the session's
        // record: written before the signal that step sends goes out (see the driver).
        if g.durable_stop() != stop_before {
            self.mark_dirty(session.clone());
        }
        self.sync_gen(gen);
        self.touched.insert(session.clone());
        self.apply(&session, gen, outcome);
        if kill_after {
            self.dispatch(gen, GenInput::Kill);
        }
    }

    fn apply(&mut self, name: &Arc<str>, gen: u64, outcome: Outcome) {
        if let Some((ended, event)) = outcome.ended {
            if let Some(s) = self.sessions.get_mut(name) {
                s.remember_end(event);
                self.mark_dirty(name.clone());
            }
            self.on_end(name, gen, ended);
            self.sync_restart(name);
        }
        if outcome.gone {
            self.gens.remove(&gen);
            self.by_session.remove(&(name.clone(), gen));
            self.sync_gen(gen);
            self.advance_session(name);
        }
    }

    /// A generation's terminal event went out. Only the current generation's own end
    /// changes the session; a superseded one's end changes nothing but itself.
    fn on_end(&mut self, name: &Arc<str>, gen: u64, ended: Ended) {
        let now = self.now;
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        if s.current != Some(gen) {
            return;
        }
        s.current = None;
        s.last_gen = Some(gen);
        let recovery_stop = s.recovery_stop.take() == Some(gen);
        s.last_end = Some(match ended {
            Ended::Exited { status, cause, .. } => LastEnd::Exited {
                gen,
                code: Some(status.code()),
                signal: status.signal(),
                cause,
            },
            Ended::SpawnFailed(ref error) => LastEnd::SpawnFailed {
                gen,
                error: error.recorded(),
            },
            Ended::Lost => LastEnd::Exited {
                gen,
                code: None,
                signal: None,
                cause: ExitCause::Lost,
            },
        });
        let stopped_by_us = matches!(
            ended,
            Ended::Exited {
                cause: ExitCause::Stopped | ExitCause::Killed | ExitCause::Superseded,
                ..
            } | Ended::SpawnFailed(SpawnError {
                kind: SpawnErrorKind::Cancelled,
                ..
            })
        );
        // Stopped for failing its liveness probe: a failure, for the restart policy.
        let unhealthy = self.gens.get(&gen).is_some_and(Generation::is_unhealthy);
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        // A stop only the crash of the daemon before asked for restarts the session, unless
        // its policy never restarts (it then rests stopped: it did not fail).
        let stopped_by_us = if recovery_stop {
            s.spec.restart.mode == Restart::Never
        } else {
            stopped_by_us
        };
        // Not stopped by anyone (a liveness stop is the session's failure), nor lost.
        let on_its_own = (!stopped_by_us || unhealthy) && !matches!(ended, Ended::Lost);
        if s.stopped_by_shutdown && !s.want_up && !s.removing && on_its_own {
            // It ended on its own while the shutdown stopped others before it (a one-shot
            // done before its turn): the shutdown stopped it only if its policy would have
            // started it again. Otherwise it rests as it ended, and the next start leaves
            // it so, as a reload would.
            if let Decision::Rest(rest) = restart::decide(&s.spec.restart, s.restarts, &ended) {
                s.stopped_by_shutdown = false;
                s.rest = rest;
                return;
            }
        }
        if !s.want_up || s.removing || (stopped_by_us && !unhealthy) {
            s.rest = Rest::Stopped;
            return;
        }
        let shortage = matches!(&ended, Ended::SpawnFailed(e) if e.shortage);
        if shortage && s.spec.restart.mode != Restart::Never {
            // Not the session's failure: tried again, uncounted, once there may be room.
            s.restart_at = Some(now.saturating_add(s.spec.restart.retry_after_refusal()));
            s.restart_uncounted = true;
            return;
        }
        match restart::decide(&s.spec.restart, s.restarts, &ended) {
            // Counted when its generation is created (`fire_restart`), not now.
            Decision::Restart { delay, restarts } => {
                s.restarts = restarts;
                s.restart_at = Some(now.saturating_add(delay));
                s.restart_uncounted = false;
            }
            Decision::Rest(rest) => s.rest = rest,
        }
    }

    /// Starts the session's pending current generation once every older generation of the
    /// session is gone; drops a removed session once nothing of it is left.
    fn advance_session(&mut self, name: &Arc<str>) {
        let Some(s) = self.sessions.get(name) else {
            return;
        };
        if s.removing {
            if self.gens_of(name).next().is_none() {
                self.sessions.remove(name);
                self.sync_restart(name);
                self.mark_dirty(name.clone());
                let event = Event::State {
                    session: name.clone(),
                    gen: None,
                    state: SessionState::Removed,
                };
                self.actions.push_back(Action::Emit(event));
            }
            return;
        }
        let Some(cur) = s.current else { return };
        let Some(g) = self.gens.get(&cur).filter(|g| g.phase == Phase::Pending) else {
            return;
        };
        // One spawned with `on_busy: overlap` starts beside the older ones.
        let older_live = self.gens_of(name).next().is_some_and(|g| g < cur);
        if g.overlap || !older_live {
            let name = name.clone();
            self.start_or_wait(&name, cur);
        }
    }

    /// Allocates the next generation number, Pending, for `session`.
    /// Why session `name` may not have another generation, if it may not: it tracks
    /// [`MAX_LIVE_GENERATIONS`](session::MAX_LIVE_GENERATIONS) already.
    fn session_full(&self, name: &Arc<str>) -> Option<Error> {
        self.gens_of(name)
            .nth(session::MAX_LIVE_GENERATIONS - 1)
            .map(|_| {
                let msg = format!(
                    "session `{name}` already has {} generations still ending, the most one session tracks; wait for them, or stop it with a short grace to end them sooner",
                    session::MAX_LIVE_GENERATIONS
                );
                Error::new(ErrorCode::Limit, msg)
            })
    }

    /// Whether a new generation of `name` started with `on_busy` runs only once every
    /// generation the session has now is gone: it replaces them without adding to what
    /// runs, so the `--max-running` limit does not refuse it (it waits, Pending, tracked
    /// beside them; a session holds one Pending generation at most, so what is tracked
    /// stays bounded by the sessions).
    fn takes_the_place_of_its_own(&self, name: &Arc<str>, on_busy: OnBusy) -> bool {
        on_busy != OnBusy::Overlap && self.gens_of(name).next().is_some()
    }

    fn allocate(
        &mut self,
        session: &Arc<str>,
        spec: Arc<Spec>,
        on_busy: OnBusy,
    ) -> Result<u64, Error> {
        if self.gens.len() >= self.config.max_generations
            && !self.takes_the_place_of_its_own(session, on_busy)
        {
            let msg = format!(
                "{} generations tracked, at the limit of {} (the daemon's --max-running); stop some, or raise it",
                self.gens.len(),
                self.config.max_generations
            );
            return Err(Error::new(ErrorCode::Limit, msg));
        }
        if let Some(full) = self.session_full(session) {
            return Err(full);
        }
        if self.next_gen >= GEN_LIMIT {
            return Err(Error::new(ErrorCode::Limit, "generation numbers exhausted"));
        }
        let gen = self.next_gen;
        self.next_gen += 1;
        self.gens
            .insert(gen, Generation::new(gen, session.clone(), spec, self.now));
        self.by_session.insert((session.clone(), gen));
        self.sync_gen(gen);
        Ok(gen)
    }
}
