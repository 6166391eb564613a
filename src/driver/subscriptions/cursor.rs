//! A follower's position in a session's log: where a new subscription starts, and
//! pumping records from there into its outbox — or one `dropped` naming what the log no
//! longer holds.

use crate::driver::outbox::Outbox;
use crate::driver::ring::{Lookup, Ring};
use crate::proto::encode;
use crate::proto::request::Replay;

/// A subscriber's position in one session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    /// Next record to deliver.
    pub seq: u64,
    /// Session output position delivered so far (for `dropped` ranges).
    pub pos: u64,
}

/// Where a new subscription to `ring` starts.
pub fn start_cursor(ring: &Ring, replay: Replay) -> Cursor {
    if !ring.replays() {
        // `buffer: 0`: whatever the log keeps is not replayed. A position before the end
        // is reported gone (one `dropped`, from the first pump), as an evicted one is.
        let (seq, end) = (ring.end_seq(), ring.end_pos());
        let pos = match replay {
            Replay::Pos(p) => p.min(end),
            _ => end,
        };
        return Cursor { seq, pos };
    }
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
        Replay::Pos(p) if p < pos && ring.first_seq() > 0 && seq == ring.first_seq() => Cursor {
            seq: ring.first_seq() - 1,
            pos: p,
        },
        // Asked for bytes between the newest record and the end (positions a restarted
        // daemon went on past, lost with its predecessor): the first pump reports
        // `dropped {from: p, ..}` up to the next record or the end.
        Replay::Pos(p) if p < pos => Cursor { seq, pos: p },
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
                if r.pos > cursor.pos {
                    // Bytes between where the follower is and the record it is given are
                    // not in the log (it was opened smaller than the position assumed,
                    // or replays nothing): said, never skipped silently.
                    let mut line = Vec::with_capacity(96);
                    encode::dropped(session, cursor.pos, r.pos, &mut line);
                    outbox.push(&line);
                    if ring.replays() {
                        log::warn!(
                            "subscriber of {session}: dropped {}..{} missing from the log",
                            cursor.pos,
                            r.pos
                        );
                    }
                }
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
            Lookup::End if cursor.pos < ring.end_pos() => {
                // Started past the records it is not given (a session that replays
                // nothing): what it asked for is gone, and said so.
                let mut line = Vec::with_capacity(96);
                encode::dropped(session, cursor.pos, ring.end_pos(), &mut line);
                outbox.push(&line);
                cursor.pos = ring.end_pos();
            }
            Lookup::End => return true,
        }
    }
    // Not at the end while a `dropped` is still owed (a cursor started past what a log
    // that replays nothing keeps): pumped again when there is room, before what follows.
    cursor.seq >= ring.end_seq() && cursor.pos >= ring.end_pos()
}
