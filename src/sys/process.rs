//! The handle for one process we started or adopted: observe its exit without reaping,
//! reap it exactly once, and signal it (or its group) only while it provably is itself.
//!
//! Two modes:
//! - **pidfd** (Linux 5.3+): the pidfd is registered with the event loop (readable = the
//!   process exited), exit is observed with `waitid(P_PIDFD, WEXITED|WNOHANG|WNOWAIT)`, and
//!   signals go through `pidfd_send_signal`, which cannot reach a recycled pid.
//! - **fallback** (no pidfd, or forced with [`ReaperMode::Fallback`]): the event loop wakes
//!   on SIGCHLD ([`crate::sys::sigchld::SigchldPipe`]) and asks each tracked pid with
//!   `waitid(P_PID, pid, ...)` (never "any child"), and every signal is preceded by an
//!   identity check that must return [`Verdict::Match`].
//!
//! A process group is signalled only while its leader is our unreaped child: a zombie's
//! pid, and so its pgid, cannot be reused, so the group cannot be a stranger's. For an
//! adopted leader (not our child), while it runs, [`Process::signal_adopted_group`] signals
//! the group through the leader's pidfd (Linux 6.9+), or member by member through pidfds
//! ([`Process::signal_group_members`]) on older kernels.
//!
//! An adopted process's exit status is not ours to reap; where the kernel keeps it for
//! pidfds (Linux 6.15+), [`Process::published_exit`] reads it once its real parent reaped it.
//!
//! Liveness is never inferred from `kill(pid, 0)`: `EPERM` from it proves nothing, and a
//! success may be a stranger on a recycled pid. Exit is read from the pidfd or `waitid`.

use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use rustix::process::{
    kill_process, kill_process_group, pidfd_send_signal, waitid, Pid, Signal, WaitId,
    WaitIdOptions, WaitIdStatus,
};

use crate::sys::identity::{self, Verdict};
use crate::sys::pidfd_ext::{self, ExitInfo};
use crate::sys::procscan;

/// How a process is watched and signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReaperMode {
    /// pidfds where the kernel has them, the fallback otherwise.
    #[default]
    Auto,
    /// No pidfd: SIGCHLD + per-pid `waitid`, identity check before every signal.
    Fallback,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It called `exit(code)`.
    Code(i32),
    /// A signal ended it.
    Signal {
        /// The signal number.
        signal: i32,
        /// Whether it dumped core.
        core_dumped: bool,
    },
    /// It ended, but it was not our child, so its status is not ours to read.
    Unknown,
}

impl Exit {
    /// The shell's convention: the code itself, or 128 + the signal number.
    pub fn shell_code(&self) -> Option<i32> {
        match *self {
            Exit::Code(code) => Some(code),
            Exit::Signal { signal, .. } => Some(128 + signal),
            Exit::Unknown => None,
        }
    }

    fn from_waitid(status: &WaitIdStatus) -> Exit {
        if let Some(signal) = status.terminating_signal() {
            Exit::Signal {
                signal,
                core_dumped: status.dumped(),
            }
        } else {
            Exit::Code(status.exit_status().unwrap_or(0))
        }
    }
}

/// Why a signal was not sent.
#[derive(Debug)]
pub enum SignalError {
    /// The process was already reaped: its pid (and pgid) may belong to someone else now.
    Reaped,
    /// The process has exited (the kernel said `ESRCH`).
    Exited,
    /// A group signal was asked for a process that is not our child: nothing pins its pgid.
    GroupNotPinned,
    /// The identity check found another process (or none) on the pid.
    Mismatch,
    /// The identity could not be verified, so nothing was sent.
    Unverifiable,
    /// The kernel refused the signal.
    Os(io::Error),
}

impl fmt::Display for SignalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignalError::Reaped => f.write_str("process already reaped"),
            SignalError::Exited => f.write_str("process has exited"),
            SignalError::GroupNotPinned => {
                f.write_str("process group not pinned: leader is not our unreaped child")
            }
            SignalError::Mismatch => f.write_str("identity mismatch: another process has the pid"),
            SignalError::Unverifiable => f.write_str("identity unverifiable: not signalled"),
            SignalError::Os(e) => write!(f, "signal failed: {e}"),
        }
    }
}

impl std::error::Error for SignalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SignalError::Os(e) => Some(e),
            _ => None,
        }
    }
}

/// A started or adopted process. See the [module docs](self).
#[derive(Debug)]
pub struct Process {
    pid: Pid,
    pidfd: Option<OwnedFd>,
    token: Option<String>,
    child: bool,
    reaped: Option<Exit>,
}

impl Process {
    /// A child we just forked (and nobody has waited for).
    pub(crate) fn child(pid: Pid, pidfd: Option<OwnedFd>, token: Option<String>) -> Process {
        Process {
            pid,
            pidfd,
            token,
            child: true,
            reaped: None,
        }
    }

    /// A process handed over across an upgrade of the daemon's program: the same
    /// process, with the pidfd the previous program held (so still verified) and whether
    /// it is our child (the pid did not change: a child stays ours).
    pub(crate) fn resumed(
        pid: Pid,
        pidfd: Option<OwnedFd>,
        token: Option<String>,
        child: bool,
    ) -> Process {
        Process {
            pid,
            pidfd,
            token,
            child,
            reaped: None,
        }
    }

    /// A process that is not our child, verified by [`identity::adopt`].
    pub(crate) fn adopted(pid: Pid, pidfd: Option<OwnedFd>, token: String) -> Process {
        Process {
            pid,
            pidfd,
            token: Some(token),
            child: false,
            reaped: None,
        }
    }

    /// A process a previous daemon started that is known gone (ended while no daemon
    /// ran, or before that daemon died): a handle that is never signalled, never asked
    /// and never reaped — it stands for the leader of a generation whose tree, in its
    /// cgroup, is still being emptied. `None` for a pid that cannot be one.
    pub(crate) fn gone(pid: i32) -> Option<Process> {
        Some(Process {
            pid: Pid::from_raw(pid)?,
            pidfd: None,
            token: None,
            child: false,
            reaped: Some(Exit::Unknown),
        })
    }

    /// The pid (also the process group and session id of the children we spawn).
    pub fn pid(&self) -> i32 {
        self.pid.as_raw_pid()
    }

    /// The pidfd to register with the event loop (readable once the process exited), if
    /// this handle is in pidfd mode.
    pub fn pidfd(&self) -> Option<BorrowedFd<'_>> {
        self.pidfd.as_ref().map(|fd| fd.as_fd())
    }

    /// The identity token recorded when the handle was made, if it could be read.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// Whether this is our child (its exit status is ours to read and reap).
    pub fn is_child(&self) -> bool {
        self.child
    }

    /// Whether [`Process::reap`] has reaped it.
    pub fn is_reaped(&self) -> bool {
        self.reaped.is_some()
    }

    /// Whether its end has begun: the kernel marks a task `PF_EXITING` (flags, field 9 of
    /// `/proc/<pid>/stat`) as its exit starts, before it closes its descriptors, and it
    /// stays marked as a zombie — so a descriptor it closed as it ended is told from one
    /// it closed while it runs, even before its exit can be waited for. One whose record
    /// cannot be read counts as not ending. A read of `/proc`: only for such a question.
    pub fn is_exiting(&self) -> bool {
        const PF_EXITING: u64 = 0x4;
        if self.reaped.is_some() {
            return true;
        }
        let Ok(stat) = identity::read_proc_file(&format!("/proc/{}/stat", self.pid())) else {
            return false;
        };
        identity::stat_field(&stat, 9).is_some_and(|flags| flags & PF_EXITING != 0)
    }

    /// Whether the process has exited, without reaping it:
    /// `waitid(P_PIDFD or P_PID, WEXITED|WNOHANG|WNOWAIT)` for a child. For an adopted
    /// process the pidfd's readability tells, and the status is [`Exit::Unknown`].
    /// Without a pidfd an adopted process's identity is read again
    /// ([`identity::verify_running`]): it has ended when another process (or none) has its
    /// pid, or when it is a zombie; an identity that cannot be read says nothing, and it
    /// counts as running.
    pub fn exit_status_nowait(&self) -> io::Result<Option<Exit>> {
        if let Some(exit) = self.reaped {
            return Ok(Some(exit));
        }
        if self.child {
            return self.wait_child(WaitIdOptions::NOWAIT);
        }
        match &self.pidfd {
            Some(fd) => Ok(pidfd_exited(fd.as_fd())?.then_some(Exit::Unknown)),
            None => match identity::verify_running(self.pid(), self.token()) {
                Verdict::Match | Verdict::Unverifiable => Ok(None),
                Verdict::Mismatch => Ok(Some(Exit::Unknown)),
            },
        }
    }

    /// The exit status of an adopted process (not our child) that has exited, as the kernel
    /// keeps it for pidfds once its real parent reaped it ([`pidfd_ext::exit_info`], Linux
    /// 6.15+). [`ExitInfo::Unsupported`] without a pidfd, and for our own children (whose
    /// status [`Process::exit_status_nowait`] reads).
    pub fn published_exit(&self) -> io::Result<ExitInfo> {
        match (&self.pidfd, self.child) {
            (Some(fd), false) => pidfd_ext::exit_info(fd.as_fd()).map_err(io::Error::from),
            _ => Ok(ExitInfo::Unsupported),
        }
    }

    /// Reaps the process if it has exited, exactly once: later calls return the same status
    /// without a system call. `Ok(None)` while it runs. An adopted process is "reaped" (for
    /// this handle) once it is seen to have exited; its real parent collects the status.
    pub fn reap(&mut self) -> io::Result<Option<Exit>> {
        if let Some(exit) = self.reaped {
            return Ok(Some(exit));
        }
        let exit = if self.child {
            self.wait_child(WaitIdOptions::empty())?
        } else {
            self.exit_status_nowait()?
        };
        if exit.is_some() {
            self.reaped = exit;
            if self.child {
                crate::sys::reaped::note(self.pid.as_raw_pid());
            }
        }
        Ok(exit)
    }

    fn wait_child(&self, extra: WaitIdOptions) -> io::Result<Option<Exit>> {
        let options = WaitIdOptions::EXITED | WaitIdOptions::NOHANG | extra;
        loop {
            let id = match &self.pidfd {
                Some(fd) => WaitId::PidFd(fd.as_fd()),
                None => WaitId::Pid(self.pid),
            };
            return match waitid(id, options) {
                Ok(status) => Ok(status.as_ref().map(Exit::from_waitid)),
                Err(Errno::INTR) => continue,
                Err(e) => Err(e.into()),
            };
        }
    }

    /// Sends `sig` to the process.
    ///
    /// pidfd mode: `pidfd_send_signal`. Fallback: only after the identity re-read from the
    /// system compares [`Verdict::Match`] with the recorded token. Never after reaping.
    pub fn signal(&self, sig: Signal) -> Result<(), SignalError> {
        if self.reaped.is_some() {
            return Err(SignalError::Reaped);
        }
        match &self.pidfd {
            Some(fd) => match pidfd_send_signal(fd, sig) {
                Ok(()) => Ok(()),
                Err(Errno::SRCH) => Err(SignalError::Exited),
                Err(e) => Err(SignalError::Os(e.into())),
            },
            None => {
                self.verify_identity()?;
                kill_process(self.pid, sig).map_err(map_kill_error)
            }
        }
    }

    /// Sends `sig` to the process group the process leads (`kill(-pid, sig)`), only while
    /// the process is our unreaped child (so the pgid cannot have been recycled), and in
    /// fallback mode only after an identity match.
    pub fn signal_group(&self, sig: Signal) -> Result<(), SignalError> {
        if self.reaped.is_some() {
            return Err(SignalError::Reaped);
        }
        if !self.child {
            return Err(SignalError::GroupNotPinned);
        }
        if self.pidfd.is_none() {
            self.verify_identity()?;
        }
        kill_process_group(self.pid, sig).map_err(map_kill_error)
    }

    /// Sends `sig` to the process group an adopted leader (not our child) leads, while the
    /// leader runs: through its pidfd with `PIDFD_SIGNAL_PROCESS_GROUP` (Linux 6.9+), else
    /// (`EINVAL`) member by member ([`Process::signal_group_members`]). pidfd mode only.
    ///
    /// Why this cannot reach a stranger: the pidfd holds the leader's `struct pid`, and the
    /// kernel signals the processes whose group *is* that `struct pid`, never a group that
    /// later reuses the number (see [`pidfd_ext::signal_process_group`]). The leader is a
    /// session leader (we spawned it with `setsid`; adoption verified it is that process),
    /// so its group is its own pid and cannot change. It is used only while the leader has
    /// not exited (its pidfd is not readable), as for our own children: an exit racing the
    /// call still leaves the `struct pid` naming the leader's old group and nothing else.
    pub fn signal_adopted_group(&self, sig: Signal) -> Result<(), SignalError> {
        if self.reaped.is_some() {
            return Err(SignalError::Reaped);
        }
        let Some(leader) = &self.pidfd else {
            return Err(SignalError::GroupNotPinned);
        };
        if pidfd_exited(leader.as_fd()).map_err(SignalError::Os)? {
            return Err(SignalError::Exited);
        }
        match pidfd_ext::signal_process_group(leader.as_fd(), sig) {
            Ok(()) => Ok(()),
            Err(Errno::INVAL) => self.signal_group_members(sig).map(drop),
            Err(Errno::SRCH) => Err(SignalError::Exited),
            Err(e) => Err(SignalError::Os(e.into())),
        }
    }

    /// Sends `sig` to every live member of the process group the process leads, one by one
    /// through pidfds, and returns how many were signalled. For adopted leaders, whose
    /// group [`Process::signal_group`] cannot pin, on kernels without
    /// [`Process::signal_adopted_group`]'s one call; pidfd mode only.
    ///
    /// For each member found in `/proc`: open its pidfd, re-read its process group, and
    /// signal it only if the group is still ours and the pidfd still refers to a running
    /// process (then the re-read was of that process). The group is ours while the leader
    /// is alive, which is checked after the scan: a session leader cannot change its group,
    /// and a pgid cannot be reused while its leader lives.
    pub fn signal_group_members(&self, sig: Signal) -> Result<usize, SignalError> {
        if self.reaped.is_some() {
            return Err(SignalError::Reaped);
        }
        let Some(leader) = &self.pidfd else {
            return Err(SignalError::GroupNotPinned);
        };
        let pgid = self.pid();
        let members = procscan::group_members(pgid).map_err(SignalError::Os)?;
        let mut verified = Vec::new();
        for pid in members {
            let Some(raw) = Pid::from_raw(pid) else {
                continue;
            };
            let fd = if pid == pgid {
                None // the leader: signalled through our own pidfd below
            } else {
                match rustix::process::pidfd_open(raw, rustix::process::PidfdFlags::empty()) {
                    Ok(fd) => Some(fd),
                    Err(_) => continue, // exited meanwhile
                }
            };
            let stat = identity::read_proc_file(&format!("/proc/{pid}/stat"));
            let in_group = stat
                .ok()
                .and_then(|s| identity::stat_field(&s, 5))
                .is_some_and(|g| g == pgid as u64);
            let alive = match &fd {
                Some(fd) => !pidfd_exited(fd.as_fd()).map_err(SignalError::Os)?,
                None => true,
            };
            if in_group && alive {
                verified.push(fd);
            }
        }
        // The leader alive now means the pgid read above named its group.
        if pidfd_exited(leader.as_fd()).map_err(SignalError::Os)? {
            return Err(SignalError::Exited);
        }
        let mut sent = 0;
        for fd in verified {
            let result = match &fd {
                Some(fd) => pidfd_send_signal(fd, sig),
                None => pidfd_send_signal(leader, sig),
            };
            match result {
                Ok(()) => sent += 1,
                Err(Errno::SRCH) => {}
                Err(e) => return Err(SignalError::Os(e.into())),
            }
        }
        Ok(sent)
    }

    fn verify_identity(&self) -> Result<(), SignalError> {
        match identity::verify(self.pid(), self.token(), None) {
            Verdict::Match => Ok(()),
            Verdict::Mismatch => Err(SignalError::Mismatch),
            Verdict::Unverifiable => Err(SignalError::Unverifiable),
        }
    }

    /// Whether no live process other than the leader itself remains in its process group,
    /// judged by two consecutive `/proc` scans (zombies do not count: they hold nothing and
    /// cannot be signalled). A member that called `setsid` has left the group and is not
    /// seen here; [`procscan::holders_of`] finds such escapees through the pipes they hold.
    pub fn is_group_empty(&self) -> io::Result<bool> {
        // The leader is an unreaped zombie here, so "empty" means no live member at all.
        Ok(!procscan::empty_groups(&[self.pid()])?.is_empty())
    }
}

fn map_kill_error(e: Errno) -> SignalError {
    match e {
        Errno::SRCH => SignalError::Exited,
        e => SignalError::Os(e.into()),
    }
}

/// `poll(pidfd, POLLIN, 0)`—Whether the process behind a pidfd has exited.
///
/// # References
///  - [Linux `pidfd_open(2)`](https://man7.org/linux/man-pages/man2/pidfd_open.2.html)
pub fn pidfd_exited(pidfd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut fds = [PollFd::new(&pidfd, PollFlags::IN)];
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    loop {
        return match poll(&mut fds, Some(&zero)) {
            Ok(0) => Ok(false),
            Ok(_) => Ok(!fds[0].revents().is_empty()),
            Err(Errno::INTR) => continue,
            Err(e) => Err(e.into()),
        };
    }
}
