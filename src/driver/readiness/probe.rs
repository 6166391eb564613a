//! One readiness probe in flight: a non-blocking connection attempt, or a command started
//! without waiting for it. Nothing here blocks; each step is driven by a readiness of the
//! probe's own descriptor (its token: [`Source::Probe`] / [`Source::ProbeStatus`]).

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use crate::driver::token::Source;
use crate::sys::process::{Exit, Process};
use crate::sys::spawn::{self, Starting};

/// Where a probe is.
#[derive(Debug)]
pub enum Probe {
    /// A TCP connection attempt, registered for writability.
    Tcp(mio::net::TcpStream),
    /// A Unix socket connection attempt, registered for writability.
    Unix(mio::net::UnixStream),
    /// A command between its start and its exec (status pipe registered).
    Starting(Starting),
    /// A command running (its pidfd registered, when it has one).
    Running(Process),
    /// Finished, or in between two states.
    Done,
}

/// What a step of a probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Not decided yet: wait for the next readiness.
    Pending,
    /// Decided: whether it passed.
    Done(bool),
}

/// Which check a probe serves, and so which tokens its descriptors are registered with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// The spec's `ready`.
    Ready,
    /// The spec's `live`.
    Live,
}

impl Purpose {
    fn main(self, gen: u64) -> Source {
        match self {
            Purpose::Ready => Source::Probe { gen },
            Purpose::Live => Source::LiveProbe { gen },
        }
    }

    fn status(self, gen: u64) -> Source {
        match self {
            Purpose::Ready => Source::ProbeStatus { gen },
            Purpose::Live => Source::LiveProbeStatus { gen },
        }
    }
}

impl Probe {
    /// Starts a connection to `addr`. A refusal known at once is `Err`.
    pub fn tcp(
        registry: &Registry,
        gen: u64,
        why: Purpose,
        addr: std::net::SocketAddr,
    ) -> io::Result<Probe> {
        let mut s = mio::net::TcpStream::connect(addr)?;
        registry.register(&mut s, token(why.main(gen))?, Interest::WRITABLE)?;
        Ok(Probe::Tcp(s))
    }

    /// Starts a connection to the Unix socket at `path`. A refusal known at once is `Err`.
    pub fn unix(registry: &Registry, gen: u64, why: Purpose, path: &Path) -> io::Result<Probe> {
        let mut s = mio::net::UnixStream::connect(path)?;
        registry.register(&mut s, token(why.main(gen))?, Interest::WRITABLE)?;
        Ok(Probe::Unix(s))
    }

    /// Starts a command; its exec result comes through the status pipe.
    pub fn command(
        registry: &Registry,
        gen: u64,
        why: Purpose,
        req: &spawn::SpawnRequest,
    ) -> io::Result<Probe> {
        let starting = spawn::start(req).map_err(|e| io::Error::other(e.to_string()))?;
        let fd = starting.status_fd().as_raw_fd();
        registry.register(
            &mut SourceFd(&fd),
            token(why.status(gen))?,
            Interest::READABLE,
        )?;
        Ok(Probe::Starting(starting))
    }

    /// The next step after a readiness of its descriptor (or a look on `SIGCHLD`).
    pub fn step(&mut self, registry: &Registry, gen: u64, why: Purpose) -> Step {
        match self {
            Probe::Tcp(s) => connected(s.take_error(), s.peer_addr().map(drop)),
            Probe::Unix(s) => connected(s.take_error(), s.peer_addr().map(drop)),
            Probe::Starting(starting) => {
                if !starting.poll() {
                    return Step::Pending;
                }
                let fd = starting.status_fd().as_raw_fd();
                let _ = registry.deregister(&mut SourceFd(&fd));
                let Probe::Starting(starting) = std::mem::replace(self, Probe::Done) else {
                    return Step::Done(false);
                };
                match starting.finish() {
                    Err(_) => Step::Done(false),
                    Ok(child) => {
                        let process = child.process;
                        if let Some(fd) = process.pidfd() {
                            let raw = fd.as_raw_fd();
                            let t = token(why.main(gen));
                            if t.and_then(|t| {
                                registry.register(&mut SourceFd(&raw), t, Interest::READABLE)
                            })
                            .is_err()
                            {
                                spawn::abandon(process);
                                return Step::Done(false);
                            }
                        }
                        *self = Probe::Running(process);
                        self.step(registry, gen, why)
                    }
                }
            }
            Probe::Running(process) => match process.exit_status_nowait() {
                Ok(None) => Step::Pending,
                Ok(Some(_)) => {
                    // What it started and left behind goes with it, while its unreaped
                    // leader still pins the group's number.
                    let _ = process.signal_group(rustix::process::Signal::KILL);
                    match process.reap() {
                        Ok(Some(exit)) => Step::Done(exit == Exit::Code(0)),
                        _ => Step::Done(false),
                    }
                }
                Err(_) => Step::Done(false),
            },
            Probe::Done => Step::Done(false),
        }
    }

    /// Gives the probe up: deregisters it, kills a command still running (through its
    /// pidfd: it is our unreaped child) and leaves it to be reaped.
    pub fn abandon(self, registry: &Registry) {
        match self {
            Probe::Tcp(mut s) => {
                let _ = registry.deregister(&mut s);
            }
            Probe::Unix(mut s) => {
                let _ = registry.deregister(&mut s);
            }
            Probe::Starting(starting) => {
                let fd = starting.status_fd().as_raw_fd();
                let _ = registry.deregister(&mut SourceFd(&fd));
                // Dropping a start kills the child and parks it to be reaped.
                drop(starting);
            }
            Probe::Running(process) => {
                if let Some(fd) = process.pidfd() {
                    let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
                }
                spawn::abandon(process);
            }
            Probe::Done => {}
        }
    }

    /// Whether it is a command running without a pidfd: looked at on `SIGCHLD`.
    pub fn awaits_sigchld(&self) -> bool {
        matches!(self, Probe::Running(p) if p.pidfd().is_none())
    }
}

fn token(source: Source) -> io::Result<mio::Token> {
    source
        .token()
        .ok_or_else(|| io::Error::other("generation number too large for a token"))
}

/// A connection attempt's state after a writability: an error means refused; a peer
/// means accepted; neither (a sporadic event) means not yet.
fn connected(error: io::Result<Option<io::Error>>, peer: io::Result<()>) -> Step {
    match (error, peer) {
        (Ok(Some(_)) | Err(_), _) => Step::Done(false),
        (Ok(None), Ok(())) => Step::Done(true),
        (Ok(None), Err(e)) if e.kind() == io::ErrorKind::NotConnected => Step::Pending,
        (Ok(None), Err(_)) => Step::Done(false),
    }
}
