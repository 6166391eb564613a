//! Each session's replay log: the recent output frames and events of all its generations,
//! framed once in wire format, which every subscriber is pumped from (see
//! `subscriptions.rs`). A session's log lives until the session is removed.
//!
//! Every record is framed straight into the state directory's output journal, and the log
//! keeps (and subscribers are sent) those very bytes, so it is on disk before anyone can
//! have it and a restarted daemon replays what its predecessor had read, at the same
//! positions. Which journal segments are still needed is `journaled.rs`'s to count; when
//! it says the journal has grown past about twice what the logs retain, the logs with
//! records in its oldest segment (quiet sessions) are written again at its end.

use std::collections::HashMap;
use std::sync::Arc;

use super::frame::Frame;
use super::journaled::Journaled;
use super::ring::Ring;
use crate::core::{Event, Stream};
use crate::proto::framing::{OutputFrame, OUTPUT_TRAILER};
use crate::store::journal::{Journal, Segment};

/// The smallest read [`Logs::read_limit`] asks for: a tinier `buffer` keeps next to
/// nothing anyway (a frame's header alone is about 100 bytes), and reads of a few bytes
/// would cost a system call and a record each.
const MIN_READ: usize = 256;

/// Default per-session log capacity until a spawn says otherwise.
pub const DEFAULT_LOG_BYTES: usize = 1 << 20;

/// The replay logs of every session, and their copy on disk.
#[derive(Debug, Default)]
pub struct Logs {
    rings: HashMap<Arc<str>, Ring>,
    /// The output journal (none if it could not be opened: the logs live in memory only).
    disk: Option<Journaled>,
    /// Bytes all logs retain, as charged against their capacities.
    retained: u64,
}

impl Logs {
    /// Every retained record's frame, by [`Frame::identity`], with its session and
    /// sequence number: what an upgrade image refers to instead of copying queued frames.
    /// Empty without a journal (the next program could not read the records back).
    pub fn frame_index(&self) -> HashMap<(usize, usize), (Arc<str>, u64)> {
        if self.disk.is_none() {
            return HashMap::new();
        }
        self.rings
            .iter()
            .flat_map(|(session, ring)| {
                ring.records()
                    .map(move |r| (r.frame.identity(), (session.clone(), r.seq)))
            })
            .collect()
    }

    /// The frame of record `seq` of `session`, if retained.
    pub fn frame(&self, session: &str, seq: u64) -> Option<Frame> {
        Some(self.rings.get(session)?.record(seq)?.frame.clone())
    }

    /// Logs written through to `journal`, starting with what it held for the sessions
    /// `capacity` names (with the bytes of each one's log); the rest of it is given up.
    pub fn open(mut journal: Journal, capacity: impl Fn(&str) -> Option<usize>) -> Logs {
        let loaded = journal.load(&capacity);
        if loaded.bad > 0 || loaded.skipped > 0 {
            log::warn!(
                "retained output: {} bad segment(s) moved aside, {} record(s) of sessions that are gone dropped",
                loaded.bad,
                loaded.skipped
            );
        }
        let mut logs = Logs::default();
        for (session, records) in loaded.sessions {
            let cap = capacity(&session).unwrap_or(DEFAULT_LOG_BYTES);
            let ring = Ring::restored(cap, records);
            logs.retained += ring.used() as u64;
            logs.rings.insert(session, ring);
        }
        let restored = logs.rings.values().flat_map(Ring::segments);
        logs.disk = Some(Journaled::new(journal, restored));
        logs
    }

    fn ring(&mut self, session: &Arc<str>) -> &mut Ring {
        self.rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES))
    }

    /// Runs `change` on a session's log, keeping the byte count and the journal's
    /// accounting in step with what it lets go.
    fn tracked<R>(&mut self, session: &Arc<str>, change: impl FnOnce(&mut Ring) -> R) -> R {
        let ring = self
            .rings
            .entry(session.clone())
            .or_insert_with(|| Ring::new(DEFAULT_LOG_BYTES));
        let used_before = ring.used() as u64;
        let result = change(ring);
        self.retained = self.retained + ring.used() as u64 - used_before;
        if let Some(disk) = &mut self.disk {
            for seg in ring.take_evicted() {
                disk.forget(seg);
            }
        }
        result
    }

    /// When the journal has grown past about twice what the logs retain, writes again the
    /// logs with records in its oldest segment still needed, so that it can go. One
    /// segment per call: the work stays bounded.
    fn compact(&mut self) {
        let Some(disk) = &mut self.disk else {
            return;
        };
        let Some(oldest) = disk.to_compact(self.retained) else {
            return;
        };
        for ring in self.rings.values_mut() {
            if ring.first_seg().is_some_and(|s| s <= oldest) {
                ring.rewrite(|r| disk.place(r.seq, r.pos, &[&r.frame]));
                for seg in ring.take_evicted() {
                    disk.forget(seg);
                }
            }
        }
    }

    /// Journal segments given up since the last call while frames in them were still
    /// queued for clients (see [`Clients::detach_frames`](super::clients::Clients::detach_frames)).
    pub fn take_released(&mut self) -> Vec<Segment> {
        self.disk
            .as_mut()
            .map(Journaled::take_released)
            .unwrap_or_default()
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

    /// Where `gen`'s `stream` ended in `session`'s retained output (see
    /// [`Ring::stream_end`]).
    pub fn stream_end(&self, session: &str, gen: u64, stream: Stream) -> Option<u64> {
        self.rings.get(session)?.stream_end(gen, stream)
    }

    /// Raises a session's capacity to at least `bytes` (what a lossless follower needs;
    /// creating its log if missing). The next spawn's `buffer` sets it again.
    pub fn ensure_capacity(&mut self, session: &Arc<str>, bytes: usize) {
        if self.ring(session).capacity() < bytes {
            self.set_capacity(session, bytes);
        }
    }

    /// Whether `session` has a log yet.
    pub fn has(&self, session: &str) -> bool {
        self.rings.contains_key(session)
    }

    /// The most output bytes one read of a generation of `session` may take, so that a
    /// whole read fits in its log beside an event: half the log's capacity while that is
    /// smaller than a read would be (a `buffer` below one read keeps the tail of what a
    /// long write sent, in several records, rather than one record too large to stay
    /// once anything follows it). `None`: no bound (no log, or one that replays nothing).
    pub fn read_limit(&self, session: &str) -> Option<usize> {
        self.rings
            .get(session)
            .filter(|ring| ring.replays())
            .map(|ring| (ring.capacity() / 2).max(MIN_READ))
    }

    /// Sets a session's capacity.
    pub fn set_capacity(&mut self, session: &Arc<str>, bytes: usize) {
        self.tracked(session, |ring| ring.set_capacity(bytes));
    }

    /// Says whether a session's log is replayed to a new subscription (creating the log if
    /// missing): not for a `buffer` of 0, whatever capacity it was opened with.
    pub fn set_replays(&mut self, session: &Arc<str>, replays: bool) {
        self.tracked(session, |ring| ring.set_replays(replays));
    }

    /// Sets a session's capacity to its `buffer`, of which 0 also means that nothing is
    /// replayed to a new subscription (see [`Ring::set_replays`]).
    pub fn set_buffer(&mut self, session: &Arc<str>, bytes: usize) {
        self.tracked(session, |ring| {
            ring.set_capacity(bytes);
            ring.set_replays(bytes > 0);
        });
    }

    /// Frames `data`, read at `offset` of `gen`'s `stream`, into the session's log (into
    /// its journal, whose bytes the log then shares); returns the record's sequence number.
    pub fn push_output(
        &mut self,
        session: &Arc<str>,
        gen: u64,
        stream: Stream,
        offset: u64,
        data: &[u8],
        t_unix_ms: u64,
    ) -> u64 {
        let ring = self.ring(session);
        let (seq, pos) = (ring.end_seq(), ring.end_pos());
        let header = OutputFrame {
            session: session.as_ref().into(),
            gen,
            stream,
            offset,
            pos,
            t: Some(t_unix_ms),
            data: data.into(),
        };
        let mut line = Vec::with_capacity(160);
        header.write_header(&mut line);
        let parts: [&[u8]; 3] = [&line, data, OUTPUT_TRAILER];
        let (frame, seg) = self.place(seq, pos, &parts);
        let seq = self.tracked(session, |ring| {
            ring.push_output(gen, data.len() as u64, frame, seg)
        });
        self.compact();
        seq
    }

    /// Appends an already encoded event line about `gen` to the session's log (its
    /// journal first); returns the record's sequence number.
    pub fn push_event(&mut self, session: &Arc<str>, event: &Event, line: Vec<u8>) -> u64 {
        let ring = self.ring(session);
        let (seq, pos) = (ring.end_seq(), ring.end_pos());
        let (frame, seg) = self.place(seq, pos, &[&line]);
        let gen = event.gen().unwrap_or(0);
        let seq = self.tracked(session, |ring| ring.push_event(gen, frame, seg));
        self.compact();
        seq
    }

    /// Writes a frame (`parts` joined) to the journal, or to the heap if it cannot take it.
    fn place(&mut self, seq: u64, pos: u64, parts: &[&[u8]]) -> (Frame, Option<Segment>) {
        match self.disk.as_mut().and_then(|d| d.place(seq, pos, parts)) {
            Some(placed) => {
                let seg = placed.map.seg();
                (Frame::from(placed), Some(seg))
            }
            None => (Frame::from(parts.concat()), None),
        }
    }

    /// Forgets a removed session's log.
    pub fn remove(&mut self, session: &str) {
        if let Some(ring) = self.rings.remove(session) {
            self.retained -= ring.used() as u64;
            if let Some(disk) = &mut self.disk {
                for seg in ring.segments() {
                    disk.forget(seg);
                }
            }
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
        Event::ReadyFailed {
            session,
            gen,
            reason,
        } => log::warn!("{session} gen {gen}: readiness failed: {reason}"),
        Event::Unhealthy {
            session,
            gen,
            failures,
        } => log::warn!(
            "{session} gen {gen}: unhealthy ({failures} failed liveness probes); stopping it"
        ),
        Event::Spawned { .. }
        | Event::State { .. }
        | Event::InputClosed { .. }
        | Event::Ready { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Stream;
    use crate::store::journal::{Journal, MAX_SPARES, SEGMENT_FILE_BYTES};
    use crate::store::Store;
    use crate::testkit::scratch::ScratchDir;

    fn open(dir: &ScratchDir) -> Logs {
        let journal = Journal::open(&Store::open(dir).unwrap()).unwrap();
        Logs::open(journal, |_| Some(DEFAULT_LOG_BYTES))
    }

    fn segment_files(dir: &ScratchDir) -> usize {
        std::fs::read_dir(dir.join("output")).unwrap().count()
    }

    /// Quiet sessions leave a line each in segment after segment while another floods:
    /// every segment would stay for one line, but the journal keeps to about twice what
    /// the logs retain, and every line is still there after a restart.
    #[test]
    fn quiet_logs_are_written_again_so_the_journal_stays_bounded() {
        let dir = ScratchDir::new("logs-compact");
        let mut logs = open(&dir);
        let flood: Arc<str> = Arc::from("flood");
        let chunk = vec![b'x'; 256 << 10];
        let mut offset = 0;
        for i in 0..40 {
            let quiet: Arc<str> = Arc::from(format!("quiet{i}"));
            logs.push_output(
                &quiet,
                1,
                Stream::Stdout,
                0,
                format!("line {i}\n").as_bytes(),
                0,
            );
            for _ in 0..32 {
                logs.push_output(&flood, 2, Stream::Stdout, offset, &chunk, 0);
                offset += chunk.len() as u64;
            }
            // About 1 MiB retained: the flood's log, and forty one-line logs.
            let most = 2 * (2 << 20) + (3 + MAX_SPARES) * SEGMENT_FILE_BYTES;
            assert!(
                segment_files(&dir) * SEGMENT_FILE_BYTES <= most,
                "{} segment files after {i} rounds",
                segment_files(&dir)
            );
        }
        drop(logs);
        let logs = open(&dir);
        for i in 0..40 {
            let ring = logs.get(&format!("quiet{i}")).expect("its log came back");
            assert_eq!(ring.end_pos(), format!("line {i}\n").len() as u64);
        }
        assert_eq!(logs.get("flood").unwrap().end_pos(), offset);
    }

    /// After a restart every retained frame is the journal's bytes (its mapping), as
    /// before it, not a copy on the heap; a segment read back that is given up while a
    /// frame of it is still held (queued for a client) is released, so that the frame is
    /// copied out and the segment's memory goes.
    #[test]
    fn restored_frames_are_mapped_and_their_segments_released() {
        let dir = ScratchDir::new("logs-mapped");
        let mut logs = open(&dir);
        let session: Arc<str> = Arc::from("s");
        let mut offset = 0;
        for i in 0..10 {
            let line = format!("line {i}\n");
            logs.push_output(&session, 1, Stream::Stdout, offset, line.as_bytes(), 0);
            offset += line.len() as u64;
        }
        let frames = |logs: &Logs| -> Vec<Vec<u8>> {
            logs.get("s")
                .unwrap()
                .records()
                .map(|r| r.frame.to_vec())
                .collect()
        };
        let before = frames(&logs);
        drop(logs);

        let mut logs = open(&dir);
        assert_eq!(frames(&logs), before);
        let ring = logs.get("s").unwrap();
        for r in ring.records() {
            assert!(matches!(r.frame, Frame::Mapped { .. }), "{:?}", r.frame);
            assert_eq!(r.frame.mapped_in(), r.seg);
        }
        let seg = ring.first_seg().unwrap();
        let held = logs.frame("s", ring.first_seq()).unwrap();
        // Output written after the restart goes to a new segment; the old one's records
        // are all evicted.
        logs.set_capacity(&session, 0);
        logs.push_output(&session, 2, Stream::Stdout, offset, &[b'x'; 4096], 0);
        assert_eq!(logs.take_released(), [seg]);
        assert_eq!(held.to_vec(), before[0]);
    }
}
