//! The control connections and everything owed to them: accepting (with peer checks and a
//! connection limit), reading requests, answers, subscriptions, and pending `wait`s.
//!
//! A request travels: socket → [`Clients::next_request`] (split, decode) → the daemon,
//! which routes it to the core or back here → an answer queued on the connection →
//! [`Clients::flush_dirty`] at the end of the step writes it.

mod image;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::UnixListener;
use mio::{Interest, Poll, Registry};

use super::client::{Client, Deferred, Line, Received};
use super::listener::{Listener, PeerPolicy};
use super::logs::Logs;
use super::subscriptions::{start_cursor, Subscriptions, Terms};
use super::token::Source;
use crate::core::{Error as CoreError, Response, SessionSnapshot, WaitFor};
use crate::proto::encode::{self, Clock};
use crate::proto::envelope::{begin_ok_response, Request, RequestId};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::Limits;
use crate::proto::list;
use crate::proto::request::{self, Op, Target};

/// How long an exiting daemon keeps writing to clients that are still reading.
const EXIT_FLUSH: Duration = Duration::from_secs(1);

/// The least log a session followed losslessly keeps: when the child's leader exits,
/// what is left in its pipes (up to 1 MiB each, see `child.rs`) is read at once, on top
/// of the one read a lossless follower may be behind by, and must not push that
/// follower's next record out of the log.
pub const LOSSLESS_LOG_BYTES: usize = 3 << 20;

/// Most unanswered `wait` requests one connection may have.
const MAX_WAITS: usize = 1024;

/// The protocol version `hello` reports.
pub const PROTOCOL_VERSION: u64 = 1;

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
    /// A decoded request.
    Request(RequestId, Op),
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
    /// Core request id → the connection and the id it used.
    replies: HashMap<u64, (u64, RequestId)>,
    next_request: u64,
    /// Connections with bytes queued in this step, flushed at its end.
    dirty: Vec<u64>,
}

impl Clients {
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
            replies: HashMap::new(),
            next_request: 1,
            dirty: Vec::new(),
        }
    }

    /// Accepts every waiting connection the listener admits.
    pub fn accept(&mut self, registry: &Registry) {
        while let Some(mut stream) = self
            .listener
            .admit(self.table.len(), self.limits.max_clients)
        {
            let id = self.next_id;
            self.next_id += 1;
            let Some(token) = Source::Client(id).token() else {
                return;
            };
            if let Err(e) =
                registry.register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
            {
                log::error!("register client: {e}");
                continue;
            }
            let client = Client::new(stream, self.limits.max_line, self.limits.outbox_bytes);
            self.table.insert(id, client);
            log::debug!("client {id} connected");
        }
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
                match self.decode(line) {
                    Ok(Some((rid, op))) => return Next::Request(rid, op),
                    Ok(None) => {}
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

    /// A request line → its id and operation; `None` for a blank line.
    fn decode(&self, line: Line) -> Result<Option<(RequestId, Op)>, (RequestId, ProtoError)> {
        let line = line.map_err(|too_long| {
            (
                RequestId::Null,
                ProtoError::new(ErrorCode::Limit, too_long.to_string()),
            )
        })?;
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(None);
        }
        let limits = Limits {
            max_len: self.limits.max_line,
            ..Limits::DEFAULT
        };
        let req = Request::decode(&line, &limits).map_err(|e| (e.id, e.error))?;
        match request::decode(&req.op, &req.args) {
            Ok(op) => Ok(Some((req.id, op))),
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

    /// Answers `rid` with an error.
    pub fn send_error(&mut self, id: u64, rid: &RequestId, error: &ProtoError) {
        let mut line = Vec::new();
        encode::error(rid, error, &mut line);
        self.push(id, &line);
    }

    /// Answers `rid` with a bare success.
    pub fn send_ok(&mut self, id: u64, rid: &RequestId) {
        let mut line = Vec::new();
        begin_ok_response(rid, &mut line).finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// Answers a `list` page. Only that page is queued: a client reading the whole
    /// table asks page after page, and the daemon reads its next request only while its
    /// queue has room, so it never holds the table's encoding for anyone.
    pub fn send_page(
        &mut self,
        id: u64,
        rid: &RequestId,
        sessions: &[SessionSnapshot],
        more: bool,
        clock: Clock,
    ) {
        let mut line = Vec::new();
        list::write_page(rid, sessions, more, clock, &mut line);
        self.push(id, &line);
    }

    /// Answers `hello`: protocol version, capabilities, who the daemon is, and whether a
    /// keeper holds its children's descriptors (so that a crash loses nothing).
    pub fn send_hello(&mut self, id: u64, rid: &RequestId, keeper: bool) {
        let mut line = Vec::new();
        let mut w = begin_ok_response(rid, &mut line);
        w.u64("protocol", PROTOCOL_VERSION)
            .str("version", env!("CARGO_PKG_VERSION"))
            .u64("pid", u64::from(std::process::id()))
            .str("identity", &self.hello.identity)
            .str("reaper", self.hello.reaper)
            .str("containment", self.hello.containment)
            .bool("keeper", keeper)
            .with("capabilities", |out| {
                out.extend_from_slice(
                    br#"["pipes","pty","output_frames","replay","if_gen","wait","upgrade","list_pages","lossless"]"#,
                )
            });
        w.finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// Answers an `upgrade` that succeeded: the version that runs now, the one before,
    /// and how long the loop did not serve.
    pub fn send_upgraded(
        &mut self,
        id: u64,
        rid: &RequestId,
        previous: &str,
        pause_ms: u64,
        image_bytes: u64,
    ) {
        let mut line = Vec::new();
        let mut w = begin_ok_response(rid, &mut line);
        w.str("version", env!("CARGO_PKG_VERSION"))
            .str("previous", previous)
            .u64("pid", u64::from(std::process::id()))
            .u64("pause_ms", pause_ms)
            .u64("image_bytes", image_bytes);
        w.finish();
        line.push(b'\n');
        self.push(id, &line);
    }

    /// A core request id whose reply goes to `rid` on connection `id`.
    pub fn expect_reply(&mut self, id: u64, rid: RequestId) -> u64 {
        let request = self.internal_request();
        self.replies.insert(request, (id, rid));
        request
    }

    /// A core request id whose reply nobody waits for.
    pub fn internal_request(&mut self) -> u64 {
        let request = self.next_request;
        self.next_request += 1;
        request
    }

    /// Delivers the core's reply to the connection that asked, if it is still there.
    pub fn reply(&mut self, request: u64, result: &Result<Response, CoreError>, clock: Clock) {
        if let Some((id, rid)) = self.replies.remove(&request) {
            let mut line = Vec::new();
            encode::reply(&rid, result, clock, &mut line);
            self.push(id, &line);
        }
    }

    /// Subscribes `id` to `sessions` (and, for `all`, to every session created later),
    /// starting each per `terms` (where, and whether losslessly).
    pub fn subscribe(
        &mut self,
        id: u64,
        rid: &RequestId,
        sessions: &[Arc<str>],
        all: bool,
        terms: Terms,
        logs: &mut Logs,
    ) {
        let Terms { replay, lossless } = terms;
        self.send_ok(id, rid);
        if all {
            self.subs.add_all(id, replay, lossless);
        }
        let Some(client) = self.table.get_mut(&id) else {
            return;
        };
        for session in sessions {
            if lossless.is_some() {
                logs.ensure_capacity(session, LOSSLESS_LOG_BYTES);
            }
            let ring = logs.get_or_create(session);
            self.subs
                .add(id, session, start_cursor(ring, replay), lossless);
            self.subs.pump(id, session, ring, &mut client.outbox);
        }
    }

    /// Whether `session`'s output must wait: a lossless follower is behind its log.
    pub fn holds_back(&self, session: &str, logs: &Logs) -> bool {
        // Asked after every read: without a lossless subscriber anywhere, nothing is
        // looked up.
        self.subs.has_pacers()
            && logs
                .get(session)
                .is_some_and(|ring| self.subs.holds_back(session, ring))
    }

    /// `session`'s output waits from `now` for its lossless followers that are behind.
    pub fn hold(&mut self, session: &str, logs: &Logs, now: Instant) {
        if let Some(ring) = logs.get(session) {
            self.subs.hold(session, ring, now);
        }
    }

    /// Whether `session` has lossless followers.
    pub fn paces(&self, session: &str) -> bool {
        self.subs.paces(session)
    }

    /// `session`'s output flows again.
    pub fn release(&mut self, session: &str) {
        self.subs.release(session);
    }

    /// Whether held output may flow again since the last call.
    pub fn take_moved(&mut self) -> bool {
        self.subs.take_moved()
    }

    /// When the next lossless follower is due to be demoted.
    pub fn demote_deadline(&self) -> Option<Instant> {
        self.subs.demote_deadline()
    }

    /// Demotes the lossless followers that held output back for their `demote_after`
    /// without taking a byte, and tells each (`demoted`, after what it was already sent).
    pub fn demote_due(&mut self, now: Instant) {
        for (id, session, pos) in self.subs.demote_due(now) {
            log::info!("client {id}: lossless subscription to {session} demoted at byte {pos}: it took nothing for its demote_after");
            let mut line = Vec::new();
            encode::demoted(&session, pos, &mut line);
            self.push(id, &line);
        }
    }

    /// Stops `id` following `target`.
    pub fn unsubscribe(&mut self, id: u64, rid: &RequestId, target: &Target) {
        match target {
            Target::All => self.subs.remove_client(id),
            Target::Session(name) => self.subs.remove(id, name),
        }
        self.send_ok(id, rid);
    }

    /// Answers a `wait` now (an end already known, or an error), or registers it to be
    /// answered with the generation's terminal event.
    pub fn wait(&mut self, id: u64, rid: RequestId, target: Result<WaitFor, CoreError>) {
        match target {
            Err(e) => self.send_error(id, &rid, &encode::core_error(&e)),
            Ok(WaitFor::Ended(event)) => {
                let mut line = Vec::new();
                encode::event(&event, &mut line);
                let answer = wait_answer(&rid, &line);
                self.push(id, &answer);
            }
            Ok(WaitFor::Live(gen)) => {
                let Some(client) = self.table.get_mut(&id) else {
                    return;
                };
                if client.waiting >= MAX_WAITS {
                    let why =
                        format!("{MAX_WAITS} wait requests already pending on this connection");
                    self.send_error(id, &rid, &ProtoError::new(ErrorCode::Limit, why));
                    return;
                }
                client.waiting += 1;
                self.waits.entry(gen).or_default().push((id, rid));
            }
        }
    }

    /// Brings every follower of `session` up to date after record `seq` was appended.
    pub fn deliver(&mut self, session: &Arc<str>, seq: u64, logs: &Logs) {
        let Some(ring) = logs.get(session) else {
            return;
        };
        for id in self.subs.followers(session, ring, seq) {
            if let Some(client) = self.table.get_mut(&id) {
                if client.stalled() && !client.outbox.has_room() {
                    // Nothing can move until its socket drains: just remember the session.
                    self.subs.fall_behind(id, session);
                    continue;
                }
                self.subs.pump(id, session, ring, &mut client.outbox);
                if !client.dirty {
                    client.dirty = true;
                    self.dirty.push(id);
                }
            }
        }
    }

    /// Answers every `wait` for `gen` with its terminal event, the record `seq` of
    /// `session`'s log. A waiter that also follows the session gets its answer only after
    /// that record was queued to it, so the answer never overtakes the output it follows.
    pub fn answer_waits(&mut self, session: &Arc<str>, gen: u64, seq: u64, event_line: &[u8]) {
        for (id, rid) in self.waits.remove(&gen).unwrap_or_default() {
            if let Some(c) = self.table.get_mut(&id) {
                c.defer(Deferred {
                    session: session.clone(),
                    seq,
                    line: wait_answer(&rid, event_line),
                });
            }
            self.mark_dirty(id);
        }
    }

    /// Journal segments given up while frames in them were still queued: those frames are
    /// copied out, so the segments' memory goes now.
    pub fn detach_frames(&mut self, segments: &[crate::store::journal::Segment]) {
        for &seg in segments {
            let mut copies = HashMap::new();
            for client in self.table.values_mut() {
                client.outbox.detach(seg, &mut copies);
            }
        }
    }

    /// A removed session: followers still behind lose the rest of its log with it, and
    /// are told so, counted.
    pub fn forget_session(&mut self, session: &str, logs: &Logs) {
        if let Some(ring) = logs.get(session) {
            let end = ring.end_pos();
            for (id, cursor) in self.subs.cursors_of(session) {
                if cursor.seq < ring.end_seq() {
                    let mut line = Vec::new();
                    encode::dropped(session, cursor.pos, end.max(cursor.pos), &mut line);
                    self.push(id, &line);
                }
            }
        }
        self.subs.remove_session(session);
    }

    /// The socket of `id` accepts bytes again: write, and refill what it fell behind on.
    /// Returns whether its reading may resume (see [`flush`](Self::flush)).
    pub fn writable(&mut self, registry: &Registry, id: u64, logs: &Logs) -> bool {
        if let Some(c) = self.table.get_mut(&id) {
            c.unblock();
        }
        self.flush(registry, id, logs)
    }

    /// Writes what every connection touched in this step has queued. Returns those whose
    /// reading was paused and may resume (serviced on the next turn, not recursively: a
    /// fast client could otherwise nest read → answer → flush → read without bound).
    pub fn flush_dirty(&mut self, registry: &Registry, logs: &Logs) -> Vec<u64> {
        let mut resume = Vec::new();
        // Runs after every record read: the list's buffer is kept, not reallocated.
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            if let Some(c) = self.table.get_mut(&id) {
                c.dirty = false;
            }
            if self.flush(registry, id, logs) {
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
    pub fn flush(&mut self, registry: &Registry, id: u64, logs: &Logs) -> bool {
        loop {
            let Some(client) = self.table.get_mut(&id) else {
                return false;
            };
            let subs = &self.subs;
            client.release_deferred(|session, seq| subs.passed(id, session, seq));
            let before = client.outbox.len();
            if let Err(e) = client.write_out() {
                log::debug!("client {id}: write: {e}");
                self.close(registry, id);
                return false;
            }
            if client.outbox.len() < before && self.subs.is_pacer(id) {
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
        // Requests are read again once their answers have room; output flowing to a
        // subscriber never holds its requests back (see `Outbox::can_take_replies`).
        if client.paused && client.outbox.can_take_replies() {
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
        if client.waiting > 0 {
            self.waits.retain(|_, list| {
                list.retain(|(c, _)| *c != id);
                !list.is_empty()
            });
        }
        self.replies.retain(|_, (c, _)| *c != id);
        log::debug!("client {id} disconnected");
    }

    /// On the way out, subscribers that keep reading get the last events (every session's
    /// exit): writing continues until every queue and subscription is drained, or for at
    /// most [`EXIT_FLUSH`].
    pub fn flush_before_exit(&mut self, poll: &mut Poll, logs: &Logs) {
        let deadline = Instant::now() + EXIT_FLUSH;
        let mut events = mio::Events::with_capacity(64);
        loop {
            let ids: Vec<u64> = self.table.keys().copied().collect();
            for &id in &ids {
                // Woken by some socket draining: try each again.
                self.writable(poll.registry(), id, logs);
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

/// The answer to a `wait`: `{"id":..,"ok":true,"end":<terminal event>}`.
fn wait_answer(id: &RequestId, event_line: &[u8]) -> Vec<u8> {
    let mut line = Vec::new();
    let mut w = begin_ok_response(id, &mut line);
    let body = event_line.strip_suffix(b"\n").unwrap_or(event_line);
    w.with("end", |out| out.extend_from_slice(body));
    w.finish();
    line.push(b'\n');
    line
}
