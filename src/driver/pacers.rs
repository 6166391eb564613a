//! Lossless followers ("pacers"): the subscribers a session's output waits for.
//!
//! An ordinary subscriber that falls behind the session's log loses the oldest bytes
//! (`dropped`); a lossless one instead makes the daemon stop reading the session's output
//! while it is behind, so that the child blocks on its full pipe as it would writing to
//! a slow reader directly (the parking itself is the daemon's, see `parked.rs`). Here is
//! who paces which session, and the bound that keeps a reader that stopped from holding a
//! session forever: one that has held the output back for its `demote_after` without
//! taking a byte is demoted to an ordinary subscriber, and told so.
//!
//! With several lossless followers the slowest paces the child: the output waits while
//! any of them is behind, and each has its own bound.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::proto::request::Lossless;

/// One lossless follower of a session.
#[derive(Debug, Clone, Copy)]
struct Pacer {
    client: u64,
    terms: Lossless,
    /// Since when it has held the output back without taking anything: set when the
    /// output waits for it, moved on whenever its socket takes bytes, cleared when the
    /// output flows again.
    holding_since: Option<Instant>,
}

/// Every lossless follower, by session.
#[derive(Debug, Default)]
pub struct Pacers {
    by_session: HashMap<Arc<str>, Vec<Pacer>>,
    /// Something happened that may let held output flow again (a pacer went, or caught
    /// up): the daemon looks at what it parked only then.
    moved: bool,
    /// Sessions whose last pacer went since [`Pacers::take_unpaced`]: their logs, raised
    /// for lossless followers, go back to their own size. Each session at most once per
    /// pacer that went, and emptied every turn.
    unpaced: Vec<Arc<str>>,
}

impl Pacers {
    /// Whether no session has a lossless follower (the common case: nothing to do).
    pub fn is_empty(&self) -> bool {
        self.by_session.is_empty()
    }

    /// Makes `client` a lossless follower of `session` (replacing earlier terms). Output
    /// already held is looked at again, so that a newcomer that is behind starts its
    /// clock there too.
    pub fn add(&mut self, client: u64, session: &Arc<str>, terms: Lossless) {
        self.moved = true;
        let pacers = self.by_session.entry(session.clone()).or_default();
        match pacers.iter_mut().find(|p| p.client == client) {
            Some(p) => p.terms = terms,
            None => pacers.push(Pacer {
                client,
                terms,
                holding_since: None,
            }),
        }
    }

    /// `client`'s terms on `session`, if it follows it losslessly.
    pub fn terms(&self, client: u64, session: &str) -> Option<Lossless> {
        self.by_session
            .get(session)?
            .iter()
            .find(|p| p.client == client)
            .map(|p| p.terms)
    }

    /// Whether `client` follows anything losslessly.
    pub fn has_client(&self, client: u64) -> bool {
        self.by_session
            .values()
            .any(|v| v.iter().any(|p| p.client == client))
    }

    /// Whether `session` has lossless followers.
    pub fn paces(&self, session: &str) -> bool {
        self.by_session.contains_key(session)
    }

    /// The lossless followers of `session`.
    pub fn clients_of(&self, session: &str) -> impl Iterator<Item = u64> + '_ {
        self.by_session
            .get(session)
            .into_iter()
            .flatten()
            .map(|p| p.client)
    }

    /// `client` no longer follows `session` losslessly.
    pub fn remove(&mut self, client: u64, session: &str) {
        if let Some(v) = self.by_session.get_mut(session) {
            let before = v.len();
            v.retain(|p| p.client != client);
            self.moved |= v.len() != before;
            if v.is_empty() {
                if let Some((session, _)) = self.by_session.remove_entry(session) {
                    self.unpaced.push(session);
                }
            }
        }
    }

    /// `client` follows nothing losslessly any more.
    pub fn remove_client(&mut self, client: u64) {
        let before = self.by_session.len();
        let mut any = false;
        let unpaced = &mut self.unpaced;
        self.by_session.retain(|session, v| {
            let n = v.len();
            v.retain(|p| p.client != client);
            any |= v.len() != n;
            if v.is_empty() {
                unpaced.push(session.clone());
            }
            !v.is_empty()
        });
        self.moved |= any || self.by_session.len() != before;
    }

    /// Nobody follows `session` any more.
    pub fn remove_session(&mut self, session: &str) {
        self.moved |= self.by_session.remove(session).is_some();
    }

    /// The output of `session` now waits for the followers `behind` names: each that was
    /// not holding it yet starts its clock.
    pub fn holding(&mut self, session: &str, now: Instant, behind: impl Fn(u64) -> bool) {
        for p in self.by_session.get_mut(session).into_iter().flatten() {
            if behind(p.client) && p.holding_since.is_none() {
                p.holding_since = Some(now);
            }
        }
    }

    /// The output of `session` flows again: nobody holds it.
    pub fn released(&mut self, session: &str) {
        for p in self.by_session.get_mut(session).into_iter().flatten() {
            p.holding_since = None;
        }
    }

    /// `client`'s socket took bytes: whatever it holds, it is not stuck, so its clocks
    /// start again; and it may have caught up, so held output is looked at.
    pub fn progress(&mut self, client: u64, now: Instant) {
        for p in self.by_session.values_mut().flatten() {
            if p.client == client {
                if let Some(since) = &mut p.holding_since {
                    *since = now;
                }
                self.moved = true;
            }
        }
    }

    /// Notes that a pacer of some session may have caught up.
    pub fn touch(&mut self) {
        self.moved = true;
    }

    /// Whether something moved since the last call.
    pub fn take_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }

    /// The sessions whose last lossless follower went since the last call (a session
    /// paced again meanwhile is among them: ask [`Pacers::paces`]).
    pub fn take_unpaced(&mut self) -> Vec<Arc<str>> {
        std::mem::take(&mut self.unpaced)
    }

    /// When the next follower is due to be demoted, if one holds output back.
    pub fn deadline(&self) -> Option<Instant> {
        self.by_session
            .values()
            .flatten()
            .filter_map(|p| Some(p.holding_since? + p.terms.demote_after))
            .min()
    }

    /// The clients whose bound ran out at `now`, each once: before they are demoted,
    /// their sockets are asked whether they took anything meanwhile (see
    /// `Clients::demote_due`).
    pub fn due(&self, now: Instant) -> Vec<u64> {
        let mut out: Vec<u64> = self
            .by_session
            .values()
            .flatten()
            .filter(|p| {
                p.holding_since
                    .is_some_and(|since| now >= since + p.terms.demote_after)
            })
            .map(|p| p.client)
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Takes the followers whose bound ran out at `now` off the lossless list: each
    /// (client, session) is an ordinary follower from now on.
    pub fn demote_due(&mut self, now: Instant) -> Vec<(u64, Arc<str>)> {
        let mut out = Vec::new();
        let unpaced = &mut self.unpaced;
        self.by_session.retain(|session, v| {
            v.retain(|p| {
                let due = p
                    .holding_since
                    .is_some_and(|since| now >= since + p.terms.demote_after);
                if due {
                    out.push((p.client, session.clone()));
                }
                !due
            });
            if v.is_empty() {
                unpaced.push(session.clone());
            }
            !v.is_empty()
        });
        if !out.is_empty() {
            self.moved = true;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn terms(ms: u64) -> Lossless {
        Lossless {
            demote_after: Duration::from_millis(ms),
        }
    }

    #[test]
    fn a_follower_that_takes_nothing_is_demoted_after_its_bound() {
        let s: Arc<str> = "s".into();
        let mut p = Pacers::default();
        p.add(1, &s, terms(100));
        p.add(2, &s, terms(500));
        let t0 = Instant::now();
        assert_eq!(p.deadline(), None, "nothing held: nothing due");
        p.holding(&s, t0, |c| c == 1);
        assert_eq!(p.deadline(), Some(t0 + Duration::from_millis(100)));
        // It took something: its clock starts again.
        p.progress(1, t0 + Duration::from_millis(50));
        assert!(p.demote_due(t0 + Duration::from_millis(120)).is_empty());
        let due = p.demote_due(t0 + Duration::from_millis(150));
        assert_eq!(due, vec![(1, s.clone())]);
        assert!(p.take_moved());
        // The other never held anything back: it stays.
        assert_eq!(p.terms(2, "s"), Some(terms(500)));
        assert_eq!(p.terms(1, "s"), None);
    }

    #[test]
    fn released_output_stops_every_clock() {
        let s: Arc<str> = "s".into();
        let mut p = Pacers::default();
        p.add(1, &s, terms(10));
        p.holding(&s, Instant::now(), |_| true);
        p.released(&s);
        assert_eq!(p.deadline(), None);
        p.remove_client(1);
        assert!(p.is_empty());
    }

    #[test]
    fn a_session_is_unpaced_when_its_last_pacer_goes_however_it_goes() {
        let (a, b, c): (Arc<str>, Arc<str>, Arc<str>) = ("a".into(), "b".into(), "c".into());
        let mut p = Pacers::default();
        p.add(1, &a, terms(10));
        p.add(2, &a, terms(10));
        p.add(1, &b, terms(10));
        p.add(3, &c, terms(10));
        p.remove(1, "a");
        assert!(p.take_unpaced().is_empty(), "client 2 still paces a");
        p.remove_client(1);
        assert_eq!(p.take_unpaced(), vec![b.clone()]);
        let t0 = Instant::now();
        p.holding(&c, t0, |_| true);
        p.demote_due(t0 + std::time::Duration::from_millis(10));
        assert_eq!(p.take_unpaced(), vec![c.clone()]);
        p.remove(2, "a");
        assert_eq!(p.take_unpaced(), vec![a.clone()]);
        assert!(p.is_empty() && p.take_unpaced().is_empty());
    }
}
