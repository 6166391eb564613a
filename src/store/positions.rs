//! Session output positions that never go back, even when the output behind them could
//! not be kept on disk.
//!
//! A restarted daemon continues each session's positions from the newest record the
//! journal holds. That is exact while every record reaches the journal; but when a
//! segment cannot be written (a full directory, a file-size limit) records are kept in
//! memory only while positions advance, and a crash then loses them: without more, the
//! next daemon would hand out positions clients already saw — for other bytes, which a
//! client that drops what it has seen as a duplicate would silently lose.
//!
//! So while a session's newest record is not on disk, a *ceiling* is reserved for it
//! here: no position at or above it has been handed out. It is raised [`RESERVE`] bytes
//! ahead at a time, before the record that passes it reaches anyone (one write per
//! 64 MiB of output, never one per record), cleared once a record of the session reaches
//! the journal again (the journal then says where it is), and set to the exact end at a
//! clean shutdown or an upgrade. A restarted daemon starts each session at the higher of
//! its newest record and its ceiling: after a crash the lost range is a gap subscribers
//! are told about (`dropped`), never a position used twice.
//!
//! ```text
//! <state dir>/output/positions   {"genward_state":1,"kind":"positions"}\n, padding,
//!                                u64 nonce at 56, then 32-byte slots from 64:
//!                                u64 key | u64 ceiling | u64 check | 8 zero bytes
//! ```
//!
//! The file is written *in place*: a slot is a `pwrite` over bytes allocated (written as
//! zeros) while there was room — at start, and whenever sessions are added — so it costs
//! no new space on a full tmpfs or ext4. `key` is a 64-bit hash of the session's name
//! (0: a free slot); two names of one hash share the higher ceiling, which only makes a
//! gap. `check` mixes the file's random nonce, the slot's index, key and ceiling: a slot
//! that does not check was damaged, and then no ceiling in the file can be trusted — the
//! file is set aside, and the caller starts every session a [`MARGIN`] above what the
//! journal holds. A missing file held no ceiling (the daemon makes it at its start).
//! Nothing is `fsync`ed, as for the journal: this is about the daemon's own crash.

use std::collections::HashMap;
use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, Mode, OFlags};
use rustix::io::Errno;

use super::aside::move_aside;
use super::dir::Dir;
use super::format::{self, Kind};
use super::journal::OUTPUT_DIR;
use super::strict_read::{check_ours, read_to_limit, ReadError};

/// The file, in `output/`.
pub const POSITIONS_FILE: &str = "positions";

/// How far ahead of a session's end a ceiling is reserved.
pub const RESERVE: u64 = 64 << 20;

/// How far above its newest record a session starts when its ceiling is unknown (the file
/// damaged): more than any spell of output kept in memory only, far below what
/// clients count to (2^53 is exact in JavaScript).
pub const MARGIN: u64 = 1 << 40;

/// Bytes before the first slot: the header line, padding, the nonce.
const HEAD: usize = 64;

/// Bytes of a slot.
const SLOT: usize = 32;

/// Bytes of a slot written (the rest stays zero).
const WRITTEN: usize = 24;

/// Most slots a file may have: more than the sessions a daemon takes back.
const MAX_SLOTS: usize = 1 << 21;

/// Free slots kept allocated for sessions added while nothing can be allocated.
pub const HEADROOM: usize = 1024;

/// What the file said about the ceilings of a previous daemon.
#[derive(Debug)]
pub enum Prior {
    /// The ceiling of each session key, and its slot.
    Read(HashMap<u64, (u32, u64)>),
    /// No file.
    Missing,
    /// A file that could not be trusted (set aside).
    Bad,
}

/// The open file: its slots, and which of them are free.
#[derive(Debug)]
pub struct Positions {
    file: OwnedFd,
    nonce: u64,
    /// Slots allocated in the file.
    slots: usize,
    /// Free slots, taken from the end.
    free: Vec<u32>,
    /// A failed write was logged (until one succeeds).
    failing: bool,
}

/// A session's key in the file: FNV-1a of its name, never 0.
pub fn key(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h.max(1)
}

impl Positions {
    /// Opens the file in `dir` (`output/`), reading what a previous daemon reserved: the
    /// slots it names stay taken until the caller [`keep`](Self::set)s or
    /// [`clear`](Self::clear)s them. A damaged or foreign file is moved to `bad` and a new
    /// one made, with room for `sessions` and [`HEADROOM`] more. `None` if no file can be
    /// made (logged): positions are then as safe as the journal alone keeps them.
    pub fn open(dir: &Dir, bad: &Dir, sessions: usize) -> (Option<Positions>, Prior) {
        let prior = match read(dir) {
            Ok(Some((file, nonce, slots))) => {
                let mut p = Positions {
                    file,
                    nonce,
                    slots: slots.len(),
                    free: Vec::new(),
                    failing: false,
                };
                let mut taken = HashMap::new();
                for (i, &(key, ceiling)) in slots.iter().enumerate().rev() {
                    if key == 0 {
                        p.free.push(i as u32);
                    } else {
                        taken.insert(key, (i as u32, ceiling));
                    }
                }
                p.ensure(sessions);
                return (Some(p), Prior::Read(taken));
            }
            Ok(None) => Prior::Missing,
            Err(why) => {
                if move_aside(dir, OUTPUT_DIR, POSITIONS_FILE, bad, &why).is_none() {
                    let _ = dir.unlink(POSITIONS_FILE);
                }
                Prior::Bad
            }
        };
        match create(dir, sessions + HEADROOM) {
            Ok(p) => (Some(p), prior),
            Err(e) => {
                log::error!(
                    "{}: {e}; output positions kept in memory only could repeat after a crash",
                    dir.path_of(POSITIONS_FILE).display()
                );
                (None, prior)
            }
        }
    }

    /// Keeps a slot allocated for each of `sessions` and [`HEADROOM`] / 2 more (each
    /// session takes at most one), adding [`HEADROOM`] beyond `sessions` when there are
    /// fewer: zeros written at the end, allocated now, while there may be room, so that a
    /// reservation later needs none. A failure is logged and tried again at the next call.
    pub fn ensure(&mut self, sessions: usize) {
        if self.slots >= sessions.saturating_add(HEADROOM / 2) || self.slots >= MAX_SLOTS {
            return;
        }
        let want = sessions.saturating_add(HEADROOM).min(MAX_SLOTS);
        let more = want - self.slots;
        let zeros = vec![0u8; more * SLOT];
        match write_all(&self.file, &zeros, (HEAD + self.slots * SLOT) as u64) {
            Ok(()) => {
                let first = self.slots as u32;
                self.slots = want;
                // Taken from the end: the lowest first.
                let mut added: Vec<u32> = (first..want as u32).rev().collect();
                added.append(&mut self.free);
                self.free = added;
            }
            Err(e) => self.failed(&e),
        }
    }

    /// Takes a free slot for `key` and writes `ceiling` in it; `None` if there is none
    /// (logged) or the write failed.
    pub fn take(&mut self, key: u64, ceiling: u64) -> Option<u32> {
        if self.free.is_empty() {
            self.ensure(self.slots + 1);
        }
        let Some(slot) = self.free.pop() else {
            self.failed(&io::Error::other("no free slot"));
            return None;
        };
        if self.set(slot, key, ceiling) {
            Some(slot)
        } else {
            self.free.push(slot);
            None
        }
    }

    /// Writes `ceiling` for `key` in `slot`, in place. Returns whether it was written.
    pub fn set(&mut self, slot: u32, key: u64, ceiling: u64) -> bool {
        let mut bytes = [0u8; WRITTEN];
        bytes[..8].copy_from_slice(&key.to_le_bytes());
        bytes[8..16].copy_from_slice(&ceiling.to_le_bytes());
        bytes[16..24].copy_from_slice(&check(self.nonce, slot, key, ceiling).to_le_bytes());
        self.write_slot(slot, &bytes)
    }

    /// Frees `slot` (zeros written over it).
    pub fn clear(&mut self, slot: u32) {
        if self.write_slot(slot, &[0u8; WRITTEN]) {
            self.free.push(slot);
        }
    }

    fn write_slot(&mut self, slot: u32, bytes: &[u8; WRITTEN]) -> bool {
        let at = (HEAD + slot as usize * SLOT) as u64;
        match write_all(&self.file, bytes, at) {
            Ok(()) => {
                if self.failing {
                    log::info!("output positions are reserved on disk again");
                    self.failing = false;
                }
                true
            }
            Err(e) => {
                self.failed(&e);
                false
            }
        }
    }

    fn failed(&mut self, e: &io::Error) {
        if !self.failing {
            log::error!(
                "reserving output positions: {e}; positions of output kept in memory only could repeat after a crash"
            );
        }
        self.failing = true;
    }
}

/// The check of a slot: its fields mixed with the file's nonce.
fn check(nonce: u64, slot: u32, key: u64, ceiling: u64) -> u64 {
    mix(nonce ^ mix(u64::from(slot) ^ mix(key ^ mix(ceiling))))
}

/// A 64-bit finalizer (splitmix64's): every input bit moves every output bit.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The file opened for writing, its nonce and its slots (key, ceiling); `None` if missing,
/// or why it is not to be trusted.
#[allow(clippy::type_complexity)]
fn read(dir: &Dir) -> Result<Option<(OwnedFd, u64, Vec<(u64, u64)>)>, String> {
    let file = match rfs::openat(
        dir,
        POSITIONS_FILE,
        OFlags::RDWR | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(ReadError::NotRegular("symlink").to_string()),
        Err(e) => return Err(ReadError::Unopenable(e).to_string()),
    };
    let size = check_ours(&file).map_err(|e| e.to_string())?;
    let max = HEAD + MAX_SLOTS * SLOT;
    let mut bytes = Vec::new();
    read_to_limit(&file, size, max, &mut bytes).map_err(|e| e.to_string())?;
    format::check_header(&bytes, Kind::Positions).map_err(|e| e.to_string())?;
    if bytes.len() < HEAD || (bytes.len() - HEAD) % SLOT != 0 {
        return Err(format!(
            "{} bytes is not a whole number of slots",
            bytes.len()
        ));
    }
    let nonce = u64::from_le_bytes(bytes[HEAD - 8..HEAD].try_into().expect("8 bytes"));
    if nonce == 0 {
        return Err("no nonce".into());
    }
    let mut slots = Vec::with_capacity((bytes.len() - HEAD) / SLOT);
    for (i, s) in bytes[HEAD..].chunks_exact(SLOT).enumerate() {
        let field = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
        let (key, ceiling, sum) = (field(0), field(8), field(16));
        if key == 0 {
            if s.iter().any(|&b| b != 0) {
                return Err(format!("slot {i}: a free slot that is not blank"));
            }
        } else if sum != check(nonce, i as u32, key, ceiling) || s[WRITTEN..] != [0u8; 8] {
            return Err(format!("slot {i} is damaged"));
        }
        slots.push((key, ceiling));
    }
    Ok(Some((file, nonce, slots)))
}

/// A new file with `slots` free slots (made in place: a crash while it is written leaves a
/// file the next start finds damaged, and so starts above it).
fn create(dir: &Dir, slots: usize) -> io::Result<Positions> {
    let slots = slots.min(MAX_SLOTS);
    let file = rfs::openat(
        dir,
        POSITIONS_FILE,
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )
    .map_err(|e| dir.io(e))?;
    let nonce = super::journal::new_nonce(slots as u64);
    let mut bytes = format::header_line(Kind::Positions);
    bytes.resize(HEAD + slots * SLOT, 0);
    bytes[HEAD - 8..HEAD].copy_from_slice(&nonce.to_le_bytes());
    if let Err(e) = write_all(&file, &bytes, 0) {
        let _ = dir.unlink(POSITIONS_FILE);
        return Err(e);
    }
    Ok(Positions {
        file,
        nonce,
        slots,
        free: (0..slots as u32).rev().collect(),
        failing: false,
    })
}

/// Writes all of `bytes` at `at`.
fn write_all(file: &OwnedFd, mut bytes: &[u8], mut at: u64) -> io::Result<()> {
    while !bytes.is_empty() {
        match rustix::io::pwrite(file, bytes, at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => {
                bytes = &bytes[n..];
                at += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;
    use crate::testkit::scratch::ScratchDir;

    fn dirs(d: &ScratchDir) -> (Dir, Dir) {
        let store = Store::open(d).unwrap();
        (
            store.root.subdir(OUTPUT_DIR).unwrap(),
            store.root.subdir(crate::store::aside::BAD_DIR).unwrap(),
        )
    }

    /// Ceilings written in place come back, each under its key; cleared slots are free.
    #[test]
    fn ceilings_written_in_place_are_read_back() {
        let d = ScratchDir::new("positions-rw");
        let (dir, bad) = dirs(&d);
        let (p, prior) = Positions::open(&dir, &bad, 3);
        assert!(matches!(prior, Prior::Missing));
        let mut p = p.unwrap();
        let a = p.take(key("a"), 100).unwrap();
        let b = p.take(key("b"), 200).unwrap();
        assert!(p.set(a, key("a"), 150));
        p.clear(b);
        drop(p);
        let (_, prior) = Positions::open(&dir, &bad, 3);
        let Prior::Read(found) = prior else {
            panic!("{prior:?}")
        };
        assert_eq!(found.len(), 1);
        assert_eq!(found[&key("a")], (a, 150));
    }

    /// A slot changed on disk is caught: the file is set aside, and nothing in it believed.
    #[test]
    fn a_damaged_slot_sets_the_file_aside() {
        let d = ScratchDir::new("positions-bad");
        let (dir, bad) = dirs(&d);
        let mut p = Positions::open(&dir, &bad, 1).0.unwrap();
        let slot = p.take(key("a"), 100).unwrap();
        drop(p);
        let path = dir.path_of(POSITIONS_FILE);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEAD + slot as usize * SLOT + 8] ^= 1; // the ceiling's lowest bit
        std::fs::write(&path, bytes).unwrap();
        let (p, prior) = Positions::open(&dir, &bad, 1);
        assert!(matches!(prior, Prior::Bad), "{prior:?}");
        assert!(p.is_some(), "a new file is made");
        let aside = std::fs::read_dir(d.join("bad")).unwrap().count();
        assert_eq!(aside, 1);
    }
}
