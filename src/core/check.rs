//! The invariant checker shared by the tests and the fuzzer.
//!
//! [`Checker`] wraps every call into the core, observes the input and every action it
//! produced, and panics with the invariant's number and the offending values the moment
//! one breaks. Panicking is its purpose: it is a test oracle, never used by the daemon.
//!
//! Checked after every step (numbers are design.md's invariants):
//! 1. an input about generation g changes no other generation's record (except that a
//!    pending successor may start once g is gone) and every action it produces names g,
//!    or is that successor's `Spawn`, or a state event of g's session;
//! 2. at most one terminal event per generation, and no event about g after it (but
//!    `unkillable` for the rest of its tree, which may survive SIGKILL after `exited`);
//! 3. `exited` for g only after all of g's streams hit EOF or its drain deadline passed,
//!    with the code of the exit status the leader reported;
//! 6. `list` always succeeds and names every session; `get` succeeds for each;
//! 7. generation numbers are allocated strictly increasing and spawned at most once;
//! 8. sessions, generations, queued input and actions per step stay within their limits;
//!
//! plus: signals only for spawned, unreaped generations, and neither a signal nor
//! `unkillable` for a leader told gone (`LeaderGone`) before its exit is told, nor for a
//! generation adopted unverified before it is told `Verified` (invariant 4); reap,
//! release and forget at most once each; one reply per command; every session whose
//! record changed is among the core's dirty sessions. [`Checker::quiescent`] checks the "exactly once" halves when
//! nothing is left running.
//!
//! Across a restart ([`Checker::restore`], `Input::Adopt`, [`Checker::resume`]): every
//! generation a restored record names or that is adopted lies below the core's first
//! number (invariant 7: none is allocated again); an adopted generation ends exactly once
//! like a spawned one, a recorded one that was not adopted ends once, `lost`; one that
//! ended before the restart never ends again (invariant 2). One adopted with the I/O a
//! keeper held delivers only on the streams handed over, its offsets contiguous from where
//! they stopped, and is listed `io_lost: false` (and only then).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::{
    Action, Command, Core, Event, ExitCause, GenerationSnapshot, Input, Lifecycle, OutputAt,
    Response, RestoreProblem, SessionRecord, Spec, StopReason, StopStage, Stream, Time, WallClock,
};

/// The clock records are compared with: any fixed one maps distinct instants apart.
const RECORD_CLOCK: WallClock = WallClock {
    now: Time::ZERO,
    unix_ms: 0,
};

type Records = BTreeMap<Arc<str>, SessionRecord>;

/// What the checker knows about one generation, from the inputs and actions it observed.
#[derive(Debug, Default)]
struct Track {
    spec: Option<Arc<Spec>>,
    /// Why a client (or a supersession) asked this generation to stop, while it ran and
    /// once its stop sequence began: what its exit cause follows.
    asked: Option<StopReason>,
    /// A stop asked while the core held it back for dependents (`depends_on`): no signal
    /// of ours reached the leader yet, so it counts (into `asked`) only once the stop
    /// sequence begins. A leader that ends first ended on its own (its own cause).
    held: Option<StopReason>,
    /// The core's own stop sequence escalated to SIGKILL (not a client's `signal`).
    kill_sent: bool,
    /// The leader's terminating signal, if it was signalled.
    exit_signal: Option<i32>,
    spawn_asked: u32,
    spawned: bool,
    exit: Option<(Time, i32)>,
    /// The leader was told gone (`LeaderGone`) while running or stopping: its status
    /// follows, and until then nothing is signalled and it is never unkillable.
    gone: bool,
    lost: bool,
    eof: Vec<Stream>,
    terminal: u32,
    reaped: u32,
    released: u32,
    /// The streams were closed at the drain deadline: the report must say truncated.
    closed_output: bool,
    /// The next offset expected per stream (stdout, stderr, pty).
    offsets: [u64; 3],
    /// Started by a previous daemon and adopted.
    adopted: bool,
    /// Named by a restored record (or adopted): a previous daemon allocated it.
    inherited: bool,
    /// Adopted with its identity unverified, and not told `Verified` since: nothing may
    /// be signalled to it, and nothing about its process is taken in.
    unverified: bool,
    /// Its readiness was decided (`ready` or `ready_failed` emitted).
    ready_decided: u32,
    /// Adopted in its cgroup: its tree may still be signalled once its leader is lost
    /// (a cgroup, unlike a pid, cannot be a stranger's while it is held).
    contained: bool,
}

/// Observes a core and panics when an invariant breaks.
#[derive(Debug)]
pub struct Checker {
    first_gen: u64,
    high_water: u64,
    gens: BTreeMap<u64, Track>,
    steps: u64,
    /// Whether the step being checked adopts a process (which the limits do not refuse).
    adopting: bool,
    /// What had started, and what was tracked, after the last step: beyond the limits
    /// only after adopting more than they allow, and then never growing except by adoption.
    started_before: usize,
    tracked_before: usize,
    sessions_before: usize,
}

type Before = BTreeMap<u64, (Arc<str>, GenerationSnapshot)>;

impl Checker {
    /// A checker for `core`, which must not have been fed anything yet.
    pub fn new(core: &Core) -> Checker {
        let first = core.next_generation();
        Checker {
            first_gen: first,
            high_water: first,
            gens: BTreeMap::new(),
            steps: 0,
            adopting: false,
            started_before: 0,
            tracked_before: 0,
            sessions_before: 0,
        }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Feeds `input` at `now`, checks everything, and returns the actions produced.
    pub fn handle(&mut self, core: &mut Core, now: Time, input: Input) -> Vec<Action> {
        let before = gens_by_number(core);
        let sessions_before = core.list();
        let request = match &input {
            Input::Command { request, .. } => Some(*request),
            _ => None,
        };
        let about = process_gen(&input);
        let records = records(core);
        let adopting = match &input {
            Input::Adopt {
                gen,
                session,
                verified,
                io,
                ..
            } if !before.contains_key(gen) => Some((*gen, session.clone(), *verified, *io)),
            _ => None,
        };
        let adopting_tree = match &input {
            Input::AdoptTree { gen, .. } if !before.contains_key(gen) => Some(*gen),
            _ => None,
        };
        let command_session = match &input {
            Input::Command { command, .. } => command_session(command).map(str::to_owned),
            _ => None,
        };
        let stop_effect = match &input {
            Input::Command { command, .. } => StopEffect::of(command),
            _ => None,
        };
        let input_session = match &input {
            Input::Adopt { session, .. } | Input::AdoptTree { session, .. } => {
                Some(session.clone())
            }
            _ => None,
        };
        // A client's `signal` is not the core's own kill.
        let client_signal = matches!(
            &input,
            Input::Command {
                command: Command::Signal { .. },
                ..
            }
        );
        let now = core_now(core, now);
        self.observe_input(&before, now, &input);
        core.handle(now, input);
        self.adopting = adopting.is_some();
        let actions = self.drain(core, now, &before);
        self.adopting = false;
        if let Some(request) = request {
            let mut replies = actions.iter().filter_map(|a| match a {
                Action::Reply { request: r, result } if *r == request => Some(result),
                _ => None,
            });
            let reply = replies.next().expect("each command gets exactly one reply");
            assert!(
                replies.next().is_none(),
                "each command gets exactly one reply"
            );
            if let (Some(effect), Ok(response)) = (stop_effect, reply) {
                self.note_stop_asked(core, &effect, response, &before);
            }
        }
        if let Some((gen, session, verified, io)) = adopting {
            self.note_adopted(core, gen, &session, verified, io);
        }
        if let Some(gen) = adopting_tree.filter(|gen| core.gens.contains_key(gen)) {
            self.note_tree_adopted(core, gen);
        }
        if let Some(gen) = about {
            let own = before.get(&gen).map(|(s, _)| s.clone());
            let own = own.or_else(|| input_session.clone());
            self.check_isolation(core, gen, own.as_ref(), &before, &actions);
            check_other_sessions(core, own.as_ref(), &sessions_before);
        }
        check_dirty(core, &records);
        check_no_release_missed(core);
        // A second shutdown's kill: SIGKILL to a running leader, alone or with its tree.
        if core.shutdown == super::Shutdown::Killing && !client_signal {
            for action in &actions {
                if let Action::Signal {
                    gen,
                    signal: super::signal::SIGKILL,
                    scope: super::Scope::Leader | super::Scope::Tree,
                } = action
                {
                    let t = self.track(*gen);
                    if t.exit.is_none() && !t.gone {
                        t.kill_sent = true;
                    }
                }
            }
        }
        if let Some(name) = command_session {
            self.check_command_scope(&name, &before, &actions);
        }
        actions
    }

    /// Calls [`Core::output`], checks that only a running or draining generation with that
    /// stream open delivers, at contiguous offsets, and returns what the core answered.
    pub fn output(
        &mut self,
        core: &mut Core,
        gen: u64,
        stream: Stream,
        len: usize,
    ) -> Option<OutputAt> {
        let before = gens_by_number(core);
        let at = core.output(gen, stream, len);
        assert_eq!(core.queued_actions(), 0, "output queued an action");
        let own = before.get(&gen).map(|(s, _)| s.clone());
        self.check_isolation(core, gen, own.as_ref(), &before, &[]);
        let Some(at) = &at else { return None };
        let t = self.track(gen);
        assert!(
            t.spawned && t.terminal == 0 && !t.closed_output && !t.eof.contains(&stream),
            "invariant 2: generation {gen} delivered output after EOF, its report, or before it ran"
        );
        let expected = &mut t.offsets[stream.index()];
        assert_eq!(
            at.offset, *expected,
            "generation {gen}: output offsets are not contiguous"
        );
        *expected += len as u64;
        let owner = before.get(&gen).map(|(s, _)| s);
        assert_eq!(
            Some(&at.session),
            owner,
            "invariant 1: output of generation {gen} attributed to another session"
        );
        at.clone().into()
    }

    /// Calls `handle_timeout(now)`, checks everything, and returns the actions produced.
    pub fn timeout(&mut self, core: &mut Core, now: Time) -> Vec<Action> {
        let before = gens_by_number(core);
        let sessions_before = core.list();
        let records = records(core);
        let now = core_now(core, now);
        core.handle_timeout(now);
        let actions = self.drain(core, now, &before);
        check_timeout_isolation(core, now, &before, &sessions_before);
        check_dirty(core, &records);
        check_no_release_missed(core);
        for action in &actions {
            if let Action::Signal {
                gen,
                signal: super::signal::SIGKILL,
                scope: super::Scope::Leader,
            } = action
            {
                self.track(*gen).kill_sent = true;
            }
        }
        actions
    }

    /// Calls [`Core::restore`] (on a core fed nothing yet) and checks that every
    /// generation a restored session names lies below the core's first number, so none
    /// can be allocated again (invariant 7), and that restoring queued nothing. The
    /// restored recent ends count as those generations' terminal events (invariant 2).
    pub fn restore(
        &mut self,
        core: &mut Core,
        clock: WallClock,
        records: Vec<SessionRecord>,
    ) -> Vec<RestoreProblem> {
        let before = self::records(core);
        let problems = core.restore(clock, records);
        self.sessions_before = core.list().len();
        assert_eq!(core.queued_actions(), 0, "restore queued an action");
        assert_eq!(
            core.next_generation(),
            self.first_gen,
            "invariant 7: restore moved the generation counter"
        );
        for r in core.session_records(RECORD_CLOCK) {
            let ends = r.recent_ends.iter().filter_map(Event::gen);
            let named = [r.current, r.last_gen, r.last_end.as_ref().map(|e| e.gen())];
            for gen in named.into_iter().flatten().chain(ends) {
                assert!(
                    gen < self.first_gen,
                    "invariant 7: restored session {} names generation {gen}, not below {}",
                    r.name,
                    self.first_gen
                );
                self.track(gen).inherited = true;
            }
            for gen in r.recent_ends.iter().filter_map(Event::gen) {
                self.track(gen).terminal = 1;
            }
        }
        check_dirty(core, &before);
        self.check_list(core);
        problems
    }

    /// Calls [`Core::resume`], checks everything and returns the actions produced. The
    /// stops it asks for (of adopted generations superseded, stopped or removed) fix
    /// those generations' causes.
    pub fn resume(&mut self, core: &mut Core, now: Time) -> Vec<Action> {
        let before = gens_by_number(core);
        let records = records(core);
        let now = core_now(core, now);
        core.resume(now);
        let actions = self.drain(core, now, &before);
        for (gen, (_, g)) in gens_by_number(core) {
            let t = self.track(gen);
            // (A stop taken back with its record may have been outranked since.)
            if let (Some(stop), None) = (g.stop, t.exit) {
                t.asked = Some(outranking(t.asked, stop));
            }
        }
        self.note_held(core);
        check_dirty(core, &records);
        check_no_release_missed(core);
        actions
    }

    /// Calls [`Core::reload`], checks everything and returns its answer with the actions
    /// produced. A refused reload queues nothing and changes no record; the stops an
    /// accepted one asks for (superseded, removed) fix those generations' causes.
    pub fn reload(
        &mut self,
        core: &mut Core,
        now: Time,
        config: Vec<super::ConfigSession>,
    ) -> (Result<super::Plan, super::Error>, Vec<Action>) {
        let before = gens_by_number(core);
        let records = records(core);
        let now = core_now(core, now);
        let result = core.reload(now, config);
        if result.is_err() {
            assert_eq!(
                core.queued_actions(),
                0,
                "a refused reload queued an action: {result:?}"
            );
            assert_eq!(
                self::records(core),
                records,
                "a refused reload changed a record"
            );
        }
        let actions = self.drain(core, now, &before);
        for (gen, (_, g)) in gens_by_number(core) {
            let t = self.track(gen);
            if t.exit.is_some() || t.gone || t.terminal > 0 {
                continue;
            }
            if let Some(stop) = g.stop {
                t.asked = Some(outranking(t.asked, stop));
            }
        }
        self.note_held(core);
        check_dirty(core, &records);
        check_no_release_missed(core);
        (result, actions)
    }

    /// An `Adopt` was fed: if the core took it, the generation was a previous daemon's
    /// (below this core's first number, never seen here) and now runs without a spawn.
    ///
    /// With its I/O kept (and verified), the streams named open deliver from the offsets
    /// given, contiguously from there; the others are at EOF.
    fn note_adopted(
        &mut self,
        core: &Core,
        gen: u64,
        session: &Arc<str>,
        verified: bool,
        io: Option<super::AdoptedIo>,
    ) {
        let Some(g) = core.gens.get(&gen) else {
            return;
        };
        assert!(
            gen < self.first_gen,
            "invariant 7: adopted generation {gen} is not below the first number {}",
            self.first_gen
        );
        assert_eq!(
            &g.session, session,
            "invariant 1: adopted into another session"
        );
        let spec = g.spec.clone();
        let t = self.track(gen);
        assert!(
            t.terminal == 0 && !t.adopted && t.spawn_asked == 0,
            "invariant 2: adopted generation {gen} already ended or ran here"
        );
        let io = io.filter(|_| verified);
        let open = |s: &Stream| io.is_some_and(|io| io.outputs[s.index()].is_some());
        let streams = [Stream::Stdout, Stream::Stderr, Stream::Pty];
        let mut offsets = [0; 3];
        for s in streams {
            offsets[s.index()] = io.and_then(|io| io.outputs[s.index()]).unwrap_or(0);
        }
        *t = Track {
            spec: Some(spec),
            spawn_asked: 1,
            spawned: true,
            eof: streams.into_iter().filter(|s| !open(s)).collect(),
            offsets,
            adopted: true,
            inherited: true,
            unverified: !verified,
            ..Track::default()
        };
        let snapshot = gens_by_number(core);
        let listed = snapshot.get(&gen).and_then(|(_, g)| g.adopted);
        let listed_gen = snapshot.get(&gen).map(|(_, g)| g);
        let t = self.track(gen);
        t.contained =
            listed_gen.is_some_and(|g| g.containment == Some(crate::core::Containment::Cgroup));
        // A stop its record said was under way goes on: its reason, and whether its
        // SIGKILL was sent, decide the cause as they would have.
        if let Some(g) = listed_gen.filter(|_| verified) {
            if let Lifecycle::Stopping(stage) = g.lifecycle {
                t.asked = g.stop;
                t.kill_sent = stage != StopStage::Graceful;
            }
        }
        assert_eq!(
            listed.map(|a| a.verified),
            Some(verified),
            "adopted generation {gen} listed with the wrong verification"
        );
        assert_eq!(
            listed.map(|a| a.io_lost),
            Some(io.is_none()),
            "adopted generation {gen} listed with the wrong I/O"
        );
    }

    /// An `AdoptTree` was taken: a previous daemon's generation, its end reported by it,
    /// tracked again for its tree alone — nothing about its leader may follow, its tree
    /// may be signalled until it is released.
    fn note_tree_adopted(&mut self, core: &Core, gen: u64) {
        assert!(
            gen < self.first_gen,
            "invariant 7: generation {gen} taken back for its tree is not below the first number {}",
            self.first_gen
        );
        let listed = gens_by_number(core);
        let g = listed.get(&gen).map(|(_, g)| g).expect("tracked");
        assert!(
            matches!(g.lifecycle, Lifecycle::Reported | Lifecycle::TreeUnkillable),
            "generation {gen} taken back for its tree is {:?}",
            g.lifecycle
        );
        let spec = core.gens.get(&gen).map(|g| g.spec.clone());
        let t = self.track(gen);
        assert!(
            !t.adopted && t.spawn_asked == 0,
            "invariant 2: generation {gen} taken back for its tree was seen here"
        );
        *t = Track {
            spec,
            spawn_asked: 1,
            spawned: true,
            terminal: 1,
            exit: Some((Time::ZERO, 0)),
            eof: vec![Stream::Stdout, Stream::Stderr, Stream::Pty],
            adopted: true,
            inherited: true,
            contained: true,
            ..Track::default()
        };
    }

    /// Records which generations a successful stop-like command asked to stop, and why,
    /// so their exit cause can be checked (143 after our own SIGTERM is never a crash).
    fn note_stop_asked(
        &mut self,
        core: &Core,
        effect: &StopEffect,
        response: &Response,
        before: &Before,
    ) {
        let targets: Vec<(u64, StopReason)> = match (effect, response) {
            (StopEffect::Stop, Response::Gen(g)) => vec![(*g, StopReason::Requested)],
            (StopEffect::Stop, _) => vec![],
            (StopEffect::Session(name, reason), _) => before
                .iter()
                .filter(|(_, (s, _))| **s == **name)
                .map(|(g, _)| (*g, *reason))
                .collect(),
            (StopEffect::All, _) => before.keys().map(|g| (*g, StopReason::Requested)).collect(),
        };
        let after = gens_by_number(core);
        for (gen, reason) in targets {
            // Its stop sequence began (now or before): else the core holds it back for its
            // dependents, and the ask waits with it.
            let begun = after.get(&gen).is_some_and(|(_, g)| g.stop.is_some());
            let t = self.track(gen);
            if t.exit.is_some() || t.gone || t.terminal > 0 {
                continue; // the cause was fixed when the leader exited
            }
            if begun {
                t.asked = Some(outranking(t.asked, reason));
            } else {
                t.held = Some(outranking(t.held, reason));
            }
        }
    }

    /// The stops the core holds back for dependents after a reload or a resume (a
    /// removal's, or a supersession's when the session was taken back meanwhile) were
    /// asked all the same: each counts once it begins.
    fn note_held(&mut self, core: &Core) {
        for (gen, (name, g)) in gens_by_number(core) {
            if g.stop.is_some() || !core.deferred_stops.contains(&gen) {
                continue;
            }
            let reason = match core.sessions.get(&name).and_then(|s| s.current) == Some(gen) {
                true => StopReason::Requested,
                false => StopReason::Superseded,
            };
            let t = self.track(gen);
            if t.exit.is_none() && !t.gone && t.terminal == 0 {
                t.held = Some(outranking(t.held, reason));
            }
        }
    }

    /// After a step: a stop held back for dependents that began counts from now on; one
    /// whose leader ended (or was told gone) first is void, its end its own.
    fn begin_held(&mut self, core: &Core) {
        if self.gens.values().all(|t| t.held.is_none()) {
            return;
        }
        let after = gens_by_number(core);
        for (gen, t) in &mut self.gens {
            let Some(held) = t.held else { continue };
            if t.exit.is_some() || t.gone || t.terminal > 0 {
                t.held = None;
            } else if after.get(gen).is_some_and(|(_, g)| g.stop.is_some()) {
                t.asked = Some(outranking(t.asked, held));
                t.held = None;
            }
        }
    }

    /// Once the core tracks no generation: every allocated generation had exactly one
    /// terminal event, and every spawned one was reaped, released and forgotten exactly
    /// once.
    pub fn quiescent(&self, core: &Core) {
        assert_eq!(
            core.generation_count(),
            0,
            "quiescent() needs every generation gone"
        );
        let inherited = self
            .gens
            .iter()
            .filter(|(_, t)| t.adopted)
            .map(|(gen, _)| *gen);
        for gen in inherited.chain(self.first_gen..core.next_generation()) {
            let t = self.gens.get(&gen);
            let terminal = t.map_or(0, |t| t.terminal);
            assert_eq!(
                terminal, 1,
                "invariant 2: generation {gen} had {terminal} terminal events"
            );
            let Some(t) = t else { continue };
            if t.spawned && !t.lost {
                assert_eq!(t.reaped, 1, "generation {gen} reaped {} times", t.reaped);
            }
            if t.spawn_asked > 0 {
                assert_eq!(
                    t.released, 1,
                    "generation {gen} released {} times",
                    t.released
                );
            }
        }
    }

    /// Plays a well-behaved operating system and client until nothing is left: stops
    /// every session (cancelling restarts), answers spawns, exits leaders, closes streams,
    /// empties groups and lets deadlines pass. Then checks [`quiescent`](Self::quiescent).
    /// Returns the time reached.
    pub fn settle(&mut self, core: &mut Core, mut now: Time) -> Time {
        for round in 0..200 {
            let list = core.list();
            if list
                .iter()
                .all(|s| s.generations.is_empty() && s.restart_at.is_none())
            {
                break;
            }
            assert!(round < 199, "core does not settle: {list:?}");
            for s in &list {
                let stop = Command::Stop {
                    session: s.name.to_string(),
                    if_gen: None,
                    grace: None,
                };
                self.handle(
                    core,
                    now,
                    Input::Command {
                        request: u64::MAX,
                        command: stop,
                    },
                );
            }
            for (gen, (_, g)) in gens_by_number(core) {
                let inputs: Vec<Input> = match g.lifecycle {
                    Lifecycle::Pending | Lifecycle::Gone => vec![],
                    Lifecycle::Starting => vec![Input::SpawnResult {
                        gen,
                        result: Ok(super::Started::in_session(gen as u32)),
                    }],
                    // Its leader exited, what it left survived SIGKILL: that ends too.
                    Lifecycle::TreeUnkillable => vec![Input::GroupEmpty { gen }],
                    Lifecycle::Running | Lifecycle::Stopping(_) => {
                        let exit = Input::LeaderExited {
                            gen,
                            status: super::ExitStatus::Signal(super::signal::SIGTERM),
                        };
                        // Unverified, nothing about its process is taken in: a later check
                        // verifies it first (and its stop begins).
                        match g.adopted {
                            Some(a) if !a.verified => vec![Input::Verified { gen }, exit],
                            _ => vec![exit],
                        }
                    }
                    Lifecycle::Draining => g
                        .offsets
                        .iter()
                        .map(|(stream, _)| Input::Eof {
                            gen,
                            stream: *stream,
                        })
                        .collect(),
                    Lifecycle::Reported => vec![Input::GroupEmpty { gen }],
                };
                for input in inputs {
                    self.handle(core, now, input);
                }
            }
            if let Some(t) = core.next_deadline() {
                now = now.max(t);
            }
            self.timeout(core, now);
        }
        self.quiescent(core);
        now
    }

    fn observe_input(&mut self, before: &Before, now: Time, input: &Input) {
        let unverified = |gen: &u64| {
            before
                .get(gen)
                .and_then(|(_, s)| s.adopted)
                .is_some_and(|a| !a.verified)
        };
        // Unverified, a generation takes in nothing about its process (its driver holds
        // none): only `Verified` or `Lost`.
        let live = |gen: &u64| {
            before
                .get(gen)
                .filter(|_| !unverified(gen))
                .map(|(_, s)| s.lifecycle)
        };
        let has_pid = |gen: &u64| before.get(gen).is_some_and(|(_, s)| s.pid.is_some());
        match input {
            Input::Verified { gen } if unverified(gen) => self.track(*gen).unverified = false,
            Input::LeaderExited { gen, status }
                if matches!(live(gen), Some(Lifecycle::Running | Lifecycle::Stopping(_))) =>
            {
                let t = self.track(*gen);
                t.exit = Some((now, status.code()));
                t.exit_signal = status.signal();
            }
            Input::LeaderGone { gen }
                if matches!(live(gen), Some(Lifecycle::Running | Lifecycle::Stopping(_))) =>
            {
                self.track(*gen).gone = true;
            }
            Input::Lost { gen } if has_pid(gen) => self.track(*gen).lost = true,
            Input::Eof { gen, stream }
                if matches!(
                    live(gen),
                    Some(
                        Lifecycle::Running
                            | Lifecycle::Stopping(_)
                            | Lifecycle::Draining
                            | Lifecycle::TreeUnkillable
                    )
                ) =>
            {
                self.track(*gen).eof.push(*stream);
            }
            _ => {}
        }
    }

    fn track(&mut self, gen: u64) -> &mut Track {
        self.gens.entry(gen).or_default()
    }

    /// Drains the actions and checks everything that holds after any step.
    fn drain(&mut self, core: &mut Core, now: Time, before: &Before) -> Vec<Action> {
        self.steps += 1;
        let queued = core.queued_actions();
        let bound = 8 * (before.len() + core.generation_count() + 1) + 2 * core.list().len() + 8;
        assert!(
            queued <= bound,
            "invariant 8: {queued} actions queued by one step (bound {bound})"
        );
        let actions: Vec<Action> = std::iter::from_fn(|| core.poll_action()).collect();
        let next = core.next_generation();
        assert!(
            next >= self.high_water,
            "invariant 7: generation counter went back from {} to {next}",
            self.high_water
        );
        // Newly allocated numbers are exactly the ones between the old and new high-water
        // marks: strictly increasing, never reused.
        for gen in self.high_water..next {
            assert!(
                !self.gens.contains_key(&gen),
                "invariant 7: generation {gen} seen before it was allocated"
            );
        }
        self.high_water = next;
        for action in &actions {
            self.observe_action(core, now, action);
        }
        self.begin_held(core);
        self.check_bounds(core);
        self.check_list(core);
        actions
    }

    fn observe_action(&mut self, core: &Core, now: Time, action: &Action) {
        let next = core.next_generation();
        match action {
            Action::Spawn { gen, spec, .. } => {
                assert!(
                    *gen < next,
                    "invariant 7: spawn of unallocated generation {gen}"
                );
                let t = self.track(*gen);
                assert_eq!(
                    t.spawn_asked, 0,
                    "invariant 7: generation {gen} spawned twice"
                );
                t.spawn_asked += 1;
                t.spec = Some(spec.clone());
            }
            Action::CancelSpawn { gen } => {
                let t = self.track(*gen);
                assert!(
                    t.spawn_asked == 1 && !t.spawned && t.terminal == 0,
                    "spawn of generation {gen} cancelled when it was not starting"
                );
            }
            Action::WriteInput { gen, .. }
            | Action::CloseInput { gen }
            | Action::Resize { gen, .. } => {
                let t = self.track(*gen);
                assert!(
                    t.spawn_asked == 1 && t.reaped == 0 && !t.lost,
                    "input for a generation never started, reaped or lost: {action:?}"
                );
            }
            Action::Signal { gen, .. } if !self.track(*gen).spawned => {
                // Asked while it starts: the driver delivers it once the process runs.
                let t = self.track(*gen);
                assert!(
                    t.spawn_asked == 1 && t.terminal == 0,
                    "signal for a generation never started or ended: {action:?}"
                );
            }
            Action::Signal { gen, scope, .. } => {
                let t = self.track(*gen);
                assert!(
                    !t.unverified,
                    "invariant 4: signal for generation {gen}, whose identity is not verified: {action:?}"
                );
                assert!(
                    t.reaped == 0,
                    "process action for a reaped generation {gen}: {action:?}"
                );
                // A lost generation's pid may belong to a stranger now (invariant 4).
                let lost_tree = t.lost && t.contained && *scope == super::Scope::Tree;
                assert!(
                    !t.lost || lost_tree,
                    "invariant 4: process action for lost generation {gen}: {action:?}"
                );
                assert!(
                    !t.gone || t.exit.is_some() || lost_tree,
                    "signal for generation {gen}, whose leader is gone: {action:?}"
                );
            }
            Action::Reap { gen } => {
                let t = self.track(*gen);
                assert!(
                    t.spawned && t.reaped == 0,
                    "generation {gen} reaped twice or never spawned"
                );
                assert_eq!(
                    t.terminal, 1,
                    "invariant 2: generation {gen} reaped before its exit was reported"
                );
                t.reaped += 1;
            }
            Action::Release { gen } => {
                let t = self.track(*gen);
                assert!(
                    t.spawn_asked == 1 && t.released == 0,
                    "generation {gen} released twice or never spawned"
                );
                t.released += 1;
            }
            Action::CloseOutput { gen } => {
                let t = self.track(*gen);
                assert!(
                    t.terminal == 0 && !t.closed_output && t.exit.is_some(),
                    "generation {gen}: output closed twice, after its report, or before its exit"
                );
                t.closed_output = true;
            }
            Action::Probe { gen, live, .. } | Action::CancelProbe { gen, live, .. } => {
                let t = self.track(*gen);
                assert!(
                    t.spawned && t.exit.is_none() && t.terminal == 0 && (*live || t.ready_decided == 0),
                    "probe for generation {gen} not running, or readiness already decided: {action:?}"
                );
            }
            Action::ReadySettled { gen } => {
                let t = self.track(*gen);
                assert!(
                    t.spawned && t.terminal == 0,
                    "readiness of generation {gen} settled before it ran or after its end"
                );
            }
            Action::Emit(event) => self.observe_event(now, event),
            Action::Reply {
                result: Ok(Response::List(list)),
                ..
            } => {
                let names: Vec<_> = core.list().into_iter().map(|s| s.name).collect();
                let got: Vec<_> = list.iter().map(|s| s.name.clone()).collect();
                assert_eq!(got, names, "invariant 6: list does not name every session");
            }
            Action::Reply {
                result: Ok(Response::Gen(gen)),
                ..
            } => {
                assert!(*gen < next, "reply names unallocated generation {gen}");
            }
            Action::Reply { .. } => {}
        }
    }

    fn observe_event(&mut self, now: Time, event: &Event) {
        let Some(gen) = event.gen() else { return };
        let t = self.track(gen);
        // The one event that may follow `exited`: what its leader left survived SIGKILL.
        // (Or of a contained one taken back whose leader was lost.)
        let tree_stuck = matches!(event, Event::Unkillable { .. })
            && (t.exit.is_some() || (t.lost && t.contained));
        assert!(
            t.terminal == 0 || tree_stuck,
            "invariant 2: event after generation {gen}'s terminal event: {event:?}"
        );
        match event {
            Event::Spawned { .. } => {
                assert!(
                    t.spawn_asked == 1 && !t.spawned,
                    "spawned event for generation {gen} out of order"
                );
                t.spawned = true;
            }
            Event::SpawnFailed { .. } => t.terminal += 1,
            // A previous daemon's generation that was never adopted: nobody saw it end.
            Event::Exited { code, cause, .. } if t.inherited && !t.adopted => {
                assert_eq!(
                    (*code, *cause),
                    (None, ExitCause::Lost),
                    "generation {gen} of a previous daemon misreported"
                );
                t.terminal += 1;
            }
            Event::Exited {
                code,
                truncated,
                cause,
                ..
            } => {
                t.terminal += 1;
                let spec = t.spec.as_ref().expect("spawned generations have a spec");
                let drained = spec.streams().iter().all(|s| t.eof.contains(s));
                assert_eq!(
                    *truncated, !drained,
                    "generation {gen}: truncated flag disagrees with EOFs seen"
                );
                assert!(
                    !*truncated || t.closed_output || t.lost,
                    "generation {gen}: reported truncated without closing its output"
                );
                // A lost generation is reported at once: there is nothing left to wait for.
                if t.lost && (t.exit.is_none() || *cause == ExitCause::Lost) {
                    assert_eq!(
                        (*code, *cause),
                        (None, ExitCause::Lost),
                        "lost generation {gen} misreported"
                    );
                    return;
                }
                let (exit_at, exit_code) =
                    t.exit.expect("invariant 3: exited without a leader exit");
                let expected = match (t.asked, t.exit_signal) {
                    (Some(StopReason::Superseded), _) => ExitCause::Superseded,
                    (Some(StopReason::Requested), Some(super::signal::SIGKILL)) if t.kill_sent => {
                        ExitCause::Killed
                    }
                    (Some(StopReason::Requested), _) => ExitCause::Stopped,
                    (None, Some(_)) => ExitCause::Signaled,
                    (None, None) => ExitCause::Exited,
                };
                assert_eq!(
                    *cause, expected,
                    "generation {gen}: exit cause {cause:?}, expected {expected:?} (asked {:?})",
                    t.asked
                );
                assert_eq!(
                    *code,
                    Some(exit_code),
                    "invariant 1: generation {gen} reported another exit's code"
                );
                let deadline = exit_at.saturating_add(spec.drain);
                assert!(
                    t.lost || drained || now >= deadline,
                    "invariant 3: generation {gen} reported at {now:?} before EOF or its deadline {deadline:?}"
                );
            }
            Event::Unkillable { .. } | Event::InputClosed { .. } => {
                assert!(
                    t.spawned,
                    "event for generation {gen} that never ran: {event:?}"
                );
                // A stuck member of an exited leader's tree may be, whatever its leader was.
                let leader_unkillable =
                    matches!(event, Event::Unkillable { .. }) && t.exit.is_none();
                assert!(
                    !((t.gone || t.unverified) && leader_unkillable),
                    "generation {gen} reported unkillable after its leader was gone, or while unverified"
                );
            }
            Event::Unhealthy { .. } => {
                assert!(
                    t.spawned && t.exit.is_none(),
                    "generation {gen} found unhealthy while not running: {event:?}"
                );
                // The core stops it itself, as a stop would.
                t.asked.get_or_insert(StopReason::Requested);
            }
            Event::Ready { .. } | Event::ReadyFailed { .. } => {
                assert!(
                    t.spawned && t.ready_decided == 0,
                    "readiness of generation {gen} decided twice, or before it ran: {event:?}"
                );
                t.ready_decided += 1;
            }
            Event::State { .. } => {}
        }
    }

    /// Invariant 1: an input about `gen` touches `gen` only.
    fn check_isolation(
        &self,
        core: &Core,
        gen: u64,
        session: Option<&Arc<str>>,
        before: &Before,
        actions: &[Action],
    ) {
        let after = gens_by_number(core);
        let session = session.cloned();
        // Order between sessions (`depends_on`): an input about `gen` may let a dependent's
        // Pending generation start, and during a shutdown (or a removal) a deferred stop
        // begin once the dependents ended. Nothing else about another generation may change.
        let mut ordered: BTreeSet<u64> = BTreeSet::new();
        for (h, (owner, b)) in before.iter().filter(|(h, _)| **h != gen) {
            let Some((_, a)) = after.get(h) else { continue };
            let dependent = core
                .gens
                .get(h)
                .is_some_and(|g| !g.spec.depends_on.is_empty());
            let dep_start = dependent
                && b.lifecycle == Lifecycle::Pending
                && a.lifecycle == Lifecycle::Starting;
            let session = core.sessions.get(owner);
            let removing = session.is_some_and(|s| s.removing);
            // Replaced while its stop waited: its session was taken back from a removal.
            let replaced = session.is_some_and(|s| s.current != Some(*h));
            let deferred_stop = b.stop.is_none()
                && match a.stop {
                    Some(StopReason::Requested) => core.is_shutting_down() || removing,
                    Some(StopReason::Superseded) => replaced,
                    None => false,
                };
            if dep_start || deferred_stop {
                ordered.insert(*h);
            }
        }
        for (h, (s, b)) in before
            .iter()
            .filter(|(h, _)| **h != gen && !ordered.contains(h))
        {
            let Some((_, a)) = after.get(h) else {
                panic!("invariant 1: input about generation {gen} removed generation {h}");
            };
            // The only effect allowed on another generation: g's end lets its session's
            // pending current successor start.
            let started = b.lifecycle == Lifecycle::Pending
                && a.lifecycle == Lifecycle::Starting
                && Some(s) == session.as_ref()
                && core.sessions.get(s).is_some_and(|x| x.current == Some(*h));
            let same = GenerationSnapshot {
                since: a.since,
                lifecycle: a.lifecycle,
                ..b.clone()
            } == *a;
            assert!(
                same && (started || a.lifecycle == b.lifecycle),
                "invariant 1: input about generation {gen} changed generation {h}: {b:?} -> {a:?}"
            );
        }
        for action in actions {
            let about = match action {
                Action::Emit(e) => e.gen(),
                Action::Spawn { gen, .. }
                | Action::Signal { gen, .. }
                | Action::CancelSpawn { gen }
                | Action::Release { gen } => Some(*gen),
                _ => None,
            };
            if about.is_some_and(|h| ordered.contains(&h)) {
                continue;
            }
            let ok = match action {
                Action::Spawn { gen: h, .. } => {
                    *h == gen
                        || before.get(h).is_some_and(|(s, b)| {
                            Some(s) == session.as_ref() && b.lifecycle == Lifecycle::Pending
                        })
                }
                Action::Emit(Event::State { session: s, .. }) => {
                    Some(s) == session.as_ref()
                        || ordered
                            .iter()
                            .any(|h| before.get(h).is_some_and(|(n, _)| n == s))
                }
                other => other.gen() == Some(gen),
            };
            assert!(
                ok,
                "invariant 1: input about generation {gen} produced {action:?}"
            );
        }
    }

    /// A command about one session produces actions about that session's generations only.
    fn check_command_scope(&self, name: &str, before: &Before, actions: &[Action]) {
        for action in actions {
            let gen = match action {
                Action::Emit(Event::State { session, .. }) | Action::Spawn { session, .. } => {
                    assert_eq!(
                        &**session, name,
                        "command on {name} acted on session {session}"
                    );
                    continue;
                }
                other => other.gen(),
            };
            if let Some((session, _)) = gen.and_then(|g| before.get(&g)) {
                assert_eq!(&**session, name, "command on {name} acted on {action:?}");
            }
        }
    }

    fn check_bounds(&mut self, core: &Core) {
        assert_eq!(
            core.next_deadline(),
            core.scan_deadline(),
            "the deadline index differs from a scan of the tables"
        );
        assert_eq!(
            core.unannounced_states(),
            0,
            "a state change went unannounced"
        );
        assert!(
            core.generation_index_is_exact(),
            "the generations by session differ from a scan of the table"
        );
        let c = core.config();
        let list = core.list();
        // Beyond the limit only after a restore under a lower one, and then never growing.
        assert!(
            list.len() <= c.max_sessions.max(self.sessions_before),
            "invariant 8: {} sessions (limit {}, {} before)",
            list.len(),
            c.max_sessions,
            self.sessions_before
        );
        self.sessions_before = list.len();
        // A replacement waits, Pending, beyond the limit (one per session at most), so
        // what has started never exceeds it — unless a restart adopted more processes than
        // a lowered limit allows: they run on, and no step but an adoption adds to them.
        let started = list
            .iter()
            .flat_map(|s| &s.generations)
            .filter(|g| g.lifecycle != Lifecycle::Pending)
            .count();
        let tracked = core.generation_count();
        if !self.adopting {
            assert!(
                started <= c.max_generations.max(self.started_before),
                "invariant 8: {started} generations started (limit {}, {} before)",
                c.max_generations,
                self.started_before
            );
            assert!(
                tracked <= (c.max_generations + list.len()).max(self.tracked_before),
                "invariant 8: {tracked} generations (limit {} and {} sessions, {} before)",
                c.max_generations,
                list.len(),
                self.tracked_before
            );
        }
        self.started_before = started;
        self.tracked_before = tracked;
        for g in list.iter().flat_map(|s| &s.generations) {
            assert!(
                g.pending_input <= c.max_pending_input,
                "invariant 8: generation {} queued input",
                g.gen
            );
        }
    }

    /// Invariant 6: `list` and `get` answer for every session, whatever its state.
    fn check_list(&self, core: &Core) {
        let list = core.list();
        let tracked: usize = list.iter().map(|s| s.generations.len()).sum();
        assert_eq!(
            tracked,
            core.generation_count(),
            "invariant 6: list misses a live generation"
        );
        for s in &list {
            assert!(
                core.get(&s.name).is_some(),
                "invariant 6: get fails for listed session {}",
                s.name
            );
        }
    }
}

/// Invariant 1 at the session level: an input about a generation of session `own` (or of
/// no live session) leaves every other session exactly as it was.
///
/// Order between sessions is the one exception (`depends_on`): a session whose Pending
/// generation waits for dependencies may start (or have its reason of waiting change),
/// and during a shutdown (or its removal) one whose stop was deferred may begin it once
/// its dependents ended — a generation replaced while it waited (its session taken back
/// from the removal) too.
fn check_other_sessions(core: &Core, own: Option<&Arc<str>>, before: &[super::SessionSnapshot]) {
    let after = core.list();
    for b in before.iter().filter(|b| Some(&b.name) != own) {
        let a = after.iter().find(|a| a.name == b.name);
        let ordered = a.is_some_and(|a| {
            let dependent = b.waiting.is_some() || a.waiting.is_some();
            let session = core.sessions.get(&a.name);
            let removing = session.is_some_and(|s| s.removing);
            let current = session.and_then(|s| s.current);
            let deferred = a.generations.iter().zip(&b.generations).any(|(x, y)| {
                let waited = core.is_shutting_down() || removing || Some(x.gen) != current;
                waited && x.gen == y.gen && y.stop.is_none() && x.stop.is_some()
            });
            dependent || deferred
        });
        if ordered {
            continue;
        }
        assert_eq!(
            a,
            Some(b),
            "invariant 1: input about {own:?} changed session {}",
            b.name
        );
    }
}

/// A stop's reason added to those asked before: a supersession outranks a requested stop
/// (as the core's own record of it does).
fn outranking(asked: Option<StopReason>, reason: StopReason) -> StopReason {
    match (asked, reason) {
        (Some(StopReason::Superseded), _) | (_, StopReason::Superseded) => StopReason::Superseded,
        _ => StopReason::Requested,
    }
}

/// Each generation's own state, to compare before and after an input. Whether it is
/// listed `superseded` is left out: that is its session's view (is a newer generation
/// current?), which a newer generation's start or end changes.
fn gens_by_number(core: &Core) -> Before {
    core.list()
        .into_iter()
        .flat_map(|s| {
            let name = s.name.clone();
            s.generations.into_iter().map(move |g| {
                let own = GenerationSnapshot {
                    superseded: false,
                    ..g
                };
                (own.gen, (name.clone(), own))
            })
        })
        .collect()
}

/// The time the core will use: it clamps a `now` that went backwards.
fn core_now(core: &Core, now: Time) -> Time {
    now.max(core.now)
}

fn process_gen(input: &Input) -> Option<u64> {
    match input {
        Input::Command { .. } => None,
        Input::SpawnResult { gen, .. }
        | Input::Eof { gen, .. }
        | Input::OutputClosed { gen, .. }
        | Input::LeaderExited { gen, .. }
        | Input::LeaderGone { gen }
        | Input::GroupEmpty { gen }
        | Input::Lost { gen }
        | Input::InputWritten { gen, .. }
        | Input::InputError { gen }
        | Input::Verified { gen }
        | Input::Readiness { gen, .. }
        | Input::Liveness { gen, .. }
        | Input::Adopt { gen, .. }
        | Input::AdoptTree { gen, .. } => Some(*gen),
    }
}

fn command_session(command: &Command) -> Option<&str> {
    match command {
        Command::Spawn { session, .. }
        | Command::Write { session, .. }
        | Command::CloseInput { session, .. }
        | Command::Resize { session, .. }
        | Command::Signal { session, .. }
        | Command::Stop { session, .. }
        | Command::Restart { session, .. }
        | Command::Remove { session }
        | Command::Get { session } => Some(session),
        Command::List | Command::Shutdown => None,
    }
}

/// What a command asks to stop, decided by its reply.
enum StopEffect {
    /// `Stop`: the generation its reply names.
    Stop,
    /// Every live generation of a session: `Remove` (requested), `Spawn` with replace or
    /// overlap and `Restart` (superseded).
    Session(String, StopReason),
    /// `Shutdown`: every live generation.
    All,
}

impl StopEffect {
    fn of(command: &Command) -> Option<StopEffect> {
        match command {
            Command::Stop { .. } => Some(StopEffect::Stop),
            Command::Remove { session } => {
                Some(StopEffect::Session(session.clone(), StopReason::Requested))
            }
            Command::Spawn {
                session, on_busy, ..
            } if *on_busy != super::OnBusy::Reject => {
                Some(StopEffect::Session(session.clone(), StopReason::Superseded))
            }
            Command::Restart { session, .. } => {
                Some(StopEffect::Session(session.clone(), StopReason::Superseded))
            }
            Command::Shutdown => Some(StopEffect::All),
            _ => None,
        }
    }
}

/// Invariant 1 for deadlines: a timeout changes only generations whose deadline was due,
/// plus — in a session where something was due (a generation's deadline or a restart) —
/// the start of its pending successor.
fn check_timeout_isolation(
    core: &Core,
    now: Time,
    before: &Before,
    sessions_before: &[super::SessionSnapshot],
) {
    let due = |g: &GenerationSnapshot| g.deadline.is_some_and(|t| t <= now);
    let mut affected: Vec<&str> = before
        .values()
        .filter(|(_, g)| due(g))
        .map(|(s, _)| &**s)
        .collect();
    affected.extend(
        sessions_before
            .iter()
            .filter(|s| s.restart_at.is_some_and(|t| t <= now))
            .map(|s| &*s.name),
    );
    let after = gens_by_number(core);
    for (gen, (session, was)) in before {
        if due(was) {
            continue;
        }
        let Some((_, now_is)) = after.get(gen) else {
            panic!("invariant 1: generation {gen} (not due) left the table at a timeout");
        };
        let started_successor = was.lifecycle == Lifecycle::Pending
            && now_is.lifecycle == Lifecycle::Starting
            && affected.contains(&&**session);
        assert!(
            now_is == was || started_successor,
            "invariant 1: generation {gen} (not due) changed at a timeout: {was:?} -> {now_is:?}"
        );
    }
}

/// Every session's record, by name.
fn records(core: &Core) -> Records {
    core.session_records(RECORD_CLOCK)
        .into_iter()
        .map(|r| (r.name.clone(), r))
        .collect()
}

/// Order (`depends_on`): after a step, no session is left blocked whose generation could
/// start now — its dependencies met, no older generation in its way. The core looks
/// again only at the blocked sessions a step's changes may release; this is what says it
/// never misses one.
fn check_no_release_missed(core: &Core) {
    if core.shutdown != super::Shutdown::Running {
        return;
    }
    for name in core.blocked.names() {
        let Some(s) = core.sessions.get(name).filter(|s| !s.removing) else {
            continue;
        };
        let Some(g) = s.current.and_then(|cur| core.gens.get(&cur)) else {
            continue;
        };
        if g.phase != super::generation::Phase::Pending {
            continue;
        }
        let older_live = core.gens_of(name).next().is_some_and(|o| o < g.gen);
        if older_live && !g.overlap {
            continue;
        }
        assert!(
            core.unmet_dependency(&g.spec.depends_on).is_some(),
            "order: {name} left waiting though its dependencies are met"
        );
    }
}

/// Every session whose record changed (or that appeared or went) since `before` is among
/// the core's dirty sessions: the driver rewrites exactly those.
fn check_dirty(core: &Core, before: &Records) {
    let after = records(core);
    let names = before.keys().chain(after.keys());
    for name in names {
        if before.get(name) != after.get(name) {
            assert!(
                core.dirty.contains(name),
                "the record of session {name} changed but it is not marked dirty: {:?} -> {:?}",
                before.get(name),
                after.get(name)
            );
        }
    }
}
