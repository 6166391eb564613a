//! Reading the output journal back at start: every record checked as strictly as a
//! client checks the daemon's stream (the frame is decoded by the protocol's own decoder
//! and must be exactly one message about the session and position the record claims).
//! A segment ends at the first record without its nonce (never committed, or an older
//! segment's bytes under a spare written over); a segment with anything else is moved
//! aside after the good records before the fault were taken.
//!
//! A segment is mapped read-only, not read ([`Mapping::read_only`]): the records taken
//! refer to its pages ([`Placed`]), as the frames of records written do, so a restart
//! copies no retained output onto the heap and touches only the pages holding records
//! (a segment file is allocated whole; most of it is usually never written). The mapping
//! lives as long as a record refers to it.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use super::format::{self, Kind};
use super::journal::{
    segment_file, Journal, Placed, Segment, MAX_FRAME, NONCE_BYTES, OUTPUT_DIR, RECORD_HEADER,
};
use super::mapping::Mapping;
use super::strict_read::ReadError;
use crate::core::SessionState;
use crate::proto::event::WireEvent;
use crate::proto::framing::{FrameDecoder, Message};

/// The largest segment file read: a full segment and one record past the limit.
const MAX_SEGMENT_FILE: usize =
    super::journal::SEGMENT_BYTES as usize + RECORD_HEADER + MAX_FRAME + 256;

/// What a record read back is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A record of the session's log.
    Record(RecordAt),
    /// The session's `removed` event: every record of that name written before it (in
    /// segment order) belonged to a session that is gone, whose numbers a later session
    /// of the same name reuses.
    Removed,
}

/// One valid record of a segment's body, as [`read_records`] finds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordAt {
    /// Its number in the session's log.
    pub seq: u64,
    /// The session output position it starts at.
    pub pos: u64,
    /// The generation it is about (0 for an event naming none).
    pub gen: u64,
    /// Output bytes it carries (0 for an event).
    pub out_len: u64,
    /// Where its frame starts in the body read.
    pub start: usize,
    /// The frame's length.
    pub len: usize,
    /// The segment it was read from.
    pub seg: Segment,
}

/// One record read back.
#[derive(Debug, Clone)]
pub struct LoadedRecord {
    /// Its number in the session's log.
    pub seq: u64,
    /// The session output position it starts at.
    pub pos: u64,
    /// The generation it is about (0 for an event naming none).
    pub gen: u64,
    /// Output bytes it carries (0 for an event).
    pub out_len: u64,
    /// The frame, exactly as subscribers receive it, in its segment's mapping.
    pub frame: Placed,
    /// The segment it was read from.
    pub seg: Segment,
}

/// What the journal held, per session, each session's records in log order.
#[derive(Debug, Default)]
pub struct LoadedOutput {
    /// Records of every session asked for, oldest first, duplicates removed.
    pub sessions: HashMap<Arc<str>, Vec<LoadedRecord>>,
    /// Segments moved aside as bad.
    pub bad: usize,
    /// Records of sessions not asked for (removed, or not restored).
    pub skipped: u64,
}

/// A session's records while loading: by number (a record written again by compaction
/// appears twice), with the bytes they hold.
#[derive(Default)]
struct Collecting {
    records: BTreeMap<u64, LoadedRecord>,
    bytes: usize,
}

impl Journal {
    /// Reads every segment on disk, oldest first, keeping records of the sessions
    /// `capacity` names (with the bytes of its replay log). What is kept stays within
    /// about twice the capacities: the oldest records of a session beyond that are let go
    /// as they are read, as its log would have. The mapping of every segment still on
    /// disk is kept until it is given up (see [`Journal::give_up`]).
    ///
    /// A generation belongs to one session: `owners` names those the caller knows (from
    /// the session records), and the first record naming any other one claims it for its
    /// session. A record naming a generation under another session's name was damaged
    /// (a changed byte of its frame's header): it is refused with a warning, and its
    /// segment set aside once the rest of it is read.
    pub fn load(
        &mut self,
        capacity: impl Fn(&str) -> Option<usize>,
        mut owners: HashMap<u64, Arc<str>>,
    ) -> LoadedOutput {
        let mut out = LoadedOutput::default();
        let mut collecting: HashMap<Arc<str>, Collecting> = HashMap::new();
        let segments: Vec<Segment> = self.sizes.keys().copied().collect();
        for seg in segments {
            let (map, nonce, body_at) = match self.map_segment(seg) {
                Ok(found) => found,
                Err(why) => {
                    self.aside(seg, &why, &mut out);
                    continue;
                }
            };
            let body = map.bytes(body_at, map.len() - body_at);
            let mut refused = Refused::default();
            let fault = read_records(body, seg, nonce, |session, found| {
                if let Found::Record(at) = &found {
                    if !owned_by(&mut owners, at.gen, session) {
                        refused.add(&self.dir, seg, at, session, &owners);
                        return;
                    }
                }
                let Some(cap) = capacity(session) else {
                    out.skipped += 1;
                    return;
                };
                let at = match found {
                    Found::Record(at) => at,
                    // A session of this name was removed here: what came before was its.
                    Found::Removed => {
                        collecting.remove(session);
                        return;
                    }
                };
                let record = LoadedRecord {
                    seq: at.seq,
                    pos: at.pos,
                    gen: at.gen,
                    out_len: at.out_len,
                    frame: Placed {
                        map: map.clone(),
                        start: body_at + at.start,
                        len: at.len,
                    },
                    seg,
                };
                let entry = match collecting.get_mut(session) {
                    Some(c) => c,
                    None => collecting.entry(Arc::from(session)).or_default(),
                };
                entry.bytes += record.frame.len;
                if let Some(old) = entry.records.insert(record.seq, record) {
                    entry.bytes -= old.frame.len;
                }
                while entry.bytes > cap.saturating_mul(2) && entry.records.len() > 1 {
                    if let Some((_, old)) = entry.records.pop_first() {
                        entry.bytes -= old.frame.len;
                    }
                }
            });
            if let Some(why) = fault.or(refused.why()) {
                self.aside(seg, &why, &mut out);
            }
            // Moved aside, it is no longer ours to give up: the records taken before the
            // fault keep its mapping on their own.
            if self.sizes.contains_key(&seg) {
                self.keep_read(map);
            }
        }
        out.sessions = collecting
            .into_iter()
            .map(|(name, c)| (name, c.records.into_values().collect()))
            .collect();
        out
    }

    /// Opens and maps segment `seg` as strictly as a file is read (see
    /// [`Dir::read_strict`](super::dir::Dir::read_strict)), and checks its header; returns
    /// the mapping, the segment's nonce and where its records start, or why it is bad.
    fn map_segment(&mut self, seg: Segment) -> Result<(Rc<Mapping>, u64, usize), String> {
        let name = segment_file(seg);
        let (fd, size) = self.dir.open_strict(&name).map_err(|e| e.to_string())?;
        if size > MAX_SEGMENT_FILE as u64 {
            return Err(ReadError::TooLarge {
                limit: MAX_SEGMENT_FILE,
            }
            .to_string());
        }
        if size == 0 {
            return Err(format::check_header(&[], Kind::Output)
                .err()
                .map_or_else(|| "an empty file".into(), |e| e.to_string()));
        }
        let map = Mapping::read_only(&fd, size as usize, seg)
            .map_err(|e| format!("{}: {e}", self.dir.path_of(&name).display()))?;
        let bytes = map.bytes(0, map.len());
        format::check_header(bytes, Kind::Output).map_err(|e| e.to_string())?;
        self.set_size(seg, Some(size));
        // The header line was found within its bound by the check above.
        let start = bytes
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |i| i + 1);
        let Some(nonce) = bytes.get(start..start + NONCE_BYTES) else {
            return Err("no nonce after the header".into());
        };
        let nonce = u64::from_le_bytes(nonce.try_into().expect("8 bytes"));
        Ok((Rc::new(map), nonce, start + NONCE_BYTES))
    }

    /// Moves a bad segment aside; it is no longer on disk for us (if even the move
    /// failed, it is deleted with the others once nothing read from it is retained).
    fn aside(&mut self, seg: Segment, why: &str, out: &mut LoadedOutput) {
        let name = segment_file(seg);
        if super::aside::move_aside(&self.dir, OUTPUT_DIR, &name, &self.bad, why).is_some() {
            self.set_size(seg, None);
        }
        out.bad += 1;
    }
}

/// Whether generation `gen` (0: none) may be named under `session`: it is known as that
/// session's, or not known yet (and is from now on).
fn owned_by(owners: &mut HashMap<u64, Arc<str>>, gen: u64, session: &str) -> bool {
    if gen == 0 {
        return true;
    }
    match owners.get(&gen) {
        Some(owner) => **owner == *session,
        None => {
            owners.insert(gen, Arc::from(session));
            true
        }
    }
}

/// Records of one segment refused for naming another session's generation.
#[derive(Default)]
struct Refused {
    count: u64,
    first: Option<String>,
}

/// Refused records logged one by one per segment; the rest are counted.
const REFUSALS_LOGGED: u64 = 4;

impl Refused {
    fn add(
        &mut self,
        dir: &super::dir::Dir,
        seg: Segment,
        at: &RecordAt,
        session: &str,
        owners: &HashMap<u64, Arc<str>>,
    ) {
        let owner = owners.get(&at.gen).map_or("", |o| o);
        let why = format!(
            "record {} names gen {} of session {owner} under session {session}",
            at.seq, at.gen
        );
        if self.count < REFUSALS_LOGGED {
            log::warn!(
                "{}: {why}: refused",
                dir.path_of(&segment_file(seg)).display()
            );
        }
        self.count += 1;
        self.first.get_or_insert(why);
    }

    fn why(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        Some(match self.count {
            1 => format!("{first} (refused)"),
            n => format!("{first}, and {} more such records (refused)", n - 1),
        })
    }
}

/// Calls `each` with the session and record of every committed, valid record of a
/// segment's body (after its header line and `nonce`); returns why the segment is bad, if
/// it met anything but the end of what was committed.
///
/// The first record without the nonce is where the committed records end (one a crash
/// cut short, or an older segment's bytes in a spare written over) — unless a committed
/// record follows it: records are committed in order, so that one was damaged (a changed
/// bit of its nonce). Then reading goes on at the next committed record, and the damage
/// is what is returned.
pub fn read_records(
    mut body: &[u8],
    seg: Segment,
    nonce: u64,
    mut each: impl FnMut(&str, Found),
) -> Option<String> {
    // Bytes of the body before `body`: where each record's frame is, in the body given.
    let mut consumed = 0;
    let mut damaged = None;
    while body.len() >= RECORD_HEADER {
        let tag = u64::from_le_bytes(body[4..12].try_into().expect("8 bytes"));
        if tag != nonce || nonce == 0 {
            // Not committed, or an older segment's bytes: the end, unless committed
            // records follow.
            let Some(next) = next_committed(body, nonce) else {
                return damaged;
            };
            damaged.get_or_insert_with(|| {
                format!("the record at byte {consumed} of the records has a bad nonce, yet committed records follow it")
            });
            body = &body[next..];
            consumed += next;
            continue;
        }
        let len = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
        if !(RECORD_HEADER - 4..=RECORD_HEADER - 4 + MAX_FRAME).contains(&len) {
            return Some(format!("a record of {len} bytes"));
        }
        if body.len() < 4 + len {
            return Some(format!("a record of {len} bytes cut short"));
        }
        let seq = u64::from_le_bytes(body[12..20].try_into().expect("8 bytes"));
        let pos = u64::from_le_bytes(body[20..28].try_into().expect("8 bytes"));
        let frame = &body[RECORD_HEADER..4 + len];
        let start = consumed + RECORD_HEADER;
        body = &body[4 + len..];
        consumed += 4 + len;
        let event = match decode_one(frame) {
            Ok(event) => event,
            Err(why) => return Some(format!("record {seq}: {why}")),
        };
        if !crate::core::is_valid_session_name(event.session()) {
            return Some(format!("record {seq}: not a session name"));
        }
        let (gen, out_len) = match &event {
            WireEvent::Output(f) if f.pos != pos => {
                return Some(format!(
                    "record {seq}: frame at pos {} filed at {pos}",
                    f.pos
                ))
            }
            WireEvent::Output(f) => (f.gen, f.data.len() as u64),
            WireEvent::Dropped { .. } | WireEvent::Demoted { .. } => {
                return Some(format!("record {seq}: a client's `{}` event", event.name()))
            }
            WireEvent::State {
                session,
                state: SessionState::Removed,
                ..
            } => {
                each(session, Found::Removed);
                continue;
            }
            other => (other.gen().unwrap_or(0), 0),
        };
        let record = RecordAt {
            seq,
            pos,
            gen,
            out_len,
            start,
            len: frame.len(),
            seg,
        };
        each(event.session(), Found::Record(record));
    }
    damaged
}

/// Where the next committed record of `body` starts (its nonce found past the record at
/// its start, whose nonce is not the segment's), if any.
fn next_committed(body: &[u8], nonce: u64) -> Option<usize> {
    if nonce == 0 {
        return None;
    }
    let tag = nonce.to_le_bytes();
    // A record's nonce is 4 bytes into it: one starting at byte 1 or later. Its length
    // first (one look), then a search of the rest (a damaged length too): for its first
    // byte, then the whole nonce there — a segment's unwritten tail is mostly zeros.
    let len = u32::from_le_bytes(body[..4].try_into().expect("4 bytes")) as usize;
    let by_len = 4usize.saturating_add(len);
    if body.get(by_len + 4..by_len + 12) == Some(&tag[..]) {
        return Some(by_len);
    }
    let mut at = 5;
    while let Some(i) = body.get(at..)?.iter().position(|&b| b == tag[0]) {
        let i = at + i;
        match body.get(i..i + tag.len()) {
            Some(w) if w == tag => return Some(i - 4),
            Some(_) => at = i + 1,
            None => return None,
        }
    }
    None
}

/// Decodes a frame that must be exactly one event (an output frame or an event line).
fn decode_one(frame: &[u8]) -> Result<WireEvent<'static>, String> {
    let mut decoder = FrameDecoder::new();
    decoder.feed(frame);
    let event = match decoder.next_message() {
        Some(Ok(Message::Event(event))) => event,
        Some(Ok(Message::Response(_))) => return Err("a response, not an event".into()),
        Some(Err(e)) => return Err(e.to_string()),
        None => return Err("an incomplete frame".into()),
    };
    if decoder.next_message().is_some() || decoder.buffered() > 0 {
        return Err("bytes after the frame".into());
    }
    Ok(event)
}
