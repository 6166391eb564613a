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
//!
//! While a log's newest record is not in the journal (it could not be written: a full
//! directory), a position ceiling is reserved for it on disk (`store::positions`), before
//! anyone can be sent the record: a restarted daemon goes on above it, so a position is
//! never handed out twice.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::frame::Frame;
use super::journaled::Journaled;
use super::ring::Ring;
use crate::core::{Event, Stream};
use crate::proto::framing::{OutputFrame, OUTPUT_TRAILER};
use crate::store::journal::{Journal, Segment};
use crate::store::positions::{self, Positions, Prior, MARGIN, RESERVE};

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
    /// Where position ceilings are reserved (none without a journal's directory, or if
    /// its file could not be made).
    positions: Option<Positions>,
    /// The logs whose newest record is not in the journal, with their ceiling on disk.
    reserved: HashMap<Arc<str>, Reserved>,
}

/// A log's position ceiling: no position at or above it was handed out.
#[derive(Debug, Clone, Copy)]
struct Reserved {
    /// Its slot in the file (`None`: none could be written).
    slot: Option<u32>,
    /// The ceiling the slot holds.
    ceiling: u64,
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

    /// Logs written through to `journal`, starting with what it held for `sessions`
    /// (with the bytes of each one's log); the rest of it is given up. `owners` names the
    /// session of each generation known (see [`Journal::load`]).
    ///
    /// Each log's positions go on from the higher of its newest record and the ceiling a
    /// previous daemon reserved for it (see `store::positions`); with no ceilings to go by
    /// (the file missing, or damaged) a [`MARGIN`] above its newest record — unless
    /// `resumed` (an upgrade: the previous program ran until it executed this one, and
    /// set its ceilings to where its logs ended).
    pub fn open(
        mut journal: Journal,
        sessions: &HashMap<Arc<str>, usize>,
        owners: HashMap<u64, Arc<str>>,
        resumed: bool,
    ) -> Logs {
        let loaded = journal.load(|name| sessions.get(name).copied(), owners);
        if loaded.bad > 0 || loaded.skipped > 0 {
            log::warn!(
                "retained output: {} bad segment(s) moved aside, {} record(s) of sessions that are gone dropped",
                loaded.bad,
                loaded.skipped
            );
        }
        let (positions, prior) = Positions::open(&journal.dir, &journal.bad, sessions.len());
        let mut logs = Logs {
            positions,
            ..Logs::default()
        };
        for (session, records) in loaded.sessions {
            let cap = sessions.get(&session).copied().unwrap_or(DEFAULT_LOG_BYTES);
            let ring = Ring::restored(cap, records);
            logs.retained += ring.used() as u64;
            logs.rings.insert(session, ring);
        }
        let on_disk: HashSet<Segment> = journal.segment_numbers().into_iter().collect();
        logs.take_back_positions(sessions, prior, !resumed, |seg| on_disk.contains(&seg));
        let restored = logs.rings.values().flat_map(Ring::segments);
        logs.disk = Some(Journaled::new(journal, restored));
        logs
    }

    /// Raises each log's end to the ceiling a previous daemon reserved for it (or by a
    /// [`MARGIN`], with `margin`, when none is known), and reserves ceilings for the logs
    /// whose end is then not in the journal; frees the slots no longer needed.
    fn take_back_positions(
        &mut self,
        sessions: &HashMap<Arc<str>, usize>,
        prior: Prior,
        margin: bool,
        on_disk: impl Fn(Segment) -> bool,
    ) {
        // A file that is missing was never needed: it is made at the first start of a
        // daemon that keeps one, and a ceiling is only ever written over its slots. One
        // found damaged may have held ceilings that mattered.
        let (mut known, unknown) = match prior {
            Prior::Read(known) => (known, false),
            Prior::Missing => (HashMap::new(), false),
            Prior::Bad => (HashMap::new(), margin),
        };
        let (mut raised, mut backed_again) = (0usize, Vec::new());
        for (name, &cap) in sessions {
            let old = known.remove(&positions::key(name));
            let end = self.rings.get(name).map_or(0, Ring::end_pos);
            let floor = match old {
                Some((_, ceiling)) => ceiling,
                None if unknown => end.saturating_add(MARGIN),
                None => 0,
            };
            if floor > end {
                self.rings
                    .entry(name.clone())
                    .or_insert_with(|| Ring::new(cap))
                    .continue_at(floor);
                raised += 1;
            }
            if let Some((slot, ceiling)) = old {
                let slot = Some(slot);
                self.reserved
                    .insert(name.clone(), Reserved { slot, ceiling });
            }
            if self.rings.get(name).is_some_and(|r| !r.backed(&on_disk)) {
                self.protect(name);
            } else if old.is_some() {
                backed_again.push(name.clone());
            }
        }
        for name in backed_again {
            self.unprotect(&name);
        }
        if let Some(p) = &mut self.positions {
            for (slot, _) in known.into_values() {
                p.clear(slot);
            }
            p.ensure(self.rings.len().max(sessions.len()));
        }
        if raised > 0 {
            let why = if unknown {
                format!("no ceilings could be read: {MARGIN} past their newest records")
            } else {
                "past their newest records, to the ceilings reserved while output could not be written to disk: what was kept in memory only was lost".to_owned()
            };
            log::warn!(
                "retained output: positions of {raised} session(s) go on {why} (subscribers are told `dropped`)"
            );
        }
    }

    /// Reserves a ceiling at least at `session`'s end (whose newest record is not in the
    /// journal), [`RESERVE`] ahead, unless the one it has suffices: one write per
    /// [`RESERVE`] bytes of output.
    fn protect(&mut self, session: &Arc<str>) {
        // Without the file nothing can be reserved: no entry that protects nothing.
        if self.positions.is_none() {
            return;
        }
        let Some(end) = self.rings.get(session).map(Ring::end_pos) else {
            return;
        };
        let r = self.reserved.entry(session.clone()).or_insert(Reserved {
            slot: None,
            ceiling: 0,
        });
        if r.slot.is_some() && r.ceiling >= end {
            return;
        }
        let Some(p) = &mut self.positions else {
            return;
        };
        let (key, ceiling) = (positions::key(session), end.saturating_add(RESERVE));
        let written = match r.slot {
            Some(slot) => p.set(slot, key, ceiling),
            None => {
                r.slot = p.take(key, ceiling);
                r.slot.is_some()
            }
        };
        if written {
            r.ceiling = ceiling;
        }
    }

    /// `session`'s newest record is in the journal again (or the log is gone): its
    /// ceiling is freed.
    fn unprotect(&mut self, session: &str) {
        if let Some(r) = self.reserved.remove(session) {
            if let (Some(slot), Some(p)) = (r.slot, &mut self.positions) {
                p.clear(slot);
            }
        }
    }

    /// After a record of `session` was pushed: a ceiling while its newest record is not
    /// in the journal, none once it is. One comparison when neither changes.
    fn after_push(&mut self, session: &Arc<str>, on_disk: bool) {
        if !on_disk {
            self.protect(session);
        } else if !self.reserved.is_empty() {
            self.unprotect(session);
        }
    }

    /// Sets every reserved ceiling to its log's end, exactly: for a clean exit or an
    /// upgrade, after which the next daemon goes on where the logs ended, with no gap
    /// (what was kept in memory only is still lost: a subscriber is told `dropped`).
    pub fn settle(&mut self) {
        let Some(p) = &mut self.positions else {
            return;
        };
        for (name, r) in &mut self.reserved {
            let (Some(slot), Some(ring)) = (r.slot, self.rings.get(name)) else {
                continue;
            };
            if p.set(slot, positions::key(name), ring.end_pos()) {
                r.ceiling = ring.end_pos();
            }
        }
    }

    /// A session's log, created if missing (see [`ring_in`]).
    fn ring(&mut self, session: &Arc<str>) -> &mut Ring {
        ring_in(&mut self.rings, &mut self.positions, session)
    }

    /// Runs `change` on a session's log, keeping the byte count and the journal's
    /// accounting in step with what it lets go.
    fn tracked<R>(&mut self, session: &Arc<str>, change: impl FnOnce(&mut Ring) -> R) -> R {
        let ring = ring_in(&mut self.rings, &mut self.positions, session);
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
        let mut unwritten = Vec::new();
        for (name, ring) in self.rings.iter_mut() {
            if ring.first_seg().is_some_and(|s| s <= oldest) {
                ring.rewrite(|r| disk.place(r.seq, r.pos, &[&r.frame]));
                for seg in ring.take_evicted() {
                    disk.forget(seg);
                }
                // Its newest record could not be written again: its old copy goes.
                if ring.records().last().is_some_and(|r| r.seg.is_none()) {
                    unwritten.push(name.clone());
                }
            }
        }
        for name in unwritten {
            self.protect(&name);
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
        self.after_push(session, seg.is_some());
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
        self.after_push(session, seg.is_some());
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
        self.unprotect(session);
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

/// `session`'s log in `rings`, created if missing — with a slot for its ceiling allocated
/// in the positions file while there is room, should it ever need one.
fn ring_in<'a>(
    rings: &'a mut HashMap<Arc<str>, Ring>,
    positions: &mut Option<Positions>,
    session: &Arc<str>,
) -> &'a mut Ring {
    let count = rings.len();
    match rings.entry(session.clone()) {
        Entry::Occupied(e) => e.into_mut(),
        Entry::Vacant(e) => {
            if let Some(p) = positions {
                p.ensure(count + 1);
            }
            e.insert(Ring::new(DEFAULT_LOG_BYTES))
        }
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
        open_for(dir, &[])
    }

    /// Opened for `sessions`, each with the default capacity.
    fn open_for(dir: &ScratchDir, sessions: &[&str]) -> Logs {
        let journal = Journal::open(&Store::open(dir).unwrap()).unwrap();
        let sessions = sessions
            .iter()
            .map(|&s| (Arc::from(s), DEFAULT_LOG_BYTES))
            .collect();
        Logs::open(journal, &sessions, HashMap::new(), false)
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
                10 + i,
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
        let mut names: Vec<String> = (0..40).map(|i| format!("quiet{i}")).collect();
        names.push("flood".into());
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let logs = open_for(&dir, &names);
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

        let mut logs = open_for(&dir, &["s"]);
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

    /// Output that could not reach the journal (here: no journal at all) still moves
    /// positions on: after a crash they go on at least where they had gone, never back;
    /// after a clean exit exactly there; and once a record of the session is in the
    /// journal again its ceiling is freed, so a later crash costs no gap.
    #[test]
    fn positions_of_output_not_on_disk_never_go_back() {
        let dir = ScratchDir::new("logs-positions");
        let s: Arc<str> = Arc::from("s");
        let mut logs = open_for(&dir, &[]);
        logs.push_output(&s, 1, Stream::Stdout, 0, b"on disk\n", 0);
        let on_disk = logs.get("s").unwrap().end_pos();
        let journal = logs.disk.take();
        let mut end = on_disk;
        for _ in 0..100 {
            logs.push_output(&s, 1, Stream::Stdout, end, &[b'm'; 1000], 0);
            end += 1000;
        }
        assert!(logs.reserved.contains_key("s"));
        // A crash: nothing settled.
        std::mem::forget(journal);
        drop(logs);
        let logs = open_for(&dir, &["s"]);
        let after_crash = logs.get("s").unwrap().end_pos();
        assert!(after_crash >= end, "{after_crash} < {end}");
        assert!(after_crash <= end + RESERVE, "{after_crash}: a bounded gap");
        // Nothing new on disk: the next crash goes on from there too.
        drop(logs);
        let mut logs = open_for(&dir, &["s"]);
        assert_eq!(logs.get("s").unwrap().end_pos(), after_crash);
        // A clean exit after more output kept in memory only: exactly its end.
        let journal = logs.disk.take();
        logs.push_output(&s, 2, Stream::Stdout, 0, b"memory", 0);
        let end = after_crash + 6;
        logs.settle();
        std::mem::forget(journal);
        drop(logs);
        let mut logs = open_for(&dir, &["s"]);
        assert_eq!(logs.get("s").unwrap().end_pos(), end);
        // Written to the journal again: no ceiling left, so no gap after a crash.
        logs.push_output(&s, 3, Stream::Stdout, 0, b"disk again", 0);
        assert!(logs.reserved.is_empty());
        drop(logs);
        let logs = open_for(&dir, &["s"]);
        assert_eq!(logs.get("s").unwrap().end_pos(), end + 10);
    }

    /// With the positions file damaged, no ceiling can be trusted: sessions go on a
    /// margin above their newest record. One missing (a directory a daemon from before
    /// the file left) held none: positions go on where the journal ends.
    #[test]
    fn without_ceilings_positions_go_on_a_margin_above_the_journal() {
        let dir = ScratchDir::new("logs-margin");
        let s: Arc<str> = Arc::from("s");
        let mut logs = open_for(&dir, &[]);
        logs.push_output(&s, 1, Stream::Stdout, 0, b"0123456789", 0);
        drop(logs);
        let file = dir.join("output").join(positions::POSITIONS_FILE);
        std::fs::remove_file(&file).unwrap();
        let logs = open_for(&dir, &["s"]);
        assert_eq!(logs.get("s").unwrap().end_pos(), 10);
        drop(logs);
        std::fs::write(&file, b"not a positions file").unwrap();
        let logs = open_for(&dir, &["s"]);
        assert_eq!(logs.get("s").unwrap().end_pos(), 10 + MARGIN);
        drop(logs);
        // Its ceiling was reserved (its end is not in the journal): never back.
        let logs = open_for(&dir, &["s"]);
        let again = logs.get("s").unwrap().end_pos();
        assert!(again >= 10 + MARGIN, "{again}");
    }
}
