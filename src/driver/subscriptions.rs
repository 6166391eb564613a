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

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::outbox::Outbox;
use super::pacers::Pacers;
use super::ring::{Lookup, Ring};
use crate::proto::encode;
use crate::proto::request::{Lossless, Replay};

/// A subscriber's position in one session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// Next record to deliver.
    pub seq: u64,
    /// Session output position delivered so far (for `dropped` ranges).
    pub pos: u64,
}

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

    /// Starts `client` on `session` at `cursor`, unless it already follows it; a
    /// lossless subscription makes (or keeps) it a lossless follower with these terms.
    pub fn add(
        &mut self,
        client: u64,
        session: &Arc<str>,
        cursor: Cursor,
        lossless: Option<Lossless>,
    ) {
        if self
            .cursors
            .entry(session.clone())
            .or_default()
            .add(client, cursor)
        {
            *self.count.entry(client).or_default() += 1;
        }
        if let Some(terms) = lossless {
            self.pacers.add(client, session, terms);
        }
    }

    /// Makes `client` follow every session, present and future (losslessly if asked).
    pub fn add_all(&mut self, client: u64, replay: Replay, lossless: Option<Lossless>) {
        self.all.insert(client, replay);
        if let Some(terms) = lossless {
            self.all_lossless.insert(client, terms);
        }
    }

    /// Whether `client` follows `session` or every session.
    pub fn follows_anything(&self, client: u64) -> bool {
        self.all.contains_key(&client) || self.count.get(&client).is_some_and(|n| *n > 0)
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

    /// When the next lossless follower is due to be demoted.
    pub fn demote_deadline(&self) -> Option<Instant> {
        self.pacers.deadline()
    }

    /// Demotes the lossless followers whose bound ran out at `now`; each (client,
    /// session, output position it was sent up to) is an ordinary follower from now on.
    pub fn demote_due(&mut self, now: Instant) -> Vec<(u64, Arc<str>, u64)> {
        self.pacers
            .demote_due(now)
            .into_iter()
            .map(|(client, session)| {
                let pos = self
                    .cursors
                    .get(&session)
                    .and_then(|s| s.get(client))
                    .map_or(0, |c| c.pos);
                (client, session, pos)
            })
            .collect()
    }
}

/// Where a new subscription to `ring` starts.
pub fn start_cursor(ring: &Ring, replay: Replay) -> Cursor {
    let seq = match replay {
        Replay::Now => ring.end_seq(),
        Replay::Tail(n) => ring.seq_for_tail(n),
        Replay::Pos(p) => ring.seq_for_pos(p),
        Replay::Gen(g) => ring.seq_for_gen(g),
        Replay::Start => ring.first_seq(),
    };
    let Cursor { pos, .. } = cursor_at(ring, seq);
    match replay {
        // Asked for bytes the log no longer holds: start "before" the oldest record, so
        // the first pump reports `dropped {from: p, ..}` instead of skipping silently.
        Replay::Pos(p) if p < pos && ring.first_seq() > 0 => Cursor {
            seq: ring.first_seq() - 1,
            pos: p,
        },
        _ => Cursor { seq, pos },
    }
}

/// A cursor at record `seq` (or at the end of the log).
pub fn cursor_at(ring: &Ring, seq: u64) -> Cursor {
    let pos = match ring.lookup(seq, 0) {
        Lookup::Record(r) => r.pos,
        _ => ring.end_pos(),
    };
    Cursor { seq, pos }
}

/// Copies records from `ring` at `cursor` into `outbox` while it has room. Returns whether
/// the cursor reached the end of the log.
pub fn pump(session: &str, ring: &Ring, cursor: &mut Cursor, outbox: &mut Outbox) -> bool {
    while outbox.has_room() {
        match ring.lookup(cursor.seq, cursor.pos) {
            Lookup::Record(r) => {
                outbox.push_shared(&r.frame);
                cursor.seq = r.seq + 1;
                cursor.pos = r.pos + r.out_len;
            }
            Lookup::Evicted { resume, to } => {
                let mut line = Vec::with_capacity(96);
                encode::dropped(session, cursor.pos, to, &mut line);
                outbox.push(&line);
                log::debug!(
                    "subscriber of {session} fell behind: dropped {}..{to}",
                    cursor.pos
                );
                cursor.seq = resume;
                cursor.pos = to;
            }
            Lookup::End => return true,
        }
    }
    cursor.seq >= ring.end_seq()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(n: usize) -> Vec<u8> {
        vec![b'x'; n]
    }

    #[test]
    fn a_stalled_subscriber_gets_one_dropped_then_resumes() {
        let mut ring = Ring::new(4096);
        let mut cursor = start_cursor(&ring, Replay::Now);
        let mut outbox = Outbox::new(1024);
        for _ in 0..100 {
            ring.push_output(1, 100, frame(100), None);
        }
        // The subscriber had not read anything: the ring moved past it.
        let done = pump("s", &ring, &mut cursor, &mut outbox);
        assert!(!done, "outbox limit stops the pump");
        let mut sink = Vec::new();
        outbox.flush_to(&mut sink).unwrap();
        let text = String::from_utf8_lossy(&sink);
        assert!(
            text.starts_with(r#"{"event":"dropped","session":"s","from":0,"to":"#),
            "{text}"
        );
        // Keep draining until caught up; exactly one dropped in total.
        while !pump("s", &ring, &mut cursor, &mut outbox) {
            outbox.flush_to(&mut sink).unwrap();
        }
        outbox.flush_to(&mut sink).unwrap();
        let text = String::from_utf8_lossy(&sink);
        assert_eq!(text.matches("dropped").count(), 1);
        assert_eq!(cursor.pos, 100 * 100);
        assert_eq!(cursor.seq, ring.end_seq());
    }

    #[test]
    fn replaying_from_an_evicted_position_reports_the_gap() {
        let mut ring = Ring::new(1024);
        for _ in 0..100 {
            ring.push_output(1, 100, frame(100), None);
        }
        let mut cursor = start_cursor(&ring, Replay::Pos(50));
        let mut outbox = Outbox::new(1 << 20);
        pump("s", &ring, &mut cursor, &mut outbox);
        let mut sink = Vec::new();
        outbox.flush_to(&mut sink).unwrap();
        let first_pos = match ring.lookup(ring.first_seq(), 0) {
            Lookup::Record(r) => r.pos,
            other => panic!("{other:?}"),
        };
        let expected = format!(r#"{{"event":"dropped","session":"s","from":50,"to":{first_pos}}}"#);
        assert!(String::from_utf8_lossy(&sink).starts_with(&expected));
    }

    #[test]
    fn replay_positions() {
        let mut ring = Ring::new(1 << 16);
        ring.push_output(1, 3, b"abc".to_vec(), None);
        ring.push_event(1, b"E".to_vec(), None);
        ring.push_output(2, 3, b"def".to_vec(), None);
        let c = start_cursor(&ring, Replay::Tail(3));
        assert_eq!(c, Cursor { seq: 2, pos: 3 });
        let c = start_cursor(&ring, Replay::Start);
        assert_eq!(c, Cursor { seq: 0, pos: 0 });
        let c = start_cursor(&ring, Replay::Now);
        assert_eq!(c, Cursor { seq: 3, pos: 6 });
    }
}
