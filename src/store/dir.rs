//! A directory of the state directory, held open by descriptor.
//!
//! Every file operation of the store is relative to a [`Dir`] (`openat`, `renameat`,
//! `unlinkat`), whose directory was opened once with `O_NOFOLLOW` and verified to be ours
//! and private. A path is never resolved again afterwards, so a symlink or directory
//! planted later cannot redirect a read or a write elsewhere.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, FileType, Mode, OFlags};
use rustix::io::Errno;

/// An open, verified directory.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
}

/// Why a directory could not be opened.
#[derive(Debug)]
pub enum DirError {
    /// It is a symlink or not a directory.
    NotADirectory(PathBuf),
    /// Owned by another user.
    NotOurs { path: PathBuf, owner: u32 },
    /// Open to group or others.
    OpenToOthers { path: PathBuf, mode: u32 },
    /// A system call failed.
    Io { path: PathBuf, err: io::Error },
}

impl std::fmt::Display for DirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DirError::NotADirectory(p) => write!(f, "{}: not a directory", p.display()),
            DirError::NotOurs { path, owner } => write!(
                f,
                "{}: owned by uid {owner}, not by us ({})",
                path.display(),
                euid()
            ),
            DirError::OpenToOthers { path, mode } => write!(
                f,
                "{}: mode {mode:04o} is open to other users",
                path.display()
            ),
            DirError::Io { path, err } => write!(f, "{}: {err}", path.display()),
        }
    }
}

impl std::error::Error for DirError {}

impl From<DirError> for io::Error {
    fn from(e: DirError) -> io::Error {
        match e {
            DirError::Io { err, .. } => err,
            other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
        }
    }
}

/// The effective uid: what "ours" means for files and directories.
pub(crate) fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl Dir {
    /// Opens an existing directory, refusing a symlink, one owned by someone else, or one
    /// group or others may read or write.
    pub fn open(path: &Path) -> Result<Dir, DirError> {
        let fd = rfs::open(path, DIR_FLAGS, Mode::empty()).map_err(|e| open_error(path, e))?;
        Dir::verified(fd, path.to_owned())
    }

    /// Opens subdirectory `name`, creating it (mode 0700) if missing, with the same checks
    /// as [`Dir::open`].
    pub fn subdir(&self, name: &str) -> Result<Dir, DirError> {
        let path = self.path.join(name);
        match rfs::mkdirat(&self.fd, name, Mode::RWXU) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(io_error(&path, e)),
        }
        let fd = rfs::openat(&self.fd, name, DIR_FLAGS, Mode::empty())
            .map_err(|e| open_error(&path, e))?;
        Dir::verified(fd, path)
    }

    fn verified(fd: OwnedFd, path: PathBuf) -> Result<Dir, DirError> {
        let st = rfs::fstat(&fd).map_err(|e| io_error(&path, e))?;
        if st.st_uid != euid() {
            return Err(DirError::NotOurs {
                path,
                owner: st.st_uid,
            });
        }
        let mode = st.st_mode & 0o7777;
        // Search permission alone (0711) lets others reach the socket with `--allow-uid`;
        // they can neither list nor change anything here.
        if mode & 0o066 != 0 {
            return Err(DirError::OpenToOthers { path, mode });
        }
        Ok(Dir { fd, path })
    }

    /// The directory's path, for messages.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` inside it, for messages.
    pub fn path_of(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Flushes the directory's entries (a rename or unlink) to stable storage.
    pub fn sync(&self) -> io::Result<()> {
        rfs::fsync(&self.fd).map_err(|e| self.io(e))
    }

    /// Renames `from` in this directory to `to` in `dest` (same filesystem).
    pub fn rename_to(&self, from: &str, dest: &Dir, to: &str) -> io::Result<()> {
        rfs::renameat(&self.fd, from, &dest.fd, to).map_err(|e| self.io(e))
    }

    /// Removes file `name`; a missing one is not an error.
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        match rfs::unlinkat(&self.fd, name, rfs::AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(self.io(e)),
        }
    }

    /// Calls `each` with the name and type of every entry but `.` and `..`, stopping early
    /// when it returns `false`. Names that are not UTF-8 are passed as `None` (nothing the
    /// store writes has one). Reads the directory in one pass, holding one entry at a time.
    pub fn each_entry(
        &self,
        mut each: impl FnMut(Option<&str>, &CStr, FileType) -> bool,
    ) -> io::Result<()> {
        let mut dir = rfs::Dir::read_from(&self.fd).map_err(|e| self.io(e))?;
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(|e| self.io(e))?;
            let raw = entry.file_name();
            let bytes = raw.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let name = std::str::from_utf8(bytes).ok();
            if !each(name, raw, entry.file_type()) {
                break;
            }
        }
        Ok(())
    }

    /// An `io::Error` naming this directory, which still carries the system's error
    /// number (see [`os_errno`]): a caller that reports it (a start that could not be
    /// recorded) says `ENOSPC` or `EACCES`, not a vague `EIO`.
    pub(crate) fn io(&self, e: Errno) -> io::Error {
        io::Error::new(
            io::Error::from(e).kind(),
            PathError {
                path: self.path.clone(),
                errno: e,
            },
        )
    }
}

/// A system error on a path of the state directory.
#[derive(Debug)]
struct PathError {
    path: PathBuf,
    errno: Errno,
}

impl std::fmt::Display for PathError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.errno)
    }
}

impl std::error::Error for PathError {}

/// The system's error number behind `e`, whether it came straight from a system call or
/// was given the path it concerns by the store.
pub fn os_errno(e: &io::Error) -> Option<i32> {
    e.raw_os_error().or_else(|| {
        e.get_ref()
            .and_then(|inner| inner.downcast_ref::<PathError>())
            .map(|p| p.errno.raw_os_error())
    })
}

impl AsFd for Dir {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn open_error(path: &Path, e: Errno) -> DirError {
    match e {
        Errno::NOTDIR | Errno::LOOP => DirError::NotADirectory(path.to_owned()),
        e => io_error(path, e),
    }
}

fn io_error(path: &Path, e: Errno) -> DirError {
    DirError::Io {
        path: path.to_owned(),
        err: e.into(),
    }
}
