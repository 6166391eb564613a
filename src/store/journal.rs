//! Sessions' retained output on disk, so that a restarted daemon replays what its
//! predecessor had read: every record a session's replay log takes (an output frame or an
//! event line, exactly as subscribers receive it) is written here first.
//!
//! ```text
//! <state dir>/output/<n>.seg    {"genward_state":1,"kind":"output"}\n, u64 nonce, records:
//!                               u32 len | u64 nonce | u64 seq | u64 pos | frame
//! <state dir>/output/<n>.spare  a segment no longer needed, kept to be written over
//! <state dir>/output/positions  position ceilings of output not on disk (`positions`)
//! ```
//!
//! All sessions share a few *segments* (little-endian fields; `len` counts the bytes after
//! it, `seq` is the record's number in its session's log, `pos` the session output
//! position it starts at; the session itself is named inside the frame). One file per
//! session would cost a tmpfs page and an inode for each of 100,000 quiet sessions, and a
//! mapping each would run into `vm.max_map_count`; shared segments cost one open
//! descriptor. A segment is given up once no session's replay log still holds a record in
//! it; a quiet session that would pin an old segment has its few records written again at
//! the end (the caller decides when, see `driver::logs`), so the files stay within about
//! twice what the logs retain.
//!
//! Speed: a record is framed straight into its segment's shared mapping ([`Mapping`]), and
//! subscribers are sent those very bytes, so keeping output on disk costs no copy and no
//! system call per record. New pages are the one cost left (on tmpfs, allocating and
//! zeroing a page costs about as much as everything else the daemon does with its bytes),
//! so a segment given up that nothing references any more becomes a *spare* (at most
//! [`MAX_SPARES`], still mapped) and the next segment is written over it. A restarted
//! daemon maps the segments it finds read-only and replays their records from there
//! (`journal_read`): those are deleted when given up, never written over.
//!
//! A record is committed by its nonce: it is written with a zero nonce, then the
//! segment's nonce is written into it. Reading stops at the first record without the
//! segment's nonce, which is how the end is found in a segment written over a spare (the
//! old bytes there carry an older nonce) and how a record cut short by a crash is left out
//! (its nonce was never written). Each segment gets a fresh random nonce, written before
//! the file takes a segment's name. Nothing is `fsync`ed: this is about the daemon's own
//! crash (the kernel keeps what was written), on a RAM-backed directory that a power loss
//! empties anyway.

use std::io;
use std::os::fd::OwnedFd;
use std::rc::Rc;

use rustix::fs::{self as rfs, Mode, OFlags};

use super::dir::Dir;
use super::format::{self, Kind};
use super::mapping::Mapping;
use super::names::parse_decimal;
use super::Store;

/// The subdirectory of segments.
pub const OUTPUT_DIR: &str = "output";

/// A segment takes no new record once it holds this many bytes.
pub const SEGMENT_BYTES: u64 = 8 << 20;

/// Bytes of a record before its frame: `len`, `nonce`, `seq`, `pos`.
pub const RECORD_HEADER: usize = 28;

/// Segments given up but kept to be written over.
pub const MAX_SPARES: usize = 2;

/// The nonce after a segment's header line.
pub const NONCE_BYTES: usize = 8;

/// The largest frame a record may hold: the largest output frame with room for its header
/// line, larger than any event line.
pub const MAX_FRAME: usize = crate::proto::framing::MAX_OUTPUT_PAYLOAD + 64 * 1024;

/// Room for a segment's header line and nonce.
const SEGMENT_HEAD: usize = 128;

/// Every segment file's length: room for records up to [`SEGMENT_BYTES`] and one more of
/// the largest kind.
pub const SEGMENT_FILE_BYTES: usize =
    SEGMENT_HEAD + SEGMENT_BYTES as usize + RECORD_HEADER + MAX_FRAME;

const SUFFIX: &str = ".seg";
const SPARE_SUFFIX: &str = ".spare";

/// Where a record was written: its segment's number.
pub type Segment = u64;

/// A record's frame, written (or read back): its bytes are `map.bytes(start, len)`.
#[derive(Debug, Clone)]
pub struct Placed {
    /// The segment's mapping (kept alive by whoever holds the frame).
    pub map: Rc<Mapping>,
    /// Where the frame starts in it.
    pub start: usize,
    /// The frame's length.
    pub len: usize,
}

impl Placed {
    /// The frame's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.bytes(self.start, self.len)
    }
}

/// The segment being written.
#[derive(Debug)]
struct Current {
    map: Rc<Mapping>,
    /// Where the next record goes.
    end: usize,
    nonce: u64,
}

/// The open output journal: the segment being written, the spares, and the sizes of all.
#[derive(Debug)]
pub struct Journal {
    pub(crate) dir: Dir,
    pub(crate) bad: Dir,
    /// The segment written to, once the first record needs it.
    current: Option<Current>,
    /// Segments given up that nothing references, named `<n>.spare`, to be written over.
    spares: Vec<Rc<Mapping>>,
    /// Mappings of segments not given up yet (the current one too, and those read back),
    /// by number: whether one is still referenced elsewhere when it is given up decides
    /// between a spare and a release.
    live: std::collections::BTreeMap<Segment, Rc<Mapping>>,
    /// Number the next new segment gets.
    next: Segment,
    /// Bytes written in every segment on disk, oldest first (change them through
    /// [`Journal::set_size`], which keeps [`Journal::disk_bytes`] in step).
    pub(crate) sizes: std::collections::BTreeMap<Segment, u64>,
    /// The sum of `sizes`.
    disk: u64,
    /// Set after a failed write until a segment can be started again: appends are skipped
    /// (and counted) rather than retried on every read.
    failed: bool,
    /// Records not written since the daemon started (a full or failing directory).
    unwritten: u64,
}

impl Journal {
    /// Opens (creating) `output/` of the store; segments already there are read by
    /// [`Journal::load`] and stay until [`Journal::give_up`] is called for them. Spares a
    /// previous daemon left are deleted.
    pub fn open(store: &Store) -> io::Result<Journal> {
        let dir = store.root.subdir(OUTPUT_DIR)?;
        let bad = store.root.subdir(super::aside::BAD_DIR)?;
        let mut sizes = std::collections::BTreeMap::new();
        let mut spares = Vec::new();
        let mut strays = Vec::new();
        dir.each_entry(|name, _, _| {
            if name == Some(super::positions::POSITIONS_FILE) {
                // Not a segment: `positions` reads it.
            } else if let Some(n) = name.and_then(segment_of_file) {
                sizes.insert(n, 0);
            } else if let Some(n) = name.and_then(spare_of_file) {
                spares.push(n);
            } else {
                strays.push(name.map(str::to_owned));
            }
            true
        })?;
        for name in strays.into_iter().flatten() {
            super::aside::move_aside(&dir, OUTPUT_DIR, &name, &bad, "not a segment");
        }
        for n in &spares {
            dir.unlink(&spare_file(*n))?;
        }
        let newest = sizes.keys().chain(&spares).max().copied();
        Ok(Journal {
            dir,
            bad,
            current: None,
            spares: Vec::new(),
            live: std::collections::BTreeMap::new(),
            next: newest.map_or(1, |n| n + 1),
            sizes,
            disk: 0,
            failed: false,
            unwritten: 0,
        })
    }

    /// Writes one record whose frame is `parts` joined; returns where the frame is, or
    /// `None` if it could not be written (logged once per failure spell; the daemon goes
    /// on without it).
    pub fn append(&mut self, seq: u64, pos: u64, parts: &[&[u8]]) -> Option<Placed> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > MAX_FRAME {
            self.unwritten += 1;
            return None;
        }
        let full = self
            .current
            .as_ref()
            .is_none_or(|c| c.end as u64 >= SEGMENT_BYTES);
        if full && !self.roll() {
            self.unwritten += 1;
            return None;
        }
        let c = self.current.as_mut()?;
        let mut header = [0u8; RECORD_HEADER];
        header[..4].copy_from_slice(&((RECORD_HEADER - 4 + len) as u32).to_le_bytes());
        header[12..20].copy_from_slice(&seq.to_le_bytes());
        header[20..28].copy_from_slice(&pos.to_le_bytes());
        let at = c.end;
        c.map.write(at, &[&header]);
        let end = c.map.write(at + RECORD_HEADER, parts);
        // The nonce last: a record cut short by a crash has none, and is not read back.
        c.map.commit_u64(at + 4, c.nonce);
        c.end = end;
        let placed = Placed {
            map: c.map.clone(),
            start: at + RECORD_HEADER,
            len,
        };
        self.set_size(placed.map.seg(), Some(end as u64));
        Some(placed)
    }

    /// Starts a new segment (the previous one, if any, is closed), over a spare if there
    /// is one: its header and fresh nonce are written before it takes the segment's name,
    /// so none of its old records can be read as the new segment's.
    fn roll(&mut self) -> bool {
        let n = self.next;
        self.next += 1;
        self.current = None;
        let name = segment_file(n);
        let nonce = new_nonce(n);
        let mut head = format::header_line(Kind::Output);
        head.extend_from_slice(&nonce.to_le_bytes());
        let made = match self.spares.pop() {
            Some(spare) => self.reuse(spare, n, &name, &head),
            None => self.create(n, &name, &head),
        };
        let map = match made {
            Ok(map) => map,
            Err(e) => {
                if !self.failed {
                    log::error!(
                        "{}: {e}; output is kept in memory only until a segment can be written",
                        self.dir.path_of(&name).display()
                    );
                }
                self.failed = true;
                return false;
            }
        };
        if self.failed {
            log::info!(
                "{}: writing retained output again ({} records were not written)",
                self.dir.path().display(),
                self.unwritten
            );
            self.failed = false;
        }
        self.set_size(n, Some(head.len() as u64));
        self.live.insert(n, map.clone());
        self.current = Some(Current {
            map,
            end: head.len(),
            nonce,
        });
        true
    }

    fn create(&self, n: Segment, name: &str, head: &[u8]) -> io::Result<Rc<Mapping>> {
        let fd: OwnedFd = rfs::openat(
            &self.dir,
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::RUSR | Mode::WUSR,
        )?;
        match Mapping::new(&fd, SEGMENT_FILE_BYTES, n) {
            Ok(map) => {
                map.write(0, &[head]);
                Ok(Rc::new(map))
            }
            Err(e) => {
                let _ = self.dir.unlink(name);
                Err(e)
            }
        }
    }

    /// Writes over a spare (referenced by nothing but the journal): a new header and
    /// nonce first, then its new name. Its mapping is kept, so its pages are not faulted
    /// in again.
    fn reuse(
        &self,
        mut spare: Rc<Mapping>,
        n: Segment,
        name: &str,
        head: &[u8],
    ) -> io::Result<Rc<Mapping>> {
        let spare_name = spare_file(spare.seg());
        spare.write(0, &[head]);
        match (
            self.dir.rename_to(&spare_name, &self.dir, name),
            Rc::get_mut(&mut spare),
        ) {
            (Ok(()), Some(map)) => {
                map.renumber(n);
                Ok(spare)
            }
            (renamed, _) => {
                log::warn!("reusing an output segment failed ({renamed:?}); starting a new one");
                let _ = self.dir.unlink(&spare_name);
                let _ = self.dir.unlink(name);
                self.create(n, name, head)
            }
        }
    }

    /// Gives up segment `seg` (none of its records is retained any more; never the one
    /// being written). If nothing else references its mapping it becomes a spare (or is
    /// deleted); otherwise (frames in it still queued for clients) its file is deleted
    /// and `true` says that its memory goes only with the last reference, so the caller
    /// should let go of them soon.
    pub fn give_up(&mut self, seg: Segment) -> bool {
        if self.current() == Some(seg) || !self.sizes.contains_key(&seg) {
            return false;
        }
        self.set_size(seg, None);
        let name = segment_file(seg);
        let map = self.live.remove(&seg);
        let shared = map.as_ref().is_some_and(|m| Rc::strong_count(m) > 1);
        if !shared && self.spares.len() < MAX_SPARES {
            // A segment read back is mapped read-only: it is deleted, never written over.
            if let Some(map) = map.filter(|m| m.is_writable()) {
                if self
                    .dir
                    .rename_to(&name, &self.dir, &spare_file(seg))
                    .is_ok()
                {
                    self.spares.push(map);
                    return false;
                }
            }
        }
        if let Err(e) = self.dir.unlink(&name) {
            log::warn!("removing an output segment: {e}");
        }
        shared
    }

    /// Keeps the mapping of a segment read back (see `Journal::load`) until the segment is
    /// given up, so that [`Journal::give_up`] can tell whether frames in it are still held.
    pub(crate) fn keep_read(&mut self, map: Rc<Mapping>) {
        self.live.insert(map.seg(), map);
    }

    /// Records that segment `seg` holds `bytes` (`None`: it is gone).
    pub(crate) fn set_size(&mut self, seg: Segment, bytes: Option<u64>) {
        let old = match bytes {
            Some(b) => self.sizes.insert(seg, b),
            None => self.sizes.remove(&seg),
        };
        self.disk = self.disk - old.unwrap_or(0) + bytes.unwrap_or(0);
    }

    /// Every segment on disk (not the spares), oldest first.
    pub fn segment_numbers(&self) -> Vec<Segment> {
        self.sizes.keys().copied().collect()
    }

    /// The segment being written (the newest), if one is open.
    pub fn current(&self) -> Option<Segment> {
        self.current.as_ref().map(|c| c.map.seg())
    }

    /// Bytes written in all segments (spares, and what a spare held beyond what is
    /// written over it, are not counted).
    pub fn disk_bytes(&self) -> u64 {
        self.disk
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

/// `<n>.spare`.
fn spare_file(n: Segment) -> String {
    format!("{n}{SPARE_SUFFIX}")
}

fn spare_of_file(file: &str) -> Option<Segment> {
    parse_decimal(file.strip_suffix(SPARE_SUFFIX)?).filter(|&n| n > 0)
}

/// A segment's nonce: random (std's per-process random hash keys, mixed with the segment
/// number and the time), never zero.
pub(crate) fn new_nonce(n: Segment) -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(n);
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish().max(1)
}
