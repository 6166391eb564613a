//! Waiting for events with a deadline, never by sleeping: a descriptor's readiness, a
//! child's exit (on its pidfd).

use std::os::fd::{AsFd, BorrowedFd};
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// Polls `fd` for `flags` until ready or `deadline`; returns whether it became ready.
pub fn wait_for(fd: BorrowedFd<'_>, flags: PollFlags, deadline: Instant) -> bool {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let timeout = Timespec {
            tv_sec: left.as_secs() as i64,
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [PollFd::new(&fd, flags)];
        match poll(&mut fds, Some(&timeout)) {
            Ok(0) if left.is_zero() => return false,
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => return true,
            Err(e) => panic!("poll: {e}"),
        }
    }
}

/// Whether `fd` became readable before `deadline`.
pub fn readable(fd: BorrowedFd<'_>, deadline: Instant) -> bool {
    wait_for(fd, PollFlags::IN, deadline)
}

/// Waits up to `within` for `child` to exit, on its pidfd; its status once it has (then
/// reaped), `None` if it is still running.
pub fn child_exit(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    if let Some(status) = child.try_wait().expect("try_wait") {
        return Some(status);
    }
    // The child is ours and unreaped, so its pid cannot have been reused.
    let pid = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
    let pidfd = pidfd_open(pid, PidfdFlags::empty()).expect("pidfd_open");
    if readable(pidfd.as_fd(), Instant::now() + within) {
        Some(child.wait().expect("wait"))
    } else {
        None
    }
}

/// Whether every process whose command line is exactly `argv` exits before `deadline`,
/// each awaited on a pidfd of its own (one gone before it could be opened has exited).
pub fn exit_of_all(argv: &[&str], deadline: Instant) -> bool {
    super::proc::running(argv).into_iter().all(|pid| {
        let Some(pid) = Pid::from_raw(pid as i32) else {
            return true;
        };
        match pidfd_open(pid, PidfdFlags::empty()) {
            Ok(fd) => readable(fd.as_fd(), deadline),
            Err(_) => true,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_exit_waits_for_the_exit_and_no_longer() {
        let mut cat = std::process::Command::new("cat")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        assert!(child_exit(&mut cat, Duration::from_millis(1)).is_none());
        drop(cat.stdin.take());
        let status = child_exit(&mut cat, Duration::from_secs(30)).expect("cat exits on EOF");
        assert!(status.success());
    }
}
