//! Reading the output journal back at start: every record checked as strictly as a
//! client checks the daemon's stream (the frame is decoded by the protocol's own decoder
//! and must be exactly one message about the session and position the record claims).
//! A segment ends at the first record without its nonce (never committed, or an older
//! segment's bytes under a spare written over); a segment with anything else is moved
//! aside after the good records before the fault were taken.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::format::{self, Kind};
use super::journal::{
    segment_file, Journal, Segment, MAX_FRAME, NONCE_BYTES, OUTPUT_DIR, RECORD_HEADER,
};
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
    Record(LoadedRecord),
    /// The session's `removed` event: every record of that name written before it (in
    /// segment order) belonged to a session that is gone, whose numbers a later session
    /// of the same name reuses.
    Removed,
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedRecord {
    /// Its number in the session's log.
    pub seq: u64,
    /// The session output position it starts at.
    pub pos: u64,
    /// The generation it is about (0 for an event naming none).
    pub gen: u64,
    /// Output bytes it carries (0 for an event).
    pub out_len: u64,
    /// The frame, exactly as subscribers receive it.
    pub frame: Vec<u8>,
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
    /// `capacity` names (with the bytes of its replay log). Memory stays within about
    /// twice the capacities: the oldest records of a session beyond that are let go as
    /// they are read, as its log would have.
    pub fn load(&mut self, capacity: impl Fn(&str) -> Option<usize>) -> LoadedOutput {
        let mut out = LoadedOutput::default();
        let mut collecting: HashMap<Arc<str>, Collecting> = HashMap::new();
        let mut buf = Vec::new();
        let segments: Vec<Segment> = self.sizes.keys().copied().collect();
        for seg in segments {
            let name = segment_file(seg);
            if let Err(e) = self.dir.read_strict(&name, MAX_SEGMENT_FILE, &mut buf) {
                self.aside(seg, &e.to_string(), &mut out);
                continue;
            }
            if let Err(e) = format::check_header(&buf, Kind::Output) {
                self.aside(seg, &e.to_string(), &mut out);
                continue;
            }
            self.set_size(seg, Some(buf.len() as u64));
            let start = buf
                .iter()
                .position(|&b| b == b'\n')
                .map_or(buf.len(), |i| i + 1);
            let Some(nonce) = buf.get(start..start + NONCE_BYTES) else {
                self.aside(seg, "no nonce after the header", &mut out);
                continue;
            };
            let nonce = u64::from_le_bytes(nonce.try_into().expect("8 bytes"));
            let body = &buf[start + NONCE_BYTES..];
            let fault = read_records(body, seg, nonce, |session, found| {
                let Some(cap) = capacity(session) else {
                    out.skipped += 1;
                    return;
                };
                let record = match found {
                    Found::Record(record) => record,
                    // A session of this name was removed here: what came before was its.
                    Found::Removed => {
                        collecting.remove(session);
                        return;
                    }
                };
                let entry = match collecting.get_mut(session) {
                    Some(c) => c,
                    None => collecting.entry(Arc::from(session)).or_default(),
                };
                entry.bytes += record.frame.len();
                if let Some(old) = entry.records.insert(record.seq, record) {
                    entry.bytes -= old.frame.len();
                }
                while entry.bytes > cap.saturating_mul(2) && entry.records.len() > 1 {
                    if let Some((_, old)) = entry.records.pop_first() {
                        entry.bytes -= old.frame.len();
                    }
                }
            });
            if let Some(why) = fault {
                self.aside(seg, &why, &mut out);
            }
        }
        out.sessions = collecting
            .into_iter()
            .map(|(name, c)| (name, c.records.into_values().collect()))
            .collect();
        out
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

/// Calls `each` with the session and record of every committed, valid record of a
/// segment's body (after its header line and `nonce`); returns why it stopped early, if
/// it met anything but the end of what was committed.
pub fn read_records(
    mut body: &[u8],
    seg: Segment,
    nonce: u64,
    mut each: impl FnMut(&str, Found),
) -> Option<String> {
    while body.len() >= RECORD_HEADER {
        let tag = u64::from_le_bytes(body[4..12].try_into().expect("8 bytes"));
        if tag != nonce || nonce == 0 {
            return None; // not committed, or an older segment's bytes
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
        body = &body[4 + len..];
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
            WireEvent::Dropped { .. } => {
                return Some(format!("record {seq}: a client's `dropped` event"))
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
        let record = LoadedRecord {
            seq,
            pos,
            gen,
            out_len,
            frame: frame.to_vec(),
            seg,
        };
        each(event.session(), Found::Record(record));
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
