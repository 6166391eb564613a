//! Subscriptions: which client follows which session's log, and how far it got.
//!
//! Every output frame and event is appended to its session's log once; each subscriber
//! holds a [`Cursor`] into it and is *pumped*: records are copied into its outbox while the
//! outbox has room. A subscriber that stops reading simply stops advancing; when it comes
//! back, it continues from its cursor, or — if the log moved past it — receives one
//! `dropped {from, to}` naming the output bytes it missed, then continues. Memory per
//! subscriber is its outbox limit; per session, the log's capacity.
//!
//! [`Subscriptions`] is the one place cursors are held: by session, then client, so that
//! delivering a record touches only that session's subscribers. A lossless subscriber
//! (see `pacers.rs`) is never let behind the log: the daemon asks
//! [`Subscriptions::holds_back`] before reading more of the session's output.
//!
//! A cursor and the pumping are in `cursor.rs`; holding output back for lossless
//! followers in `lossless.rs`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

mod cursor;
mod lossless;

use super::outbox::Outbox;
use super::pacers::Pacers;
use super::ring::Ring;
use crate::proto::request::{Lossless, Replay};

pub use cursor::{cursor_at, pump, start_cursor, Cursor};

/// One session's followers and their cursors. A session rarely has more than a few, so
/// a short vector beats a map, in memory above all (one per session).
#[derive(Debug, Default)]
struct Followers(Vec<(u64, Cursor)>);

impl Followers {
    fn get(&self, client: u64) -> Option<&Cursor> {
        self.0
            .iter()
            .find(|(c, _)| *c == client)
            .map(|(_, cur)| cur)
    }

    fn get_mut(&mut self, client: u64) -> Option<&mut Cursor> {
        self.0
            .iter_mut()
            .find(|(c, _)| *c == client)
            .map(|(_, cur)| cur)
    }

    /// Adds `client` unless it is there; whether it was added.
    fn add(&mut self, client: u64, cursor: Cursor) -> bool {
        if self.get(client).is_some() {
            return false;
        }
        self.0.push((client, cursor));
        true
    }

    /// Removes `client`; whether it was there.
    fn remove(&mut self, client: u64) -> bool {
        let before = self.0.len();
        self.0.retain(|(c, _)| *c != client);
        self.0.len() != before
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn clients(&self) -> impl Iterator<Item = u64> + '_ {
        self.0.iter().map(|(c, _)| *c)
    }
}

/// A subscription's terms, as requested: where it starts, and whether it is lossless.
#[derive(Debug, Clone, Copy)]
pub struct Terms {
    /// Where it starts on each session it follows now.
    pub replay: Replay,
    /// `Some` for a lossless subscription.
    pub lossless: Option<Lossless>,
}

/// One session a client follows, for an upgrade image: its cursor, whether it fell
/// behind, and its lossless terms if it is lossless.
pub type FollowedSession = (Arc<str>, Cursor, bool, Option<Lossless>);

/// What one client follows, for an upgrade image: each session, and how it starts on new
/// sessions if it follows all (and whether losslessly).
pub type Followed = (Vec<FollowedSession>, Option<Replay>, Option<Lossless>);

/// Every subscription of every client.
#[derive(Debug, Default)]
pub struct Subscriptions {
    /// Session → subscriber → its cursor.
    cursors: HashMap<Arc<str>, Followers>,
    /// Subscribers to every session, present and future, with how they start on the
    /// sessions that existed when they subscribed.
    all: HashMap<u64, Replay>,
    /// Per client, the sessions whose log it has not caught up with (its queue was full):
    /// the only ones refilled when its queue drains, so a subscriber to many quiet
    /// sessions costs nothing per write.
    behind: HashMap<u64, HashSet<Arc<str>>>,
    /// Per client, how many sessions it follows (so closing a client that follows none
    /// costs nothing).
    count: HashMap<u64, usize>,
    /// The lossless followers of each session.
    pacers: Pacers,
    /// Subscribers to every session that follow each one losslessly.
    all_lossless: HashMap<u64, Lossless>,
}

impl Subscriptions {
    /// What `client` follows, for an upgrade image: each session with its cursor and
    /// whether it fell behind, and how it starts on new sessions if it follows all.
    pub fn export_client(&self, client: u64) -> Followed {
        let behind = self.behind.get(&client);
        let mut cursors: Vec<FollowedSession> = self
            .cursors
            .iter()
            .filter_map(|(session, f)| {
                let lagging = behind.is_some_and(|b| b.contains(session));
                let lossless = self.pacers.terms(client, session);
                f.get(client)
                    .map(|c| (session.clone(), *c, lagging, lossless))
            })
            .collect();
        cursors.sort_by(|a, b| a.0.cmp(&b.0));
        (
            cursors,
            self.all.get(&client).copied(),
            self.all_lossless.get(&client).copied(),
        )
    }

    /// Restores what [`export_client`](Self::export_client) gave.
    pub fn import_client(
        &mut self,
        client: u64,
        cursors: Vec<FollowedSession>,
        all: Option<Replay>,
        all_lossless: Option<Lossless>,
    ) {
        for (session, cursor, lagging, lossless) in cursors {
            self.add(client, &session, cursor, lossless);
            if lagging {
                self.fall_behind(client, &session);
            }
        }
        if let Some(replay) = all {
            self.add_all(client, replay, all_lossless);
        }
    }

    /// Starts `client` on `session` at `cursor`, unless it already follows it (then it
    /// keeps its position). Either way the subscription takes these terms: lossless with
    /// them, or ordinary with `None`. Whether it started following the session now.
    pub fn add(
        &mut self,
        client: u64,
        session: &Arc<str>,
        cursor: Cursor,
        lossless: Option<Lossless>,
    ) -> bool {
        let new = self
            .cursors
            .entry(session.clone())
            .or_default()
            .add(client, cursor);
        if new {
            *self.count.entry(client).or_default() += 1;
        }
        match lossless {
            Some(terms) => self.pacers.add(client, session, terms),
            None => self.pacers.remove(client, session),
        }
        new
    }

    /// Makes `client` follow every session, present and future, losslessly or not. One
    /// that already did keeps where it started and takes the new terms for sessions met
    /// from now on.
    pub fn add_all(&mut self, client: u64, replay: Replay, lossless: Option<Lossless>) {
        self.all.entry(client).or_insert(replay);
        match lossless {
            Some(terms) => self.all_lossless.insert(client, terms),
            None => self.all_lossless.remove(&client),
        };
    }

    /// Whether `client` follows any session, or every session.
    pub fn follows_anything(&self, client: u64) -> bool {
        self.all.contains_key(&client) || self.count.get(&client).is_some_and(|n| *n > 0)
    }

    /// Whether `client` follows every session, present and future.
    pub fn follows_all(&self, client: u64) -> bool {
        self.all.contains_key(&client)
    }

    /// Whether `client` follows `session` by name (or met it following all).
    pub fn follows(&self, client: u64, session: &str) -> bool {
        self.cursors
            .get(session)
            .is_some_and(|subs| subs.get(client).is_some())
    }

    /// Stops `client` following `session`.
    pub fn remove(&mut self, client: u64, session: &str) {
        let Some(subs) = self.cursors.get_mut(session) else {
            return;
        };
        if subs.remove(client) {
            if let Some(n) = self.count.get_mut(&client) {
                *n -= 1;
                if *n == 0 {
                    self.count.remove(&client);
                }
            }
        }
        if subs.is_empty() {
            self.cursors.remove(session);
        }
        if let Some(b) = self.behind.get_mut(&client) {
            b.remove(session);
        }
        self.pacers.remove(client, session);
    }

    /// Stops every subscription of `client`.
    pub fn remove_client(&mut self, client: u64) {
        self.all.remove(&client);
        self.all_lossless.remove(&client);
        self.pacers.remove_client(client);
        self.behind.remove(&client);
        if self.count.remove(&client).is_some() {
            self.cursors.retain(|_, subs| {
                subs.remove(client);
                !subs.is_empty()
            });
        }
    }

    /// The sessions `client` is behind on.
    pub fn behind(&self, client: u64) -> Vec<Arc<str>> {
        self.behind
            .get(&client)
            .map_or_else(Vec::new, |b| b.iter().cloned().collect())
    }

    /// Whether `client` has been sent everything up to and including record `seq` of
    /// `session` (or does not follow it, so nothing holds a `wait` answer back).
    pub fn passed(&self, client: u64, session: &str, seq: u64) -> bool {
        self.cursors
            .get(session)
            .and_then(|subs| subs.get(client))
            .is_none_or(|c| c.seq > seq)
    }

    /// Whether `client` has records of any followed session still to receive.
    pub fn lagging(&self, client: u64, logs: &super::logs::Logs) -> bool {
        self.cursors.iter().any(|(session, subs)| {
            subs.get(client)
                .is_some_and(|c| logs.get(session).is_some_and(|r| c.seq < r.end_seq()))
        })
    }

    /// The clients following `session` (subscribers to every session included, each
    /// given a cursor at record `seq` if it had none: it meets the session there).
    pub fn followers(&mut self, session: &Arc<str>, ring: &Ring, seq: u64) -> Vec<u64> {
        if !self.all.is_empty() {
            // Called for every record: the session's entry is looked up once, and a
            // subscriber to everything already following it costs one comparison.
            let subs = self.cursors.entry(session.clone()).or_default();
            let meet = cursor_at(ring, seq);
            for &client in self.all.keys() {
                if subs.add(client, meet) {
                    *self.count.entry(client).or_default() += 1;
                    if let Some(terms) = self.all_lossless.get(&client) {
                        self.pacers.add(client, session, *terms);
                    }
                }
            }
        }
        self.cursors
            .get(session)
            .map_or_else(Vec::new, |subs| subs.clients().collect())
    }

    /// The clients following `session`, with how far behind the end of its log each is.
    pub fn cursors_of(&self, session: &str) -> Vec<(u64, Cursor)> {
        self.cursors
            .get(session)
            .map_or_else(Vec::new, |subs| subs.0.clone())
    }

    /// Forgets a removed session: nobody follows it any more.
    pub fn remove_session(&mut self, session: &str) {
        self.pacers.remove_session(session);
        if let Some(subs) = self.cursors.remove(session) {
            for client in subs.clients() {
                if let Some(n) = self.count.get_mut(&client) {
                    *n -= 1;
                    if *n == 0 {
                        self.count.remove(&client);
                    }
                }
                if let Some(b) = self.behind.get_mut(&client) {
                    b.remove(session);
                }
            }
        }
    }

    /// Notes that `client` has records of `session` to catch up on, without touching its
    /// outbox (it is full and its socket blocked).
    pub fn fall_behind(&mut self, client: u64, session: &Arc<str>) {
        let behind = self.behind.entry(client).or_default();
        if !behind.contains(session) {
            behind.insert(session.clone());
        }
    }

    /// Copies `session`'s log into `client`'s outbox as far as it has room, and notes
    /// whether the client is now behind on it.
    pub fn pump(&mut self, client: u64, session: &Arc<str>, ring: &Ring, outbox: &mut Outbox) {
        let Some(cursor) = self
            .cursors
            .get_mut(session)
            .and_then(|subs| subs.get_mut(client))
        else {
            return;
        };
        if pump(session, ring, cursor, outbox) {
            if !self.pacers.is_empty() && self.pacers.paces(session) {
                // A lossless follower may have caught up: held output may flow.
                self.pacers.touch();
            }
            if let Some(b) = self.behind.get_mut(&client) {
                b.remove(session);
                if b.is_empty() {
                    self.behind.remove(&client);
                }
            }
        } else {
            self.behind
                .entry(client)
                .or_default()
                .insert(session.clone());
        }
    }
}

#[cfg(test)]
mod tests;
