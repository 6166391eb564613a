//! The code that runs in the child between its start and `execve`.
//!
//! Only async-signal-safe calls happen here (the parent may have other threads, whose locks
//! the child inherits held, and on Linux the child shares the parent's memory): no
//! allocation, no locks, no formatting, no writes but to the child's own stack. Every failure is
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
    /// The descriptor limit to give back (ours was raised; see `sys::rlimit`).
    pub nofile: Option<libc::rlimit>,
    pub prepared: &'a Prepared,
    pub pointers: &'a Pointers,
    /// Write end of the close-on-exec error pipe.
    pub error_pipe: RawFd,
}

/// `CLOSE_RANGE_CLOEXEC` from `<linux/close_range.h>`.
#[cfg(target_os = "linux")]
const CLOSE_RANGE_CLOEXEC: libc::c_uint = 1 << 2;

/// Sets `sig` to `SIG_DFL`. On Linux through the raw `rt_sigaction`, because libc wrappers
/// refuse the signals they reserve for themselves (32 and 33 in glibc), which can still
/// arrive ignored from whoever started us. An all-zero kernel `struct sigaction` is
/// `SIG_DFL` with no flags and an empty mask on every architecture's layout.
///
/// # Safety
/// Async-signal-safe; changes process-wide signal state, so only for the new child.
unsafe fn reset_disposition(sig: libc::c_int) {
    #[cfg(target_os = "linux")]
    {
        let zeroed = [0u64; 8];
        // SAFETY: `zeroed` is larger than the kernel's `struct sigaction` on every
        // architecture; the old-action pointer is null; 8 is `sizeof(kernel sigset_t)`.
        unsafe {
            libc::syscall(
                libc::SYS_rt_sigaction,
                sig,
                zeroed.as_ptr(),
                std::ptr::null_mut::<libc::c_void>(),
                8usize,
            );
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        // SAFETY: a zeroed `sigaction` with `SIG_DFL` is a valid argument.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

fn errno() -> i32 {
    // SAFETY: these return this thread's errno slot; reading it is async-signal-safe.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    unsafe {
        *libc::__errno_location()
    }
    #[cfg(any(
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd",
        target_os = "dragonfly"
    ))]
    unsafe {
        *libc::__error()
    }
    #[cfg(any(target_os = "netbsd", target_os = "openbsd"))]
    unsafe {
        *libc::__errno()
    }
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

/// Runs in the child; execs or exits, never returns.
///
/// # Safety
/// Must be called only in a freshly started child (forked, or cloned with `CLONE_VFORK` so
/// the parent sleeps meanwhile), with every pointer in `plan` valid.
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
        // Descriptors we inherited from whoever started us without close-on-exec would
        // leak into every child: mark everything above 2 close-on-exec (the error pipe
        // already is). `close_range` needs Linux 5.11; older kernels keep the leak.
        #[cfg(target_os = "linux")]
        libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, CLOSE_RANGE_CLOEXEC);
        // Default dispositions for every signal (a Rust parent ignores SIGPIPE; ignored
        // signals survive exec), then an empty mask (the parent blocked everything around
        // fork). Errors for SIGKILL and SIGSTOP are expected.
        for sig in 1..65 {
            reset_disposition(sig);
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        if libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
            fail(pipe, Step::Signals, libc::EINVAL);
        }
        if let Some(limit) = &plan.nofile {
            // Best effort: a child with our raised limit still works.
            libc::setrlimit(libc::RLIMIT_NOFILE, limit);
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
