//! SIGCHLD as a readable descriptor, for the fallback (no pidfd) reaper and for reaping
//! orphans.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys::signal_pipe::SignalPipe;

/// A self-pipe written on every SIGCHLD: register [`SigchldPipe::fd`] with the event loop,
/// and on readiness [`SigchldPipe::drain`] it, then ask each tracked process
/// ([`crate::sys::process::Process::exit_status_nowait`]). Signals coalesce, so one wakeup
/// may stand for several exits.
#[derive(Debug)]
pub struct SigchldPipe(SignalPipe);

impl SigchldPipe {
    /// Creates the pipe (non-blocking, close-on-exec) and installs the handler.
    pub fn new() -> io::Result<SigchldPipe> {
        SignalPipe::new(&[libc::SIGCHLD]).map(SigchldPipe)
    }

    /// The descriptor that becomes readable after a SIGCHLD.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.fd()
    }

    /// Empties the pipe; returns whether any SIGCHLD had arrived since the last drain.
    pub fn drain(&self) -> io::Result<bool> {
        Ok(!self.0.drain()?.is_empty())
    }
}
