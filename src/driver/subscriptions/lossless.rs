//! The lossless side of following: output held back while a lossless follower is
//! behind, let go when it catches up, goes, or is demoted (see `pacers.rs`).

use std::sync::Arc;
use std::time::Instant;

use super::Subscriptions;
use crate::driver::ring::Ring;

impl Subscriptions {
    /// Whether a lossless follower of `session` is behind its log (its queue is full):
    /// then the session's output must wait, or the log would move past it.
    pub fn holds_back(&self, session: &str, ring: &Ring) -> bool {
        let Some(subs) = self.cursors.get(session) else {
            return false;
        };
        let end = ring.end_seq();
        self.pacers
            .clients_of(session)
            .any(|c| subs.get(c).is_some_and(|cur| cur.seq < end))
    }

    /// Whether any subscription anywhere is lossless.
    pub fn has_pacers(&self) -> bool {
        !self.pacers.is_empty()
    }

    /// The output of `session` waits from `now` for the lossless followers behind.
    pub fn hold(&mut self, session: &str, ring: &Ring, now: Instant) {
        let end = ring.end_seq();
        let subs = self.cursors.get(session);
        let behind = |c| subs.and_then(|s| s.get(c)).is_some_and(|cur| cur.seq < end);
        self.pacers.holding(session, now, behind);
    }

    /// The output of `session` flows again.
    pub fn release(&mut self, session: &str) {
        self.pacers.released(session);
    }

    /// Whether `client` follows something losslessly (its progress is then noted).
    pub fn is_pacer(&self, client: u64) -> bool {
        !self.pacers.is_empty() && self.pacers.has_client(client)
    }

    /// Whether `session` has lossless followers, or will have (a lossless subscriber to
    /// every session meets it with its first record).
    pub fn paces(&self, session: &str) -> bool {
        self.pacers.paces(session) || !self.all_lossless.is_empty()
    }

    /// `client`'s socket took bytes at `now`.
    pub fn progress(&mut self, client: u64, now: Instant) {
        self.pacers.progress(client, now);
    }

    /// Whether held output may flow again since the last call (a pacer went or caught up).
    pub fn take_moved(&mut self) -> bool {
        self.pacers.take_moved()
    }

    /// Nobody paces `session` any more; its followers stay, as ordinary ones. Returns
    /// each lossless follower it had, with the output position it was sent up to.
    pub fn unpace_session(&mut self, session: &str) -> Vec<(u64, u64)> {
        let was: Vec<u64> = self.pacers.clients_of(session).collect();
        self.pacers.remove_session(session);
        was.into_iter()
            .map(|client| (client, self.sent_up_to(client, session)))
            .collect()
    }

    /// The output position `client` was sent `session`'s output up to.
    fn sent_up_to(&self, client: u64, session: &str) -> u64 {
        self.cursors
            .get(session)
            .and_then(|s| s.get(client))
            .map_or(0, |c| c.pos)
    }

    /// The sessions no lossless follower paces any more since the last call.
    pub fn take_unpaced(&mut self) -> Vec<Arc<str>> {
        let mut v = self.pacers.take_unpaced();
        v.retain(|s| !self.paces(s));
        v
    }

    /// When the next lossless follower is due to be demoted.
    pub fn demote_deadline(&self) -> Option<Instant> {
        self.pacers.deadline()
    }

    /// The clients with a lossless subscription whose bound ran out at `now`.
    pub fn demote_candidates(&self, now: Instant) -> Vec<u64> {
        match self.pacers.deadline() {
            Some(due) if due <= now => self.pacers.due(now),
            _ => Vec::new(),
        }
    }

    /// Demotes the lossless followers whose bound ran out at `now`; each (client,
    /// session, output position it was sent up to) is an ordinary follower from now on.
    pub fn demote_due(&mut self, now: Instant) -> Vec<(u64, Arc<str>, u64)> {
        self.pacers
            .demote_due(now)
            .into_iter()
            .map(|(client, session)| {
                let pos = self.sent_up_to(client, &session);
                (client, session, pos)
            })
            .collect()
    }
}
