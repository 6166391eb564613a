//! Sessions' retained output on disk, so that a restarted daemon replays what its
//! predecessor had read: every record a session's replay log takes (an output frame or an
//! event line, exactly as subscribers receive it) is appended here first.
//!
//! ```text
//! <state dir>/output/<n>.seg    {"genward_state":1,"kind":"output"}\n, then records:
//!                               u32 len | u64 seq | u64 pos | frame (len - 16 bytes)
//! ```
//!
//! All sessions share a few append-only *segments* (little-endian fields; `seq` is the
//! record's number in its session's log, `pos` the session output position it starts at,
//! the session itself is named inside the frame). One file per session would cost a
//! tmpfs page and an inode for each of 100,000 quiet sessions, and a mapping each would
//! run into `vm.max_map_count`; a shared log costs one open descriptor. A segment is
//! deleted once no session's replay log still holds a record in it; a quiet session that
//! would pin an old segment has its few records written again at the end (the caller
//! decides when, see `driver::logs`), so the files stay within about twice what the logs
//! retain.
//!
//! Appends are plain `writev`s, not `fsync`ed: this is about the daemon's own crash (the
//! kernel keeps what was written), on a RAM-backed directory that a power loss empties
//! anyway. A write cut short by the crash leaves a truncated last record, which reading
//! ignores; a new daemon never appends to an old segment.

use std::io::{self, IoSlice};
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use super::dir::Dir;
use super::format::{self, Kind};
use super::names::parse_decimal;
use super::Store;

/// The subdirectory of segments.
pub const OUTPUT_DIR: &str = "output";

/// A segment is closed once it holds this many bytes (it may exceed it by one record).
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// Bytes of a record before its frame: `len`, `seq`, `pos`.
pub const RECORD_HEADER: usize = 20;

/// The largest frame a record may hold: the largest output frame with room for its header
/// line, larger than any event line.
pub const MAX_FRAME: usize = crate::proto::framing::MAX_OUTPUT_PAYLOAD + 64 * 1024;

const SUFFIX: &str = ".seg";

/// Where a record was written: its segment's number.
pub type Segment = u64;

/// The open output journal: the segment being appended to, and the sizes of all.
#[derive(Debug)]
pub struct Journal {
    pub(crate) dir: Dir,
    pub(crate) bad: Dir,
    /// The segment appended to, once the first record needs it.
    current: Option<(Segment, OwnedFd)>,
    /// Number the next new segment gets.
    next: Segment,
    /// Bytes of every segment on disk, oldest first.
    pub(crate) sizes: std::collections::BTreeMap<Segment, u64>,
    /// Set after a failed write until a segment can be started again: appends are skipped
    /// (and counted) rather than retried on every read.
    failed: bool,
    /// Records not written since the daemon started (a full or failing directory).
    unwritten: u64,
}

impl Journal {
    /// Opens (creating) `output/` of the store; segments already there are read by
    /// [`Journal::load`] and stay until [`Journal::delete_below`] drops them.
    pub fn open(store: &Store) -> io::Result<Journal> {
        let dir = store.root.subdir(OUTPUT_DIR)?;
        let bad = store.root.subdir(super::aside::BAD_DIR)?;
        let mut sizes = std::collections::BTreeMap::new();
        let mut strays = Vec::new();
        dir.each_entry(|name, _, _| {
            match name.and_then(segment_of_file) {
                Some(n) => {
                    sizes.insert(n, 0);
                }
                None => strays.push(name.map(str::to_owned)),
            }
            true
        })?;
        for name in strays.into_iter().flatten() {
            super::aside::move_aside(&dir, OUTPUT_DIR, &name, &bad, "not a segment");
        }
        let next = sizes.keys().next_back().map_or(1, |n| n + 1);
        Ok(Journal {
            dir,
            bad,
            current: None,
            next,
            sizes,
            failed: false,
            unwritten: 0,
        })
    }

    /// Appends one record; returns the segment it went to, or `None` if it could not be
    /// written (logged once per failure spell; the daemon goes on without it).
    pub fn append(&mut self, seq: u64, pos: u64, frame: &[u8]) -> Option<Segment> {
        if frame.len() > MAX_FRAME {
            self.unwritten += 1;
            return None;
        }
        let roll = match &self.current {
            None => true,
            Some((n, _)) => self.sizes.get(n).copied().unwrap_or(0) >= SEGMENT_BYTES,
        };
        if roll && !self.roll() {
            self.unwritten += 1;
            return None;
        }
        let (n, fd) = self.current.as_ref()?;
        let n = *n;
        let mut header = [0u8; RECORD_HEADER];
        let len = (RECORD_HEADER - 4 + frame.len()) as u32;
        header[..4].copy_from_slice(&len.to_le_bytes());
        header[4..12].copy_from_slice(&seq.to_le_bytes());
        header[12..20].copy_from_slice(&pos.to_le_bytes());
        match write_all(fd, &header, frame) {
            Ok(()) => {
                *self.sizes.entry(n).or_insert(0) += (RECORD_HEADER + frame.len()) as u64;
                Some(n)
            }
            Err(e) => {
                log::error!(
                    "{}: writing retained output: {e}; output is kept in memory only until a new segment can be written",
                    self.dir.path().display()
                );
                // What was partly written is a truncated record: reading stops there,
                // so nothing more goes into this segment.
                self.current = None;
                self.failed = true;
                self.unwritten += 1;
                None
            }
        }
    }

    /// Starts a new segment (the previous one, if any, is closed).
    fn roll(&mut self) -> bool {
        let n = self.next;
        self.next += 1;
        self.current = None;
        let name = segment_file(n);
        let fd = match rfs::openat(
            &self.dir,
            name.as_str(),
            OFlags::WRONLY
                | OFlags::CREATE
                | OFlags::EXCL
                | OFlags::APPEND
                | OFlags::NOFOLLOW
                | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        ) {
            Ok(fd) => fd,
            Err(e) => {
                if !self.failed {
                    log::error!("{}: {e}", self.dir.path_of(&name).display());
                }
                self.failed = true;
                return false;
            }
        };
        let header = format::header_line(Kind::Output);
        if let Err(e) = write_all(&fd, &header, &[]) {
            if !self.failed {
                log::error!("{}: {e}", self.dir.path_of(&name).display());
            }
            let _ = self.dir.unlink(&name);
            self.failed = true;
            return false;
        }
        if self.failed {
            log::info!(
                "{}: writing retained output again ({} records were not written)",
                self.dir.path().display(),
                self.unwritten
            );
            self.failed = false;
        }
        self.sizes.insert(n, header.len() as u64);
        self.current = Some((n, fd));
        true
    }

    /// Deletes every segment numbered below `keep` (none of their records is retained any
    /// more), never the one being appended to.
    pub fn delete_below(&mut self, keep: Segment) {
        let current = self.current.as_ref().map(|(n, _)| *n);
        while let Some((&n, _)) = self.sizes.first_key_value() {
            if n >= keep || Some(n) == current {
                break;
            }
            self.sizes.remove(&n);
            if let Err(e) = self.dir.unlink(&segment_file(n)) {
                log::warn!("removing an output segment: {e}");
            }
        }
    }

    /// The oldest segment on disk.
    pub fn oldest(&self) -> Option<Segment> {
        self.sizes.keys().next().copied()
    }

    /// The segment being appended to (the newest), if one is open.
    pub fn current(&self) -> Option<Segment> {
        self.current.as_ref().map(|(n, _)| *n)
    }

    /// Bytes on disk in all segments.
    pub fn disk_bytes(&self) -> u64 {
        self.sizes.values().sum()
    }

    /// How many segments are on disk.
    pub fn segments(&self) -> usize {
        self.sizes.len()
    }
}

/// `<n>.seg`.
pub fn segment_file(n: Segment) -> String {
    format!("{n}{SUFFIX}")
}

/// The segment a file name in `output/` is, if it is one the daemon writes.
pub fn segment_of_file(file: &str) -> Option<Segment> {
    parse_decimal(file.strip_suffix(SUFFIX)?).filter(|&n| n > 0)
}

/// Writes `head` then `body` whole (`writev`, continued after a short write).
fn write_all(fd: &OwnedFd, mut head: &[u8], mut body: &[u8]) -> io::Result<()> {
    while !head.is_empty() || !body.is_empty() {
        let n = match rustix::io::writev(fd, &[IoSlice::new(head), IoSlice::new(body)]) {
            Ok(0) => return Err(io::Error::from(Errno::IO)),
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        let from_head = n.min(head.len());
        head = &head[from_head..];
        body = &body[n - from_head..];
    }
    Ok(())
}
