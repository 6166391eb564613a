//! Reading our own files as warily as a client's request: a bounded size, no symlinks,
//! nothing but a regular file that we own, that no one else may write, and that has no
//! other name.
//!
//! Any of those failing means the file was not written by us (or not only by us), so it
//! is refused before a byte of it is parsed.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;

use super::dir::{euid, Dir};

/// Why a file was not read.
#[derive(Debug)]
pub enum ReadError {
    /// There is no such file.
    Missing,
    /// A symlink, a directory, a fifo, a device or a socket.
    NotRegular(&'static str),
    /// Owned by another user.
    NotOurs { owner: u32 },
    /// Readable or writable by group or others: we never write such a file.
    OpenToOthers { mode: u32 },
    /// It has other names (hard links): we never make one.
    Linked { links: u64 },
    /// Larger than the limit for its kind.
    TooLarge { limit: usize },
    /// It may not be opened by us (mode 000, or another user's file with mode 0600 read
    /// by a daemon that is not root): the file's fault, not the directory's, so it is set
    /// aside like any other file we did not write, never a reason to read nothing else.
    Unopenable(Errno),
    /// A system call failed: not the file's fault.
    Io(io::Error),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Missing => f.write_str("no such file"),
            ReadError::NotRegular(what) => write!(f, "a {what}, not a regular file"),
            ReadError::NotOurs { owner } => {
                write!(f, "owned by uid {owner}, not by us ({})", euid())
            }
            ReadError::OpenToOthers { mode } => {
                write!(f, "mode {mode:04o} is open to other users")
            }
            ReadError::Linked { links } => write!(f, "has {links} hard links"),
            ReadError::TooLarge { limit } => write!(f, "larger than {limit} bytes"),
            ReadError::Unopenable(e) => write!(f, "cannot be opened: {e}"),
            ReadError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ReadError {}

impl Dir {
    /// Reads file `name` into `buf` (cleared first), at most `max` bytes.
    ///
    /// Opened with `O_NOFOLLOW` (a symlink fails) and `O_NONBLOCK` (a fifo cannot block
    /// the open), then checked on the open descriptor, so what is checked is what is read.
    /// A file that grows past `max` while being read is refused like one that was already
    /// too large.
    pub fn read_strict(&self, name: &str, max: usize, buf: &mut Vec<u8>) -> Result<(), ReadError> {
        buf.clear();
        let (fd, size) = self.open_strict(name)?;
        read_to_limit(&fd, size, max, buf).map_err(|e| self.named(name, e))
    }

    /// Opens file `name` for reading as [`Dir::read_strict`] does (no symlink, no fifo
    /// blocking the open) and checks it with [`check_ours`]; returns it and its size. For
    /// a reader that maps the file instead of reading it.
    pub(crate) fn open_strict(&self, name: &str) -> Result<(OwnedFd, u64), ReadError> {
        let fd = rfs::openat(
            self,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::NOENT => ReadError::Missing,
            Errno::LOOP => ReadError::NotRegular("symlink"),
            // `O_NOFOLLOW` on a symlink fails with ELOOP on Linux and macOS, EMLINK on FreeBSD.
            #[cfg(not(target_os = "linux"))]
            Errno::MLINK => ReadError::NotRegular("symlink"),
            // A socket, or a device with no driver: set aside like any other special file,
            // not a failure of the whole directory's read.
            Errno::NXIO | Errno::NODEV | Errno::OPNOTSUPP => ReadError::NotRegular("special file"),
            // Permissions we never give our own files.
            Errno::ACCESS | Errno::PERM => ReadError::Unopenable(e),
            e => self.named(name, ReadError::Io(e.into())),
        })?;
        let size = check_ours(&fd).map_err(|e| self.named(name, e))?;
        Ok((fd, size))
    }

    /// `e`, its system error (if it is one) prefixed with the file's path.
    fn named(&self, name: &str, e: ReadError) -> ReadError {
        match e {
            ReadError::Io(e) => ReadError::Io(io::Error::new(
                e.kind(),
                format!("{}: {e}", self.path_of(name).display()),
            )),
            e => e,
        }
    }
}

/// Checks an open file: a regular file, ours, closed to others, with one name. Returns
/// its size.
pub(crate) fn check_ours(fd: impl AsFd) -> Result<u64, ReadError> {
    let st = rfs::fstat(fd).map_err(|e| ReadError::Io(e.into()))?;
    let kind = FileType::from_raw_mode(st.st_mode);
    if kind != FileType::RegularFile {
        return Err(ReadError::NotRegular(type_name(kind)));
    }
    if st.st_uid != euid() {
        return Err(ReadError::NotOurs { owner: st.st_uid });
    }
    let mode = st.st_mode & 0o7777;
    if mode & 0o077 != 0 {
        return Err(ReadError::OpenToOthers { mode });
    }
    #[allow(clippy::unnecessary_cast)] // `st_nlink` is u32 on some systems.
    let links = st.st_nlink as u64;
    if links != 1 {
        return Err(ReadError::Linked { links });
    }
    Ok(u64::try_from(st.st_size).unwrap_or(u64::MAX))
}

/// Reads an open file of `size` bytes (as `fstat` said) from its start into `buf`
/// (cleared first), refusing one larger than `max` bytes, including one that grows past
/// it while being read.
pub(crate) fn read_to_limit(
    fd: impl AsFd,
    size: u64,
    max: usize,
    buf: &mut Vec<u8>,
) -> Result<(), ReadError> {
    buf.clear();
    let fd = fd.as_fd();
    if size > max as u64 {
        return Err(ReadError::TooLarge { limit: max });
    }
    // One byte more than allowed: reading it means the file grew past the limit.
    let cap = max.saturating_add(1);
    let size = usize::try_from(size).unwrap_or(max);
    buf.resize(size.saturating_add(1).min(cap), 0);
    let mut filled = 0;
    loop {
        if filled == buf.len() {
            if filled >= cap {
                break;
            }
            buf.resize(filled.saturating_mul(2).max(64).min(cap), 0);
        }
        match rustix::io::pread(fd, &mut buf[filled..], filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(Errno::INTR) => {}
            Err(e) => {
                buf.clear();
                return Err(ReadError::Io(e.into()));
            }
        }
    }
    buf.truncate(filled);
    if buf.len() > max {
        buf.clear();
        return Err(ReadError::TooLarge { limit: max });
    }
    Ok(())
}

fn type_name(kind: FileType) -> &'static str {
    match kind {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}
