//! Asking a program, before it replaces the daemon, which upgrade images it reads: it is
//! run once with `__image-version` and must answer, within [`PROBE_TIMEOUT`],
//!
//! ```text
//! genward-image <oldest> <newest> <version>
//! ```
//!
//! A program that cannot be executed, answers anything else, or cannot read this daemon's
//! image format is refused while the daemon still runs unchanged.
//!
//! The check ([`Check`]) never blocks the loop: the program is started through the
//! asynchronous spawn ([`spawn::start`]), and its exec status, its stdout (a non-blocking
//! pipe) and its pidfd are watched under one token ([`Source::UpgradeCheck`]). Each
//! readiness (or `SIGCHLD`, without a pidfd) takes the next [`Check::step`]; the answer is
//! its first line, read as it arrives, at most [`MAX_ANSWER`] bytes; what is not decided
//! by [`Check::deadline`] is refused. A check let go of ([`Check::abandon`]) kills the
//! program and its process group, and leaves it to be reaped
//! ([`spawn::abandon`]: through [`Process`], which notes the reap).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry};

use super::PROBE_COMMAND;
use crate::driver::children::HelperStart;
use crate::driver::token::Source;
use crate::store::image::IMAGE_VERSION;
use crate::sys::fd::{read_nonblocking, ReadOutcome};
use crate::sys::process::{Exit, Process};
use crate::sys::spawn::{self, Env, IoMode, SpawnError, SpawnRequest, Starting, StderrMode};

/// Longest wait for a program's answer (and, if it says nothing, for its exit). The loop
/// serves everything else meanwhile; a program that takes longer to say its version would
/// not resume a daemon promptly either.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Longest answer read.
const MAX_ANSWER: usize = 4096;

/// The number the program's open file gets in the checked process, which executes it as
/// `/proc/self/fd/3` (a script's interpreter reads its file through that path too): the
/// program checked is the file the daemon opened, as is the one later executed.
const PROGRAM_FD: u32 = 3;

/// The answer's first word.
pub const PROBE_MAGIC: &str = "genward-image";

/// What the probed program said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// Its version (`CARGO_PKG_VERSION`).
    pub version: String,
}

/// The answer this build gives to `__image-version`.
pub fn answer() -> String {
    format!(
        "{PROBE_MAGIC} {} {IMAGE_VERSION} {}\n",
        crate::store::image::OLDEST_IMAGE_VERSION,
        env!("CARGO_PKG_VERSION")
    )
}

/// Parses an answer; `Err` says why it will not do.
pub fn parse_answer(text: &str) -> Result<Probed, String> {
    let mut words = text.split_whitespace();
    if words.next() != Some(PROBE_MAGIC) {
        let shown: String = text.chars().take(80).collect();
        return Err(format!(
            "it does not answer as genward does (said {shown:?})"
        ));
    }
    let num = |w: Option<&str>| w.and_then(|w| w.parse::<u32>().ok());
    let (Some(oldest), Some(newest), Some(version)) =
        (num(words.next()), num(words.next()), words.next())
    else {
        return Err("its answer about image formats is malformed".into());
    };
    if !(oldest..=newest).contains(&IMAGE_VERSION) {
        return Err(format!(
            "it reads image formats {oldest} to {newest}; this daemon writes {IMAGE_VERSION}"
        ));
    }
    Ok(Probed {
        version: version.to_owned(),
    })
}

/// What a step of a check found.
#[derive(Debug)]
pub enum Step {
    /// Not decided yet: wait for the next readiness, `SIGCHLD` or the deadline.
    Pending,
    /// Decided: what the program said, or why it will not do. Let the check go then
    /// ([`Check::abandon`]).
    Done(Result<Probed, String>),
}

/// Where a check is.
#[derive(Debug)]
enum Phase {
    /// Between its start and its exec: the status pipe and stdout registered.
    Starting(Starting),
    /// Running the program: stdout and the pidfd (if any) registered.
    Running { process: Process, stdout: OwnedFd },
    /// Let go of.
    Done,
}

/// One program being run with `__image-version`, watched without waiting for it. See the
/// [module docs](self).
#[derive(Debug)]
pub struct Check {
    phase: Phase,
    /// What it wrote so far (at most the answer's first line).
    answer: Vec<u8>,
    /// Its stdout reached end of file.
    eof: bool,
    deadline: Instant,
}

impl Check {
    /// Starts the program open at `program` with `__image-version`, and watches it. `Err`
    /// says why it could not be started (nothing is left running then).
    /// Marked as the daemon's helpers are (see [`HelperStart`]), so that a crash of the
    /// daemon meanwhile does not leave it running for good.
    pub fn start(
        registry: &Registry,
        program: BorrowedFd<'_>,
        helper: HelperStart,
    ) -> Result<Check, String> {
        let copy = program
            .try_clone_to_owned()
            .map_err(|e| format!("it cannot be run: {e}"))?;
        let request = SpawnRequest {
            argv: vec![
                format!("/proc/self/fd/{PROGRAM_FD}").into(),
                PROBE_COMMAND.into(),
            ],
            io: IoMode::Pipes {
                stderr: StderrMode::Null,
            },
            reaper: helper.reaper,
            extra_fd: Some((Arc::new(copy), PROGRAM_FD)),
            env: Env {
                set: vec![helper.marker],
                ..Env::default()
            },
            ..SpawnRequest::default()
        };
        let starting = spawn::start(&request).map_err(|e| cannot_run(&e))?;
        let mut check = Check {
            phase: Phase::Starting(starting),
            answer: Vec::new(),
            eof: false,
            deadline: Instant::now() + PROBE_TIMEOUT,
        };
        if let Err(e) = check.watch(registry) {
            check.abandon(registry);
            return Err(format!("watching it: {e}"));
        }
        Ok(check)
    }

    fn watch(&self, registry: &Registry) -> io::Result<()> {
        let Phase::Starting(starting) = &self.phase else {
            return Ok(());
        };
        register(registry, starting.status_fd())?;
        if let Some(fd) = starting.stdout_fd() {
            register(registry, fd)?;
        }
        Ok(())
    }

    /// When it is refused if still undecided.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// The next step after a readiness of its token, a `SIGCHLD` or its deadline. Never
    /// blocks; reads at most [`MAX_ANSWER`] bytes in all.
    pub fn step(&mut self, registry: &Registry) -> Step {
        if let Phase::Starting(starting) = &mut self.phase {
            if !starting.poll() {
                return Step::Pending;
            }
            let _ = registry.deregister(&mut SourceFd(&starting.status_fd().as_raw_fd()));
            let failure = starting.failure();
            if let Some(e) = failure {
                // Not run: the start is let go of (killed if need be, reaped later).
                self.abandon(registry);
                return Step::Done(Err(cannot_run(&e)));
            }
            let Phase::Starting(starting) = std::mem::replace(&mut self.phase, Phase::Done) else {
                return Step::Pending;
            };
            // It exec'd: `finish` does not wait, and hands stdout over still registered
            // (the same descriptor). Its stdin closes here: nothing is written to it.
            let child = match starting.finish() {
                Ok(child) => child,
                Err(e) => return Step::Done(Err(cannot_run(&e))),
            };
            let Some(stdout) = child.stdout else {
                spawn::abandon(child.process);
                return Step::Done(Err("it has no output".into()));
            };
            if let Some(fd) = child.process.pidfd() {
                // Without it, `SIGCHLD` and the deadline still take the next step.
                if let Err(e) = register(registry, fd) {
                    log::debug!("upgrade check: watching its pidfd: {e}");
                }
            }
            self.phase = Phase::Running {
                process: child.process,
                stdout,
            };
        }
        let Phase::Running { process, stdout } = &mut self.phase else {
            return Step::Pending;
        };
        let mut buf = [0u8; 512];
        while !self.eof && !self.answer.contains(&b'\n') {
            match read_nonblocking(stdout.as_fd(), &mut buf) {
                Ok(ReadOutcome::Data(n)) => {
                    self.answer.extend_from_slice(&buf[..n]);
                    if let Some(end) = self.answer.iter().position(|b| *b == b'\n') {
                        self.answer.truncate(end + 1);
                    }
                    if self.answer.len() > MAX_ANSWER {
                        return Step::Done(Err("its answer is too long".into()));
                    }
                }
                Ok(ReadOutcome::WouldBlock) => return Step::Pending,
                Ok(ReadOutcome::Eof) => self.eof = true,
                Err(e) => return Step::Done(Err(format!("reading its answer: {e}"))),
            }
        }
        if !self.answer.is_empty() {
            return Step::Done(parse_answer(&String::from_utf8_lossy(&self.answer)));
        }
        // Nothing said, and its stdout closed: its own status says why, once it has one
        // (its pidfd, or `SIGCHLD`, tells).
        match process.reap() {
            Ok(None) => Step::Pending,
            Ok(Some(exit)) => Step::Done(Err(format!("it said nothing ({})", status_text(exit)))),
            Err(e) => Step::Done(Err(format!("it said nothing ({e})"))),
        }
    }

    /// Why a check still undecided at its deadline is refused.
    pub fn overdue() -> String {
        format!("it did not answer within {} s", PROBE_TIMEOUT.as_secs())
    }

    /// Lets the check go: stops watching it, kills the program (and its process group,
    /// which it leads: a script's commands go with it) unless it already exited, and
    /// leaves it to be reaped — at once if it exited, else on `SIGCHLD`
    /// ([`spawn::reap_abandoned`]). Never waits.
    pub fn abandon(&mut self, registry: &Registry) {
        self.let_go(Some(registry));
    }

    fn let_go(&mut self, registry: Option<&Registry>) {
        let deregister = |fd: BorrowedFd<'_>| {
            if let Some(registry) = registry {
                let _ = registry.deregister(&mut SourceFd(&fd.as_raw_fd()));
            }
        };
        match std::mem::replace(&mut self.phase, Phase::Done) {
            Phase::Starting(starting) => {
                deregister(starting.status_fd());
                if let Some(fd) = starting.stdout_fd() {
                    deregister(fd);
                }
                // Dropping a start kills the child and parks it to be reaped.
                drop(starting);
            }
            Phase::Running { process, stdout } => {
                deregister(stdout.as_fd());
                drop(stdout);
                if let Some(fd) = process.pidfd() {
                    deregister(fd);
                }
                // Killed with its process group, and reaped now or later.
                spawn::abandon(process);
            }
            Phase::Done => {}
        }
    }
}

impl Drop for Check {
    /// A check dropped undecided (the daemon exiting) still kills its program.
    fn drop(&mut self) {
        self.let_go(None);
    }
}

fn register(registry: &Registry, fd: BorrowedFd<'_>) -> io::Result<()> {
    let token = Source::UpgradeCheck
        .token()
        .ok_or_else(|| io::Error::other("no token"))?;
    registry.register(&mut SourceFd(&fd.as_raw_fd()), token, Interest::READABLE)
}

/// A start that failed, as the check says it: the errno where there is one.
fn cannot_run(e: &SpawnError) -> String {
    match e.errno() {
        Some(errno) => format!("it cannot be run: {}", io::Error::from_raw_os_error(errno)),
        None => format!("it cannot be run: {e}"),
    }
}

/// An exit as `std::process::ExitStatus` shows it (`exit status: 1`, `signal: 11
/// (SIGSEGV) (core dumped)`).
fn status_text(exit: Exit) -> String {
    use std::os::unix::process::ExitStatusExt;
    let raw = match exit {
        Exit::Code(code) => (code & 0xff) << 8,
        Exit::Signal {
            signal,
            core_dumped,
        } => signal | if core_dumped { 0x80 } else { 0 },
        Exit::Unknown => return "its status is unknown".into(),
    };
    std::process::ExitStatus::from_raw(raw).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_answer_is_accepted() {
        let p = parse_answer(&answer()).unwrap();
        assert_eq!(p.version, env!("CARGO_PKG_VERSION"));
    }

    #[test]
    fn other_answers_are_refused_with_why() {
        assert!(parse_answer("hello").unwrap_err().contains("genward"));
        assert!(parse_answer("genward-image x")
            .unwrap_err()
            .contains("malformed"));
        let newer = format!("genward-image {0} {0} 9.9.9", IMAGE_VERSION + 1);
        assert!(parse_answer(&newer).unwrap_err().contains("writes"));
    }

    #[test]
    fn statuses_read_as_the_standard_library_shows_them() {
        assert_eq!(status_text(Exit::Code(0)), "exit status: 0");
        assert_eq!(status_text(Exit::Code(3)), "exit status: 3");
        let killed = Exit::Signal {
            signal: libc::SIGKILL,
            core_dumped: false,
        };
        assert_eq!(status_text(killed), "signal: 9 (SIGKILL)");
        let dumped = Exit::Signal {
            signal: libc::SIGSEGV,
            core_dumped: true,
        };
        assert_eq!(status_text(dumped), "signal: 11 (SIGSEGV) (core dumped)");
    }
}
