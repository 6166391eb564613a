//! The code that runs in the child between its start and `execve`.
//!
//! On Linux the child shares our memory and runs *while we keep running* (see
//! `launch.rs`), so it makes only raw system calls (`raw.rs`): no C library, no
//! allocation, no locks, no formatting, no panics, no writes to any memory but its own
//! stack; it only reads the [`Plan`] the parent built and keeps alive for it. Every failure
//! is written to the status pipe as one [`Report`] and the child exits; the parent turns it
//! into a [`super::SpawnError`].
//!
//! Where the parent lent it a band of descriptor numbers (`band.rs`), the child also starts
//! sharing our descriptor table, and leaving it is its first step after entering its
//! cgroup: until then it touches no descriptor but the status pipe.

use std::os::fd::RawFd;

use super::band;
use super::prepare::{Pointers, Prepared};
use super::raw;
use super::Step;

/// What the child does, prepared by the parent. Lives on the heap until the child has left
/// our memory (see `launch::ChildMemory`).
pub(crate) struct Plan {
    /// Descriptors to install as 0, 1, 2 (all >= 3, so no `dup2` clobbers another source).
    pub stdio: [RawFd; 3],
    /// Make `stdio[0]` (a PTY peer) the controlling terminal.
    pub controlling_tty: bool,
    /// The descriptor limit to give back (ours was raised; see `sys::rlimit`).
    pub nofile: Option<libc::rlimit>,
    pub prepared: Prepared,
    /// Pointer arrays into `prepared` (its strings' heap buffers, which never move).
    pub pointers: Pointers,
    /// Write end of the close-on-exec status pipe.
    pub status_pipe: RawFd,
    /// A close-on-exec descriptor of a cgroup's `cgroup.procs`, opened for writing, when
    /// the child must enter that cgroup itself (no `clone3(CLONE_INTO_CGROUP)`).
    pub cgroup_procs: Option<RawFd>,
    /// Whom to become; its group list is read in place (it never moves while the plan
    /// lives).
    pub credentials: Option<super::Credentials>,
    /// The file mode creation mask to set.
    pub umask: Option<u32>,
    /// Limits to set, in order, before the identity changes.
    pub rlimits: Vec<super::ResourceLimit>,
    /// One more descriptor to hand over: `(source, target)`, the source above both the
    /// target and the status pipe's place, so no `dup2` clobbers a source still needed.
    pub extra: Option<(RawFd, RawFd)>,
    /// Started sharing our descriptor table, with every descriptor above in a band below
    /// this number (see `band.rs`): leave the shared table first, keeping only what lies
    /// below it, and say so on the status pipe.
    pub unshare_below: Option<RawFd>,
}

/// The descriptor the status pipe is moved to in the child, right above stdio, so that
/// every other descriptor can be closed with one `close_range`.
const STATUS_FD: RawFd = 3;

/// `CLOSE_RANGE_CLOEXEC` from `<linux/close_range.h>`.
const CLOSE_RANGE_CLOEXEC: u32 = 1 << 2;

/// `Report::path` when no candidate path applies.
pub(crate) const NO_PATH: u32 = u32::MAX;

/// What a failing child writes to the status pipe: 12 bytes, below `PIPE_BUF`, so the one
/// `write` is atomic and the parent reads all of it or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Report {
    pub step: u32,
    pub errno: i32,
    /// Index into `Prepared::candidates` of the program the errno is about, or [`NO_PATH`].
    pub path: u32,
}

impl Report {
    pub const LEN: usize = 12;

    pub fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        let (step, rest) = b.split_at_mut(4);
        let (errno, path) = rest.split_at_mut(4);
        step.copy_from_slice(&self.step.to_ne_bytes());
        errno.copy_from_slice(&self.errno.to_ne_bytes());
        path.copy_from_slice(&self.path.to_ne_bytes());
        b
    }

    pub fn from_bytes(b: &[u8; Self::LEN]) -> Report {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        Report {
            step: u32::from_ne_bytes(word(0)),
            errno: i32::from_ne_bytes(word(4)),
            path: u32::from_ne_bytes(word(8)),
        }
    }
}

/// Reports the failure to the parent and exits without running any destructor or handler.
fn fail(pipe: RawFd, step: Step, errno: raw::Errno, path: u32) -> ! {
    let msg = Report {
        step: step as u32,
        errno,
        path,
    }
    .to_bytes();
    // Nothing to do if this fails: the parent then sees EOF and the child's exit (127).
    let _ = raw::write(pipe, &msg);
    raw::exit(127)
}

/// Runs in the child; execs or exits, never returns.
///
/// Closes descriptors `first..=last` (none when `first > last`): in the child, raw calls.
fn close_span(first: u32, last: u32) {
    if first > last {
        return;
    }
    if raw::close_range(first, last, 0).is_err() {
        // Before Linux 5.9: at least nothing leaks past exec (5.11 has the flag; older
        // kernels have neither, and ours are all close-on-exec anyway).
        let _ = raw::close_range(first, last, CLOSE_RANGE_CLOEXEC);
    }
}

/// # Safety
/// Must be called only in a freshly started child, whose signals are all blocked, with
/// `plan` valid until the child has exec'd or exited.
pub(crate) unsafe fn run(plan: &Plan) -> ! {
    let mut pipe = plan.status_pipe;
    if let Some(procs) = plan.cgroup_procs {
        // First of all, so that nothing this child does, let alone the program, happens
        // outside its cgroup. "0" is the writer itself.
        if let Err(e) = raw::write(procs, b"0") {
            fail(pipe, Step::Cgroup, e, NO_PATH);
        }
    }
    if let Some(end) = plan.unshare_below {
        // Until this returns we share our parent's descriptor table: nothing here touches
        // a descriptor but the status pipe (a failure report, then exit, which leaves the
        // shared table as it was).
        if let Err(e) = raw::close_range(end as u32, u32::MAX, band::CLOSE_RANGE_UNSHARE) {
            fail(pipe, Step::Fork, e, NO_PATH);
        }
        // The parent takes the band back on this. Nothing to do if it fails (the parent
        // let go of us: the read end is closed).
        let _ = raw::write(pipe, &[band::UNSHARED]);
    }
    if let Err(e) = raw::setsid() {
        fail(pipe, Step::Setsid, e, NO_PATH);
    }
    if plan.controlling_tty {
        if let Err(e) = raw::set_controlling_tty(plan.stdio[0]) {
            fail(pipe, Step::ControllingTerminal, e, NO_PATH);
        }
    }
    for (target, &source) in plan.stdio.iter().enumerate() {
        // Sources are >= 3, so this always makes a new descriptor, without close-on-exec.
        if let Err(e) = raw::dup3(source, target as RawFd, 0) {
            fail(pipe, Step::Stdio, e, NO_PATH);
        }
    }
    // Keep nothing of ours but 0, 1, 2 and the status pipe: not even until exec, because
    // this child may wait a long time in `chdir` or `execve` on a hung filesystem, and
    // copies of our descriptors held meanwhile would keep other children's pipes and our
    // clients' sockets from ever reporting end-of-file. Descriptors inherited without
    // close-on-exec from whoever started us go too.
    // The extra descriptor (a readiness notification pipe) goes to its number, without
    // close-on-exec; the status pipe then sits at 3, or at 4 when the extra one is 3.
    let status_fd = match plan.extra {
        Some((_, STATUS_FD)) => STATUS_FD + 1,
        _ => STATUS_FD,
    };
    if let Some((source, target)) = plan.extra {
        if let Err(e) = raw::dup3(source, target, 0) {
            fail(pipe, Step::Stdio, e, NO_PATH);
        }
    }
    if pipe != status_fd {
        if let Err(e) = raw::dup3(pipe, status_fd, libc::O_CLOEXEC) {
            fail(pipe, Step::Stdio, e, NO_PATH);
        }
        pipe = status_fd;
    }
    match plan.extra {
        None => close_span(status_fd as u32 + 1, u32::MAX),
        Some((_, target)) => {
            // Everything from 3 up but the two kept: below, between and above them.
            let (lo, hi) = (status_fd.min(target) as u32, status_fd.max(target) as u32);
            close_span(STATUS_FD as u32, lo - 1);
            close_span(lo + 1, hi - 1);
            close_span(hi + 1, u32::MAX);
        }
    }
    // Default dispositions for every signal (a Rust parent ignores SIGPIPE; ignored signals
    // survive exec), then an empty mask (the parent blocked everything around the start).
    // Errors for SIGKILL and SIGSTOP are expected.
    let mut sig = 1;
    while sig <= raw::MAX_SIGNAL {
        let _ = raw::default_disposition(sig);
        sig += 1;
    }
    if let Err(e) = raw::unblock_all_signals() {
        fail(pipe, Step::Signals, e, NO_PATH);
    }
    if let Some(limit) = &plan.nofile {
        // Best effort: a child with our raised limit still works.
        let _ = raw::set_nofile(limit);
    }
    // Limits while still privileged (raising a hard limit needs it), then the mask, then
    // the identity: groups and group before the user, whose change gives up the right to
    // set them. Each failure names its step; nothing runs with half an identity.
    for (index, l) in (0u32..).zip(&plan.rlimits) {
        if let Err(e) = raw::set_rlimit(l.resource, l.soft, l.hard) {
            fail(pipe, Step::Rlimit, e, index);
        }
    }
    if let Some(mask) = plan.umask {
        raw::umask(mask);
    }
    if let Some(c) = &plan.credentials {
        // A terminal of the daemon's own is the user's from now on, as login and sshd
        // make it: a program that opens its terminal by name (`$(tty)`, GPG_TTY, screen)
        // could not otherwise. Best effort: the descriptor works either way.
        if plan.controlling_tty {
            let _ = raw::fchown_user(0, c.uid);
        }
        if let Err(e) = raw::setgroups(&c.groups) {
            fail(pipe, Step::Setgroups, e, NO_PATH);
        }
        if let Err(e) = raw::setgid(c.gid) {
            fail(pipe, Step::Setgid, e, NO_PATH);
        }
        if let Err(e) = raw::setuid(c.uid) {
            fail(pipe, Step::Setuid, e, NO_PATH);
        }
    }
    // After the identity, so the directory is entered with the user's own permissions.
    if let Some(cwd) = &plan.prepared.cwd {
        if let Err(e) = raw::chdir(cwd) {
            fail(pipe, Step::Chdir, e, NO_PATH);
        }
    }
    // The PATH search, like execvp, here in the child after `chdir` so the parent never
    // touches the child's filesystem: skip candidates that do not exist, remember the first
    // one that was not executable, stop at any other error.
    let mut eacces = NO_PATH;
    let mut no_interpreter = NO_PATH;
    let mut last = (libc::ENOENT, NO_PATH);
    let mut index = 0u32;
    for path in &plan.prepared.candidates {
        // SAFETY: the pointer arrays are null-terminated and point into `plan.prepared`,
        // which outlives this child's use of it.
        let e = unsafe {
            raw::execve(
                path,
                plan.pointers.argv.as_ptr(),
                plan.pointers.env.as_ptr(),
            )
        };
        last = (e, index);
        match e {
            // A program that is there: what is missing is its interpreter.
            libc::ENOENT if no_interpreter == NO_PATH && raw::exists(path) => {
                no_interpreter = index;
            }
            libc::ENOENT | libc::ENOTDIR | libc::ELOOP | libc::ENAMETOOLONG => {}
            libc::EACCES => {
                if eacces == NO_PATH {
                    eacces = index;
                }
            }
            _ => fail(pipe, Step::Exec, e, index),
        }
        index = index.wrapping_add(1);
    }
    if eacces != NO_PATH {
        fail(pipe, Step::Exec, libc::EACCES, eacces)
    }
    if no_interpreter != NO_PATH {
        fail(pipe, Step::Interpreter, libc::ENOENT, no_interpreter)
    }
    fail(pipe, Step::Exec, last.0, last.1)
}
