//! The replay logs' use of the output journal: how many retained records each segment
//! holds, so that a segment is given up the moment the last of them is evicted (a big
//! idle log keeps only its own segments, never the ones written after it), and when the
//! journal has grown past about twice what the logs retain (quiet logs with a record or
//! two in many segments), which segment to write again.

use std::collections::BTreeMap;

use crate::store::journal::{Journal, Placed, Segment, SEGMENT_BYTES};

/// The journal, and what the logs keep in each of its segments.
#[derive(Debug)]
pub struct Journaled {
    journal: Journal,
    /// Retained records per segment (segments holding none are not keys).
    live: BTreeMap<Segment, u64>,
    /// The segment the last record went to: given up once the journal has moved on and
    /// nothing in it is retained.
    writing: Option<Segment>,
    /// Segments given up while frames in them were still referenced elsewhere.
    released: Vec<Segment>,
}

impl Journaled {
    /// The journal, with `restored` naming the segment of every record the logs took back
    /// from it; every other segment on disk is given up.
    pub fn new(journal: Journal, restored: impl Iterator<Item = Segment>) -> Journaled {
        let mut j = Journaled {
            journal,
            live: BTreeMap::new(),
            writing: None,
            released: Vec::new(),
        };
        for seg in restored {
            *j.live.entry(seg).or_insert(0) += 1;
        }
        for seg in j.journal.segment_numbers() {
            if !j.live.contains_key(&seg) {
                j.give_up(seg);
            }
        }
        j
    }

    /// Writes a record (`parts` joined) and counts it retained.
    pub fn place(&mut self, seq: u64, pos: u64, parts: &[&[u8]]) -> Option<Placed> {
        let placed = self.journal.append(seq, pos, parts)?;
        let seg = placed.map.seg();
        *self.live.entry(seg).or_insert(0) += 1;
        if let Some(previous) = self.writing.replace(seg).filter(|&p| p != seg) {
            if !self.live.contains_key(&previous) {
                self.give_up(previous);
            }
        }
        Some(placed)
    }

    /// A retained record in `seg` was let go.
    pub fn forget(&mut self, seg: Segment) {
        let Some(count) = self.live.get_mut(&seg) else {
            return;
        };
        *count -= 1;
        if *count == 0 {
            self.live.remove(&seg);
            if self.writing != Some(seg) {
                self.give_up(seg);
            }
        }
    }

    fn give_up(&mut self, seg: Segment) {
        if self.journal.give_up(seg) {
            self.released.push(seg);
        }
    }

    /// The oldest segment still holding retained records, when the journal holds more
    /// than about twice the `retained` bytes: the logs with records in it should write
    /// them again.
    pub fn to_compact(&self, retained: u64) -> Option<Segment> {
        let slack = 2 * retained + 2 * SEGMENT_BYTES;
        if self.journal.disk_bytes() <= slack {
            return None;
        }
        self.live
            .keys()
            .next()
            .copied()
            .filter(|&s| Some(s) != self.writing)
    }

    /// Segments given up since the last call while frames in them were still referenced
    /// (see [`Clients::detach_frames`](super::clients::Clients::detach_frames)).
    pub fn take_released(&mut self) -> Vec<Segment> {
        std::mem::take(&mut self.released)
    }
}
