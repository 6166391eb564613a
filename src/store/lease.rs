//! One daemon per state directory: an exclusive `flock` on `<state-dir>/lease`, held for
//! the daemon's lifetime, with the owner's pid written inside for error messages.
//!
//! `flock` locks die with the process, so a crashed daemon never leaves a stale lease.

use std::fs::File;
use std::io::{self, Read, Seek, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{flock, FlockOperation};

/// A held lease; dropping it releases the lock.
#[derive(Debug)]
pub struct Lease {
    _file: File,
}

/// Why the lease could not be taken.
#[derive(Debug)]
pub enum LeaseError {
    /// Another live daemon holds it (its pid, if it wrote one).
    Held { owner_pid: Option<u32> },
    /// A system call failed.
    Io(io::Error),
}

impl std::fmt::Display for LeaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseError::Held {
                owner_pid: Some(pid),
            } => write!(
                f,
                "another genward daemon (pid {pid}) owns this state directory"
            ),
            LeaseError::Held { owner_pid: None } => {
                write!(f, "another genward daemon owns this state directory")
            }
            LeaseError::Io(e) => write!(f, "lease: {e}"),
        }
    }
}

impl std::error::Error for LeaseError {}

impl Lease {
    /// Takes the lease in `dir` without waiting.
    pub fn acquire(dir: &Path) -> Result<Lease, LeaseError> {
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_CLOEXEC | libc::O_NOFOLLOW)
            .open(dir.join("lease"))
            .map_err(LeaseError::Io)?;
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(rustix::io::Errno::WOULDBLOCK) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LeaseError::Held {
                    owner_pid: text.trim().parse().ok(),
                });
            }
            Err(e) => return Err(LeaseError::Io(e.into())),
        }
        file.set_len(0).map_err(LeaseError::Io)?;
        file.rewind().map_err(LeaseError::Io)?;
        writeln!(file, "{}", std::process::id()).map_err(LeaseError::Io)?;
        Ok(Lease { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lease_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("genward-lease-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = Lease::acquire(&dir).unwrap();
        match Lease::acquire(&dir) {
            Err(LeaseError::Held { owner_pid }) => {
                assert_eq!(owner_pid, Some(std::process::id()))
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        Lease::acquire(&dir).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
    }
}
