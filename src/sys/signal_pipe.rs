//! Signals as bytes on a pipe that an event loop can poll next to its other descriptors:
//! the handler only writes the signal's number (async-signal-safe), everything else happens
//! in the loop. Used by the daemon (SIGTERM, SIGINT, SIGHUP; SIGCHLD for the fallback
//! reaper) and by `genward attach` (SIGWINCH and friends).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

use rustix::pipe::{pipe_with, PipeFlags};
use signal_hook::SigId;

use crate::sys::fd::{read_nonblocking, ReadOutcome};

/// A self-pipe fed by signal handlers; the handlers are removed on drop.
#[derive(Debug)]
pub struct SignalPipe {
    read: OwnedFd,
    _write: OwnedFd,
    ids: Vec<SigId>,
}

impl SignalPipe {
    /// Installs handlers for `signals` (each below 256) that write the signal's number.
    pub fn new(signals: &[i32]) -> io::Result<SignalPipe> {
        let (read, write) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let mut pipe = SignalPipe {
            read,
            _write: write,
            ids: Vec::new(),
        };
        for &sig in signals {
            let fd = pipe._write.as_raw_fd();
            // SAFETY: the handler only calls write(2), which is async-signal-safe, on a
            // descriptor that outlives the registration (unregistered in Drop first).
            let id = unsafe {
                signal_hook::low_level::register(sig, move || {
                    let byte = sig as u8;
                    libc::write(fd, (&byte as *const u8).cast(), 1);
                })
            }?;
            pipe.ids.push(id);
        }
        Ok(pipe)
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    /// Signals received since the last call, in order.
    pub fn drain(&self) -> io::Result<Vec<i32>> {
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            match read_nonblocking(self.read.as_fd(), &mut buf)? {
                ReadOutcome::Data(n) => out.extend(buf[..n].iter().map(|&b| i32::from(b))),
                ReadOutcome::WouldBlock | ReadOutcome::Eof => return Ok(out),
            }
        }
    }
}

/// Stops this process as `SIGTSTP`'s default action would (by raising `SIGSTOP`), for a
/// program that caught `SIGTSTP` to tidy up first (`attach` hands the terminal back);
/// returns once the process is continued.
pub fn stop_self() -> io::Result<()> {
    signal_hook::low_level::emulate_default_handler(libc::SIGTSTP)
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_signal_arrives_as_its_number() {
        let pipe = SignalPipe::new(&[libc::SIGWINCH]).unwrap();
        // SAFETY: raise is safe to call; the handler was installed above.
        unsafe { libc::raise(libc::SIGWINCH) };
        assert_eq!(pipe.drain().unwrap(), vec![libc::SIGWINCH]);
        assert!(pipe.drain().unwrap().is_empty());
    }
}
