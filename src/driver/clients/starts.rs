//! Where a session's log was when a connection's `spawn` or `restart` of it had been
//! served, so that a subscription written right behind it follows the new generation from
//! its `spawned` event on however the two lines reach the daemon.
//!
//! A client writing the two lines with two writes (or a kernel handing them over in two
//! reads), or a slice ending at its bounds between them, can have the first served alone:
//! the start completes, and the `spawned` event (and the first output) is in the log
//! before the subscription is read.
//! Started "now", that subscription would then see the generation's output without its
//! start. The mark says where "now" was for the request right behind the start.

use super::Clients;
use crate::driver::logs::Logs;
use crate::driver::ring::Ring;
use crate::driver::subscriptions::Cursor;

/// The end of a session's log once a connection's `spawn` or `restart` of it was served
/// (its own records in, such as `state` `starting`; the start not completed yet).
#[derive(Debug, Clone)]
pub struct StartMark {
    session: String,
    /// The log's end then: every record of the new generation comes at or after it.
    cursor: Cursor,
}

impl StartMark {
    /// Where a subscription to `session` (`ring` its log) that started "now" right behind
    /// this start begins: at the mark, if it is about that session and still names a
    /// place in that log (a log removed and made again since may be shorter: then now).
    pub fn start_in(&self, session: &str, ring: &Ring) -> Option<Cursor> {
        let c = self.cursor;
        (self.session == session && c.seq <= ring.end_seq() && c.pos <= ring.end_pos()).then_some(c)
    }
}

impl Clients {
    /// Notes that `id`'s request just served (its actions run) starts a generation of
    /// `session`: its next request is handed where the log ends now, where a subscription
    /// served right behind it starts, in this slice or a later one (see
    /// [`Clients::next_request`]).
    pub fn mark_start(&mut self, id: u64, session: &str, logs: &Logs) {
        if !self.table.contains_key(&id) {
            return;
        }
        // A session without a log yet: its first record will be the first of its log.
        let cursor = logs
            .get(session)
            .map_or(Cursor { seq: 0, pos: 0 }, |ring| Cursor {
                seq: ring.end_seq(),
                pos: ring.end_pos(),
            });
        let session = session.to_string();
        self.starts.insert(id, StartMark { session, cursor });
    }

    /// The mark of the start `id`'s previous request made, if it made one: taken as its
    /// next line is, whatever that line is, so only the request right behind a start has it.
    pub(super) fn take_start(&mut self, id: u64) -> Option<StartMark> {
        if self.starts.is_empty() {
            return None;
        }
        self.starts.remove(&id)
    }
}
