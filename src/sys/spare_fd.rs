//! One descriptor held back for a step that must not fail for want of one: killing a
//! generation's cgroup through `cgroup.kill` takes exactly one descriptor, for a moment.
//!
//! The kernel hands out the lowest free descriptor number and refuses (`EMFILE`) only
//! when that number is at or above the soft `RLIMIT_NOFILE`. A descriptor opened early
//! holds a low number; freed just before a step that needs one, it lets that step open
//! its file at that number even when the limit was lowered (`prlimit`) below what the
//! process holds, and it is taken back at once, at the number just freed again. The
//! descriptors kept in reserve for spawns (`driver::descriptors`) are a count, not
//! descriptors held: they cannot help once the limit is below what is in use.

use std::fs::File;
use std::io;

/// Whether `e` is a shortage of descriptors or kernel memory: the step may succeed once
/// some are free again, so it is worth trying again (never the step's own fault).
pub fn is_shortage(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM)
    )
}

/// A descriptor (`/dev/null`) held back; see the module docs.
#[derive(Debug)]
pub struct SpareFd(Option<File>);

impl SpareFd {
    /// Takes one now: early, so that its number is low.
    pub fn new() -> SpareFd {
        SpareFd(File::open("/dev/null").ok())
    }

    /// Runs `step`; if it fails for want of a descriptor (`EMFILE`, `ENFILE`), frees the
    /// spare, runs it once more, and takes the spare back. A spare that could not be
    /// taken back (the step's descriptor still open elsewhere, say) is taken at the next
    /// call.
    pub fn lend<T>(&mut self, mut step: impl FnMut() -> io::Result<T>) -> io::Result<T> {
        let first = step();
        let out_of_fds =
            |e: &io::Error| matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
        match first {
            Err(e) if out_of_fds(&e) => {
                let had = self.0.take().is_some();
                let again = if had { step() } else { Err(e) };
                self.0 = File::open("/dev/null").ok();
                again
            }
            other => {
                if self.0.is_none() {
                    self.0 = File::open("/dev/null").ok();
                }
                other
            }
        }
    }
}

impl Default for SpareFd {
    fn default() -> SpareFd {
        SpareFd::new()
    }
}
