//! The core's side of state that outlives the daemon: exporting each session as a
//! [`SessionRecord`], saying which sessions changed since the driver last asked, and
//! rebuilding the table in a new daemon.
//!
//! The start-up protocol is on [`Core::restore`]; the export on
//! [`Core::take_dirty_sessions`].
//!
//! # While running
//!
//! After each `handle` / `handle_timeout` (and after `restore`, each `Adopt` and `resume`),
//! [`Core::take_dirty_sessions`] names every session whose record changed since the last
//! call; for each, [`Core::session_record`] gives the record to write, or `None` for a
//! session that is gone, whose file is removed.

use std::sync::Arc;

use super::action::{Action, Event, ExitCause};
use super::error::Error;
use super::generation::{DurableStop, Ended, GenInput, Generation};
use super::input::{AdoptedIo, Started};
use super::persist::{Desired, RestoreProblem, SessionRecord, WallClock};
use super::session::{Session, RECENT_ENDS};
use super::snapshot::{LastEnd, StopReason};
use super::time::Time;
use super::Core;

impl Core {
    /// The record of session `name` as it stands, with a pending restart's instant in Unix
    /// milliseconds per `clock`; `None` if there is no such session (any more).
    pub fn session_record(&self, name: &str, clock: WallClock) -> Option<SessionRecord> {
        let s = self.sessions.get(name)?;
        let desired = if s.removing {
            Desired::Removing
        } else if s.want_up {
            Desired::Up
        } else {
            Desired::Down
        };
        Some(SessionRecord {
            name: s.name.clone(),
            spec: (*s.spec).clone(),
            origin: s.origin,
            desired,
            rest: s.rest.into(),
            restarts: s.restarts,
            restart_at_unix_ms: s.restart_at.map(|t| clock.unix_ms_of(t)),
            restart_uncounted: s.restart_uncounted && s.restart_at.is_some(),
            current: s.current,
            stopped_by_shutdown: s.stopped_by_shutdown,
            current_overlaps: s
                .current
                .and_then(|g| self.gens.get(&g))
                .is_some_and(|g| g.overlap),
            last_gen: s.last_gen,
            last_end: s.last_end.clone(),
            recent_ends: s.recent_ends().cloned().collect(),
            stops: self
                .gens_of(&s.name)
                .filter_map(|gen| self.gens.get(&gen))
                .filter_map(|g| Some(g.durable_stop()?.record(g.gen, clock)))
                .collect(),
        })
    }

    /// The session of each generation the core can tell: every live one, and those its
    /// sessions name (current, last, recent ends). What is read back from the output
    /// journal is checked against it: a record naming a generation under another
    /// session's name was damaged.
    pub fn generation_owners(&self) -> std::collections::HashMap<u64, Arc<str>> {
        let mut owners: std::collections::HashMap<u64, Arc<str>> = self
            .gens
            .iter()
            .map(|(&gen, g)| (gen, g.session.clone()))
            .collect();
        for s in self.sessions.values() {
            let ends = s.recent_ends().filter_map(Event::gen);
            let named = [s.current, s.last_gen, s.last_end.as_ref().map(LastEnd::gen)];
            for gen in named.into_iter().flatten().chain(ends) {
                owners.entry(gen).or_insert_with(|| s.name.clone());
            }
        }
        owners
    }

    /// The records of every session, by name.
    pub fn session_records(&self, clock: WallClock) -> Vec<SessionRecord> {
        self.sessions
            .keys()
            .filter_map(|name| self.session_record(name, clock))
            .collect()
    }

    /// The sessions whose record changed since the last call (or since the core was made),
    /// by name, each once: write each one's [`session_record`](Core::session_record), or
    /// remove its file when that is `None`.
    ///
    /// Marked by every command that changes a session (`spawn`, `stop`, `restart`,
    /// `remove`, `shutdown`), every terminal event, every backoff armed or fired, every
    /// session restored, adopted into or resumed, and every session removed. Bounded by
    /// the sessions in the table plus those removed since the last call: call it after
    /// every turn.
    pub fn take_dirty_sessions(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.dirty).into_iter().collect()
    }

    /// How many sessions [`take_dirty_sessions`](Core::take_dirty_sessions) would name
    /// now: what a slice of requests has left to write.
    pub fn dirty_session_count(&self) -> usize {
        self.dirty.len()
    }

    /// Rebuilds sessions from the records of a previous daemon, at `clock.now`. Call once,
    /// on a new core, before anything else is fed to it (the whole start-up is below).
    /// Returns what was refused, per record; the others are restored.
    ///
    /// A record is refused when its name or spec is invalid ([`Spec::validate`] against
    /// this daemon's limits: they may be stricter than the last one's), its name is a
    /// duplicate, or it names a generation at or above
    /// [`next_generation`](Core::next_generation) (that number could be allocated again).
    /// Never for `--max-sessions`: it bounds what is created, not what is taken back.
    ///
    /// A pending backoff keeps the time it had left: a restart due while no daemon ran
    /// fires at the first [`handle_timeout`](Core::handle_timeout). A session whose
    /// process was running is not restarted here: [`resume`](Core::resume) decides, once
    /// adoption said whether the process is still there.
    ///
    /// # Start-up, in this order (the whole protocol)
    ///
    /// 1. `Core::new(config, first_gen)` with `first_gen` at or above every generation number
    ///    on disk (the store's high-water mark, raised to its `generation_floor`), so no
    ///    restored or adopted number is ever allocated again.
    /// 2. This, with every session record loaded. Sessions come back with their
    ///    spec, desired state, restart count, rest state, last end and recent ends (so a `wait`
    ///    for a generation that ended before the restart is answered), and a pending backoff
    ///    re-armed for the time it had left. A record's current generation is provisionally
    ///    current, with no process: what became of it is said by the next two steps.
    /// 3. For each generation descriptor, after its identity check, one
    ///    [`Input::Adopt`](super::Input::Adopt): the process becomes a Running generation of
    ///    its session again, without a `Spawn` and without any signal. Then, by verdict:
    ///    `match` — nothing more; `mismatch` — [`Input::Lost`](super::Input::Lost) for it at
    ///    once, which reports it `exited` with cause `lost` and no code (its one terminal
    ///    event) and releases it without a signal; `unverifiable` — it is adopted with
    ///    `verified: false`: listed as such, never signalled (a stop waits), until a later
    ///    check feeds [`Input::Verified`](super::Input::Verified) (`match`) or `Lost`
    ///    (`mismatch`). [`Core::awaits_exit`] tells whether an
    ///    `Adopt` was taken (it is refused for an unknown session, a number the core may
    ///    still allocate, one already ended, or a session that tracks as many generations
    ///    as one may; never for `--max-running`, which bounds starts, not what runs).
    /// 4. [`Core::resume`] once: a recorded current generation that no descriptor adopted
    ///    (its process was never described, or its end was not saved before the crash) is
    ///    reported `lost`, and its session's restart policy decides as for any end that was not
    ///    a success — unless older generations of its session were adopted (even if found
    ///    gone at once): it was a replacement waiting for them, and a new generation
    ///    replaces them in its stead (uncounted); adopted generations that were being superseded are stopped (cause
    ///    `superseded`), adopted current ones of a stopped or removed session are stopped
    ///    (cause `stopped`); a removed session with nothing left goes. Only then are clients
    ///    served.
    ///
    /// Deliberate choices: a recorded current generation that comes back neither adopted nor
    /// described counts as ended `lost` — not success — so `on_failure` and `always` start it
    /// again after the backoff its restart count calls for, and `never` leaves it `failed`;
    /// the backoff rather than an immediate start keeps a daemon that crashes at start-up from
    /// turning into a spawn loop. An adopted generation's uptime counts from its adoption.
    ///
    ///
    /// [`Spec::validate`]: super::Spec::validate
    pub fn restore(
        &mut self,
        clock: WallClock,
        records: Vec<SessionRecord>,
    ) -> Vec<RestoreProblem> {
        self.advance_clock(clock.now);
        let mut problems = Vec::new();
        let claims = others_generations(&records);
        for record in records {
            let name = record.name.clone();
            let restored = match claims.get(&name) {
                Some(why) => Err(Error::bad(why.clone())),
                None => self.restore_one(clock, record),
            };
            match restored {
                Ok(()) => {
                    self.mark_dirty(name);
                }
                Err(error) => problems.push(RestoreProblem {
                    session: name,
                    error,
                }),
            }
        }
        problems
    }

    fn restore_one(&mut self, clock: WallClock, r: SessionRecord) -> Result<(), Error> {
        if let Some(why) = Session::name_problem(&r.name) {
            return Err(Error::bad(why));
        }
        r.spec.validate(&self.config)?;
        // What a `spawn` is refused for: itself among its dependencies, or a dependency
        // that closes a cycle with the sessions restored before it (of a cycle, the
        // records read first are kept, as the sessions spawned first would be).
        super::depends::validate(Some(&r.name), &r.spec.depends_on)?;
        self.refuse_cycle(&r.name, &r.spec.depends_on)?;
        if self.sessions.contains_key(&r.name) {
            return Err(Error::bad("a second record of the same session"));
        }
        // `--max-sessions` bounds what clients and the config create, not what is on disk:
        // a session left out would leave its processes unsupervised and its output behind.
        let named = [r.current, r.last_gen, r.last_end.as_ref().map(|e| e.gen())];
        let ends = r.recent_ends.iter().filter_map(Event::gen);
        if let Some(gen) = named.into_iter().flatten().chain(ends).max() {
            if gen >= self.next_gen {
                let msg = format!(
                    "generation {gen} is not below the first number this daemon allocates ({})",
                    self.next_gen
                );
                return Err(Error::bad(msg));
            }
        }
        if r.recent_ends
            .iter()
            .any(|e| !e.is_terminal() || *e.session() != r.name)
        {
            return Err(Error::bad("a recent end that is not this session's end"));
        }
        let mut s = Session::new(r.name.clone(), Arc::new(r.spec));
        s.origin = r.origin;
        s.want_up = r.desired == Desired::Up;
        s.removing = r.desired == Desired::Removing;
        s.rest = r.rest.into();
        // Stopped by the last shutdown (`down`), or left down by a crash before the
        // config's first load took it up (`up`). A session that ended on its own is
        // neither, though an older daemon flagged it so.
        s.stopped_by_shutdown = r.stopped_by_shutdown
            && r.desired != Desired::Removing
            && Session::down_by_daemon(s.rest, r.last_end.as_ref());
        s.restarts = r.restarts;
        // Only a session that still wants to run has a backoff to finish; one already due
        // fires at the first timeout.
        s.restart_at = r
            .restart_at_unix_ms
            .filter(|_| s.want_up && r.current.is_none())
            .map(|ms| clock.time_of(ms).max(self.now));
        s.restart_uncounted = r.restart_uncounted && s.restart_at.is_some();
        s.current = r
            .current
            .filter(|g| !r.recent_ends.iter().any(|e| e.gen() == Some(*g)));
        s.current_overlaps = r.current_overlaps && s.current.is_some();
        s.taken_back_current = s.current.is_some();
        s.last_gen = r.last_gen;
        s.last_end = r.last_end;
        // Stops under way: applied to each generation as it is taken back, forgotten at
        // `resume` for those that were not (a number this daemon may allocate is not
        // one of its generations).
        for stop in r.stops.iter().filter(|st| st.gen < self.next_gen) {
            self.taken_stops
                .insert(stop.gen, DurableStop::from_record(stop, clock));
        }
        let skip = r.recent_ends.len().saturating_sub(RECENT_ENDS);
        for end in r.recent_ends.into_iter().skip(skip) {
            s.remember_end(end);
        }
        // Its state was announced by the daemon that saved it; only changes from here on
        // are news (and an `Adopt` about one session announces nothing about another).
        s.announced = Some(self.state_of(&s));
        let name = r.name.clone();
        self.sessions.insert(r.name, s);
        self.sync_restart(&name);
        Ok(())
    }

    /// Whether an [`Input::Adopt`](super::Input::Adopt) of `gen` for `session` would be
    /// taken now: a session that was restored, a number this core cannot allocate, not
    /// tracked or ended already, and room in the session's table. A driver that gets
    /// `false` must not keep the process as if it were supervised: nothing would ever stop
    /// it.
    pub fn would_adopt(&self, gen: u64, session: &str) -> bool {
        // `--max-running` bounds what this daemon starts, not what already runs: a process
        // taken back under a lower limit runs on (as under a lowered `RLIMIT_NPROC`), and
        // new starts wait until what runs is below the limit. One session's table stays
        // bounded all the same.
        self.sessions.get(session).is_some_and(|s| {
            gen < self.next_gen
                && !self.gens.contains_key(&gen)
                && s.recent_end(gen).is_none()
                && self.session_full(&s.name).is_none()
        })
    }

    /// Registers a process of a previous daemon as generation `gen` of `session`, Running,
    /// with no `Spawn`, no `spawned` event and no signal (see [`Input::Adopt`]). Without
    /// `io` its I/O was lost with the old daemon: it has no output streams and no stdin.
    /// One it [would not adopt](Core::would_adopt) is ignored.
    ///
    /// [`Input::Adopt`]: super::Input::Adopt
    pub(super) fn adopt(
        &mut self,
        gen: u64,
        session: &str,
        started: Started,
        verified: bool,
        io: Option<AdoptedIo>,
        started_unix_ms: u64,
    ) {
        if !self.would_adopt(gen, session) {
            return;
        }
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let older = s.current.is_some_and(|current| gen < current);
        let mut g = Generation::adopted(
            gen,
            s.name.clone(),
            s.spec.clone(),
            started,
            verified,
            io,
            self.now,
        );
        g.started_unix_ms = Some(started_unix_ms);
        if let Some(stop) = self.taken_stops.remove(&gen) {
            g.resume_stop(stop, self.now);
        }
        let name = s.name.clone();
        if let Some(s) = self.sessions.get_mut(&name) {
            s.older_taken_back |= older;
        }
        self.gens.insert(gen, g);
        self.by_session.insert((name.clone(), gen));
        self.sync_gen(gen);
        self.mark_dirty(name);
    }

    /// Whether an [`Input::AdoptTree`](super::Input::AdoptTree) of `gen` for `session`
    /// would be taken now: a restored session whose end of `gen` is recorded, whose spec
    /// kills what a generation leaves (`on_exit: kill_group`), `gen` not tracked and not
    /// a number this core may allocate, and room in the session's table.
    pub fn would_adopt_tree(&self, gen: u64, session: &str) -> bool {
        self.sessions.get(session).is_some_and(|s| {
            gen < self.next_gen
                && !self.gens.contains_key(&gen)
                && s.recent_end(gen).is_some()
                && s.spec.on_exit == super::OnExit::KillGroup
                && self.session_full(&s.name).is_none()
        })
    }

    /// Takes back the tree of generation `gen`, whose end was reported before a crash
    /// and whose cgroup still holds what its leader left (see
    /// [`Generation::tree_taken_back`]). One it [would not
    /// take](Core::would_adopt_tree) is ignored.
    pub(super) fn adopt_tree(&mut self, gen: u64, session: &str, pid: u32) {
        if !self.would_adopt_tree(gen, session) {
            return;
        }
        let Some(s) = self.sessions.get(session) else {
            return;
        };
        let tree = self.taken_stops.remove(&gen).and_then(|d| d.tree);
        let g = Generation::tree_taken_back(
            gen,
            s.name.clone(),
            s.spec.clone(),
            pid,
            s.recent_end(gen),
            tree,
            self.now,
        );
        let name = s.name.clone();
        self.trees_taken.insert(gen);
        self.gens.insert(gen, g);
        self.by_session.insert((name.clone(), gen));
        self.sync_gen(gen);
        self.mark_dirty(name);
    }

    /// Finishes a start-up (see [`restore`](Core::restore)): settles what adoption left open. Call
    /// once, after [`restore`](Core::restore) and every `Adopt` (and `Lost` for the
    /// mismatched ones), then drain [`poll_action`](Core::poll_action) as usual.
    pub fn resume(&mut self, now: Time) {
        self.advance_clock(now);
        self.taken_stops.clear();
        for g in self.gens.values() {
            g.resume_kill(&mut self.actions);
        }
        for gen in std::mem::take(&mut self.trees_taken) {
            if let Some(g) = self.gens.get(&gen) {
                g.kill_taken_tree(&mut self.actions);
            }
        }
        let names: Vec<Arc<str>> = self.sessions.keys().cloned().collect();
        for name in names {
            self.mark_dirty(name.clone());
            self.resume_session(&name);
        }
        self.follow_order();
        self.announce_states();
    }

    fn resume_session(&mut self, name: &Arc<str>) {
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        // A session that should not run, or whose process should not be kept: `on_recover`
        // is about a process whose I/O was lost; one resumed with its I/O runs on.
        let stop_current = !s.want_up || s.removing;
        let stop_lost_io = s.spec.on_recover == super::OnRecover::Stop;
        let current = s.current;
        let restarts = s.restarts;
        let older_taken_back = std::mem::take(&mut s.older_taken_back);
        let taken_back_current = std::mem::take(&mut s.taken_back_current);
        let on_busy = match std::mem::take(&mut s.current_overlaps) {
            true => super::OnBusy::Overlap,
            false => super::OnBusy::Replace,
        };
        // The recorded current with no process: nobody will ever see it end.
        if let Some(gen) = current.filter(|g| !self.gens.contains_key(g)) {
            // With older generations of its session running when the daemon died, it was a
            // replacement waiting for them (or caught in its start by the crash): what was
            // asked for still stands, so a new one takes its place — not the restart policy.
            // (A generation taken back only for its tree had ended before: not one of them.)
            let older_running = self
                .gens_of(name)
                .filter_map(|g| self.gens.get(&g))
                .any(Generation::is_live_leader);
            let replacing = !stop_current && (older_taken_back || older_running);
            self.lost_unseen(name, gen);
            if replacing {
                self.replace_again(name, restarts, on_busy);
            }
        }
        let current = self.sessions.get(name).and_then(|s| s.current);
        let adopted: Vec<(u64, StopReason)> = self
            .gens_of(name)
            .filter_map(|gen| self.gens.get(&gen))
            .filter(|g| g.adopted.is_some())
            .filter_map(|g| {
                let stop = stop_current || (stop_lost_io && !g.io_kept());
                match (Some(g.gen) == current, stop) {
                    (false, _) => Some((g.gen, StopReason::Superseded)),
                    (true, true) => Some((g.gen, StopReason::Requested)),
                    (true, false) => None,
                }
            })
            .collect();
        if let (Some(gen), false) = (current, stop_current) {
            if let Some(s) = self.sessions.get_mut(name) {
                s.recovery_stop = adopted.iter().any(|(g, _)| *g == gen).then_some(gen);
            }
        }
        let removing = self.sessions.get(name).is_some_and(|s| s.removing);
        for (gen, reason) in adopted {
            if removing {
                // Its removal went on in the daemon that died: dependents first still (one
                // that sessions being removed depend on waits for them to end).
                self.stop_after_dependents(gen, reason);
            } else {
                self.dispatch(gen, GenInput::Stop(reason, None));
            }
        }
        self.advance_session(name);
        // What the config asked to run and the crash left down — the generation it was
        // running when the daemon died found lost, and no restart due: its first load
        // starts it again, as one the shutdown stopped. One still running, being stopped,
        // or with a restart due is left to that; one that had ended on its own before the
        // crash (a one-shot done, one `failed`) is left as it is, as a reload leaves it.
        if let Some(s) = self.sessions.get_mut(name) {
            let down = s.current.is_none() && s.restart_at.is_none();
            let lost = taken_back_current
                && matches!(
                    s.last_end,
                    Some(LastEnd::Exited {
                        cause: ExitCause::Lost,
                        ..
                    })
                );
            if s.origin == super::Origin::Config && s.want_up && !s.removing && down && lost {
                s.stopped_by_shutdown = true;
            }
        }
    }

    /// Starts the replacement a crash interrupted again, as a new generation with the lost
    /// one's `on_busy`: with `replace` it waits (Pending) for the older generations it
    /// replaces, as the lost one did; with `overlap` it starts beside them. Not counted as
    /// a restart (`restarts` is the count before the lost end); if the session has no room
    /// left, the restart policy decides as before.
    fn replace_again(&mut self, name: &Arc<str>, restarts: u32, on_busy: super::OnBusy) {
        let Some(s) = self.sessions.get(name) else {
            return;
        };
        if s.current.is_some() || !s.want_up {
            return;
        }
        let spec = s.spec.clone();
        let Ok(gen) = self.allocate(name, spec, on_busy) else {
            return;
        };
        if let Some(g) = self.gens.get_mut(&gen) {
            g.overlap = on_busy == super::OnBusy::Overlap;
        }
        if let Some(s) = self.sessions.get_mut(name) {
            s.current = Some(gen);
            s.restart_at = None;
            s.restarts = restarts;
        }
        self.sync_restart(name);
        self.mark_dirty(name.clone());
    }

    /// The one terminal event of a generation the previous daemon ran and this one never
    /// saw: `exited`, cause `lost`, no code; then the session reacts as to any lost end.
    fn lost_unseen(&mut self, name: &Arc<str>, gen: u64) {
        let event = Event::Exited {
            session: name.clone(),
            gen,
            code: None,
            signal: None,
            cause: ExitCause::Lost,
            discarded: 0,
            truncated: false,
        };
        self.actions.push_back(Action::Emit(event.clone()));
        if let Some(s) = self.sessions.get_mut(name) {
            s.remember_end(event);
        }
        self.mark_dirty(name.clone());
        self.on_end(name, gen, Ended::Lost);
        self.sync_restart(name);
    }
}

/// The records among `records` whose current generation is another's (a damaged or
/// copied record), each with why: a generation is one session's, so a record claiming
/// one that another record says ended, or that is another's last, or that another claims
/// as current too and comes first by name, is refused — else one process (or one loss)
/// would be reported under two sessions. Whose a running process is, its descriptor says
/// first (the driver refuses a record claiming another's before this).
fn others_generations(records: &[SessionRecord]) -> std::collections::HashMap<Arc<str>, String> {
    use std::collections::HashMap;
    // Every generation a record names but as its current one, and each current claim.
    let mut named: HashMap<u64, &Arc<str>> = HashMap::new();
    let mut current: HashMap<u64, &Arc<str>> = HashMap::new();
    for r in records {
        let ended = r.recent_ends.iter().filter_map(Event::gen);
        let last = [r.last_gen, r.last_end.as_ref().map(|e| e.gen())];
        for gen in last.into_iter().flatten().chain(ended) {
            if Some(gen) != r.current {
                named.entry(gen).or_insert(&r.name);
            }
        }
        if let Some(gen) = r.current {
            current
                .entry(gen)
                .and_modify(|n| *n = (*n).min(&r.name))
                .or_insert(&r.name);
        }
    }
    let mut refused = HashMap::new();
    for r in records {
        let Some(gen) = r.current else { continue };
        let owner = match named.get(&gen) {
            Some(o) if **o != r.name => Some(o),
            _ => current.get(&gen).filter(|o| ***o != r.name),
        };
        if let Some(o) = owner {
            let why = format!("its current generation {gen} is session {o}'s");
            refused.insert(r.name.clone(), why);
        }
    }
    refused
}
