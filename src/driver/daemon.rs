//! The loop: one thread, one `mio::Poll`, in the style of mio's own tcp_server example —
//! drain each ready source until it would block (bounded per turn), retry `EINTR`, ignore
//! unknown tokens, deregister before closing.
//!
//! Each readiness goes to the one owner of that state — [`Children`], [`Clients`],
//! [`Logs`] — and what happened becomes a core [`Input`]; the core's actions are then
//! executed in order, each by its owner. The poll timeout is the core's next deadline, so
//! an idle daemon never wakes.

mod resume;
mod upgrade;

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::children::{Children, LeaderState, Read};
use super::clients::{ClientLimits, Clients, Hello, Next};
use super::config::{start_err, DaemonConfig, StartError};
use super::containment::cgroup_root;
use super::groups;
use super::keeper_link::KeeperLink;
use super::keeper_start::find_or_start;
use super::listener::{self, PeerPolicy};
use super::logs::Logs;
use super::persist::{claim_directories, unix_ms, Persist};
use super::ready::notify_ready;
use super::recover::{sweep, take_back, TakenBack};
use super::signals::{ControlSignal, Signals};
use super::subscriptions::Terms;
use super::token::Source;
use super::turn::Turn;
use super::upgrade::upgrader::Upgrader;
use crate::core::{
    Action, Command, Config as CoreConfig, Core, Event, Input, SessionState, Spec, Started, Stream,
    Time,
};
use crate::proto::encode;
use crate::proto::envelope::RequestId;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::request::{Op, Target};
use crate::sys::identity::{adopt, Adoption};
use crate::sys::process::ReaperMode;

/// Reads of one output stream per turn before other sources get theirs: a child writing
/// flat out cannot starve the loop; the stream is revisited before the next sleep.
const READS_PER_TURN: usize = 16;

/// Bytes read from one client per turn, so one chatty client cannot starve the rest.
const CLIENT_READ_PER_TURN: usize = 256 * 1024;

/// Identity checks of unverified generations per turn (one may run `ps`): the rest due
/// are checked on the next turns.
const CHECKS_PER_TURN: usize = 8;

/// The core's clock (milliseconds since the daemon started) and the wire's (Unix).
#[derive(Debug, Clone, Copy)]
pub(super) struct Clock {
    start: Instant,
    wire: encode::Clock,
}

impl Clock {
    fn now(&self) -> Time {
        Time::from_millis(self.start.elapsed().as_millis() as u64)
    }
}

/// Everything the loop owns.
#[derive(Debug)]
pub struct Daemon {
    cfg: DaemonConfig,
    poll: Poll,
    core: Core,
    clock: Clock,
    signals: Signals,
    children: Children,
    clients: Clients,
    logs: Logs,
    persist: Persist,
    turn: Turn,
    upgrade: Upgrader,
    /// The link to the keeper holding the children's descriptors across a crash; `None`
    /// without one (disabled, or given up after a failure).
    keeper: Option<KeeperLink>,
}

/// What `hello` says about this daemon.
pub(super) fn hello(cfg: &DaemonConfig, children: &Children) -> Hello {
    let fallback =
        cfg.reaper == ReaperMode::Fallback || !crate::sys::pidfd_probe::pidfd_supported();
    let identity = match crate::sys::identity::observe(std::process::id() as i32, None) {
        crate::sys::identity::Observed::Token(t) => t,
        _ => String::new(),
    };
    Hello {
        identity,
        reaper: if fallback { "sigchld" } else { "pidfd" },
        containment: children.containment().as_str(),
    }
}

/// The limits of every connection and who may connect.
pub(super) fn client_rules(cfg: &DaemonConfig) -> (ClientLimits, PeerPolicy) {
    let limits = ClientLimits {
        max_clients: cfg.max_clients,
        max_line: cfg.max_line,
        outbox_bytes: cfg.client_outbox_bytes,
    };
    (limits, PeerPolicy::new(cfg.allow_uids.clone()))
}

/// The core's limits, from the daemon's configuration (which an upgrade carries, so the
/// resumed daemon checks the imported core against the same).
pub(super) fn core_config(cfg: &DaemonConfig) -> CoreConfig {
    CoreConfig {
        max_sessions: cfg.max_sessions,
        max_generations: cfg.max_running,
        ..CoreConfig::default()
    }
}

impl Daemon {
    /// Prepares the state directory, lease, socket and signal handling.
    pub fn new(cfg: DaemonConfig) -> Result<Daemon, StartError> {
        let shared = !cfg.allow_uids.is_empty();
        let lease = claim_directories(&cfg.state_dir, &cfg.socket, shared)?;
        if let Some(old) = crate::sys::rlimit::raise_nofile_limit() {
            log::debug!(
                "descriptor limit raised from {old} to {:?}",
                crate::sys::rlimit::nofile_soft_limit()
            );
        }
        let poll = Poll::new().map_err(start_err("epoll"))?;
        let listener = listener::open(&cfg.socket, shared, poll.registry())?;
        let signals = Signals::new(poll.registry()).map_err(start_err("signal handlers"))?;
        if cfg.subreaper {
            crate::sys::orphans::become_subreaper().map_err(start_err("PR_SET_CHILD_SUBREAPER"))?;
        }
        let epoch_unix_ms = unix_ms();
        let (mut persist, left) = Persist::open(&cfg.state_dir, lease).map_err(StartError)?;
        let cgroups = cgroup_root(cfg.containment, persist.dir_id()).map_err(StartError)?;
        let mut children = Children::new(
            cfg.reaper,
            crate::sys::orphans::adopts_orphans(),
            cgroups,
            persist.dir_id().to_owned(),
        );
        let hello = hello(&cfg, &children);
        let (limits, policy) = client_rules(&cfg);
        let clock = Clock {
            start: Instant::now(),
            wire: encode::Clock { epoch_unix_ms },
        };
        let mut core = Core::new(core_config(&cfg), left.first_gen);
        // Before taking back: what the previous daemon's keeper held comes back with it.
        let (mut keeper, mut kept) = match cfg.keeper_hold {
            Some(hold) => find_or_start(&cfg.state_dir, hold),
            None => (None, Default::default()),
        };
        let handed: Vec<u64> = kept.keys().copied().collect();
        let TakenBack { logs, with_io } = take_back(
            &mut core,
            &mut children,
            &mut persist,
            left,
            &mut kept,
            &poll,
            clock.now(),
            cfg.reaper,
        );
        if let Some(link) = &mut keeper {
            // Its copies of what was not resumed with its I/O are no longer needed.
            let forgotten = handed.iter().filter(|g| !with_io.contains(g));
            let result = forgotten
                .copied()
                .try_for_each(|gen| link.forget(gen))
                .and_then(|()| link.register(poll.registry()));
            if let Err(e) = result {
                log::error!("keeper link: {e}; carrying on without a keeper");
                keeper = None;
            }
        }
        Ok(Daemon {
            children,
            cfg,
            poll,
            core,
            clock,
            signals,
            clients: Clients::new(listener, policy, limits, hello),
            logs,
            persist,
            turn: Turn::default(),
            upgrade: Upgrader::started(),
            keeper,
        })
    }

    /// Runs the loop until shutdown completes.
    pub fn run(mut self) -> io::Result<()> {
        let mut events = Events::with_capacity(256);
        log::info!(
            "genward {} listening on {}",
            env!("CARGO_PKG_VERSION"),
            self.cfg.socket.display(),
        );
        // What taking back the previous daemon's state asked for (stops, lost ends,
        // restarts) runs before anyone is told the daemon is ready.
        self.run_actions();
        notify_ready(self.cfg.ready_fd.take());
        loop {
            if self.core.is_shut_down() {
                self.clients.flush_before_exit(&mut self.poll, &self.logs);
                match self.core.generation_count() {
                    0 => log::info!("all sessions stopped; exiting"),
                    n => {
                        let unverified = self.persist.checks().len();
                        log::warn!(
                            "exiting; {n} process(es) left behind: {unverified} never verified (never signalled, still described), the rest survived SIGKILL"
                        )
                    }
                }
                let _ = std::fs::remove_file(&self.cfg.socket);
                if let Some(keeper) = self.keeper.take() {
                    // A clean end: the keeper closes everything and exits too.
                    keeper.bye(self.poll.registry());
                }
                return Ok(());
            }
            let timeout = self.poll_timeout();
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            let again = self.turn.take_again();
            for event in events.iter() {
                self.dispatch(
                    event.token(),
                    event.is_readable() || event.is_read_closed() || event.is_error(),
                    event.is_writable() || event.is_write_closed(),
                );
            }
            for token in again {
                self.dispatch(token, true, false);
            }
            let now = self.clock.now();
            self.core.handle_timeout(now);
            self.clients.demote_due(Instant::now());
            for gen in self.children.status_due(Instant::now()) {
                self.check_exit(gen);
            }
            self.check_unverified();
            let registry = self.poll.registry();
            for gen in groups::emptied(&self.core, &mut self.children, registry) {
                self.tell(Input::GroupEmpty { gen });
            }
            self.run_actions();
            self.flush_clients();
            // A held generation whose leader exited in this turn is read to its end.
            self.unpark(true);
            self.try_upgrade();
        }
    }

    fn poll_timeout(&self) -> Option<Duration> {
        if self.turn.has_work_left() {
            return Some(Duration::ZERO);
        }
        let now = self.clock.now();
        let core = self.core.next_deadline().map(|d| d.since(now));
        let status = [
            self.children.status_deadline(),
            self.persist.checks().deadline(),
            self.clients.demote_deadline(),
            self.upgrade.deadline(),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(Instant::now()));
        let timeout = [core, groups::timeout(&self.children), status]
            .into_iter()
            .flatten()
            .min();
        // Round up so a deadline is never polled a millisecond early and spun on.
        timeout.map(|t| t + Duration::from_micros(500))
    }

    /// Routes one readiness to its owner, then runs what the core asks and writes what
    /// the clients were sent.
    fn dispatch(&mut self, token: Token, readable: bool, writable: bool) {
        match Source::of(token) {
            Source::Listener => self.clients.accept(self.poll.registry()),
            Source::ControlSignals => self.on_control_signals(),
            Source::Sigchld => self.on_sigchld(),
            Source::Keeper => {
                if let Some(Err(e)) = self.keeper.as_mut().map(KeeperLink::ready) {
                    self.lose_keeper(&e);
                }
            }
            Source::Client(id) => {
                let resume =
                    writable && self.clients.writable(self.poll.registry(), id, &self.logs);
                if readable {
                    self.serve_client(id, token);
                } else if resume {
                    self.turn.again(token);
                }
            }
            Source::Output { gen, stream } => {
                if writable && stream == Stream::Pty {
                    self.flush_input(gen);
                }
                if readable {
                    self.read_output(gen, stream, token);
                }
            }
            Source::Stdin { gen } => self.flush_input(gen),
            Source::Pidfd { gen } => self.check_exit(gen),
            Source::TreeWatch { gen } => {
                if self.children.session_empty(self.poll.registry(), gen) == Some(true) {
                    self.tell(Input::GroupEmpty { gen });
                }
            }
            Source::CgroupEvents { gen } => {
                if self.children.cgroup_populated(gen) == Some(false) {
                    self.tell(Input::GroupEmpty { gen });
                }
            }
            Source::SpawnStatus { gen } => {
                if let Some(result) = self.children.launched(self.poll.registry(), gen) {
                    self.spawn_result(gen, result);
                }
            }
            // Sporadic events for a source already gone.
            Source::Unknown => {}
        }
        self.run_actions();
        self.flush_clients();
    }

    /// Sends one message to the keeper, if there is one; a failure gives it up.
    fn keeper_do(&mut self, send: impl FnOnce(&mut KeeperLink) -> io::Result<()>) {
        if let Some(Err(e)) = self.keeper.as_mut().map(send) {
            self.lose_keeper(&e);
        }
    }

    /// Tells the keeper to close its copies of what `gen` just closed (its stdin, a
    /// stream at EOF or cut at the drain deadline).
    fn keeper_closed(&mut self, gen: u64) {
        if self.keeper.is_none() {
            return;
        }
        let closed = self.children.take_closed(gen);
        self.keeper_do(|k| k.drop_roles(gen, closed));
    }

    /// The keeper link failed: carry on without one (a crash now loses the I/O of the
    /// sessions, as without a keeper; the keeper, seeing its link close, holds what it has
    /// until its hold time ends).
    fn lose_keeper(&mut self, e: &io::Error) {
        log::error!("keeper link: {e}; carrying on without a keeper");
        if let Some(mut k) = self.keeper.take() {
            k.deregister(self.poll.registry());
        }
    }

    /// Feeds one input to the core; its actions run at the end of the step.
    fn tell(&mut self, input: Input) {
        let now = self.clock.now();
        self.core.handle(now, input);
    }

    fn flush_clients(&mut self) {
        let released = self.logs.take_released();
        if !released.is_empty() {
            self.clients.detach_frames(&released);
        }
        for id in self.clients.flush_dirty(self.poll.registry(), &self.logs) {
            if let Some(token) = Source::Client(id).token() {
                self.turn.again(token);
            }
        }
        self.unpark(false);
    }

    /// Lets held output flow again where no lossless follower is behind any more (gone,
    /// caught up, demoted) or, with `ends`, where the leader has exited: its streams are
    /// serviced on the next turn as if they had just become readable.
    fn unpark(&mut self, ends: bool) {
        if self.turn.nothing_parked() || !(self.clients.take_moved() || ends) {
            return;
        }
        let (clients, logs, core) = (&self.clients, &self.logs, &self.core);
        let mut still = Vec::new();
        let released = self.turn.unpark(|gen, session| {
            let flows = !core.awaits_exit(gen) || !clients.holds_back(session, logs);
            if !flows {
                still.push(session.clone());
            }
            flows
        });
        for session in released {
            self.clients.release(&session);
        }
        // Who holds what may have changed (one caught up, another subscribed behind):
        // every follower now holding the output back has its clock running.
        let now = Instant::now();
        for session in still {
            self.clients.hold(&session, &self.logs, now);
        }
    }

    /// Executes the core's actions in order, each by the owner of what it concerns.
    fn run_actions(&mut self) {
        // No number the core just handed out may be seen before it is durable.
        self.persist.reserve(&self.core);
        while let Some(action) = self.core.poll_action() {
            let registry = self.poll.registry();
            match action {
                Action::Spawn { gen, session, spec } => self.spawn(gen, &session, &spec),
                Action::CancelSpawn { gen } => {
                    if let Some(result) = self.children.cancel_launch(registry, gen) {
                        self.spawn_result(gen, result);
                    }
                }
                Action::Signal { gen, signal, scope } => {
                    self.children.signal(registry, gen, signal, scope)
                }
                Action::Reap { gen } => self.children.reap(registry, gen),
                Action::WriteInput { gen, bytes } => {
                    self.children.queue_input(gen, &bytes);
                    self.flush_input(gen);
                }
                Action::CloseInput { gen } => {
                    self.children.close_input_when_written(gen);
                    self.flush_input(gen);
                }
                Action::Resize { gen, rows, cols } => self.children.resize(gen, rows, cols),
                Action::CloseOutput { gen } => {
                    let unread = self.children.close_outputs(registry, gen);
                    self.keeper_closed(gen);
                    self.tell(Input::OutputClosed { gen, unread });
                }
                Action::Release { gen } => {
                    self.children.release(registry, gen);
                    self.persist.forget(gen);
                    self.keeper_do(|k| k.forget(gen));
                }
                Action::Emit(event) => self.emit(event),
                Action::Reply { request, result } => {
                    self.clients.reply(request, &result, self.clock.wire)
                }
            }
        }
        let now = self.clock.now();
        self.persist.sync_sessions(&mut self.core, now);
    }

    /// Starts a generation; its exec result arrives later as a readiness event.
    fn spawn(&mut self, gen: u64, session: &Arc<str>, spec: &Spec) {
        self.logs.set_capacity(session, spec.buffer_bytes);
        if self.clients.paces(session) {
            self.logs
                .ensure_capacity(session, super::clients::LOSSLESS_LOG_BYTES);
        }
        if let Err(e) = self.children.start(self.poll.registry(), gen, spec) {
            self.tell(Input::SpawnResult {
                gen,
                result: Err(e),
            });
        }
    }

    fn spawn_result(&mut self, gen: u64, result: Result<Started, crate::core::SpawnError>) {
        let spawned = result.is_ok();
        if let Ok(started) = result {
            log::info!("gen {gen}: spawned pid {}", started.pid);
        }
        self.tell(Input::SpawnResult { gen, result });
        if spawned {
            // It may have exited before its pidfd was registered: edge-triggered readiness
            // still fires for a pidfd that is already readable, but look once anyway.
            self.check_exit(gen);
        }
    }

    /// Reads a generation's output stream until it would block (bounded per turn),
    /// framing each read into its session's log and delivering it.
    ///
    /// While a lossless subscriber of the session is behind, the stream is parked instead
    /// (see `parked.rs`): the child waits on its pipe until the subscriber catches up.
    fn read_output(&mut self, gen: u64, stream: Stream, token: Token) {
        if self.turn.holds(gen) {
            return self.turn.park_also(gen, token);
        }
        for _ in 0..READS_PER_TURN {
            let registry = self.poll.registry();
            match self
                .children
                .read(registry, gen, stream, self.turn.read_buf())
            {
                Read::Data(n) => {
                    if let Some(at) = self.core.output(gen, stream, n) {
                        let t = self.clock.wire.unix_ms(self.clock.now());
                        let data = &self.turn.read_buf()[..n];
                        let seq =
                            self.logs
                                .push_output(&at.session, gen, stream, at.offset, data, t);
                        self.clients.deliver(&at.session, seq, &self.logs);
                        // Live readers get each record as it comes (a fast one keeps up
                        // with the child); ones that stopped reading cost nothing here.
                        self.flush_clients();
                        if self.clients.holds_back(&at.session, &self.logs)
                            && self.core.awaits_exit(gen)
                        {
                            self.clients.hold(&at.session, &self.logs, Instant::now());
                            return self.turn.park(gen, &at.session, token);
                        }
                    }
                }
                Read::Eof => {
                    self.keeper_closed(gen);
                    return self.tell(Input::Eof { gen, stream });
                }
                Read::WouldBlock | Read::Gone => return,
            }
        }
        self.turn.again(token);
    }

    /// Writes a generation's queued input as far as it goes and tells the core.
    fn flush_input(&mut self, gen: u64) {
        let progress = self.children.flush_input(self.poll.registry(), gen);
        self.keeper_closed(gen);
        if progress.done > 0 {
            self.tell(Input::InputWritten {
                gen,
                len: progress.done,
            });
        }
        if progress.broken {
            self.tell(Input::InputError { gen });
        }
    }

    /// Tells the core if a leader it thinks is running has exited (without reaping it).
    /// An adopted leader's status may come a little after its exit (see `exits.rs`): it is
    /// told then, exactly like a child's, or as lost if it never comes.
    fn check_exit(&mut self, gen: u64) {
        if !self.core.awaits_exit(gen) {
            self.children.forget_status(gen);
            return;
        }
        let seen_before = self.children.awaits_status(gen);
        let state = self.children.leader_state(gen, Instant::now());
        if state != LeaderState::Running && !seen_before && self.children.is_adopted(gen) {
            // A process taken back after a restart: once it exited nothing pins its group,
            // so what it started is found by its marker, as soon as its exit is seen.
            sweep(self.persist.dir_id(), |g| g != gen);
        }
        match state {
            LeaderState::Running => {}
            LeaderState::Waiting if !seen_before => {
                log::debug!("gen {gen}: exited; its status comes once its parent reaps it");
                // Dead already: its stop must not escalate (nor call it unkillable) while
                // the status is awaited.
                self.tell(Input::LeaderGone { gen });
            }
            LeaderState::Waiting => {}
            LeaderState::Exited(status) => {
                self.tell(Input::LeaderExited { gen, status });
                self.children.look_soon();
            }
            LeaderState::Lost => self.tell(Input::Lost { gen }),
        }
    }

    /// Checks again the identity of the unverified generations whose check is due (a
    /// bounded number per turn): `match` — the process is held and watched like any
    /// adopted one, and the core told it is verified; `mismatch` — it is reported lost,
    /// its descriptor goes and what still carries its marker is stopped; still
    /// `unverifiable` — checked again later, less often. Nothing is ever sent to its pid
    /// before a `match`.
    fn check_unverified(&mut self) {
        let now = Instant::now();
        let due = self.persist.checks().due(now, CHECKS_PER_TURN);
        if due.is_empty() {
            return;
        }
        for gen in due {
            let Some(kept) = self.persist.checks().get(gen) else {
                continue;
            };
            if !self.core.awaits_exit(gen) {
                // The core no longer tracks it: nothing to check it for.
                self.persist.stop_checking(gen);
                continue;
            }
            let (session, pid) = (kept.session.clone(), kept.pid);
            match adopt(pid as i32, &kept.token, self.cfg.reaper) {
                Adoption::Adopted(process) => {
                    log::info!("{session} gen {gen}: pid {pid} verified: taken back");
                    self.persist.resolved(gen);
                    self.children.adopt(self.poll.registry(), gen, process);
                    self.tell(Input::Verified { gen });
                    // It may have exited already: its pidfd was readable when registered.
                    self.check_exit(gen);
                }
                Adoption::Mismatch => {
                    log::info!(
                        "{session} gen {gen}: pid {pid} is another process now, or none: lost"
                    );
                    self.persist.resolved(gen);
                    self.tell(Input::Lost { gen });
                    sweep(self.persist.dir_id(), |g| g != gen);
                }
                Adoption::Unverifiable(why) => {
                    log::debug!("{session} gen {gen}: pid {pid} still cannot be verified ({why})");
                    self.persist.still_unverified(gen, now);
                }
            }
        }
        self.run_actions();
        self.flush_clients();
    }

    /// Appends an event to its session's log, answers `wait`s for a generation's end, and
    /// delivers it to subscribers.
    fn emit(&mut self, event: Event) {
        super::logs::log_event(&event);
        if let Event::Spawned { session, gen, .. } = &event {
            // Described before anyone hears of it: a successor can find it.
            if let Some((process, pty)) = self.children.describe(*gen) {
                self.persist.describe(session, *gen, process, pty);
            }
            // And its descriptors held by the keeper, so that a crash loses none of it.
            if let (Some(keeper), Some((roles, fds))) =
                (self.keeper.as_mut(), self.children.keepable(*gen))
            {
                if let Err(e) = keeper.hold(*gen, roles, &fds) {
                    self.lose_keeper(&e);
                }
            }
        }
        let session = event.session().clone();
        let mut line = Vec::new();
        encode::event(&event, &mut line);
        let terminal = event.is_terminal().then(|| line.clone());
        let seq = self.logs.push_event(&session, &event, line);
        if let (Some(line), Some(gen)) = (terminal, event.gen()) {
            self.clients.answer_waits(&session, gen, seq, &line);
        }
        self.clients.deliver(&session, seq, &self.logs);
        if let Event::State {
            state: SessionState::Removed,
            ..
        } = event
        {
            self.clients.forget_session(&session, &self.logs);
            self.logs.remove(&session);
        }
    }

    fn serve_client(&mut self, id: u64, token: Token) {
        let mut budget = CLIENT_READ_PER_TURN;
        loop {
            let registry = self.poll.registry();
            match self
                .clients
                .next_request(registry, id, self.turn.read_buf(), &mut budget)
            {
                Next::Request(rid, op) => self.handle_op(id, rid, op),
                Next::Idle => break,
                Next::Again => {
                    self.turn.again(token);
                    break;
                }
            }
            // Each request's actions run before the next request is read.
            self.run_actions();
        }
        if self.clients.flush(self.poll.registry(), id, &self.logs) {
            self.turn.again(token);
        }
    }

    /// Routes a decoded request: commands to the core, the rest to the clients.
    fn handle_op(&mut self, id: u64, rid: RequestId, op: Op) {
        match op {
            Op::Core(command) => {
                let request = self.clients.expect_reply(id, rid);
                self.tell(Input::Command { request, command });
            }
            Op::Hello => self.clients.send_hello(id, &rid, self.keeper.is_some()),
            Op::ListPage { after, limit } => {
                let (sessions, more) = self.core.list_page(after.as_deref(), limit);
                self.clients
                    .send_page(id, &rid, &sessions, more, self.clock.wire);
            }
            Op::Subscribe {
                target,
                replay,
                lossless,
            } => {
                let sessions = match &target {
                    Target::All => self.logs.sessions().cloned().collect(),
                    Target::Session(name) => match self.core.get(name) {
                        Some(s) => vec![s.name],
                        None => {
                            let why = format!("no session named `{name}`");
                            let e = ProtoError::new(ErrorCode::NoSuchSession, why);
                            return self.clients.send_error(id, &rid, &e);
                        }
                    },
                };
                let all = target == Target::All;
                let terms = Terms { replay, lossless };
                self.clients
                    .subscribe(id, &rid, &sessions, all, terms, &mut self.logs);
            }
            Op::Unsubscribe { target } => self.clients.unsubscribe(id, &rid, &target),
            Op::Wait { session, gen } => {
                let target = self.core.wait_for(&session, gen);
                self.clients.wait(id, rid, target);
            }
            Op::Upgrade { binary } => self.begin_upgrade(id, rid, binary),
        }
    }

    fn on_control_signals(&mut self) {
        let received = match self.signals.control.drain() {
            Ok(s) => s,
            Err(e) => {
                log::error!("signal pipe: {e}");
                return;
            }
        };
        for sig in received {
            match sig {
                ControlSignal::Terminate => self.shutdown(),
                ControlSignal::Hangup => log::info!("SIGHUP received; nothing to reload"),
            }
        }
    }

    fn on_sigchld(&mut self) {
        if let Err(e) = self.signals.sigchld.drain() {
            log::error!("SIGCHLD pipe: {e}");
        }
        // Children watched through a pidfd report there; the others are asked here.
        for gen in self.children.without_pidfd() {
            self.check_exit(gen);
        }
        self.children.reap_orphans();
        crate::sys::spawn::reap_abandoned();
    }

    /// Stops every session (first request) or kills everything at once (any later one):
    /// the core decides which.
    fn shutdown(&mut self) {
        log::info!("shutting down: stopping every session (again: killing them)");
        let request = self.clients.internal_request();
        self.tell(Input::Command {
            request,
            command: Command::Shutdown,
        });
    }
}
