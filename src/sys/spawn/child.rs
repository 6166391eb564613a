//! The code that runs in the child between `fork` and `execve`.
//!
//! Only async-signal-safe calls happen here (the parent may have other threads, whose locks
//! the child inherits held): no allocation, no locks, no formatting. Every failure is
//! written to the error pipe as `(step, errno)` and the child `_exit`s; the parent turns it
//! into a [`super::SpawnError`].

use std::os::fd::RawFd;

use super::prepare::{Pointers, Prepared};
use super::Step;

/// What the child does, prepared by the parent.
pub(crate) struct Plan<'a> {
    /// Descriptors to install as 0, 1, 2 (all >= 3, so no `dup2` clobbers another source).
    pub stdio: [RawFd; 3],
    /// Make `stdio[0]` (a PTY peer) the controlling terminal.
    pub controlling_tty: bool,
    pub prepared: &'a Prepared,
    pub pointers: &'a Pointers,
    /// Write end of the close-on-exec error pipe.
    pub error_pipe: RawFd,
}

fn errno() -> i32 {
    // SAFETY: `__errno_location` returns this thread's errno slot; reading it is
    // async-signal-safe.
    unsafe { *libc::__errno_location() }
}

/// Reports `(step, errno)` to the parent and exits without running any destructor or
/// `atexit` handler.
fn fail(pipe: RawFd, step: Step, errno: i32) -> ! {
    let mut msg = [0u8; 8];
    msg[..4].copy_from_slice(&(step as u32).to_ne_bytes());
    msg[4..].copy_from_slice(&errno.to_ne_bytes());
    // SAFETY: `msg` is a valid 8-byte buffer; `write` and `_exit` are async-signal-safe.
    // 8 bytes are below PIPE_BUF, so the write is atomic.
    unsafe {
        libc::write(pipe, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

/// Runs in the child after `fork`; execs or exits, never returns.
///
/// # Safety
/// Must be called only in a freshly forked child, with every pointer in `plan` valid (they
/// point into memory the parent prepared before forking, which the child has a copy of).
pub(crate) unsafe fn run(plan: &Plan<'_>) -> ! {
    let pipe = plan.error_pipe;
    // SAFETY (whole block): these are plain system calls on descriptors and C strings the
    // parent prepared; each is async-signal-safe.
    unsafe {
        if libc::setsid() < 0 {
            fail(pipe, Step::Setsid, errno());
        }
        if plan.controlling_tty && libc::ioctl(plan.stdio[0], libc::TIOCSCTTY, 0) < 0 {
            fail(pipe, Step::ControllingTerminal, errno());
        }
        for (target, &source) in plan.stdio.iter().enumerate() {
            // Sources are >= 3, so `dup2` always makes a new descriptor, without
            // close-on-exec.
            if libc::dup2(source, target as RawFd) < 0 {
                fail(pipe, Step::Stdio, errno());
            }
        }
        // Default dispositions for every signal (a Rust parent ignores SIGPIPE; ignored
        // signals survive exec), then an empty mask (the parent blocked everything around
        // fork). Errors for SIGKILL, SIGSTOP and libc-reserved signals are expected.
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        for sig in 1..65 {
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            fail(pipe, Step::Signals, libc::EINVAL);
        }
        if let Some(cwd) = &plan.prepared.cwd {
            if libc::chdir(cwd.as_ptr()) < 0 {
                fail(pipe, Step::Chdir, errno());
            }
        }
        // The PATH search, like execvp: skip entries that do not exist, remember that one
        // was not executable, stop at any other error.
        let mut saw_eacces = false;
        let mut last = libc::ENOENT;
        for path in &plan.prepared.candidates {
            libc::execve(
                path.as_ptr(),
                plan.pointers.argv.as_ptr(),
                plan.pointers.env.as_ptr(),
            );
            last = errno();
            match last {
                libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG => {}
                libc::EACCES => saw_eacces = true,
                _ => fail(pipe, Step::Exec, last),
            }
        }
        fail(
            pipe,
            Step::Exec,
            if saw_eacces { libc::EACCES } else { last },
        )
    }
}
