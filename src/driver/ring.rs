//! Per-session replay log: the recent output frames and events of all of a session's
//! generations, bounded in bytes.
//!
//! Every record is stored already framed (the exact bytes a subscriber receives), so fanning
//! out to N subscribers is N copies and no re-encoding. Records are numbered by a per-session
//! sequence number; a subscriber's cursor is the next sequence number it should receive, so
//! a slow subscriber resumes exactly where it stopped, and one that fell behind the oldest
//! retained record learns precisely which output byte range it lost.
//!
//! Events (spawned, exited, ...) live in the same log as output so that a subscriber that is
//! behind still receives "output before exit" in order.

use std::collections::VecDeque;

use super::frame::Frame;
use crate::store::journal::{Placed, Segment};
use crate::store::journal_read::LoadedRecord;

/// What each record costs on top of its frame — its slot in the queue, on the heap while
/// the frame itself mostly lies in a journal segment's mapping — so that a flood of
/// one-byte reads is bounded by the same capacity as a few large ones.
const RECORD_OVERHEAD: usize = std::mem::size_of::<Record>();

/// One framed record.
#[derive(Debug, PartialEq, Eq)]
pub struct Record {
    /// Per-session sequence number.
    pub seq: u64,
    /// Output records: the generation the bytes came from. Events: the generation they name.
    pub gen: u64,
    /// Output records: the session-wide output position of the first byte.
    pub pos: u64,
    /// Output records: how many output bytes; 0 for events.
    pub out_len: u64,
    /// The exact bytes a subscriber receives for this record, shared with the outboxes
    /// of subscribers it is queued for.
    pub frame: Frame,
    /// The journal segment holding it on disk (`None` if it could not be written).
    pub seg: Option<Segment>,
}

/// Where a cursor stands relative to the log.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup<'a> {
    /// The record at the cursor.
    Record(&'a Record),
    /// The cursor is older than the oldest retained record: output bytes `[from, to)` are
    /// lost; continue at `resume`.
    Evicted { resume: u64, to: u64 },
    /// Nothing newer yet.
    End,
}

/// A bounded log of framed records.
#[derive(Debug)]
pub struct Ring {
    cap: usize,
    used: usize,
    records: VecDeque<Record>,
    /// Sequence number the next record gets.
    next_seq: u64,
    /// Session-wide output position after the newest output byte.
    end_pos: u64,
    /// Journal segments of records let go (evicted, or written again elsewhere) since
    /// [`Ring::take_evicted`] was last called.
    evicted: Vec<Segment>,
    /// Whether a new subscription may be replayed what is retained: not for a session
    /// whose `buffer` is 0 (see [`Ring::set_replays`]).
    replays: bool,
}

impl Ring {
    /// An empty log holding at most `cap` bytes of frames (plus a fixed per-record charge).
    pub fn new(cap: usize) -> Self {
        Ring {
            cap: cap.max(RECORD_OVERHEAD * 4),
            used: 0,
            records: VecDeque::new(),
            next_seq: 0,
            end_pos: 0,
            evicted: Vec::new(),
            replays: cap > 0,
        }
    }

    /// Appends an output frame of `out_len` output bytes of generation `gen` (its copy in
    /// journal segment `seg`); returns its sequence number.
    pub fn push_output(
        &mut self,
        gen: u64,
        out_len: u64,
        frame: impl Into<Frame>,
        seg: Option<Segment>,
    ) -> u64 {
        let pos = self.end_pos;
        self.end_pos += out_len;
        self.push(Record {
            seq: 0,
            gen,
            pos,
            out_len,
            frame: frame.into(),
            seg,
        })
    }

    /// Where `gen`'s `stream` ended in this log: the offset after its newest retained
    /// output byte, read from that record's frame header. `None` when no output of it is
    /// retained (none came, or it was evicted).
    pub fn stream_end(&self, gen: u64, stream: crate::core::Stream) -> Option<u64> {
        use crate::proto::event::WireEvent;
        use crate::proto::framing::{FrameDecoder, Message};
        self.records
            .iter()
            .rev()
            .filter(|r| r.gen == gen && r.out_len > 0)
            .find_map(|r| {
                let mut d = FrameDecoder::new();
                d.feed(&r.frame);
                match d.next_message()? {
                    Ok(Message::Event(WireEvent::Output(f))) if f.stream == stream => {
                        Some(f.offset.saturating_add(f.data.len() as u64))
                    }
                    _ => None,
                }
            })
    }

    /// Appends an event frame about generation `gen` (its copy in journal segment `seg`).
    pub fn push_event(&mut self, gen: u64, frame: impl Into<Frame>, seg: Option<Segment>) -> u64 {
        self.push(Record {
            seq: 0,
            gen,
            pos: self.end_pos,
            out_len: 0,
            frame: frame.into(),
            seg,
        })
    }

    /// A log holding what a previous daemon's log held (read back from the journal, in
    /// order, its frames still in the journal's mapping): numbering and positions go on
    /// from its newest record. Only the newest run
    /// of consecutive records is taken, so a gap (a record lost with a bad segment) can
    /// never be replayed as if nothing were missing.
    pub fn restored(cap: usize, loaded: Vec<LoadedRecord>) -> Ring {
        let mut ring = Ring::new(cap);
        let mut start = loaded.len();
        while start > 0 {
            let r = &loaded[start - 1];
            let follows = start == loaded.len() || {
                let next = &loaded[start];
                r.seq + 1 == next.seq && r.pos + r.out_len == next.pos
            };
            if !follows {
                break;
            }
            start -= 1;
        }
        for r in loaded.into_iter().skip(start) {
            ring.next_seq = r.seq;
            ring.end_pos = r.pos + r.out_len;
            ring.push(Record {
                seq: 0,
                gen: r.gen,
                pos: r.pos,
                out_len: r.out_len,
                frame: r.frame.into(),
                seg: Some(r.seg),
            });
        }
        ring.evicted.clear();
        ring
    }

    /// Makes positions go on from at least `pos` (a restarted daemon's reserved ceiling:
    /// the output between the newest record and it was lost with a crash). A subscriber
    /// that reaches the newest record is told that range was `dropped`.
    pub fn continue_at(&mut self, pos: u64) {
        self.end_pos = self.end_pos.max(pos);
    }

    /// Whether a restarted daemon would go on from this log's end: its newest record
    /// ends there and is in one of the segments `on_disk` says will be read back (an
    /// empty log that never had output: nothing to go on from).
    pub fn backed(&self, on_disk: impl Fn(Segment) -> bool) -> bool {
        match self.records.back() {
            Some(r) => r.pos + r.out_len == self.end_pos && r.seg.is_some_and(on_disk),
            None => self.end_pos == 0,
        }
    }

    /// The journal segment of its oldest record: no older segment holds anything of it.
    pub fn first_seg(&self) -> Option<Segment> {
        self.records.front().and_then(|r| r.seg)
    }

    /// Writes every retained record again, oldest first, with `write` (to the journal's
    /// newest segment), and keeps the new copies; one `write` could not place keeps its
    /// old bytes but no segment. The old segments count as let go.
    pub fn rewrite(&mut self, mut write: impl FnMut(&Record) -> Option<Placed>) {
        for r in self.records.iter_mut() {
            self.evicted.extend(r.seg);
            match write(r) {
                Some(placed) => {
                    r.seg = Some(placed.map.seg());
                    r.frame = placed.into();
                }
                None => r.seg = None,
            }
        }
    }

    /// The journal segments of the records let go since the last call.
    pub fn take_evicted(&mut self) -> std::vec::Drain<'_, Segment> {
        self.evicted.drain(..)
    }

    /// The journal segment of every retained record.
    pub fn segments(&self) -> impl Iterator<Item = Segment> + '_ {
        self.records.iter().filter_map(|r| r.seg)
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Whether what is retained is replayed to a new subscription.
    pub fn replays(&self) -> bool {
        self.replays
    }

    /// Says whether what is retained is replayed to a new subscription: not with a
    /// session's `buffer` of 0. The log still keeps at least its newest record then —
    /// followers are pumped from it, a lossless one raises its capacity, and a restarted
    /// daemon goes on from its positions — but none of it is replayed.
    pub fn set_replays(&mut self, replays: bool) {
        self.replays = replays;
    }

    /// Changes the capacity, evicting the oldest records if it shrank.
    pub fn set_capacity(&mut self, cap: usize) {
        self.cap = cap.max(RECORD_OVERHEAD * 4);
        self.evict();
    }

    fn push(&mut self, mut record: Record) -> u64 {
        record.seq = self.next_seq;
        self.next_seq += 1;
        self.used += record.frame.len() + RECORD_OVERHEAD;
        self.records.push_back(record);
        self.evict();
        self.next_seq - 1
    }

    /// Evicts from the front, but always keeps the newest record so a frame larger than
    /// the capacity is still delivered to subscribers that keep up.
    fn evict(&mut self) {
        while self.used > self.cap && self.records.len() > 1 {
            let old = self.records.pop_front().expect("len > 1");
            self.used -= old.frame.len() + RECORD_OVERHEAD;
            self.evicted.extend(old.seg);
        }
        // Many small records replaced by a few large ones: the queue's slots go too.
        let slots = self.records.capacity();
        if slots > 64 && slots > 4 * self.records.len() {
            self.records.shrink_to(2 * self.records.len());
        }
    }

    /// The sequence number a new subscriber that wants only future records starts at.
    pub fn end_seq(&self) -> u64 {
        self.next_seq
    }

    /// The oldest retained sequence number (equals `end_seq` when empty).
    pub fn first_seq(&self) -> u64 {
        self.records.front().map_or(self.next_seq, |r| r.seq)
    }

    /// Session-wide output position after the newest output byte.
    pub fn end_pos(&self) -> u64 {
        self.end_pos
    }

    /// Output position of the record at `seq` (or the end position past the log).
    fn pos_of(&self, seq: u64) -> u64 {
        self.index_of(seq)
            .map_or(self.end_pos, |i| self.records[i].pos)
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        let first = self.first_seq();
        if seq < first || seq >= self.next_seq {
            return None;
        }
        usize::try_from(seq - first).ok()
    }

    /// What a subscriber at cursor `seq`, having received output up to position `pos`,
    /// sees next.
    pub fn lookup(&self, seq: u64, pos: u64) -> Lookup<'_> {
        if seq >= self.next_seq {
            return Lookup::End;
        }
        match self.index_of(seq) {
            Some(i) => Lookup::Record(&self.records[i]),
            None => {
                let resume = self.first_seq();
                Lookup::Evicted {
                    resume,
                    to: self.pos_of(resume).max(pos),
                }
            }
        }
    }

    /// Record `seq`, if retained.
    pub fn record(&self, seq: u64) -> Option<&Record> {
        self.index_of(seq).map(|i| &self.records[i])
    }

    /// The records retained, oldest first.
    pub fn records(&self) -> impl Iterator<Item = &Record> {
        self.records.iter()
    }

    /// The newest `n` event records (not output) at `from_seq` or later, oldest first:
    /// one walk back from the end, which stops at `from_seq`.
    pub fn last_events(&self, n: usize, from_seq: u64) -> Vec<&Record> {
        let mut events: Vec<&Record> = self
            .records
            .iter()
            .rev()
            .take_while(|r| r.seq >= from_seq)
            .filter(|r| r.out_len == 0)
            .take(n)
            .collect();
        events.reverse();
        events
    }

    /// The cursor from which replaying yields at least the last `bytes` output bytes that
    /// are still retained (whole records).
    pub fn seq_for_tail(&self, bytes: u64) -> u64 {
        let mut got = 0u64;
        let mut seq = self.next_seq;
        for r in self.records.iter().rev() {
            if got >= bytes {
                break;
            }
            got += r.out_len;
            seq = r.seq;
        }
        seq
    }

    /// The cursor of the first retained record at or after the session-wide output position
    /// `pos`: used to resume a subscriber from a position it saw earlier.
    pub fn seq_for_pos(&self, pos: u64) -> u64 {
        self.records
            .iter()
            .find(|r| r.pos + r.out_len > pos || (r.out_len == 0 && r.pos >= pos))
            .map_or(self.next_seq, |r| r.seq)
    }

    /// The cursor of the first retained record about generation `gen` or a newer one.
    pub fn seq_for_gen(&self, gen: u64) -> u64 {
        self.records
            .iter()
            .find(|r| r.gen >= gen)
            .map_or(self.next_seq, |r| r.seq)
    }

    /// Bytes currently charged against the capacity.
    pub fn used(&self) -> usize {
        self.used
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(ring: &mut Ring, gen: u64, bytes: &[u8]) -> u64 {
        ring.push_output(gen, bytes.len() as u64, bytes.to_vec(), None)
    }

    #[test]
    fn last_events_are_the_newest_events_from_a_sequence_on_oldest_first() {
        let mut ring = Ring::new(1 << 20);
        for i in 0..10u8 {
            out(&mut ring, 1, b"x");
            ring.push_event(1, vec![b'0' + i], None);
        }
        let frames = |v: Vec<&Record>| v.iter().map(|r| r.frame[0]).collect::<Vec<u8>>();
        assert_eq!(frames(ring.last_events(3, 0)), b"789");
        // Records 0..=13 are before sequence 14: the events at 15, 17, 19 are left.
        assert_eq!(frames(ring.last_events(64, 14)), b"789");
        assert!(ring.last_events(64, ring.end_seq()).is_empty());
    }

    #[test]
    fn subscriber_reads_records_in_order() {
        let mut ring = Ring::new(4096);
        out(&mut ring, 1, b"ab");
        ring.push_event(1, b"exited".to_vec(), None);
        out(&mut ring, 2, b"cd");
        let frames: Vec<&[u8]> = (0..3)
            .map(|s| match ring.lookup(s, 0) {
                Lookup::Record(r) => &r.frame[..],
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(frames, [&b"ab"[..], b"exited", b"cd"]);
        assert_eq!(ring.lookup(3, 4), Lookup::End);
    }

    #[test]
    fn memory_stays_bounded_and_losses_are_exact() {
        let mut ring = Ring::new(1024);
        for _ in 0..10_000 {
            out(&mut ring, 1, &[b'x'; 100]);
            assert!(ring.used() <= 1024, "used {}", ring.used());
        }
        // A subscriber still at the start lost everything before the oldest record.
        match ring.lookup(0, 0) {
            Lookup::Evicted { resume, to } => {
                assert_eq!(resume, ring.first_seq());
                assert_eq!(to, resume * 100);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_slots_of_evicted_small_records_are_given_back() {
        let mut ring = Ring::new(1 << 20);
        for _ in 0..10_000 {
            out(&mut ring, 1, b"x");
        }
        let grown = ring.records.capacity();
        assert!(grown >= 10_000);
        out(&mut ring, 1, &vec![b'y'; (1 << 20) - 4096]);
        assert!(ring.records.len() < 100);
        assert!(
            ring.records.capacity() <= grown / 4,
            "{}",
            ring.records.capacity()
        );
    }

    #[test]
    fn one_byte_floods_are_charged_per_record() {
        let mut ring = Ring::new(4096);
        for _ in 0..100_000 {
            out(&mut ring, 1, b"x");
        }
        assert!(ring.used() <= 4096);
        assert!(ring.end_seq() - ring.first_seq() <= 4096 / RECORD_OVERHEAD as u64);
    }

    #[test]
    fn an_oversized_frame_is_kept_alone() {
        let mut ring = Ring::new(1024);
        out(&mut ring, 1, b"a");
        out(&mut ring, 1, &[0; 10_000]);
        assert_eq!(ring.first_seq(), 1);
        assert_eq!(ring.end_seq(), 2);
    }

    #[test]
    fn tail_and_position_seeks() {
        let mut ring = Ring::new(4096);
        out(&mut ring, 1, b"aaaa"); // pos 0..4, seq 0
        ring.push_event(1, b"exit".to_vec(), None); // seq 1 at pos 4
        out(&mut ring, 2, b"bbbb"); // pos 4..8, seq 2
        assert_eq!(ring.seq_for_tail(0), 3);
        assert_eq!(ring.seq_for_tail(3), 2);
        assert_eq!(ring.seq_for_tail(5), 0);
        assert_eq!(ring.seq_for_tail(1000), 0);
        assert_eq!(ring.seq_for_pos(2), 0);
        assert_eq!(ring.seq_for_pos(4), 1);
        assert_eq!(ring.seq_for_pos(8), 3);
        assert_eq!(ring.seq_for_gen(2), 2);
        assert_eq!(ring.seq_for_gen(3), 3);
    }
}
