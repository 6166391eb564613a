//! Helpers for tests of the OS layer: requests, waiting on descriptors with timeouts
//! (never sleeping), and skip reporting.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::time::{Duration, Instant};

use genward::sys::fd::{read_nonblocking, write_nonblocking, ReadOutcome, WriteOutcome};
use genward::sys::process::{Exit, Process, ReaperMode};
use genward::sys::sigchld::SigchldPipe;
use genward::sys::spawn::{IoMode, SpawnRequest};
pub use genward::testkit::wait::{readable, wait_for};
use rustix::event::PollFlags;

/// Generous upper bound for anything a test waits for; hitting it is a failure, not a
/// timing assertion.
pub const TIMEOUT: Duration = Duration::from_secs(30);

pub fn argv(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

pub fn request(args: &[&str]) -> SpawnRequest {
    SpawnRequest {
        argv: argv(args),
        ..SpawnRequest::default()
    }
}

/// [`request`] with the given reaper mode.
pub fn request_with(args: &[&str], reaper: ReaperMode) -> SpawnRequest {
    SpawnRequest {
        reaper,
        ..request(args)
    }
}

/// How a process killed by `signal` (without a core dump) ended.
pub const fn by_signal(signal: i32) -> Exit {
    Exit::Signal {
        signal,
        core_dumped: false,
    }
}

pub fn pty_request(args: &[&str], rows: u16, cols: u16) -> SpawnRequest {
    SpawnRequest {
        argv: argv(args),
        io: IoMode::Pty {
            rows,
            cols,
            term: None,
        },
        ..SpawnRequest::default()
    }
}

/// Reports a test that could not run. Written straight to the stderr descriptor, which the
/// test harness does not capture, so the line is visible in every run.
pub fn skip(test: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {reason}");
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Reads until EOF (pipe) or EIO (PTY), within [`TIMEOUT`].
pub fn read_to_eof(fd: BorrowedFd<'_>) -> Vec<u8> {
    let deadline = Instant::now() + TIMEOUT;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match read_nonblocking(fd, &mut buf).expect("read") {
            ReadOutcome::Data(n) => out.extend_from_slice(&buf[..n]),
            ReadOutcome::Eof => return out,
            ReadOutcome::WouldBlock => {
                assert!(
                    readable(fd, deadline),
                    "no EOF within {TIMEOUT:?}; got {:?}",
                    lossy(&out)
                );
            }
        }
    }
}

/// Reads until the output so far contains `needle`, within [`TIMEOUT`].
pub fn read_until(fd: BorrowedFd<'_>, out: &mut Vec<u8>, needle: &str) {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; 4096];
    while !lossy(out).contains(needle) {
        match read_nonblocking(fd, &mut buf).expect("read") {
            ReadOutcome::Data(n) => out.extend_from_slice(&buf[..n]),
            ReadOutcome::Eof => panic!("EOF before {needle:?}; got {:?}", lossy(out)),
            ReadOutcome::WouldBlock => {
                assert!(
                    readable(fd, deadline),
                    "no {needle:?} within {TIMEOUT:?}; got {:?}",
                    lossy(out)
                );
            }
        }
    }
}

/// Writes all of `data`, waiting for writability, within [`TIMEOUT`].
pub fn write_all(fd: BorrowedFd<'_>, mut data: &[u8]) {
    let deadline = Instant::now() + TIMEOUT;
    while !data.is_empty() {
        match write_nonblocking(fd, data).expect("write") {
            WriteOutcome::Written(n) => data = &data[n..],
            WriteOutcome::WouldBlock => assert!(wait_for(fd, PollFlags::OUT, deadline)),
            WriteOutcome::Closed => panic!("reader went away"),
        }
    }
}

pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Waits until the process has exited (without reaping): on its pidfd, or on a SIGCHLD
/// self-pipe in fallback mode (re-checking at every wakeup, and at least every 100 ms since
/// a SIGCHLD may have arrived before the pipe existed).
pub fn wait_exit(process: &Process) -> Exit {
    let deadline = Instant::now() + TIMEOUT;
    if let Some(fd) = process.pidfd() {
        assert!(
            readable(fd, deadline),
            "process {} did not exit",
            process.pid()
        );
        return process.exit_status_nowait().unwrap().expect("exited");
    }
    let sigchld = SigchldPipe::new().unwrap();
    loop {
        if let Some(exit) = process.exit_status_nowait().unwrap() {
            return exit;
        }
        assert!(
            Instant::now() < deadline,
            "process {} did not exit",
            process.pid()
        );
        let step = (Instant::now() + Duration::from_millis(100)).min(deadline);
        if readable(sigchld.fd(), step) {
            sigchld.drain().unwrap();
        }
    }
}

/// Waits for exit and reaps.
pub fn wait_reap(process: &mut Process) -> Exit {
    wait_exit(process);
    process.reap().unwrap().expect("reaped")
}

/// A pidfd for a process that is not our child, to watch it exit.
pub fn pidfd_of(pid: i32) -> std::os::fd::OwnedFd {
    rustix::process::pidfd_open(
        rustix::process::Pid::from_raw(pid).unwrap(),
        rustix::process::PidfdFlags::empty(),
    )
    .expect("pidfd_open")
}

pub fn exited(fd: &impl AsFd) -> bool {
    genward::sys::process::pidfd_exited(fd.as_fd()).unwrap()
}

/// Waits (at most `patience`) for the process behind pidfd `fd` to exit: a pidfd turns
/// readable then. Whether it did.
pub fn await_exit(fd: &impl AsFd, patience: std::time::Duration) -> bool {
    let mut fds = [rustix::event::PollFd::new(fd, rustix::event::PollFlags::IN)];
    let timeout = rustix::event::Timespec::try_from(patience).expect("a patience in range");
    loop {
        match rustix::event::poll(&mut fds, Some(&timeout)) {
            Ok(_) => return exited(fd),
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => panic!("poll of a pidfd: {e}"),
        }
    }
}

/// Reads until a complete line `<prefix><number>` has arrived; returns the number.
pub fn read_number(fd: BorrowedFd<'_>, out: &mut Vec<u8>, prefix: &str) -> i32 {
    let deadline = Instant::now() + TIMEOUT;
    let mut buf = vec![0u8; 4096];
    loop {
        let text = lossy(out);
        let found = text
            .split_inclusive('\n')
            .filter(|l| l.ends_with('\n'))
            .find_map(|l| l.trim().strip_prefix(prefix)?.parse().ok());
        if let Some(n) = found {
            return n;
        }
        match read_nonblocking(fd, &mut buf).expect("read") {
            ReadOutcome::Data(n) => out.extend_from_slice(&buf[..n]),
            ReadOutcome::Eof => panic!("EOF before {prefix}; got {text:?}"),
            ReadOutcome::WouldBlock => {
                assert!(
                    readable(fd, deadline),
                    "no {prefix} within {TIMEOUT:?}; got {text:?}"
                );
            }
        }
    }
}

/// Waits (at most [`TIMEOUT`]) for a started child's status pipe to report, then
/// finishes it: what the daemon's loop does on readiness, in one call.
pub fn finish(
    mut starting: genward::sys::spawn::Starting,
) -> Result<genward::sys::spawn::Child, genward::sys::spawn::SpawnError> {
    let deadline = std::time::Instant::now() + TIMEOUT;
    while !starting.poll() {
        assert!(
            readable(starting.status_fd(), deadline),
            "no outcome within {TIMEOUT:?}"
        );
    }
    starting.finish()
}

/// The system call number of `write`, where the test knows it.
pub fn write_syscall() -> Option<&'static str> {
    if cfg!(target_arch = "x86_64") {
        Some("1")
    } else if cfg!(target_arch = "aarch64") {
        Some("64")
    } else {
        None
    }
}

/// Waits (bounded) until process `pid` is blocked in `write` — the daemon holds its
/// output back. The process's state is looked at, as nothing reports it.
pub fn await_blocked_in_write(pid: u64) {
    let Some(nr) = write_syscall() else { return };
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let now = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if now.split_whitespace().next() == Some(nr) {
            return;
        }
        assert!(Instant::now() < deadline, "pid {pid} never blocked: {now}");
        std::thread::sleep(Duration::from_millis(5));
    }
}
