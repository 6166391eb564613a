//! SIGCHLD as a readable descriptor, for the fallback (no pidfd) reaper.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::pipe::{pipe_with, PipeFlags};
use signal_hook::SigId;

use crate::sys::fd::{read_nonblocking, ReadOutcome};

/// A self-pipe written by signal-hook's SIGCHLD handler: register [`SigchldPipe::fd`] with
/// the event loop, and on readiness [`SigchldPipe::drain`] it, then ask each tracked
/// process ([`crate::sys::process::Process::exit_status_nowait`]). Signals coalesce, so
/// one wakeup may stand for several exits.
#[derive(Debug)]
pub struct SigchldPipe {
    read: OwnedFd,
    id: SigId,
}

impl SigchldPipe {
    /// Creates the pipe (non-blocking, close-on-exec) and installs the handler.
    pub fn new() -> io::Result<SigchldPipe> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // signal-hook owns the write end from here and closes it when unregistered.
        let id = signal_hook::low_level::pipe::register(libc::SIGCHLD, write)?;
        Ok(SigchldPipe { read, id })
    }

    /// The descriptor that becomes readable after a SIGCHLD.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Empties the pipe; returns whether any SIGCHLD had arrived since the last drain.
    pub fn drain(&self) -> io::Result<bool> {
        let mut any = false;
        let mut buf = [0u8; 64];
        loop {
            match read_nonblocking(self.read.as_fd(), &mut buf)? {
                ReadOutcome::Data(_) => any = true,
                ReadOutcome::WouldBlock | ReadOutcome::Eof => return Ok(any),
            }
        }
    }
}

impl Drop for SigchldPipe {
    fn drop(&mut self) {
        // Also closes the write end, after the handler can no longer run.
        signal_hook::low_level::unregister(self.id);
    }
}
