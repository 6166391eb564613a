//! Session replay logs and subscriber cursors: how output and events reach clients without
//! a slow client ever blocking the loop, a child, or anyone else.
//!
//! Every output frame and event is appended to its session's [`Ring`] once; each subscriber
//! holds a [`Cursor`] into it and is *pumped*: records are copied into its outbox while the
//! outbox has room. A subscriber that stops reading simply stops advancing; when it comes
//! back, it continues from its cursor, or — if the ring moved past it — receives one
//! `dropped {from, to}` naming the output bytes it missed, then continues. Memory per
//! subscriber is its outbox limit; per session, the ring's capacity.

use std::collections::HashMap;
use std::sync::Arc;

use super::outbox::Outbox;
use super::ring::{Lookup, Ring};
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

/// The replay logs of every session.
#[derive(Debug, Default)]
pub struct Logs {
    rings: HashMap<Arc<str>, Ring>,
}

/// Default per-session log capacity until a spawn says otherwise.
pub const DEFAULT_LOG_BYTES: usize = 1 << 20;

impl Logs {
    /// The log of `session`, created empty if missing.
    pub fn ring(&mut self, session: &Arc<str>) -> &mut Ring {
        self.rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES))
    }

    /// The log of `session`, if it has one.
    pub fn get(&self, session: &str) -> Option<&Ring> {
        self.rings.get(session)
    }

    /// Sets a session's capacity (a spawn's `buffer`).
    pub fn set_capacity(&mut self, session: &Arc<str>, bytes: usize) {
        self.ring(session).set_capacity(bytes);
    }

    /// Forgets a removed session's log.
    pub fn remove(&mut self, session: &str) {
        self.rings.remove(session);
    }

    /// Names of every session with a log.
    pub fn sessions(&self) -> impl Iterator<Item = &Arc<str>> {
        self.rings.keys()
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
            ring.push_output(1, 100, frame(100));
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
            ring.push_output(1, 100, frame(100));
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
        ring.push_output(1, 3, b"abc".to_vec());
        ring.push_event(1, b"E".to_vec());
        ring.push_output(2, 3, b"def".to_vec());
        let c = start_cursor(&ring, Replay::Tail(3));
        assert_eq!(c, Cursor { seq: 2, pos: 3 });
        let c = start_cursor(&ring, Replay::Start);
        assert_eq!(c, Cursor { seq: 0, pos: 0 });
        let c = start_cursor(&ring, Replay::Now);
        assert_eq!(c, Cursor { seq: 3, pos: 6 });
    }
}
