//! Starting a child: our own `clone(CLONE_VM|CLONE_VFORK)` (Linux; `fork` elsewhere) +
//! `execve`, over pipes or a PTY of our own.
//!
//! Every child is a session and process-group leader (`setsid`), starts with default signal
//! dispositions and an empty mask, and inherits none of our descriptors (all of ours are
//! close-on-exec). A failed exec comes back as a [`SpawnError`] naming the step and the
//! errno, through a close-on-exec pipe that the child writes to only if `execve` fails.
//!
//! Everything the child needs is prepared before the child starts; until `execve` it makes
//! only async-signal-safe system calls and writes no memory but its own stack (see
//! `child.rs`).

mod child;
mod prepare;

use std::ffi::OsString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::PathBuf;

use rustix::fs::{open, Mode, OFlags};
use rustix::io::{fcntl_dupfd_cloexec, Errno};
use rustix::pipe::{pipe_with, PipeFlags};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

pub use prepare::{MAX_ARGS, MAX_ARG_BYTES};

use crate::sys::fd::set_nonblocking;
use crate::sys::identity::{self, Observed};
use crate::sys::process::{Process, ReaperMode};
use crate::sys::pty::open_pty;

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
}

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
    /// Creating pipes, the PTY, or `/dev/null` (in the parent).
    Setup = 1,
    /// Starting the child: `clone` or `fork` (in the parent).
    Fork = 2,
    /// `setsid` (in the child).
    Setsid = 3,
    /// `TIOCSCTTY` (in the child).
    ControllingTerminal = 4,
    /// `dup2` onto 0, 1, 2 (in the child).
    Stdio = 5,
    /// Resetting signal mask and dispositions (in the child).
    Signals = 6,
    /// `chdir` (in the child).
    Chdir = 7,
    /// `execve` (in the child).
    Exec = 8,
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
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Step::Setup => "setup",
            Step::Fork => "fork",
            Step::Setsid => "setsid",
            Step::ControllingTerminal => "controlling terminal",
            Step::Stdio => "stdio",
            Step::Signals => "signals",
            Step::Chdir => "chdir",
            Step::Exec => "exec",
        }
    }
}

/// Why a spawn failed. The child (if one was forked) has been reaped.
#[derive(Debug)]
pub enum SpawnError {
    /// The request itself is unusable (empty argv, NUL byte, bad variable name, too big).
    Invalid(String),
    /// `ENOENT` (or `ENOTDIR`): the program, or the working directory, does not exist.
    NotFound {
        /// Which step.
        step: Step,
    },
    /// `EACCES` or `EPERM`: not allowed to execute the program or enter the directory.
    PermissionDenied {
        /// Which step.
        step: Step,
    },
    /// Any other errno.
    Os {
        /// Which step.
        step: Step,
        /// The raw errno.
        errno: i32,
    },
}

impl SpawnError {
    fn from_errno(step: Step, errno: i32) -> SpawnError {
        match errno {
            libc::ENOENT | libc::ENOTDIR => SpawnError::NotFound { step },
            libc::EACCES | libc::EPERM => SpawnError::PermissionDenied { step },
            errno => SpawnError::Os { step, errno },
        }
    }

    fn setup(e: impl Into<io::Error>) -> SpawnError {
        let e: io::Error = e.into();
        SpawnError::from_errno(Step::Setup, e.raw_os_error().unwrap_or(libc::EIO))
    }

    /// The step that failed, if a step did.
    pub fn step(&self) -> Option<Step> {
        match self {
            SpawnError::Invalid(_) => None,
            SpawnError::NotFound { step }
            | SpawnError::PermissionDenied { step }
            | SpawnError::Os { step, .. } => Some(*step),
        }
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpawnError::Invalid(why) => write!(f, "invalid spawn request: {why}"),
            SpawnError::NotFound { step } => {
                write!(f, "{}: no such file or directory", step.name())
            }
            SpawnError::PermissionDenied { step } => {
                write!(f, "{}: permission denied", step.name())
            }
            SpawnError::Os { step, errno } => write!(
                f,
                "{}: {}",
                step.name(),
                io::Error::from_raw_os_error(*errno)
            ),
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

fn make_stdio(io_mode: &IoMode) -> io::Result<Stdio> {
    match io_mode {
        IoMode::Pipes { stderr } => {
            let (in_r, in_w) = pipe_pair()?;
            let (out_r, out_w) = pipe_pair()?;
            set_nonblocking(&in_w)?;
            set_nonblocking(&out_r)?;
            let (parent_stderr, child_err) = match stderr {
                StderrMode::Pipe => {
                    let (err_r, err_w) = pipe_pair()?;
                    set_nonblocking(&err_r)?;
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

/// Blocks every signal in this thread until dropped, so no handler runs in the child
/// between `fork` and the child's own reset.
struct SignalsBlocked(libc::sigset_t);

impl SignalsBlocked {
    fn new() -> SignalsBlocked {
        // SAFETY: plain sigset manipulation on local, initialized values.
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            SignalsBlocked(old)
        }
    }
}

impl Drop for SignalsBlocked {
    fn drop(&mut self) {
        // SAFETY: restores the mask saved in `new`.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.0, std::ptr::null_mut());
        }
    }
}

/// Stack for the child between `clone` and `execve`: it runs only `child::run`, a shallow
/// sequence of system calls.
#[cfg(target_os = "linux")]
const CHILD_STACK: usize = 64 * 1024;

#[cfg(target_os = "linux")]
extern "C" fn child_entry(plan: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `plan` is the `&Plan` passed to `clone` below; with CLONE_VFORK the parent
    // thread, which owns it, is suspended until this child execs or exits.
    unsafe { child::run(&*(plan as *const child::Plan<'_>)) }
}

/// Starts the child running [`child::run`]; returns its pid, or -1 with errno set.
///
/// Linux: `clone(CLONE_VM | CLONE_VFORK | SIGCHLD)` on a stack of its own, as glibc's
/// `posix_spawn` does: no page tables are copied and the parent sleeps until the child has
/// exec'd or exited, which makes a spawn markedly cheaper than `fork`. The child shares our
/// memory but not our descriptor table or signal handlers, only reads what `plan` points
/// to, and writes nothing but its own stack (and this thread's errno, while we sleep).
/// Elsewhere: `fork`.
fn start_child(plan: &child::Plan<'_>) -> libc::pid_t {
    #[cfg(target_os = "linux")]
    {
        let mut stack = vec![0u8; CHILD_STACK];
        // SAFETY: the top of `stack`, aligned down to 16 bytes as every ABI requires, is
        // inside the allocation; `stack` and `plan` outlive the child's use of them because
        // CLONE_VFORK suspends us until it execs or exits.
        unsafe {
            let top = stack.as_mut_ptr().add(CHILD_STACK);
            let top = top.sub(top as usize % 16);
            libc::clone(
                child_entry,
                top.cast(),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                plan as *const child::Plan<'_> as *mut libc::c_void,
            )
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        // SAFETY: `fork` has no preconditions; the child only calls `child::run`, which
        // makes async-signal-safe calls on memory prepared before and never returns.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            // SAFETY: we are the freshly forked child and `plan` points into live memory.
            unsafe { child::run(plan) }
        }
        pid
    }
}

/// Reads the child's `(step, errno)` report, retrying `EINTR`; `None` at EOF (the error
/// pipe closed on a successful exec).
fn read_report(fd: &OwnedFd) -> io::Result<Option<(u32, i32)>> {
    let mut buf = [0u8; 8];
    let mut got = 0;
    while got < buf.len() {
        match rustix::io::read(fd, &mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    if got < buf.len() {
        return Ok(None);
    }
    let step = u32::from_ne_bytes(buf[..4].try_into().expect("4 bytes"));
    let errno = i32::from_ne_bytes(buf[4..].try_into().expect("4 bytes"));
    Ok(Some((step, errno)))
}

/// Waits (blocking) for a child that reported an exec failure and is exiting.
fn reap_failed(pid: libc::pid_t) {
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child by pid; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return;
        }
    }
}

/// Starts `req`: start the child, set it up, exec. Returns once the exec has succeeded (the
/// error pipe closed) or failed (reported and the child reaped).
///
/// With [`ReaperMode::Auto`] the child's pidfd is opened as soon as it has exec'd, before anything
/// could reap it, so it refers to this child for good. The identity token is read then too.
pub fn spawn(req: &SpawnRequest) -> Result<Child, SpawnError> {
    let term = match &req.io {
        IoMode::Pty { term, .. } => Some(term.clone().unwrap_or_else(|| DEFAULT_TERM.into())),
        IoMode::Pipes { .. } => None,
    };
    let prepared = prepare::prepare(req, term.as_deref())?;
    let pointers = prepared.pointers();
    let stdio = make_stdio(&req.io).map_err(SpawnError::setup)?;
    let (report_r, report_w) = pipe_with(PipeFlags::CLOEXEC).map_err(SpawnError::setup)?;
    let report_w = above_stdio(report_w).map_err(SpawnError::setup)?;
    let plan = child::Plan {
        stdio: [
            stdio.child[0].as_raw_fd(),
            stdio.child[1].as_raw_fd(),
            stdio.child[2].as_raw_fd(),
        ],
        controlling_tty: stdio.controlling_tty,
        nofile: crate::sys::rlimit::child_nofile_limit(),
        prepared: &prepared,
        pointers: &pointers,
        error_pipe: report_w.as_raw_fd(),
    };

    let blocked = SignalsBlocked::new();
    let pid = start_child(&plan);
    drop(blocked);
    if pid < 0 {
        return Err(SpawnError::from_errno(
            Step::Fork,
            io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EAGAIN),
        ));
    }
    // The child's ends are the child's now; closing ours makes EOF reach the right side.
    drop(report_w);
    let Stdio {
        parent_stdin,
        parent_stdout,
        parent_stderr,
        pty,
        child: child_ends,
        ..
    } = stdio;
    drop(child_ends);

    let report = read_report(&report_r);
    drop(report_r);
    match report {
        Ok(None) => {}
        Ok(Some((step, errno))) => {
            reap_failed(pid);
            let step = Step::from_u32(step).unwrap_or(Step::Exec);
            return Err(SpawnError::from_errno(step, errno));
        }
        Err(e) => {
            // Cannot tell whether exec happened; make sure no half-started child remains.
            // SAFETY: `pid` is our unreaped child, so it cannot be a recycled pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            reap_failed(pid);
            return Err(SpawnError::setup(e));
        }
    }

    let raw = Pid::from_raw(pid).expect("fork returned a positive pid");
    let pidfd = match req.reaper {
        ReaperMode::Fallback => None,
        // ENOSYS (before 5.3) or anything else: fall back to the pid, which stays ours
        // until we reap it.
        ReaperMode::Auto => pidfd_open(raw, PidfdFlags::empty()).ok(),
    };
    let token = match identity::observe(pid, pidfd.as_ref().map(|fd| fd.as_fd())) {
        Observed::Token(token) => Some(token),
        Observed::Gone | Observed::Unreadable(_) => None,
    };
    Ok(Child {
        process: Process::child(raw, pidfd, token),
        stdin: parent_stdin,
        stdout: parent_stdout,
        stderr: parent_stderr,
        pty,
    })
}
