//! One daemon per state directory: an exclusive `flock` on `<state-dir>/lease`, held for
//! the daemon's lifetime, with the holder's pid, identity token and start time written
//! inside.
//!
//! `flock` locks die with the process, so a daemon that crashed normally leaves a lease
//! the next one simply takes. The record inside is for the other case: the lock still
//! held although its holder is gone — a process that inherited the descriptor (a child
//! between `fork` and `exec`) keeps it. The record's identity token tells: if the
//! recorded pid is no longer the process that wrote it (`mismatch`), the lease is stale
//! and is taken over by renaming a fresh, locked lease file over it; the old lock then
//! holds only a file no one can open. If the holder is alive (`match`), or cannot be told
//! (`unverifiable`), the lease is refused, naming the holder.
//!
//! A pid means something only in its PID namespace: a daemon in a container and one
//! outside it (or in another container) that share the directory would each find some
//! other process, or none, under the other's pid, and take a live lease over. The record
//! names the holder's PID namespace; a holder in another one is never verified here, so
//! its lease is refused.
//!
//! Acquisitions are serialized by a second, brief `flock` on the directory itself, held
//! while the lease is taken and its record written: a second daemon never reads a record
//! half written, nor one about to be replaced, and two cannot take over at once.

use std::fmt;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, flock, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use super::atomic::temporary_name;
use super::dir::{Dir, DirError};
use super::format::{self, FormatError, Kind};
use super::strict_read::{check_ours, read_to_limit, ReadError};
use crate::proto::duration::format_compact;
use crate::proto::json::{FieldError, Limits};
use crate::sys::identity::{self, Observed, Verdict};

/// The lease's file, in the state directory.
pub const LEASE_FILE: &str = "lease";

const MAX_FILE: usize = 1024;

const LIMITS: Limits = Limits {
    max_len: MAX_FILE,
    max_depth: 1,
    max_string_len: identity::MAX_TOKEN_LEN,
    max_elements: 8,
};

/// How long to wait for another daemon's acquisition in progress (it takes well under a
/// millisecond; a longer one is stuck).
const DIR_LOCK_PATIENCE: Duration = Duration::from_secs(2);

/// A held lease; dropping it releases the lock.
#[derive(Debug)]
pub struct Lease {
    _file: OwnedFd,
}

/// Who holds (or held) a lease, as its record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// Its pid.
    pub pid: u32,
    /// Its identity token, if it could read its own.
    pub identity: Option<String>,
    /// When it took the lease, Unix milliseconds (unknown in an older daemon's record).
    pub since_unix_ms: Option<u64>,
    /// The inode of its PID namespace (`/proc/self/ns/pid`), the one its pid is in
    /// (unknown in an older daemon's record, or if it could not read it).
    pub pid_ns: Option<u64>,
}

/// Why the lease could not be taken.
#[derive(Debug)]
pub enum LeaseError {
    /// Another daemon holds it: alive (`verified`), or it cannot be told (then never
    /// taken over). `holder` is `None` when the record names no one.
    Held {
        holder: Option<Holder>,
        verified: bool,
    },
    /// A daemon of another PID namespace holds it (or ours cannot be read): its pid
    /// cannot be checked from here, so it is never taken over.
    Foreign { holder: Holder },
    /// Another daemon has been taking the lease for longer than an acquisition takes.
    Busy,
    /// The directory is unusable or a system call failed.
    Io(io::Error),
}

impl fmt::Display for LeaseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaseError::Held {
                holder: Some(h),
                verified: true,
            } => {
                write!(f, "another genward daemon (pid {}", h.pid)?;
                if let Some(held) = h.since_unix_ms.and_then(held_for) {
                    write!(f, ", holding it for {held}")?;
                }
                f.write_str(") owns this state directory")
            }
            LeaseError::Held {
                holder: Some(h),
                verified: false,
            } => write!(
                f,
                "the lease is held, by pid {} according to its record, which could not be verified; not taking it over",
                h.pid
            ),
            LeaseError::Held { holder: None, .. } => write!(
                f,
                "the lease is held by a process that left no readable record; not taking it over"
            ),
            LeaseError::Foreign { holder } => {
                write!(
                    f,
                    "another genward daemon (pid {} of another PID namespace",
                    holder.pid
                )?;
                if let Some(held) = holder.since_unix_ms.and_then(held_for) {
                    write!(f, ", holding it for {held}")?;
                }
                f.write_str(") owns this state directory: daemons in different containers, or in one and on the host, cannot share a state directory; not taking it over")
            }
            LeaseError::Busy => write!(
                f,
                "another genward daemon has been starting on this state directory for over {}s",
                DIR_LOCK_PATIENCE.as_secs()
            ),
            LeaseError::Io(e) => write!(f, "lease: {e}"),
        }
    }
}

impl std::error::Error for LeaseError {}

impl From<DirError> for LeaseError {
    fn from(e: DirError) -> Self {
        LeaseError::Io(e.into())
    }
}

fn held_for(since_unix_ms: u64) -> Option<String> {
    let now = now_unix_ms()?;
    Some(format_compact(Duration::from_millis(
        now.saturating_sub(since_unix_ms),
    )))
}

fn now_unix_ms() -> Option<u64> {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).ok()?;
    u64::try_from(d.as_millis()).ok()
}

impl Lease {
    /// The lease file's descriptor: an upgrade keeps it open across `execve`, and the
    /// lock with it (a `flock` belongs to the open file, not to the program).
    pub fn as_raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(&self._file)
    }

    /// The lease held by the program that re-executed into this one: its inherited
    /// descriptor, still locked, whose record names this same process.
    pub fn inherited(file: OwnedFd) -> Lease {
        Lease { _file: file }
    }

    /// Takes the lease in `dir` (the state directory, already verified private) without
    /// waiting for its holder: refused while a live daemon holds it, taken over when its
    /// holder is verifiably gone.
    pub fn acquire(dir: &Path) -> Result<Lease, LeaseError> {
        let root = Dir::open(dir)?;
        lock_dir(&root)?;
        // `root`'s lock is released when it is dropped, after the record is written.
        let file = match open_lease(&root)? {
            Ok(file) => file,
            Err(why) => {
                log::warn!(
                    "{}: {why}; replacing it",
                    root.path_of(LEASE_FILE).display()
                );
                return take_over(&root);
            }
        };
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                write_record(&file).map_err(|e| LeaseError::Io(root.io(e)))?;
                Ok(Lease { _file: file })
            }
            Err(Errno::WOULDBLOCK) => {
                let holder = read_holder(&file);
                if let Some(h) = holder.as_ref().filter(|h| !in_our_pid_namespace(h)) {
                    return Err(LeaseError::Foreign { holder: h.clone() });
                }
                let token = holder.as_ref().and_then(|h| h.identity.as_deref());
                let verdict = match &holder {
                    Some(h) => identity::verify(h.pid as i32, token, None),
                    None => Verdict::Unverifiable,
                };
                match verdict {
                    Verdict::Match => Err(LeaseError::Held {
                        holder,
                        verified: true,
                    }),
                    Verdict::Unverifiable => Err(LeaseError::Held {
                        holder,
                        verified: false,
                    }),
                    Verdict::Mismatch => {
                        if let Some(h) = &holder {
                            log::warn!(
                                "taking over the lease of {}: its holder (pid {}) is gone, the lock was held by a process that inherited it",
                                dir.display(),
                                h.pid
                            );
                        }
                        take_over(&root)
                    }
                }
            }
            Err(e) => Err(LeaseError::Io(root.io(e))),
        }
    }
}

/// Takes the directory's own lock, retrying briefly while another acquisition holds it.
fn lock_dir(root: &Dir) -> Result<(), LeaseError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        match flock(root, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(()),
            Err(Errno::WOULDBLOCK) if start.elapsed() < DIR_LOCK_PATIENCE => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(Errno::WOULDBLOCK) => return Err(LeaseError::Busy),
            Err(e) => return Err(LeaseError::Io(root.io(e))),
        }
    }
}

/// Opens (creating) the lease file: the outer error is the system's, the inner says why
/// the entry there is not a lease file of ours (a symlink, a directory, someone else's).
fn open_lease(root: &Dir) -> Result<Result<OwnedFd, String>, LeaseError> {
    let flags = OFlags::RDWR
        | OFlags::CREATE
        | OFlags::NOFOLLOW
        | OFlags::NONBLOCK
        | OFlags::NOCTTY
        | OFlags::CLOEXEC;
    let fd = match rfs::openat(root, LEASE_FILE, flags, Mode::RUSR | Mode::WUSR) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Ok(Err("a symlink, not a lease file".into())),
        Err(Errno::ISDIR) => return Ok(Err("a directory, not a lease file".into())),
        // Mode 000, or another user's file: not one we wrote (ours are 0600, ours).
        Err(e @ (Errno::ACCESS | Errno::PERM)) => {
            return Ok(Err(format!(
                "cannot be opened ({e}), not a lease file of ours"
            )))
        }
        Err(e) => return Err(LeaseError::Io(root.io(e))),
    };
    match check_ours(&fd) {
        Ok(_) => Ok(Ok(fd)),
        Err(ReadError::Io(e)) => Err(LeaseError::Io(e)),
        Err(e) => Ok(Err(e.to_string())),
    }
}

/// Replaces the lease file with a fresh one, already locked and holding our record.
/// Called with the directory locked, so no one else is taking it meanwhile.
fn take_over(root: &Dir) -> Result<Lease, LeaseError> {
    let io = |e: Errno| LeaseError::Io(root.io(e));
    let tmp = temporary_name(LEASE_FILE);
    root.unlink(&tmp).map_err(LeaseError::Io)?;
    let file = rfs::openat(
        root,
        tmp.as_str(),
        OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::RUSR | Mode::WUSR,
    )
    .map_err(io)?;
    let placed = flock(&file, FlockOperation::NonBlockingLockExclusive)
        .and_then(|()| write_record(&file))
        .and_then(|()| rfs::renameat(root, tmp.as_str(), root, LEASE_FILE));
    if let Err(e) = placed {
        let _ = root.unlink(&tmp);
        return Err(io(e));
    }
    root.sync().map_err(LeaseError::Io)?;
    Ok(Lease { _file: file })
}

/// Whether `h`'s pid can be looked up here: it names the PID namespace it was written in,
/// and that is ours. A record without one (an older daemon's) is taken to be ours, as
/// before: its pid is verified as it always was.
fn in_our_pid_namespace(h: &Holder) -> bool {
    match h.pid_ns {
        None => true,
        Some(theirs) => identity::pid_namespace().is_ok_and(|ours| ours == theirs),
    }
}

/// Writes our record into the (locked) lease file.
fn write_record(file: &OwnedFd) -> Result<(), Errno> {
    let identity = match identity::observe(std::process::id() as i32, None) {
        Observed::Token(token) => Some(token),
        _ => None,
    };
    let me = Holder {
        pid: std::process::id(),
        identity,
        since_unix_ms: now_unix_ms(),
        pid_ns: identity::pid_namespace().ok(),
    };
    let bytes = encode_holder(&me);
    rfs::ftruncate(file, 0)?;
    let mut at = 0;
    while at < bytes.len() {
        match rustix::io::pwrite(file, &bytes[at..], at as u64) {
            Ok(0) => return Err(Errno::IO),
            Ok(n) => at += n,
            Err(Errno::INTR) => {}
            Err(e) => return Err(e),
        }
    }
    rfs::fsync(file)
}

fn read_holder(file: &OwnedFd) -> Option<Holder> {
    let mut buf = Vec::new();
    let size = check_ours(file).ok()?;
    read_to_limit(file, size, MAX_FILE, &mut buf).ok()?;
    decode_holder(&buf).ok()
}

/// The lease record for `h`.
pub fn encode_holder(h: &Holder) -> Vec<u8> {
    format::encode(Kind::Lease, |w| {
        w.u64("pid", h.pid.into());
        match &h.identity {
            Some(token) => w.str("identity", token),
            None => w.null("identity"),
        };
        match h.since_unix_ms {
            Some(ms) => w.u64("since_unix_ms", ms),
            None => w.null("since_unix_ms"),
        };
        match h.pid_ns {
            Some(ns) => w.u64("pid_ns", ns),
            None => w.null("pid_ns"),
        };
    })
}

/// Decodes a lease record, or an older daemon's (its pid alone, on one line).
pub fn decode_holder(bytes: &[u8]) -> Result<Holder, FormatError> {
    if let Some(pid) = legacy_pid(bytes) {
        return Ok(Holder {
            pid,
            identity: None,
            since_unix_ms: None,
            pid_ns: None,
        });
    }
    // Members a later version adds are ignored, not refused: the record is read by
    // whatever keeper runs, which may be older than the daemon that wrote it (an upgrade
    // keeps the keeper), and must still know its daemon by the members it knows.
    let o = format::decode(bytes, Kind::Lease, &LIMITS)?;
    let pid = o.req_u64("pid")?;
    let pid = u32::try_from(pid)
        .ok()
        .filter(|&p| p > 0 && p <= i32::MAX as u32)
        .ok_or_else(|| FieldError::invalid("pid", format!("{pid} is not a pid")))?;
    let identity = match o.opt_str("identity")? {
        None => None,
        Some(t) if identity::parse(t).is_some() => Some(t.to_owned()),
        Some(_) => return Err(FieldError::invalid("identity", "not an identity token").into()),
    };
    Ok(Holder {
        pid,
        identity,
        since_unix_ms: o.opt_u64("since_unix_ms")?,
        pid_ns: o.opt_u64("pid_ns")?,
    })
}

/// `<pid>\n`, as daemons before the versioned record wrote it.
fn legacy_pid(bytes: &[u8]) -> Option<u32> {
    let line = bytes.strip_suffix(b"\n")?;
    let text = std::str::from_utf8(line).ok()?;
    let pid = crate::store::names::parse_decimal(text)?;
    u32::try_from(pid)
        .ok()
        .filter(|&p| p > 0 && p <= i32::MAX as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::scratch::ScratchDir;

    #[test]
    fn a_second_lease_is_refused_until_the_first_is_dropped() {
        let dir = ScratchDir::new("lease");
        let first = Lease::acquire(&dir).unwrap();
        match Lease::acquire(&dir) {
            Err(LeaseError::Held {
                holder: Some(h),
                verified: true,
            }) => {
                assert_eq!(h.pid, std::process::id());
                assert!(h.since_unix_ms.is_some());
            }
            other => panic!("{other:?}"),
        }
        let message = Lease::acquire(&dir).unwrap_err().to_string();
        let me = format!(
            "another genward daemon (pid {}, holding it for ",
            std::process::id()
        );
        assert!(message.starts_with(&me), "{message}");
        drop(first);
        Lease::acquire(&dir).unwrap();
    }

    #[test]
    fn records_round_trip_and_older_ones_are_read() {
        let h = Holder {
            pid: 77,
            identity: Some("ps1:Mon Jan  1 00:00:00 2024".into()),
            since_unix_ms: Some(5),
            pid_ns: Some(4026531836),
        };
        assert_eq!(decode_holder(&encode_holder(&h)).unwrap(), h);
        assert_eq!(decode_holder(b"1234\n").unwrap().pid, 1234);
        // A later version's member is ignored.
        let later = String::from_utf8(encode_holder(&h)).unwrap().replacen(
            "\"pid\":77",
            "\"pid\":77,\"later\":1",
            1,
        );
        assert_eq!(decode_holder(later.as_bytes()).unwrap(), h);
        for bad in [&b"0\n"[..], b"12x\n", b"1234", b"", b"-1\n"] {
            assert!(decode_holder(bad).is_err(), "{bad:?}");
        }
    }
}
