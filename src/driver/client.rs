//! One control connection: its socket, request splitter, outgoing queue and subscriptions.

use std::collections::HashMap;
use std::sync::Arc;

use mio::net::UnixStream;

use super::fanout::Cursor;
use super::outbox::Outbox;
use super::request::Replay;
use crate::proto::framing::LineSplitter;

/// A connected client.
#[derive(Debug)]
pub struct Client {
    /// The socket.
    pub stream: UnixStream,
    /// Splits incoming bytes into request lines, bounded.
    pub lines: LineSplitter,
    /// Bytes waiting to be written.
    pub outbox: Outbox,
    /// Per-session subscription cursors.
    pub subs: HashMap<Arc<str>, Cursor>,
    /// Subscribed to every session: how to start on sessions that already exist.
    pub all: Option<Replay>,
    /// Reading stopped because the outbox is full; resume when it drains.
    pub paused: bool,
    /// The peer closed its writing side; close once everything is answered.
    pub eof: bool,
    /// `wait` requests not yet answered.
    pub waiting: usize,
}

impl Client {
    /// A fresh connection.
    pub fn new(stream: UnixStream, max_line: usize, outbox_bytes: usize) -> Client {
        Client {
            stream,
            lines: LineSplitter::new(max_line),
            outbox: Outbox::new(outbox_bytes),
            subs: HashMap::new(),
            all: None,
            paused: false,
            eof: false,
            waiting: 0,
        }
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
