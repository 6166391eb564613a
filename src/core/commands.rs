//! Client commands: each is validated completely before anything changes, so a refused
//! command changes nothing.

use std::sync::Arc;
use std::time::Duration;

use super::action::{Action, Response};
use super::error::{Error, ErrorCode};
use super::generation::{GenInput, Generation};
use super::input::Command;
use super::session::Session;
use super::snapshot::StopReason;
use super::spec::{IoMode, OnBusy, Spec};
use super::{signal, Core, Shutdown};

impl Core {
    pub(super) fn command(&mut self, command: Command) -> Result<Response, Error> {
        match command {
            Command::Spawn {
                session,
                if_gen,
                spec,
                on_busy,
            } => self.spawn(&session, if_gen, *spec, on_busy),
            Command::Write {
                session,
                if_gen,
                bytes,
            } => self.write(&session, if_gen, bytes),
            Command::CloseInput { session, if_gen } => self.close_input(&session, if_gen),
            Command::Resize {
                session,
                if_gen,
                rows,
                cols,
            } => self.resize(&session, if_gen, rows, cols),
            Command::Signal {
                session,
                if_gen,
                signal,
                scope,
            } => self.signal(&session, if_gen, signal, scope),
            Command::Stop {
                session,
                if_gen,
                grace,
            } => self.stop(&session, if_gen, grace),
            Command::Restart { session, if_gen } => self.restart(&session, if_gen),
            Command::Remove { session } => self.remove(&session),
            Command::Shutdown => self.shutdown(),
            Command::List => Ok(Response::List(self.list())),
            Command::Get { session } => {
                let s = self.session(&session)?;
                Ok(Response::Session(Box::new(self.detailed_snapshot(s))))
            }
        }
    }

    pub(super) fn session(&self, name: &str) -> Result<&Session, Error> {
        if !Session::valid_name(name) {
            return Err(Error::bad(format!("{name:?} is not a valid session name")));
        }
        self.sessions
            .get(name)
            .ok_or_else(|| Error::new(ErrorCode::NoSuchSession, format!("no session `{name}`")))
    }

    /// The current generation, checked against `if_gen`.
    fn current(&self, name: &str, if_gen: Option<u64>) -> Result<Option<u64>, Error> {
        let current = self.session(name)?.current;
        match if_gen {
            Some(want) if current != Some(want) => {
                let now = current.map_or_else(|| "none".to_owned(), |g| g.to_string());
                Err(Error::new(
                    ErrorCode::StaleGeneration,
                    format!("{name}: current generation is {now}, not {want}"),
                ))
            }
            _ => Ok(current),
        }
    }

    /// The current generation if it takes input, a terminal size or a signal: alive, or
    /// starting (the driver holds them until it runs), so a client need not wait for
    /// `spawned`.
    fn taking_input(&self, name: &str, if_gen: Option<u64>) -> Result<u64, Error> {
        self.current_where(name, if_gen, Generation::takes_input)
    }

    fn current_where(
        &self,
        name: &str,
        if_gen: Option<u64>,
        ok: impl Fn(&Generation) -> bool,
    ) -> Result<u64, Error> {
        let not_running = || {
            Error::new(
                ErrorCode::NotRunning,
                format!("session `{name}` has no running process"),
            )
        };
        let gen = self.current(name, if_gen)?.ok_or_else(not_running)?;
        match self.gens.get(&gen) {
            Some(g) if ok(g) => Ok(gen),
            Some(g) if g.is_unverified() => Err(Error::new(
                ErrorCode::NotRunning,
                format!(
                    "{name} gen {gen}: was taken back after a restart and its process cannot be verified yet: nothing is sent to it"
                ),
            )),
            _ => Err(not_running()),
        }
    }

    pub(super) fn spawn(
        &mut self,
        name: &str,
        if_gen: Option<u64>,
        spec: Spec,
        on_busy: OnBusy,
    ) -> Result<Response, Error> {
        self.refuse_if_shutting_down()?;
        if !Session::valid_name(name) {
            return Err(Error::bad(format!("{name:?} is not a valid session name")));
        }
        // Decided here, with the spawn, as a `restart` decides it: a session that moved on
        // since the client looked (a restart by its policy, another client) is left alone.
        // Without `if_gen` a spawn may create its session; with one, the session must exist.
        if if_gen.is_some() {
            self.current(name, if_gen)?;
        }
        spec.validate(&self.config)?;
        super::depends::validate(Some(name), &spec.depends_on)?;
        self.refuse_cycle(name, &spec.depends_on)?;
        // A session being removed, whoever started it, is the client's from now on (as a
        // reload takes one over for the config): the next reload leaves it alone.
        let taken_over = self.sessions.get(name).is_some_and(|s| s.removing);
        let response = self.spawn_acyclic(name, spec, on_busy)?;
        if taken_over {
            if let Some(s) = self.sessions.get_mut(name) {
                s.origin = super::Origin::Client;
            }
        }
        Ok(response)
    }

    /// [`spawn`](Core::spawn) of a valid spec whose dependencies were found to close no
    /// cycle: by `spawn`, for one session, or by a reload's plan for the whole config at
    /// once (one session at a time, a config that reverses a dependency would be checked
    /// against the others' old specs and refused half applied).
    pub(super) fn spawn_acyclic(
        &mut self,
        name: &str,
        spec: Spec,
        on_busy: OnBusy,
    ) -> Result<Response, Error> {
        match self.sessions.get(name) {
            Some(s) if self.runs_its_current(s) && on_busy == OnBusy::Reject => {
                return Err(Error::new(
                    ErrorCode::Busy,
                    format!("session `{name}` is busy"),
                ));
            }
            Some(_) => {}
            None if self.sessions.len() >= self.config.max_sessions => {
                let msg = format!(
                    "{} sessions, at the limit of {} (the daemon's --max-sessions); remove some, or raise it",
                    self.sessions.len(),
                    self.config.max_sessions
                );
                return Err(Error::new(ErrorCode::Limit, msg));
            }
            None => {}
        }
        let name: Arc<str> = Arc::from(name);
        let spec = Arc::new(spec);
        let gen = self.allocate(&name, spec.clone(), on_busy)?;
        let s = self
            .sessions
            .entry(name.clone())
            .or_insert_with(|| Session::new(name.clone(), spec.clone()));
        s.spec = spec;
        s.restarts = 0;
        self.mark_dirty(name.clone());
        self.replace_current(&name, gen, on_busy);
        Ok(Response::Gen(gen))
    }

    /// Makes `gen` current, superseding the old current, and starts it per `on_busy`.
    fn replace_current(&mut self, name: &Arc<str>, gen: u64, on_busy: OnBusy) {
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        s.want_up = true;
        s.stopped_by_shutdown = false;
        s.removing = false;
        s.restart_at = None;
        self.sync_restart(name);
        let Some(s) = self.sessions.get_mut(name) else {
            return;
        };
        let old = s.current.replace(gen);
        // A wait for dependencies was the replaced generation's: the new one is gated
        // afresh, with its own `on_busy`.
        self.blocked.remove(name);
        // One whose stop waits for dependents being removed (its session was being removed
        // too, and is taken back) keeps waiting: replaced, it still ends after them. But
        // one whose stop was asked already (a client's `stop`, a recovery's) is superseded
        // now: that stop is what ends it, and its end is no longer its session's — as
        // when no dependent holds it back.
        if let Some(old) = old.filter(|old| !self.stop_waits(*old)) {
            self.dispatch(old, GenInput::Stop(StopReason::Superseded, None));
        }
        if on_busy == OnBusy::Overlap {
            if let Some(g) = self.gens.get_mut(&gen) {
                g.overlap = true;
            }
            let name = name.clone();
            self.start_or_wait(&name, gen);
        } else {
            self.advance_session(name);
        }
    }

    fn write(
        &mut self,
        name: &str,
        if_gen: Option<u64>,
        bytes: Vec<u8>,
    ) -> Result<Response, Error> {
        let gen = self.taking_input(name, if_gen)?;
        let max = self.config.max_pending_input;
        let g = self.gens.get_mut(&gen).expect("running() checked");
        if g.input.closed {
            return Err(Error::new(
                ErrorCode::InputClosed,
                format!("input of generation {gen} is closed"),
            ));
        }
        if g.input.pending.saturating_add(bytes.len()) > max {
            let msg = format!(
                "{} bytes already queued for generation {gen}, limit {max}",
                g.input.pending
            );
            return Err(Error::new(ErrorCode::Limit, msg));
        }
        if !bytes.is_empty() {
            g.input.pending += bytes.len();
            self.actions.push_back(Action::WriteInput { gen, bytes });
        }
        Ok(Response::Gen(gen))
    }

    fn close_input(&mut self, name: &str, if_gen: Option<u64>) -> Result<Response, Error> {
        let gen = self.taking_input(name, if_gen)?;
        let g = self.gens.get_mut(&gen).expect("running() checked");
        if !g.input.closed {
            g.input.closed = true;
            self.actions.push_back(Action::CloseInput { gen });
        }
        Ok(Response::Gen(gen))
    }

    fn resize(
        &mut self,
        name: &str,
        if_gen: Option<u64>,
        rows: u16,
        cols: u16,
    ) -> Result<Response, Error> {
        if rows == 0 || cols == 0 {
            return Err(Error::bad(format!("size {rows}x{cols} has a zero side")));
        }
        let gen = self.taking_input(name, if_gen)?;
        if !matches!(self.gens[&gen].spec.io, IoMode::Pty { .. }) {
            return Err(Error::bad(format!(
                "generation {gen} has no terminal to resize"
            )));
        }
        self.actions.push_back(Action::Resize { gen, rows, cols });
        Ok(Response::Gen(gen))
    }

    fn signal(
        &mut self,
        name: &str,
        if_gen: Option<u64>,
        signal: i32,
        scope: super::Scope,
    ) -> Result<Response, Error> {
        if !signal::is_valid(signal) {
            return Err(Error::bad(format!("{signal} is not a signal number")));
        }
        let gen = self.taking_input(name, if_gen)?;
        if scope == super::Scope::Foreground
            && !matches!(self.gens[&gen].spec.io, IoMode::Pty { .. })
        {
            return Err(Error::bad(format!(
                "generation {gen} has no terminal, so no foreground process group"
            )));
        }
        self.actions
            .push_back(Action::Signal { gen, signal, scope });
        Ok(Response::Gen(gen))
    }

    /// Stops the session: no restart may follow (a pending one is cancelled), and the
    /// current generation walks the stop sequence. Stopping a stopped session succeeds.
    fn stop(
        &mut self,
        name: &str,
        if_gen: Option<u64>,
        grace: Option<Duration>,
    ) -> Result<Response, Error> {
        let current = self.current(name, if_gen)?;
        let s = self.sessions.get_mut(name).expect("current() checked");
        s.want_up = false;
        s.stopped_by_shutdown = false;
        if s.restart_at.take().is_some() {
            s.rest = super::Rest::Stopped;
        }
        let name = s.name.clone();
        self.sync_restart(&name);
        // A grace given applies to what the session still has ending too (superseded
        // generations, the rest of an ended leader's group): a stop brings every SIGKILL
        // of the session forward, never back, and their causes stay as they were.
        if grace.is_some() {
            let ending: Vec<u64> = self
                .gens_of(&name)
                .filter(|&g| Some(g) != current)
                .collect();
            for gen in ending {
                self.dispatch(gen, GenInput::Stop(StopReason::Superseded, grace));
            }
        }
        match current {
            Some(gen) => {
                self.dispatch(gen, GenInput::Stop(StopReason::Requested, grace));
                Ok(Response::Gen(gen))
            }
            None => Ok(Response::Ok),
        }
    }

    /// A fresh start of the same spec: replaces the current generation and clears the
    /// restart count and `failed`.
    fn restart(&mut self, name: &str, if_gen: Option<u64>) -> Result<Response, Error> {
        self.refuse_if_shutting_down()?;
        self.current(name, if_gen)?;
        let name: Arc<str> = self
            .sessions
            .get(name)
            .expect("current() checked")
            .name
            .clone();
        let spec = self.sessions[&name].spec.clone();
        // A session being removed depends on nothing while it goes (a spawn of another
        // session may have named it since): taken back, its dependencies count again, and
        // must close no cycle, as a spawn's must.
        self.refuse_cycle(&name, &spec.depends_on)?;
        let gen = self.allocate(&name, spec, OnBusy::Replace)?;
        if let Some(s) = self.sessions.get_mut(&name) {
            s.restarts = 0;
            // Kept from its removal by a client, as by a `spawn`: the client's from now on.
            if s.removing {
                s.origin = super::Origin::Client;
            }
        }
        self.replace_current(&name, gen, OnBusy::Replace);
        Ok(Response::Gen(gen))
    }

    /// Stops every generation of the session and forgets it once they are all gone.
    pub(super) fn remove(&mut self, name: &str) -> Result<Response, Error> {
        let s = self
            .sessions
            .get_mut(self.session(name)?.name.clone().as_ref())
            .expect("session() checked");
        s.want_up = false;
        s.removing = true;
        s.restart_at = None;
        let name = s.name.clone();
        self.sync_restart(&name);
        let gens: Vec<u64> = self.gens_of(&name).collect();
        for gen in gens {
            self.stop_after_dependents(gen, StopReason::Requested);
        }
        self.advance_session(&name);
        Ok(Response::Ok)
    }

    /// No new generation starts once shutdown began: it would only be stopped again.
    fn refuse_if_shutting_down(&self) -> Result<(), Error> {
        match self.shutdown {
            Shutdown::Running => Ok(()),
            Shutdown::Stopping | Shutdown::Killing => {
                Err(Error::new(ErrorCode::Busy, "the daemon is shutting down"))
            }
        }
    }

    /// The first call stops everything with each spec's grace; any later one kills
    /// everything at once (see `Generation::kill`).
    fn shutdown(&mut self) -> Result<Response, Error> {
        let kill = match self.shutdown {
            Shutdown::Running => {
                self.shutdown = Shutdown::Stopping;
                // What the shutdown stops, known now (a second shutdown finds it all down):
                // the config's sessions running or with a restart due. One that ended on
                // its own is not stopped by it; one an earlier shutdown (or a crash) left
                // down and nobody started since stays so.
                for s in self.sessions.values_mut() {
                    let up = s.want_up && !s.removing && s.origin == super::Origin::Config;
                    let live = s.current.is_some() || s.restart_at.is_some();
                    s.stopped_by_shutdown |= up && live;
                }
                false
            }
            Shutdown::Stopping | Shutdown::Killing => {
                self.shutdown = Shutdown::Killing;
                true
            }
        };
        let mut waiting = Vec::new();
        for s in self.sessions.values_mut() {
            s.want_up = false;
            if s.restart_at.take().is_some() {
                s.rest = super::Rest::Stopped;
                waiting.push(s.name.clone());
            }
        }
        for name in waiting {
            self.sync_restart(&name);
        }
        if kill {
            // No order any more: what waited for its dependents is killed with them.
            self.deferred_stops.clear();
            let gens: Vec<u64> = self.gens.keys().copied().collect();
            for gen in gens {
                self.dispatch(gen, GenInput::Kill);
            }
        } else {
            self.stop_in_order(None);
        }
        Ok(Response::Ok)
    }
}
