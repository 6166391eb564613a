//! A child between `clone` and `exec`: started, its exec result not known yet.
//!
//! The loop never waits for a child (its `chdir` or `execve` may hang on a dead mount):
//! the result arrives on a status pipe as a readiness event. Input and a terminal size
//! sent meanwhile are held here and handed over when the process runs.

use std::os::fd::AsRawFd;

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::token::Source;
use crate::core::Scope;
use crate::sys::cgroup::GenCgroup;
use crate::sys::spawn::{self, Starting};

/// A started child waiting for its exec result.
#[derive(Debug)]
pub struct Launch {
    starting: Starting,
    /// Its cgroup, which it entered before its first instruction.
    cgroup: Option<GenCgroup>,
    /// Input accepted meanwhile.
    pub input: Vec<u8>,
    /// Close the child's input once that is written.
    pub close_input: bool,
    /// The latest terminal size asked for.
    pub size: Option<(u16, u16)>,
    /// Signals asked for meanwhile, delivered in order once it runs.
    signals: Vec<(i32, Scope)>,
}

/// Signals held for one starting child; more are refused (logged) rather than grow.
const MAX_HELD_SIGNALS: usize = 32;

impl Launch {
    /// Watches `starting`'s status pipe for generation `gen`.
    pub fn new(
        gen: u64,
        starting: Starting,
        cgroup: Option<GenCgroup>,
        registry: &Registry,
    ) -> std::io::Result<Launch> {
        let token = Source::SpawnStatus { gen }
            .token()
            .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EOVERFLOW))?;
        let fd = starting.status_fd().as_raw_fd();
        registry.register(&mut SourceFd(&fd), token, Interest::READABLE)?;
        Ok(Launch {
            starting,
            cgroup,
            input: Vec::new(),
            close_input: false,
            size: None,
            signals: Vec::new(),
        })
    }

    /// Holds a signal until the process runs.
    pub fn hold_signal(&mut self, signal: i32, scope: Scope) {
        if self.signals.len() < MAX_HELD_SIGNALS {
            self.signals.push((signal, scope));
        } else {
            log::warn!(
                "signal {signal} for a starting process dropped: {MAX_HELD_SIGNALS} already held"
            );
        }
    }

    /// The child's pid (pinned: it is our unreaped child).
    pub fn pid(&self) -> i32 {
        self.starting.pid()
    }

    /// Reads the status pipe; whether the exec result is known.
    pub fn ready(&mut self) -> bool {
        self.starting.poll()
    }

    /// The exec result, once [`ready`](Self::ready); stops watching the pipe first.
    pub fn finish(self, registry: &Registry) -> (Result<spawn::Child, spawn::SpawnError>, Held) {
        let fd = self.starting.status_fd().as_raw_fd();
        let _ = registry.deregister(&mut SourceFd(&fd));
        let held = Held {
            input: self.input,
            close_input: self.close_input,
            size: self.size,
            cgroup: self.cgroup,
            signals: self.signals,
        };
        (self.starting.finish(), held)
    }

    /// Gives up: the child is killed and reaped later (it never ran our program, or is
    /// about to be stopped anyway).
    pub fn abandon(self, registry: &Registry) {
        let fd = self.starting.status_fd().as_raw_fd();
        let _ = registry.deregister(&mut SourceFd(&fd));
    }
}

/// What was held for a child while it started.
#[derive(Debug)]
pub struct Held {
    /// Input to write.
    pub input: Vec<u8>,
    /// Close its input once that is written.
    pub close_input: bool,
    /// Terminal size to set.
    pub size: Option<(u16, u16)>,
    /// Its cgroup.
    pub cgroup: Option<GenCgroup>,
    /// Signals to send, in order.
    pub signals: Vec<(i32, Scope)>,
}
