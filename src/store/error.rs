//! What can stop a store operation as a whole. A single bad file is not among them: it is
//! moved aside and skipped (see [`aside`](super::aside)).

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::dir::DirError;
use super::format::FORMAT_VERSION;
use crate::proto::json::FieldError;

/// Why the store could not do what it was asked.
#[derive(Debug)]
pub enum StoreError {
    /// The state directory or one of its subdirectories cannot be used.
    Dir(DirError),
    /// A system call failed (the file system is full, read-only, ...).
    Io(io::Error),
    /// The directory was written by a newer genward: refused whole, never misread.
    Newer {
        /// The file that says so.
        path: PathBuf,
        /// Its format version.
        version: u64,
    },
    /// A value the state format cannot carry (the same limits as the wire's, e.g. an
    /// argument that is not UTF-8); nothing was written.
    Unencodable {
        /// What could not be written, e.g. `session web`.
        what: String,
        /// Which field, and why.
        err: FieldError,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Dir(e) => write!(f, "state directory {e}"),
            StoreError::Io(e) => write!(f, "state directory: {e}"),
            StoreError::Newer { path, version } => write!(
                f,
                "{}: written by a newer genward (state format {version}; this build reads up to {FORMAT_VERSION}); \
                 run that version, or move the state directory away to start afresh",
                path.display()
            ),
            StoreError::Unencodable { what, err } => {
                write!(f, "{what} cannot be saved: {err}")
            }
        }
    }
}

impl std::error::Error for StoreError {}

impl StoreError {
    /// The system's error number behind it, if a system call failed (`ENOSPC`, `EACCES`,
    /// `EROFS`, ...): what a client is told when a start could not be recorded.
    pub fn errno(&self) -> Option<i32> {
        match self {
            StoreError::Io(e) => super::dir::os_errno(e),
            StoreError::Dir(DirError::Io { err, .. }) => super::dir::os_errno(err),
            _ => None,
        }
    }
}

impl From<DirError> for StoreError {
    fn from(e: DirError) -> Self {
        StoreError::Dir(e)
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        StoreError::Io(e)
    }
}
