//! A generation that is starting: waiting for a lookup helper's answer (its spec names a
//! user, groups or an environment file: see [`crate::lookup`]), then between `clone` and
//! `exec`, its exec result not known yet.
//!
//! The loop never waits for either (a lookup may hang on a directory service, a `chdir`
//! or `execve` on a dead mount): the answer arrives on the helper's stdout, the exec
//! result on a status pipe, each as a readiness event of the same token. Input and a
//! terminal size sent meanwhile are held here and handed over when the process runs.

use std::os::fd::{AsRawFd, RawFd};

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::lookup::Lookup;
use super::token::Source;
use crate::core::{RunAs, Scope};
use crate::lookup::answer::Answer;
use crate::sys::cgroup::GenCgroup;
use crate::sys::spawn::{self, SpawnRequest, Starting};

/// Where a start is.
#[derive(Debug)]
enum Phase {
    /// The helper looks up what the spec names; the spawn request waits for its answer.
    LookingUp {
        lookup: Lookup,
        /// `None` once taken to be completed with the answer.
        waiting: Option<Box<(RunAs, SpawnRequest)>>,
    },
    /// The child started; its exec result comes on the status pipe.
    Exec(Starting),
}

/// A start waiting for a lookup or for its exec result.
#[derive(Debug)]
pub struct Launch {
    phase: Phase,
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
        let fd = starting.status_fd().as_raw_fd();
        watch(registry, gen, fd)?;
        Ok(Launch {
            phase: Phase::Exec(starting),
            cgroup,
            input: Vec::new(),
            close_input: false,
            size: None,
            signals: Vec::new(),
        })
    }

    /// Watches `lookup`'s answer for generation `gen`, whose `request` is completed with
    /// it (by what `run_as` asks) before it starts.
    pub fn looking_up(
        gen: u64,
        lookup: Lookup,
        run_as: RunAs,
        request: SpawnRequest,
        cgroup: Option<GenCgroup>,
        registry: &Registry,
    ) -> std::io::Result<Launch> {
        watch(registry, gen, lookup.fd())?;
        Ok(Launch {
            phase: Phase::LookingUp {
                lookup,
                waiting: Some(Box::new((run_as, request))),
            },
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

    /// The child's pid, or the lookup helper's while it runs (pinned either way: it is
    /// our unreaped child).
    pub fn pid(&self) -> i32 {
        match &self.phase {
            Phase::LookingUp { lookup, .. } => lookup.pid(),
            Phase::Exec(starting) => starting.pid(),
        }
    }

    /// The cgroup the child is to start in.
    pub fn cgroup(&self) -> Option<&GenCgroup> {
        self.cgroup.as_ref()
    }

    /// Reads the lookup helper's answer, while there is one to wait for: `Some` once it is
    /// complete, with what it completes (taken: asked once).
    pub fn looked_up(&mut self) -> Option<(Answer, RunAs, SpawnRequest)> {
        let Phase::LookingUp { lookup, waiting } = &mut self.phase else {
            return None;
        };
        if waiting.is_none() {
            return None;
        }
        let answer = lookup.read()?;
        let (run_as, request) = *waiting.take()?;
        Some((answer, run_as, request))
    }

    /// The lookup answered and the child started: the helper is let go of, and the
    /// child's status pipe watched under the same token.
    pub fn exec(
        &mut self,
        gen: u64,
        starting: Starting,
        registry: &Registry,
    ) -> std::io::Result<()> {
        let _ = registry.deregister(&mut SourceFd(&self.fd()));
        self.phase = Phase::Exec(starting);
        watch(registry, gen, self.fd())
    }

    /// What is watched now: the helper's stdout or the status pipe.
    fn fd(&self) -> RawFd {
        match &self.phase {
            Phase::LookingUp { lookup, .. } => lookup.fd(),
            Phase::Exec(starting) => starting.status_fd().as_raw_fd(),
        }
    }

    /// Reads the status pipe; whether the exec result is known (never while looking up).
    pub fn ready(&mut self) -> bool {
        match &mut self.phase {
            Phase::LookingUp { .. } => false,
            Phase::Exec(starting) => starting.poll(),
        }
    }

    /// The exec result, once [`ready`](Self::ready); stops watching the pipe first.
    pub fn finish(self, registry: &Registry) -> (Result<spawn::Child, spawn::SpawnError>, Held) {
        let _ = registry.deregister(&mut SourceFd(&self.fd()));
        let result = match self.phase {
            Phase::Exec(starting) => starting.finish(),
            // Not ready: `ready` said so. The helper goes with it.
            Phase::LookingUp { .. } => Err(spawn::SpawnError::Invalid(
                "finished while still looking up".into(),
            )),
        };
        let held = Held {
            input: self.input,
            close_input: self.close_input,
            size: self.size,
            cgroup: self.cgroup,
            signals: self.signals,
        };
        (result, held)
    }

    /// Gives up: the child (or the lookup helper) is killed and reaped later (it never
    /// ran our program, or is about to be stopped anyway).
    pub fn abandon(self, registry: &Registry) {
        let _ = registry.deregister(&mut SourceFd(&self.fd()));
    }
}

/// Watches `fd` for readability as generation `gen`'s start.
fn watch(registry: &Registry, gen: u64, fd: RawFd) -> std::io::Result<()> {
    let token = Source::SpawnStatus { gen }
        .token()
        .ok_or_else(|| std::io::Error::from_raw_os_error(libc::EOVERFLOW))?;
    registry.register(&mut SourceFd(&fd), token, Interest::READABLE)
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
