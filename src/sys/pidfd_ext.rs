//! What newer kernels tell and reach through a pidfd, beyond rustix's calls:
//!
//! - [`exit_info`]: the exit status of a process that is not our child, once its real
//!   parent has reaped it (`PIDFD_GET_INFO` with `PIDFD_INFO_EXIT`, Linux 6.15+). This is
//!   how a daemon that adopted a process after a restart learns its exit code.
//! - [`signal_process_group`]: a signal to the process group whose id is the pidfd's
//!   process (`PIDFD_SIGNAL_PROCESS_GROUP`, Linux 6.9+), with no pgid number involved.
//!
//! Both answer "not here" with an error the caller falls back on: `ENOTTY`/`EINVAL` for
//! the ioctl, `EINVAL` for the flag.

use std::os::fd::{AsRawFd, BorrowedFd};

use rustix::io::Errno;
use rustix::process::Signal;

use crate::sys::process::Exit;

/// `PIDFD_INFO_EXIT` from `<linux/pidfd.h>`: asked for in `mask`, and set in the answer's
/// `mask` only when `exit_code` holds the status.
const PIDFD_INFO_EXIT: u64 = 1 << 3;

/// `PIDFD_SIGNAL_PROCESS_GROUP` from `<linux/pidfd.h>`.
const PIDFD_SIGNAL_PROCESS_GROUP: libc::c_uint = 1 << 2;

/// `struct pidfd_info` from `<linux/pidfd.h>` as published with Linux 6.16 (72 bytes).
///
/// The kernel reads `mask` and copies back as much of its own struct as fits the size
/// encoded in the request (at least `PIDFD_INFO_SIZE_VER0`, 64), zero-filling the rest:
/// older and newer kernels alike answer this layout. `exit_code` lies within the first 64
/// bytes.
#[repr(C)]
#[derive(Debug, Default)]
#[allow(dead_code)] // every field is written by the kernel; only two are read here
struct PidfdInfo {
    mask: u64,
    cgroupid: u64,
    pid: u32,
    tgid: u32,
    ppid: u32,
    ruid: u32,
    rgid: u32,
    euid: u32,
    egid: u32,
    suid: u32,
    sgid: u32,
    fsuid: u32,
    fsgid: u32,
    exit_code: i32,
    coredump_mask: u32,
    spare1: u32,
}

const _: () = assert!(std::mem::size_of::<PidfdInfo>() == 72);
const _: () = assert!(std::mem::offset_of!(PidfdInfo, exit_code) == 60);

/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)`.
const PIDFD_GET_INFO: libc::Ioctl = libc::_IOWR::<PidfdInfo>(0xFF, 11);

/// What [`exit_info`] learned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    /// The status the process's parent reaped.
    Exited(Exit),
    /// No status yet: the process runs, or has exited but its parent has not reaped it.
    NotYet,
    /// This kernel keeps no exit status for pidfds: no `PIDFD_GET_INFO` (before 6.13:
    /// `ENOTTY`, `EINVAL`). The status cannot be learned.
    Unsupported,
}

/// `ioctl(pidfd, PIDFD_GET_INFO, &info)` with `info.mask = PIDFD_INFO_EXIT`—The exit
/// status of the process behind `pidfd`, which need not be our child.
///
/// The kernel records the status when the process is *reaped* (by its parent, init, or a
/// subreaper), not when it exits: between the two the answer is [`ExitInfo::NotYet`],
/// and a caller that saw the pidfd become readable asks again later. Never blocks.
///
/// # References
///  - [Linux `pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
///  - [`include/uapi/linux/pidfd.h`](https://github.com/torvalds/linux/blob/master/include/uapi/linux/pidfd.h)
pub fn exit_info(pidfd: BorrowedFd<'_>) -> Result<ExitInfo, Errno> {
    let mut info = PidfdInfo {
        mask: PIDFD_INFO_EXIT,
        ..PidfdInfo::default()
    };
    loop {
        // SAFETY: `pidfd` is an open descriptor for the duration of the call, and `info`
        // is a live, writable `struct pidfd_info` of exactly the size encoded in
        // `PIDFD_GET_INFO`, so the kernel reads and writes only within it.
        let r = unsafe {
            libc::ioctl(
                pidfd.as_raw_fd(),
                PIDFD_GET_INFO,
                &mut info as *mut PidfdInfo,
            )
        };
        if r == 0 {
            break;
        }
        return match Errno::from_io_error(&std::io::Error::last_os_error()) {
            Some(Errno::INTR) => continue,
            Some(Errno::NOTTY | Errno::INVAL) => Ok(ExitInfo::Unsupported),
            // While its parent reaps it the process is found but its pid is already
            // gone, and the kernel answers `ESRCH` for a moment (6.13 and 6.14, which keep
            // no exit status, answer it for good: the caller's bound then reports the
            // generation lost).
            Some(Errno::SRCH) => Ok(ExitInfo::NotYet),
            Some(e) => Err(e),
            None => Err(Errno::IO),
        };
    }
    if info.mask & PIDFD_INFO_EXIT == 0 {
        return Ok(ExitInfo::NotYet);
    }
    Ok(ExitInfo::Exited(decode_wait_status(info.exit_code)))
}

/// A wait status (as `waitpid` reports it) as an [`Exit`]; [`Exit::Unknown`] for one that
/// is neither an exit nor a termination by signal (a reaped process has no other kind).
pub fn decode_wait_status(status: i32) -> Exit {
    if libc::WIFEXITED(status) {
        Exit::Code(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Exit::Signal {
            signal: libc::WTERMSIG(status),
            core_dumped: libc::WCOREDUMP(status),
        }
    } else {
        Exit::Unknown
    }
}

/// `syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, PIDFD_SIGNAL_PROCESS_GROUP)`—Sends
/// `sig` to every process of the process group whose id is the pidfd's process.
///
/// The kernel resolves the group from the pidfd's `struct pid`, not from a number: it
/// signals exactly the processes whose process group is that `struct pid`. A pid number
/// stays allocated while any process still has it as its pid, process group or session,
/// so no other group can carry it meanwhile; once none does, the call finds nobody
/// (`ESRCH`). It cannot reach a group that merely reuses the number.
///
/// `EINVAL` before Linux 6.9 (the flag is unknown there).
///
/// # References
///  - [Linux `pidfd_send_signal(2)`](https://man7.org/linux/man-pages/man2/pidfd_send_signal.2.html)
///  - [`include/uapi/linux/pidfd.h`](https://github.com/torvalds/linux/blob/master/include/uapi/linux/pidfd.h)
pub fn signal_process_group(pidfd: BorrowedFd<'_>, sig: Signal) -> Result<(), Errno> {
    loop {
        // SAFETY: plain integer arguments and a null `siginfo_t` pointer, which the
        // kernel reads as "fill it as kill(2) would"; `pidfd` is open during the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                sig.as_raw(),
                std::ptr::null::<libc::siginfo_t>(),
                PIDFD_SIGNAL_PROCESS_GROUP,
            )
        };
        if r == 0 {
            return Ok(());
        }
        match Errno::from_io_error(&std::io::Error::last_os_error()) {
            Some(Errno::INTR) => continue,
            Some(e) => return Err(e),
            None => return Err(Errno::IO),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};
    use std::os::fd::AsFd;
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags};

    use crate::testkit::wait::readable;

    fn skip(why: &str) {
        println!("SKIP: {why}");
        eprintln!("SKIP: {why}");
    }

    fn pidfd_of(pid: u32) -> std::os::fd::OwnedFd {
        pidfd_open(Pid::from_raw(pid as i32).unwrap(), PidfdFlags::empty()).unwrap()
    }

    fn soon() -> Instant {
        Instant::now() + Duration::from_secs(20)
    }

    /// Runs `sh -c script`, opens its pidfd before reaping it, waits for its exit, reaps
    /// it, and asks the pidfd for the status; `None` (after a visible SKIP) where the
    /// kernel keeps none.
    fn status_after_reap(script: &str) -> Option<Exit> {
        let mut child = Command::new("sh").args(["-c", script]).spawn().unwrap();
        let pidfd = pidfd_of(child.id());
        assert!(readable(pidfd.as_fd(), soon()), "it did not exit");
        // Exited but not reaped: the kernel has no status to give yet.
        let before = exit_info(pidfd.as_fd()).unwrap();
        child.wait().unwrap();
        match exit_info(pidfd.as_fd()).unwrap() {
            ExitInfo::Exited(exit) => {
                assert_eq!(before, ExitInfo::NotYet, "a status before the reap");
                Some(exit)
            }
            ExitInfo::Unsupported => {
                skip("this kernel keeps no exit status for pidfds (PIDFD_INFO_EXIT, 6.15+)");
                None
            }
            ExitInfo::NotYet => panic!("reaped, yet no status"),
        }
    }

    #[test]
    fn the_exit_code_is_read_through_a_pidfd_after_the_reap() {
        if let Some(exit) = status_after_reap("exit 7") {
            assert_eq!(exit, Exit::Code(7));
        }
    }

    #[test]
    fn a_death_by_signal_is_read_through_a_pidfd_after_the_reap() {
        if let Some(exit) = status_after_reap("kill -KILL $$") {
            let killed = Exit::Signal {
                signal: libc::SIGKILL,
                core_dumped: false,
            };
            assert_eq!(exit, killed);
        }
    }

    #[test]
    fn a_group_is_signalled_through_its_leaders_pidfd() {
        let mut leader = Command::new("sh")
            .args(["-c", "sleep 1000 & echo $!; wait"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let stdout = leader.stdout.take().unwrap();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let member = pidfd_of(line.trim().parse().unwrap());
        let pidfd = pidfd_of(leader.id());
        match signal_process_group(pidfd.as_fd(), Signal::TERM) {
            Ok(()) => {}
            Err(Errno::INVAL) => {
                let _ = pidfd_send_signal(&member, Signal::KILL);
                let _ = pidfd_send_signal(&pidfd, Signal::KILL);
                leader.wait().unwrap();
                return skip("this kernel has no PIDFD_SIGNAL_PROCESS_GROUP (6.9+)");
            }
            Err(e) => panic!("{e}"),
        }
        // Both got it: the member (not ours to wait for) exits, the leader dies of it.
        assert!(readable(member.as_fd(), soon()), "the member runs on");
        assert_eq!(leader.wait().unwrap().signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn wait_statuses_decode_like_waitpid() {
        assert_eq!(decode_wait_status(7 << 8), Exit::Code(7));
        assert_eq!(decode_wait_status(0), Exit::Code(0));
        let term = Exit::Signal {
            signal: libc::SIGTERM,
            core_dumped: false,
        };
        assert_eq!(decode_wait_status(libc::SIGTERM), term);
        let segv = Exit::Signal {
            signal: libc::SIGSEGV,
            core_dumped: true,
        };
        assert_eq!(decode_wait_status(libc::SIGSEGV | 0x80), segv);
        // A stop status is no end.
        assert_eq!(decode_wait_status(0x137f), Exit::Unknown);
    }
}
