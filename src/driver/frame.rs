//! The bytes of one record of a session's log, exactly as subscribers receive them: in the
//! output journal's mapping (the usual case, written or read back at start: the bytes on
//! disk are the bytes sent, with no copy between), or on the heap (when the journal could
//! not take them, or a frame still queued outlived its segment).

use std::ops::Deref;
use std::rc::Rc;

use crate::store::journal::{Placed, Segment};
use crate::store::mapping::Mapping;

/// A shared, immutable record frame; cloning it is a reference count.
#[derive(Debug, Clone)]
pub enum Frame {
    /// `len` bytes at `start` of a journal segment's mapping.
    Mapped {
        map: Rc<Mapping>,
        start: usize,
        len: usize,
    },
    /// A frame of its own.
    Heap(Rc<Vec<u8>>),
}

impl Frame {
    /// The journal segment whose mapping holds it, if one does.
    pub fn mapped_in(&self) -> Option<Segment> {
        match self {
            Frame::Mapped { map, .. } => Some(map.seg()),
            Frame::Heap(_) => None,
        }
    }

    /// What tells this frame from others without comparing bytes: where its bytes live.
    /// Two clones of one frame have the same identity (an outbox's queued frame is found
    /// in its log by it, when an upgrade image refers to the record instead of copying).
    pub fn identity(&self) -> (usize, usize) {
        match self {
            Frame::Mapped { map, start, .. } => (Rc::as_ptr(map) as usize, *start),
            Frame::Heap(v) => (Rc::as_ptr(v) as *const u8 as usize, 0),
        }
    }

    /// The same bytes on the heap: for a frame still queued when its segment is given up,
    /// so that the segment's memory is not held for it.
    pub fn to_heap(&self) -> Frame {
        Frame::Heap(Rc::new(self.to_vec()))
    }
}

impl Deref for Frame {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Frame::Mapped { map, start, len } => map.bytes(*start, *len),
            Frame::Heap(v) => v,
        }
    }
}

/// Frames are equal when their bytes are.
impl PartialEq for Frame {
    fn eq(&self, other: &Frame) -> bool {
        **self == **other
    }
}

impl Eq for Frame {}

impl From<Vec<u8>> for Frame {
    fn from(v: Vec<u8>) -> Frame {
        Frame::Heap(Rc::new(v))
    }
}

impl From<Placed> for Frame {
    fn from(p: Placed) -> Frame {
        Frame::Mapped {
            map: p.map,
            start: p.start,
            len: p.len,
        }
    }
}
