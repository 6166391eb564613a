//! What one turn of the loop hands to the next: the sources whose bounded slice left work
//! (serviced again before the loop sleeps, since edge-triggered readiness would not fire
//! again for them, a few per turn: see `backlog.rs`), the output streams parked behind a
//! lossless follower, and the one buffer every read goes through.

use std::sync::Arc;

use mio::Token;

use super::backlog::Backlog;
use super::parked::Parked;

/// One read from a child or a client: large enough to empty a grown pipe buffer in a few
/// calls, small enough that one frame stays well under the protocol's 1 MiB payload limit.
const READ_BUF_BYTES: usize = 256 * 1024;

/// The loop's carry-over between turns.
#[derive(Debug)]
pub struct Turn {
    backlog: Backlog,
    parked: Parked,
    read_buf: Vec<u8>,
}

impl Default for Turn {
    fn default() -> Turn {
        Turn {
            backlog: Backlog::default(),
            parked: Parked::default(),
            read_buf: vec![0; READ_BUF_BYTES],
        }
    }
}

impl Turn {
    /// `token` has work left: it is serviced again before the loop sleeps.
    pub fn again(&mut self, token: Token) {
        self.backlog.push(token);
    }

    /// Whether some source has work left (the poll must not wait).
    pub fn has_work_left(&self) -> bool {
        !self.backlog.is_empty()
    }

    /// The sources with work left to service in this turn (a few, oldest first).
    pub fn take_again(&mut self) -> Vec<Token> {
        self.backlog.take_turn()
    }

    /// Whether a readiness of `token` waits for its turn (a bulk stream) instead of being
    /// serviced now.
    pub fn defers(&mut self, token: Token) -> bool {
        self.backlog.defers(token)
    }

    /// A stream's slice was `bytes` long.
    pub fn sliced(&mut self, token: Token, bytes: usize) {
        self.backlog.sliced(token, bytes);
    }

    /// A stream was found with nothing to read.
    pub fn drained(&mut self, token: Token) {
        self.backlog.drained(token);
    }

    /// A stream ended or its generation went.
    pub fn forget(&mut self, token: Token) {
        self.backlog.forget(token);
    }

    /// The buffer reads go through.
    pub fn read_buf(&mut self) -> &mut [u8] {
        &mut self.read_buf
    }

    /// Whether `gen`'s output is parked (its other streams wait too).
    pub fn holds(&self, gen: u64) -> bool {
        self.parked.holds(gen)
    }

    /// Parks one more stream of a generation already held.
    pub fn park_also(&mut self, gen: u64, token: Token) {
        self.parked.park_also(gen, token);
    }

    /// Parks `gen`'s stream `token`, whose output goes to `session`'s log.
    pub fn park(&mut self, gen: u64, session: &Arc<str>, token: Token) {
        self.parked.park(gen, session, token);
    }

    /// Whether nothing is parked.
    pub fn nothing_parked(&self) -> bool {
        self.parked.is_empty()
    }

    /// Unparks the generations `flows(gen, session)` lets go: their streams are serviced
    /// on the next turn as if they had just become readable. Returns their sessions.
    pub fn unpark(&mut self, flows: impl FnMut(u64, &Arc<str>) -> bool) -> Vec<Arc<str>> {
        let mut sessions = Vec::new();
        for (session, token) in self.parked.release(flows) {
            self.backlog.push(token);
            sessions.push(session);
        }
        sessions
    }
}
