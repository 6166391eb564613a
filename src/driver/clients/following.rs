//! Who follows which session, held once (in [`Subscriptions`]): subscribing, bringing
//! each follower up to date as records are appended to a log, and holding a session's
//! output back while a lossless follower is behind (see `pacers.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use mio::Registry;

use super::{Clients, StartMark, LOSSLESS_LOG_BYTES};
use crate::driver::logs::Logs;
use crate::driver::persist::RecordsSaved;
use crate::driver::subscriptions::{start_cursor, Terms};
use crate::proto::encode;
use crate::proto::envelope::RequestId;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::event::Demotion;
use crate::proto::request::{Replay, Target};

/// Events a follower still behind is sent when its session is removed: enough for the
/// ends of its last generations and the removal, few enough to stay cheap (frames shared
/// with the log, not copied).
const LAST_WORDS: usize = 64;

impl Clients {
    /// Subscribes `id` to `sessions` (and, for `all`, to every session created later),
    /// starting each per `terms` (where, and whether losslessly).
    ///
    /// A connection follows a session once: subscribing again to what it follows changes
    /// the subscription's terms (lossless or not, `demote_after`) and keeps its position —
    /// a start option there is ignored, as clients that subscribe again after a
    /// reconnection (the client libraries among them) expect.
    ///
    /// Right behind a `spawn` or `restart` on the connection (`after_start`), "now" on
    /// that session is where its log was once the start had been served (see
    /// `starts.rs`): the subscription follows the new generation from its `spawned` event
    /// on even when the start completed before this request reached the daemon.
    #[allow(clippy::too_many_arguments)]
    pub fn subscribe(
        &mut self,
        id: u64,
        rid: &RequestId,
        sessions: &[Arc<str>],
        all: bool,
        terms: Terms,
        after_start: Option<&StartMark>,
        logs: &mut Logs,
    ) {
        let Terms { replay, lossless } = terms;
        self.send_ok(id, rid);
        if all {
            self.subs.add_all(id, replay, lossless);
        }
        let Some(client) = self.table.get_mut(&id) else {
            return;
        };
        for session in sessions {
            if lossless.is_some() {
                logs.ensure_capacity(session, LOSSLESS_LOG_BYTES);
            }
            let ring = logs.get_or_create(session);
            let start = match (replay, after_start) {
                (Replay::Now, Some(mark)) => mark.start_in(session, ring),
                _ => None,
            };
            let start = start.unwrap_or_else(|| start_cursor(ring, replay));
            let new = self.subs.add(id, session, start, lossless);
            self.subs.pump(id, session, ring, &mut client.outbox);
            // A replay longer than the queue's room: the connection's later answers
            // wait until the rest of it has been queued. Subscribing again replays
            // nothing (it keeps its position): a subscriber merely behind on live output
            // has nothing for its later requests to wait for.
            if let (true, Some(last)) = (new, ring.end_seq().checked_sub(1)) {
                if !self.subs.passed(id, session, last) {
                    client.fence(session.clone(), last);
                }
            }
        }
    }

    /// Stops `id` following `target`.
    ///
    /// What it does not follow is a `bad_request` that changes nothing, as is one session
    /// of a connection following all of them: that session would be met again at its
    /// next record, a silent jump past what it had not been sent.
    pub fn unsubscribe(&mut self, id: u64, rid: &RequestId, target: &Target) {
        let refusal = match target {
            Target::All if !self.subs.follows_anything(id) => {
                Some("this connection follows no session".to_string())
            }
            Target::All => None,
            Target::Session(name) if self.subs.follows_all(id) => Some(format!(
                "this connection follows all sessions, `{name}` among them: unsubscribe from all"
            )),
            Target::Session(name) if !self.subs.follows(id, name) => {
                Some(format!("this connection does not follow session `{name}`"))
            }
            Target::Session(_) => None,
        };
        if let Some(why) = refusal {
            let error = ProtoError::new(ErrorCode::BadRequest, why);
            self.send_error(id, rid, &error);
            return;
        }
        match target {
            Target::All => self.subs.remove_client(id),
            Target::Session(name) => self.subs.remove(id, name),
        }
        self.send_ok(id, rid);
    }

    /// Brings every follower of `session` up to date after record `seq` was appended.
    pub fn deliver(&mut self, session: &Arc<str>, seq: u64, logs: &Logs) {
        let Some(ring) = logs.get(session) else {
            return;
        };
        for id in self.subs.followers(session, ring, seq) {
            if let Some(client) = self.table.get_mut(&id) {
                if client.stalled() && !client.outbox.has_room() {
                    // Nothing can move until its socket drains: just remember the session.
                    self.subs.fall_behind(id, session);
                    continue;
                }
                self.subs.pump(id, session, ring, &mut client.outbox);
                if !client.dirty {
                    client.dirty = true;
                    self.dirty.push(id);
                }
            }
        }
    }

    /// A removed session: followers still behind (a lossless one among them) lose the
    /// rest of its output with its log, and are told so, counted; the latest events they
    /// were not sent yet (at most [`LAST_WORDS`]) still reach them after that — each
    /// recent generation's end and the removal itself — so that nobody following a
    /// session misses how it ended.
    pub fn forget_session(&mut self, session: &str, logs: &Logs) {
        if let Some(ring) = logs.get(session) {
            let end = ring.end_pos();
            let behind: Vec<_> = self
                .subs
                .cursors_of(session)
                .into_iter()
                .filter(|(_, cursor)| cursor.seq < ring.end_seq())
                .collect();
            let from = behind.iter().map(|(_, c)| c.seq).min().unwrap_or(u64::MAX);
            let last = ring.last_events(LAST_WORDS, from);
            for (id, cursor) in behind {
                let Some(c) = self.table.get_mut(&id) else {
                    continue;
                };
                if end > cursor.pos {
                    let mut line = Vec::new();
                    encode::dropped(session, cursor.pos, end, &mut line);
                    c.outbox.push(&line);
                }
                for r in last.iter().filter(|r| r.seq >= cursor.seq) {
                    c.outbox.push_shared(&r.frame);
                }
                self.mark_dirty(id);
            }
        }
        self.subs.remove_session(session);
    }

    /// Journal segments given up while frames in them were still queued: those frames are
    /// copied out, so the segments' memory goes now.
    pub fn detach_frames(&mut self, segments: &[crate::store::journal::Segment]) {
        for &seg in segments {
            let mut copies = HashMap::new();
            for client in self.table.values_mut() {
                client.outbox.detach(seg, &mut copies);
            }
        }
    }

    /// Whether `session`'s output must wait: a lossless follower is behind its log.
    pub fn holds_back(&self, session: &str, logs: &Logs) -> bool {
        // Asked after every read: without a lossless subscriber anywhere, nothing is
        // looked up.
        self.subs.has_pacers()
            && logs
                .get(session)
                .is_some_and(|ring| self.subs.holds_back(session, ring))
    }

    /// `session`'s output waits from `now` for its lossless followers that are behind.
    pub fn hold(&mut self, session: &str, logs: &Logs, now: Instant) {
        if let Some(ring) = logs.get(session) {
            self.subs.hold(session, ring, now);
        }
    }

    /// Whether `session` has lossless followers.
    pub fn paces(&self, session: &str) -> bool {
        self.subs.paces(session)
    }

    /// `session`'s output flows again.
    pub fn release(&mut self, session: &str) {
        self.subs.release(session);
    }

    /// Whether held output may flow again since the last call.
    pub fn take_moved(&mut self) -> bool {
        self.subs.take_moved()
    }

    /// `session`'s lossless followers follow it as ordinary ones from now on, each told
    /// so (`demoted`, after what it was already sent): its removal lets its output flow
    /// at once.
    pub fn unpace_session(&mut self, session: &str) {
        for (id, pos) in self.subs.unpace_session(session) {
            let mut line = Vec::new();
            encode::demoted(session, pos, Demotion::Removing, &mut line);
            self.push(id, &line);
        }
    }

    /// The sessions whose logs were raised for lossless followers that are all gone now.
    pub fn take_unpaced(&mut self) -> Vec<Arc<str>> {
        self.subs.take_unpaced()
    }

    /// When the next lossless follower is due to be demoted.
    pub fn demote_deadline(&self) -> Option<Instant> {
        self.subs.demote_deadline()
    }

    /// Demotes the lossless followers that held output back for their `demote_after`
    /// without taking a byte, and tells each (`demoted`, after what it was already sent).
    ///
    /// Each is first written to: the poll reports room in a socket only once most of its
    /// buffer is free again, so a reader that reads steadily, but less than that per
    /// `demote_after`, takes bytes without the daemon hearing of it (writes to it are kept
    /// small, see [`LOSSLESS_WRITE_BYTES`](super::LOSSLESS_WRITE_BYTES), so that reading a
    /// little frees room). What its socket takes
    /// now starts its clock again (see [`flush`](Self::flush)); only one that took
    /// nothing is demoted. Returns the clients whose reading may resume (as
    /// [`flush`](Self::flush) says).
    pub fn demote_due(
        &mut self,
        registry: &Registry,
        logs: &Logs,
        now: Instant,
        _: RecordsSaved,
    ) -> Vec<u64> {
        let mut resume = Vec::new();
        for id in self.subs.demote_candidates(now) {
            if self.unblock_and_write(registry, id, logs) {
                resume.push(id);
            }
        }
        for (id, session, pos) in self.subs.demote_due(now) {
            log::info!("client {id}: lossless subscription to {session} demoted at byte {pos}: it took nothing for its demote_after");
            let mut line = Vec::new();
            encode::demoted(&session, pos, Demotion::Stalled, &mut line);
            self.push(id, &line);
        }
        resume
    }
}
