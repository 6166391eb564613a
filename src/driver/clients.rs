//! Control connections: accepting (with peer checks and a connection limit), reading
//! requests, answering, and the daemon's own operations.

use std::io::{self, Read};
use std::sync::Arc;

use mio::{Interest, Token};

use super::client::{Client, Deferred};
use super::daemon::{Daemon, Shutdown, Source};
use super::fanout::start_cursor;
use crate::core::{Command, Input, LastEnd, Lifecycle};
use crate::proto::encode;
use crate::proto::envelope::{begin_ok_response, Request, RequestId};
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::Limits;
use crate::proto::request::{self, Op, Target};

/// Bytes read from one client per turn, so one chatty client cannot starve the rest.
const CLIENT_READ_PER_TURN: usize = 256 * 1024;

/// How long an exiting daemon keeps writing to clients that are still reading.
const EXIT_FLUSH: std::time::Duration = std::time::Duration::from_secs(1);

/// Most unanswered `wait` requests one connection may have.
const MAX_WAITS: usize = 1024;

/// Socket send buffer asked for each client.
const CLIENT_SNDBUF: usize = 1 << 20;

/// The protocol version `hello` reports.
pub const PROTOCOL_VERSION: u64 = 1;

impl Daemon {
    pub(super) fn accept_clients(&mut self) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and friends: log and try again on the next readiness rather
                    // than spinning.
                    log::error!("accept: {e}");
                    return;
                }
            };
            let refuse = |stream: &mut mio::net::UnixStream, code: ErrorCode, why: String| {
                let mut line = Vec::new();
                encode::error(&RequestId::Null, &ProtoError::new(code, why), &mut line);
                let _ = io::Write::write(stream, &line);
                // Closing a Unix socket with unread input resets it, and the peer would
                // lose the line above: discard what it already sent (bounded) first.
                let mut sink = [0u8; 4096];
                for _ in 0..16 {
                    match io::Read::read(stream, &mut sink) {
                        Ok(n) if n > 0 => {}
                        _ => break,
                    }
                }
            };
            if let Err(refused) = self.policy.check(&stream) {
                log::warn!("refused a connection: {}", refused.reason);
                refuse(&mut stream, ErrorCode::PermissionDenied, refused.reason);
                continue;
            }
            if self.clients.len() >= self.cfg.max_clients {
                log::warn!(
                    "refused a connection: {} clients connected",
                    self.clients.len()
                );
                refuse(
                    &mut stream,
                    ErrorCode::Limit,
                    format!("too many connections (limit {})", self.cfg.max_clients),
                );
                continue;
            }
            // A deeper socket buffer moves output in fewer, larger writes and wake-ups
            // (best effort: the kernel caps it at net.core.wmem_max).
            let _ = rustix::net::sockopt::set_socket_send_buffer_size(&stream, CLIENT_SNDBUF);
            let token = self.token(Source::Client);
            if let Err(e) = self.poll.registry().register(
                &mut stream,
                token,
                Interest::READABLE | Interest::WRITABLE,
            ) {
                log::error!("register client: {e}");
                self.sources.remove(&token);
                continue;
            }
            let client = Client::new(stream, self.cfg.max_line, self.cfg.client_outbox_bytes);
            self.clients.insert(token, client);
            log::debug!("client {} connected", token.0);
        }
    }

    pub(super) fn client_readable(&mut self, token: Token) {
        // Requests already read come first; nothing more is read while they wait.
        if !self.answer_pending(token) {
            self.flush_client(token);
            return;
        }
        let mut buf = std::mem::take(&mut self.read_buf);
        let mut total = 0;
        while let Some(client) = self.clients.get_mut(&token) {
            if client.eof {
                break;
            }
            if total >= CLIENT_READ_PER_TURN {
                self.again.push(token);
                break;
            }
            match client.stream.read(&mut buf) {
                Ok(0) => {
                    client.eof = true;
                    let pending = &mut client.pending;
                    client
                        .lines
                        .finish(|l| pending.push_back(l.map(<[u8]>::to_vec)));
                    self.answer_pending(token);
                    break;
                }
                Ok(n) => {
                    total += n;
                    let pending = &mut client.pending;
                    client
                        .lines
                        .feed(&buf[..n], |l| pending.push_back(l.map(<[u8]>::to_vec)));
                    if !self.answer_pending(token) {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("client {}: read: {e}", token.0);
                    self.close_client(token);
                    break;
                }
            }
        }
        self.read_buf = buf;
        self.flush_client(token);
    }

    /// Answers the requests read but not yet handled, while their answers have room.
    /// Returns whether all were handled (false: paused until the client reads, or gone).
    /// This is what bounds a client that pipelines requests without reading answers.
    fn answer_pending(&mut self, token: Token) -> bool {
        loop {
            let Some(client) = self.clients.get_mut(&token) else {
                return false;
            };
            if client.pending.is_empty() {
                return true;
            }
            if !client.outbox.can_take_replies() {
                client.paused = true;
                return false;
            }
            if let Some(line) = client.pending.pop_front() {
                self.handle_line(token, line);
            }
        }
    }

    pub(super) fn client_writable(&mut self, token: Token) {
        self.flush_client(token);
    }

    /// Writes what the socket accepts; refills from subscriptions; resumes reading when
    /// the queue drained; closes a finished or broken connection.
    pub(super) fn flush_client(&mut self, token: Token) {
        loop {
            let Some(client) = self.clients.get_mut(&token) else {
                return;
            };
            Self::release_deferred(client);
            if let Err(e) = client.outbox.flush_to(&mut client.stream) {
                log::debug!("client {}: write: {e}", token.0);
                self.close_client(token);
                return;
            }
            if !client.outbox.is_empty() {
                break; // WRITABLE will fire when the socket drains.
            }
            // Room again: continue subscriptions that were cut short.
            let behind: Vec<Arc<str>> = client.behind.iter().cloned().collect();
            let refilled = !behind.is_empty();
            for session in behind {
                match self.logs.get(&session) {
                    Some(ring) => client.pump(&session, ring),
                    None => client.unsubscribe(&session),
                }
            }
            if !refilled || client.outbox.is_empty() {
                break;
            }
        }
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        // Requests are read again once their answers have room; output flowing to a
        // subscriber never holds its requests back (see `Outbox::can_take_replies`).
        if client.paused && client.outbox.can_take_replies() {
            // Serviced on the next turn of the loop (not recursively: a fast client could
            // otherwise nest read → answer → flush → read without bound).
            client.paused = false;
            self.again.push(token);
            return;
        }
        if client.finished() {
            self.close_client(token);
        }
    }

    pub(super) fn close_client(&mut self, token: Token) {
        let Some(mut client) = self.clients.remove(&token) else {
            return;
        };
        let _ = self.poll.registry().deregister(&mut client.stream);
        self.sources.remove(&token);
        self.all_subscribers.remove(&token);
        for session in client.subs.keys() {
            if let Some(s) = self.subscribers.get_mut(session) {
                s.remove(&token);
            }
        }
        for list in self.waiters.values_mut() {
            list.retain(|(t, _)| *t != token);
        }
        self.waiters.retain(|_, l| !l.is_empty());
        self.requests.retain(|_, (t, _)| *t != token);
        log::debug!("client {} disconnected", token.0);
    }

    /// Queues bytes for a client and tries to write them.
    pub(super) fn send(&mut self, token: Token, bytes: &[u8]) {
        if let Some(c) = self.clients.get_mut(&token) {
            c.outbox.push(bytes);
        }
        self.flush_client(token);
    }

    fn send_error(&mut self, token: Token, id: &RequestId, error: ProtoError) {
        let mut line = Vec::new();
        encode::error(id, &error, &mut line);
        self.send(token, &line);
    }

    fn handle_line(
        &mut self,
        token: Token,
        line: Result<Vec<u8>, crate::proto::framing::LineTooLong>,
    ) {
        let line = match line {
            Ok(l) => l,
            Err(too_long) => {
                let e = ProtoError::new(ErrorCode::Limit, too_long.to_string());
                self.send_error(token, &RequestId::Null, e);
                return;
            }
        };
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let limits = Limits {
            max_len: self.cfg.max_line,
            ..Limits::DEFAULT
        };
        let req = match Request::decode(&line, &limits) {
            Ok(r) => r,
            Err(e) => return self.send_error(token, &e.id, e.error),
        };
        let op = match request::decode(&req.op, &req.args) {
            Ok(op) => op,
            Err(e) => return self.send_error(token, &req.id, e),
        };
        self.handle_op(token, req.id, op);
    }

    fn handle_op(&mut self, token: Token, id: RequestId, op: Op) {
        match op {
            Op::Core(command) => {
                if self.shutdown != Shutdown::Running
                    && matches!(command, Command::Spawn { .. } | Command::Restart { .. })
                {
                    let e = ProtoError::new(ErrorCode::Busy, "the daemon is shutting down");
                    return self.send_error(token, &id, e);
                }
                let request = self.internal_request();
                self.requests.insert(request, (token, id));
                self.feed(Input::Command { request, command });
            }
            Op::Hello => {
                let mut line = Vec::new();
                let mut w = begin_ok_response(&id, &mut line);
                w.u64("protocol", PROTOCOL_VERSION)
                    .str("version", env!("CARGO_PKG_VERSION"))
                    .u64("pid", u64::from(std::process::id()))
                    .str("identity", &self.identity)
                    .str("reaper", if self.fallback { "sigchld" } else { "pidfd" })
                    .with("capabilities", |out| {
                        out.extend_from_slice(
                            br#"["pipes","pty","output_frames","replay","if_gen","wait"]"#,
                        )
                    });
                w.finish();
                line.push(b'\n');
                self.send(token, &line);
            }
            Op::Subscribe { target, replay } => self.subscribe(token, id, target, replay),
            Op::Unsubscribe { target } => {
                if let Some(client) = self.clients.get_mut(&token) {
                    match &target {
                        Target::All => {
                            client.all = None;
                            client.subs.clear();
                            client.behind.clear();
                            self.all_subscribers.remove(&token);
                            for s in self.subscribers.values_mut() {
                                s.remove(&token);
                            }
                        }
                        Target::Session(name) => {
                            client.unsubscribe(name);
                            if let Some(s) = self.subscribers.get_mut(name.as_str()) {
                                s.remove(&token);
                            }
                        }
                    }
                }
                self.ok(token, &id);
            }
            Op::Wait { session, gen } => self.wait(token, id, &session, gen),
            Op::Shutdown => {
                self.ok(token, &id);
                self.begin_shutdown();
            }
        }
    }

    fn ok(&mut self, token: Token, id: &RequestId) {
        let mut line = Vec::new();
        begin_ok_response(id, &mut line).finish();
        line.push(b'\n');
        self.send(token, &line);
    }

    fn subscribe(&mut self, token: Token, id: RequestId, target: Target, replay: request::Replay) {
        let sessions: Vec<std::sync::Arc<str>> = match &target {
            Target::All => self.logs.sessions().cloned().collect(),
            Target::Session(name) => {
                let known = self.core.get(name).map(|s| s.name);
                match known {
                    Some(n) => vec![n],
                    None => {
                        let e = ProtoError::new(
                            ErrorCode::NoSuchSession,
                            format!("no session named `{name}`"),
                        );
                        return self.send_error(token, &id, e);
                    }
                }
            }
        };
        self.ok(token, &id);
        let Some(client) = self.clients.get_mut(&token) else {
            return;
        };
        if target == Target::All {
            client.all = Some(replay);
            self.all_subscribers.insert(token);
        }
        for session in sessions {
            let ring = self.logs.ring(&session);
            client
                .subs
                .entry(session.clone())
                .or_insert_with(|| start_cursor(ring, replay));
            client.pump(&session, ring);
            if target != Target::All {
                self.subscribers.entry(session).or_default().insert(token);
            }
        }
        self.flush_client(token);
    }

    fn wait(&mut self, token: Token, id: RequestId, session: &str, gen: Option<u64>) {
        let Some(snap) = self.core.get(session) else {
            let e = ProtoError::new(
                ErrorCode::NoSuchSession,
                format!("no session named `{session}`"),
            );
            return self.send_error(token, &id, e);
        };
        // Not yet reported: its terminal event is still to come, so the wait can register.
        let unreported = |g: u64| {
            snap.generations.iter().any(|s| {
                s.gen == g && !matches!(s.lifecycle, Lifecycle::Reported | Lifecycle::Gone)
            })
        };
        // No generation named and none current: the session's last end answers.
        let last = snap.last_end.map(|end| match end {
            LastEnd::Exited { gen, .. } | LastEnd::SpawnFailed { gen, .. } => gen,
        });
        let Some(g) = gen.or(snap.current).or(last) else {
            let what = format!("session `{session}` has no generation to wait for");
            return self.send_error(token, &id, ProtoError::new(ErrorCode::NotRunning, what));
        };
        if let Some(end) = self.ended.get(&g).filter(|e| *e.session == *session) {
            let line = wait_answer(&id, &end.line);
            return self.send(token, &line);
        }
        if !unreported(g) {
            let what = format!(
                "generation {g} of `{session}` is not known (ended long ago, or never existed)"
            );
            return self.send_error(token, &id, ProtoError::new(ErrorCode::NotRunning, what));
        }
        if self
            .clients
            .get(&token)
            .is_some_and(|c| c.waiting >= MAX_WAITS)
        {
            let e = ProtoError::new(
                ErrorCode::Limit,
                format!("{MAX_WAITS} wait requests already pending on this connection"),
            );
            return self.send_error(token, &id, e);
        }
        self.waiters.entry(g).or_default().push((token, id));
        if let Some(c) = self.clients.get_mut(&token) {
            c.waiting += 1;
        }
    }

    /// Answers every `wait` for `gen` with its terminal event line.
    ///
    /// A waiter that also subscribes to the session gets its answer only after the exit
    /// record (log sequence `seq`) has been queued to it, so the answer never overtakes
    /// that generation's output on the same connection.
    pub(super) fn answer_waiters(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        seq: u64,
        event_line: &[u8],
    ) {
        for (token, id) in self.waiters.remove(&gen).unwrap_or_default() {
            let line = wait_answer(&id, event_line);
            if let Some(c) = self.clients.get_mut(&token) {
                c.deferred.push(Deferred {
                    session: session.clone(),
                    seq,
                    line,
                });
            }
            self.flush_client(token);
        }
    }

    /// Queues the deferred `wait` answers whose exit record this client has been sent
    /// (or that no subscription holds back).
    fn release_deferred(client: &mut Client) {
        let mut i = 0;
        while i < client.deferred.len() {
            let d = &client.deferred[i];
            let passed = client.subs.get(&d.session).is_none_or(|c| c.seq > d.seq);
            if passed {
                let d = client.deferred.remove(i);
                client.outbox.push(&d.line);
                client.waiting = client.waiting.saturating_sub(1);
            } else {
                i += 1;
            }
        }
    }

    /// On the way out, subscribers that keep reading get the last events (every session's
    /// exit): writing continues until every queue and subscription is drained, or for at
    /// most [`EXIT_FLUSH`].
    pub(super) fn flush_all_clients(&mut self) {
        let deadline = std::time::Instant::now() + EXIT_FLUSH;
        let mut events = mio::Events::with_capacity(64);
        loop {
            let tokens: Vec<Token> = self.clients.keys().copied().collect();
            for token in tokens {
                self.flush_client(token);
            }
            let logs = &self.logs;
            let busy = self.clients.values().any(|c| {
                !c.outbox.is_empty()
                    || c.subs
                        .iter()
                        .any(|(s, cur)| logs.get(s).is_some_and(|r| cur.seq < r.end_seq()))
            });
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if !busy || left.is_zero() || self.poll.poll(&mut events, Some(left)).is_err() {
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
