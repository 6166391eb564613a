//! A virtual clock plus the invariant checker around a core, with shorthands for inputs.

use std::time::Duration;

use crate::core::check::Checker;
use crate::core::{
    Action, Command, Config, Containment, Core, Error, Event, ExitStatus, Input, OnBusy, OutputAt,
    Response, RestoreProblem, SessionRecord, SessionSnapshot, Spec, Stream, Time, WallClock,
};

/// Unix milliseconds at a harness's `Time::ZERO`: each simulated daemon starts its own
/// clock at zero, the wall clock goes on.
pub const BOOT_UNIX_MS: u64 = 1_700_000_000_000;

/// A spec with short, distinct deadlines so tests can step through them.
pub fn spec() -> Spec {
    let mut spec = Spec::new(vec![b"agent".to_vec()]);
    spec.grace = Duration::from_millis(100);
    spec.kill_grace = Duration::from_millis(200);
    spec.drain = Duration::from_millis(50);
    // A restarted core keeps adopted processes running unless a test asks otherwise.
    spec.on_recover = crate::core::OnRecover::Keep;
    spec
}

pub struct Harness {
    pub core: Core,
    pub check: Checker,
    pub now: Time,
    next_request: u64,
    /// Every action so far, in order.
    pub log: Vec<Action>,
}

impl Harness {
    pub fn new() -> Harness {
        Harness::with(Config::default(), 1)
    }

    pub fn with(config: Config, first_gen: u64) -> Harness {
        let core = Core::new(config, first_gen);
        let check = Checker::new(&core);
        Harness {
            core,
            check,
            now: Time::ZERO,
            next_request: 1,
            log: Vec::new(),
        }
    }

    /// A harness around a core and its checker already in use (e.g. a reborn daemon's).
    pub fn from_parts(core: Core, check: Checker) -> Harness {
        Harness {
            core,
            check,
            now: Time::ZERO,
            next_request: 1,
            log: Vec::new(),
        }
    }

    pub fn input(&mut self, input: Input) -> Vec<Action> {
        let actions = self.check.handle(&mut self.core, self.now, input);
        self.answer_close_output(actions)
    }

    /// Records `actions` and, like the driver, answers each `CloseOutput` at once (with
    /// nothing left unread), returning them with what the answers produced.
    fn answer_close_output(&mut self, actions: Vec<Action>) -> Vec<Action> {
        self.log.extend(actions.iter().cloned());
        let mut all = Vec::new();
        for action in actions {
            let close = match action {
                Action::CloseOutput { gen } => Some(gen),
                _ => None,
            };
            all.push(action);
            if let Some(gen) = close {
                all.extend(self.input(Input::OutputClosed { gen, unread: 0 }));
            }
        }
        all
    }

    /// Every action so far, in order.
    pub fn all_actions(&self) -> &[Action] {
        &self.log
    }

    pub fn cmd(&mut self, command: Command) -> Result<Response, Error> {
        let request = self.next_request;
        self.next_request += 1;
        let actions = self.input(Input::Command { request, command });
        actions
            .into_iter()
            .find_map(|a| match a {
                Action::Reply { request: r, result } if r == request => Some(result),
                _ => None,
            })
            .expect("one reply")
    }

    pub fn spawn_with(&mut self, name: &str, spec: Spec, on_busy: OnBusy) -> Result<u64, Error> {
        match self.cmd(Command::Spawn {
            session: name.into(),
            if_gen: None,
            spec: Box::new(spec),
            on_busy,
        })? {
            Response::Gen(gen) => Ok(gen),
            other => panic!("spawn answered {other:?}"),
        }
    }

    pub fn spawn(&mut self, name: &str) -> u64 {
        self.spawn_with(name, spec(), OnBusy::Replace)
            .expect("spawn")
    }

    pub fn started(&mut self, gen: u64) -> Vec<Action> {
        self.input(Input::SpawnResult {
            gen,
            result: Ok(crate::core::Started::in_session(1000 + gen as u32)),
        })
    }

    pub fn exit(&mut self, gen: u64, status: ExitStatus) -> Vec<Action> {
        self.input(Input::LeaderExited { gen, status })
    }

    /// `gen`'s leader exits with `status`, its output ends and its group empties: the
    /// generation is gone. Every action that caused.
    pub fn ends(&mut self, gen: u64, status: ExitStatus) -> Vec<Action> {
        let mut all = self.exit(gen, status);
        all.extend(self.eof(gen));
        all.extend(self.group_empty(gen));
        all
    }

    pub fn eof(&mut self, gen: u64) -> Vec<Action> {
        let mut all = self.input(Input::Eof {
            gen,
            stream: Stream::Stdout,
        });
        all.extend(self.input(Input::Eof {
            gen,
            stream: Stream::Stderr,
        }));
        all
    }

    /// `len` bytes read from `gen`'s stdout: where the core put them, if anywhere.
    pub fn output(&mut self, gen: u64, len: usize) -> Option<OutputAt> {
        self.output_on(gen, Stream::Stdout, len)
    }

    pub fn output_on(&mut self, gen: u64, stream: Stream, len: usize) -> Option<OutputAt> {
        self.check.output(&mut self.core, gen, stream, len)
    }

    pub fn group_empty(&mut self, gen: u64) -> Vec<Action> {
        self.input(Input::GroupEmpty { gen })
    }

    /// Moves the clock by `ms` and fires what is due.
    pub fn advance(&mut self, ms: u64) -> Vec<Action> {
        self.now = Time::from_millis(self.now.as_millis() + ms);
        let actions = self.check.timeout(&mut self.core, self.now);
        self.answer_close_output(actions)
    }

    pub fn stop(&mut self, name: &str, if_gen: Option<u64>) -> Result<Response, Error> {
        self.cmd(Command::Stop {
            session: name.into(),
            if_gen,
            grace: None,
        })
    }

    pub fn get(&self, name: &str) -> SessionSnapshot {
        self.core.get(name).expect("session exists")
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        self.log
            .iter()
            .filter_map(|a| match a {
                Action::Emit(e) => Some(e.clone()),
                _ => None,
            })
            .collect()
    }

    /// Events about `gen`.
    pub fn events_of(&self, gen: u64) -> Vec<Event> {
        self.events()
            .into_iter()
            .filter(|e| e.gen() == Some(gen))
            .collect()
    }

    /// The wall clock now, for a daemon that started at `boot_unix_ms`.
    pub fn wall(&self, boot_unix_ms: u64) -> WallClock {
        WallClock {
            now: self.now,
            unix_ms: boot_unix_ms + self.now.as_millis(),
        }
    }

    /// Every session's record, for a daemon that started at [`BOOT_UNIX_MS`].
    pub fn records(&self) -> Vec<SessionRecord> {
        self.core.session_records(self.wall(BOOT_UNIX_MS))
    }

    /// A new daemon started `later_ms` after this one's `now`, with numbering from this
    /// one's counter (what the high-water mark guarantees), restored from `records`.
    pub fn reborn(
        &self,
        records: Vec<SessionRecord>,
        later_ms: u64,
    ) -> (Harness, Vec<RestoreProblem>) {
        self.reborn_with(self.core.config().clone(), records, later_ms)
    }

    /// [`reborn`](Harness::reborn) under another `config` (the new daemon's options).
    pub fn reborn_with(
        &self,
        config: Config,
        records: Vec<SessionRecord>,
        later_ms: u64,
    ) -> (Harness, Vec<RestoreProblem>) {
        let mut h = Harness::with(config, self.core.next_generation());
        let clock = WallClock {
            now: Time::ZERO,
            unix_ms: BOOT_UNIX_MS + self.now.as_millis() + later_ms,
        };
        let problems = h.check.restore(&mut h.core, clock, records);
        (h, problems)
    }

    /// Feeds `Adopt` for `gen` of `session` with pid `1000 + gen`, verified; whether it was
    /// taken.
    pub fn adopt(&mut self, gen: u64, session: &str) -> bool {
        self.adopt_as(gen, session, true)
    }

    /// Feeds `Adopt` for `gen` of `session` with pid `1000 + gen`, `verified` or not;
    /// whether it was taken.
    pub fn adopt_as(&mut self, gen: u64, session: &str, verified: bool) -> bool {
        self.input(Input::Adopt {
            gen,
            session: session.into(),
            pid: 1000 + gen as u32,
            containment: Containment::Session,
            verified,
            io: None,
            started_unix_ms: 1_600_000_000_000,
        });
        self.core.awaits_exit(gen)
    }

    /// Feeds `Adopt` for `gen` of `session` with pid `1000 + gen`, verified, with the I/O
    /// a keeper held; whether it was taken.
    pub fn adopt_with_io(&mut self, gen: u64, session: &str, io: crate::core::AdoptedIo) -> bool {
        self.input(Input::Adopt {
            gen,
            session: session.into(),
            pid: 1000 + gen as u32,
            containment: Containment::Session,
            verified: true,
            io: Some(io),
            started_unix_ms: 1_600_000_000_000,
        });
        self.core.awaits_exit(gen)
    }

    /// Reloads `config` through the checker, answering `CloseOutput` as the driver does.
    pub fn reload(
        &mut self,
        config: Vec<crate::core::ConfigSession>,
    ) -> Result<crate::core::Plan, Error> {
        let (result, actions) = self.check.reload(&mut self.core, self.now, config);
        self.answer_close_output(actions);
        result
    }

    /// Finishes a start-up.
    pub fn resume(&mut self) -> Vec<Action> {
        let actions = self.check.resume(&mut self.core, self.now);
        self.answer_close_output(actions)
    }

    /// Finishes everything and checks the once-per-generation invariants.
    pub fn settle(&mut self) {
        self.now = self.check.settle(&mut self.core, self.now);
    }
}

/// Whether `actions` contain one for which `f` holds.
pub fn has(actions: &[Action], f: impl Fn(&Action) -> bool) -> bool {
    actions.iter().any(f)
}
