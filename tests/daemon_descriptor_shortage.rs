//! A descriptor shortage never loses a generation's tree: with the daemon's soft
//! `RLIMIT_NOFILE` lowered (`prlimit`) below what it holds, a stop still kills every
//! process of the tree (through the descriptor held back for `cgroup.kill`), and a tree
//! signal that could not be sent at all is tried again until descriptors are back — the
//! generation is released only once its tree is gone, and nothing runs on unsupervised.

mod util;

use std::os::fd::{AsFd, OwnedFd};

use genward::testkit::proc;
use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};
use serde_json::json;
use util::daemon::{Client, Daemon, PATIENCE};

/// A leader that keeps a child besides itself, and says so once it has.
const TREE: &str = "sleep 1000 & echo started; wait";

/// The soft descriptor limit of `pid` set to `soft` (its hard limit kept).
fn set_soft_nofile(pid: u32, soft: u64) {
    let mut old = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a null new limit asks for the current one only, written to `old`, which
    // outlives the call.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            std::ptr::null(),
            &mut old,
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
    let new = libc::rlimit {
        rlim_cur: soft.min(old.rlim_max),
        rlim_max: old.rlim_max,
    };
    // SAFETY: `new` is a valid rlimit that outlives the call; a null old limit asks for
    // nothing back.
    let rc = unsafe {
        libc::prlimit(
            pid as libc::pid_t,
            libc::RLIMIT_NOFILE,
            &new,
            std::ptr::null_mut(),
        )
    };
    assert_eq!(rc, 0, "prlimit: {}", std::io::Error::last_os_error());
}

/// The lowest descriptor number `pid` has free: with its limit there, every descriptor it
/// opens is refused (`EMFILE`) but for one it frees first.
fn lowest_free_fd(pid: u32) -> u64 {
    let open: std::collections::HashSet<u64> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    (0..).find(|n| !open.contains(n)).unwrap()
}

/// Whether the process behind `pidfd` ends within [`PATIENCE`] (awaited, not polled).
fn ends(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd, PollFlags::IN)];
    let timeout = Timespec {
        tv_sec: PATIENCE.as_secs() as i64,
        tv_nsec: 0,
    };
    matches!(poll(&mut fds, Some(&timeout)), Ok(1))
}

/// Starts [`TREE`] as session `name`; returns its generation and a pidfd for its `sleep`.
fn start_tree(c: &mut Client, name: &str) -> (u64, OwnedFd, u32) {
    let gen = c.ok(json!({"op": "spawn", "session": name, "kill_grace": "60s",
        "argv": ["sh", "-c", TREE]}))["gen"]
        .as_u64()
        .unwrap();
    let leader = c.spawned_pid(gen);
    c.output_until(gen, "started");
    let sleeper = proc::children(leader)[0];
    let pidfd = pidfd_open(Pid::from_raw(sleeper as i32).unwrap(), PidfdFlags::empty())
        .expect("a pidfd for the leader's child");
    (gen, pidfd, sleeper)
}

/// Kills what a failed run left (the test process is root here).
fn kill_left(pidfd: &OwnedFd) {
    let _ = rustix::process::pidfd_send_signal(pidfd.as_fd(), rustix::process::Signal::KILL);
}

/// A `stop` while the limit is below what the daemon holds: the tree's `SIGTERM` cannot
/// be sent (listing the cgroup takes descriptors), but its `SIGKILL` goes through
/// `cgroup.kill` with the descriptor held back for it, at once, the limit still low.
#[test]
fn a_stop_below_the_descriptor_limit_kills_the_whole_tree() {
    const TEST: &str = "a_stop_below_the_descriptor_limit_kills_the_whole_tree";
    let d = Daemon::start("fd-short-stop", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    c.ok(json!({"op": "subscribe", "all": true}));
    let (gen, sleeper, pid) = start_tree(&mut c, "tree");
    let lowered = lowest_free_fd(d.pid);
    set_soft_nofile(d.pid, lowered);
    c.ok(json!({"op": "stop", "session": "tree", "grace": 0}));
    c.events_until(|m| m.is("exited", gen));
    let killed = ends(&sleeper);
    set_soft_nofile(d.pid, 1 << 16);
    if !killed {
        kill_left(&sleeper);
    }
    assert!(
        killed,
        "the leader's child (pid {pid}) outlived the stop under a limit of {lowered}"
    );
    c.released("tree");
}

/// A tree's `SIGKILL` that cannot be sent at all (the limit below every descriptor the
/// daemon holds, the one held back included) is sent once descriptors are back: the
/// tree ends, its generation with it, and is released — not left running, nor listed
/// `unkillable` for good.
#[test]
fn a_tree_kill_refused_for_want_of_descriptors_is_sent_once_they_are_back() {
    const TEST: &str = "a_tree_kill_refused_for_want_of_descriptors_is_sent_once_they_are_back";
    let d = Daemon::start("fd-short-retry", &[]);
    let mut c = d.client();
    if util::daemon::without_cgroups(&mut c, TEST) {
        return;
    }
    c.ok(json!({"op": "subscribe", "all": true}));
    let (gen, sleeper, pid) = start_tree(&mut c, "tree");
    // Standard input, output and error stay: nothing can be opened.
    set_soft_nofile(d.pid, 3);
    // Answered once the signal was tried (at the end of the turn that took it).
    c.ok(json!({"op": "signal", "session": "tree", "signal": "KILL", "scope": "tree"}));
    set_soft_nofile(d.pid, 1 << 16);
    let killed = ends(&sleeper);
    if !killed {
        kill_left(&sleeper);
    }
    assert!(killed, "the leader's child (pid {pid}) was never killed");
    let exited = c.events_until(|m| m.is("exited", gen));
    let end = exited.last().unwrap().json().clone();
    assert_eq!(end["signal"], json!("SIGKILL"), "{end}");
    c.released("tree");
}
