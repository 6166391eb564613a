//! A journal segment mapped into the daemon's memory, shared with its file: what the
//! daemon writes here is in the file (the page cache) at once, so it outlives a crash of
//! the daemon, and the same bytes are what subscribers are sent — the journal costs no
//! copy of its own.
//!
//! The file's whole length is allocated before it is mapped (`fallocate`), so a write can
//! never meet a page the filesystem cannot provide (which would be `SIGBUS`, not an
//! error); an allocation that fails fails the segment, before the mapping exists.
//!
//! A segment a previous daemon wrote is mapped read-only when it is read back
//! ([`Mapping::read_only`]): its records are replayed from the file's own pages, so a
//! restart costs no copy of the retained output on the heap, and only the pages holding
//! records are ever touched.

use std::io;
use std::os::fd::OwnedFd;
use std::ptr::NonNull;
use std::sync::atomic::{fence, Ordering};

use rustix::fs::{fallocate, FallocateFlags};
use rustix::mm::{mmap, munmap, MapFlags, ProtFlags};

use super::journal::Segment;

/// One segment file, mapped shared (writable, or read-only for one read back).
/// Single-threaded (`NonNull` keeps it off other threads): writes go only to bytes no
/// reader holds, which the journal ensures by writing each byte of a mapping once, past
/// everything handed out, until nothing of the mapping is referenced any more (see
/// `Journal`'s spares).
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    seg: Segment,
    /// Mapped writable: a segment this daemon made (a read-only one is never written, so
    /// never becomes a spare).
    writable: bool,
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
        Ok(Mapping {
            ptr,
            len,
            seg,
            writable: true,
        })
    }

    /// Maps the first `len` bytes (`len > 0`, at most the file's size) of the file behind
    /// `fd` read-only, to read a segment back without copying it: nothing is read until a
    /// page is touched. The descriptor may be closed afterwards.
    ///
    /// The file must not shrink while mapped (touching a page past its end is `SIGBUS`):
    /// segments are the daemon's own files (checked: ours, closed to others, one name),
    /// in a directory only the lease holder writes, and no segment is ever truncated —
    /// the same trust the writable mapping of a segment being written relies on.
    pub(crate) fn read_only(fd: &OwnedFd, len: usize, seg: Segment) -> io::Result<Mapping> {
        // SAFETY: a fresh shared, read-only mapping of a file, `len` bytes (no more than
        // its size, checked by the caller), at an address of the kernel's choosing: no
        // existing memory is affected.
        let ptr = unsafe {
            mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ,
                MapFlags::SHARED,
                fd,
                0,
            )?
        };
        let ptr = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap: null"))?;
        Ok(Mapping {
            ptr,
            len,
            seg,
            writable: false,
        })
    }

    /// Whether it may be written (a segment this daemon made, not one read back).
    pub fn is_writable(&self) -> bool {
        self.writable
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

    /// The bytes `[start, start + len)`, which were written before (or are the file's,
    /// for a segment read back).
    ///
    /// # Panics
    /// If the range is outside the mapping (a bug in the caller, never input).
    pub fn bytes(&self, start: usize, len: usize) -> &[u8] {
        assert!(start.checked_add(len).is_some_and(|end| end <= self.len));
        // SAFETY: in bounds (checked above) of a live mapping; the journal writes no byte
        // of a range once it was handed out (and never writes a read-only mapping), and
        // no other process writes a segment (the lease), so nothing changes under this
        // borrow.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(start), len) }
    }

    /// Writes `parts` one after another from `at`; returns where they end.
    ///
    /// # Panics
    /// If they do not fit (the journal checks first), or the mapping is read-only (the
    /// journal only writes segments it made).
    pub(crate) fn write(&self, at: usize, parts: &[&[u8]]) -> usize {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        assert!(self.writable, "a read-only mapping is never written");
        assert!(at.checked_add(total).is_some_and(|end| end <= self.len));
        let mut to = at;
        for part in parts {
            // SAFETY: in bounds of a writable mapping (both checked above); the
            // destination is past every range handed out (or the mapping is referenced
            // by nothing else), so it overlaps no live borrow, and `part` is not in the
            // mapping's unwritten tail.
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
        // SAFETY: the mapping made in `new` or `read_only`, unmapped once; no borrow of
        // it outlives `self` (`bytes` borrows `self`).
        let _ = unsafe { munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}
