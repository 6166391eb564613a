//! Who has work left, and who is bulk: the loop's fairness between sources.
//!
//! Every source gets a bounded slice of work when it is serviced (one read of output, a
//! client's bytes up to a budget). A source with work left after its slice waits here, in
//! arrival order, and the loop services a few of them per turn, after whatever became
//! ready meanwhile — so a child writing flat out never makes the loop late for a keystroke,
//! and sixteen of them share the loop round-robin.
//!
//! An output stream is *bulk* from a large slice until it is found with nothing to read:
//! its readiness is then not serviced when it is reported but queued behind the others,
//! while a stream that trickles (a shell's echo, a prompt) is serviced at once. So a quiet
//! shell that starts a build is bulk from its first large read, and interactive again as
//! soon as it has printed everything.

use std::collections::{HashSet, VecDeque};

use mio::Token;

/// A slice of at least this many bytes makes a stream bulk: an echo, a prompt or a line
/// of text is far smaller, while a terminal's line discipline hands out up to 4 KiB and a
/// pipe up to the read buffer.
pub(super) const BULK_SLICE: usize = 1024;

/// Queued sources serviced per loop turn before the loop looks for new readiness.
pub(super) const SLICES_PER_TURN: usize = 4;

#[derive(Debug, Default)]
pub(super) struct Backlog {
    queue: VecDeque<Token>,
    queued: HashSet<Token>,
    bulk: HashSet<Token>,
}

impl Backlog {
    /// Queues `token` (once) to be serviced in its turn.
    pub(super) fn push(&mut self, token: Token) {
        if self.queued.insert(token) {
            self.queue.push_back(token);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether a readiness of `token` waits for its turn instead of being serviced now:
    /// a bulk stream does (and is queued, once); anything else is serviced at once, even
    /// if it is queued too (its turn then finds little or nothing to do).
    pub(super) fn defers(&mut self, token: Token) -> bool {
        // Asked for every readiness: nothing flooding (the usual case) costs no hashing.
        if !self.bulk.is_empty() && self.bulk.contains(&token) {
            self.push(token);
            return true;
        }
        false
    }

    /// The queued sources to service this turn, oldest first: at most
    /// [`SLICES_PER_TURN`], taken off the queue (a source with work left after its slice
    /// is queued again, at the back).
    pub(super) fn take_turn(&mut self) -> Vec<Token> {
        let n = self.queue.len().min(SLICES_PER_TURN);
        let turn: Vec<Token> = self.queue.drain(..n).collect();
        for t in &turn {
            self.queued.remove(t);
        }
        turn
    }

    /// Records the size of a stream's slice: a large one makes it bulk.
    pub(super) fn sliced(&mut self, token: Token, bytes: usize) {
        if bytes >= BULK_SLICE {
            self.bulk.insert(token);
        }
    }

    /// A stream was found with nothing to read: interactive again.
    pub(super) fn drained(&mut self, token: Token) {
        if !self.bulk.is_empty() {
            self.bulk.remove(&token);
        }
    }

    /// Forgets a source that is gone (its stream ended or its generation went).
    pub(super) fn forget(&mut self, token: Token) {
        self.bulk.remove(&token);
        if self.queued.remove(&token) {
            self.queue.retain(|t| *t != token);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bulk_stream_waits_its_turn_and_a_trickle_does_not() {
        let mut b = Backlog::default();
        let (flood, shell) = (Token(1), Token(2));
        b.sliced(flood, 64 * 1024);
        b.sliced(shell, 1);
        assert!(b.defers(flood));
        assert!(!b.defers(shell));
        assert_eq!(b.take_turn(), vec![flood]);
        // A small slice changes nothing; found empty, it is serviced at once again.
        b.sliced(flood, 10);
        assert!(b.defers(flood));
        b.take_turn();
        b.drained(flood);
        assert!(!b.defers(flood));
    }

    #[test]
    fn queued_sources_share_turns_round_robin() {
        let mut b = Backlog::default();
        for i in 0..6 {
            b.push(Token(i));
        }
        b.push(Token(0)); // queued once
        assert_eq!(b.take_turn(), (0..4).map(Token).collect::<Vec<_>>());
        b.push(Token(0)); // work left: back of the queue
        assert_eq!(b.take_turn(), vec![Token(4), Token(5), Token(0)]);
        assert!(b.is_empty());
    }

    #[test]
    fn a_forgotten_source_leaves_no_trace() {
        let mut b = Backlog::default();
        b.sliced(Token(7), 1 << 20);
        b.push(Token(7));
        b.forget(Token(7));
        assert!(b.is_empty());
        assert!(!b.defers(Token(7)));
    }
}
