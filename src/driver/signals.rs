//! The signals the daemon listens to, as readable descriptors: its own control signals
//! (SIGTERM, SIGINT, SIGQUIT, SIGHUP), the ones a service manager may send that mean
//! nothing to it (SIGUSR1, SIGUSR2, SIGALRM), and SIGCHLD.

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
    /// SIGTERM, SIGINT or SIGQUIT: stop everything and exit (again: kill at once).
    Terminate,
    /// SIGHUP: reload the configuration (logged when there is none).
    Hangup,
    /// A signal a service manager sends on a user's word (`s6-svc -1`, `sv alarm`) that
    /// has no meaning here: logged, and nothing else. Its default action would end the
    /// daemon without a word and leave every session running unsupervised.
    Ignored(i32),
}

/// Ended by: stop everything and exit. SIGQUIT too (`s6-svc -q`, `sv quit`, a container's
/// `STOPSIGNAL`): its default, a core dump, would leave every session unsupervised.
const TERMINATE: [i32; 3] = [libc::SIGTERM, libc::SIGINT, libc::SIGQUIT];

/// Caught only so that their default action (ending the daemon) is not taken.
const IGNORED: [i32; 3] = [libc::SIGUSR1, libc::SIGUSR2, libc::SIGALRM];

/// Every signal [`ControlSignal`] names.
fn control() -> Vec<i32> {
    TERMINATE
        .into_iter()
        .chain([libc::SIGHUP])
        .chain(IGNORED)
        .collect()
}

/// Every signal the daemon handles (its control signals and SIGCHLD): what an upgrade
/// blocks across its exec, so that one arriving meanwhile waits for the next program.
pub fn handled() -> Vec<i32> {
    control().into_iter().chain([libc::SIGCHLD]).collect()
}

/// The daemon's signal pipe.
#[derive(Debug)]
pub struct ControlSignals(SignalPipe);

impl ControlSignals {
    /// Installs handlers for every signal [`ControlSignal`] names.
    pub fn new() -> io::Result<ControlSignals> {
        SignalPipe::new(&control()).map(ControlSignals)
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
            .map(|sig| match sig {
                libc::SIGHUP => ControlSignal::Hangup,
                sig if TERMINATE.contains(&sig) => ControlSignal::Terminate,
                sig => ControlSignal::Ignored(sig),
            })
            .collect())
    }
}

/// Both signal pipes, registered with the loop.
#[derive(Debug)]
pub struct Signals {
    /// SIGTERM, SIGINT, SIGQUIT, SIGHUP, and the ignored ones.
    pub control: ControlSignals,
    /// SIGCHLD: always watched, because the fallback reaper and orphans need it, and so
    /// does any child that ended up without a watched pidfd.
    pub sigchld: SigchldPipe,
}

impl Signals {
    /// Installs the handlers and registers both pipes; `SIGXFSZ` is ignored (a write past
    /// the file-size limit fails instead of ending the daemon).
    pub fn new(registry: &Registry) -> io::Result<Signals> {
        crate::sys::file_size_limit::ignore_signal();
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
