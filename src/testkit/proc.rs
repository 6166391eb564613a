//! Reading `/proc`, independently of the daemon's own readers in `sys`, so that tests can
//! check what the system says rather than what the code under test believes.
//!
//! Pids are `u32` here, as `std::process` gives them.

/// The fields of `/proc/PID/stat` tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// One letter: `R`, `S`, `Z`, ...
    pub state: String,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    /// CPU time in user and kernel mode, in clock ticks.
    pub utime: u64,
    pub stime: u64,
}

impl Stat {
    pub fn is_zombie(&self) -> bool {
        self.state == "Z"
    }
}

/// `/proc/PID/stat`, parsed after the last `)` (a command name may contain anything), or
/// `None` once the process is gone (reaped).
pub fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 3 (state) is f[0].
    let f: Vec<&str> = text.get(text.rfind(')')? + 2..)?.split(' ').collect();
    Some(Stat {
        state: f.first()?.to_string(),
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        utime: f.get(11)?.parse().ok()?,
        stime: f.get(12)?.parse().ok()?,
    })
}

/// Every pid visible in `/proc`.
pub fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("read /proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The processes of group `pgid` that have not exited (zombies left out).
pub fn group_members(pgid: u32) -> Vec<u32> {
    pids()
        .into_iter()
        .filter(|&pid| stat(pid).is_some_and(|s| s.pgrp == pgid && !s.is_zombie()))
        .collect()
}

/// The processes (zombies included) whose command line is exactly `argv`.
pub fn running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    pids()
        .into_iter()
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// The children of `pid` (its main thread's), oldest first.
pub fn children(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// A number in `/proc/PID/status`: `VmRSS` (in kB), `voluntary_ctxt_switches`, ...
pub fn status_number(pid: u32, key: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// How many descriptors `pid` has open.
pub fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("read the descriptor table")
        .count()
}

/// The pid, as this process sees it, of the process that is `ns_pid` in the PID namespace
/// of `anchor` (as a daemon that is PID 1 of its own namespace reports pids).
pub fn pid_in_namespace_of(anchor: u32, ns_pid: u32) -> Option<u32> {
    let ns = std::fs::read_link(format!("/proc/{anchor}/ns/pid")).ok()?;
    pids().into_iter().find(|&pid| {
        std::fs::read_link(format!("/proc/{pid}/ns/pid")).is_ok_and(|n| n == ns)
            && innermost_pid(pid) == Some(ns_pid)
    })
}

/// `pid`'s pid in the innermost PID namespace it belongs to (the last of `NSpid`).
fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_itself() {
        let me = std::process::id();
        let s = stat(me).expect("our own stat");
        assert!(!s.is_zombie());
        // 0 when the group's or session's leader is outside our PID namespace.
        // SAFETY: getpgrp and getsid(0) take no pointers and read only our own ids.
        let (pgrp, sid) = unsafe { (libc::getpgrp(), libc::getsid(0)) };
        assert_eq!((s.pgrp as i32, s.session as i32), (pgrp, sid));
        assert_eq!(s.ppid, std::os::unix::process::parent_id());
        assert!(pids().contains(&me));
        assert!(status_number(me, "VmRSS").unwrap() > 0);
        assert!(fd_count(me) >= 3);
        assert_eq!(
            pid_in_namespace_of(me, me),
            Some(me),
            "not in a PID namespace"
        );
        assert!(stat(u32::MAX).is_none());
    }
}
