//! A client's requests: read from its socket (bounded per turn), decoded by the clients'
//! owner, and routed — commands to the core, whose replies come back as actions, the rest
//! answered from the owner that holds what they ask.

use std::time::{Duration, Instant};

use mio::Token;

use super::Daemon;
use crate::core::{Command, Input};
use crate::driver::clients::{Next, StartMark};
use crate::driver::subscriptions::Terms;
use crate::proto::envelope::RequestId;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::list;
use crate::proto::request::{Op, Target};

/// Bytes read from one client per turn, so one chatty client cannot starve the rest.
const CLIENT_READ_PER_TURN: usize = 256 * 1024;

/// Work one client's requests may take per turn, in rough microseconds of the daemon's
/// time (see [`cost`]): a client that pipelines thousands of spawns or whole-table lists
/// gets them served over many turns, and every other client and session is served in
/// between — instead of one turn of seconds, with every spawn of the burst holding its
/// descriptors until the turn ends.
const CLIENT_WORK_PER_TURN: usize = 8 * 1024;

/// The longest one client's slice of requests runs: the cost model above counts the
/// daemon's own work, not the disk's, and on a slow disk each request's records and
/// descriptors (`unlink`, `rename`, a discard the filesystem waits for) can cost a
/// millisecond or more — a slice of a thousand `remove`s would hold every other client
/// for seconds. The slice ends at whichever bound comes first.
const CLIENT_TIME_PER_TURN: Duration = Duration::from_millis(8);

/// Most session records one client's slice leaves to write (they are written together at
/// its end, before its answers go): each is a file renamed or removed, which the time
/// bound does not see, since it comes after.
const CLIENT_RECORDS_PER_TURN: usize = 64;

/// What serving `op` costs, in the units of [`CLIENT_WORK_PER_TURN`], with `sessions` in
/// the table: a session's snapshot or subscription about one, a start about what a
/// process's start costs the daemon (a fork, its descriptors, its records).
fn cost(op: &Op, sessions: usize) -> usize {
    const REQUEST: usize = 8;
    const START: usize = 256;
    match op {
        Op::Core(command) if started_session(command).is_some() => START,
        Op::Core(Command::List) if sessions <= list::CLASSIC_MOST => REQUEST + sessions,
        Op::ListPage { limit, .. } => REQUEST + limit,
        Op::Subscribe {
            target: Target::All,
            ..
        } => REQUEST + sessions,
        _ => REQUEST,
    }
}

impl Daemon {
    pub(super) fn serve_client(&mut self, id: u64, token: Token) {
        let mut budget = CLIENT_READ_PER_TURN;
        let mut work = CLIENT_WORK_PER_TURN;
        let until = Instant::now() + CLIENT_TIME_PER_TURN;
        // Records this turn's other sources left to write are not this slice's to count.
        let dirty_before = self.core.dirty_session_count();
        loop {
            let left = self.core.dirty_session_count().saturating_sub(dirty_before);
            let full = left >= CLIENT_RECORDS_PER_TURN;
            let over = work == 0 || full || Instant::now() >= until;
            if over {
                self.turn.again(token);
                break;
            }
            let registry = self.poll.registry();
            let next = self
                .clients
                .next_request(registry, id, self.turn.read_buf(), &mut budget);
            // The session whose generation the request served now starts, if it does.
            let started = match next {
                Next::Request(rid, op, after_start) => {
                    work = work.saturating_sub(cost(&op, self.core.session_count()));
                    let started = match &op {
                        Op::Core(command) => started_session(command).map(str::to_string),
                        _ => None,
                    };
                    self.handle_op(id, rid, op, after_start.as_ref());
                    started
                }
                Next::Idle => break,
                Next::Again => {
                    self.turn.again(token);
                    break;
                }
            };
            // Each request's actions run before the next request is read; the records
            // they change are written once for the slice, with shared flushes (a burst
            // of `stop`s or `remove`s on a disk would otherwise pay two `fsync`s each,
            // and hold the loop for seconds).
            self.run_actions_unsaved();
            if let Some(session) = started {
                // Where a subscription served right behind it starts, in this slice or a
                // later one (see `clients/starts.rs`).
                self.clients.mark_start(id, &session, &self.logs);
            }
        }
        let saved = self.save_sessions();
        if self
            .clients
            .flush(self.poll.registry(), id, &self.logs, saved)
        {
            self.turn.again(token);
        }
    }

    /// Routes a decoded request: commands to the core, the rest to the clients.
    /// `after_start` is the mark of the start the connection's previous request made, if
    /// it made one: a subscription started "now" right behind it starts there.
    fn handle_op(&mut self, id: u64, rid: RequestId, op: Op, after_start: Option<&StartMark>) {
        match op {
            // More than one line can hold: refused before a snapshot of any is built.
            Op::Core(Command::List) if self.core.session_count() > list::CLASSIC_MOST => {
                let e = list::too_many(self.core.session_count());
                self.clients.send_error(id, &rid, &e);
            }
            Op::Core(command) => {
                // What can be checked without a lookup is checked now, so an identity the
                // daemon may not take is the requester's error; names are looked up (off
                // the loop) at the start, and an unknown one is its `spawn_failed`.
                if let Command::Spawn { spec, .. } = &command {
                    if let Err(e) = crate::driver::run_as::check_now(&spec.run_as) {
                        return self.clients.send_error(id, &rid, &e);
                    }
                }
                if command == Command::Shutdown {
                    self.notify.stopping();
                    self.exits_first(self.core.awaiting_exit());
                }
                if started_session(&command).is_some() {
                    if let Err(e) = self.spawn_room() {
                        return self.clients.send_error(id, &rid, &e);
                    }
                }
                if let Some(session) = ends_a_leader(&command) {
                    self.exits_first(self.core.awaiting_exit_in(session));
                }
                let request = match &command {
                    Command::Resize { .. } => self.clients.expect_resized(id, rid, &command, false),
                    _ => self.clients.expect_reply(id, rid),
                };
                self.tell(Input::Command { request, command });
            }
            Op::AttachedResize(command) => {
                let request = self.clients.expect_resized(id, rid, &command, true);
                self.tell(Input::Command { request, command });
            }
            Op::QuietWrite(command) => {
                let request = self.clients.expect_failure(id, rid);
                self.tell(Input::Command { request, command });
            }
            Op::Hello => {
                let logs = self.log_sink.stats();
                self.clients
                    .send_hello(id, &rid, self.keeper.is_some(), logs)
            }
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
                            let why = format!("no session `{name}`");
                            let e = ProtoError::new(ErrorCode::NoSuchSession, why);
                            return self.clients.send_error(id, &rid, &e);
                        }
                    },
                };
                let all = target == Target::All;
                let terms = Terms { replay, lossless };
                self.clients.subscribe(
                    id,
                    &rid,
                    &sessions,
                    all,
                    terms,
                    after_start,
                    &mut self.logs,
                );
            }
            Op::Unsubscribe { target } => self.clients.unsubscribe(id, &rid, &target),
            Op::Wait { session, gen } => {
                let target = self.core.wait_for(&session, gen);
                self.clients.wait(id, rid, target);
            }
            Op::WaitReady { session, gen } => {
                let target = self.core.wait_ready(&session, gen);
                self.clients.wait_ready(id, rid, target);
            }
            Op::Upgrade { binary } => self.begin_upgrade(id, rid, binary),
            Op::Reload { dry_run } => match self.reload(dry_run) {
                Ok(plan) => self.clients.send_plan(id, &rid, &plan, dry_run),
                Err(e) => self.clients.send_error(id, &rid, &e),
            },
        }
    }
}

/// The session whose new generation `command` starts, if it starts one (and so needs
/// descriptors of its own).
fn started_session(command: &Command) -> Option<&str> {
    match command {
        Command::Spawn { session, .. } | Command::Restart { session, .. } => Some(session),
        _ => None,
    }
}

/// The session whose running generations `command` stops or signals, if it does: each
/// costs a look at whether its leader already exited. (Not `write`: keystrokes come
/// often, and a write to a leader that just exited is harmless.)
fn ends_a_leader(command: &Command) -> Option<&str> {
    match command {
        Command::Spawn { session, .. }
        | Command::Signal { session, .. }
        | Command::Stop { session, .. }
        | Command::Restart { session, .. }
        | Command::Remove { session } => Some(session),
        _ => None,
    }
}
