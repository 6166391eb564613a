//! The signals the daemon listens to, as readable descriptors: its own control signals
//! (SIGTERM, SIGINT, SIGHUP) and SIGCHLD.

use std::io;
use std::os::fd::BorrowedFd;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::token::Source;
use crate::sys::sigchld::SigchldPipe;
use crate::sys::signal_pipe::SignalPipe;
use std::os::fd::AsRawFd;

/// A daemon control signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlSignal {
    /// SIGTERM or SIGINT: stop everything and exit (again: kill at once).
    Terminate,
    /// SIGHUP: reload the configuration (logged when there is none).
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

/// Both signal pipes, registered with the loop.
#[derive(Debug)]
pub struct Signals {
    /// SIGTERM, SIGINT, SIGHUP.
    pub control: ControlSignals,
    /// SIGCHLD: always watched, because the fallback reaper and orphans need it, and so
    /// does any child that ended up without a watched pidfd.
    pub sigchld: SigchldPipe,
}

impl Signals {
    /// Installs the handlers and registers both pipes.
    pub fn new(registry: &Registry) -> io::Result<Signals> {
        let control = ControlSignals::new()?;
        let sigchld = SigchldPipe::new()?;
        for (fd, source) in [
            (control.fd().as_raw_fd(), Source::ControlSignals),
            (sigchld.fd().as_raw_fd(), Source::Sigchld),
        ] {
            let token = source.token().expect("fixed sources have tokens");
            registry.register(&mut SourceFd(&fd), token, Interest::READABLE)?;
        }
        Ok(Signals { control, sigchld })
    }
}
