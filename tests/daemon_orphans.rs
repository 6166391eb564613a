//! Orphans reparented to the daemon (as a subreaper here; as PID 1 in a container the
//! kernel does the same) are reaped by pid, and never confused with tracked children.

mod util;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use genward::testkit::proc;
use rustix::process::{pidfd_open, pidfd_send_signal, Pid, PidfdFlags, Signal};
use serde_json::json;
use util::daemon::{output_of, Daemon, PATIENCE};
use util::sys::readable;

/// The session's shell starts a middle shell, which starts a long sleep in the background,
/// prints its pid and waits for a line of input; when it gets one it exits, orphaning the
/// sleep, and the session's shell prints `middle-gone`.
const ORPHANING: &str =
    "sh -c 'sleep 1000 & echo orphan=$!; read _'; echo middle-gone; exec sleep 1000";

/// Runs [`ORPHANING`] in `d`, checks that the orphan is adopted by the daemon and, once it
/// has exited, reaped, while the tracked child is left alone. `to_ours` turns a pid the
/// daemon reports into one this test can look up.
fn orphan_is_adopted_and_reaped(d: &Daemon, to_ours: impl Fn(u32) -> u32) {
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "o", "on_exit": "leave",
        "argv": ["sh", "-c", ORPHANING]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.output_until(gen, "\n");
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).to_string();
    let reported: u32 = text
        .trim()
        .strip_prefix("orphan=")
        .unwrap()
        .parse()
        .unwrap();
    let orphan = to_ours(reported);
    // Still its middle shell's child (which waits for input) and unable to end by itself,
    // so this pid is the orphan's for as long as this handle is open.
    let pidfd = pidfd_open(Pid::from_raw(orphan as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the orphan-to-be");

    // The middle shell exits; the kernel reparents the orphan as part of that exit, before
    // the session's shell can reap the middle one and go on to print `middle-gone`.
    c.ok(json!({"op": "write", "session": "o", "data": "go\n"}));
    c.output_until(gen, "middle-gone");
    let stat = proc::stat(orphan).expect("the orphan runs");
    assert_eq!(
        stat.ppid, d.pid,
        "orphan {orphan} not adopted by the daemon"
    );

    // It exits; the daemon reaps it. Reaping shows from outside only as the /proc entry
    // going away, which has no event to wait on: bounded polling, after the exit itself
    // was awaited on the pidfd.
    pidfd_send_signal(&pidfd, Signal::KILL).unwrap();
    assert!(
        readable(pidfd.as_fd(), Instant::now() + PATIENCE),
        "orphan {orphan} survived SIGKILL"
    );
    let deadline = Instant::now() + PATIENCE;
    while let Some(stat) = proc::stat(orphan) {
        assert!(
            Instant::now() < deadline,
            "orphan {orphan} left as {}",
            stat.state
        );
        std::thread::sleep(Duration::from_millis(10));
    }

    // The tracked child was never touched by the orphan reaper.
    let got = c.ok(json!({"op": "get", "session": "o"}));
    assert_eq!(got["session"]["state"], "running", "{got}");
    c.ok(json!({"op": "stop", "session": "o"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["cause"], "stopped");
}

#[test]
fn a_subreaper_daemon_reaps_orphaned_grandchildren() {
    let d = Daemon::start("orphans", &["--subreaper"]);
    orphan_is_adopted_and_reaped(&d, |pid| pid);
}

/// `unshare` as the daemon's wrapper: it runs as PID 1 of a new PID namespace (its own
/// session led from outside it).
const AS_PID_1: [&str; 5] = [
    "unshare",
    "--pid",
    "--fork",
    "--mount-proc",
    "--kill-child=TERM",
];

/// A daemon as PID 1 of a new PID namespace, or `None` (with a visible skip line for
/// `test`) without root or `unshare`.
fn daemon_as_pid_1(test: &str, extra: &[&str]) -> Option<Daemon> {
    let root = rustix::process::geteuid().is_root();
    let unshare = std::process::Command::new(AS_PID_1[0])
        .args(&AS_PID_1[1..])
        .arg("true")
        .status()
        .is_ok_and(|s| s.success());
    if !root || !unshare {
        println!("SKIP {test}: needs root and unshare");
        eprintln!("SKIP {test}: needs root and unshare");
        return None;
    }
    Some(Daemon::start_wrapped("pid1", &AS_PID_1, extra, None))
}

#[test]
fn as_pid_1_of_a_namespace_the_daemon_reaps_orphans() {
    let Some(d) = daemon_as_pid_1("as_pid_1_of_a_namespace_the_daemon_reaps_orphans", &[]) else {
        return;
    };
    // The daemon reports pids of its own namespace.
    let daemon = d.pid;
    orphan_is_adopted_and_reaped(&d, |pid| {
        proc::pid_in_namespace_of(daemon, pid).expect("the orphan in our namespace")
    });
}

/// As PID 1 of a namespace it entered with `unshare --fork`, the daemon's own session is
/// led from outside the namespace, so `getsid` says 0. Session containment still walks and
/// kills a generation's whole session, and the daemon answers afterwards.
#[test]
fn as_pid_1_whose_session_is_led_from_outside_a_whole_session_is_killed() {
    let test = "as_pid_1_whose_session_is_led_from_outside_a_whole_session_is_killed";
    let Some(d) = daemon_as_pid_1(test, &["--containment", "session"]) else {
        return;
    };
    let daemon = d.pid;
    let mut c = d.client();
    c.ok(json!({"op": "subscribe", "all": true}));
    let gen = c.ok(json!({"op": "spawn", "session": "s",
        "argv": ["sh", "-c", "sleep 1000 & echo bg=$!; exec sleep 1000"]}))["gen"]
        .as_u64()
        .unwrap();
    let seen = c.output_until(gen, "\n");
    let text = String::from_utf8_lossy(&output_of(&seen, gen)).to_string();
    let reported: u32 = text.trim().strip_prefix("bg=").unwrap().parse().unwrap();
    let bg = proc::pid_in_namespace_of(daemon, reported).expect("the job in our namespace");
    let pidfd = pidfd_open(Pid::from_raw(bg as i32).unwrap(), PidfdFlags::empty())
        .expect("pidfd_open the background job");

    c.ok(json!({"op": "stop", "session": "s"}));
    let seen = c.events_until(|m| m.is("exited", gen));
    assert_eq!(seen.last().unwrap().json()["cause"], "stopped");
    assert!(
        readable(pidfd.as_fd(), Instant::now() + PATIENCE),
        "the background job {bg} outlived its generation"
    );
    // The daemon is still there to answer.
    c.ok(json!({"op": "list"}));
}
