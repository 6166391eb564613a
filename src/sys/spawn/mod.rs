//! Starting a child without waiting for it: our own `clone(CLONE_VM)` (Linux; `fork`
//! elsewhere) + `execve`, over pipes or a PTY of our own.
//!
//! [`start`] returns as soon as the child exists, before it has exec'd: with the pid (and
//! pidfd), our ends of its stdio, and the read end of a close-on-exec *status pipe*. The
//! caller waits for that pipe to become readable (an event loop registers
//! [`Starting::status_fd`]) and then calls [`Starting::poll`] and [`Starting::finish`]:
//! end-of-file means the exec succeeded; a report means a step failed, and says which step,
//! which errno and which path. Nothing here ever waits for the child: a `chdir` or `execve`
//! that hangs on a dead mount hangs only the child. [`spawn`] is the blocking form.
//!
//! Every child is a session and process-group leader (`setsid`), starts with default signal
//! dispositions and an empty mask, and inherits none of our descriptors. The parent never
//! touches the filesystem on the child's behalf: the working directory and the `PATH`
//! search are the child's own business, after `chdir`.
//!
//! Everything the child needs is prepared before the child starts; until `execve` it makes
//! only raw system calls and writes no memory but its own stack (see `child.rs`, `raw.rs`,
//! and `launch.rs` for why the stack and the plan live until the status pipe reports).
//!
//! [`start_in`] starts the child inside a cgroup-v2 cgroup ([`crate::sys::cgroup`]), so
//! that the program never runs outside it: with `clone3(CLONE_INTO_CGROUP)` where the
//! kernel has it ([`CgroupEntry::CloneIntoCgroup`]), else by the child writing itself into
//! the cgroup's `cgroup.procs` before anything else ([`CgroupEntry::ChildWritesProcs`],
//! failures reported as [`Step::Cgroup`]). [`cgroup_entry`] tells which.

mod band;
mod child;
mod launch;
mod prepare;
mod raw;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use rustix::event::{poll, PollFd, PollFlags};
use rustix::fs::{open, openat, Mode, OFlags};
use rustix::io::{fcntl_dupfd_cloexec, Errno};
use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

pub use band::keep as keep_descriptor_bands;
pub use prepare::{MAX_ARGS, MAX_ARG_BYTES};

use crate::sys::cgroup::CgroupDir;
use crate::sys::fd::{read_nonblocking, set_nonblocking, ReadOutcome};
use crate::sys::identity::{self, Observed};
use crate::sys::process::{Process, ReaperMode};
use crate::sys::pty::open_pty;
use child::{Report, NO_PATH};
use launch::{ChildMemory, How, Launched};

/// The `TERM` a PTY child gets unless the request sets one.
pub const DEFAULT_TERM: &str = "xterm-256color";

/// What to run, where, with which environment and which stdio.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// The program and its arguments; `argv[0]` without a `/` is searched in the child's
    /// `PATH`. Executed directly, no shell.
    pub argv: Vec<OsString>,
    /// Working directory; ours when `None`.
    pub cwd: Option<PathBuf>,
    /// The environment.
    pub env: Env,
    /// Pipes or a PTY.
    pub io: IoMode,
    /// How the child will be watched.
    pub reaper: ReaperMode,
    /// Whom the child becomes before exec; the caller's identity when `None`. Plain numbers:
    /// names are resolved beforehand (see `crate::lookup`), since the child may not look
    /// anything up.
    pub credentials: Option<Credentials>,
    /// The child's file mode creation mask; ours when `None`.
    pub umask: Option<u32>,
    /// Resource limits set in the child, before it gives up its privileges (an
    /// unprivileged process could not raise a hard limit).
    pub rlimits: Vec<ResourceLimit>,
    /// One more descriptor the child gets, at the number given, without close-on-exec
    /// (a readiness notification pipe's write end). Shared so the request stays `Clone`.
    pub extra_fd: Option<(std::sync::Arc<OwnedFd>, u32)>,
}

/// A user and its groups, applied in the child as `setgroups`, `setgid`, `setuid` (each
/// the real, effective and saved id): the groups first, while the child may still change
/// them, the user last, since it gives up the right to change the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// The supplementary group ids (may be empty: none).
    pub groups: Vec<u32>,
}

/// One `setrlimit` for the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResourceLimit {
    /// `libc::RLIMIT_*`.
    pub resource: i32,
    /// What a refusal names: the spec's name for it (`nofile`).
    pub name: &'static str,
    /// The soft limit; [`RLIM_INFINITY`] for none.
    pub soft: u64,
    /// The hard limit; [`RLIM_INFINITY`] for none.
    pub hard: u64,
}

/// "No limit" in [`ResourceLimit`] (the kernel's `RLIM64_INFINITY`).
pub const RLIM_INFINITY: u64 = u64::MAX;

/// The child's environment: ours (or none), then `unset`, then `set`.
#[derive(Debug, Clone)]
pub struct Env {
    /// Start from our environment (`true`) or from an empty one.
    pub inherit: bool,
    /// Variables to set, applied last.
    pub set: Vec<(OsString, OsString)>,
    /// Variables to remove.
    pub unset: Vec<OsString>,
}

impl Default for Env {
    fn default() -> Env {
        Env {
            inherit: true,
            set: Vec::new(),
            unset: Vec::new(),
        }
    }
}

/// How the child's stdio is connected.
#[derive(Debug, Clone)]
pub enum IoMode {
    /// stdin, stdout (and stderr per `stderr`) as pipes; our ends non-blocking.
    Pipes {
        /// What happens to stderr.
        stderr: StderrMode,
    },
    /// A PTY of our own as stdin, stdout, stderr and controlling terminal.
    Pty {
        /// Initial rows.
        rows: u16,
        /// Initial columns.
        cols: u16,
        /// `TERM` for the child; [`DEFAULT_TERM`] when `None`.
        term: Option<OsString>,
    },
    /// `/dev/null` as stdin, stdout and stderr: for a helper whose output nobody reads
    /// (a readiness probe's command), which must never block on a full pipe.
    Null,
}

impl Default for IoMode {
    fn default() -> IoMode {
        IoMode::Pipes {
            stderr: StderrMode::Pipe,
        }
    }
}

/// Where a piped child's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StderrMode {
    /// A pipe of its own.
    #[default]
    Pipe,
    /// Into the stdout pipe.
    Merge,
    /// `/dev/null`.
    Null,
}

/// The step of a spawn that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// Creating pipes, the PTY, or `/dev/null`, or reading the child's status (in the
    /// parent).
    Setup = 1,
    /// Starting the child: its stack, `clone` or `fork` (in the parent), or leaving the
    /// descriptor table it started sharing (in the child; see `band.rs`).
    Fork = 2,
    /// `setsid` (in the child).
    Setsid = 3,
    /// `TIOCSCTTY` (in the child).
    ControllingTerminal = 4,
    /// `dup2` onto 0, 1, 2, and the status pipe onto 3 (in the child).
    Stdio = 5,
    /// Resetting signal mask and dispositions (in the child).
    Signals = 6,
    /// `chdir` (in the child).
    Chdir = 7,
    /// `execve` (in the child).
    Exec = 8,
    /// Entering the cgroup: the child writing itself into `cgroup.procs`, or opening that
    /// file for it (in the parent). A refused `clone3(CLONE_INTO_CGROUP)` is [`Step::Fork`].
    Cgroup = 9,
    /// `setrlimit` of a requested limit (in the child).
    Rlimit = 10,
    /// `setgroups`: the supplementary groups (in the child).
    Setgroups = 11,
    /// `setgid` (in the child).
    Setgid = 12,
    /// `setuid` (in the child).
    Setuid = 13,
    /// `execve` of a program that exists but whose interpreter does not: the program its
    /// `#!` line names, or its ELF loader (in the child; the kernel says `ENOENT` for it
    /// as for a missing program).
    Interpreter = 14,
}

impl Step {
    fn from_u32(n: u32) -> Option<Step> {
        Some(match n {
            1 => Step::Setup,
            2 => Step::Fork,
            3 => Step::Setsid,
            4 => Step::ControllingTerminal,
            5 => Step::Stdio,
            6 => Step::Signals,
            7 => Step::Chdir,
            8 => Step::Exec,
            9 => Step::Cgroup,
            10 => Step::Rlimit,
            11 => Step::Setgroups,
            12 => Step::Setgid,
            13 => Step::Setuid,
            14 => Step::Interpreter,
            _ => return None,
        })
    }

    /// A short name: `chdir`, `exec`, ...
    pub fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Fork => "fork",
            Step::Setsid => "setsid",
            Step::ControllingTerminal => "controlling terminal",
            Step::Stdio => "stdio",
            Step::Signals => "signals",
            Step::Chdir => "chdir",
            Step::Exec => "exec",
            Step::Cgroup => "cgroup",
            Step::Rlimit => "setrlimit",
            Step::Setgroups => "setgroups",
            Step::Setgid => "setgid",
            Step::Setuid => "setuid",
            Step::Interpreter => "exec",
        }
    }
}

/// Why a spawn failed. A child that was started is killed if need be and reaped (at once,
/// or soon after: see [`reap_abandoned`]).
#[derive(Debug)]
pub enum SpawnError {
    /// The request itself is unusable (empty argv, NUL byte, bad variable name, too big).
    Invalid(String),
    /// `ENOENT` (or `ENOTDIR`): the program, or the working directory, does not exist.
    NotFound {
        /// Which step.
        step: Step,
        /// Which path (see [`SpawnError::path`]).
        path: Option<PathBuf>,
    },
    /// `EACCES` or `EPERM` where a permission is what was refused: to execute the program,
    /// to enter the directory, to take the identity asked for (see
    /// [`SpawnError::from_errno`]).
    PermissionDenied {
        /// Which step.
        step: Step,
        /// The errno the kernel gave: `EACCES` or `EPERM`.
        errno: i32,
        /// Which path (see [`SpawnError::path`]).
        path: Option<PathBuf>,
    },
    /// Any other errno.
    Os {
        /// Which step.
        step: Step,
        /// The raw errno.
        errno: i32,
        /// Which path (see [`SpawnError::path`]).
        path: Option<PathBuf>,
    },
}

impl SpawnError {
    /// Classifies a failed step. A refusal (`EACCES`, `EPERM`) is a denied permission only
    /// where one is what the step needs — the program, the working directory, the
    /// identity; elsewhere (a `setrlimit` above what may be set, a cgroup the child may
    /// not enter) it is an error of its own, with its errno.
    fn from_errno(step: Step, errno: i32, path: Option<PathBuf>) -> SpawnError {
        let permission_step = matches!(
            step,
            Step::Exec | Step::Chdir | Step::Setgroups | Step::Setgid | Step::Setuid
        );
        match errno {
            // A working directory that is a file is not missing: said as it is.
            libc::ENOTDIR if step == Step::Chdir => SpawnError::Os { step, errno, path },
            libc::ENOENT | libc::ENOTDIR => SpawnError::NotFound { step, path },
            libc::EACCES | libc::EPERM if permission_step => {
                SpawnError::PermissionDenied { step, errno, path }
            }
            errno => SpawnError::Os { step, errno, path },
        }
    }

    fn setup(e: impl Into<io::Error>) -> SpawnError {
        let e: io::Error = e.into();
        SpawnError::from_errno(Step::Setup, e.raw_os_error().unwrap_or(libc::EIO), None)
    }

    /// The step that failed, if a step did.
    pub fn step(&self) -> Option<Step> {
        match self {
            SpawnError::Invalid(_) => None,
            SpawnError::NotFound { step, .. }
            | SpawnError::PermissionDenied { step, .. }
            | SpawnError::Os { step, .. } => Some(*step),
        }
    }

    /// The path the failed step was about: the working directory for [`Step::Chdir`]; for
    /// [`Step::Exec`] the program — the path tried, or `argv[0]` itself (which then has no
    /// `/`) when no directory of the child's `PATH` held an executable of that name. For
    /// [`Step::Rlimit`], the refused limit's [`name`](ResourceLimit::name).
    pub fn path(&self) -> Option<&Path> {
        match self {
            SpawnError::Invalid(_) => None,
            SpawnError::NotFound { path, .. }
            | SpawnError::PermissionDenied { path, .. }
            | SpawnError::Os { path, .. } => path.as_deref(),
        }
    }

    /// The errno, where one applies (`ENOENT` for a missing file or directory, whether
    /// the kernel said `ENOENT` or `ENOTDIR`; the kernel's own otherwise).
    pub fn errno(&self) -> Option<i32> {
        match self {
            SpawnError::Invalid(_) => None,
            SpawnError::NotFound { .. } => Some(libc::ENOENT),
            SpawnError::PermissionDenied { errno, .. } | SpawnError::Os { errno, .. } => {
                Some(*errno)
            }
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (step, path) = match self {
            SpawnError::Invalid(why) => return write!(f, "invalid spawn request: {why}"),
            SpawnError::NotFound { step, path }
            | SpawnError::PermissionDenied { step, path, .. }
            | SpawnError::Os { step, path, .. } => (*step, path.as_deref()),
        };
        match (step, path) {
            (Step::Chdir, Some(p)) => write!(f, "chdir to working directory {p:?}")?,
            (Step::Exec, Some(p)) if !p.as_os_str().as_bytes().contains(&b'/') => {
                write!(f, "exec {p:?} (searched PATH)")?
            }
            (Step::Exec, Some(p)) => write!(f, "exec {p:?}")?,
            (Step::Interpreter, Some(p)) => write!(
                f,
                "exec {p:?}: the interpreter it names (its \"#!\" line) or its ELF loader"
            )?,
            (Step::Rlimit, Some(name)) => write!(f, "setrlimit {}", name.display())?,
            (step, _) => f.write_str(step.name())?,
        }
        match self {
            SpawnError::NotFound { .. } => f.write_str(": no such file or directory"),
            SpawnError::PermissionDenied { .. } => f.write_str(": permission denied"),
            SpawnError::Os { errno, .. } => {
                write!(f, ": {}", io::Error::from_raw_os_error(*errno))
            }
            SpawnError::Invalid(_) => Ok(()),
        }
    }
}

impl std::error::Error for SpawnError {}

/// A started child and our ends of its stdio.
#[derive(Debug)]
pub struct Child {
    /// The process handle: pid, pidfd, identity token, exit and signals.
    pub process: Process,
    /// Write end of its stdin (pipes mode), non-blocking.
    pub stdin: Option<OwnedFd>,
    /// Read end of its stdout (pipes mode), non-blocking.
    pub stdout: Option<OwnedFd>,
    /// Read end of its stderr (pipes mode with [`StderrMode::Pipe`]), non-blocking.
    pub stderr: Option<OwnedFd>,
    /// The PTY master (PTY mode), non-blocking: read output, write input, resize.
    pub pty: Option<OwnedFd>,
}

/// Our ends and the child's ends of its stdio, before the fork.
struct Stdio {
    parent_stdin: Option<OwnedFd>,
    parent_stdout: Option<OwnedFd>,
    parent_stderr: Option<OwnedFd>,
    pty: Option<OwnedFd>,
    /// The descriptors the child installs as 0, 1, 2, moved to >= 3.
    child: [OwnedFd; 3],
    controlling_tty: bool,
}

/// Moves `fd` above 2 if it is 0, 1 or 2 (possible when our own stdio is closed), so the
/// child's `dup2` sequence cannot overwrite a source it still needs.
fn above_stdio(fd: OwnedFd) -> io::Result<OwnedFd> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    Ok(fcntl_dupfd_cloexec(&fd, 3)?)
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    let (r, w) = pipe_with(PipeFlags::CLOEXEC)?;
    Ok((above_stdio(r)?, above_stdio(w)?))
}

/// Makes the daemon's end of a pipe just made by [`pipe_pair`] non-blocking in one
/// `fcntl`: `F_SETFL` ignores the access mode, and a new pipe end has no other status flag
/// (close-on-exec is a descriptor flag), so there is nothing to read back first.
fn fresh_pipe_nonblocking(fd: &OwnedFd) -> io::Result<()> {
    rustix::fs::fcntl_setfl(fd, OFlags::NONBLOCK)?;
    Ok(())
}

fn make_stdio(io_mode: &IoMode) -> io::Result<Stdio> {
    match io_mode {
        IoMode::Pipes { stderr } => {
            let (in_r, in_w) = pipe_pair()?;
            let (out_r, out_w) = pipe_pair()?;
            fresh_pipe_nonblocking(&in_w)?;
            fresh_pipe_nonblocking(&out_r)?;
            let (parent_stderr, child_err) = match stderr {
                StderrMode::Pipe => {
                    let (err_r, err_w) = pipe_pair()?;
                    fresh_pipe_nonblocking(&err_r)?;
                    (Some(err_r), err_w)
                }
                StderrMode::Merge => (None, above_stdio(out_w.try_clone()?)?),
                StderrMode::Null => (
                    None,
                    above_stdio(open(
                        "/dev/null",
                        OFlags::WRONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?)?,
                ),
            };
            Ok(Stdio {
                parent_stdin: Some(in_w),
                parent_stdout: Some(out_r),
                parent_stderr,
                pty: None,
                child: [in_r, out_w, child_err],
                controlling_tty: false,
            })
        }
        IoMode::Null => {
            let null = above_stdio(open(
                "/dev/null",
                OFlags::RDWR | OFlags::CLOEXEC,
                Mode::empty(),
            )?)?;
            Ok(Stdio {
                parent_stdin: None,
                parent_stdout: None,
                parent_stderr: None,
                pty: None,
                child: [null.try_clone()?, null.try_clone()?, null],
                controlling_tty: false,
            })
        }
        IoMode::Pty { rows, cols, .. } => {
            let pair = open_pty(*rows, *cols)?;
            set_nonblocking(&pair.master)?;
            let peer = above_stdio(pair.peer)?;
            let child = [peer.try_clone()?, peer.try_clone()?, peer];
            Ok(Stdio {
                parent_stdin: None,
                parent_stdout: None,
                parent_stderr: None,
                pty: Some(above_stdio(pair.master)?),
                child,
                controlling_tty: true,
            })
        }
    }
}

/// A child that has been started but has not yet exec'd (or failed to), and our ends of its
/// stdio. See the [module docs](self) and [`start`].
///
/// Dropping it before [`Starting::finish`] kills the child (it is our unreaped child, so its
/// pid is still its own) and hands it to [`reap_abandoned`].
pub struct Starting {
    /// `Some` until `finish` takes it (or `drop` buries it).
    child: Option<Started>,
    status: OwnedFd,
    report: [u8; Report::LEN],
    got: usize,
    outcome: Option<Outcome>,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    pty: Option<OwnedFd>,
}

/// The child of a [`Starting`], and what it may still be using of ours.
struct Started {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    /// `None` once the child has left our memory.
    memory: Option<ChildMemory>,
}

/// What the status pipe said.
#[derive(Debug, Clone, Copy)]
enum Outcome {
    /// End-of-file with nothing before it: the child exec'd (or died before it could
    /// report; its exit then shows as usual).
    Exec,
    /// The child reported a failed step and is exiting.
    Failed(Report),
    /// The pipe broke its protocol (a short report) or could not be read.
    Broken(i32),
}

impl fmt::Debug for Starting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Starting")
            .field("pid", &self.child.as_ref().map(|c| c.pid.as_raw_pid()))
            .field("status", &self.status)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl Starting {
    /// The child's pid (also its process group and session id).
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.pid.as_raw_pid())
    }

    /// The read end of the status pipe, non-blocking: register it for readability and call
    /// [`Starting::poll`] whenever it is readable. It is closed by [`Starting::finish`] (and
    /// on drop), so deregister it first.
    pub fn status_fd(&self) -> BorrowedFd<'_> {
        self.status.as_fd()
    }

    /// Our end of the child's stdout pipe (pipes mode), non-blocking: for a child whose
    /// output is wanted before [`Starting::finish`] (a helper that answers and exits). It
    /// is closed by `finish` (which hands it over) and on drop, so deregister it first.
    pub fn stdout_fd(&self) -> Option<BorrowedFd<'_>> {
        self.stdout.as_ref().map(|fd| fd.as_fd())
    }

    /// Why the child did not exec, once [`Starting::poll`] has returned `true`: the failed
    /// step, as [`Starting::finish`] would return it. `None` while that is not known, or
    /// when it exec'd.
    pub fn failure(&self) -> Option<SpawnError> {
        let started = self.child.as_ref()?;
        match self.outcome? {
            Outcome::Exec => None,
            Outcome::Failed(report) => Some(self.error_of(started, report)),
            Outcome::Broken(errno) => Some(SpawnError::from_errno(Step::Setup, errno, None)),
        }
    }

    /// Reads what the status pipe holds, without blocking. Returns `true` once the outcome
    /// is known (then stop watching [`Starting::status_fd`] and call
    /// [`Starting::finish`]); `false` means wait for the next readiness.
    pub fn poll(&mut self) -> bool {
        if self.outcome.is_some() {
            return true;
        }
        loop {
            let outcome = match read_nonblocking(self.status.as_fd(), &mut self.report[self.got..])
            {
                Ok(ReadOutcome::Data(n)) => {
                    self.got += n;
                    self.take_back_band();
                    if self.got < Report::LEN {
                        continue;
                    }
                    Outcome::Failed(Report::from_bytes(&self.report))
                }
                Ok(ReadOutcome::WouldBlock) => return false,
                Ok(ReadOutcome::Eof) if self.got == 0 => Outcome::Exec,
                Ok(ReadOutcome::Eof) => Outcome::Broken(libc::EPROTO),
                Err(e) => Outcome::Broken(e.raw_os_error().unwrap_or(libc::EIO)),
            };
            if let (Outcome::Exec, Some(child)) = (outcome, &mut self.child) {
                // The kernel closes the child's descriptors only after it has switched to
                // the new program's address space (exec) or released ours (exit).
                child.memory = None;
            }
            self.outcome = Some(outcome);
            return true;
        }
    }

    /// A child that started sharing our descriptor table says first, on the status pipe,
    /// that it has left it: its band is taken back, and the rest is read as ever. Anything
    /// else first is the report of a child that could not leave it and is exiting; its
    /// band comes back once it is reaped.
    fn take_back_band(&mut self) {
        let Some(memory) = self.child.as_mut().and_then(|c| c.memory.as_mut()) else {
            return;
        };
        if memory.shares_table() && self.got > 0 && self.report[0] == band::UNSHARED {
            memory.left_table();
            self.report.copy_within(1..self.got, 0);
            self.got -= 1;
        }
    }

    /// The outcome: the running child, or the failed step with its errno and path.
    ///
    /// Meant for after [`Starting::poll`] returned `true`. Called before, it *blocks* until
    /// the child has exec'd or failed — which is what [`spawn`] does; an event loop never
    /// calls it early.
    pub fn finish(mut self) -> Result<Child, SpawnError> {
        while !self.poll() {
            let mut fds = [PollFd::new(&self.status, PollFlags::IN)];
            // Now and then a look at whether the child died before it could leave our
            // descriptor table (see `band.rs`): its end-of-file would never come.
            let tick = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 100_000_000,
            };
            match poll(&mut fds, Some(&tick)) {
                Ok(0) => band::release_dead(),
                Ok(_) | Err(Errno::INTR) => {}
                Err(e) => {
                    self.outcome = Some(Outcome::Broken(e.raw_os_error()));
                }
            }
        }
        let started = self.child.take().expect("finish consumes the child once");
        let outcome = self.outcome.expect("poll returned true");
        reap_abandoned();
        match outcome {
            Outcome::Exec => {
                let pid = started.pid.as_raw_pid();
                let token =
                    match identity::observe(pid, started.pidfd.as_ref().map(|fd| fd.as_fd())) {
                        Observed::Token(token) => Some(token),
                        Observed::Gone | Observed::Unreadable(_) => None,
                    };
                Ok(Child {
                    process: Process::child(started.pid, started.pidfd, token),
                    stdin: self.stdin.take(),
                    stdout: self.stdout.take(),
                    stderr: self.stderr.take(),
                    pty: self.pty.take(),
                })
            }
            Outcome::Failed(report) => {
                let error = self.error_of(&started, report);
                bury(started);
                Err(error)
            }
            Outcome::Broken(errno) => {
                bury(started);
                Err(SpawnError::from_errno(Step::Setup, errno, None))
            }
        }
    }

    /// The error a child's report describes, with the path it was about.
    fn error_of(&self, started: &Started, report: Report) -> SpawnError {
        let Some(step) = Step::from_u32(report.step) else {
            return SpawnError::from_errno(Step::Setup, libc::EPROTO, None);
        };
        let to_path = |bytes: &[u8]| Some(PathBuf::from(OsStr::from_bytes(bytes)));
        // The child has not necessarily left our memory yet, but it only reads the plan, as
        // we do here.
        let path = started.memory.as_ref().and_then(|memory| {
            let prepared = &memory.plan().prepared;
            match step {
                Step::Chdir => prepared.cwd.as_ref().and_then(|c| to_path(c.to_bytes())),
                Step::Exec => {
                    let program = prepared.argv.first()?.to_bytes();
                    let searched = !program.contains(&b'/');
                    let not_found = matches!(report.errno, libc::ENOENT | libc::ENOTDIR);
                    if report.path == NO_PATH || (searched && not_found) {
                        // Nothing in PATH had it: name the program as asked for.
                        to_path(program)
                    } else {
                        let candidate = prepared.candidates.get(report.path as usize)?;
                        to_path(candidate.to_bytes())
                    }
                }
                // The program found, its interpreter missing: named as found.
                Step::Interpreter => {
                    let candidate = prepared.candidates.get(report.path as usize)?;
                    to_path(candidate.to_bytes())
                }
                // Not a path: the refused limit's name, said the same way.
                Step::Rlimit => {
                    let limit = memory.plan().rlimits.get(report.path as usize)?;
                    Some(PathBuf::from(limit.name))
                }
                _ => None,
            }
        });
        SpawnError::from_errno(step, report.errno, path)
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(started) = self.child.take() {
            bury(started);
        }
    }
}

/// Children that failed or were abandoned and had not exited yet when we let go of them,
/// with the memory they may still be using. Reaped (and freed) by [`reap_abandoned`].
static ABANDONED: Mutex<Vec<(Process, Option<ChildMemory>)>> = Mutex::new(Vec::new());

/// Lets go of a running child we started and no longer want (a readiness probe that
/// outlived its time): kills the process group it leads (every child is a group leader:
/// what a probe's shell started goes too) and it, then reaps it if it has exited, else
/// parks it for [`reap_abandoned`]. It is our unreaped child, so neither its pid nor its
/// group can name a stranger. Never waits.
pub fn abandon(mut process: Process) {
    let _ = process.signal_group(Signal::KILL);
    let _ = process.signal(Signal::KILL);
    if let Ok(Some(_)) = process.reap() {
        return;
    }
    ABANDONED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((process, None));
}

/// Lets go of a started child we will not run: reaps it if it has exited, else kills it
/// (harmless if it is exiting anyway; it may be stopped) and parks it for
/// [`reap_abandoned`]. Never waits.
fn bury(started: Started) {
    let Started { pid, pidfd, memory } = started;
    let mut process = Process::child(pid, pidfd, None);
    if let Ok(Some(_)) = process.reap() {
        return; // exited: it no longer uses `memory`, which drops here
    }
    // `pid` is our unreaped child, so neither route can reach a stranger.
    let _ = match process.pidfd() {
        Some(fd) => pidfd_send_signal(fd, Signal::KILL),
        None => rustix::process::kill_process(pid, Signal::KILL),
    };
    ABANDONED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((process, memory));
}

/// Reaps the children that failed to exec or were abandoned (a [`Starting`] dropped before
/// it finished) once they have exited, and frees the memory they were using; returns how
/// many are still waiting to exit. Never blocks.
///
/// Each [`start`] and [`Starting::finish`] calls it, so a busy loop need not; call it now
/// and then (or on `SIGCHLD`) to not keep a zombie until the next spawn. A child stays here
/// only as long as it takes to exit after `SIGKILL` (a failed child is exiting already).
///
/// It also takes back the descriptor bands of children that died before they could leave
/// our descriptor table (see `band.rs`), whose status pipe would otherwise never report:
/// an event loop calls it on every `SIGCHLD`.
pub fn reap_abandoned() -> usize {
    band::release_dead();
    let mut parked = ABANDONED.lock().unwrap_or_else(|e| e.into_inner());
    // Reaped, or not ours any more (`ECHILD`: someone else reaped it): either way it has
    // left our memory. Any other error keeps it, memory and all.
    parked.retain_mut(|(process, _)| match process.reap() {
        Ok(Some(_)) => false,
        Ok(None) => true,
        Err(e) => e.raw_os_error() != Some(libc::ECHILD),
    });
    parked.len()
}

/// How a child spawned into a cgroup gets there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CgroupEntry {
    /// `clone3(CLONE_INTO_CGROUP)`: the kernel starts the child inside (Linux 5.7+, on
    /// x86-64; with `CLONE_PIDFD` too).
    CloneIntoCgroup,
    /// The child writes itself into the cgroup's `cgroup.procs` as its first step, before
    /// anything else it does and long before the program runs.
    ChildWritesProcs,
}

impl CgroupEntry {
    /// `clone3` or `cgroup.procs`.
    pub fn name(self) -> &'static str {
        match self {
            CgroupEntry::CloneIntoCgroup => "clone3",
            CgroupEntry::ChildWritesProcs => "cgroup.procs",
        }
    }
}

/// 0: not probed yet; 1: [`CgroupEntry::CloneIntoCgroup`]; 2: [`CgroupEntry::ChildWritesProcs`].
static ENTRY: AtomicU8 = AtomicU8::new(0);

/// How [`start_in`] enters cgroups on this kernel and target, probed once (one failing
/// `clone3`, nothing started).
pub fn cgroup_entry() -> CgroupEntry {
    match ENTRY.load(Ordering::Relaxed) {
        1 => CgroupEntry::CloneIntoCgroup,
        2 => CgroupEntry::ChildWritesProcs,
        _ => {
            let entry = if launch::probe_clone_into_cgroup() {
                CgroupEntry::CloneIntoCgroup
            } else {
                CgroupEntry::ChildWritesProcs
            };
            let code = match entry {
                CgroupEntry::CloneIntoCgroup => 1,
                CgroupEntry::ChildWritesProcs => 2,
            };
            ENTRY.store(code, Ordering::Relaxed);
            entry
        }
    }
}

/// Starts `req` and returns as soon as the child exists, without waiting for it to exec.
///
/// Errors here are about the request or about us (pipes, PTY, `clone`); whether the
/// child's `chdir` and `execve` succeed arrives later, through [`Starting::status_fd`]. The
/// parent touches neither the working directory nor the program's path.
///
/// With [`ReaperMode::Auto`] the child's pidfd is opened right after it was started: it is
/// our unreaped child, so the pid cannot have been reused and the pidfd refers to it for
/// good.
pub fn start(req: &SpawnRequest) -> Result<Starting, SpawnError> {
    start_with(req, None)
}

/// [`start`], the child inside the cgroup `cgroup` (when `Some`) from before its first
/// instruction ([`CgroupEntry::CloneIntoCgroup`]) or from its first step
/// ([`CgroupEntry::ChildWritesProcs`]), whichever [`cgroup_entry`] says this kernel does;
/// either way before the program runs.
///
/// `clone3` refusing the cgroup (`ENOENT`: removed; `EOPNOTSUPP`: an invalid domain;
/// `EBUSY`: not a leaf and has controllers; `EAGAIN`: `pids.max` reached, among other
/// reasons) is an error of this call, at [`Step::Fork`]. With the fallback, a removed
/// cgroup fails this call at [`Step::Cgroup`] (opening its `cgroup.procs`), and the
/// child's refused write arrives on the status pipe, also as [`Step::Cgroup`]. Either way
/// no program runs outside its cgroup.
pub fn start_in(req: &SpawnRequest, cgroup: Option<&CgroupDir>) -> Result<Starting, SpawnError> {
    start_with(req, cgroup.map(|dir| (dir, cgroup_entry())))
}

/// [`start_in`] with the way into the cgroup chosen by the caller, for tests and benches
/// (the fallback can be exercised on a kernel that has `clone3`).
/// [`CgroupEntry::CloneIntoCgroup`] where this target cannot do it fails with `ENOSYS` at
/// [`Step::Fork`].
pub fn start_in_via(
    req: &SpawnRequest,
    cgroup: &CgroupDir,
    entry: CgroupEntry,
) -> Result<Starting, SpawnError> {
    start_with(req, Some((cgroup, entry)))
}

/// [`spawn`] into a cgroup: [`start_in`] then [`Starting::finish`].
pub fn spawn_in(req: &SpawnRequest, cgroup: Option<&CgroupDir>) -> Result<Child, SpawnError> {
    start_in(req, cgroup)?.finish()
}

fn start_with(
    req: &SpawnRequest,
    cgroup: Option<(&CgroupDir, CgroupEntry)>,
) -> Result<Starting, SpawnError> {
    reap_abandoned();
    let term = match &req.io {
        IoMode::Pty { term, .. } => Some(term.clone().unwrap_or_else(|| DEFAULT_TERM.into())),
        IoMode::Pipes { .. } | IoMode::Null => None,
    };
    let prepared = prepare::prepare(req, term.as_deref())?;
    let pointers = prepared.pointers();
    let stdio = make_stdio(&req.io).map_err(SpawnError::setup)?;
    let (status_r, status_w) =
        pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).map_err(SpawnError::setup)?;
    let status_w = above_stdio(status_w).map_err(SpawnError::setup)?;
    // With an extra descriptor for the child at `target`, its source and the status pipe
    // move above it, so that the child's `dup2`s cannot overwrite a source still needed.
    let (status_w, extra) = match &req.extra_fd {
        None => (status_w, None),
        Some((fd, target)) => {
            let min = target.saturating_add(2).max(5).min(i32::MAX as u32) as i32;
            let status_w = fcntl_dupfd_cloexec(&status_w, min).map_err(SpawnError::setup)?;
            let source = fcntl_dupfd_cloexec(fd.as_ref(), min).map_err(SpawnError::setup)?;
            (status_w, Some((source, *target as i32)))
        }
    };
    // For the fallback: the child's way into its cgroup, opened here (the child opens
    // nothing), closed on our side once the child has its copy.
    let cgroup_procs = match cgroup {
        Some((dir, CgroupEntry::ChildWritesProcs)) => Some(
            openat(
                dir,
                "cgroup.procs",
                OFlags::WRONLY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io::Error::from)
            .and_then(above_stdio)
            .map_err(|e| {
                SpawnError::from_errno(Step::Cgroup, e.raw_os_error().unwrap_or(libc::EIO), None)
            })?,
        ),
        _ => None,
    };
    let how = match cgroup {
        Some((dir, CgroupEntry::CloneIntoCgroup)) => How::IntoCgroup {
            cgroup: dir.as_fd().as_raw_fd(),
            pidfd: req.reaper == ReaperMode::Auto,
        },
        _ => How::Plain,
    };
    let mut plan = Box::new(child::Plan {
        stdio: [
            stdio.child[0].as_raw_fd(),
            stdio.child[1].as_raw_fd(),
            stdio.child[2].as_raw_fd(),
        ],
        controlling_tty: stdio.controlling_tty,
        nofile: crate::sys::rlimit::child_nofile_limit(),
        prepared,
        pointers,
        status_pipe: status_w.as_raw_fd(),
        cgroup_procs: cgroup_procs.as_ref().map(|fd| fd.as_raw_fd()),
        credentials: req.credentials.clone(),
        umask: req.umask,
        rlimits: req.rlimits.clone(),
        extra: extra.as_ref().map(|(fd, target)| (fd.as_raw_fd(), *target)),
        unshare_below: None,
    });
    let lease = band::lend().and_then(|lease| into_band(&lease, &mut plan).then_some(lease));
    let Launched {
        pid,
        pidfd: clone_pidfd,
        memory,
    } = launch::launch(plan, how, lease)
        .map_err(|errno| SpawnError::from_errno(Step::Fork, errno, None))?;
    // The child's ends are the child's now; closing ours makes EOF reach the right side.
    drop(status_w);
    drop(cgroup_procs);
    drop(extra);
    let Stdio {
        parent_stdin,
        parent_stdout,
        parent_stderr,
        pty,
        child: child_ends,
        ..
    } = stdio;
    drop(child_ends);
    let pid = Pid::from_raw(pid).expect("clone returned a positive pid");
    let pidfd = match req.reaper {
        ReaperMode::Fallback => None,
        // From clone3, or opened now. ENOSYS (before 5.3) or anything else: fall back to
        // the pid, which stays ours until we reap it.
        ReaperMode::Auto => clone_pidfd.or_else(|| pidfd_open(pid, PidfdFlags::empty()).ok()),
    };
    Ok(Starting {
        child: Some(Started {
            pid,
            pidfd,
            memory: Some(memory),
        }),
        status: status_r,
        report: [0; Report::LEN],
        got: 0,
        outcome: None,
        stdin: parent_stdin,
        stdout: parent_stdout,
        stderr: parent_stderr,
        pty,
    })
}

/// Moves every descriptor `plan` gives the child into `lease`'s band and has the child
/// start sharing our table and leave it first thing (see `band.rs`); `false` (and `plan`
/// as it was) where that cannot be: an extra descriptor whose number is not below the
/// bands, or a failed `dup3`.
fn into_band(lease: &band::Lease, plan: &mut child::Plan) -> bool {
    if plan
        .extra
        .is_some_and(|(_, target)| target + 2 > band::LOWEST)
    {
        return false;
    }
    let place = |i: usize, fd: RawFd| {
        // SAFETY: `fd` is one of the plan's descriptors, which the plan's maker
        // (`start_with`) keeps open until the child has started.
        lease.place(i, unsafe { BorrowedFd::borrow_raw(fd) })
    };
    let placed = (|| -> io::Result<_> {
        let mut stdio = plan.stdio;
        for (i, fd) in stdio.iter_mut().enumerate() {
            *fd = place(i, *fd)?;
        }
        let status = place(3, plan.status_pipe)?;
        let procs = plan.cgroup_procs.map(|fd| place(4, fd)).transpose()?;
        let extra = match plan.extra {
            Some((fd, target)) => Some((place(5, fd)?, target)),
            None => None,
        };
        Ok((stdio, status, procs, extra))
    })();
    let Ok((stdio, status, procs, extra)) = placed else {
        return false;
    };
    plan.stdio = stdio;
    plan.status_pipe = status;
    plan.cgroup_procs = procs;
    plan.extra = extra;
    plan.unshare_below = Some(lease.end);
    true
}

/// Starts `req` and waits (blocking) until the child has exec'd or failed: [`start`] then
/// [`Starting::finish`]. For callers that are not an event loop; the loop uses [`start`].
pub fn spawn(req: &SpawnRequest) -> Result<Child, SpawnError> {
    start(req)?.finish()
}
