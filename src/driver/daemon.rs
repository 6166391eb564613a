//! The loop: one thread, one `mio::Poll`, in the style of mio's own tcp_server example —
//! drain each ready source until it would block (bounded per turn), retry `EINTR`, ignore
//! unknown tokens, deregister before closing.
//!
//! Each readiness goes to the one owner of that state — [`Children`], [`Clients`],
//! [`Logs`] — and what happened becomes a core [`Input`]; the core's actions are then
//! executed in order, each by its owner. The poll timeout is the core's next deadline, so
//! an idle daemon never wakes.

mod keeper;
mod output;
mod processes;
mod reload;
mod requests;
mod resume;
mod start;
mod upgrade;

use std::collections::HashSet;
use std::io;
use std::time::{Duration, Instant};

use mio::{Events, Poll, Token};

use super::children::Children;
use super::clients::Clients;
use super::config::DaemonConfig;
use super::groups;
use super::keeper_link::KeeperLink;
use super::keeper_restarts::KeeperRestarts;
use super::leftovers::Leftovers;
use super::log_sink::LogSink;
use super::logs::Logs;
use super::notify::Notifier;
use super::persist::{Persist, RecordsSaved};
use super::readiness::Readiness;
use super::ready::notify_ready;
use super::signals::{ControlSignal, Signals};
use super::token::Source;
use super::turn::Turn;
use super::upgrade::upgrader::Upgrader;
use crate::core::{Action, Command, Core, Input, Stream, Time};
use crate::proto::encode;

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
    turn: Turn,
    upgrade: Upgrader,
    /// The link to the keeper holding the children's descriptors across a crash; `None`
    /// without one (disabled, or lost and not replaced yet).
    keeper: Option<KeeperLink>,
    /// The replacement of a keeper lost while the daemon runs (see `keeper.rs`).
    keeper_restarts: KeeperRestarts,
    /// Where output goes besides subscribers: log files, standard output.
    log_sink: LogSink,
    /// systemd's notification socket and watchdog.
    notify: Notifier,
    /// What each generation's readiness check needs while it waits.
    ready: Readiness,
    /// Generations taken back that ended in this turn: what they left is killed at its end.
    leftovers: Leftovers,
    /// Last, so that the lease it holds is let go after everything else is closed.
    persist: Persist,
}

impl Daemon {
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
        notify_ready(self.cfg.ready_fd.take(), &self.notify);
        self.kill_leftovers();
        loop {
            if self.core.is_shut_down() {
                let saved = self.save_sessions();
                self.clients
                    .flush_before_exit(&mut self.poll, &self.logs, saved);
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
                // Output positions reserved ahead go back to where the logs end: the next
                // daemon goes on there, with no gap.
                self.logs.settle();
                self.keeper_restarts.cancel(self.poll.registry());
                if let Some(keeper) = self.keeper.take() {
                    // A clean end: the keeper closes everything and exits too.
                    keeper.bye(self.poll.registry());
                }
                // Last, as it may wait: the log writer writes what it received.
                self.log_sink
                    .finish_at_exit(self.poll.registry(), &self.signals);
                // Helpers let go of and killed meanwhile (an upgrade's check the
                // shutdown ended) are reaped if they are gone by now.
                crate::sys::spawn::reap_abandoned();
                return Ok(());
            }
            // What the keeper was asked to drop goes before the loop sleeps.
            self.keeper_do(KeeperLink::flush);
            let timeout = self.poll_timeout();
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            // What has waited its turn is serviced after what just became ready: a few
            // slices of bulk output per turn, never ahead of a keystroke.
            let again = self.turn.take_again();
            for event in events.iter() {
                let token = event.token();
                let readable = event.is_readable() || event.is_read_closed() || event.is_error();
                let writable = event.is_writable() || event.is_write_closed();
                if event.is_read_closed() || event.is_error() {
                    match Source::of(token) {
                        Source::Output {
                            gen,
                            stream: Stream::Pty,
                        } => self.children.saw_pty_hangup(gen),
                        // A pipe's write end reports an error (with EPOLLOUT) once no
                        // process holds its read end: the child closed its input. Told
                        // now, through the flush its writability runs below, not at the
                        // next write.
                        Source::Stdin { gen } => self.children.saw_stdin_reader_gone(gen),
                        _ => {}
                    }
                }
                let readable = readable && !self.turn.defers(token);
                if readable || writable {
                    self.dispatch(token, readable, writable);
                }
            }
            for token in again {
                self.dispatch(token, true, false);
            }
            // A terminal gone that had sized its PTY last: the one attached before it.
            for (session, gen, rows, cols) in self.clients.take_sizes_again() {
                let request = self.clients.internal_request();
                let if_gen = Some(gen);
                let command = Command::Resize {
                    session,
                    if_gen,
                    rows,
                    cols,
                };
                self.tell(Input::Command { request, command });
            }
            let now = self.clock.now();
            self.core.handle_timeout(now);
            let demote_now = Instant::now();
            if self
                .clients
                .demote_deadline()
                .is_some_and(|at| at <= demote_now)
            {
                // Those demoted are written to first.
                let saved = self.save_sessions();
                let registry = self.poll.registry();
                for id in self
                    .clients
                    .demote_due(registry, &self.logs, demote_now, saved)
                {
                    if let Some(token) = Source::Client(id).token() {
                        self.turn.again(token);
                    }
                }
            }
            self.log_sink.tick(self.poll.registry(), Instant::now());
            self.notify.feed_watchdog(Instant::now());
            for gen in self.children.status_due(Instant::now()) {
                self.check_exit(gen);
            }
            self.children.sweep_orphans(Instant::now());
            // What a shortage of descriptors put off (a tree's kill, say), on its timer.
            self.children.retry_shortages(Instant::now());
            self.check_unverified();
            // A keeper lost is replaced on this timer, never waited for.
            self.tend_keeper();
            let registry = self.poll.registry();
            for gen in groups::emptied(&self.core, &mut self.children, registry) {
                self.tell(Input::GroupEmpty { gen });
            }
            self.run_actions();
            // What this turn's last actions marked for sessions' members goes now: not
            // left for a next turn that an upgrade or the exit would never take.
            self.children.send_members_signals(self.poll.registry());
            self.flush_clients();
            // A held generation whose output was closed in this turn (its drain deadline)
            // is no longer held: nothing of it is delivered any more.
            self.unpark(true);
            self.lower_unpaced_logs();
            // After the answers are written: a look through `/proc` delays nobody's.
            self.kill_leftovers();
            self.try_upgrade();
        }
    }

    fn poll_timeout(&self) -> Option<Duration> {
        // A connection closed late in a turn (a failed write) may owe a terminal its size.
        if self.turn.has_work_left() || self.clients.owes_sizes() {
            return Some(Duration::ZERO);
        }
        let now = self.clock.now();
        let core = self.core.next_deadline().map(|d| d.since(now));
        let status = [
            self.children.status_deadline(),
            self.persist.checks().deadline(),
            self.persist.save_deadline(),
            self.clients.demote_deadline(),
            self.upgrade.deadline(),
            self.log_sink.deadline(),
            self.notify.deadline(),
            self.keeper_restarts.deadline(),
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

    /// Routes one readiness to its owner, then runs what the core asks; the records that
    /// changed are written, and the clients told, at the turn's end.
    fn dispatch(&mut self, token: Token, readable: bool, writable: bool) {
        match Source::of(token) {
            Source::Listener => {
                let room = self.children.connection_room(self.held_besides_children());
                if self.clients.accept(self.poll.registry(), room) {
                    self.turn.again(token);
                }
            }
            Source::ControlSignals => self.on_control_signals(),
            Source::Sigchld => self.on_sigchld(),
            Source::Keeper => {
                if let Some(Err(e)) = self.keeper.as_mut().map(KeeperLink::ready) {
                    self.lose_keeper(&e);
                }
            }
            Source::KeeperStart => self.keeper_started(),
            Source::LogWriter => self.log_sink.ready(self.poll.registry()),
            Source::UpgradeCheck => self.upgrade_checked(),
            Source::Client(id) => {
                let resume = writable && {
                    let saved = self.save_sessions();
                    (self.clients).writable(self.poll.registry(), id, &self.logs, saved)
                };
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
            Source::ReadyFd { gen } => {
                if let Some(signal) = self.ready.on_notify(self.poll.registry(), gen) {
                    match self.children.is_starting(gen) {
                        true => self.ready.hold(gen, signal),
                        false => self.tell(Input::Readiness { gen, signal }),
                    }
                }
            }
            Source::Probe { gen } | Source::ProbeStatus { gen } => {
                if let Some(input) = self.ready.on_probe(self.poll.registry(), gen, false) {
                    self.tell(input);
                }
            }
            Source::LiveProbe { gen } | Source::LiveProbeStatus { gen } => {
                if let Some(input) = self.ready.on_probe(self.poll.registry(), gen, true) {
                    self.tell(input);
                }
            }
            Source::TreeWatch { gen } => self.children.wake_watch(gen),
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
        // The records these actions change are written, and the clients told, once for
        // the turn (at its end, or at the next flush, which writes them first) — except an
        // end's, written before its terminal event (see `run_action`).
        self.run_actions_unsaved();
    }

    /// Kills what the adopted generations that ended since the last call left, with one
    /// look through `/proc` for all of them (see [`Leftovers`]).
    fn kill_leftovers(&mut self) {
        for gen in self.leftovers.kill(self.persist.dir_id()) {
            self.persist.forget(gen);
        }
    }

    /// Feeds one input to the core; its actions run at the end of the step.
    fn tell(&mut self, input: Input) {
        let now = self.clock.now();
        self.core.handle(now, input);
    }

    /// Executes the core's actions in order.
    ///
    /// A signal to a session's members is only marked here; one survey of the sessions
    /// sends every marked signal (see `children/trees.rs`), at the end of the turn. A reap
    /// or release of a generation whose members still wait for theirs (a `SIGKILL` at its
    /// kill deadline, then its reap) must not come first, nor what follows it (a
    /// replacement's spawn): from there on the actions are held, in order, except signals
    /// about generations none of them concerns (marked at once, so that one survey sends
    /// them all); the survey is taken, and the held actions run.
    fn run_actions(&mut self) {
        self.run_actions_unsaved();
        self.save_sessions();
    }

    /// Writes the session records the last actions changed, sharing their flushes: before
    /// anything of those actions is told to anyone (what a client was answered must be
    /// on disk first). Every write to the clients asks for what this returns.
    fn save_sessions(&mut self) -> RecordsSaved {
        let now = self.clock.now();
        let saved = self.persist.sync_sessions(&mut self.core, now);
        self.children.records_written();
        saved
    }

    /// [`run_actions`](Self::run_actions) without writing the records it changed: for a
    /// slice of one client's requests, whose records are written together at its end
    /// ([`save_sessions`](Self::save_sessions)), before any answer of the slice is sent.
    fn run_actions_unsaved(&mut self) {
        let mut replay: Vec<Action> = Vec::new();
        loop {
            // No number the core just handed out may be seen before it is durable.
            self.persist.reserve(&self.core);
            let mut held: Vec<Action> = Vec::new();
            let mut held_gens: HashSet<u64> = HashSet::new();
            let mut replaying = std::mem::take(&mut replay).into_iter();
            while let Some(action) = replaying.next().or_else(|| self.core.poll_action()) {
                let gen = action.gen();
                let waits = if held.is_empty() {
                    matches!(action, Action::Reap { .. } | Action::Release { .. })
                        && gen.is_some_and(|g| {
                            self.children.members_signal_pending(g)
                                || self.children.signal_waits_for_records(g)
                        })
                } else {
                    match action {
                        Action::Signal { gen, .. } => held_gens.contains(&gen),
                        _ => true,
                    }
                };
                if waits {
                    held_gens.extend(gen);
                    held.push(action);
                } else {
                    self.run_action(action);
                }
            }
            if held.is_empty() {
                break;
            }
            // What the held reap waits for: the records (its reap writes them anyway),
            // with the signals waiting for them, then the members' signals.
            self.save_sessions();
            self.children.send_members_signals(self.poll.registry());
            replay = held;
        }
    }

    /// Executes one of the core's actions, by the owner of what it concerns.
    fn run_action(&mut self, action: Action) {
        let registry = self.poll.registry();
        match action {
            Action::Spawn { gen, session, spec } => self.spawn(gen, &session, &spec),
            Action::CancelSpawn { gen } => {
                if let Some(result) = self.children.cancel_launch(registry, gen) {
                    self.spawn_result(gen, result);
                }
            }
            Action::Signal { gen, signal, scope } => {
                // A stop's step is in its session's record before its signal goes: a crash
                // in between leaves a successor that does not send it again (at worst, one
                // that never went: see docs/operations.md, *After a crash*). It goes with
                // the records' next write, shared by the slice or the turn.
                let unsaved = self.core.dirty_session_count() > 0;
                (self.children).signal_after_records(gen, signal, scope, unsaved)
            }
            Action::Reap { gen } => {
                // The end's record first: a crash before it is written, with the process
                // still unreaped, leaves its exit status to whoever reaps it (a keeper's
                // pidfd tells the next daemon), never a `lost` end a reap took away.
                self.save_sessions();
                self.children.reap(self.poll.registry(), gen)
            }
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
                self.ready.release(registry, gen);
                self.children.release(registry, gen);
                // Its descriptor stays until what it left is killed (see `leftovers.rs`).
                if !self.leftovers.hold_descriptor(gen) {
                    self.persist.forget(gen);
                }
                self.keeper_do(|k| k.forget(gen));
            }
            Action::Probe { gen, probe, live } => {
                let helper = self.children.helper_start();
                let identity = self.children.probe_identity(gen);
                let started = self
                    .ready
                    .start_probe(registry, gen, probe, live, helper, identity);
                if let Some(input) = started {
                    self.tell(input);
                }
            }
            Action::CancelProbe { gen, probe, live } => {
                self.ready.cancel_probe(registry, gen, probe, live)
            }
            Action::ReadySettled { gen } => self.ready.settled(registry, gen),
            Action::Emit(event) => {
                if event.is_terminal() {
                    // The retained output keeps every event from the moment it is emitted,
                    // and a successor reports an end its record does not hold: the record
                    // first, so that a crash in between can never leave a generation two
                    // terminal events in the session's log.
                    self.save_sessions();
                }
                self.emit(event)
            }
            Action::Reply { request, result } => {
                self.clients.reply(request, &result, self.clock.wire)
            }
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
                ControlSignal::Hangup => self.reload_on_hangup(),
                ControlSignal::Ignored(sig) => log::info!(
                    "{} received: it has no meaning to the daemon; ignored",
                    crate::proto::signal_name::signal_name(sig).unwrap_or_else(|| sig.to_string())
                ),
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
        // Before orphans are reaped: the log writer is a child the sink waits for.
        self.log_sink.reap(self.poll.registry());
        for (gen, live) in self.ready.awaiting_sigchld() {
            if let Some(input) = self.ready.on_probe(self.poll.registry(), gen, live) {
                self.tell(input);
            }
        }
        self.children.orphans_may_have_exited(Instant::now());
        crate::sys::spawn::reap_abandoned();
        self.reap_keeper_starts();
        // Without a pidfd, the exit of a program being checked for an upgrade shows here.
        if self.upgrade.is_checking() {
            self.upgrade_checked();
        }
    }

    /// Stops every session (first request) or kills everything at once (any later one):
    /// the core decides which.
    fn shutdown(&mut self) {
        log::info!("shutting down: stopping every session (again: killing them)");
        self.notify.stopping();
        self.exits_first(self.core.awaiting_exit());
        let request = self.clients.internal_request();
        self.tell(Input::Command {
            request,
            command: Command::Shutdown,
        });
    }
}
