//! A client's bounded outgoing byte queue.
//!
//! The loop never blocks on a client: bytes wait here until the socket is writable. The
//! queue has a soft limit — a caller asks [`Outbox::has_room`] before adding optional data
//! (output replay) and stops when it is full, so memory per client stays within the limit
//! plus one frame. Replies to requests are always accepted; requests are read only while
//! [`Outbox::can_take_replies`]: while less than [`REPLY_BYTES`] of bytes of its own (answers,
//! notices) wait, and less than twice the limit in all — so a client that never reads
//! holds at most about `REPLY_BYTES` plus one answer of the daemon's memory beyond the
//! frames it shares with the logs, however much it asks.
//!
//! Frames from a session's replay log are queued by reference ([`Frame`]), not copied, so
//! fanning one frame out to many subscribers costs no memory per subscriber; a vectored
//! write sends several frames per system call.

use std::collections::{HashMap, VecDeque};
use std::io::{self, IoSlice, Write};

use std::sync::Arc;

use super::frame::Frame;
use super::held::Held;
use super::upgrade::state::OutboxPiece;
use crate::store::journal::Segment;

/// Bytes copied for one client (answers, notices: not shared log frames) past which its
/// requests wait to be read until it takes some: enough for a few pages of `list`, small
/// enough that thousands of clients that never read cost little.
pub const REPLY_BYTES: usize = 1 << 20;

/// Most slices handed to one vectored write.
const MAX_SLICES: usize = 32;

/// Small lines are gathered into a private chunk up to this size before a new one starts.
const SMALL_CHUNK: usize = 16 * 1024;

#[derive(Debug)]
enum Chunk {
    Owned(Vec<u8>),
    Shared(Frame),
}

impl Chunk {
    fn bytes(&self) -> &[u8] {
        match self {
            Chunk::Owned(v) => v,
            Chunk::Shared(r) => r,
        }
    }
}

/// Pending bytes for one client.
#[derive(Debug)]
pub struct Outbox {
    chunks: VecDeque<Chunk>,
    /// Bytes of the front chunk already written.
    front_sent: usize,
    pending: usize,
    /// Bytes held in owned chunks (copies made for this client), written or not.
    owned: usize,
    /// Where `owned` is counted with every other connection's.
    held: Held,
    limit: usize,
}

impl Drop for Outbox {
    fn drop(&mut self) {
        self.held.sub(self.owned);
    }
}

impl Outbox {
    /// An empty queue whose soft limit is `limit` bytes, on an account of its own.
    #[cfg(test)]
    pub fn new(limit: usize) -> Self {
        Outbox::counted_in(limit, Held::default())
    }

    /// An empty queue whose soft limit is `limit` bytes, its copies counted in `held`.
    pub fn counted_in(limit: usize, held: Held) -> Self {
        Outbox {
            chunks: VecDeque::new(),
            front_sent: 0,
            pending: 0,
            owned: 0,
            held,
            limit,
        }
    }

    fn own(&mut self, n: usize) {
        self.owned += n;
        self.held.add(n);
    }

    /// Bytes waiting to be written.
    pub fn len(&self) -> usize {
        self.pending
    }

    /// Whether optional data may still be queued.
    pub fn has_room(&self) -> bool {
        self.pending < self.limit
    }

    /// Whether more requests may be read (their answers queued). Optional data stops at
    /// the limit; answers may use as much again, so a subscriber whose queue is full of
    /// output still gets its requests answered, and one that never reads is bounded by
    /// twice the limit — and by its free share once all connections together hold their
    /// budget (see [`Held`]).
    pub fn can_take_replies(&self) -> bool {
        self.pending < self.limit.saturating_mul(2)
            && self.owned < REPLY_BYTES
            && self.held.allows(self.owned)
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.pending == 0
    }

    /// Everything still to be written, in order, for an upgrade image: a shared frame that
    /// `find` names as a log record (session, sequence number) by reference, the rest as
    /// bytes.
    pub fn export(&self, find: impl Fn(&Frame) -> Option<(Arc<str>, u64)>) -> Vec<OutboxPiece> {
        let mut pieces: Vec<OutboxPiece> = Vec::new();
        for (i, chunk) in self.chunks.iter().enumerate() {
            let skip = if i == 0 { self.front_sent } else { 0 };
            if let Chunk::Shared(frame) = chunk {
                if let Some((session, seq)) = find(frame) {
                    pieces.push(OutboxPiece::Record {
                        session: session.to_string(),
                        seq,
                        skip: skip as u64,
                    });
                    continue;
                }
            }
            let bytes = &chunk.bytes()[skip..];
            match pieces.last_mut() {
                Some(OutboxPiece::Bytes(last)) => last.extend_from_slice(bytes),
                _ => pieces.push(OutboxPiece::Bytes(bytes.to_vec())),
            }
        }
        pieces
    }

    /// The queue an upgrade image holds, `resolve` giving each record's frame; a record it
    /// cannot give (the log lost it) is left out and counted in the result.
    pub fn import(
        limit: usize,
        held: Held,
        pieces: Vec<OutboxPiece>,
        resolve: impl Fn(&str, u64) -> Option<Frame>,
    ) -> (Outbox, usize) {
        let mut outbox = Outbox::counted_in(limit, held);
        let mut missing = 0;
        for piece in pieces {
            match piece {
                OutboxPiece::Bytes(b) if b.is_empty() => {}
                OutboxPiece::Bytes(b) => {
                    outbox.pending += b.len();
                    outbox.own(b.len());
                    outbox.chunks.push_back(Chunk::Owned(b));
                }
                OutboxPiece::Record { session, seq, skip } => {
                    let Some(frame) = resolve(&session, seq) else {
                        missing += 1;
                        continue;
                    };
                    let skip = (skip as usize).min(frame.len());
                    if skip > 0 && outbox.chunks.is_empty() {
                        // Partly written before: only the front chunk can be.
                        outbox.push_shared(&frame);
                        outbox.front_sent = skip;
                        outbox.pending -= skip;
                    } else if skip > 0 {
                        outbox.push(&frame[skip..]);
                    } else {
                        outbox.push_shared(&frame);
                    }
                }
            }
        }
        (outbox, missing)
    }

    /// Queues a copy of `bytes` (responses, events).
    pub fn push(&mut self, bytes: &[u8]) {
        self.pending += bytes.len();
        self.own(bytes.len());
        // Append to the last private chunk unless it is the one being written (its
        // written prefix would be kept alive) or already big.
        let partly_sent = self.chunks.len() == 1 && self.front_sent > 0;
        if let Some(Chunk::Owned(last)) = self.chunks.back_mut() {
            if !partly_sent && last.len() + bytes.len() <= SMALL_CHUNK {
                last.extend_from_slice(bytes);
                return;
            }
        }
        self.chunks.push_back(Chunk::Owned(bytes.to_vec()));
    }

    /// Queues a shared frame without copying it.
    pub fn push_shared(&mut self, frame: &Frame) {
        self.pending += frame.len();
        self.chunks.push_back(Chunk::Shared(frame.clone()));
    }

    /// Moves the frames it holds from journal segment `seg` (given up) to the heap, so
    /// that the segment's memory goes now rather than when this client reads them.
    /// `copies` (by offset in the segment) is shared by every outbox detached from one
    /// segment: a frame queued for many clients is copied once.
    pub fn detach(&mut self, seg: Segment, copies: &mut HashMap<usize, Frame>) {
        for chunk in self.chunks.iter_mut() {
            if let Chunk::Shared(frame) = chunk {
                if let (Some(s), Frame::Mapped { start, .. }) = (frame.mapped_in(), &*frame) {
                    if s == seg {
                        let start = *start;
                        *frame = copies
                            .entry(start)
                            .or_insert_with(|| frame.to_heap())
                            .clone();
                    }
                }
            }
        }
    }

    /// Writes as much as `sink` accepts without blocking, handing each write call at most
    /// `per_write` bytes (`usize::MAX`: as much as is queued, up to [`MAX_SLICES`] chunks).
    /// Returns `Ok(())` on WouldBlock or when empty; any other error means the client is
    /// gone.
    pub fn flush_to<W: Write>(&mut self, sink: &mut W, per_write: usize) -> io::Result<()> {
        while self.pending > 0 {
            let mut slices: [IoSlice<'_>; MAX_SLICES] = [IoSlice::new(&[]); MAX_SLICES];
            let mut n = 0;
            let mut room = per_write;
            for (i, chunk) in self.chunks.iter().take(MAX_SLICES).enumerate() {
                let b = chunk.bytes();
                let b = if i == 0 { &b[self.front_sent..] } else { b };
                let b = &b[..b.len().min(room)];
                room -= b.len();
                slices[i] = IoSlice::new(b);
                n += 1;
                if room == 0 {
                    break;
                }
            }
            match sink.write_vectored(&slices[..n]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(written) => self.consume(written),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn consume(&mut self, mut written: usize) {
        self.pending -= written;
        while written > 0 {
            let front_len = self.chunks.front().map_or(0, |c| c.bytes().len());
            let left = front_len - self.front_sent;
            if written >= left {
                written -= left;
                if let Some(Chunk::Owned(v)) = self.chunks.pop_front() {
                    self.owned -= v.len();
                    self.held.sub(v.len());
                }
                self.front_sent = 0;
            } else {
                self.front_sent += written;
                written = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink that accepts `per_call` bytes per call and then says WouldBlock.
    struct Trickle {
        got: Vec<u8>,
        per_call: usize,
        block_after: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls > self.block_after {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = b.len().min(self.per_call);
            self.got.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_writes_keep_order_across_owned_and_shared_chunks() {
        let mut ob = Outbox::new(1 << 20);
        ob.push(b"hello ");
        let shared = Frame::from(b"big world".to_vec());
        ob.push_shared(&shared);
        ob.push(b"!");
        let mut sink = Trickle {
            got: vec![],
            per_call: 4,
            block_after: 2,
            calls: 0,
        };
        ob.flush_to(&mut sink, usize::MAX).unwrap();
        // The default `write_vectored` writes the first slice only.
        assert_eq!(sink.got, b"hello ");
        assert_eq!(ob.len(), 10);
        sink.block_after = usize::MAX;
        ob.flush_to(&mut sink, usize::MAX).unwrap();
        assert_eq!(sink.got, b"hello big world!");
        assert!(ob.is_empty());
    }

    #[test]
    fn export_refers_to_known_frames_and_import_gives_the_same_bytes() {
        for cut in 1..24 {
            let mut ob = Outbox::new(1 << 20);
            let a = Frame::from(b"frame-a".to_vec());
            let b = Frame::from(b"frame-b".to_vec());
            ob.push_shared(&a);
            ob.push(b"<reply>");
            ob.push_shared(&b);
            let mut sink = Trickle {
                got: vec![],
                per_call: cut,
                block_after: 1,
                calls: 0,
            };
            ob.flush_to(&mut sink, usize::MAX).unwrap();
            let known =
                |f: &Frame| (f.identity() == a.identity()).then(|| (Arc::<str>::from("s"), 3));
            let pieces = ob.export(known);
            let (mut back, missing) = Outbox::import(1 << 20, Held::default(), pieces, |s, seq| {
                (s == "s" && seq == 3).then(|| a.clone())
            });
            assert_eq!(missing, 0);
            assert_eq!(back.len(), ob.len(), "cut {cut}");
            let mut rest = Trickle {
                got: vec![],
                per_call: usize::MAX,
                block_after: usize::MAX,
                calls: 0,
            };
            back.flush_to(&mut rest, usize::MAX).unwrap();
            sink.got.extend_from_slice(&rest.got);
            assert_eq!(sink.got, b"frame-a<reply>frame-b", "cut {cut}");
        }
    }

    #[test]
    fn past_the_shared_budget_a_queue_takes_answers_only_within_its_free_share() {
        use crate::driver::held::{FREE_SHARE, HELD_BUDGET};
        let held = Held::default();
        let mut others = Outbox::counted_in(4 << 20, held.clone());
        let mut ob = Outbox::counted_in(4 << 20, held.clone());
        let page = vec![b'x'; FREE_SHARE / 4];
        ob.push(&page);
        ob.push(&page);
        others.push(&vec![b'y'; HELD_BUDGET - held.total()]);
        // Its own half share: still answered.
        assert!(ob.can_take_replies());
        while ob.owned < FREE_SHARE {
            ob.push(&page);
        }
        assert!(!ob.can_take_replies());
        // The others' queue written (or its client gone) gives the room back.
        drop(others);
        assert_eq!(held.total(), FREE_SHARE);
        assert!(ob.can_take_replies());
    }

    #[test]
    fn answers_waiting_stop_requests_long_before_twice_the_limit() {
        let mut ob = Outbox::new(4 << 20);
        let page = vec![b'x'; 256 << 10];
        let mut n = 0;
        while ob.can_take_replies() {
            ob.push(&page);
            n += 1;
        }
        assert_eq!(
            n,
            REPLY_BYTES / page.len(),
            "requests wait at {REPLY_BYTES} bytes"
        );
        // Shared frames (what the logs hold anyway) do not count toward it.
        let mut ob = Outbox::new(4 << 20);
        ob.push_shared(&Frame::from(vec![b'y'; 3 << 20]));
        assert!(ob.can_take_replies());
        // Written answers give the room back.
        let mut ob = Outbox::new(4 << 20);
        ob.push(&page);
        ob.push(&page);
        ob.push(&page);
        ob.push(&page);
        assert!(!ob.can_take_replies());
        let mut sink = Trickle {
            got: vec![],
            per_call: usize::MAX,
            block_after: usize::MAX,
            calls: 0,
        };
        ob.flush_to(&mut sink, usize::MAX).unwrap();
        assert!(ob.can_take_replies() && ob.is_empty());
    }

    #[test]
    fn each_write_carries_at_most_the_bytes_asked_across_chunks() {
        let mut ob = Outbox::new(1 << 20);
        ob.push_shared(&Frame::from(vec![b'a'; 10]));
        ob.push(b"bcd");
        ob.push_shared(&Frame::from(vec![b'e'; 9]));
        /// Records the length of every write it is handed.
        struct Sizes(Vec<usize>, Vec<u8>);
        impl Write for Sizes {
            fn write(&mut self, b: &[u8]) -> io::Result<usize> {
                self.write_vectored(&[IoSlice::new(b)])
            }
            fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
                let n = bufs.iter().map(|b| b.len()).sum();
                self.0.push(n);
                bufs.iter().for_each(|b| self.1.extend_from_slice(b));
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Sizes(Vec::new(), Vec::new());
        ob.flush_to(&mut sink, 8).unwrap();
        assert_eq!(sink.0, [8, 8, 6]);
        assert_eq!(sink.1, b"aaaaaaaaaabcdeeeeeeeee");
        assert!(ob.is_empty());
    }

    #[test]
    fn room_is_a_soft_limit() {
        let mut ob = Outbox::new(4);
        assert!(ob.has_room());
        ob.push(b"123456");
        assert!(!ob.has_room());
    }

    #[test]
    fn small_pushes_after_a_partial_write_are_not_merged_into_the_written_chunk() {
        let mut ob = Outbox::new(1 << 20);
        ob.push(b"abcdef");
        let mut sink = Trickle {
            got: vec![],
            per_call: 3,
            block_after: 1,
            calls: 0,
        };
        ob.flush_to(&mut sink, usize::MAX).unwrap();
        ob.push(b"gh");
        sink.block_after = usize::MAX;
        ob.flush_to(&mut sink, usize::MAX).unwrap();
        assert_eq!(sink.got, b"abcdefgh");
    }
}
