//! Signalling processes found by a scan, without ever reaching a stranger.
//!
//! A scan (`/proc`, or a cgroup's `cgroup.procs`) names pids, and a pid may be recycled the
//! moment after it was read. So each candidate is opened as a pidfd first — a pidfd refers
//! to one process forever — then its `stat` is read and checked, and the pidfd is asked
//! whether that process still runs: if it does, the `stat` read was of it, and the signal
//! goes through the pidfd to exactly the process that was checked.

use std::io;
use std::os::fd::AsFd;

use rustix::io::Errno;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};

use crate::sys::identity::{read_proc_file, stat_field};
use crate::sys::process::pidfd_exited;

/// Where a process stands, as its `stat` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Membership {
    /// Its process group.
    pub pgid: u64,
    /// Its session.
    pub sid: u64,
}

/// Sends `sig` to each of `candidates` whose [`Membership`] satisfies `keep`, checked as
/// the [module docs](self) say. Returns how many were signalled; processes that exited
/// meanwhile are skipped.
pub fn signal_verified(
    candidates: &[i32],
    sig: Signal,
    keep: impl Fn(Membership) -> bool,
) -> io::Result<usize> {
    let mut sent = 0;
    for &pid in candidates {
        let Some(raw) = Pid::from_raw(pid) else {
            continue;
        };
        let pidfd = match pidfd_open(raw, PidfdFlags::empty()) {
            Ok(fd) => fd,
            Err(Errno::SRCH) => continue,
            Err(e) => return Err(e.into()),
        };
        let Ok(stat) = read_proc_file(&format!("/proc/{pid}/stat")) else {
            continue;
        };
        let membership = match (stat_field(&stat, 5), stat_field(&stat, 6)) {
            (Some(pgid), Some(sid)) => Membership { pgid, sid },
            _ => continue,
        };
        if !keep(membership) || pidfd_exited(pidfd.as_fd())? {
            continue;
        }
        match pidfd_send_signal(&pidfd, sig) {
            Ok(()) => sent += 1,
            Err(Errno::SRCH) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(sent)
}
