//! The daemon's own signals as a readable descriptor: SIGTERM, SIGINT and SIGHUP each
//! write a distinct byte into one self-pipe, so the loop learns which arrived without a
//! handler doing anything but `write`.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::pipe::{pipe_with, PipeFlags};
use signal_hook::SigId;

use crate::sys::fd::{read_nonblocking, ReadOutcome};

/// A daemon control signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlSignal {
    /// SIGTERM or SIGINT: stop everything and exit (again: kill at once).
    Terminate,
    /// SIGHUP: reopen nothing yet; logged.
    Hangup,
}

/// The self-pipe and its handlers.
#[derive(Debug)]
pub struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    ids: Vec<SigId>,
}

impl SignalPipe {
    /// Installs handlers for SIGTERM, SIGINT and SIGHUP.
    pub fn new() -> io::Result<SignalPipe> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let mut ids = Vec::new();
        for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
            let fd = write.as_raw_fd();
            // SAFETY: the handler only calls write(2), which is async-signal-safe, on a
            // descriptor that outlives the registration (unregistered in Drop first).
            let id = unsafe {
                signal_hook::low_level::register(sig, move || {
                    let byte = sig as u8;
                    libc::write(fd, (&byte as *const u8).cast(), 1);
                })
            }?;
            ids.push(id);
        }
        Ok(SignalPipe {
            read,
            _write: write,
            ids,
        })
    }

    /// The descriptor to register with the loop.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Signals received since the last call, in order.
    pub fn drain(&self) -> io::Result<Vec<ControlSignal>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match read_nonblocking(self.read.as_fd(), &mut buf)? {
                ReadOutcome::Data(n) => out.extend(buf[..n].iter().map(|&b| {
                    if i32::from(b) == libc::SIGHUP {
                        ControlSignal::Hangup
                    } else {
                        ControlSignal::Terminate
                    }
                })),
                ReadOutcome::WouldBlock | ReadOutcome::Eof => return Ok(out),
            }
        }
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
