//! A journal segment mapped into the daemon's memory, shared with its file: what the
//! daemon writes here is in the file (the page cache) at once, so it outlives a crash of
//! the daemon, and the same bytes are what subscribers are sent — the journal costs no
//! copy of its own.
//!
//! The file's whole length is allocated before it is mapped (`fallocate`), so a write can
//! never meet a page the filesystem cannot provide (which would be `SIGBUS`, not an
//! error); an allocation that fails fails the segment, before the mapping exists.

use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use rustix::fs::{fallocate, FallocateFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

use super::journal::Segment;

/// One segment file, mapped shared and writable. Single-threaded (`NonNull` keeps it off
/// other threads): writes go only to bytes no reader holds, which the journal ensures by
/// writing each byte of a mapping once, past everything handed out, until nothing of the
/// mapping is referenced any more (see `Journal`'s spares).
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    seg: Segment,
}

impl Mapping {
    /// Allocates `len` bytes of the file behind `fd` (opened read-write) and maps them.
    /// The descriptor may be closed afterwards: the mapping keeps the file.
    pub(crate) fn new(fd: &OwnedFd, len: usize, seg: Segment) -> io::Result<Mapping> {
        fallocate(fd, FallocateFlags::empty(), 0, len as u64)?;
        // SAFETY: a fresh shared mapping of a file we own, `len` bytes long (allocated just
        // above), at an address of the kernel's choosing: no existing memory is affected.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Mapping { ptr, len, seg })
    }

    /// The segment it maps.
    pub fn seg(&self) -> Segment {
        self.seg
    }

    /// Gives it the number of the segment its file now is (a spare written over).
    pub(crate) fn renumber(&mut self, seg: Segment) {
        self.seg = seg;
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty (never: segments have a header).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes `[start, start + len)`, which were written before.
    ///
    /// # Panics
    /// If the range is outside the mapping (a bug in the caller, never input).
    pub fn bytes(&self, start: usize, len: usize) -> &[u8] {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len));
        // SAFETY: in bounds (checked above) of a live mapping; the journal writes no byte
        // of a range once it was handed out, so nothing changes under this borrow.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }

    /// Writes `parts` one after another from `at`; returns where they end.
    ///
    /// # Panics
    /// If they do not fit (the journal checks first).
    pub(crate) fn write(&self, at: usize, parts: &[&[u8]]) -> usize {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        assert!(at.checked_add(total).is_some_and(|end| end <= self.len));
        let mut to = at;
        for part in parts {
            // SAFETY: in bounds (checked above); the destination is past every range
            // handed out (or the mapping is referenced by nothing else), so it overlaps
            // no live borrow, and `part` is not in the mapping's unwritten tail.
            unsafe {
                std::ptr::copy_nonoverlapping(part.as_ptr(), self.ptr.as_ptr().add(to), part.len())
            };
            to += part.len();
        }
        to
    }

    /// Writes `value` at `at` after every write before it: what commits a record, so the
    /// compiler may not move the earlier writes after it (a crash between them must leave
    /// the record uncommitted, never committed and incomplete).
    pub(crate) fn commit_u64(&self, at: usize, value: u64) {
        fence(Ordering::Release);
        self.write(at, &[&value.to_le_bytes()]);
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no borrow of it outlives
        // `self` (`bytes` borrows `self`).
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
