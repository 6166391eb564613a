//! The process handle in both modes: exit seen without reaping, reaped exactly once,
//! signals through the pidfd or after an identity match, adoption of a non-child.

mod util;

use std::os::fd::AsFd;
use std::time::Instant;

use genward::sys::identity::{adopt, Adoption};
use genward::sys::process::{Exit, ReaperMode, SignalError};
use genward::sys::sigchld::SigchldPipe;
use genward::sys::spawn::spawn;
use genward::testkit::proc;
use rustix::process::Signal;
use util::sys::*;

const TERMINATED: Exit = by_signal(libc::SIGTERM);

#[test]
fn pidfd_mode_is_used_where_available() {
    let mut child = spawn(&request(&["true"])).unwrap();
    assert!(child.process.pidfd().is_some(), "this kernel has pidfds");
    assert!(child.process.is_child());
    wait_reap(&mut child.process);
}

#[test]
fn exit_is_observed_without_reaping_and_reaped_exactly_once() {
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        let mut child = spawn(&request_with(&["sh", "-c", "exit 5"], mode)).unwrap();
        let pid = child.process.pid();
        assert_eq!(wait_exit(&child.process), Exit::Code(5));
        // WNOWAIT: still a zombie, still pinning its pid and pgid.
        assert_eq!(
            child.process.exit_status_nowait().unwrap(),
            Some(Exit::Code(5))
        );
        assert!(proc::stat(pid as u32).unwrap().is_zombie(), "{mode:?}");
        assert!(!child.process.is_reaped());
        assert_eq!(child.process.reap().unwrap(), Some(Exit::Code(5)));
        assert!(child.process.is_reaped());
        // Once only: later calls return the recorded status and wait for nothing.
        assert_eq!(child.process.reap().unwrap(), Some(Exit::Code(5)));
        assert_eq!(
            child.process.exit_status_nowait().unwrap(),
            Some(Exit::Code(5))
        );
    }
}

#[test]
fn running_process_reports_no_exit() {
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        let mut child = spawn(&request_with(&["cat"], mode)).unwrap();
        assert_eq!(child.process.exit_status_nowait().unwrap(), None);
        assert_eq!(child.process.reap().unwrap(), None);
        drop(child.stdin.take());
        assert_eq!(wait_reap(&mut child.process), Exit::Code(0));
    }
}

#[test]
fn signals_reach_the_child_in_both_modes() {
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        let mut child = spawn(&request_with(&["sleep", "1000"], mode)).unwrap();
        assert_eq!(child.process.pidfd().is_some(), mode == ReaperMode::Auto);
        child.process.signal(Signal::TERM).unwrap();
        assert_eq!(wait_reap(&mut child.process), TERMINATED, "{mode:?}");
        assert!(matches!(
            child.process.signal(Signal::TERM),
            Err(SignalError::Reaped)
        ));
    }
}

#[test]
fn fallback_wakes_on_sigchld() {
    let sigchld = SigchldPipe::new().unwrap();
    let mut child = spawn(&request_with(
        &["sh", "-c", "read x; exit 4"],
        ReaperMode::Fallback,
    ))
    .unwrap();
    assert!(child.process.pidfd().is_none());
    sigchld.drain().unwrap();
    write_all(child.stdin.as_ref().unwrap().as_fd(), b"go\n");
    // Other tests' children also raise SIGCHLD: every wakeup is only a hint to ask again.
    let deadline = Instant::now() + TIMEOUT;
    let exit = loop {
        assert!(readable(sigchld.fd(), deadline), "no SIGCHLD");
        assert!(sigchld.drain().unwrap());
        if let Some(exit) = child.process.exit_status_nowait().unwrap() {
            break exit;
        }
    };
    assert_eq!(exit, Exit::Code(4));
    assert_eq!(child.process.reap().unwrap(), Some(Exit::Code(4)));
}

#[test]
fn adopting_a_live_process_by_its_token() {
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        let mut child = spawn(&request_with(&["sleep", "1000"], mode)).unwrap();
        let token = child.process.token().unwrap().to_owned();
        let Adoption::Adopted(adopted) = adopt(child.process.pid(), &token, mode) else {
            panic!("{mode:?}: own child not adopted");
        };
        assert_eq!(adopted.pid(), child.process.pid());
        assert_eq!(adopted.pidfd().is_some(), mode == ReaperMode::Auto);
        assert!(!adopted.is_child());
        // Not our child: nothing pins its process group.
        assert!(matches!(
            adopted.signal_group(Signal::TERM),
            Err(SignalError::GroupNotPinned)
        ));
        assert_eq!(adopted.exit_status_nowait().unwrap(), None);
        adopted.signal(Signal::TERM).unwrap();
        assert_eq!(wait_exit(&child.process), TERMINATED);
        if mode == ReaperMode::Auto {
            assert_eq!(adopted.exit_status_nowait().unwrap(), Some(Exit::Unknown));
        }
        assert_eq!(child.process.reap().unwrap(), Some(TERMINATED));
    }
}

#[test]
fn unverifiable_identity_is_never_signalled() {
    let mut child = spawn(&request(&["sleep", "1000"])).unwrap();
    let pid = child.process.pid();
    for token in ["", "garbage", "linux1:x:y:z", "linux1:abc:0", "v9:whatever"] {
        for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
            assert!(
                matches!(adopt(pid, token, mode), Adoption::Unverifiable(_)),
                "{token:?} {mode:?}"
            );
        }
    }
    // Untouched: it dies of the SIGKILL we send now, not of anything sent before.
    assert_eq!(child.process.exit_status_nowait().unwrap(), None);
    child.process.signal(Signal::KILL).unwrap();
    assert_eq!(wait_reap(&mut child.process), by_signal(libc::SIGKILL));
}

#[test]
fn adopting_a_free_pid_is_mismatch() {
    let mut child = spawn(&request(&["true"])).unwrap();
    let token = child.process.token().unwrap().to_owned();
    wait_reap(&mut child.process);
    // The pid is free now (or taken by a newer process): either way not ours.
    for mode in [ReaperMode::Auto, ReaperMode::Fallback] {
        assert!(matches!(
            adopt(child.process.pid(), &token, mode),
            Adoption::Mismatch
        ));
    }
}
