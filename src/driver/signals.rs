//! The daemon's own signals: SIGTERM, SIGINT and SIGHUP as a readable descriptor.

use std::io;
use std::os::fd::BorrowedFd;

use crate::sys::signal_pipe::SignalPipe;

/// A daemon control signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlSignal {
    /// SIGTERM or SIGINT: stop everything and exit (again: kill at once).
    Terminate,
    /// SIGHUP: nothing to reload; logged.
    Hangup,
}

/// The daemon's signal pipe.
#[derive(Debug)]
pub struct ControlSignals(SignalPipe);

impl ControlSignals {
    /// Installs handlers for SIGTERM, SIGINT and SIGHUP.
    pub fn new() -> io::Result<ControlSignals> {
        SignalPipe::new(&[libc::SIGTERM, libc::SIGINT, libc::SIGHUP]).map(ControlSignals)
    }

    /// The descriptor to register with the loop.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.0.fd()
    }

    /// Signals received since the last call, in order.
    pub fn drain(&self) -> io::Result<Vec<ControlSignal>> {
        Ok(self
            .0
            .drain()?
            .into_iter()
            .map(|sig| {
                if sig == libc::SIGHUP {
                    ControlSignal::Hangup
                } else {
                    ControlSignal::Terminate
                }
            })
            .collect())
    }
}
