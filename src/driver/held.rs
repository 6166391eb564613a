//! The bytes the daemon holds for its connections' own traffic — requests read and not yet
//! handled, unfinished request lines, answers not yet written — counted across all of them.
//!
//! Each connection is bounded on its own (a read of requests, a request line, about 1 MiB
//! of answers), but thousands of connections that send and never read would add those
//! bounds up to gigabytes. Past [`HELD_BUDGET`] in all, a connection already holding
//! [`FREE_SHARE`] may hold no more: its unfinished line is refused (`limit`), its requests
//! wait to be read until it takes its answers, and any read from it takes at most a free
//! share. Below its free share a connection is never held back, so small requests are
//! served whatever the others do.

use std::cell::Cell;
use std::rc::Rc;

/// The most held for all connections together before the larger holders are held back.
pub const HELD_BUDGET: usize = 64 << 20;

/// What each connection may hold whatever the others hold.
pub const FREE_SHARE: usize = 16 << 10;

/// The shared count: one per daemon, a handle in each connection's splitter and outbox.
#[derive(Debug, Clone, Default)]
pub struct Held(Rc<Cell<usize>>);

impl Held {
    /// `n` more bytes held.
    pub fn add(&self, n: usize) {
        self.0.set(self.0.get() + n);
    }

    /// `n` bytes no longer held.
    pub fn sub(&self, n: usize) {
        self.0.set(self.0.get().saturating_sub(n));
    }

    /// Bytes held for all connections.
    pub fn total(&self) -> usize {
        self.0.get()
    }

    /// Whether a connection holding `own` bytes may hold more.
    pub fn allows(&self, own: usize) -> bool {
        own < FREE_SHARE || self.total() < HELD_BUDGET
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_budget_only_the_free_share_is_allowed() {
        let held = Held::default();
        let other = held.clone();
        other.add(HELD_BUDGET - 1);
        assert!(held.allows(FREE_SHARE * 4));
        held.add(1);
        assert!(!held.allows(FREE_SHARE));
        assert!(held.allows(FREE_SHARE - 1));
        other.sub(HELD_BUDGET);
        assert_eq!(held.total(), 0);
        assert!(held.allows(usize::MAX));
    }
}
