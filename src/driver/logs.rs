//! Each session's replay log: the recent output frames and events of all its generations,
//! framed once in wire format, which every subscriber is pumped from (see
//! `subscriptions.rs`). A session's log lives until the session is removed.
//!
//! Every record is appended to the state directory's output journal before it enters the
//! log (and so before any subscriber can have it), so a restarted daemon replays what
//! its predecessor had read, at the same positions. The logs decide which journal
//! segments are still needed: one is deleted once no log's oldest record lies in it, and
//! when the journal grows past twice what the logs retain, the logs pinning its oldest
//! segment (quiet sessions whose few records are old) are written again at its end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use super::ring::Ring;
use crate::core::{Event, Stream};
use crate::proto::encode;
use crate::store::journal::{Journal, Segment, SEGMENT_BYTES};

/// Default per-session log capacity until a spawn says otherwise.
pub const DEFAULT_LOG_BYTES: usize = 1 << 20;

/// The replay logs of every session, and their copy on disk.
#[derive(Debug, Default)]
pub struct Logs {
    rings: HashMap<Arc<str>, Ring>,
    journal: Option<Journal>,
    /// Sessions by the journal segment of their log's oldest record: the oldest key is
    /// the oldest segment still needed.
    pins: BTreeMap<Segment, HashSet<Arc<str>>>,
    /// Bytes all logs retain, as charged against their capacities.
    retained: u64,
}

impl Logs {
    /// Logs written through to `journal`, starting with what it held for the sessions
    /// `capacity` names (with the bytes of each one's log); the rest of it is deleted.
    pub fn open(mut journal: Journal, capacity: impl Fn(&str) -> Option<usize>) -> Logs {
        let loaded = journal.load(&capacity);
        if loaded.bad > 0 || loaded.skipped > 0 {
            log::warn!(
                "retained output: {} bad segment(s) moved aside, {} record(s) of sessions that are gone dropped",
                loaded.bad,
                loaded.skipped
            );
        }
        let mut logs = Logs {
            journal: Some(journal),
            ..Logs::default()
        };
        for (session, records) in loaded.sessions {
            let cap = capacity(&session).unwrap_or(DEFAULT_LOG_BYTES);
            let ring = Ring::restored(cap, records);
            logs.retained += ring.used() as u64;
            if let Some(seg) = ring.first_seg() {
                logs.pins.entry(seg).or_default().insert(session.clone());
            }
            logs.rings.insert(session, ring);
        }
        logs.collect();
        logs
    }

    fn ring(&mut self, session: &Arc<str>) -> &mut Ring {
        self.rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES))
    }

    /// Runs `change` on a session's log, keeping the pins and byte count in step with
    /// what it evicts.
    fn tracked<R>(&mut self, session: &Arc<str>, change: impl FnOnce(&mut Ring) -> R) -> R {
        let ring = self
            .rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES));
        let (seg_before, used_before) = (ring.first_seg(), ring.used() as u64);
        let result = change(ring);
        let (seg_after, used_after) = (ring.first_seg(), ring.used() as u64);
        self.retained = self.retained + used_after - used_before;
        if seg_before != seg_after {
            self.unpin(seg_before, session);
            if let Some(seg) = seg_after {
                self.pins.entry(seg).or_default().insert(session.clone());
            }
        }
        result
    }

    fn unpin(&mut self, seg: Option<Segment>, session: &str) {
        let Some(seg) = seg else { return };
        if let Some(set) = self.pins.get_mut(&seg) {
            set.remove(session);
            if set.is_empty() {
                self.pins.remove(&seg);
            }
        }
    }

    /// Deletes segments nothing retained lies in; when the journal holds more than about
    /// twice what the logs retain, writes the logs pinning its oldest segment again, so
    /// that it can go.
    fn collect(&mut self) {
        let Some(journal) = &mut self.journal else {
            return;
        };
        let oldest_needed = self.pins.keys().next().copied();
        journal.delete_below(oldest_needed.unwrap_or(Segment::MAX));
        let slack = 2 * self.retained + 2 * SEGMENT_BYTES;
        let Some(oldest) = oldest_needed else { return };
        if journal.disk_bytes() <= slack || Some(oldest) == journal.current() {
            return;
        }
        let sessions: Vec<Arc<str>> = self
            .pins
            .remove(&oldest)
            .map(|s| s.into_iter().collect())
            .unwrap_or_default();
        for session in sessions {
            let Some(ring) = self.rings.get_mut(&session) else {
                continue;
            };
            ring.rewrite(|r| journal.append(r.seq, r.pos, &r.frame));
            if let Some(seg) = ring.first_seg() {
                self.pins.entry(seg).or_default().insert(session);
            }
        }
        let oldest_needed = self.pins.keys().next().copied();
        journal.delete_below(oldest_needed.unwrap_or(Segment::MAX));
    }

    /// The log of `session`, if it has one.
    pub fn get(&self, session: &str) -> Option<&Ring> {
        self.rings.get(session)
    }

    /// The log of `session`, created empty if missing (a subscription to a session that
    /// has not printed anything yet still needs a place to start).
    pub fn get_or_create(&mut self, session: &Arc<str>) -> &Ring {
        self.ring(session)
    }

    /// Sets a session's capacity (a spawn's `buffer`).
    pub fn set_capacity(&mut self, session: &Arc<str>, bytes: usize) {
        self.tracked(session, |ring| ring.set_capacity(bytes));
        self.collect();
    }

    /// Frames `data`, read at `offset` of `gen`'s `stream`, into the session's log (its
    /// journal first); returns the record's sequence number.
    pub fn push_output(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        offset: u64,
        data: &[u8],
    ) -> u64 {
        let ring = self.ring(session);
        let (seq, pos) = (ring.end_seq(), ring.end_pos());
        let mut frame = Vec::new();
        encode::output_frame(session, gen, stream, offset, pos, data, &mut frame);
        let seg = self
            .journal
            .as_mut()
            .and_then(|j| j.append(seq, pos, &frame));
        let seq = self.tracked(session, |ring| {
            ring.push_output(gen, data.len() as u64, frame, seg)
        });
        self.collect();
        seq
    }

    /// Appends an already encoded event line about `gen` to the session's log (its
    /// journal first); returns the record's sequence number.
    pub fn push_event(&mut self, session: &Arc<str>, event: &Event, line: Vec<u8>) -> u64 {
        let ring = self.ring(session);
        let (seq, pos) = (ring.end_seq(), ring.end_pos());
        let seg = self
            .journal
            .as_mut()
            .and_then(|j| j.append(seq, pos, &line));
        let gen = event.gen().unwrap_or(0);
        let seq = self.tracked(session, |ring| ring.push_event(gen, line, seg));
        self.collect();
        seq
    }

    /// Forgets a removed session's log.
    pub fn remove(&mut self, session: &str) {
        if let Some(ring) = self.rings.remove(session) {
            self.retained -= ring.used() as u64;
            self.unpin(ring.first_seg(), session);
            self.collect();
        }
    }

    /// Names of every session with a log.
    pub fn sessions(&self) -> impl Iterator<Item = &Arc<str>> {
        self.rings.keys()
    }
}

/// The daemon's own log line for an event worth one (ends and surprises).
pub fn log_event(event: &Event) {
    match event {
        Event::Exited {
            session,
            gen,
            code,
            cause,
            ..
        } => {
            let code = code.map_or_else(|| "unknown".to_string(), |c| c.to_string());
            log::info!(
                "{session} gen {gen}: exited, code {code} ({})",
                cause.as_str()
            )
        }
        Event::SpawnFailed { session, gen, .. } => log::info!("{session} gen {gen}: spawn failed"),
        Event::Unkillable { session, gen } => {
            log::warn!("{session} gen {gen}: survived SIGKILL; still tracked")
        }
        Event::Spawned { .. } | Event::State { .. } | Event::InputClosed { .. } => {}
    }
}
