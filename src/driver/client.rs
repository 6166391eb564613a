//! One control connection: its socket, request splitter, outgoing queue and subscriptions.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

use mio::net::UnixStream;

use super::fanout::{pump, Cursor};
use super::outbox::Outbox;
use super::ring::Ring;
use crate::proto::framing::{LineSplitter, LineTooLong};
use crate::proto::request::Replay;

/// A `wait` answer waiting for the subscriber's cursor to pass the exit record.
#[derive(Debug)]
pub struct Deferred {
    /// The session whose log holds the exit record.
    pub session: Arc<str>,
    /// The exit record's sequence number in that log.
    pub seq: u64,
    /// The complete answer line.
    pub line: Vec<u8>,
}

/// A connected client.
#[derive(Debug)]
pub struct Client {
    /// The socket.
    pub stream: UnixStream,
    /// Splits incoming bytes into request lines, bounded.
    pub lines: LineSplitter,
    /// Bytes waiting to be written.
    pub outbox: Outbox,
    /// Request lines read but not yet handled (at most one read's worth): handled while
    /// their answers have room in the outbox.
    pub pending: VecDeque<Result<Vec<u8>, LineTooLong>>,
    /// Per-session subscription cursors.
    pub subs: HashMap<Arc<str>, Cursor>,
    /// Sessions whose log this client has not caught up with (its queue was full): the
    /// only ones refilled when the queue drains, so a subscriber to many quiet sessions
    /// costs nothing per write.
    pub behind: HashSet<Arc<str>>,
    /// Subscribed to every session: how to start on sessions that already exist.
    pub all: Option<Replay>,
    /// Reading stopped because the outbox is full; resume when it drains.
    pub paused: bool,
    /// The peer closed its writing side; close once everything is answered.
    pub eof: bool,
    /// `wait` requests not yet answered (registered or deferred).
    pub waiting: usize,
    /// `wait` answers held until this client has been sent the exit record they follow.
    pub deferred: Vec<Deferred>,
}

impl Client {
    /// A fresh connection.
    pub fn new(stream: UnixStream, max_line: usize, outbox_bytes: usize) -> Client {
        Client {
            stream,
            lines: LineSplitter::new(max_line),
            outbox: Outbox::new(outbox_bytes),
            pending: VecDeque::new(),
            subs: HashMap::new(),
            behind: HashSet::new(),
            all: None,
            paused: false,
            eof: false,
            waiting: 0,
            deferred: Vec::new(),
        }
    }

    /// Copies `session`'s log into the queue as far as it has room, and remembers whether
    /// the client is now behind on it.
    pub fn pump(&mut self, session: &Arc<str>, ring: &Ring) {
        let Some(cursor) = self.subs.get_mut(session) else {
            return;
        };
        if pump(session, ring, cursor, &mut self.outbox) {
            self.behind.remove(session);
        } else {
            self.behind.insert(session.clone());
        }
    }

    /// Stops following `session`.
    pub fn unsubscribe(&mut self, session: &str) {
        self.subs.remove(session);
        self.behind.remove(session);
    }

    /// Whether the connection has nothing left to do.
    pub fn finished(&self) -> bool {
        self.eof
            && self.outbox.is_empty()
            && self.waiting == 0
            && self.subs.is_empty()
            && self.all.is_none()
    }
}
