//! The control connections and everything owed to them: accepting (with peer checks and a
//! connection limit), reading requests, answers (`answers.rs`), subscriptions
//! (`following.rs`), and pending `wait`s (`waits.rs`).
//!
//! A request travels: socket → [`Clients::next_request`] (split, decode) → the daemon,
//! which routes it to the core or back here → an answer queued on the connection →
//! [`Clients::flush_dirty`] at the end of the step writes it.

mod answers;
mod following;
mod image;
mod starts;
mod waits;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mio::net::UnixListener;
use mio::{Interest, Poll, Registry};

use super::client::{Client, Line, Received};
use super::held::{Held, HELD_BUDGET};
use super::listener::{Listener, PeerPolicy};
use super::logs::Logs;
use super::persist::RecordsSaved;
use super::subscriptions::Subscriptions;
use super::terminal_sizes::{SizeAgain, TerminalSizes};
use super::token::Source;
use crate::core::{Command, Error as CoreError, Response};
use crate::proto::envelope::{Request, RequestId};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::Limits;
use crate::proto::request::{self, Op};

pub use starts::StartMark;

/// Connections taken off the listener's queue (admitted or refused) per turn of the loop:
/// a burst of clients is admitted in a few turns, and a peer that connects flat out (one
/// refused, even) delays everything else by at most this many accepts a turn.
pub const ACCEPTS_PER_TURN: usize = 64;

/// How long an exiting daemon keeps writing to clients that are still reading.
const EXIT_FLUSH: Duration = Duration::from_secs(1);

/// The least log a session followed losslessly keeps: when the child's leader exits,
/// what is left in its pipes (up to 1 MiB each, see `child.rs`) is read at once, on top
/// of the one read a lossless follower may be behind by, and must not push that
/// follower's next record out of the log.
pub const LOSSLESS_LOG_BYTES: usize = 3 << 20;

/// Most bytes one write to a lossless follower's socket carries.
///
/// A Unix stream socket gives its writer room back only as its reader finishes whole
/// buffers of the kernel's (one write makes one or more, of up to some 36 KiB on Linux),
/// and a lossless follower is demoted when no write to it succeeds for its
/// `demote_after`: written in big pieces, a reader that takes a few KiB at a time reads
/// steadily yet frees nothing for that long. Written in pieces of this size, a reader
/// that takes twice this much per `demote_after` has finished at least this much of
/// whole writes, which frees room for the next (docs/protocol.md, *Lossless
/// subscriptions*). Smaller pieces cost more system calls per byte: this size took a
/// sixth more of the daemon's time than unbounded writes to deliver 1 GiB to a fast
/// lossless reader (16 KiB: a tenth), for a guarantee short `demote_after`s can use.
/// Ordinary clients are written in pieces as big as their queues allow.
pub const LOSSLESS_WRITE_BYTES: usize = 8 << 10;

/// Limits that apply to every connection.
#[derive(Debug, Clone, Copy)]
pub struct ClientLimits {
    /// Most simultaneous connections.
    pub max_clients: usize,
    /// Longest request line.
    pub max_line: usize,
    /// Soft limit of each outgoing queue.
    pub outbox_bytes: usize,
}

/// What `hello` says about the daemon.
#[derive(Debug, Clone)]
pub struct Hello {
    /// The daemon's identity token.
    pub identity: String,
    /// How children are watched: `pidfd` or `sigchld`.
    pub reaper: &'static str,
    /// What holds each generation's tree: `cgroup` or `session`.
    pub containment: &'static str,
}

/// The next thing a connection asks, as far as it can be read this turn.
#[derive(Debug)]
pub enum Next {
    /// A decoded request, with the mark of the start the connection's previous request
    /// made, if it made one (see `starts.rs`).
    Request(RequestId, Op, Option<StartMark>),
    /// Nothing more now: it would block, waits for its answers to drain, or is gone.
    Idle,
    /// This turn's read budget ran out with more to read: service it again next turn.
    Again,
}

/// Every connection.
#[derive(Debug)]
pub struct Clients {
    listener: Listener,
    limits: ClientLimits,
    hello: Hello,
    table: HashMap<u64, Client>,
    next_id: u64,
    subs: Subscriptions,
    /// Generation → `wait`s to answer with its terminal event.
    waits: HashMap<u64, Vec<(u64, RequestId)>>,
    /// Generation → `wait`s (`for: ready`) to answer when its readiness is decided or it
    /// ends.
    ready_waits: HashMap<u64, Vec<(u64, RequestId)>>,
    /// Connection → the start its last request made (see `starts.rs`).
    starts: HashMap<u64, StartMark>,
    /// Core request id → the connection and the id it used.
    replies: HashMap<u64, (u64, RequestId)>,
    /// Core request ids among `replies` answered only if they fail (quiet writes). Not
    /// carried across an upgrade: the core answers a write within the step that asked.
    quiet: HashSet<u64>,
    next_request: u64,
    /// Connections with bytes queued in this step, flushed at its end.
    dirty: Vec<u64>,
    /// The terminals attached to PTYs through these connections, and whose size each
    /// PTY was given last.
    sizes: TerminalSizes,
    /// Sizes to give generations again, their terminal gone: taken by the loop each turn.
    sizes_again: Vec<SizeAgain>,
    /// Core request id → a `resize` asked: noted in `sizes` once the core has taken it
    /// (its answer names the generation). Answered within the step that asked, as writes.
    resizes: HashMap<u64, Resize>,
    /// What the connections hold of their own (unfinished lines, answers), together.
    held: Held,
}

/// A `resize` the core has yet to answer.
#[derive(Debug)]
struct Resize {
    client: u64,
    session: String,
    rows: u16,
    cols: u16,
    /// From an attached terminal (`"attached": true`), or a one-off.
    attached: bool,
}

impl Clients {
    /// Connections open (each holds a descriptor).
    pub fn count(&self) -> usize {
        self.table.len()
    }

    /// Serves connections arriving at `listener`.
    pub fn new(
        listener: UnixListener,
        policy: PeerPolicy,
        limits: ClientLimits,
        hello: Hello,
    ) -> Clients {
        Clients {
            listener: Listener::new(listener, policy),
            limits,
            hello,
            table: HashMap::new(),
            next_id: 0,
            subs: Subscriptions::default(),
            waits: HashMap::new(),
            ready_waits: HashMap::new(),
            replies: HashMap::new(),
            starts: HashMap::new(),
            quiet: HashSet::new(),
            next_request: 1,
            dirty: Vec::new(),
            sizes: TerminalSizes::default(),
            sizes_again: Vec::new(),
            resizes: HashMap::new(),
            held: Held::default(),
        }
    }

    /// Accepts the waiting connections the listener admits, `room` of them at most before
    /// the rest are refused for want of descriptors, and [`ACCEPTS_PER_TURN`] in all
    /// (admitted or refused): `true` when it stopped there, and the listener must be
    /// serviced again in a later turn.
    pub fn accept(&mut self, registry: &Registry, mut room: usize) -> bool {
        let mut budget = ACCEPTS_PER_TURN;
        while let Some(mut stream) =
            self.listener
                .admit(self.table.len(), self.limits.max_clients, room, &mut budget)
        {
            room = room.saturating_sub(1);
            let id = self.next_id;
            self.next_id += 1;
            let Some(token) = Source::Client(id).token() else {
                return self.listener.take_more();
            };
            if let Err(e) =
                registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            {
                log::error!("register client: {e}");
                continue;
            }
            let limits = &self.limits;
            let held = self.held.clone();
            let client = Client::new(stream, limits.max_line, limits.outbox_bytes, held);
            self.table.insert(id, client);
            log::debug!("client {id} connected");
        }
        self.listener.take_more()
    }

    /// Reads and decodes `id`'s next request. Malformed requests are answered with their
    /// error here and skipped. `budget` is what may still be read from it this turn.
    pub fn next_request(
        &mut self,
        registry: &Registry,
        id: u64,
        buf: &mut [u8],
        budget: &mut usize,
    ) -> Next {
        loop {
            let Some(client) = self.table.get_mut(&id) else {
                return Next::Idle;
            };
            if let Some(line) = client.next_line() {
                let after_start = self.take_start(id);
                match self.decode(line) {
                    Ok((rid, op)) => return Next::Request(rid, op, after_start),
                    Err((rid, e)) => self.send_error(id, &rid, &e),
                }
                continue;
            }
            if client.has_pending() {
                return Next::Idle;
            }
            if *budget == 0 {
                return Next::Again;
            }
            match client.receive(buf) {
                Received::Bytes(n) => *budget = budget.saturating_sub(n),
                Received::Eof => {}
                Received::WouldBlock => return Next::Idle,
                Received::Broken => {
                    self.close(registry, id);
                    return Next::Idle;
                }
            }
        }
    }

    /// A request line → its id and operation.
    fn decode(&self, line: Line) -> Result<(RequestId, Op), (RequestId, ProtoError)> {
        let line = line.map_err(|too_long| {
            let message = if too_long.limit < self.limits.max_line {
                format!(
                    "request line refused at {} bytes: the daemon holds more than {} MiB of \
                     unfinished request lines and unread answers for its connections (lines \
                     of up to {} bytes are read while it holds less)",
                    too_long.limit,
                    HELD_BUDGET >> 20,
                    self.limits.max_line
                )
            } else {
                too_long.to_string()
            };
            (RequestId::Null, ProtoError::new(ErrorCode::Limit, message))
        })?;
        if line.iter().all(u8::is_ascii_whitespace) {
            // Answered like any invalid request: a client counting one answer per line
            // never waits for one that cannot come.
            return Err((
                RequestId::Null,
                ProtoError::new(ErrorCode::BadRequest, "empty line: expected a JSON request"),
            ));
        }
        let limits = Limits {
            max_len: self.limits.max_line,
            ..Limits::DEFAULT
        };
        let req = Request::decode(&line, &limits).map_err(|e| (e.id, e.error))?;
        match request::decode(&req.op, &req.args) {
            Ok(op) => Ok((req.id, op)),
            Err(e) => Err((req.id, e)),
        }
    }

    fn push(&mut self, id: u64, bytes: &[u8]) {
        if let Some(c) = self.table.get_mut(&id) {
            c.outbox.push(bytes);
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    fn mark_dirty(&mut self, id: u64) {
        if let Some(c) = self.table.get_mut(&id) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    /// The socket of `id` accepts bytes again: write, and refill what it fell behind on.
    /// Returns whether its reading may resume (see [`flush`](Self::flush)).
    pub fn writable(&mut self, registry: &Registry, id: u64, logs: &Logs, _: RecordsSaved) -> bool {
        self.unblock_and_write(registry, id, logs)
    }

    fn unblock_and_write(&mut self, registry: &Registry, id: u64, logs: &Logs) -> bool {
        if let Some(c) = self.table.get_mut(&id) {
            c.unblock();
        }
        self.write_to(registry, id, logs)
    }

    /// Writes what every connection touched in this step has queued. Returns those whose
    /// reading was paused and may resume (serviced on the next turn, not recursively: a
    /// fast client could otherwise nest read → answer → flush → read without bound).
    pub fn flush_dirty(&mut self, registry: &Registry, logs: &Logs, _: RecordsSaved) -> Vec<u64> {
        let mut resume = Vec::new();
        // Runs after every record read: the list's buffer is kept, not reallocated.
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            if let Some(c) = self.table.get_mut(&id) {
                c.dirty = false;
            }
            if self.write_to(registry, id, logs) {
                resume.push(id);
            }
        }
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        resume
    }

    /// Writes what the socket accepts, refilling from the subscriptions it fell behind on
    /// while the socket takes more; closes a finished or broken connection. Returns
    /// whether reading was paused and may resume now.
    pub fn flush(&mut self, registry: &Registry, id: u64, logs: &Logs, _: RecordsSaved) -> bool {
        self.write_to(registry, id, logs)
    }

    /// [`flush`](Self::flush), for the methods that were handed its proof themselves.
    fn write_to(&mut self, registry: &Registry, id: u64, logs: &Logs) -> bool {
        loop {
            let Some(client) = self.table.get_mut(&id) else {
                return false;
            };
            let subs = &self.subs;
            client.release_deferred(|session, seq| subs.passed(id, session, seq));
            let before = client.outbox.len();
            let pacer = self.subs.is_pacer(id);
            let per_write = if pacer {
                LOSSLESS_WRITE_BYTES
            } else {
                usize::MAX
            };
            if let Err(e) = client.write_out(per_write) {
                log::debug!("client {id}: write: {e}");
                self.close(registry, id);
                return false;
            }
            if client.outbox.len() < before && pacer {
                self.subs.progress(id, Instant::now());
            }
            if !client.outbox.is_empty() {
                break; // Blocked, or WRITABLE fires when the socket drains.
            }
            let behind = self.subs.behind(id);
            if behind.is_empty() {
                break;
            }
            for session in behind {
                match logs.get(&session) {
                    Some(ring) => self.subs.pump(id, &session, ring, &mut client.outbox),
                    None => self.subs.remove(id, &session),
                }
            }
            if client.outbox.is_empty() {
                break;
            }
        }
        let Some(client) = self.table.get_mut(&id) else {
            return false;
        };
        if let Some(token) = Source::Client(id).token() {
            client.watch_room(registry, token);
        }
        // Requests are read again once their answers have room and no replay they follow
        // is still being queued; live output flowing to a subscriber never holds its
        // requests back (see `Outbox::can_take_replies`, `Client::may_answer`).
        if client.paused && client.may_answer() {
            client.paused = false;
            return true;
        }
        if client.finished() && !self.subs.follows_anything(id) {
            self.close(registry, id);
        }
        false
    }

    /// Drops connection `id` and everything owed to it.
    pub fn close(&mut self, registry: &Registry, id: u64) {
        let Some(mut client) = self.table.remove(&id) else {
            return;
        };
        let _ = registry.deregister(client.stream_mut());
        self.subs.remove_client(id);
        self.starts.remove(&id);
        if client.waiting > 0 {
            self.waits.retain(|_, list| {
                list.retain(|(c, _)| *c != id);
                !list.is_empty()
            });
            self.ready_waits.retain(|_, list| {
                list.retain(|(c, _)| *c != id);
                !list.is_empty()
            });
        }
        self.replies.retain(|_, (c, _)| *c != id);
        self.sizes_again.extend(self.sizes.gone(id));
        log::debug!("client {id} disconnected");
    }

    /// Like [`Clients::expect_reply`], for a `resize` (`command`), from a terminal
    /// `attached` to the session or a one-off: noted once the core has taken it.
    pub fn expect_resized(
        &mut self,
        id: u64,
        rid: RequestId,
        command: &Command,
        attached: bool,
    ) -> u64 {
        let request = self.expect_reply(id, rid);
        if let Command::Resize {
            session,
            rows,
            cols,
            ..
        } = command
        {
            let resize = Resize {
                client: id,
                session: session.clone(),
                rows: *rows,
                cols: *cols,
                attached,
            };
            self.resizes.insert(request, resize);
        }
        request
    }

    /// The core's answer to `request`, if it was a `resize`: what its terminals are now.
    fn resized(&mut self, request: u64, result: &Result<Response, CoreError>) {
        let Some(r) = self.resizes.remove(&request) else {
            return;
        };
        let Ok(Response::Gen(gen)) = result else {
            return;
        };
        if r.attached {
            if self.table.contains_key(&r.client) {
                self.sizes
                    .attached(r.client, &r.session, *gen, r.rows, r.cols);
            }
        } else {
            self.sizes.one_off(*gen);
        }
    }

    /// The sizes to give generations again because the terminal that sized them last
    /// went (see [`TerminalSizes`]).
    pub fn take_sizes_again(&mut self) -> Vec<SizeAgain> {
        std::mem::take(&mut self.sizes_again)
    }

    /// Whether [`Clients::take_sizes_again`] has something to give.
    pub fn owes_sizes(&self) -> bool {
        !self.sizes_again.is_empty()
    }

    /// On the way out, subscribers that keep reading get the last events (every session's
    /// exit): writing continues until every queue and subscription is drained, or for at
    /// most [`EXIT_FLUSH`].
    pub fn flush_before_exit(&mut self, poll: &mut Poll, logs: &Logs, _: RecordsSaved) {
        let deadline = Instant::now() + EXIT_FLUSH;
        let mut events = mio::Events::with_capacity(64);
        loop {
            let ids: Vec<u64> = self.table.keys().copied().collect();
            for &id in &ids {
                // Woken by some socket draining: try each again.
                self.unblock_and_write(poll.registry(), id, logs);
            }
            let busy = self
                .table
                .iter()
                .any(|(id, c)| !c.outbox.is_empty() || self.subs.lagging(*id, logs));
            let left = deadline.saturating_duration_since(Instant::now());
            if !busy || left.is_zero() || poll.poll(&mut events, Some(left)).is_err() {
                return;
            }
        }
    }
}
