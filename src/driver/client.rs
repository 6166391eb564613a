//! One control connection: its socket, request splitter, outgoing queue, and the `wait`
//! answers it is owed.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use mio::net::UnixStream;

use super::frame::Frame;
use super::held::{Held, FREE_SHARE};
use super::logs::Logs;
use super::outbox::Outbox;
use super::upgrade::state::{ClientImage, DeferredImage, LineImage};
use crate::proto::framing::{LineSplitter, LineTooLong};

/// Most write tries skipped in a row for a socket that takes nothing (see
/// `Client::fruitless`); its readiness event ends the skipping at once.
const MAX_SKIP: u32 = 1024;

/// A read buffer above this capacity is released once split, so that one large read does
/// not pin memory for the life of the connection.
const KEEP_UNSPLIT: usize = 16 * 1024;

/// A request line as split from the stream: complete, or cut off at the length limit.
pub type Line = Result<Vec<u8>, LineTooLong>;

/// What waits until the subscriber has been sent a record of a session's log: a `wait`
/// answer, held until the exit record it follows; or, with no line, a *fence*: the last
/// record a `subscribe` replays, before which none of the connection's later requests is
/// handled, so that their answers come after the replay (a client marks the end of a
/// replay with a request, as `genward logs` does).
#[derive(Debug)]
pub struct Deferred {
    /// The session whose log holds the record.
    pub session: Arc<str>,
    /// The record's sequence number in that log.
    pub seq: u64,
    /// The complete answer line; empty for a fence.
    pub line: Vec<u8>,
}

impl Deferred {
    fn is_fence(&self) -> bool {
        self.line.is_empty()
    }
}

/// What one read from the socket brought.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// This many bytes, split into lines.
    Bytes(usize),
    /// Nothing more for now.
    WouldBlock,
    /// The peer closed its writing side; a last incomplete line was kept.
    Eof,
    /// The connection failed.
    Broken,
}

/// A connected client.
#[derive(Debug)]
pub struct Client {
    stream: UnixStream,
    lines: LineSplitter,
    /// Bytes waiting to be written.
    pub outbox: Outbox,
    /// Bytes read and not yet split into lines (at most one read's worth), split one line
    /// at a time as lines are handled: a client that pipelines thousands of tiny requests
    /// and reads no answer holds their bytes, not an allocation per line.
    unsplit: Vec<u8>,
    /// How much of `unsplit` has been split.
    split_at: usize,
    /// Where the bytes read and not handled yet (unsplit, and the unfinished line) are
    /// counted with every other connection's.
    held: Held,
    /// Lines split but not yet handled (the splitter's last, or ones carried across an
    /// upgrade): handled while their answers have room in the outbox.
    pending: VecDeque<Line>,
    /// Reading stopped because the outbox is full; resume when it drains.
    pub paused: bool,
    eof: bool,
    /// `wait` requests not yet answered (registered or deferred).
    pub waiting: usize,
    /// Held `wait` answers and replay fences (at most one fence per session followed).
    deferred: Vec<Deferred>,
    /// Queued for a flush at the end of this step.
    pub dirty: bool,
    /// Tries in a row that wrote nothing: after each, the next tries are skipped, twice as
    /// many each time (at most [`MAX_SKIP`]), until the socket takes something again or
    /// says it is writable. A reader that stopped thus costs next to no system call per
    /// record, while a live reader whose socket is only momentarily full is written to as
    /// records come — which is what lets it keep up with a flood.
    fruitless: u32,
    /// Tries still to skip.
    skip: u32,
    /// Polled for writability: only while bytes wait in the outbox. Always asked, every
    /// record the client read woke the loop once more for nothing (a Unix socket reports
    /// room each time its reader takes something).
    room_watched: bool,
}

impl Client {
    /// A fresh connection, its bytes counted in `held`.
    pub fn new(stream: UnixStream, max_line: usize, outbox_bytes: usize, held: Held) -> Client {
        Client {
            stream,
            lines: LineSplitter::new(max_line),
            outbox: Outbox::counted_in(outbox_bytes, held.clone()),
            unsplit: Vec::new(),
            split_at: 0,
            held,
            pending: VecDeque::new(),
            paused: false,
            eof: false,
            waiting: 0,
            deferred: Vec::new(),
            dirty: false,
            fruitless: 0,
            skip: 0,
            room_watched: true,
        }
    }

    /// Polls the socket for room exactly while bytes wait in the outbox (as `token`).
    pub fn watch_room(&mut self, registry: &mio::Registry, token: mio::Token) {
        let wants = !self.outbox.is_empty();
        if wants == self.room_watched {
            return;
        }
        let interest = if wants {
            mio::Interest::READABLE | mio::Interest::WRITABLE
        } else {
            mio::Interest::READABLE
        };
        match registry.reregister(&mut self.stream, token, interest) {
            Ok(()) => self.room_watched = wants,
            Err(e) => log::error!("poll a client for room: {e}"),
        }
    }

    /// Its state for an upgrade image (its socket's number, its unfinished line, the
    /// lines not handled yet, every byte not yet written, the `wait` answers it is
    /// owed); subscriptions are added by the caller.
    pub fn export(&self, id: u64, find: impl Fn(&Frame) -> Option<(Arc<str>, u64)>) -> ClientImage {
        let image = |l: Result<&[u8], LineTooLong>| match l {
            Ok(b) => LineImage::Line(b.to_vec()),
            Err(e) => LineImage::TooLong(e.limit as u64),
        };
        let mut pending: Vec<LineImage> = self
            .pending
            .iter()
            .map(|l| image(l.as_deref().map_err(|e| *e)))
            .collect();
        // What is not split yet is split here, on a copy of the splitter: the image holds
        // lines and the unfinished one, as they would be after this client's next turns.
        let mut lines = self.lines.clone();
        lines.feed(&self.unsplit[self.split_at..], |l| pending.push(image(l)));
        let (partial, skipping) = lines.state();
        ClientImage {
            id,
            fd: self.stream.as_raw_fd(),
            partial: partial.to_vec(),
            skipping,
            pending,
            outbox: self.outbox.export(find),
            paused: self.paused,
            eof: self.eof,
            waiting: self.waiting as u64,
            // Fences stay behind: a program that reads this image and knows none would take
            // one for a `wait` answer. The next program answers the connection's later
            // requests without waiting for the rest of a replay under way.
            deferred: self
                .deferred
                .iter()
                .filter(|d| !d.is_fence())
                .map(|d| DeferredImage {
                    session: d.session.to_string(),
                    seq: d.seq,
                    line: d.line.clone(),
                })
                .collect(),
            cursors: Vec::new(),
            all: None,
            all_lossless_ms: None,
        }
    }

    /// A connection carried across an upgrade, on its inherited socket.
    pub fn resumed(
        stream: UnixStream,
        image: ClientImage,
        max_line: usize,
        outbox_bytes: usize,
        held: Held,
        logs: &Logs,
    ) -> Client {
        let lines = LineSplitter::resumed(max_line, image.partial, image.skipping)
            .unwrap_or_else(|| LineSplitter::new(max_line));
        held.add(lines.buffered());
        let (outbox, missing) =
            Outbox::import(outbox_bytes, held.clone(), image.outbox, |s, seq| {
                logs.frame(s, seq)
            });
        if missing > 0 {
            log::error!(
                "client {}: {missing} queued record(s) could not be read back after the upgrade",
                image.id
            );
        }
        Client {
            stream,
            lines,
            outbox,
            unsplit: Vec::new(),
            split_at: 0,
            held,
            pending: image
                .pending
                .into_iter()
                .map(|l| match l {
                    LineImage::Line(b) => Ok(b),
                    LineImage::TooLong(limit) => Err(LineTooLong {
                        limit: limit as usize,
                    }),
                })
                .collect(),
            paused: image.paused,
            eof: image.eof,
            waiting: image.waiting as usize,
            deferred: image
                .deferred
                .into_iter()
                .map(|d| Deferred {
                    session: d.session.into(),
                    seq: d.seq,
                    line: d.line,
                })
                .collect(),
            dirty: false,
            fruitless: 0,
            skip: 0,
            room_watched: true,
        }
    }

    /// The socket, for (de)registration.
    pub fn stream_mut(&mut self) -> &mut UnixStream {
        &mut self.stream
    }

    /// The next request line already read, if its answer has room; otherwise reading
    /// pauses until the outbox drains (what bounds a client that pipelines requests
    /// without reading answers).
    pub fn next_line(&mut self) -> Option<Line> {
        if self.pending.is_empty() && !self.holds_unsplit() {
            return None;
        }
        if !self.may_answer() {
            self.paused = true;
            return None;
        }
        self.split_next();
        self.pending.pop_front()
    }

    /// Whether lines wait to be handled, or reading is paused for them.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.holds_unsplit() || self.paused
    }

    fn holds_unsplit(&self) -> bool {
        self.split_at < self.unsplit.len()
    }

    /// Splits what was read up to the next line the splitter hands out (or to the end of
    /// the bytes, if none does), unless a line is already waiting.
    fn split_next(&mut self) {
        while self.pending.is_empty() && self.holds_unsplit() {
            let rest = &self.unsplit[self.split_at..];
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(rest.len(), |nl| nl + 1);
            let pending = &mut self.pending;
            let before = self.lines.buffered();
            self.lines
                .feed(&rest[..end], |l| pending.push_back(l.map(<[u8]>::to_vec)));
            self.split_at += end;
            self.held.sub(end);
            self.account_line(before);
        }
        if !self.holds_unsplit() {
            self.split_at = 0;
            if self.unsplit.capacity() > KEEP_UNSPLIT {
                self.unsplit = Vec::new();
            } else {
                self.unsplit.clear();
            }
        }
    }

    /// Reads once from the socket into `buf` and keeps what came, to be split into lines
    /// as they are handled (see [`next_line`](Self::next_line)).
    pub fn receive(&mut self, buf: &mut [u8]) -> Received {
        if self.eof {
            return Received::WouldBlock;
        }
        // Past the budget of all connections, a read takes no more than a free share.
        let buf = if self.held.allows(FREE_SHARE) {
            buf
        } else {
            let share = buf.len().min(FREE_SHARE);
            &mut buf[..share]
        };
        loop {
            return match self.stream.read(buf) {
                Ok(0) => {
                    self.eof = true;
                    let pending = &mut self.pending;
                    let before = self.lines.buffered();
                    self.lines
                        .finish(|l| pending.push_back(l.map(<[u8]>::to_vec)));
                    self.account_line(before);
                    Received::Eof
                }
                Ok(n) => {
                    self.unsplit.extend_from_slice(&buf[..n]);
                    self.held.add(n);
                    Received::Bytes(n)
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => Received::WouldBlock,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    log::debug!("client: read: {e}");
                    Received::Broken
                }
            };
        }
    }

    /// Counts the unfinished line's change from `before` bytes, and refuses it (`limit`, at
    /// [`FREE_SHARE`]) if it grew past its free share while all connections together hold
    /// their budget.
    fn account_line(&mut self, before: usize) {
        let now = self.lines.buffered();
        self.held.add(now);
        self.held.sub(before);
        if now > before && !self.held.allows(now) {
            let pending = &mut self.pending;
            self.lines
                .cut_short(FREE_SHARE, |l| pending.push_back(l.map(<[u8]>::to_vec)));
            self.held.sub(now);
        }
    }

    /// Holds a `wait` answer until the exit record it follows has been queued.
    pub fn defer(&mut self, deferred: Deferred) {
        self.deferred.push(deferred);
    }

    /// Holds the connection's later requests until record `seq` of `session`, the last a
    /// subscription replays, has been queued (see [`Deferred`]).
    pub fn fence(&mut self, session: Arc<str>, seq: u64) {
        self.deferred
            .retain(|d| !(d.is_fence() && d.session == session));
        let line = Vec::new();
        self.deferred.push(Deferred { session, seq, line });
    }

    /// Whether a request's answer may be queued now: it has room, and no replay it must
    /// follow is still being sent.
    pub fn may_answer(&self) -> bool {
        self.outbox.can_take_replies() && !self.deferred.iter().any(Deferred::is_fence)
    }

    /// Queues the deferred `wait` answers for which `passed(session, seq)` holds, and
    /// lifts the fences passed.
    pub fn release_deferred(&mut self, passed: impl Fn(&str, u64) -> bool) {
        let mut i = 0;
        while i < self.deferred.len() {
            if passed(&self.deferred[i].session, self.deferred[i].seq) {
                let d = self.deferred.remove(i);
                if !d.is_fence() {
                    self.outbox.push(&d.line);
                    self.waiting = self.waiting.saturating_sub(1);
                }
            } else {
                i += 1;
            }
        }
    }

    /// Writes what the socket accepts, at most `per_write` bytes per system call (see
    /// [`Outbox::flush_to`]); notes when it accepts no more.
    pub fn write_out(&mut self, per_write: usize) -> io::Result<()> {
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(());
        }
        let before = self.outbox.len();
        self.outbox.flush_to(&mut self.stream, per_write)?;
        if before > 0 && self.outbox.len() == before {
            self.fruitless = self.fruitless.saturating_add(1);
            self.skip = (1u32 << self.fruitless.min(31)).min(MAX_SKIP) - 1;
        } else {
            self.fruitless = 0;
        }
        Ok(())
    }

    /// Whether its socket took nothing lately (writes are being skipped).
    pub fn stalled(&self) -> bool {
        self.skip > 0
    }

    /// The socket said it takes bytes again.
    pub fn unblock(&mut self) {
        self.skip = 0;
        self.fruitless = 0;
    }

    /// Whether the connection has nothing left to do once its subscriptions are gone.
    pub fn finished(&self) -> bool {
        self.eof
            && self.pending.is_empty()
            && !self.holds_unsplit()
            && self.outbox.is_empty()
            && self.waiting == 0
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let unsplit = self.unsplit.len() - self.split_at;
        self.held.sub(self.lines.buffered() + unsplit);
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn client_reading(bytes: &[u8], max_line: usize) -> Client {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        theirs.write_all(bytes).unwrap();
        ours.set_nonblocking(true).unwrap();
        let held = Held::default();
        let mut client = Client::new(UnixStream::from_std(ours), max_line, 1 << 20, held);
        let mut buf = [0u8; 4096];
        assert_eq!(client.receive(&mut buf), Received::Bytes(bytes.len()));
        client
    }

    #[test]
    fn lines_come_out_one_at_a_time_in_order_with_refusals_in_place() {
        let mut c = client_reading(b"a\n0123456789\nb\n\ntail", 8);
        assert_eq!(c.next_line(), Some(Ok(b"a".to_vec())));
        assert_eq!(c.next_line(), Some(Err(LineTooLong { limit: 8 })));
        assert_eq!(c.next_line(), Some(Ok(b"b".to_vec())));
        assert_eq!(c.next_line(), Some(Ok(Vec::new())));
        assert_eq!(c.next_line(), None);
        assert!(!c.has_pending());
        assert_eq!(c.lines.state(), (&b"tail"[..], false));
    }

    #[test]
    fn an_upgrade_image_holds_the_lines_not_split_yet() {
        let mut c = client_reading(b"a\nb\nc\n{\"op\"", 64);
        assert_eq!(c.next_line(), Some(Ok(b"a".to_vec())));
        let image = c.export(7, |_| None);
        assert_eq!(
            image.pending,
            [
                LineImage::Line(b"b".to_vec()),
                LineImage::Line(b"c".to_vec())
            ]
        );
        assert_eq!(image.partial, b"{\"op\"");
        assert!(!image.skipping);
        // Exporting changes nothing: the lines still come out here.
        assert_eq!(c.next_line(), Some(Ok(b"b".to_vec())));
    }
}
